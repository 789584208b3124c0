"""Ranking quality (average precision) and the ranking distances of Bayesian reranking."""

import numpy as np

from .._validation import (
    check_group_labels,
    check_int,
    check_labels,
    check_option,
    check_real,
    check_vector,
)

DENOMINATORS = ("relevant", "truncated")


def check_ap_options(n, denominator):
    """The cut-off depth (None or an int >= 1) and AP's denominator, checked."""
    check_option(denominator, "denominator", DENOMINATORS)
    return None if n is None else check_int(n, "n", low=1)



def average_precision(scores, relevance, n=None, *, denominator="relevant"):
    """Average precision of the list ordered by decreasing score.

    ``AP@n = (1 / R_n) sum_{k <= n} rel_k * precision@k``. Tied scores are ordered
    pessimistically (irrelevant items first), so ties never flatter a ranking.

    Parameters
    ----------
    scores : array-like of shape (n_items,)
        Finite scores, higher is better.
    relevance : array-like of shape (n_items,)
        True (or 1) for the relevant items, False (or 0) for the others.
    n : int, default=None
        Cut-off depth, ``n >= 1`` (a depth beyond the list evaluates the whole
        list); None evaluates the whole list.
    denominator : {"relevant", "truncated"}, default="relevant"
        ``R_n``: ``"relevant"`` divides by all ``R`` relevant items in the list (so
        relevant items below the cut-off count as misses, as in TRECVID's
        inferred AP at depth n); ``"truncated"`` by ``min(R, n)``, so a perfect
        top n scores 1. The two agree when ``R <= n``.

    Returns
    -------
    ap : float
        In [0, 1]; 0 when the list holds no relevant item.

    Raises
    ------
    ValueError
        On non-finite scores (naming the position), labels other than 0/1, lengths
        that differ, an empty list, ``n < 1`` or an unknown ``denominator``.
    TypeError
        When ``n`` is not an integer (bools and floats such as 2.0 included).

    Examples
    --------
    >>> from skqbnorm.metrics import average_precision
    >>> average_precision([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0])  # (1/1 + 2/3) / 2
    0.8333...
    >>> average_precision([0.9, 0.8, 0.7, 0.6], [0, 1, 1, 1], n=2)  # (1/2) / 3
    0.1666...
    >>> average_precision([0.9, 0.8, 0.7, 0.6], [0, 1, 1, 1], n=2, denominator="truncated")
    0.25
    """
    depth = check_ap_options(n, denominator)
    scores, relevance = _scores_and_labels(scores, relevance)
    query = np.zeros(len(scores), dtype=np.intp)
    return float(_average_precisions(scores, relevance, query, 1, depth, denominator)[0])


def mean_average_precision(scores, relevance, groups, n=None, *, denominator="relevant"):
    """Mean over queries of :func:`average_precision`, one query per group.

    Parameters
    ----------
    scores, relevance : array-like of shape (n_items,)
        Scores and relevance of every item of every query's list.
    groups : array-like of shape (n_items,)
        The query each item belongs to (any sortable labels without NaN).
    n : int, default=None
        As in :func:`average_precision`.
    denominator : {"relevant", "truncated"}, default="relevant"
        As in :func:`average_precision`.

    Returns
    -------
    map : float
        The unweighted mean over the queries; a query without relevant items
        counts as 0.

    Examples
    --------
    >>> from skqbnorm.metrics import mean_average_precision
    >>> mean_average_precision([3, 2, 1, 3, 2, 1], [1, 0, 0, 0, 0, 1], [0, 0, 0, 1, 1, 1])
    0.6666...
    """
    return float(np.mean(average_precisions(scores, relevance, groups, n, denominator=denominator)))


def _scores_and_labels(scores, relevance):
    scores = check_vector(scores, "scores")
    return scores, check_labels(relevance, "relevance", len(scores))


