"""Row selection: each row's top 1 and top k, ties to the lowest column, without sorting
rows; the best k of candidate lists; and the rows of a row state."""

import numpy as np


class RowTopKUnion:
    """Boolean mask of the columns that appear in some row's top k (the activation set)."""

    keeps_blocks = False

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
def row_top1(block, first_column=0, previous=None):
    """Each row's largest entry and its column, ties to the lowest column: (values, columns).

    ``first_column`` numbers the block's columns. ``previous`` is the result over the
    earlier columns of the same rows, which an equal value does not displace: the
    top-1 of rows fed in column chunks, in order, is that of the whole rows.
    """
    columns = block.argmax(axis=1)
    values = block[np.arange(len(block)), columns]
    if first_column:
        columns += first_column
    if previous is None:
        return values, columns
    better = values > previous[0]
    return np.where(better, values, previous[0]), np.where(better, columns, previous[1])


def row_top_k_indices(block, k):
    """Each row's k largest entries, best first, ties to the lowest index: (indices, values).

    Equal to a stable sort of each row by decreasing value, cut at k, without
    sorting or partitioning whole rows (see ``_row_candidates``).
    """
    k = min(int(k), block.shape[1])
    if k == 1:
        values, best = row_top1(block)
        return best[:, None], values[:, None]
    values, indices = _row_candidates(block, k, with_indices=True)
    # Padding (-inf) sorts after every finite value; a stable sort keeps ties in column order.
    order = np.argsort(-values, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(indices, order, axis=1), np.take_along_axis(values, order, axis=1)


def _row_candidates(block, k, with_indices=False):
    """Each row's candidates for its k largest entries, -inf padded, columns ascending: (values, indices).

    The k-th largest of the maxima of disjoint groups of a row is at most its k-th
    largest entry, so only the entries at or above that bound (typically a few
    times k) are candidates. ``indices`` is None unless ``with_indices``.
    """
    n_rows, n_columns = block.shape
    # Many groups (over 4k) tighten the bound, and long runs make the maxima fast.
    n_groups = min(n_columns // 4, max(4 * k, 1024))
    if n_groups < k:  # groups too small for a useful bound
        candidates = _partition_top_k_mask(block, k) if k < n_columns else np.ones(block.shape, bool)
        flat = np.flatnonzero(candidates)  # row-major: columns ascending within a row
    else:
        block = np.ascontiguousarray(block)
        width = n_columns // n_groups
        # Interleaved groups (column j in group j % n_groups): a max over a middle axis
        # is an elementwise maximum of contiguous runs, which vectorises.
        maxima = block[:, : n_groups * width].reshape(n_rows, width, n_groups).max(axis=1)
        bound = np.partition(maxima, n_groups - k, axis=1)[:, n_groups - k]
        # Only the groups whose maximum reaches the bound hold candidates (a few k).
        rows, columns = grouped_entries(block, maxima >= bound[:, None], bound, np.greater_equal, width)
        flat = np.sort(rows * n_columns + columns)  # columns ascending within a row
    rows, columns = np.divmod(flat, n_columns)
    counts = np.bincount(rows, minlength=n_rows)
    slots = places_in_rows(rows, counts)
    values = np.full((n_rows, counts.max()), -np.inf, dtype=block.dtype)
    values[rows, slots] = block.ravel()[flat]
    if not with_indices:
        return values, None
    indices = np.zeros(values.shape, dtype=np.intp)
    indices[rows, slots] = columns
    return values, indices


def grouped_entries(block, selected, threshold, compare, width):
    """``(rows, columns)`` of the entries, of the ``selected`` groups (of ``width``
    entries) and of no group, that ``compare(entry, threshold[row])``."""
    n_columns = block.shape[1]
    n_groups = selected.shape[1]
    groups = np.flatnonzero(selected)
    rows = groups // n_groups
    # Flat indices into the block: group g of row i starts at i n_columns + g.
    entries = (groups + rows * (n_columns - n_groups))[:, None] + n_groups * np.arange(width)
    found = entries[compare(block.ravel().take(entries), threshold[rows, None])]
    tail_rows, tail_columns = np.nonzero(compare(block[:, n_groups * width:], threshold[:, None]))
    found = np.concatenate([found, tail_rows * n_columns + tail_columns + n_groups * width])
    return np.divmod(found, n_columns)


def places_in_rows(rows, counts):
    """Each entry's place among its row's entries (0, 1, ...): the entries sorted by
    ``rows``, ``counts`` the number of entries of every row."""
    return np.arange(len(rows)) - (np.cumsum(counts) - counts)[rows]


def row_top_k(block, k, previous=None):
    """The k largest entries of every row, ascending; ``previous`` holds earlier columns'."""
    stacked = block if previous is None else np.concatenate([previous, block], axis=1)
    if stacked.shape[1] <= k:
        return np.sort(stacked, axis=1)
    values, _ = _row_candidates(stacked, int(k))  # the values alone: no stable order to keep
    top = np.partition(values, values.shape[1] - k, axis=1)[:, values.shape[1] - k :]
    top.sort(axis=1)
    return top


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


def take_rows(row_state, rows):
    """The part of a row state (None, an array, a tuple of arrays, or an object with
    ``take(rows)``) that belongs to a block of rows."""
    if row_state is None:
        return None
    if hasattr(row_state, "take") and not isinstance(row_state, np.ndarray):
        return row_state.take(rows)
    if isinstance(row_state, tuple):
        return tuple(part[rows] for part in row_state)
    return row_state[rows]


def best_k(candidates, scores, k):
    """Each row's k best candidates by decreasing score, ties to the lowest index (-1 last)."""
    order = np.lexsort((np.where(candidates < 0, np.iinfo(np.intp).max, candidates), -scores), axis=1)
    order = order[:, :k]
    return np.take_along_axis(candidates, order, axis=1), np.take_along_axis(scores, order, axis=1)
