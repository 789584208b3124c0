"""Rank statistics: a probe matrix's sorted columns, and counts of entries above a value.

Globally-corrected retrieval and the empiric mutual proximity score a similarity by
its rank among the bank's similarities to the same gallery item, so their fit keeps
every column sorted (O(M N) memory) and their transform counts by bisection.
"""

import numpy as np


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


def count_below_midpoint(sorted_columns, values):
    """``#{i : sorted_columns[i, j] < v} + #{i : sorted_columns[i, j] == v} / 2``, v = values[q, j].

    Two bisections (``count_greater``): the entries above v, and those above the
    float just below v in the common dtype, that is, at least v.
    """
    values = values.astype(np.result_type(sorted_columns.dtype, values.dtype), copy=False)
    above = count_greater(sorted_columns, values)
    at_least = count_greater(sorted_columns, np.nextafter(values, -np.inf))
    return sorted_columns.shape[0] - (above + at_least) * 0.5