def average_precisions(scores, relevance, groups, n=None, *, denominator="relevant"):
    """Average precision of every query's list: the terms of :func:`mean_average_precision`.

    For a paired comparison of two rankings of the same lists (e.g. before and
    after reranking), with :func:`~skqbnorm.metrics.paired_mean_change`.

    Parameters
    ----------
    scores, relevance : array-like of shape (n_items,)
        Scores and relevance of every item of every query's list.
    groups : array-like of shape (n_items,)
        The query each item belongs to (any sortable labels of one kind, without NaN).
    n : int, default=None
        As in :func:`average_precision`.
    denominator : {"relevant", "truncated"}, default="relevant"
        As in :func:`average_precision`.

    Returns
    -------
    aps : ndarray of shape (n_queries,)
        One AP per query, in the order of the sorted distinct labels of ``groups``.

    Examples
    --------
    >>> from skqbnorm.metrics import average_precisions
    >>> average_precisions([3, 2, 1, 3, 2, 1], [1, 0, 0, 0, 0, 1], ["b", "b", "b", "a", "a", "a"])
    array([0.3333..., 1.        ])
    """
    depth = check_ap_options(n, denominator)
    scores, relevance = _scores_and_labels(scores, relevance)
    labels, query = _query_numbers(groups, len(scores))
    return _average_precisions(scores, relevance, query, len(labels), depth, denominator)


def _query_numbers(groups, n_items):
    if np.shape(groups) != (n_items,):
        raise ValueError(
            f"inconsistent numbers of samples: groups has shape {np.shape(groups)}, "
            f"scores has shape ({n_items},)."
        )
    groups = check_group_labels(groups)
    try:
        labels, query = np.unique(groups, return_inverse=True)
    except TypeError as error:
        raise TypeError(f"groups must hold sortable labels of one kind: {error}") from None
    return labels, query


def _average_precisions(scores, relevance, query, n_queries, depth, denominator):
    """AP of every query's list at once; ``query`` numbers each item's query from 0."""
    order = np.lexsort((relevance, -scores, query))  # by query, score, irrelevant first
    query, hits = query[order], relevance[order]
    sizes = np.bincount(query, minlength=n_queries)
    starts = np.cumsum(sizes) - sizes
    position = np.arange(len(order)) - starts[query]  # 0-based, within the query's list
    found = np.cumsum(hits)
    found_in_list = found - (found - hits)[starts][query]
    counted = hits if depth is None else hits & (position < depth)
    precisions = found_in_list[counted] / (position[counted] + 1)
    sums = np.bincount(query[counted], weights=precisions, minlength=n_queries)
    n_relevant = np.bincount(query, weights=hits, minlength=n_queries)
    if denominator == "truncated" and depth is not None:
        n_relevant = np.minimum(n_relevant, depth)
    return np.divide(sums, n_relevant, out=np.zeros(n_queries), where=n_relevant > 0)


def _paired(scores, initial_scores):
    scores = check_vector(scores, "scores")
    initial = check_vector(initial_scores, "initial_scores")
    if scores.shape != initial.shape:
        raise ValueError(
            f"scores and initial_scores must have the same shape; got scores of shape "
            f"{scores.shape} and initial_scores of shape {initial.shape}."
        )
    return scores, initial


def _check_pairs(pairs, n_items):
    try:
        high, low = (np.asarray(side) for side in pairs)
    except (TypeError, ValueError):
        raise TypeError(
            "pairs must be a tuple (high, low) of two integer arrays; "
            f"got {type(pairs).__name__}."
        ) from None
    if high.ndim != 1 or high.shape != low.shape:
        raise ValueError(
            f"pairs must be two 1-D integer arrays of one length; got shapes {high.shape} "
            f"and {low.shape}."
        )
    if high.size == 0:
        return high.astype(np.intp), low.astype(np.intp)
    for side, name in ((high, "pairs[0]"), (low, "pairs[1]")):
        if side.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integer item indices; got dtype {side.dtype}.")
        if side.min() < 0 or side.max() >= n_items:
            raise ValueError(
                f"{name} must hold item indices in [0, {n_items}) for scores of shape "
                f"({n_items},); got values in [{side.min()}, {side.max()}]."
            )
    return high, low


