"""Column reductions over a fixed binary tree of bank rows: bitwise the same for every split."""

import numpy as np

from ._finite import all_finite
from ._memory import power_of_two_rows
from ._moments import moments
from ._parallel import one_blas_thread

#: Bound, in MiB of float64, and cap on the rows of a leaf of the fit's reduction
#: trees (see ``ColumnTree``): larger leaves spend less time combining nodes. Fixed,
#: not from the machine: the leaves fix the order of the sums, hence the rounding.
LEAF_MEMORY = 16
MAX_LEAF_ROWS = 256

def leaf_rows(n_columns):
    """Bank rows per leaf of a ``ColumnTree``: a power of two, from the gallery size alone.

    About ``LEAF_MEMORY`` MiB of float64 and at most ``MAX_LEAF_ROWS`` rows; fit's
    blocks and jobs hold whole leaves, so a block has at least this many rows.
    """
    return power_of_two_rows(n_columns, 8, LEAF_MEMORY, MAX_LEAF_ROWS)


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
    #: Nodes are new arrays: a block may be reused once ``update`` returns.
    keeps_blocks = False

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

    The mean is linear in the rows: from cosine embeddings it is fed the unit bank
    rows instead of their products with the gallery (``for_bank_rows``, see
    ``reduce_rows``), and ``result`` is the gallery's product with the mean bank
    row, all in float64: a d-vector per row instead of N products.
    """

    def __init__(self, n_columns):
        super().__init__(n_columns)
        self.count = 0
        self.gallery_t = None

    def for_bank_rows(self, gallery_t):
        """A fresh column mean over the same leaves, to be fed bank rows: its ``result``
        maps their mean through ``gallery_t`` (d x N)."""
        reducer = ColumnMean(gallery_t.shape[1])
        reducer.leaf_rows, reducer.gallery_t = self.leaf_rows, gallery_t
        return reducer

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
        mean = scaled_sum * (rows_in_root / self.count)
        if self.gallery_t is None:
            return mean
        return _through_gallery(self.gallery_t, lambda gallery: mean @ gallery)


#: Gallery columns per float64 product where a bank-row statistic meets the gallery:
#: fixed, so that no budget changes how a column's dot products are summed.
RESULT_COLUMNS = 4096
#: The largest embedding dimension for which ``ColumnMoments`` keeps the bank rows'
#: covariance (d x d float64 per tree node) instead of reading the products.
MAX_COVARIANCE_DIMS = 2048


def _through_gallery(gallery_t, statistic):
    """``statistic(gallery)`` of float64 pieces of ``RESULT_COLUMNS`` columns of ``gallery_t``, joined.

    On one BLAS thread: a matrix product may round by its thread count.
    """
    n_columns = gallery_t.shape[1]
    with one_blas_thread():
        pieces = [statistic(gallery_t[:, start : start + RESULT_COLUMNS].astype(np.float64))
                  for start in range(0, n_columns, RESULT_COLUMNS)]
    return np.concatenate(pieces, axis=-1) if pieces else np.zeros(0)


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

    def for_bank_rows(self, gallery_t):
        """``BankRowMoments`` over the same leaves, to be fed bank rows (see ``reduce_rows``),
        or None (read the products) where the covariance would cost more than they do."""
        n_dims, n_columns = gallery_t.shape
        if n_dims > min(MAX_COVARIANCE_DIMS, n_columns):
            return None
        return BankRowMoments(gallery_t, self.leaf_rows)

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


class BankRowMoments(ColumnMoments):
    """``ColumnMoments`` of the similarities from the bank rows' mean and covariance.

    For unit bank rows ``b`` and gallery columns ``g``, the similarities ``b . g``
    have the mean ``mu . g`` and the variance ``g' C g``, with ``mu`` and ``C`` the
    rows' mean and population covariance. A node holds its row count, mean row and
    the sum of the outer products of its rows about that mean (d x d); nodes combine
    by the same pairwise update (Chan, Golub and LeVeque, 1979) over the same fixed
    tree, so the result is as independent of the split. Everything is float64: the
    statistics are closer to exact than those of the float32 products.
    """

    #: Leaves reduced together: their d x d outer products are stacked.
    LEAVES_PER_STEP = 4

    def __init__(self, gallery_t, leaf_rows):
        super().__init__(gallery_t.shape[1], leaf_rows)
        self.gallery_t = gallery_t

    def update(self, block, rows):
        step = self.LEAVES_PER_STEP * self.leaf_rows
        for start in range(0, len(block), step):
            part = block[start : start + step]
            super().update(part, slice(rows.start + start, rows.start + start + len(part)))

    def _leaves(self, groups):
        counts = np.full((len(groups), 1), float(groups.shape[1]))
        rows = groups.astype(np.float64)
        mean = rows.mean(axis=1)
        rows -= mean[:, None, :]
        return counts, mean, np.matmul(rows.transpose(0, 2, 1), rows)

    def _combine(self, left, right):
        (n_left, mean_left, scatter_left), (n_right, mean_right, scatter_right) = left, right
        count = n_left + n_right
        delta = mean_right - mean_left
        mean = mean_left + delta * (n_right / count)
        outer = delta[..., :, None] * delta[..., None, :]
        outer *= (n_left * n_right / count)[..., None]
        scatter = scatter_left + scatter_right
        scatter += outer
        return count, mean, scatter

    def result(self):
        """The similarities' column means and population standard deviations."""
        (count, mean, scatter), _ = self.root()
        covariance = scatter / count[..., None]

        def moments_of(gallery):
            variance = np.einsum("dn,dn->n", covariance @ gallery, gallery)
            return np.stack([mean @ gallery, np.sqrt(np.maximum(variance, 0.0))])

        column_mean, column_std = _through_gallery(self.gallery_t, moments_of)
        return column_mean, column_std


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

    @classmethod
    def given(cls, mean, std):
        """The state of rows whose moments are known (e.g. from embeddings): ``result()`` is them."""
        state = cls()
        state.moments = (mean, std)
        return state

    def take(self, rows):
        """The finished state of some of the rows (an index of them)."""
        mean, std = self.result()
        return self.given(mean[rows], std[rows])

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
