"""Ranking quality (average precision) and the ranking distances of Bayesian reranking."""

import numpy as np
from sklearn.utils.validation import check_consistent_length, column_or_1d


def _scores_and_labels(scores, relevance):
    scores = column_or_1d(np.asarray(scores, dtype=np.float64))
    relevance = column_or_1d(relevance).astype(bool)
    check_consistent_length(scores, relevance)
    return scores, relevance


def average_precision(scores, relevance, n=None, *, normaliser="relevant"):
    """Average precision of the list ordered by decreasing score.

    ``AP@n = (1 / R_n) sum_{k <= n} rel_k * precision@k``. Tied scores are ordered
    pessimistically (irrelevant items first), so ties never flatter a ranking.

    Parameters
    ----------
    scores : array-like of shape (n_items,)
        Scores, higher is better.
    relevance : array-like of shape (n_items,)
        True for the relevant items.
    n : int, default=None
        Cut-off depth; None evaluates the whole list.
    normaliser : {"relevant", "truncated"}, default="relevant"
        ``R_n``: ``"relevant"`` divides by all relevant items in the list (so
        relevant items below the cut-off count as misses, as in TRECVID's
        inferred AP at depth n); ``"truncated"`` by ``min(R, n)``, so a perfect
        top n scores 1.

    Returns
    -------
    ap : float
        In [0, 1]; 0 when the list holds no relevant item.

    Examples
    --------
    >>> from skqbnorm.metrics import average_precision
    >>> average_precision([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0])  # (1/1 + 2/3) / 2
    0.8333...
    """
    if normaliser not in ("relevant", "truncated"):
        raise ValueError(f"normaliser must be 'relevant' or 'truncated'; got {normaliser!r}.")
    scores, relevance = _scores_and_labels(scores, relevance)
    n_items = len(scores)
    n = n_items if n is None else int(n)
    if n < 1:
        raise ValueError(f"n must be a positive depth; got n={n}.")
    order = np.lexsort((relevance, -scores))[:n]  # by score, irrelevant first in ties
    hits = relevance[order]
    n_relevant = relevance.sum() if normaliser == "relevant" else min(relevance.sum(), n)
    if n_relevant == 0:
        return 0.0
    precision_at_hits = np.cumsum(hits)[hits] / (np.flatnonzero(hits) + 1)
    return float(precision_at_hits.sum() / n_relevant)


def mean_average_precision(scores, relevance, groups, n=None, *, normaliser="relevant"):
    """Mean over queries of :func:`average_precision`, one query per group.

    Parameters
    ----------
    scores, relevance : array-like of shape (n_items,)
        Scores and relevance of every item of every query's list.
    groups : array-like of shape (n_items,)
        The query each item belongs to.
    n, normaliser
        As in :func:`average_precision`.

    Returns
    -------
    map : float

    Examples
    --------
    >>> from skqbnorm.metrics import mean_average_precision
    >>> mean_average_precision([3, 2, 1, 3, 2, 1], [1, 0, 0, 0, 0, 1], [0, 0, 0, 1, 1, 1])
    0.6666...
    """
    scores, relevance = _scores_and_labels(scores, relevance)
    groups = column_or_1d(groups)
    check_consistent_length(scores, groups)
    labels, inverse = np.unique(groups, return_inverse=True)
    per_query = [
        average_precision(scores[inverse == g], relevance[inverse == g], n, normaliser=normaliser)
        for g in range(len(labels))
    ]
    return float(np.mean(per_query))


def pointwise_distance(scores, initial_scores, *, squared=False):
    """Euclidean distance between two score lists, ``||r - rbar||``.

    The paper's toy example reports this (non-squared) value; ``squared=True``
    gives ``sum (r_i - rbar_i)^2``, the ranking distance of random-walk and
    point-wise reranking.

    Examples
    --------
    >>> from skqbnorm.metrics import pointwise_distance
    >>> r0 = [1.0, 0.9, 0.8, 0.7, 0.6]
    >>> round(pointwise_distance([0.6, 0.7, 0.8, 0.9, 1.0], r0), 2)
    0.63
    """
    squares = np.sum((np.asarray(scores, float) - np.asarray(initial_scores, float)) ** 2)
    return float(squares if squared else np.sqrt(squares))


def ordered_pairs(initial_scores):
    """All pairs ``(i, j)`` with ``initial_scores[i] > initial_scores[j]``."""
    initial = np.asarray(initial_scores, dtype=np.float64)
    high, low = np.nonzero(initial[:, None] > initial[None, :])
    return high, low


def discordant_pairs(scores, initial_scores):
    """Number of pairs the initial list orders strictly that ``scores`` reverses or ties.

    Examples
    --------
    >>> from skqbnorm.metrics import discordant_pairs
    >>> discordant_pairs([0.6, 0.7, 0.8, 0.9, 1.0], [1.0, 0.9, 0.8, 0.7, 0.6])
    10
    """
    scores = np.asarray(scores, dtype=np.float64)
    high, low = ordered_pairs(initial_scores)
    return int(np.count_nonzero(scores[high] <= scores[low]))


def hinge_distance(scores, initial_scores, pairs=None, *, margin=0.0):
    """``sum_{(i, j) in S} [(margin - (r_i - r_j))_+]^2`` over ordered pairs S.

    Parameters
    ----------
    scores, initial_scores : array-like of shape (n_items,)
    pairs : tuple of two int arrays, default=None
        ``(high, low)``: item ``high[p]`` is ranked above ``low[p]`` initially.
        None takes every strictly ordered pair of ``initial_scores``.
    margin : float, default=0.0
        0 gives SPEC's hinge distance ``[(r_j - r_i)_+]^2``; the hinge reranker
        uses its margin ``a``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    high, low = ordered_pairs(initial_scores) if pairs is None else pairs
    return float(np.sum(np.maximum(margin - (scores[high] - scores[low]), 0.0) ** 2))


def preference_strength_distance(scores, initial_scores, pairs=None):
    """``sum_{(i, j) in S} (1 - (r_i - r_j) / (rbar_i - rbar_j))^2`` over ordered pairs S.

    Pairs whose initial scores tie carry no preference and are skipped.
    """
    scores = np.asarray(scores, dtype=np.float64)
    initial = np.asarray(initial_scores, dtype=np.float64)
    high, low = ordered_pairs(initial) if pairs is None else pairs
    gap = initial[high] - initial[low]
    strict = gap != 0
    ratio = (scores[high] - scores[low])[strict] / gap[strict]
    return float(np.sum((1.0 - ratio) ** 2))