def _power_of_two_exponent(*arrays):
    """``e`` such that dividing by ``2**e`` (exactly) brings the largest magnitude into [1, 2)."""
    largest = max(float(np.max(np.abs(array), initial=0.0)) for array in arrays)
    return 0 if largest == 0 else int(np.frexp(largest)[1]) - 1


def _power_of_two_scale(*arrays):
    return float(np.ldexp(1.0, _power_of_two_exponent(*arrays)))


def _rescaled_sum(squares, scale, what, root=False, inputs="scores and initial_scores"):
    """``sum(squares) * scale**2`` (its square root times ``scale`` with ``root``), or an error."""
    total = float(np.sum(squares))
    total = np.sqrt(total) * scale if root else total * scale * scale
    if not np.isfinite(total):
        raise ValueError(
            f"The {what} of {inputs} exceeds the float64 range; rescale them."
        )
    return float(total)


def pointwise_distance(scores, initial_scores, *, squared=False):
    """Euclidean distance between two score lists, ``||r - rbar||``.

    The paper's toy example reports this (non-squared) value; ``squared=True``
    gives ``sum (r_i - rbar_i)^2``, the ranking distance of random-walk and
    point-wise reranking.

    Parameters
    ----------
    scores, initial_scores : array-like of shape (n_items,)
        Finite scores ``r`` and initial scores ``rbar``.
    squared : bool, default=False
        Return the squared distance.

    Returns
    -------
    distance : float
        Computed on inputs scaled by a power of two, so that entries near the
        float64 limits neither overflow nor underflow; a distance beyond float64
        raises a ``ValueError``.

    Examples
    --------
    >>> from skqbnorm.metrics import pointwise_distance
    >>> r0 = [1.0, 0.9, 0.8, 0.7, 0.6]
    >>> round(pointwise_distance([0.6, 0.7, 0.8, 0.9, 1.0], r0), 2)
    0.63
    >>> pointwise_distance([3.0, 0.0], [0.0, 4.0], squared=True)
    25.0
    """
    if not isinstance(squared, (bool, np.bool_)):
        raise TypeError(f"squared must be a bool; got squared={squared!r}.")
    scores, initial = _paired(scores, initial_scores)
    scale = _power_of_two_scale(scores, initial)
    gaps = scores / scale - initial / scale
    what = "squared distance" if squared else "distance"
    return _rescaled_sum(gaps**2, scale, what, root=not squared)


def ordered_pairs(initial_scores):
    """All pairs ``(i, j)`` with ``initial_scores[i] > initial_scores[j]``.

    Parameters
    ----------
    initial_scores : array-like of shape (n_items,)
        Finite initial scores.

    Returns
    -------
    high, low : ndarray of shape (n_pairs,)
        Item ``high[p]`` scores strictly above item ``low[p]``; tied items make no pair.

    Examples
    --------
    >>> from skqbnorm.metrics import ordered_pairs
    >>> ordered_pairs([0.5, 0.9, 0.5])
    (array([1, 1]), array([0, 2]))
    """
    initial = check_vector(initial_scores, "initial_scores")
    high, low = np.nonzero(initial[:, None] > initial[None, :])
    return high, low


def discordant_pairs(scores, initial_scores):
    """Number of pairs the initial list orders strictly that ``scores`` reverses or ties.

    Parameters
    ----------
    scores, initial_scores : array-like of shape (n_items,)
        Finite scores and initial scores.

    Returns
    -------
    n_discordant : int
        The number of such pairs.

    Examples
    --------
    >>> from skqbnorm.metrics import discordant_pairs
    >>> discordant_pairs([0.6, 0.7, 0.8, 0.9, 1.0], [1.0, 0.9, 0.8, 0.7, 0.6])
    10
    """
    scores, initial = _paired(scores, initial_scores)
    high, low = ordered_pairs(initial)
    return int(np.count_nonzero(scores[high] <= scores[low]))


