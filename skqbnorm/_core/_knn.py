"""Exact nearest rows: float32 products find the candidates, float64 values decide.

A float32 product of row blocks runs about twice as fast as float64's and streams half
the memory, but its rounding can swap near neighbours. So each row keeps as
candidates every entry within a proven bound of the float32 rounding of its k-th
largest (bounded from below by the maxima of groups of entries, without partitioning
whole rows), and only the candidates are computed again in float64, which decides:
the result is that of a float64 search over all pairs, ties to the lower index,
whatever the block size. Equal rows are searched once (``equal_rows``): their copies
would tie, all candidates, in every row near them.

The margin. For rows a, b of d entries, u = 2^-24 and ``a~`` the float32 rounding of
``a``, the float32 product ``fl(a~ . b~)`` (any order of its sums, fused or not) is
within ``gamma_d |a~|.|b~|`` of ``a~ . b~``, ``gamma_d = d u / (1 - d u)`` (Higham,
Accuracy and Stability of Numerical Algorithms, 3.1); ``|a~ - a| <= u |a|``
entrywise puts ``a~ . b~`` within ``(2u + u^2) |a|.|b|`` of ``a . b``; and
``|a~|.|b~| <= (1 + u)^2 |a|.|b| <= (1 + u)^2 ||a|| ||b||`` (Cauchy-Schwarz). An input
or a product that underflows errs by at most 2^-150 more (times the other factor's
magnitude); a sum never does. The float64 value of the pair is within
``gamma64_d ||a|| ||b||`` of ``a . b`` (u = 2^-53). So the float32 entry (i, j)
and the float64 value of the same pair differ by at most ``E_i`` (``dot_error`` with
``||b||`` the largest row norm; ``distance_products`` for squared distances).

If k entries of row i are at least ``t`` in float32, their float64 values are at least
``t - E_i``, hence so is the row's k-th largest float64 value, and every entry of
the float64 top k is at least ``t - 2 E_i`` in float32: the candidates. ``t``: the
k-th largest of the maxima of disjoint groups of entries, which is at most the k-th
largest entry. Every bound is rounded towards safety: up by a few float64 ulps for
its own arithmetic, the threshold then down to the next float32.
"""

import numpy as np
from sklearn.utils import gen_batches

from ._machine import gathered_values, machine
from ._memory import rows_per_chunk
from ._parallel import in_product_threads
from ._top_k import grouped_entries, places_in_rows

#: Entries per group: a row's group maxima (group g holds the entries g, g + n_groups,
#: ...) are an elementwise maximum of contiguous runs, one pass over the block.
GROUP = 8

#: A bound from fewer groups than this many times k is loose: the entries themselves
#: are partitioned instead.
GROUPS_PER_NEIGHBOUR = 4

#: Entries per group for a row's smallest entry, which one or two groups hold: wider
#: groups leave fewer minima to read again.
LOW_GROUP = 64

#: float64 values gathered at once to compute the candidates' values (half a CPU's
#: share of the last-level cache: ``gathered_values``), for at most this many rows.
PAIR_VALUES = gathered_values(machine())
PAIR_ROWS = 64

U32 = 2.0**-24
U64 = 2.0**-53


def gamma(n, unit):
    """``n u / (1 - n u)``: the relative error bound of a sum of n rounded products."""
    return n * unit / (1.0 - n * unit)


def dot_error(d):
    """``(relative, absolute)``: the float32 product of the float32 roundings of rows a,
    b of d entries of magnitude at most 1 is within ``relative ||a|| ||b|| + absolute``
    of their float64 product."""
    relative = gamma(d, U32) * (1 + U32) ** 2 + 2 * U32 + U32**2 + gamma(d, U64)
    return relative, d * 2.0**-147  # underflows: 3 d 2^-150, and a float64 sum's


def safe_up(bound):
    """A float64 bound raised past the rounding of the dozen operations that formed it."""
    return bound * (1 + 32 * U64) + np.finfo(np.float64).smallest_subnormal


def threshold32(values, direction):
    """float32 thresholds at or beyond ``values`` in ``direction`` (-inf: below, inf: above),
    ``values`` being the float64 rounding of the exact thresholds."""
    values = np.nextafter(values, direction)  # past the last rounding of values
    rounded = values.astype(np.float32)
    short = rounded < values if direction > 0 else rounded > values
    return np.where(short, np.nextafter(rounded, np.float32(direction)), rounded)


