"""Retrieval metrics: rank of the correct item, R@K, MdR, MnR, under a tie convention."""

import numpy as np
from sklearn.utils import gen_batches

from .._core import rows_per_chunk
from .._core._array_api import namespace
from .._validation import check_int, check_option, check_relevance, check_sims, check_vector
from . import _array_api

RECALL_KS = (1, 5, 10, 50)

#: The ways to count a correct item that ties with other items (see ``retrieval_metrics``).
TIES = ("official", "average", "optimistic", "pessimistic")

_TIES_DOC = """\
ties : {"official", "average", "optimistic", "pessimistic"}, default="official"
        How a correct item tied with other items is ranked and counted. With
        ``above`` items scoring higher and ``tied`` items (the correct one
        included) scoring the same:

        - ``"official"`` (the default): the rule of the QB-Norm evaluation code,
          which reproduces the paper's tables (``t2v_metrics`` and
          ``cols2metrics`` in ``metric.py`` of github.com/ioanacroi/qb-norm,
          commit 08119aa, taken from github.com/albanie/collaborative-experts,
          with ``break_ties = "averaging"``). The rank is the mean tied
          position ``above + (tied - 1) / 2``; R@1 counts only ``rank == 0``
          (``cols == 0``) and R@K for K > 1 counts ``rank < K``
          (``cols < K``), so a rank of exactly K - 0.5 (half the tie inside
          the top K) is a hit for K > 1 but not for K = 1.
        - ``"average"``: the same mean tied position, counted as a hit when the
          averaged 1-based rank is at most K (``rank <= K - 1``) for every K,
          that is when more than half of the tie's positions lie in the top K.
          It differs from ``"official"`` only at ``rank == K - 0.5`` for K > 1.
        - ``"pessimistic"``: ties break against the correct items, rank
          ``above + tied - tied_correct`` (``tied_correct`` = correct items in
          the tie; 1 for a single correct index).
        - ``"optimistic"``: ties break in favour of the correct item, rank
          ``above``. A constant matrix then scores perfectly (R@1 = 100): use it
          only to bound the effect of ties, or to compare with code that breaks
          ties this way (the VSE-style evaluations).

        Under every convention but ``"optimistic"`` a constant matrix over two or
        more gallery items has R@1 = 0. With several correct items in one tie,
        ``"official"`` and ``"average"`` take the mean position of the whole tie,
        as the official code does for video-to-text. Releases before this option
        counted ``rank < K`` for every K, which differs from ``"official"`` only
        at R@1 (an averaged rank of 0.5, a two-way tie at the top, was a hit)."""


def _document_ties(function):
    """Put the shared description of ``ties`` where the docstring says TIES_DOC."""
    if function.__doc__:  # None under python -OO
        function.__doc__ = function.__doc__.replace("TIES_DOC", _TIES_DOC)
    return function


@_document_ties
def correct_item_ranks(sims, gt, *, ties="official"):
    """Rank (0 = first) of the correct gallery item in every query's row.

    Parameters
    ----------
    sims : array-like of shape (n_queries, n_gallery)
        Finite scores, higher is better.
    gt : array-like of shape (n_queries,) or (n_queries, n_gallery)
        The correct gallery index per query (integers in ``[0, n_gallery)``), or a
        boolean (0/1) relevance matrix when a query has several correct items;
        then the rank of the best-scored one. Every row of a relevance matrix
        needs a correct item.
    TIES_DOC

    Returns
    -------
    ranks : ndarray of shape (n_queries,)
        Float ranks (x.5 where an averaged tie spans an even number of positions).
        Under scikit-learn's ``array_api_dispatch``, scores of another namespace
        (torch, CuPy) are ranked on their device, into float64 ranks of that
        namespace (float32 where the device has no float64).

    Examples
    --------
    >>> from skqbnorm.metrics import correct_item_ranks
    >>> sims = [[0.1, 0.9, 0.5], [0.3, 0.3, 0.3]]
    >>> correct_item_ranks(sims, [2, 0])
    array([1., 1.])
    >>> correct_item_ranks(sims, [2, 0], ties="pessimistic")
    array([1., 2.])
    >>> correct_item_ranks(sims, [2, 0], ties="optimistic")
    array([1., 0.])
    """
    check_option(ties, "ties", TIES)
    xp, on_device = namespace(sims)
    if on_device:
        return _array_api.correct_item_ranks(xp, sims, gt, ties, _check_gt)
    sims = check_sims(sims)
    best, relevant = _best_correct_score(sims, gt)
    ranks = np.empty(len(sims))
    step = rows_per_chunk(sims.shape[1], 1, n_buffers=2)
    for rows in gen_batches(len(sims), step):
        block, target = sims[rows], best[rows, None]
        above = np.count_nonzero(block > target, axis=1)
        if ties == "optimistic":
            ranks[rows] = above
            continue
        at_target = block == target
        tied = np.count_nonzero(at_target, axis=1)
        if ties != "pessimistic":
            ranks[rows] = above + (tied - 1) / 2
        elif relevant is None:
            ranks[rows] = above + tied - 1
        else:
            ranks[rows] = above + tied - np.count_nonzero(at_target & relevant[rows], axis=1)
    return ranks


def _best_correct_score(sims, gt):
    """Every row's best correct score, and the relevance matrix (None for indices)."""
    indices, relevant = _check_gt(gt, sims.shape)
    if relevant is not None:
        return np.where(relevant, sims, -np.inf).max(axis=1), relevant
    return sims[np.arange(len(sims)), indices], None