def hinge_distance(scores, initial_scores, pairs=None, *, margin=0.0):
    """``sum_{(i, j) in S} [(margin - (r_i - r_j))_+]^2`` over ordered pairs S.

    Parameters
    ----------
    scores, initial_scores : array-like of shape (n_items,)
        Finite scores ``r`` and initial scores.
    pairs : tuple of two int arrays, default=None
        ``(high, low)``: item ``high[p]`` is ranked above ``low[p]`` initially;
        indices in ``[0, n_items)``. None takes every strictly ordered pair of
        ``initial_scores``.
    margin : float, default=0.0
        Finite, ``>= 0``. 0 gives the plain hinge distance ``[(r_j - r_i)_+]^2``; the
        hinge reranker uses its margin ``a``.

    Returns
    -------
    distance : float
        Computed on inputs scaled by a power of two (no intermediate overflow); a
        total beyond float64 raises a ``ValueError``.

    Examples
    --------
    >>> from skqbnorm.metrics import hinge_distance
    >>> hinge_distance([1.0, 2.0, 0.0], [3.0, 2.0, 1.0])  # pair (0, 1) reversed by 1
    1.0
    >>> hinge_distance([1.0, 2.0, 0.0], [3.0, 2.0, 1.0], pairs=([1], [2]), margin=3.0)
    1.0
    """
    margin = check_real(margin, "margin", low=0.0)
    scores, initial = _paired(scores, initial_scores)
    high, low = ordered_pairs(initial) if pairs is None else _check_pairs(pairs, len(scores))
    scale = _power_of_two_scale(scores, np.array([margin]))
    scaled = scores / scale
    shortfalls = np.maximum(margin / scale - (scaled[high] - scaled[low]), 0.0)
    inputs = "scores and initial_scores" if margin == 0 else f"scores and margin={margin:g}"
    return _rescaled_sum(shortfalls**2, scale, "hinge distance", inputs=inputs)


def preference_strength_distance(scores, initial_scores, pairs=None):
    """``sum_{(i, j) in S} (1 - (r_i - r_j) / (rbar_i - rbar_j))^2`` over ordered pairs S.

    Pairs whose initial scores tie carry no preference and are skipped.

    Parameters
    ----------
    scores, initial_scores : array-like of shape (n_items,)
        Finite scores ``r`` and initial scores ``rbar``.
    pairs : tuple of two int arrays, default=None
        ``(high, low)`` item indices in ``[0, n_items)``; None takes every strictly
        ordered pair of ``initial_scores``.

    Returns
    -------
    distance : float
        Computed on inputs scaled by powers of two; a total beyond float64 (for
        instance initial gaps far smaller than the score gaps) raises a
        ``ValueError``.

    Examples
    --------
    >>> from skqbnorm.metrics import preference_strength_distance
    >>> preference_strength_distance([2.0, 1.0, 0.0], [3.0, 2.0, 1.0])  # same gaps
    0.0
    >>> preference_strength_distance([1.0, 2.0, 0.0], [3.0, 2.0, 1.0])  # 2^2 + 0.5^2 + 1^2
    5.25
    """
    scores, initial = _paired(scores, initial_scores)
    high, low = ordered_pairs(initial) if pairs is None else _check_pairs(pairs, len(scores))
    strict = initial[high] != initial[low]
    high, low = high[strict], low[strict]
    score_exponent = _power_of_two_exponent(scores)
    initial_exponent = _power_of_two_exponent(initial)
    scaled_scores = np.ldexp(scores, -score_exponent)
    scaled_initial = np.ldexp(initial, -initial_exponent)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        score_gaps = scaled_scores[high] - scaled_scores[low]
        ratios = score_gaps / (scaled_initial[high] - scaled_initial[low])
        ratios = np.ldexp(ratios, score_exponent - initial_exponent)
        squares = (1.0 - ratios) ** 2
    return _rescaled_sum(squares, 1.0, "preference-strength distance")
