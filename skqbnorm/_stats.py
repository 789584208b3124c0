"""The streaming core: reductions over a querybank probe matrix, chunk by chunk.

A normaliser's fit reads the bank-by-gallery similarity matrix ``P`` (M x N) once,
as blocks of bank rows whose size is bounded by a memory budget, and feeds every
block to a few *reducers* that keep only O(N) state (GC's sorted columns excepted).
``P`` is either given (an array or an ``np.memmap``, read block by block) or
computed block by block from bank and gallery embeddings.
"""

import itertools
import os
from functools import partial

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

#: Bound, in MiB of float64, and cap on the rows of a leaf of the fit's reduction
#: trees (see ``ColumnTree``): larger leaves spend less time combining nodes.
LEAF_MEMORY = 16
MAX_LEAF_ROWS = 256


def rows_per_chunk(n_columns, itemsize, working_memory=None, n_buffers=2):
    """Number of rows such that ``n_buffers`` blocks of ``n_columns`` fit the budget."""
    budget = (DEFAULT_WORKING_MEMORY if working_memory is None else working_memory) * 2**20
    return max(1, int(budget // (max(n_columns, 1) * itemsize * n_buffers)))


def prepare_embeddings(embeddings, metric):
    """Embeddings ready for a dot product under ``metric`` (unit rows for cosine).

    For cosine, every row is first scaled by a power of two (exact) to a largest
    magnitude in [0.5, 1), so that its norm neither overflows nor underflows,
    whatever the embeddings' scale (1e200 or 1e-170 alike). The unit rows are
    C-ordered whatever the input's layout, so that their norms sum in one order.
    """
    if metric == "cosine":
        _, exponent = np.frexp(np.abs(embeddings).max(axis=1, initial=0))
        scaled = np.ldexp(embeddings, -exponent[:, None].astype(np.int32), order="C")
        return normalize(scaled, norm="l2", copy=False)
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
    name : str
        What error messages (NaN, overflow) call the bank's rows.
    """

    def __init__(self, bank, gallery_t=None, metric="dot", dtype=np.float64, name="querybank"):
        self.bank = bank
        self.gallery_t = gallery_t
        self.metric = metric
        self.dtype = np.dtype(dtype)
        self.name = name

    @property
    def shape(self):
        n_columns = self.bank.shape[1] if self.gallery_t is None else self.gallery_t.shape[1]
        return self.bank.shape[0], n_columns

    def rows(self, rows):
        """The probe matrix restricted to a range of bank rows."""
        return ProbeMatrix(self.bank[rows], self.gallery_t, self.metric, self.dtype, self.name)

    def block(self, rows, first_row=0):
        """The block ``P[rows]`` as an in-memory array of ``self.dtype``.

        Non-float input (e.g. an int16 memmap) is cast here, one block at a time.
        ``first_row`` numbers the rows in error messages.
        """
        if self.gallery_t is None:
            return np.asarray(self.bank[rows], dtype=self.dtype)
        queries = prepare_embeddings(np.asarray(self.bank[rows], dtype=self.dtype), self.metric)
        first = slice(first_row + rows.start, first_row + rows.stop)
        return embedding_products(queries, self.gallery_t, first, self.name, self.metric)

    def entries(self, rows, columns):
        """The precomputed similarities ``P[rows, columns]`` (index arrays, broadcast) as ``self.dtype``."""
        if self.gallery_t is not None:
            raise NotImplementedError("entries of a probe matrix computed from embeddings")
        bank = self.bank
        rows, columns = np.broadcast_arrays(rows, columns)
        if isinstance(bank, np.ndarray) and bank.flags.c_contiguous:
            flat = rows * bank.shape[1]
            flat += columns
            values = np.take(bank, flat)  # flat indices: a faster gather
        else:
            values = bank[rows, columns]
        return np.asarray(values, dtype=self.dtype)

    def product_rows(self, align=1):
        """Bank rows per matrix product in embedding mode: a power of two, at least ``align``.

        Up to ``MIN_PRODUCT_ROWS`` rows within ``PRODUCT_MEMORY`` MiB (smaller products
        waste the matrix product's packing of the gallery), whatever the budget: BLAS
        may round a row differently in products of other sizes, so the products are
        fixed groups of rows, aligned to absolute row numbers.
        """
        n_columns = self.shape[1]
        affordable = rows_per_chunk(n_columns, self.dtype.itemsize, PRODUCT_MEMORY, n_buffers=1)
        return max(align, 1 << (min(MIN_PRODUCT_ROWS, affordable).bit_length() - 1))

    def alignment(self, align=1):
        """Rows per group that blocks and jobs must keep whole (see ``blocks``)."""
        return align if self.gallery_t is None else self.product_rows(align)

    def blocks(self, working_memory=None, n_buffers=3, first_row=0, align=1):
        """Row blocks within the memory budget, with their rows numbered from ``first_row``.

        Blocks hold whole groups of ``align`` rows (the leaves of the reduction
        trees, see ``ColumnTree``), so a tiny budget still reads one group at a time.
        In embedding mode the similarities are computed in products of
        ``product_rows`` bank rows, then handed on in budget-sized slices.
        ``first_row`` is a multiple of ``alignment(align)``.
        """
        n_rows, n_columns = self.shape
        step = rows_per_chunk(n_columns, self.dtype.itemsize, working_memory, n_buffers)
        step = max(align, step - step % align)
        product_step = step if self.gallery_t is None else self.product_rows(align)
        for start in range(0, n_rows, product_step):
            product = self.block(slice(start, min(start + product_step, n_rows)), first_row)
            for offset in range(0, len(product), step):
                block = product[offset : offset + step]
                rows = slice(first_row + start + offset, first_row + start + offset + len(block))
                self.check(block, rows)
                yield rows, block

    def check(self, block, rows):
        """An error naming the first NaN/inf of a block of the rows numbered ``rows``."""
        check_finite_block(block, rows, self.name)


def all_finite(block):
    """Whether every entry is finite.

    The sum of squares (one BLAS dot product, faster than a sum) is finite unless
    an entry is NaN or infinite or the squares overflow; only then is the slower
    elementwise test needed.
    """
    if block.ndim == 2 and not block.flags.c_contiguous:
        squares = np.einsum("ij,ij->", block, block)  # vdot would copy a strided view
    else:
        squares = np.vdot(block, block)
    return bool(np.isfinite(squares) or np.isfinite(block).all())


def embedding_products(queries, gallery_t, rows, name, metric, first_column=0):
    """``queries @ gallery_t``, or an error naming a non-finite embedding or an overflow."""
    with np.errstate(over="ignore", invalid="ignore"):
        sims = queries @ gallery_t
    if all_finite(sims):
        return sims
    if not all_finite(queries):  # dask banks reach here unchecked
        bad = np.argwhere(~np.isfinite(queries))[0]
        raise ValueError(
            f"Input {name} contains NaN or infinity: embedding {rows.start + bad[0]}, "
            f"dimension {bad[1]} is {queries[tuple(bad)]}."
        )
    bad = np.argwhere(~np.isfinite(sims))[0]
    raise ValueError(
        f"The similarity of {name} row {rows.start + bad[0]} to gallery item "
        f"{first_column + bad[1]} "
        f"overflows {sims.dtype} under metric={metric!r}: the {name} and gallery embeddings "
        f"are too large (largest magnitudes {np.abs(queries).max():.3g} and "
        f"{np.abs(gallery_t).max():.3g}). Rescale them, or use metric='cosine'."
    )


def gallery_item(columns, position):
    """The gallery index of a block's column ``position``; ``columns``: a slice or an index array."""
    return (columns.start or 0) + position if isinstance(columns, slice) else int(columns[position])


def check_finite_block(block, rows, name="querybank", first_column=0, *, row_name=None,
                       item="gallery item", items=None):
    """An error naming the first NaN/inf of ``block``: its row (of ``row_name``) and ``item``.

    The block's columns are the items from ``first_column`` on, or ``items`` (a slice
    or an index array, as ``gallery_item`` reads it).
    """
    if all_finite(block):
        return
    bad = np.argwhere(~np.isfinite(block))[0]
    column = first_column + bad[1] if items is None else gallery_item(items, bad[1])
    raise ValueError(
        f"Input {name} contains NaN or infinity: the similarity of {row_name or name} row "
        f"{rows.start + bad[0]} to {item} {column} is {block[tuple(bad)]}."
    )


def reduce_bank(probe, make_reducers, working_memory=None, n_jobs=None):
    """Reduce the probe matrix with the reducers ``make_reducers()`` returns.

    With several jobs, each reduces a contiguous range of bank rows (threads share
    the bank; under joblib's dask backend each task receives only its rows) within
    its share of ``working_memory``, and the partial reducers are merged. Every
    reducer's result is bitwise independent of the split (see ``ColumnTree``).

    Two optional hooks let a reducer use what the probe allows: ``for_probe(probe)``
    returns the reducer to use in its place (``ColumnTopKMean`` turns into
    ``GroupedColumnTopKMean`` on a precomputed bank, which it reads again), and
    ``reattach(probe)`` hands the merged reducer the probe that a job's copy from
    another process travelled without.
    """
    n_rows = probe.shape[0]
    make_reducers = partial(_reducers_for, probe, make_reducers)
    first = make_reducers()
    align = probe.alignment(alignment(first))  # whole leaves and products per job
    n_groups = -(-n_rows // align)
    n_parts = max(1, min(effective_n_jobs(n_jobs), n_groups))
    if n_parts == 1:
        return _reduce_rows(probe, first, 0, working_memory)
    bounds = np.minimum(np.linspace(0, n_groups, n_parts + 1).astype(int) * align, n_rows)
    share = (DEFAULT_WORKING_MEMORY if working_memory is None else working_memory) / n_parts
    with blas_share(n_parts):
        parts = Parallel(n_jobs=n_jobs, prefer="threads")(
            delayed(_reduce_rows)(
                probe.rows(slice(start, stop)),
                first if start == 0 else make_reducers(),
                start,
                share,
            )
            for start, stop in itertools.pairwise(bounds)
        )
    reducers = parts[0]
    for part in parts[1:]:
        for reducer, other in zip(reducers, part):
            reducer.merge(other)
    for reducer in reducers:  # a job's copy from another process travels without the bank
        if hasattr(reducer, "reattach"):
            reducer.reattach(probe)
    return reducers


def _reducers_for(probe, make_reducers):
    """The reducers of ``make_reducers()``, each replaced by its ``for_probe(probe)`` where it has one."""
    return [reducer.for_probe(probe) if hasattr(reducer, "for_probe") else reducer for reducer in make_reducers()]


def blas_share(n_parts):
    """Context in which each of ``n_parts`` parallel jobs may use its share of the cores.

    The jobs share the cores: BLAS (the embedding products) must not spawn its own
    threads on top, or both oversubscribe.
    """
    return threadpool_limits(limits=max(1, (os.cpu_count() or 1) // n_parts), user_api="blas")


def alignment(reducers):
    """Rows per group that blocks must keep whole: the largest leaf of the reducers' trees."""
    return max((getattr(reducer, "leaf_rows", 1) for reducer in reducers), default=1)


def _reduce_rows(probe, reducers, first_row, working_memory):
    for rows, block in probe.blocks(working_memory, first_row=first_row, align=alignment(reducers)):
        for reducer in reducers:
            reducer.update(block, rows)
    return reducers


def leaf_rows(n_columns):
    """Bank rows per leaf of a ``ColumnTree``: a power of two, from the gallery size alone.

    About ``LEAF_MEMORY`` MiB of float64 and at most ``MAX_LEAF_ROWS`` rows; fit's
    blocks and jobs hold whole leaves, so a block has at least this many rows.
    """
    rows = LEAF_MEMORY * 2**20 // (8 * max(n_columns, 1))
    return 1 << min(MAX_LEAF_ROWS.bit_length() - 1, max(rows, 1).bit_length() - 1)


class ColumnTree:
    """A column reduction combined over one fixed binary tree of the bank rows.

    The leaves are aligned groups of ``leaf_rows(n_columns)`` bank rows; node
    ``(level, index)`` covers leaves ``[index * 2**level, (index + 1) * 2**level)``
    and its value is always its two children's, combined in that order. Blocks and
    jobs hold whole leaves (see ``ProbeMatrix.blocks`` and ``reduce_bank``) and
    contribute whole aligned subtrees, so the root is bitwise the same for every
    split of the bank: the fitted state does not depend on ``working_memory``,
    ``n_jobs`` or dask chunks. A rightmost node whose sibling lies beyond the last
    row is promoted alone (``_promote``).

    Subclasses define ``_leaves(groups)`` (the values of a stack of leaves, each a
    group of rows, the bank's last one padded with ``_padding``), ``_combine(left,
    right)`` (elementwise, so that it serves stacked nodes too) and
    ``_promote(node)``; node values are tuples of float64 arrays.
    """

    _padding = 0.0

    def __init__(self, n_columns):
        self.leaf_rows = leaf_rows(n_columns)
        self.nodes = {}

    def update(self, block, rows):
        if rows.start % self.leaf_rows:
            raise RuntimeError(f"rows {rows} do not start a leaf of {self.leaf_rows} rows")
        block = np.ascontiguousarray(block)  # so that every ufunc runs one code path
        n_full = len(block) // self.leaf_rows
        full = block[: n_full * self.leaf_rows].reshape(n_full, self.leaf_rows, block.shape[1])
        leaves = self._leaves(full)
        if len(block) % self.leaf_rows:  # the bank's last, partial leaf
            last = np.full((1, self.leaf_rows, block.shape[1]), self._padding, dtype=block.dtype)
            last[0, : len(block) % self.leaf_rows] = block[n_full * self.leaf_rows :]
            leaves = tuple(map(np.concatenate, zip(leaves, self._leaves(last))))
        self._add(int(rows.start) // self.leaf_rows, leaves)

    def _add(self, first, leaves):
        """Insert the stacked leaves numbered from ``first`` as aligned subtrees."""
        start, stop = first, first + len(leaves[0])
        while start < stop:
            level = (stop - start).bit_length() - 1
            if start:  # the largest aligned subtree that starts here and fits
                level = min(level, (start & -start).bit_length() - 1)
            nodes = tuple(v[start - first : start - first + (1 << level)] for v in leaves)
            while len(nodes[0]) > 1:
                nodes = self._combine(tuple(v[0::2] for v in nodes), tuple(v[1::2] for v in nodes))
            self._insert(level, start >> level, tuple(v[0] for v in nodes))
            start += 1 << level

    def _insert(self, level, index, node):
        while (sibling := self.nodes.pop((level, index ^ 1), None)) is not None:
            node = self._combine(sibling, node) if index & 1 else self._combine(node, sibling)
            level, index = level + 1, index >> 1
        self.nodes[level, index] = node

    def merge(self, other):
        for (level, index), node in other.nodes.items():
            self._insert(level, index, node)

    def root(self):
        """The root node and its level, once every bank row has been added."""
        nodes = dict(self.nodes)
        while len(nodes) > 1:
            # The lowest node's left sibling is always present (the rows [0, M) are
            # covered), so a missing sibling lies beyond the last row.
            level, index = min(nodes)
            node = nodes.pop((level, index))
            sibling = nodes.pop((level, index ^ 1), None)
            if sibling is None:
                node = self._promote(node)
            else:
                node = self._combine(sibling, node) if index & 1 else self._combine(node, sibling)
            nodes[level + 1, index >> 1] = node
        ((level, _), node), = nodes.items()
        return node, level


class ColumnLogSumExp(ColumnTree):
    """``logsumexp_i(beta * P[i, j]) / beta`` for every column j (a soft maximum).

    A node holds its columns' largest entries ``m`` and the float64 sums of
    ``exp(beta * (P[i, j] - m))``, which lie in [1, rows]. Similarities are
    subtracted before multiplying by beta, so that nothing overflows for finite
    input: an overflowing difference or product gives exp(-inf) = 0, its value to
    float64 precision. Within a leaf, float32 blocks are exponentiated in float32.
    """

    _padding = -np.inf  # contributes exp(-inf) = 0 to the last leaf

    def __init__(self, n_columns, beta):
        super().__init__(n_columns)
        self.beta = float(beta)

    def _leaves(self, groups):
        largest = groups.max(axis=1)
        # A beta beyond float32's range works in float64.
        with np.errstate(over="ignore"):
            in_range = np.isfinite(groups.dtype.type(self.beta))
        with np.errstate(over="ignore", invalid="ignore"):
            if in_range:
                shifted = groups - largest[:, None, :]
            else:
                shifted = np.subtract(groups, largest[:, None, :], dtype=np.float64)
            shifted *= shifted.dtype.type(self.beta)
        np.exp(shifted, out=shifted)
        # numpy sums a middle axis row after row: the same order for every stack.
        return largest.astype(np.float64), shifted.sum(axis=1, dtype=np.float64)

    def _combine(self, left, right):
        (left_max, left_sum), (right_max, right_sum) = left, right
        with np.errstate(over="ignore"):  # an overflow gives -inf, and exp(-inf) = 0
            weight = np.subtract(left_max, right_max)
            np.abs(weight, out=weight)
            weight *= -self.beta
        np.exp(weight, out=weight)
        left_wins = left_max >= right_max
        total = np.where(left_wins, right_sum, left_sum)  # the smaller node's sum, scaled
        total *= weight
        total += np.where(left_wins, left_sum, right_sum)
        return np.maximum(left_max, right_max), total

    def _promote(self, node):
        return node

    def result(self):
        """The soft maxima; inf where ``log(n_bank) / beta`` overflows (callers check)."""
        (largest, total), _ = self.root()
        with np.errstate(over="ignore"):
            return largest + np.log(total) / self.beta


class ColumnMean(ColumnTree):
    """Column mean in float64; a node holds its column sums divided by its row count.

    The count of a node's rows (the last leaf's padding included) is a power of two,
    so the division is exact for normal floats, and it keeps every node within the
    data's range: the sums never overflow.
    """

    def __init__(self, n_columns):
        super().__init__(n_columns)
        self.count = 0

    def update(self, block, rows):
        super().update(block, rows)
        self.count += block.shape[0]

    def merge(self, other):
        super().merge(other)
        self.count += other.count

    def _leaves(self, groups):
        scale = 1.0 / groups.shape[1]  # a power of two: exact
        with np.errstate(over="ignore", invalid="ignore"):
            sums = groups.sum(axis=1, dtype=np.float64)
        sums *= scale
        if not all_finite(sums):  # sums near the float64 maximum: scale first
            scaled = np.multiply(groups, scale, dtype=np.float64).sum(axis=1)
            sums = np.where(np.isfinite(sums), sums, scaled)
        return (sums,)

    @staticmethod
    def _halved_sum(left, right):
        half = np.multiply(left, 0.5, dtype=np.float64)
        half += np.multiply(right, 0.5, dtype=np.float64)
        return half

    def _combine(self, left, right):
        return (self._halved_sum(left[0], right[0]),)

    def _promote(self, node):
        return (node[0] * 0.5,)

    def result(self):
        (scaled_sum,), level = self.root()
        rows_in_root = 2.0**level * self.leaf_rows
        return scaled_sum * (rows_in_root / self.count)


def excess_over_mean(values):
    """``(mean, values - mean)`` of a 1-D array, the mean by ``finite_mean``.

    Equal values have no excess at all: the soft maxima of similarities far below
    ``log(M) / beta`` all round to ``log(M) / beta``, and a mean one ulp off would
    shift every score by more than the similarities themselves.
    """
    mean = float(finite_mean(values, axis=0))
    if len(values) and (values == values[0]).all():
        mean = float(values[0])
    with np.errstate(over="ignore"):  # an overflow shows in the scores, which are checked
        return mean, values - mean


def finite_mean(values, axis):
    """Mean in float64 that does not overflow for finite values near the float64 maximum."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean = values.mean(axis=axis, dtype=np.float64)
    if all_finite(mean):
        return mean
    exponent = int(values.shape[axis]).bit_length()  # 2**exponent > the count: exact scaling
    return np.ldexp(np.ldexp(values, -exponent).mean(axis=axis, dtype=np.float64), exponent)


class ColumnTopKMean:
    """Mean of the k largest entries of every column, from O(kN) state.

    The running top k of each column sets a floor, its k-th largest value; a new
    block's entries above the floor (few, once some blocks are in) are appended to
    the column's buffer, and a column's buffer is merged into its top k (one
    partition of a contiguous row) only when it is full. Each block then costs one
    comparison and one search of its mask, not a partition of its columns.

    This is the reduction for banks read once (embeddings, dask); ``reduce_bank``
    swaps in ``GroupedColumnTopKMean`` (the same result, faster) for a precomputed
    bank (see ``for_probe``).
    """

    #: Rows taken whole at the start: up to WARM_UP * k, within WARM_UP_MEMORY MiB
    #: (and never fewer than k). From the k-th largest of m rows on, about k / m of
    #: each later row's entries are candidates, so a taller start saves many.
    WARM_UP, WARM_UP_MEMORY = 16, 64
    #: Entries a column's buffer holds before they are merged into its top k: small
    #: buffers keep the floors fresh, so that fewer entries pass them.
    CAPACITY = 64

    def __init__(self, k):
        self.k = int(k)  # not a NumPy integer, whose negation wraps around (np.uint8)
        self.pending = []  # the first rows (see WARM_UP)
        self.top = None  # (n_columns, k): each column's k largest so far, unordered
        self.floor = None  # (n_columns,): the smallest of them
        self.buffer = None  # (n_columns, capacity): entries above the floor, -inf padded
        self.fill = None  # (n_columns,): entries in each column's buffer

    def update(self, block, rows):
        if self.top is None:
            self._start(block)
            return
        if len(block) > self.buffer.shape[1]:
            self._widen(len(block))
        flat = np.flatnonzero(block > self.floor)
        if not flat.size:
            return
        n_rows, n_columns = block.shape
        # Grouped by column: a sort of the entries' column-major positions. Flat
        # indices, not index pairs, which numpy gathers and scatters far faster.
        rows, columns = np.divmod(flat, n_columns)
        columns, rows = np.divmod(np.sort(columns * n_rows + rows), n_rows)
        values = np.take(block, rows * n_columns + columns)
        # Work on the columns that have entries only: a block may be a row or two of a
        # gallery of millions.
        starts = np.flatnonzero(np.diff(columns, prepend=-1))
        touched = columns[starts]
        counts = np.diff(starts, append=len(columns))
        capacity = self.buffer.shape[1]
        full = touched[self.fill[touched] + counts > capacity]
        if full.size:
            self._flush(full)
        offsets = self.fill[touched] - starts  # slot = offset + position in the sorted list
        slots = np.arange(len(columns)) + np.repeat(offsets, counts)
        self.buffer.ravel()[columns * capacity + slots] = values
        self.fill[touched] += counts

    def for_probe(self, probe):
        """A precomputed bank can be read again: ``GroupedColumnTopKMean`` where it suits."""
        return GroupedColumnTopKMean(self.k, probe) if GroupedColumnTopKMean.suits(probe, self.k) else self

    def _start(self, block):
        self.pending.append(block)
        affordable = self.WARM_UP_MEMORY * 2**20 // (block.shape[1] * block.itemsize or 1)
        if sum(len(rows) for rows in self.pending) < max(self.k, min(self.WARM_UP * self.k, affordable)):
            return
        self.top = _row_top(np.concatenate(self.pending).T.copy(), self.k)
        self.pending = []
        self.floor = self.top.min(axis=1)
        self.buffer = np.full((len(self.top), self.CAPACITY), -np.inf, dtype=self.top.dtype)
        self.fill = np.zeros(len(self.top), dtype=np.intp)

    def _widen(self, capacity):
        wider = np.full((len(self.buffer), capacity), -np.inf, dtype=self.buffer.dtype)
        wider[:, : self.buffer.shape[1]] = self.buffer
        self.buffer = wider

    def _flush(self, columns):
        """Merge the buffers of ``columns`` into their top k and empty them."""
        kept = _row_top(np.concatenate([self.top[columns], self.buffer[columns]], axis=1), self.k)
        self.top[columns] = kept
        self.floor[columns] = kept.min(axis=1)
        self.buffer[columns] = -np.inf
        self.fill[columns] = 0

    def _settle(self):
        """Each column's k largest so far (all its entries while fewer), one row per column."""
        if self.top is None:
            return _row_top(np.concatenate(self.pending).T, self.k)
        self._flush(np.flatnonzero(self.fill))
        return self.top

    def merge(self, other):
        top, others = self._settle(), other._settle()
        if self.top is None:  # pending rows only
            self.pending = [top.T]
            self._start(others.T)
            return
        self.top = _row_top(np.concatenate([top, others], axis=1), self.k)
        self.floor = self.top.min(axis=1)

    def result(self):
        # Sorted first, and C-ordered (a bank of at most k rows is its transposed view),
        # so that the mean depends neither on how the bank was split nor on its layout.
        return finite_mean(np.ascontiguousarray(np.sort(self._settle(), axis=1)), axis=1)


class GroupedColumnTopKMean:
    """``ColumnTopKMean`` of a precomputed bank, which fit can read again: one pass, then a few entries.

    The pass keeps each column's two largest entries in every group of
    ``leaf_rows`` consecutive bank rows, about ``GROUPS_PER_K * k`` groups (O(kN)
    state). The k-th largest group maximum ``B`` is at most the column's k-th
    largest entry; the k largest group maxima hold k values of at least ``B``, so
    an entry equal to ``B`` adds nothing, and an entry above ``B`` is its group's
    maximum or lies in a group whose second largest is above ``B``. The column's
    top k is therefore among its k largest group maxima and the entries of those
    groups (a few percent of them), which are read again from the bank. This
    replaces the streaming floors' search of every entry, the dearest step, by
    elementwise maxima; the result is bitwise the same.
    """

    #: Groups per unit of k: more groups tighten ``B`` (fewer groups to read again)
    #: and cost memory and a longer partition.
    GROUPS_PER_K = 4
    #: Taller groups (a small k on a tall bank) leave each elementwise step little
    #: work and force tall blocks: the streaming floors serve them.
    MAX_GROUP_ROWS = 128
    #: Bound, in MiB, on the groups' state; beyond it (a gallery of millions) the
    #: streaming floors, whose state is the top k alone.
    STATE_MEMORY = 256
    #: MiB per chunk of the state: few chunks, few pieces to gather per strip, but
    #: below NumPy's 4 MiB for huge pages (8 MiB chunks measured up to 2x slower, as
    #: their pages were dearer to get on a machine whose memory others had churned).
    CHUNK_MEMORY = 2
    #: Bound, in MiB, on the temporaries of the columns finished at a time and of
    #: each batch of groups read again: small arrays, which the allocator reuses,
    #: rather than fresh pages (whose first touch is dear on some machines).
    STRIP_MEMORY = 2

    def __init__(self, k, probe):
        self.k = int(k)
        self.probe = probe
        n_rows, n_columns = probe.shape
        self.leaf_rows = self.group_rows(n_rows, self.k)
        n_groups = -(-n_rows // self.leaf_rows)
        affordable = int(self.CHUNK_MEMORY * 2**20 // (n_columns * probe.dtype.itemsize))
        self.chunk_groups = max(1, min(n_groups, affordable))
        self.chunks = []  # _Chunk, in row order within a job

    @classmethod
    def group_rows(cls, n_rows, k):
        """Rows per group: a power of two (blocks and jobs hold whole groups, see ``alignment``)."""
        return 1 << max(0, round(np.log2(max(n_rows / (cls.GROUPS_PER_K * k), 1))))

    @classmethod
    def suits(cls, probe, k):
        """Whether ``probe`` is precomputed, its groups of 2 to ``MAX_GROUP_ROWS`` rows, and the state fits.

        Groups are no taller than a ``ColumnTree`` leaf, so blocks stay as small as
        the other reducers' (see ``leaf_rows``).
        """
        n_rows, n_columns = probe.shape
        size = cls.group_rows(n_rows, k)
        state = 2 * -(-n_rows // size) * n_columns * probe.dtype.itemsize
        return (
            probe.gallery_t is None
            and 2 <= size <= min(cls.MAX_GROUP_ROWS, leaf_rows(n_columns))
            and n_rows >= 2 * cls.GROUPS_PER_K * k
            and state <= cls.STATE_MEMORY * 2**20
        )

    def __getstate__(self):
        # A job's copy (joblib's dask backend) travels without the bank (see reattach).
        return {**self.__dict__, "probe": None}

    def reattach(self, probe):
        """Hand back the bank that a copy from another process travelled without."""
        self.probe = probe

    def update(self, block, rows):
        group, size = rows.start // self.leaf_rows, self.leaf_rows
        while len(block):
            chunk = self.chunks[-1] if self.chunks else None
            if chunk is None or chunk.full or chunk.next_group != group:
                chunk = _Chunk.empty(group, self.chunk_groups, block.shape[1], block.dtype)
                self.chunks.append(chunk)
            n_groups = min(chunk.room, -(-len(block) // size))
            _group_top_two(block[: n_groups * size], size, out=chunk.take(n_groups))
            block, group = block[n_groups * size :], group + n_groups

    def merge(self, other):
        self.chunks += other.chunks

    def result(self):
        chunks = sorted(self.chunks, key=lambda chunk: chunk.first_group)
        parts = [(chunk.maxima[: chunk.filled], chunk.seconds[: chunk.filled]) for chunk in chunks]
        n_groups, n_columns = sum(len(first) for first, _ in parts), self.probe.shape[1]
        width = max(1, int(self.STRIP_MEMORY * 2**20 // (n_groups * self.probe.dtype.itemsize)))
        means = np.empty(n_columns)
        for start in range(0, n_columns, width):
            columns = slice(start, min(start + width, n_columns))
            firsts = np.concatenate([first[:, columns] for first, _ in parts])
            seconds = np.concatenate([second[:, columns] for _, second in parts])
            means[columns] = self._strip_means(firsts, seconds, start)
        return means

    def _strip_means(self, firsts, seconds, first_column):
        """The means of a strip of columns, from its groups' maxima and second largest (group-major)."""
        n_groups = len(firsts)
        maxima = firsts.T.copy()  # each column's maxima contiguous
        maxima.partition(n_groups - self.k, axis=1)
        bound = maxima[:, n_groups - self.k].copy()
        top = maxima[:, n_groups - self.k :]  # the k largest group maxima, unordered
        pairs = np.flatnonzero(seconds > bound)  # (group, column) pairs to read again
        # Batches of pairs within the budget: a column whose top k sits in a few groups
        # (a sorted column) reads about M / 4 of its entries again.
        batch = max(1, int(self.STRIP_MEMORY * 2**20 // (32 * self.leaf_rows)))
        if not len(pairs):
            top = np.sort(top, axis=1)  # ascending, as the unions leave it: one order of summation
        for start in range(0, len(pairs), batch):
            found = self._entries_beside_maxima(firsts, pairs[start : start + batch], bound, first_column)
            top = _top_k_of_union(top, *found, self.k)
        return finite_mean(top, axis=1)

    def _entries_beside_maxima(self, firsts, pairs, bound, first_column):
        """(column in the strip, value) of every entry above ``bound`` that is not its group's maximum.

        ``pairs`` are the flat (group, column) positions of the groups whose second
        largest exceeds the bound, the only ones that can hold such entries; their rows
        are read again, in row order. One copy of each group's maximum is left out (it
        is among the maxima already); further copies count.
        """
        n_rows = self.probe.shape[0]
        size = self.leaf_rows
        groups, columns = np.divmod(pairs, firsts.shape[1])
        maximum = firsts.ravel()[pairs][:, None]
        rows = groups[:, None] * size + np.arange(size)
        if n_rows % size:  # the last group is partial: its missing rows count as -inf
            past_end = rows >= n_rows
            values = self.probe.entries(np.minimum(rows, n_rows - 1), first_column + columns[:, None])
            values[past_end] = -np.inf
        else:
            values = self.probe.entries(rows, first_column + columns[:, None])
        equal = values == maximum
        beside = (values > bound[columns][:, None]) & ~equal
        kept = np.flatnonzero(beside)
        found_columns, found_values = columns[kept // size], values.ravel()[kept]
        if np.count_nonzero(equal) > len(maximum):  # ties with a group's maximum
            copies = np.count_nonzero(equal, axis=1) - 1
            found_columns = np.concatenate([found_columns, np.repeat(columns, copies)])
            found_values = np.concatenate([found_values, np.repeat(maximum[:, 0], copies)])
        return found_columns, found_values


class _Chunk:
    """Consecutive groups' maxima and second largest entries (rows ``[0, filled)`` written)."""

    def __init__(self, first_group, maxima, seconds):
        self.first_group, self.maxima, self.seconds, self.filled = first_group, maxima, seconds, 0

    @classmethod
    def empty(cls, first_group, n_groups, n_columns, dtype):
        return cls(first_group, np.empty((n_groups, n_columns), dtype), np.empty((n_groups, n_columns), dtype))

    @property
    def room(self):
        return len(self.maxima) - self.filled

    @property
    def full(self):
        return self.room == 0

    @property
    def next_group(self):
        return self.first_group + self.filled

    def take(self, n_groups):
        """The (maxima, seconds) rows of the next ``n_groups`` groups, to be written."""
        rows = slice(self.filled, self.filled + n_groups)
        self.filled += n_groups
        return self.maxima[rows], self.seconds[rows]


def _group_top_two(block, size, out):
    """Write each column's largest and second largest entry in every group of ``size`` rows to ``out``.

    The last group may be partial (the bank's end); a one-row group's second is -inf.
    """
    n_rows, n_columns = block.shape
    if n_rows % size:
        padding = np.full((size - n_rows % size, n_columns), -np.inf, dtype=block.dtype)
        block = np.concatenate([block, padding])
    groups = block.reshape(-1, size, n_columns)
    first, second = out
    if size == 1:
        first[...] = groups[:, 0]
        second[...] = -np.inf
        return
    np.maximum(groups[:, 0], groups[:, 1], out=first)
    np.minimum(groups[:, 0], groups[:, 1], out=second)
    lower = np.empty_like(first)
    for row in range(2, size):  # the rows of a group; each step covers every group and column
        np.minimum(first, groups[:, row], out=lower)
        np.maximum(second, lower, out=second)
        np.maximum(first, groups[:, row], out=first)


def _top_k_of_union(top, columns, values, k):
    """Each row of ``top`` (n_columns x k) with ``values`` added to row ``columns``: its k largest, ascending."""
    counts = np.bincount(columns, minlength=len(top))
    if len(columns) and counts.max() > k:  # a crowded row (a sorted column): its k largest first
        order = np.lexsort((values, columns))
        columns, values = columns[order], values[order]
        from_end = np.cumsum(counts)[columns] - np.arange(len(columns))  # 1 for a row's largest
        columns, values = columns[from_end <= k], values[from_end <= k]
        counts = np.minimum(counts, k)
    else:  # by row: a stable sort of the narrowest integers, a radix sort below 65,536 rows
        order = np.argsort(columns.astype(np.min_scalar_type(len(top))), kind="stable")
        columns, values = columns[order], values[order]
    width = k + (counts.max() if len(columns) else 0)
    union = np.full((len(top), width), -np.inf, dtype=top.dtype)
    union[:, :k] = top
    slots = np.arange(len(columns)) - (np.cumsum(counts) - counts)[columns]
    union.ravel()[columns * width + k + slots] = values
    union.sort(axis=1)
    return union[:, width - k :]


def _row_top(values, k):
    """The k largest entries of every row, unordered (the row itself when it has at most k)."""
    if values.shape[1] <= k:
        return values
    return np.partition(values, values.shape[1] - k, axis=1)[:, -k:].copy()


class RowTopKUnion:
    """Boolean mask of the columns that appear in some row's top k (the activation set)."""

    def __init__(self, n_columns, k):
        self.k = int(k)
        self.mask = np.zeros(n_columns, dtype=bool)

    def update(self, block, rows):
        self.mask[row_top_k_indices(block, self.k)[0]] = True

    def merge(self, other):
        self.mask |= other.mask


def top_k_mask(block, k):
    """Mask of each row's k largest entries; among ties, the lowest indices win."""
    n_rows, n_columns = block.shape
    if k >= n_columns:
        return np.ones(block.shape, dtype=bool)
    mask = np.zeros(block.shape, dtype=bool)
    indices, _ = row_top_k_indices(block, k)
    mask[np.arange(n_rows)[:, None], indices] = True
    return mask


def _partition_top_k_mask(block, k):
    """``top_k_mask`` by a partition of every row: for rows with many near-top entries."""
    n_columns = block.shape[1]
    kth = np.partition(block, n_columns - k, axis=1)[:, n_columns - k, None]
    above = block > kth
    at_kth = block == kth
    missing = k - above.sum(axis=1, keepdims=True)
    return above | (at_kth & (np.cumsum(at_kth, axis=1) <= missing))


def row_top_k_indices(block, k):
    """Each row's k largest entries, best first, ties to the lowest index: (indices, values).

    Equal to a stable sort of each row by decreasing value, cut at k, without
    sorting or partitioning whole rows: the k-th largest of the maxima of disjoint
    groups of a row is at most its k-th largest entry, so only the entries at or
    above that bound (typically a few times k) are candidates.
    """
    n_rows, n_columns = block.shape
    k = min(int(k), n_columns)
    if k == 1:
        best = block.argmax(axis=1)[:, None]
        return best, np.take_along_axis(block, best, axis=1)
    # Many groups (over 4k) tighten the bound, and long runs make the maxima fast.
    n_groups = min(n_columns // 4, max(4 * k, 1024))
    if n_groups < k:  # groups too small for a useful bound
        candidates = _partition_top_k_mask(block, k) if k < n_columns else np.ones(block.shape, bool)
    else:
        width = n_columns // n_groups
        # Interleaved groups (column j in group j % n_groups): a max over a middle axis
        # is an elementwise maximum of contiguous runs, which vectorises.
        maxima = block[:, : n_groups * width].reshape(n_rows, width, n_groups).max(axis=1)
        bound = np.partition(maxima, n_groups - k, axis=1)[:, n_groups - k]
        candidates = block >= bound[:, None]
    flat = np.flatnonzero(candidates)  # row-major: columns ascending within a row
    rows, columns = np.divmod(flat, n_columns)
    counts = np.bincount(rows, minlength=n_rows)
    slots = np.arange(len(flat)) - (np.cumsum(counts) - counts)[rows]
    values = np.full((n_rows, counts.max()), -np.inf, dtype=block.dtype)
    values[rows, slots] = block.ravel()[flat]
    indices = np.zeros(values.shape, dtype=np.intp)
    indices[rows, slots] = columns
    # Padding (-inf) sorts after every finite value; a stable sort keeps ties in column order.
    order = np.argsort(-values, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(indices, order, axis=1), np.take_along_axis(values, order, axis=1)


def row_top_k(block, k, previous=None):
    """The k largest entries of every row, ascending; ``previous`` holds earlier columns'."""
    stacked = block if previous is None else np.concatenate([previous, block], axis=1)
    if stacked.shape[1] <= k:
        return np.sort(stacked, axis=1)
    return row_top_k_indices(stacked, k)[1][:, ::-1]


def merge_top_k(best, scores, first_column, k):
    """The k best (score, index) pairs per row of ``best`` and a new column block.

    ``best`` holds earlier, lower-indexed columns; ties go to the lowest gallery
    index, so the result equals a stable sort of the whole row by decreasing score.
    """
    indices, values = row_top_k_indices(scores, k)
    indices = indices + first_column
    if best is not None:
        values = np.concatenate([best[1], values], axis=1)
        indices = np.concatenate([best[0], indices], axis=1)
    order = np.argsort(-values, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(indices, order, axis=1), np.take_along_axis(values, order, axis=1)


def moments(values, axis):
    """Mean and population standard deviation over ``axis``, in float64 (see ColumnMoments).

    Two passes about the first entry, in units of a power of two per result (exact),
    set by the largest magnitude: nothing overflows or underflows at any scale, and
    a constant gives exactly its value and a standard deviation of exactly 0.
    """
    if values.dtype == np.float32:
        # float32 values, their differences and squares neither overflow nor underflow
        # in float64: the scaling, exact and so bitwise neutral, is not needed.
        exponent = 0
        scaled = values.astype(np.float64)
    else:
        largest = np.maximum(values.max(axis=axis), -values.min(axis=axis))
        # |values| < 2**exponent; a product by the power of two is exact, and far faster
        # than ldexp (the floor keeps 2**-exponent finite).
        exponent = np.maximum(np.frexp(largest)[1], -1022)
        factor = np.expand_dims(np.ldexp(1.0, -exponent), axis)
        scaled = np.multiply(values, factor, dtype=np.float64)
    first = np.take(scaled, [0], axis=axis)
    scaled -= first
    shift = scaled.sum(axis=axis, keepdims=True) / values.shape[axis]
    scaled -= shift
    np.square(scaled, out=scaled)
    std = np.sqrt(scaled.sum(axis=axis) / values.shape[axis])
    return np.ldexp((first + shift).squeeze(axis), exponent), np.ldexp(std, exponent)


class ColumnMoments(ColumnTree):
    """Column mean and population standard deviation in float64, over a fixed tree.

    A node holds its row count and its columns' mean and standard deviation, all
    within the data's range (a standard deviation never exceeds the largest
    magnitude), so nothing overflows for finite input near the float64 maximum.
    Leaves are reduced by ``moments``; nodes combine by the pairwise update of Chan,
    Golub and LeVeque (1979), also in units of a power of two per column, set by
    the largest mean or standard deviation, so that the squares neither overflow
    nor underflow. The bank's last leaf, when partial, is reduced over its own rows
    (no padding).
    """

    def __init__(self, n_columns, leaf_rows=None):
        super().__init__(n_columns)
        if leaf_rows is not None:
            self.leaf_rows = leaf_rows

    def update(self, block, rows):
        whole = len(block) - len(block) % self.leaf_rows
        super().update(block[:whole], slice(rows.start, rows.start + whole))
        if whole < len(block):
            last = np.ascontiguousarray(block[whole:])[None]
            self._add((int(rows.start) + whole) // self.leaf_rows, self._leaves(last))

    def _leaves(self, groups):
        # numpy sums a middle axis row after row: the same order for every stack
        # (with one column, each leaf is one contiguous run: the same too).
        counts = np.full((len(groups), 1), float(groups.shape[1]))
        return (counts, *moments(groups, axis=1))

    def _combine(self, left, right):
        (n_left, mean_left, std_left), (n_right, mean_right, std_right) = left, right
        count = n_left + n_right
        w_left, w_right = n_left / count, n_right / count
        largest = np.maximum(
            np.maximum(np.abs(mean_left), np.abs(mean_right)), np.maximum(std_left, std_right)
        )
        exponent = np.frexp(largest)[1]
        m_left, m_right, s_left, s_right = (
            np.ldexp(value, -exponent) for value in (mean_left, mean_right, std_left, std_right)
        )
        delta = m_right - m_left
        mean = m_left + w_right * delta  # exactly m_left where the means agree
        variance = w_left * s_left**2 + w_right * s_right**2 + (w_left * w_right) * delta**2
        return count, np.ldexp(mean, exponent), np.ldexp(np.sqrt(variance), exponent)

    def _promote(self, node):
        return node

    def result(self):
        """The column means and population standard deviations."""
        (_, mean, std), _ = self.root()
        return mean, std


class RowMoments:
    """Mean and population standard deviation of every row, fed its columns in order.

    The columns are cut into aligned leaves of ``LEAF_COLUMNS``, each reduced by
    ``moments`` over a contiguous run (numpy's pairwise sum depends on the run's
    length only), and the leaves combined over one fixed tree (``ColumnMoments``'s),
    so the result is bitwise the same for every cut of the rows into column chunks
    and of the queries into row blocks: ``top_k``'s streamed rows agree with
    ``transform``'s whole rows. Columns of a leaf not yet complete wait in
    ``pending`` (fewer than ``LEAF_COLUMNS`` per row).
    """

    LEAF_COLUMNS = 256

    def __init__(self):
        self.tree, self.pending, self.start, self.moments = None, None, 0, None

    def update(self, block):
        """Add the next columns of the rows; returns self."""
        if self.tree is None:
            self.tree = ColumnMoments(len(block), leaf_rows=self.LEAF_COLUMNS)
        values = block if self.pending is None else np.concatenate([self.pending, block], axis=1)
        whole = values.shape[1] - values.shape[1] % self.LEAF_COLUMNS
        if whole:
            self._add_leaves(values[:, :whole], self.LEAF_COLUMNS)
        self.pending = values[:, whole:]
        return self

    def _add_leaves(self, values, width):
        leaves = np.ascontiguousarray(values).reshape(len(values), -1, width)
        mean, std = moments(leaves, axis=2)
        counts = np.full((leaves.shape[1], 1), float(width))
        self.tree._add(self.start // self.LEAF_COLUMNS, (counts, mean.T, std.T))
        self.start += values.shape[1]

    def result(self):
        """The rows' means and standard deviations, once every column has been added."""
        if self.moments is None:
            if self.pending.shape[1]:  # the last, partial leaf
                self._add_leaves(self.pending, self.pending.shape[1])
            self.moments = self.tree.result()
        return self.moments