def euclidean_neighbors(features, n_neighbors, *, working_memory=None):
    """Each row's ``n_neighbors`` nearest other rows (Euclidean distance), exactly.

    The neighbours of scikit-learn's brute-force
    ``NearestNeighbors(n_neighbors).fit(X).kneighbors()`` in exact arithmetic: the
    ``n_neighbors + 1`` rows nearest each row (itself included), ties to the lower
    index, less the row itself, or less the first if more than ``n_neighbors``
    duplicates of lower index crowd it out. A row is thus not its own neighbour, but
    its duplicates are. (scikit-learn's own choice among rows tied at the last place
    follows its heap or tree, not their index.)

    Parameters
    ----------
    features : array-like of shape (n_items, n_features)
        Finite features.
    n_neighbors : int
        Neighbours per row, ``1 <= n_neighbors < n_items``.
    working_memory : float, default=None
        MiB of float32 products per block of rows (default ``DEFAULT_WORKING_MEMORY``);
        the result does not depend on it.

    Returns
    -------
    indices : ndarray of shape (n_items, n_neighbors)
        Nearest first, ties to the lower index.
    distances : ndarray of shape (n_items, n_neighbors)
        Their distances, from the rows' differences in float64 (0 for duplicates),
        scaled first by a power of two so that no square overflows.
    """
    features = np.asarray(features, dtype=np.float64)
    n_items = len(features)
    if not 1 <= n_neighbors < n_items:
        raise ValueError(f"n_neighbors must be in [1, {n_items - 1}] for {n_items} items; "
                         f"got {n_neighbors}.")
    exponent = int(np.frexp(np.abs(features).max(initial=0.0))[1])
    scaled = np.ldexp(features, -exponent)  # magnitudes below 1
    # Equal rows are searched once: n copies of a row would tie in n columns of every
    # row near them, all candidates.
    groups = equal_rows(scaled)
    distinct = scaled if groups is None else scaled[groups.first]

    def negative_squares(first, columns):
        return -squared_distances(distinct, first, columns)

    k = min(n_neighbors + 1, len(distinct))
    indices, values, _ = exact_row_top_k(*distance_products(distinct), k, negative_squares,
                                         working_memory=working_memory)
    if groups is not None:
        indices, values = groups.items(indices, values, n_neighbors + 1)
    indices, values = drop_self(indices, values)
    return indices, np.ldexp(np.sqrt(-values), exponent)


