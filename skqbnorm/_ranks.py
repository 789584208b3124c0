"""Rank statistics: a probe matrix's sorted columns, and counts of entries above a value.

Globally-corrected retrieval and the empiric mutual proximity score a similarity by
its rank among the bank's similarities to the same gallery item, so their fit keeps
every column sorted (O(M N) memory) and their transform counts in it.

Counting is a table look-up and a short bisection (:class:`ColumnRanks`): each column
is cut into buckets on a uniform value grid, an arithmetic function of the value, and
a table gives where each bucket's entries end. A value's count is then known to lie in
a window of a few entries, which a branchless bisection searches exactly. Every
count is exact (an integer): the bucket function is monotone and is applied, in the
same arithmetic, to the column's entries and to the values searched.
"""

import itertools

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs


class SortedColumns:
    """The whole probe matrix with every column sorted ascending (O(M N) memory).

    With several jobs, each copies and sorts its own strip of columns, in threads
    (the strips are written in place, whatever joblib backend is active).
    """

    def __init__(self, n_jobs=None):
        self.n_jobs = n_jobs
        self.blocks = []

    def update(self, block, rows):
        self.blocks.append(block)

    def merge(self, other):
        self.blocks.extend(other.blocks)

    def result(self):
        # Column-major, so that each column's sorted values lie together in memory,
        # and count_greater searches within one column's values at a time.
        n_rows = sum(len(block) for block in self.blocks)
        n_columns = self.blocks[0].shape[1]
        values = np.empty((n_rows, n_columns), dtype=self.blocks[0].dtype, order="F")
        n_strips = max(1, min(effective_n_jobs(self.n_jobs), n_columns))
        bounds = np.linspace(0, n_columns, n_strips + 1).astype(int)
        strips = [slice(start, stop) for start, stop in itertools.pairwise(bounds)]
        if n_strips == 1:
            self._sort_strip(values, strips[0])
        else:
            Parallel(n_jobs=n_strips, require="sharedmem")(
                delayed(self._sort_strip)(values, strip) for strip in strips
            )
        self.blocks = []
        return values

    def _sort_strip(self, values, strip):
        np.concatenate([block[:, strip] for block in self.blocks], out=values[:, strip])
        values[:, strip].sort(axis=0)


class SortedRows:
    """Every row's values sorted ascending, from its columns in chunks (O(n_columns) a row)."""

    def __init__(self):
        self.chunks, self.sorted = [], None

    def update(self, block):
        """Add the next columns of the rows; returns self."""
        self.chunks.append(block)
        return self

    def result(self):
        if self.sorted is None:
            self.sorted = np.sort(np.concatenate(self.chunks, axis=1), axis=1)
            self.chunks = []
        return self.sorted


