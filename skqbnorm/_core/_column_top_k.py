"""The mean of every column's k largest entries (CSLS's and NNN's bank statistic)."""

import numpy as np

from ._moments import finite_mean
from ._parallel import in_product_threads
from ._probe import product_rows
from ._top_k import places_in_rows
from ._trees import leaf_rows


class ColumnTopKMean:
    """Mean of the k largest entries of every column, from O(kN) state.

    The running top k of each column sets a floor, its k-th largest value; a new
    block's entries above the floor (few, once some blocks are in) are appended to
    the column's buffer, and a column's buffer is merged into its top k (one
    partition of a contiguous row) only when it is full. Each block then costs one
    comparison and one search of its mask, not a partition of its columns.

    This is the reduction for banks read once (dask, embeddings under
    ``metric="dot"``); ``reduce_bank`` swaps in ``GroupedColumnTopKMean`` (the same
    result, faster) for a precomputed bank (see ``for_probe``), and ``reduce_rows``
    ``BankRowColumnTopKMean`` for cosine embeddings (see ``for_bank_rows``).
    """

    #: Rows taken whole at the start: up to WARM_UP * k, within WARM_UP_MEMORY MiB
    #: (and never fewer than k). From the k-th largest of m rows on, about k / m of
    #: each later row's entries are candidates, so a taller start saves many.
    WARM_UP, WARM_UP_MEMORY = 16, 64
    #: Entries a column's buffer holds before they are merged into its top k: small
    #: buffers keep the floors fresh, so that fewer entries pass them.
    CAPACITY = 64
    #: Blocks are read and forgotten: a product buffer may be reused for the next.
    keeps_blocks = False

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

    def for_bank_rows(self, gallery_t):
        """``BankRowColumnTopKMean``, to be fed unit bank rows (see ``reduce_rows``)."""
        return BankRowColumnTopKMean(self.k, gallery_t)

    def for_probe(self, probe):
        """A precomputed bank can be read again: ``GroupedColumnTopKMean`` where it suits."""
        return GroupedColumnTopKMean(self.k, probe) if GroupedColumnTopKMean.suits(probe, self.k) else self

    def _start(self, block):
        self.pending.append(block.T.copy())  # one row per column; the block may be reused
        affordable = self.WARM_UP_MEMORY * 2**20 // (block.shape[1] * block.itemsize or 1)
        if sum(rows.shape[1] for rows in self.pending) < max(self.k, min(self.WARM_UP * self.k, affordable)):
            return
        columns = np.concatenate(self.pending, axis=1)  # at least k entries a column
        columns.partition(columns.shape[1] - self.k, axis=1)
        self.top = columns[:, -self.k :].copy()
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
            return _row_top(np.concatenate(self.pending, axis=1), self.k)
        self._flush(np.flatnonzero(self.fill))
        return self.top

    def merge(self, other):
        top, others = self._settle(), other._settle()
        if self.top is None:  # pending rows only
            self.pending = [top]
            self._start(others.T)
            return
        self.top = _row_top(np.concatenate([top, others], axis=1), self.k)
        self.floor = self.top.min(axis=1)

    def result(self):
        return _top_k_mean(self._settle())


