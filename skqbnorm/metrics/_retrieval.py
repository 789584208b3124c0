"""Retrieval metrics: rank of the correct item, R@K, MdR, MnR."""

import numpy as np
from sklearn.utils import gen_batches
from sklearn.utils.validation import check_array

from .._stats import rows_per_chunk

RECALL_KS = (1, 5, 10, 50)


def correct_item_ranks(sims, gt):
    """Rank (0 = first) of the correct gallery item in every query's row.

    Tied scores share the average of their positions, so a constant matrix scores
    as badly as chance rather than perfectly.

    Parameters
    ----------
    sims : array-like of shape (n_queries, n_gallery)
        Scores, higher is better.
    gt : array-like of shape (n_queries,) or (n_queries, n_gallery)
        The correct gallery index per query, or a boolean relevance matrix when a
        query has several correct items; then the rank of the best-scored one.

    Returns
    -------
    ranks : ndarray of shape (n_queries,)
        Float ranks (x.5 where ties average two positions).

    Examples
    --------
    >>> from skqbnorm.metrics import correct_item_ranks
    >>> correct_item_ranks([[0.1, 0.9, 0.5], [0.3, 0.3, 0.3]], [2, 0])
    array([1., 1.])
    """
    sims = check_array(sims, dtype=(np.float64, np.float32), input_name="sims")
    best = _best_correct_score(sims, gt)
    ranks = np.empty(len(sims))
    step = rows_per_chunk(sims.shape[1], 1, n_buffers=2)
    for rows in gen_batches(len(sims), step):
        block, target = sims[rows], best[rows, None]
        above = np.count_nonzero(block > target, axis=1)
        tied = np.count_nonzero(block == target, axis=1)
        ranks[rows] = above + (tied - 1) / 2
    return ranks


def _best_correct_score(sims, gt):
    n_queries, n_gallery = sims.shape
    gt = np.asarray(gt)
    if gt.ndim == 2:
        if gt.shape != sims.shape:
            raise ValueError(
                f"A relevance matrix gt must have the shape of sims: gt has shape "
                f"{gt.shape}, sims has shape {sims.shape}."
            )
        relevant = gt.astype(bool)
        if not relevant.any(axis=1).all():
            missing = np.flatnonzero(~relevant.any(axis=1))
            raise ValueError(f"Every query needs a relevant item in gt; rows {missing[:5]} have none.")
        return np.where(relevant, sims, -np.inf).max(axis=1)
    if gt.ndim != 1 or len(gt) != n_queries:
        raise ValueError(
            f"gt must hold one gallery index per query (shape ({n_queries},)) or a "
            f"relevance matrix of shape {sims.shape}; got shape {gt.shape}."
        )
    if not np.issubdtype(gt.dtype, np.integer):
        raise ValueError(f"gt must hold integer gallery indices; got dtype {gt.dtype}.")
    if gt.size and (gt.min() < 0 or gt.max() >= n_gallery):
        raise ValueError(
            f"gt must hold gallery indices in [0, {n_gallery}) for sims of shape "
            f"{sims.shape}; got values in [{gt.min()}, {gt.max()}]."
        )
    return sims[np.arange(n_queries), gt]


def recall_at_k(ranks, k):
    """Percentage of queries whose correct item ranks among the first ``k``."""
    return 100.0 * float(np.mean(np.asarray(ranks) < k))


def retrieval_metrics(sims, gt):
    """R@1, R@5, R@10, R@50, MdR, MnR and the geometric mean of R@1/5/10.

    Parameters
    ----------
    sims : array-like of shape (n_queries, n_gallery)
        Scores, higher is better.
    gt : array-like of shape (n_queries,) or (n_queries, n_gallery)
        The correct gallery index per query, or a boolean relevance matrix (the
        rank of the best correct item counts).

    Returns
    -------
    metrics : dict
        ``"R@1"``, ``"R@5"``, ``"R@10"``, ``"R@50"`` (percentages), ``"MdR"``
        and ``"MnR"`` (1-based median and mean rank), and ``"geometric_mean"``
        of R@1, R@5 and R@10. Tied scores average their positions.

    Examples
    --------
    >>> from skqbnorm.metrics import retrieval_metrics
    >>> metrics = retrieval_metrics([[0.9, 0.1], [0.2, 0.8]], [0, 0])
    >>> metrics["R@1"], metrics["MdR"], metrics["MnR"]
    (50.0, 1.5, 1.5)
    """
    ranks = correct_item_ranks(sims, gt)
    metrics = {f"R@{k}": recall_at_k(ranks, k) for k in RECALL_KS}
    metrics["MdR"] = float(np.median(ranks)) + 1
    metrics["MnR"] = float(np.mean(ranks)) + 1
    metrics["geometric_mean"] = float(np.cbrt(metrics["R@1"] * metrics["R@5"] * metrics["R@10"]))
    return metrics