class EqualRows:
    """Groups of equal rows: ``first[g]``, the lowest row of group g (the groups in the
    order of their first rows), and ``group[i]``, the group of row i."""

    def __init__(self, first, group):
        self.first, self.group = first, group
        self.members = np.argsort(group, kind="stable")  # by group, then row
        self.counts = np.bincount(group, minlength=len(first))
        self.starts = np.cumsum(self.counts) - self.counts

    def items(self, top, values, k):
        """Rows of groups to rows of items: each item's k first rows by (value, row),
        from its group's ``top`` groups (by decreasing ``values``, then first row)."""
        indices = np.empty((len(top), k), dtype=np.intp)
        found = np.empty((len(top), k))
        step = max(1, PAIR_VALUES // (top.shape[1] * k))
        for first in range(0, len(top), step):
            rows = slice(first, first + step)
            indices[rows], found[rows] = self._expanded(top[rows], values[rows], k)
        return indices[self.group], found[self.group]

    def _expanded(self, top, values, k):
        # Each top group gives its first k rows (ties between groups interleave by row),
        # so every row's first k are among them.
        taken = np.minimum(self.counts[top], k).ravel()
        position = np.arange(taken.sum()) - np.repeat(np.cumsum(taken) - taken, taken)
        rows = self.members[np.repeat(self.starts[top.ravel()], taken) + position]
        found = np.repeat(values.ravel(), taken)
        owner = np.repeat(np.arange(len(top)), taken.reshape(top.shape).sum(axis=1))
        order = np.lexsort((rows, -found, owner))
        chosen = order[(np.searchsorted(owner[order], np.arange(len(top)))[:, None]
                        + np.arange(k)).ravel()]
        return rows[chosen].reshape(len(top), k), found[chosen].reshape(len(top), k)


def equal_rows(rows):
    """``EqualRows`` of ``rows`` (float64), or None if every row is distinct."""
    if len(rows) < 2:
        return None
    bits = np.ascontiguousarray(rows + 0.0).view(np.uint64)  # +0.0: -0.0 equals 0.0
    # A hash of each row's bits: equal rows hash alike; distinct ones almost never do.
    weights = np.arange(1, 2 * bits.shape[1], 2, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    hashes = np.sort((bits * weights).sum(axis=1))
    if not np.any(hashes[1:] == hashes[:-1]):
        return None
    _, first, group = np.unique(rows + 0.0, axis=0, return_index=True, return_inverse=True)
    if len(first) == len(rows):
        return None
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return EqualRows(first[order], rank[group.ravel()])


def distance_products(features):
    """float32 factors ``left``, ``right`` whose product ranks each row's distances, and
    the bound ``error`` on its rounding, row by row.

    ``(left @ right)[i, j]`` is ``2 c_i . c_j - |c_j|^2 = |c_i|^2 - |x_i - x_j|^2`` (larger
    is nearer), with ``c = x - mean`` the centred rows of ``features`` (magnitudes below
    1): a translation leaves distances exact and makes the rounding, which grows with
    the norms, smallest. ``error[i]`` bounds the difference of row i's float32 entries
    and ``|c_i|^2`` less the float64 squared distances, to the same rows.
    """
    n_items, n_features = features.shape
    centred = features - features.mean(axis=0)
    squares = np.einsum("ij,ij->i", centred, centred)
    left = np.ones((n_items, n_features + 1), dtype=np.float32)
    left[:, :-1] = centred
    right = np.empty((n_features + 1, n_items), dtype=np.float32)
    right[:-1] = 2 * left[:, :-1].T  # exact
    right[-1] = -squares
    return left, right, distance_error(squares, n_features)


def distance_error(squares, d):
    """The bound ``E_i`` of ``distance_products`` from the rows' float64 squared norms.

    With y the exact centred rows and n_j = |y_j|^2: c~ = fl32(fl64(x - mean)) is within
    u' = u + 2^-50 of y entrywise (u = 2^-24), n~_j = fl32(fl64(|c_j|^2)) within nu n_j
    of n_j, and the d + 1 products of [c~_i, 1] . [2 c~_j, -n~_j] round by at most
    g (2 |c~_i|.|c~_j| + n~_j), g = gamma_{d+1}. The first two terms below follow, the
    third is the float64 squared distances' rounding (relative gamma64_{d+3}, of at most
    (|y_i| + |y_j|)^2), the last the underflows (entries up to 4, n~ up to 4 d). R and
    the norms are raised past their float64 rounding.
    """
    unit = U32 + 2.0**-50
    norms = np.sqrt(squares) * (1 + gamma(d + 4, U64))
    largest = norms.max(initial=0.0)
    nu = U32 + (1 + U32) * gamma(d + 4, U64)
    g = gamma(d + 1, U32)
    error = ((2 * g * (1 + unit) ** 2 + 2 * (2 * unit + unit**2)) * norms * largest
             + (g * (1 + nu) + nu) * largest**2
             + gamma(d + 3, U64) * (norms + largest) ** 2
             + (d + 1) * (4 * d + 1) * 2.0**-146)
    return safe_up(error)


def squared_distances(features, first, columns):
    """``|x_i - x_j|^2`` for the rows ``i = first, first + 1, ...`` and the columns ``j`` of
    their rows of ``columns``, from the differences (as ``edge_lengths`` computes them:
    the same sums, to the bit)."""
    differences = features[columns]
    differences -= features[first:first + len(columns), None, :]
    return np.einsum("imd,imd->im", differences, differences)


def drop_self(indices, values):
    """scikit-learn's rule: each row less itself, or less its first entry if it is absent."""
    n_items, k = indices.shape
    keep = indices != np.arange(n_items)[:, None]
    keep[keep.all(axis=1), 0] = False
    return indices[keep].reshape(n_items, k - 1), values[keep].reshape(n_items, k - 1)


def cosine_top_k(unit, k, *, least=False, working_memory=None):
    """Each row's ``k`` largest cosine similarities (itself included, at exactly 1).

    Parameters
    ----------
    unit : ndarray of shape (n_items, n_features)
        Unit or zero rows, float64 (``prepare_embeddings(x, "cosine")``).
    k : int
        Entries per row, >= 1 (at most ``n_items`` are returned).
    least : bool, default=False
        Whether to find each row's smallest similarity too.
    working_memory : float, default=None
        MiB of float32 products per block of rows (default ``DEFAULT_WORKING_MEMORY``);
        the result does not depend on it.

    Returns
    -------
    indices : ndarray of shape (n_items, min(k, n_items))
        Largest first, ties to the lower index.
    similarities : ndarray of shape (n_items, min(k, n_items))
        ``unit[i] . unit[j]`` in float64 (1 for ``i == j``).
    smallest : ndarray of shape (n_items,) or None
        Each row's smallest float64 similarity, with ``least``.
    """
    unit = np.ascontiguousarray(unit, dtype=np.float64)
    n_items = len(unit)
    k = min(k, n_items)
    groups = equal_rows(unit)
    if groups is None:
        return cosine_products_top_k(unit, k, least, working_memory, unit_diagonal=True)
    # Equal rows are searched once; a row's copies have the product of its group with
    # itself, the row itself 1.
    distinct = unit[groups.first]
    top, values, smallest = cosine_products_top_k(
        distinct, min(k + 1, len(distinct)), "off-diagonal" if least else False,
        working_memory, unit_diagonal=False)
    indices, values = with_itself(*groups.items(top, values, min(k + 1, n_items)), k)
    if least:
        own = inner_products(distinct, 0, np.arange(len(distinct))[:, None], diagonal=None)[:, 0]
        copies = np.where(groups.counts > 1, own, np.inf)
        smallest = np.minimum(np.minimum(smallest, copies)[groups.group], 1.0)
    return indices, values, smallest


def cosine_products_top_k(unit, k, least, working_memory, unit_diagonal):
    """``exact_row_top_k`` of the cosine similarities of ``unit``'s rows."""
    n_features = unit.shape[1]
    left = unit.astype(np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", unit, unit)) * (1 + gamma(n_features + 4, U64))
    relative, absolute = dot_error(n_features)
    error = safe_up(relative * norms * norms.max(initial=0.0) + absolute)

    def products(first, columns):
        return inner_products(unit, first, columns, 1.0 if unit_diagonal else None)

    return exact_row_top_k(left, np.ascontiguousarray(left.T), error, k, products,
                           unit_diagonal=unit_diagonal, least=least, working_memory=working_memory)


def with_itself(indices, values, k):
    """Each row i's k first entries once its own entry's value, if any, is 1 (and it is
    there): the copies of a row have its product with itself, the row 1."""
    n_rows = len(indices)
    itself = np.arange(n_rows)[:, None]
    values = np.concatenate([np.ones((n_rows, 1)), np.where(indices == itself, -np.inf, values)],
                            axis=1)
    indices = np.concatenate([itself, indices], axis=1)
    order = np.lexsort((indices, -values), axis=1)[:, :k]
    return np.take_along_axis(indices, order, axis=1), np.take_along_axis(values, order, axis=1)


def inner_products(unit, first, columns, diagonal=1.0):
    """``unit[i] . unit[j]`` in float64 for the rows ``i = first, first + 1, ...`` and the
    columns ``j`` of their rows of ``columns``; ``diagonal`` for ``i == j`` unless None."""
    rows = np.arange(first, first + len(columns))
    products = np.einsum("id,imd->im", unit[rows], unit[columns])
    if diagonal is not None:
        products[columns == rows[:, None]] = diagonal
    return products


def exact_row_top_k(left, right, error, k, exact, *, unit_diagonal=False, least=False,
              working_memory=None):
    """Each row's k largest exact values of a matrix, found from its float32 products.

    Parameters
    ----------
    left, right : float32 ndarrays of shapes (n_rows, d) and (d, n_columns)
        Factors whose product is within ``error[i]`` of the exact values of row i
        (before ``unit_diagonal``).
    error : ndarray of shape (n_rows,)
    k : int
        Entries per row, ``1 <= k <= n_columns``.
    exact : callable
        ``exact(first, columns)``: the float64 values of the rows ``first, first + 1,
        ...`` at the columns of their rows of ``columns`` (2-D; the same shape).
    unit_diagonal : bool
        Whether entry ``(i, i)`` is 1 whatever the product (a row's similarity to itself).
    least : bool or "off-diagonal"
        Whether to find each row's smallest exact value too (but that of ``(i, i)``).
    working_memory : float or None
        MiB of float32 products per block of rows (default ``DEFAULT_WORKING_MEMORY``);
        the blocks run on as many threads as the BLAS has, one block in memory each.

    Returns
    -------
    indices, values : ndarrays of shape (n_rows, k)
        Largest first, ties to the lower column.
    smallest : ndarray of shape (n_rows,) or None
    """
    n_rows, n_columns = len(left), right.shape[1]
    step = min(rows_per_chunk(n_columns, 4, working_memory, n_buffers=1), max(n_rows, 1))
    indices = np.empty((n_rows, k), dtype=np.intp)
    values = np.empty((n_rows, k))
    smallest = np.empty(n_rows) if least else None
    n_features = left.shape[1]

    def search(blocks):
        buffer = np.empty((step, n_columns), dtype=np.float32)  # one a thread, reused by its blocks
        for rows in blocks:
            start, stop = rows.start, rows.stop
            block = buffer[: stop - start]
            np.matmul(left[start:stop], right, out=block)
            if unit_diagonal:
                block[np.arange(stop - start), np.arange(start, stop)] = 1.0
            bound = error[start:stop]
            candidates = top_candidates(block, k, bound)
            columns, found = exact_values(exact, start, *candidates, len(block), n_features, -np.inf)
            order = np.lexsort((columns, -found), axis=1)[:, :k]
            indices[start:stop] = np.take_along_axis(columns, order, axis=1)
            values[start:stop] = np.take_along_axis(found, order, axis=1)
            if least:
                if least == "off-diagonal":
                    block[np.arange(stop - start), np.arange(start, stop)] = np.inf
                candidates = bottom_candidates(block, bound)
                found = exact_values(exact, start, *candidates, len(block), n_features, np.inf)[1]
                smallest[start:stop] = found.min(axis=1)

    blocks = list(gen_batches(n_rows, step))
    if len(blocks) == 1:
        search(blocks)
    else:
        # Each thread multiplies its blocks on one BLAS thread and selects from them
        # while they are in cache; the result is exact whatever rounds the products.
        in_product_threads(search, blocks)
    return indices, values, smallest


def top_candidates(block, k, error):
    """``(rows, columns)`` of the entries that may be among their row's k largest exact
    values: those within ``2 error`` of a lower bound of the row's k-th largest entry."""
    n_columns = block.shape[1]
    n_groups = n_columns // GROUP
    if k >= n_columns:
        return np.nonzero(np.ones(block.shape, dtype=bool))
    if n_groups < GROUPS_PER_NEIGHBOUR * k:  # too few groups: the entries themselves
        kth = np.partition(block, n_columns - k, axis=1)[:, n_columns - k]
        threshold = threshold32(kth - 2 * error, -np.inf)
        return np.nonzero(block >= threshold[:, None])
    maxima = group_extremes(block, np.maximum)
    coarse = maxima
    if n_groups // GROUP >= GROUPS_PER_NEIGHBOUR * k:
        coarse = group_extremes(maxima, np.maximum)  # maxima of groups of groups
    kth = np.partition(coarse, coarse.shape[1] - k, axis=1)[:, coarse.shape[1] - k]
    threshold = threshold32(kth - 2 * error, -np.inf)
    return grouped_entries(block, maxima >= threshold[:, None], threshold, np.greater_equal, GROUP)


def bottom_candidates(block, error):
    """``(rows, columns)`` of the entries that may be their row's smallest exact value:
    those within ``2 error`` of the row's smallest entry."""
    if block.shape[1] < LOW_GROUP:
        threshold = threshold32(block.min(axis=1) + 2 * error, np.inf)
        return np.nonzero(block <= threshold[:, None])
    minima = group_extremes(block, np.minimum, LOW_GROUP)
    tail = block[:, minima.shape[1] * LOW_GROUP:]
    lowest = np.minimum(minima.min(axis=1), tail.min(axis=1, initial=np.inf))
    threshold = threshold32(lowest + 2 * error, np.inf)
    return grouped_entries(block, minima <= threshold[:, None], threshold, np.less_equal,
                           LOW_GROUP)


def group_extremes(block, extreme, width=GROUP):
    """Each row's ``extreme`` (``np.maximum`` or ``np.minimum``) over its groups of
    ``width`` entries (group g: columns g, g + n_groups, ...); the last
    ``n_columns % width`` columns are in no group."""
    n_rows, n_columns = block.shape
    n_groups = n_columns // width
    return extreme.reduce(block[:, : n_groups * width].reshape(n_rows, width, n_groups), axis=1)


def exact_values(exact, start, rows, columns, n_rows, n_features, padding):
    """The candidates of a block's rows (``start + rows``) as a table: ``(columns,
    values)`` of shape (n_rows, most candidates of a row), the values from ``exact``,
    rows of fewer candidates padded with ``padding``."""
    order = np.argsort(rows, kind="stable")
    rows, columns = rows[order], columns[order]
    counts = np.bincount(rows, minlength=n_rows)
    table = np.repeat(np.arange(start, start + n_rows)[:, None], counts.max(initial=0), axis=1)
    table[rows, places_in_rows(rows, counts)] = columns
    values = np.full(table.shape, padding)
    # A few rows at a time, as wide as their longest: padding costs little.
    step = min(PAIR_ROWS, max(1, PAIR_VALUES // (max(n_features, 1) * max(table.shape[1], 1))))
    for first in range(0, n_rows, step):
        width = counts[first:first + step].max(initial=0)
        values[first:first + step, :width] = exact(start + first, table[first:first + step, :width])
    values[np.arange(table.shape[1]) >= counts[:, None]] = padding
    return table, values