def _check_gt(gt, shape):
    """``(indices, None)`` for one correct gallery index per query, ``(None, relevance)``
    for a relevance matrix, checked against the scores' ``shape``."""
    n_queries, n_gallery = shape
    gt = np.asarray(gt)
    if gt.ndim == 2:
        return None, check_relevance(gt, shape)
    if gt.ndim != 1 or len(gt) != n_queries:
        raise ValueError(
            f"gt must hold one gallery index per query (shape ({n_queries},)) or a "
            f"relevance matrix of shape {shape}; got shape {gt.shape}."
        )
    if not np.issubdtype(gt.dtype, np.integer):
        raise ValueError(f"gt must hold integer gallery indices; got dtype {gt.dtype}.")
    if gt.min() < 0 or gt.max() >= n_gallery:
        raise ValueError(
            f"gt must hold gallery indices in [0, {n_gallery}) for sims of shape "
            f"{shape}; got values in [{gt.min()}, {gt.max()}]."
        )
    return gt, None


def recall_at_k(ranks, k, *, ties="official"):
    """Percentage of queries whose correct item counts as retrieved in the first ``k``.

    Parameters
    ----------
    ranks : array-like of shape (n_queries,)
        Finite, non-negative 0-based ranks, as :func:`correct_item_ranks` returns
        under the same ``ties``.
    k : int
        Cut-off, ``k >= 1``.
    ties : {"official", "average", "optimistic", "pessimistic"}, default="official"
        ``"official"`` counts ``rank == 0`` for k = 1 and ``rank < k`` for k > 1;
        the others count ``rank <= k - 1`` (see :func:`retrieval_metrics`).

    Returns
    -------
    recall : float
        In [0, 100]. Under scikit-learn's ``array_api_dispatch``, ranks of another
        namespace are counted on their device.

    Examples
    --------
    >>> from skqbnorm.metrics import recall_at_k
    >>> recall_at_k([0.0, 0.5, 4.5, 7.0], 1), recall_at_k([0.0, 0.5, 4.5, 7.0], 5)
    (25.0, 75.0)
    >>> recall_at_k([0.0, 0.5, 4.5, 7.0], 5, ties="average")
    50.0
    """
    check_option(ties, "ties", TIES)
    k = check_int(k, "k", low=1)
    xp, on_device = namespace(ranks)
    if on_device:
        return _array_api.recall(xp, _array_api.device_ranks(xp, ranks), k, ties)
    ranks = check_vector(ranks, "ranks")
    if ranks.min() < 0:
        raise ValueError(f"ranks must be non-negative; ranks[{ranks.argmin()}] is {ranks.min()}.")
    return 100.0 * float(np.mean(_hits(ranks, k, ties)))


def _hits(ranks, k, ties):
    if ties != "official":
        return ranks <= k - 1
    return ranks == 0 if k == 1 else ranks < k


@_document_ties
def retrieval_metrics(sims, gt, *, ties="official"):
    """R@1, R@5, R@10, R@50, MdR, MnR and the geometric mean of R@1/5/10.

    Parameters
    ----------
    sims : array-like of shape (n_queries, n_gallery)
        Finite scores, higher is better.
    gt : array-like of shape (n_queries,) or (n_queries, n_gallery)
        The correct gallery index per query, or a boolean relevance matrix (the
        rank of the best correct item counts).
    TIES_DOC

    Returns
    -------
    metrics : dict
        ``"R@1"``, ``"R@5"``, ``"R@10"``, ``"R@50"`` (percentages), ``"MdR"``
        and ``"MnR"`` (1-based median and mean rank), and ``"geometric_mean"``
        of R@1, R@5 and R@10. Unlike the official code, values are not rounded
        to one decimal. Python floats, also under scikit-learn's
        ``array_api_dispatch``, where scores of another namespace (torch, CuPy)
        are ranked and summarised on their device.

    Examples
    --------
    >>> from skqbnorm.metrics import retrieval_metrics
    >>> metrics = retrieval_metrics([[0.9, 0.1], [0.2, 0.8]], [0, 0])
    >>> metrics["R@1"], metrics["MdR"], metrics["MnR"]
    (50.0, 1.5, 1.5)

    A tie of the correct item with one other item at the top (averaged rank
    0.5) is no hit at R@1, except when ties break optimistically:

    >>> sims, gt = [[0.7, 0.7, 0.1]], [0]
    >>> retrieval_metrics(sims, gt)["R@1"], retrieval_metrics(sims, gt)["MnR"]
    (0.0, 1.5)
    >>> retrieval_metrics(sims, gt, ties="optimistic")["R@1"]
    100.0
    """
    ranks = correct_item_ranks(sims, gt, ties=ties)
    xp, on_device = namespace(ranks)
    if on_device:
        return _array_api.metrics_of_ranks(xp, ranks, ties, RECALL_KS)
    return metrics_of_ranks(ranks, ties)


def metrics_of_ranks(ranks, ties="official"):
    """:func:`retrieval_metrics` of the correct items' 0-based ``ranks`` under ``ties``."""
    metrics = {f"R@{k}": 100.0 * float(np.mean(_hits(ranks, k, ties))) for k in RECALL_KS}
    metrics["MdR"] = float(np.median(ranks)) + 1
    metrics["MnR"] = float(np.mean(ranks)) + 1
    metrics["geometric_mean"] = float(np.cbrt(metrics["R@1"] * metrics["R@5"] * metrics["R@10"]))
    return metrics

