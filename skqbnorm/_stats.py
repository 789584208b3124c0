"""The streaming core: reductions over a querybank probe matrix, chunk by chunk.

A normaliser's fit reads the bank-by-gallery similarity matrix ``P`` (M x N) once,
as blocks of bank rows whose size is bounded by a memory budget, and feeds every
block to a few *reducers* that keep only O(N) state (GC's sorted columns excepted).
``P`` is either given (an array or an ``np.memmap``, read block by block) or
computed block by block from bank and gallery embeddings.
"""

import itertools
import os

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.preprocessing import normalize
from threadpoolctl import threadpool_limits

#: Default bound, in MiB, on the temporary memory one block may take. A few MiB keeps
#: blocks cache-friendly and avoids page-fault costs on large fresh allocations.
DEFAULT_WORKING_MEMORY = 16

#: Bank rows per matrix product in embedding mode, and the memory those products may
#: take whatever ``working_memory`` says (see ``ProbeMatrix.blocks``).
MIN_PRODUCT_ROWS = 2048
PRODUCT_MEMORY = 256


def rows_per_chunk(n_columns, itemsize, working_memory=None, n_buffers=2):
    """Number of rows such that ``n_buffers`` blocks of ``n_columns`` fit the budget."""
    budget = (DEFAULT_WORKING_MEMORY if working_memory is None else working_memory) * 2**20
    return max(1, int(budget // (max(n_columns, 1) * itemsize * n_buffers)))


def prepare_embeddings(embeddings, metric):
    """Embeddings ready for a dot product under ``metric`` (unit rows for cosine)."""
    if metric == "cosine":
        return normalize(embeddings, norm="l2", copy=True)
    return embeddings


class ProbeMatrix:
    """Row blocks of the probe matrix ``P``, precomputed or from embeddings.

    Parameters
    ----------
    bank : ndarray of shape (M, N) or (M, d)
        The precomputed similarities (``gallery_t`` is None) or the bank embeddings.
    gallery_t : ndarray of shape (d, N) or None
        Prepared, transposed gallery embeddings.
    metric : str
        Used to prepare each block of bank embeddings.
    dtype : numpy dtype
        The dtype of every block.
    """

    def __init__(self, bank, gallery_t=None, metric="dot", dtype=np.float64):
        self.bank = bank
        self.gallery_t = gallery_t
        self.metric = metric
        self.dtype = np.dtype(dtype)

    @property
    def shape(self):
        n_columns = self.bank.shape[1] if self.gallery_t is None else self.gallery_t.shape[1]
        return self.bank.shape[0], n_columns

    def rows(self, rows):
        """The probe matrix restricted to a range of bank rows."""
        return ProbeMatrix(self.bank[rows], self.gallery_t, self.metric, self.dtype)

    def block(self, rows):
        """The block ``P[rows]`` as an in-memory array of ``self.dtype``."""
        if self.gallery_t is None:
            return np.asarray(self.bank[rows], dtype=self.dtype)
        queries = prepare_embeddings(np.asarray(self.bank[rows], dtype=self.dtype), self.metric)
        return queries @ self.gallery_t

    def blocks(self, working_memory=None, n_buffers=3, first_row=0):
        """Row blocks within the memory budget, with their rows numbered from ``first_row``.

        In embedding mode the similarities are computed in products of up to
        ``MIN_PRODUCT_ROWS`` bank rows within ``PRODUCT_MEMORY`` MiB (smaller ones
        waste the matrix product's packing of the gallery), then handed on in
        budget-sized slices.
        """
        n_rows, n_columns = self.shape
        step = rows_per_chunk(n_columns, self.dtype.itemsize, working_memory, n_buffers)
        product_step = step
        if self.gallery_t is not None:
            affordable = rows_per_chunk(n_columns, self.dtype.itemsize, PRODUCT_MEMORY, n_buffers=1)
            product_step = max(step, min(MIN_PRODUCT_ROWS, affordable))
        for start in range(0, n_rows, product_step):
            product = self.block(slice(start, min(start + product_step, n_rows)))
            for offset in range(0, len(product), step):
                block = product[offset : offset + step]
                rows = slice(first_row + start + offset, first_row + start + offset + len(block))
                check_finite_block(block, rows)
                yield rows, block


def all_finite(block):
    """Whether every entry is finite.

    The sum of squares (one BLAS dot product, faster than a sum) is finite unless
    an entry is NaN or infinite or the squares overflow; only then is the slower
    elementwise test needed.
    """
    return bool(np.isfinite(np.vdot(block, block)) or np.isfinite(block).all())


def check_finite_block(block, rows, name="querybank", first_column=0):
    if all_finite(block):
        return
    bad = np.argwhere(~np.isfinite(block))[0]
    raise ValueError(
        f"Input {name} contains NaN or infinity: the similarity of {name} row "
        f"{rows.start + bad[0]} to gallery item {first_column + bad[1]} is {block[tuple(bad)]}."
    )


def reduce_bank(probe, make_reducers, working_memory=None, n_jobs=None):
    """Reduce the probe matrix with the reducers ``make_reducers()`` returns.

    With several jobs, each reduces a contiguous range of bank rows (threads share
    the bank; under joblib's dask backend each task receives only its rows) within
    its share of ``working_memory``, and the partial reducers are merged in row
    order. Results agree with a single pass up to floating-point reassociation.
    """
    n_rows = probe.shape[0]
    n_parts = max(1, min(effective_n_jobs(n_jobs), n_rows))
    if n_parts == 1:
        return _reduce_rows(probe, make_reducers(), 0, working_memory)
    bounds = np.linspace(0, n_rows, n_parts + 1).astype(int)
    share = (DEFAULT_WORKING_MEMORY if working_memory is None else working_memory) / n_parts
    # The jobs share the cores: BLAS (the embedding products) must not spawn its own
    # threads on top, or both oversubscribe.
    with threadpool_limits(limits=max(1, (os.cpu_count() or 1) // n_parts), user_api="blas"):
        parts = Parallel(n_jobs=n_jobs, prefer="threads")(
            delayed(_reduce_rows)(probe.rows(slice(start, stop)), make_reducers(), start, share)
            for start, stop in itertools.pairwise(bounds)
        )
    reducers = parts[0]
    for part in parts[1:]:
        for reducer, other in zip(reducers, part):
            reducer.merge(other)
    return reducers


def _reduce_rows(probe, reducers, first_row, working_memory):
    for rows, block in probe.blocks(working_memory, first_row=first_row):
        for reducer in reducers:
            reducer.update(block, rows)
    return reducers


class ColumnLogSumExp:
    """``logsumexp_i(beta * P[i, j])`` for every column j, in float64 accumulators."""

    def __init__(self, n_columns, beta):
        self.beta = beta
        self.max = np.full(n_columns, -np.inf)
        self.sum = np.zeros(n_columns)

    def update(self, block, rows):
        scaled = np.multiply(block, block.dtype.type(self.beta))
        new_max = np.maximum(self.max, scaled.max(axis=0))
        self.sum *= np.exp(self.max - new_max)
        scaled -= new_max.astype(block.dtype)
        np.exp(scaled, out=scaled)
        self.sum += scaled.sum(axis=0)
        self.max = new_max

    def merge(self, other):
        new_max = np.maximum(self.max, other.max)
        self.sum = self.sum * np.exp(self.max - new_max) + other.sum * np.exp(other.max - new_max)
        self.max = new_max

    def result(self):
        return self.max + np.log(self.sum)


class ColumnMean:
    """Column mean, from float64 column sums."""

    def __init__(self, n_columns):
        self.count = 0
        self.sum = np.zeros(n_columns)

    def update(self, block, rows):
        self.sum += block.sum(axis=0, dtype=np.float64)
        self.count += block.shape[0]

    def merge(self, other):
        self.sum += other.sum
        self.count += other.count

    def result(self):
        return self.sum / self.count


class ColumnTopKMean:
    """Mean of the k largest entries of every column."""

    def __init__(self, k):
        self.k = k
        self.top = None

    def update(self, block, rows):
        stacked = block if self.top is None else np.concatenate([self.top, block])
        n = stacked.shape[0]
        self.top = stacked if n <= self.k else np.partition(stacked, n - self.k, axis=0)[n - self.k :]

    def merge(self, other):
        self.update(other.top, None)

    def result(self):
        # Sorted first, so that the mean does not depend on how the bank was split.
        return np.sort(self.top, axis=0).mean(axis=0, dtype=np.float64)


class RowTopKUnion:
    """Boolean mask of the columns that appear in some row's top k (the activation set)."""

    def __init__(self, n_columns, k):
        self.k = k
        self.mask = np.zeros(n_columns, dtype=bool)

    def update(self, block, rows):
        if self.k == 1:
            self.mask[block.argmax(axis=1)] = True
        else:
            self.mask |= top_k_mask(block, self.k).any(axis=0)

    def merge(self, other):
        self.mask |= other.mask


class SortedColumns:
    """The whole probe matrix with every column sorted ascending (O(M N) memory)."""

    def __init__(self):
        self.blocks = []

    def update(self, block, rows):
        self.blocks.append(block)

    def merge(self, other):
        self.blocks.extend(other.blocks)

    def result(self):
        # Column-major, so that each column's sorted values lie together in memory:
        # count_greater then searches one column's values at a time, within cache.
        n_rows = sum(len(block) for block in self.blocks)
        values = np.empty((n_rows, self.blocks[0].shape[1]), dtype=self.blocks[0].dtype, order="F")
        np.concatenate(self.blocks, out=values)
        self.blocks = []
        values.sort(axis=0)
        return values


def top_k_mask(block, k):
    """Mask of each row's k largest entries; among ties, the lowest indices win."""
    n_rows, n_columns = block.shape
    if k >= n_columns:
        return np.ones(block.shape, dtype=bool)
    if k == 1:
        mask = np.zeros(block.shape, dtype=bool)
        mask[np.arange(n_rows), block.argmax(axis=1)] = True
        return mask
    kth = np.partition(block, n_columns - k, axis=1)[:, n_columns - k, None]
    above = block > kth
    at_kth = block == kth
    missing = k - above.sum(axis=1, keepdims=True)
    return above | (at_kth & (np.cumsum(at_kth, axis=1) <= missing))


def row_top_k(block, k, previous=None):
    """The k largest entries of every row, ascending; ``previous`` holds earlier columns'."""
    stacked = block if previous is None else np.concatenate([previous, block], axis=1)
    n_columns = stacked.shape[1]
    if n_columns > k:
        stacked = np.partition(stacked, n_columns - k, axis=1)[:, n_columns - k :]
    return np.sort(stacked, axis=1)


def count_greater(sorted_columns, values, tile_size=1 << 16):
    """``#{i : sorted_columns[i, j] > values[q, j]}`` for every q and j.

    A branchless bisection run on many searches at once: every column has the same
    length, so each of the ceil(log2(M)) + 1 steps moves every search by the same
    offset, in five in-place passes. The searches run column by column (on transposed
    arrays), in tiles of about ``tile_size`` searches, so that the work arrays and the
    values that one column's searches read stay in cache.
    """
    columns_first = np.ascontiguousarray(sorted_columns.T)  # no copy when column-major
    targets = np.ascontiguousarray(values.T)
    counts = np.empty(targets.shape, dtype=np.intp)
    width = max(1, tile_size // max(targets.shape[1], 1))
    for first in range(0, targets.shape[0], width):
        tile = slice(first, first + width)
        counts[tile] = _count_greater_tile(columns_first[tile], targets[tile])
    return counts.T


def _count_greater_tile(columns_first, targets):
    n_columns, n_rows = columns_first.shape
    flat = columns_first.ravel()
    # position[j, q] is the flat index of the largest entry known to be <= targets[j, q]
    # (or of the column's first entry): the search narrows [position, position + span).
    position = np.repeat(np.arange(n_columns) * n_rows, targets.shape[1]).reshape(targets.shape)
    probe, step = np.empty_like(position), np.empty_like(position)
    probed = np.empty(targets.shape, dtype=flat.dtype)
    not_greater = np.empty(targets.shape, dtype=bool)
    span = n_rows
    while span > 1:
        half = span // 2
        np.add(position, half, out=probe)
        np.take(flat, probe, out=probed, mode="clip")  # "clip" writes straight to out
        np.less_equal(probed, targets, out=not_greater)
        np.multiply(not_greater, half, out=step)
        position += step
        span -= half
    np.take(flat, position, out=probed, mode="clip")
    np.less_equal(probed, targets, out=not_greater)
    return n_rows - (position % n_rows + not_greater)


def merge_top_k(best, scores, first_column, k):
    """The k best (score, index) pairs per row of ``best`` and a new column block.

    ``best`` holds earlier, lower-indexed columns; ties go to the lowest gallery
    index, so the result equals a stable sort of the whole row by decreasing score.
    """
    n_rows, n_columns = scores.shape
    local_k = min(k, n_columns)
    mask = top_k_mask(scores, local_k)
    indices = np.nonzero(mask)[1].reshape(n_rows, local_k) + first_column
    values = scores[mask].reshape(n_rows, local_k)
    if best is not None:
        values = np.concatenate([best[1], values], axis=1)
        indices = np.concatenate([best[0], indices], axis=1)
    order = np.argsort(-values, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(indices, order, axis=1), np.take_along_axis(values, order, axis=1)
