"""The metrics of score matrices on the scores' own namespace and device (array API dispatch).

The ranks and the k-occurrence are computed on the device, a block of query rows at a
time (blocks of the device's own size, ``device_working_memory``); what they summarise
(R@K, MdR, MnR) is reduced there too and returned as Python floats, as on the NumPy path.
"""

import numpy as np
from sklearn.utils import gen_batches

from .._core import rows_per_chunk
from .._core._array_api import (
    check_finite,
    check_matrix,
    device,
    device_working_memory,
    max_float,
    to_namespace,
    to_numpy,
    top_k,
)


def device_sims(xp, sims, name="sims"):
    """Checked finite float scores of ``xp``: non-empty, 2-D."""
    sims = check_matrix(xp, sims, name)
    check_finite(xp, sims, slice(0, sims.shape[0]), name)
    return sims


def correct_item_ranks(xp, sims, gt, ties, check_gt):
    """:func:`~skqbnorm.metrics.correct_item_ranks` of ``sims`` on its device.

    ``check_gt(gt, shape)`` validates ``gt`` on the host, as the NumPy path does, and
    returns ``(indices, relevance)`` (one of them None).
    """
    sims = device_sims(xp, sims)
    where = device(sims)
    indices, relevant = check_gt(to_numpy(gt), tuple(sims.shape))
    if relevant is None:
        picked = to_namespace(np.asarray(indices, dtype=np.int64), xp, where)
        columns = xp.arange(sims.shape[1], device=where)
        lowest = xp.full_like(sims, -xp.inf)
        best = xp.max(xp.where(columns[None, :] == picked[:, None], sims, lowest), axis=1)
        relevant_rows = None
    else:
        relevant_rows = to_namespace(relevant, xp, where)
        best = xp.max(xp.where(relevant_rows, sims, xp.full_like(sims, -xp.inf)), axis=1)
    rank_dtype = max_float(xp, where)
    step = rows_per_chunk(sims.shape[1], 1, device_working_memory(xp, where), n_buffers=2)
    ranks = [_block_ranks(xp, sims[rows, :], best[rows, None], ties,
                          None if relevant_rows is None else relevant_rows[rows, :], rank_dtype)
             for rows in gen_batches(sims.shape[0], step)]
    return xp.concat(ranks)


def _block_ranks(xp, block, target, ties, relevant, dtype):
    above = _count(xp, block > target, dtype)
    if ties == "optimistic":
        return above
    at_target = block == target
    tied = _count(xp, at_target, dtype)
    if ties != "pessimistic":
        return above + (tied - 1) / 2
    if relevant is None:
        return above + tied - 1
    return above + tied - _count(xp, at_target & relevant, dtype)


def _count(xp, mask, dtype):
    """The True entries of each row of ``mask``, as ``dtype`` (the 2023.12 standard has
    no count_nonzero)."""
    return xp.astype(xp.sum(xp.astype(mask, xp.int64), axis=1), dtype)


def hits(ranks, k, ties):
    """Whether each rank counts as retrieved in the first ``k`` under ``ties``."""
    if ties != "official":
        return ranks <= k - 1
    return ranks == 0 if k == 1 else ranks < k


def recall(xp, ranks, k, ties):
    """R@k, a percentage, as a Python float."""
    return 100.0 * float(xp.mean(xp.astype(hits(ranks, k, ties), ranks.dtype)))


def metrics_of_ranks(xp, ranks, ties, recall_ks):
    """:func:`~skqbnorm.metrics.retrieval_metrics` of ranks of ``xp``, as Python floats."""
    metrics = {f"R@{k}": recall(xp, ranks, k, ties) for k in recall_ks}
    ordered = xp.sort(ranks)
    n_ranks = ordered.shape[0]
    median = (float(ordered[(n_ranks - 1) // 2]) + float(ordered[n_ranks // 2])) / 2
    metrics["MdR"] = median + 1
    metrics["MnR"] = float(xp.mean(ranks)) + 1
    metrics["geometric_mean"] = float(np.cbrt(metrics["R@1"] * metrics["R@5"] * metrics["R@10"]))
    return metrics


def device_ranks(xp, ranks):
    """Checked 0-based ranks of ``xp``: a non-empty 1-D vector of finite, non-negative reals."""
    if ranks.ndim != 1 or ranks.shape[0] == 0:
        raise ValueError(f"ranks must be a non-empty 1-D array; got shape {tuple(ranks.shape)}.")
    ranks = xp.astype(ranks, max_float(xp, device(ranks)))
    if not bool(xp.all(xp.isfinite(ranks))) or bool(xp.any(ranks < 0)):
        bad = int(xp.argmax(xp.astype(~xp.isfinite(ranks) | (ranks < 0), xp.int8)))
        raise ValueError(
            f"ranks must be finite and non-negative; ranks[{bad}] is {float(ranks[bad])} "
            f"(shape {tuple(ranks.shape)})."
        )
    return ranks


def k_occurrence(xp, sims, k):
    """:func:`~skqbnorm.metrics.k_occurrence` of checked scores of ``xp``, on their device.

    Each block's top ``k`` (``top_k``) is counted one rank at a time, against the
    gallery's positions: no scatter, which the standard lacks.
    """
    n_gallery = sims.shape[1]
    where = device(sims)
    items = xp.arange(n_gallery, device=where)
    counts = xp.zeros(n_gallery, dtype=xp.int64, device=where)
    step = rows_per_chunk(n_gallery, 8, device_working_memory(xp, where), n_buffers=4)
    for rows in gen_batches(sims.shape[0], step):
        _, best = top_k(xp, sims[rows, :], k)
        for rank in range(k):
            counts += xp.sum(xp.astype(best[:, rank:rank + 1] == items, xp.int64), axis=0)
    return counts