class BankRowColumnTopKMean:
    """``ColumnTopKMean`` of cosine similarities, fed the unit bank rows (see ``reduce_rows``).

    The rows are kept in batches of ``product_rows`` rows, aligned to absolute row
    numbers as the products are. A batch meets the gallery a strip of
    ``STRIP_COLUMNS`` items at a time, ``gallery[strip] @ batch.T``: the
    similarities arrive one row per gallery item, beside that item's running top
    k, and a partition (NumPy's selection) keeps the k largest; the strips run on
    as many threads as the BLAS had, each product on one (``one_blas_thread``). No
    block is transposed or searched; per entry the product and a partition of
    about ``k + product_rows`` entries. The k largest entries of a
    column are the same values for any exact method, and ``result`` sorts them
    before their mean: bitwise ``ColumnTopKMean``'s result on the same products.
    """

    #: Gallery items per product: with a batch of 2,048 float32 rows and k = 256,
    #: a thread's 9 MiB of products and tops.
    STRIP_COLUMNS = 1024
    #: Bank rows are copied into the batch: a block may be reused.
    keeps_blocks = False

    def __init__(self, k, gallery_t):
        self.k = int(k)
        self.gallery = gallery_t.T  # (N, d): the prepared gallery's own rows
        self.batch_rows = product_rows(gallery_t.shape[1], gallery_t.dtype.itemsize)
        self.pending, self.batch_end = [], None
        self.top = None  # (N, at most k): each column's k largest so far, unordered

    def update(self, block, rows):
        start = rows.start
        while len(block):
            if self.batch_end is None:
                self.batch_end = (start // self.batch_rows + 1) * self.batch_rows
            taken = min(len(block), self.batch_end - start)
            self.pending.append(np.array(block[:taken]))
            block, start = block[taken:], start + taken
            if start == self.batch_end:
                self._merge_batch()

    def _merge_batch(self):
        """Each gallery item's similarities to the batch, merged into its top k: strips
        of items on as many threads as the BLAS had, each product on one thread."""
        if not self.pending:
            return
        batch = np.concatenate(self.pending)
        self.pending, self.batch_end = [], None
        n_rows, kept = len(batch), 0 if self.top is None else self.top.shape[1]
        n_values, n_columns = n_rows + kept, len(self.gallery)
        top = np.empty((n_columns, min(self.k, n_values)), dtype=batch.dtype)
        strips = [slice(start, min(start + self.STRIP_COLUMNS, n_columns))
                  for start in range(0, n_columns, self.STRIP_COLUMNS)]

        def merge_strips(group):
            buffer = np.empty((min(self.STRIP_COLUMNS, n_columns), n_values), dtype=batch.dtype)
            for strip in group:
                values = buffer[: strip.stop - strip.start]
                np.matmul(self.gallery[strip], batch.T, out=values[:, :n_rows])
                if kept:
                    values[:, n_rows:] = self.top[strip]
                if n_values > self.k:
                    values.partition(n_values - self.k, axis=1)
                top[strip] = values[:, n_values - top.shape[1] :]

        in_product_threads(merge_strips, strips)
        self.top = top

    def _settle(self):
        self._merge_batch()
        return self.top

    def merge(self, other):
        top, others = self._settle(), other._settle()
        self.top = others if top is None else top if others is None else _row_top(
            np.concatenate([top, others], axis=1), self.k)

    def result(self):
        return _top_k_mean(self._settle())


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
    #: below NumPy's 4 MiB for huge pages, which are dearer to get when memory is
    #: fragmented.
    CHUNK_MEMORY = 2
    #: Bound, in MiB, on the temporaries of the columns finished at a time and of
    #: each batch of groups read again: small arrays, which the allocator reuses,
    #: rather than fresh pages (whose first touch costs a page fault each).
    STRIP_MEMORY = 2
    #: Blocks are read and forgotten (the bank itself is read again, not a block).
    keeps_blocks = False

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
    slots = places_in_rows(columns, counts)
    union.ravel()[columns * width + k + slots] = values
    union.sort(axis=1)
    return union[:, width - k :]


def _top_k_mean(top):
    """The mean of each row of ``top`` (a column's k largest entries, unordered).

    Sorted first, and C-ordered (a bank of at most k rows is its transposed view),
    so that the mean depends neither on how the bank was split, nor on its layout,
    nor on the method that found the k largest.
    """
    return finite_mean(np.ascontiguousarray(np.sort(top, axis=1)), axis=1)


def _row_top(values, k):
    """The k largest entries of every row, unordered (the row itself when it has at most k)."""
    if values.shape[1] <= k:
        return values
    return np.partition(values, values.shape[1] - k, axis=1)[:, -k:].copy()