class ColumnRanks:
    """Sorted columns, and per column a table of buckets for counting in it.

    Bucket ``b`` of column ``j`` holds the entries ``x`` with ``bucket(x) = b``,
    where ``bucket(v) = floor(clip(v * scale_j + shift_j, 0, n_buckets - 1))`` in
    the columns' float dtype, a non-decreasing function of ``v``: an entry in a
    lower bucket than ``v`` is below ``v``, one in a higher bucket above it. So
    ``#{i : x_i <= v}`` lies between the start and the end of ``v``'s bucket, and
    the table keeps, per bucket, the first entry of a window of ``window`` entries
    that ends where the bucket ends. A bucket of more entries than the window (ties,
    a skewed column) is marked, and its values are searched over the whole column.

    The grid spans each column from its ``1/200`` quantile to its ``199/200``
    quantile (an outlier does not stretch it), in one bucket per two entries: the
    table holds ``n_rows / 2`` unsigned 16-bit integers per column (a quarter of
    the memory of float32 columns) for up to 65,534 rows, 32-bit beyond. It is built
    at the first count, so that a fit costs only the sort.

    Counts are written tile by tile (about ``tile_size`` values, whole columns), the
    values of a column together, so that the work arrays stay in cache and the
    columns are read in order; the only arrays of the values' size are the counts.

    Parameters
    ----------
    sorted_columns : ndarray of shape (n_rows, n_columns)
        Every column sorted ascending. Column-major avoids a copy. Counts are exact
        for finite columns; a NaN or an infinity (a query's own row, which
        transform then refuses) gives some count without failing.
    tile_size : int, default=65536
        About how many values are searched at once (at least one column's).
    """

    window = 15  # 2**4 - 1: four bisection steps
    buckets_per_row = 0.5

    def __init__(self, sorted_columns, tile_size=1 << 16):
        self.sorted = np.asfortranarray(sorted_columns)
        self.tile_size = tile_size
        n_rows, n_columns = self.sorted.shape
        self.window = min(self.window, n_rows)
        self.n_buckets = max(1, int(n_rows * self.buckets_per_row))
        table_dtype = np.uint16 if n_rows < np.iinfo(np.uint16).max else np.uint32
        self.overfull = table_dtype(np.iinfo(table_dtype).max)  # marks a bucket over the window
        self.column_start = np.arange(n_columns) * n_rows
        self._set_grid()
        self._table = self._overfull_columns = None

    @property
    def table(self):
        """Built at the first count, so that fitting costs only the sort."""
        if self._table is None:
            self._table, self._overfull_columns = self._build_table()
        return self._table

    def __getstate__(self):
        # A pickle need not carry the table.
        return {**self.__dict__, "_table": None, "_overfull_columns": None}

    def _set_grid(self):
        """Per column, the scale and shift that map its central values onto the buckets."""
        dtype = np.result_type(self.sorted.dtype, np.float32)
        trim = self.sorted.shape[0] // 200
        low = self.sorted[trim].astype(dtype)
        high = self.sorted[-1 - trim].astype(dtype)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            # Halves: the spread of finite columns stays finite.
            scale = dtype.type(self.n_buckets * 0.5) / (high * 0.5 - low * 0.5)
            # Any positive finite scale gives a monotone bucket function: a constant
            # or too narrow a column takes 1, its entries in a bucket or two.
            scale[~(np.isfinite(scale) & (scale > 0) & np.isfinite(low * scale))] = 1.0
            shift = -(low * scale)
            shift[~np.isfinite(shift)] = 0.0  # a column with an infinity (a query's row)
            self.scale, self.shift = scale, shift
        self.bucket_start = np.arange(self.sorted.shape[1]) * self.n_buckets

    def _build_table(self):
        n_rows, n_columns = self.sorted.shape
        table = np.empty(n_columns * self.n_buckets, dtype=self.overfull.dtype)
        overfull_columns = np.empty(n_columns, dtype=bool)
        width = max(1, (1 << 20) // n_rows)
        for first in range(0, n_columns, width):
            columns = slice(first, min(first + width, n_columns))
            buckets = self._buckets(self.sorted[:, columns].T, columns)
            # A NaN (in a query's row, to be refused) stays in its column's buckets.
            np.maximum(buckets, self.bucket_start[columns, None], out=buckets)
            buckets -= self.bucket_start[first]
            n_buckets = (columns.stop - first) * self.n_buckets
            ends = np.bincount(buckets.ravel(), minlength=n_buckets).reshape(-1, self.n_buckets)
            np.cumsum(ends, axis=1, out=ends)
            sizes = np.diff(ends, axis=1, prepend=0)
            window_start = np.maximum(ends - self.window, 0)
            overfull = sizes > self.window
            window_start[overfull] = self.overfull
            overfull_columns[columns] = overfull.any(axis=1)
            table[first * self.n_buckets : columns.stop * self.n_buckets] = window_start.ravel()
        return table, overfull_columns

    def _buckets(self, values, columns):
        """Table index of the bucket of every ``values[j, q]`` in column ``columns[j]``."""
        with np.errstate(over="ignore", invalid="ignore"):  # clipped; a NaN gets some bucket
            # Values of another dtype are first rounded to the columns': monotone too.
            key = np.multiply(values, self.scale[columns, None], dtype=self.scale.dtype)
            key += self.shift[columns, None]
            np.clip(key, 0, self.n_buckets - 1, out=key)
            index = np.empty(key.shape, dtype=np.intp)
            np.copyto(index, key, casting="unsafe")  # truncation: the floor of a key >= 0
        index += self.bucket_start[columns, None]
        return index

    def count_greater(self, values, columns=slice(None), out=None):
        """``#{i : sorted[i, c] > values[q, j]}``, c the j-th column of ``columns``.

        Written into ``out`` (any real dtype; an intp array by default) and returned.
        """
        out = np.empty(np.shape(values), dtype=np.intp) if out is None else out
        self._count(values, columns, (np.less_equal,), (out,))
        return out

    def count_greater_by_column(self, values, columns, dtype=np.intp):
        """``#{i : sorted[i, columns[j]] > values[j, q]}``: row ``j`` of C-contiguous
        ``values`` holds values to count in column ``columns[j]`` (an index array).

        For a caller that tiles by itself (:meth:`tiles`) and finishes the counts
        in the same layout, while they are in cache; ``dtype`` the counts' (a float
        dtype saves a conversion where they meet floats).
        """
        out = np.empty(values.shape, dtype=dtype)
        self._count_tile(values, columns, (np.less_equal,), (out,))
        return out

    def count_below_midpoint(self, values, columns=slice(None)):
        """``#{i : sorted[i, c] < v} + #{i : sorted[i, c] == v} / 2``, v = values[q, j].

        Both counts come from one search: the bucket of ``v`` bounds them both.
        """
        above = np.empty(np.shape(values), dtype=np.float64)
        at_least = np.empty_like(above)
        self._count(values, columns, (np.less_equal, np.less), (above, at_least))
        above += at_least
        above *= -0.5
        above += self.sorted.shape[0]
        return above

    def tiles(self, n_values, n_columns):
        """Slices of ``n_columns`` columns, each about ``tile_size`` values of ``n_values`` rows."""
        width = max(1, self.tile_size // max(n_values, 1))
        return [slice(start, min(start + width, n_columns)) for start in range(0, n_columns, width)]

    def _count(self, values, columns, compares, outs):
        """Per compare ``c``, ``#{i : not c(sorted[i, col], v)}`` into ``outs``, tile by tile."""
        values = np.asarray(values)
        columns = np.arange(self.sorted.shape[1])[columns]  # a slice or the columns' indices
        for tile in self.tiles(*values.shape):
            self._count_tile(
                np.ascontiguousarray(values[:, tile].T),  # a column's values together
                columns[tile],
                compares,
                [out[:, tile].T for out in outs],
            )

    def _count_tile(self, targets, columns, compares, outs):
        # "clip": a NaN value's bucket index is arbitrary (and "wrap" loops over it).
        window_start = self.table.take(self._buckets(targets, columns), mode="clip")
        starts = np.add(window_start, self.column_start[columns, None], dtype=np.intp)
        column_end = self.column_start[columns, None] + self.sorted.shape[0]
        flat = self.sorted.ravel(order="F")  # a view
        for number, (compare, out) in enumerate(zip(compares, outs)):
            last = number == len(compares) - 1
            position = bisect(flat, starts if last else starts.copy(), targets, self.window, compare)
            np.subtract(column_end, position, out=out, casting="unsafe")
        if self._overfull_columns[columns].any():
            self._count_overfull(targets, columns, window_start, compares, outs)

    def _count_overfull(self, targets, columns, window_start, compares, outs):
        """Redo, over the whole column, the values whose bucket is larger than the window."""
        column, query = np.nonzero(window_start == self.overfull)
        values = targets[column, query]
        column_start = self.column_start[columns][column]
        for compare, out in zip(compares, outs):
            position = bisect(
                self.sorted.ravel(order="F"), column_start.copy(), values, self.sorted.shape[0], compare
            )
            out[column, query] = column_start + self.sorted.shape[0] - position


def bisect(flat, position, values, span, compare):
    """Branchless bisection: ``position + #{k < span : compare(flat[position + k], v)}``.

    For every search, ``compare`` must hold on a prefix of ``flat[position:position +
    span]`` (true for ``<=`` or ``<`` on sorted values). Every search takes the same
    steps, in a few whole-array passes each: ``j`` for a span of ``2**j - 1`` (its
    ``2**j`` possible counts, one bit a step), ``ceil(log2(span)) + 1`` for another.
    ``position`` is updated in place and returned.
    """
    probed = np.empty(position.shape, dtype=flat.dtype)
    hit = np.empty(position.shape, dtype=bool)
    # Steps below 256 in bytes: the byte product is cheap, and so is its widening sum.
    step = np.empty(position.shape, dtype=np.uint8 if span < 256 else position.dtype)
    hits = hit.view(np.uint8) if span < 256 else hit

    def advance(by):
        np.multiply(hits, step.dtype.type(by), out=step)
        np.add(position, step, out=position)

    # Every position probed is in range: "wrap" never wraps, and writes straight to out.
    if span & (span + 1) == 0:
        bit = (span + 1) // 2
        while bit:  # the count's bits, highest first
            flat[bit - 1 :].take(position, out=probed, mode="wrap")  # flat[position + bit - 1]
            compare(probed, values, out=hit)
            advance(bit)
            bit //= 2
        return position
    while span > 1:
        half = span // 2
        flat[half:].take(position, out=probed, mode="wrap")  # flat[position + half]
        compare(probed, values, out=hit)
        advance(half)
        span -= half
    flat.take(position, out=probed, mode="wrap")
    compare(probed, values, out=hit)
    position += hit
    return position


def count_greater(sorted_columns, values, tile_size=1 << 16):
    """``#{i : sorted_columns[i, j] > values[q, j]}`` for every q and j."""
    return ColumnRanks(sorted_columns, tile_size).count_greater(values)


def count_below_midpoint(sorted_columns, values):
    """``#{i : sorted_columns[i, j] < v} + #{i : sorted_columns[i, j] == v} / 2``, v = values[q, j]."""
    return ColumnRanks(sorted_columns).count_below_midpoint(values)
