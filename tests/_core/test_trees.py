"""The column trees (skqbnorm._core._trees): leaf sizes, the fixed combination order,
soft maxima, means and moments against closed forms and values written out by hand."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import logsumexp

import skqbnorm._core._trees
from skqbnorm._core import (
    ColumnLogSumExp,
    ColumnMean,
    ColumnMoments,
    ColumnTree,
    ProbeMatrix,
    RowMoments,
    leaf_rows,
    reduce_bank,
)

from helpers import unit_rows


@pytest.mark.slow
@pytest.mark.parametrize("leaf_cap", [1, 4, 256])
def test_column_moments_against_closed_forms(monkeypatch, leaf_cap):
    monkeypatch.setattr(skqbnorm._core._trees, "MAX_LEAF_ROWS", leaf_cap)
    for n_rows in range(1, 20):
        # 1..n: mean (n + 1) / 2, variance (n^2 - 1) / 12; and a constant column
        columns = np.column_stack([np.arange(1.0, n_rows + 1), np.full(n_rows, 0.1)])
        for working_memory, n_jobs in [(1e-5, 1), (1e-5, 2), (None, 1)]:
            (moments,) = reduce_bank(
                ProbeMatrix(columns), lambda: [ColumnMoments(2)], working_memory, n_jobs
            )
            mean, std = moments.result()
            assert_allclose(mean, [(n_rows + 1) / 2, 0.1], rtol=1e-15)
            assert_allclose(std[0], np.sqrt((n_rows**2 - 1) / 12), rtol=1e-14, atol=1e-15)
            assert std[1] == 0.0 and mean[1] == 0.1  # exactly constant


@pytest.mark.parametrize("scale", [2.0**-1060, 1e-300, 1.0, 1e300])
def test_column_moments_at_any_scale(rng, scale):
    values = rng.normal(size=(700, 5)) + 2.0
    (moments,) = reduce_bank(ProbeMatrix(values * scale), lambda: [ColumnMoments(5)])
    mean, std = moments.result()
    rtol = 1e-13 if scale > 1e-307 else 1e-2  # subnormals keep only a few digits
    assert_allclose(mean / scale, values.mean(axis=0), rtol=rtol)
    assert_allclose(std / scale, values.std(axis=0), rtol=rtol)


def test_column_moments_near_the_float64_maximum(rng):
    values = rng.uniform(-1.7, 1.7, size=(600, 4)) * 1e308  # sums and squares overflow
    (moments,) = reduce_bank(ProbeMatrix(values), lambda: [ColumnMoments(4)])
    mean, std = moments.result()
    scaled = values * 2.0**-600
    assert_allclose(mean, scaled.mean(axis=0) * 2.0**600, rtol=1e-12)
    assert_allclose(std, scaled.std(axis=0) * 2.0**600, rtol=1e-14)


@pytest.mark.parametrize("cuts", [[1000], [3, 300, 600], [256, 512], [255, 257, 999]])
def test_row_moments_independent_of_the_column_chunks(rng, cuts):
    rows = rng.normal(size=(7, 1000)) * 3 + 1
    whole = RowMoments().update(rows).result()
    assert_allclose(whole[0], rows.mean(axis=1), rtol=1e-14)
    assert_allclose(whole[1], rows.std(axis=1), rtol=1e-14)
    chunked = RowMoments()
    for start, stop in zip([0, *cuts], [*cuts, 1000]):
        chunked.update(rows[:, start:stop])
    for got, want in zip(chunked.result(), whole, strict=True):
        assert_array_equal(got, want)


@pytest.mark.parametrize(
    "n_columns, expected",
    [
        (0, 256),  # capped at MAX_LEAF_ROWS
        (1, 256),
        (2**17, 16),  # 16 MiB / (8 B * 2**17) = 16 rows exactly
        (2**17 + 1, 8),  # 15.99 rows: the power of two below
        (10**7, 1),  # less than a row fits: one row
    ],
)
def test_leaf_rows_by_hand(n_columns, expected):
    assert leaf_rows(n_columns) == expected


class _Structure(ColumnTree):
    """A tree whose root value spells its structure: combining is not commutative."""

    def _leaves(self, groups):
        return (groups.sum(axis=1, dtype=np.float64),)

    def _combine(self, left, right):
        return (2 * left[0] + 3 * right[0],)

    def _promote(self, node):
        return (5 * node[0],)


def _structure_by_hand(values):
    # Pair neighbours level by level, left then right; a last node without a right
    # sibling is promoted alone.
    values = list(values)
    while len(values) > 1:
        pairs = [2 * values[i] + 3 * values[i + 1] for i in range(0, len(values) - 1, 2)]
        values = pairs + ([5 * values[-1]] if len(values) % 2 else [])
    return values[0]


def _one_row_leaves(bank, bounds):
    tree = _Structure(bank.shape[1])
    tree.leaf_rows = 1
    for start, stop in bounds:
        tree.update(bank[start:stop], slice(start, stop))
    return tree


@pytest.mark.parametrize("n_rows", [1, 2, 5, 7, 8, 11, 13])
def test_column_tree_combines_children_in_order_for_every_split(n_rows):
    bank = np.arange(1.0, n_rows + 1)[:, None]
    expected = _structure_by_hand(range(1, n_rows + 1))
    splits = [[(0, n_rows)], [(row, row + 1) for row in range(n_rows)]]
    splits.append([(0, min(3, n_rows)), (min(3, n_rows), n_rows)])
    for bounds in splits:
        (root,), _ = _one_row_leaves(bank, bounds).root()
        assert root.tolist() == [expected]
    middle = n_rows // 2
    for first, second in [((0, middle), (middle, n_rows)), ((middle, n_rows), (0, middle))]:
        tree = _one_row_leaves(bank, [first])
        tree.merge(_one_row_leaves(bank, [second]))
        (root,), _ = tree.root()
        assert root.tolist() == [expected]


def test_column_tree_keeps_one_node_per_binary_digit():
    # Leaves added one by one are combined as soon as their sibling is there: after
    # k leaves, one node per set bit of k (O(log M) nodes).
    bank = np.ones((11, 1))
    tree = _Structure(1)
    tree.leaf_rows = 1
    for row in range(11):
        tree.update(bank[row : row + 1], slice(row, row + 1))
        assert len(tree.nodes) == (row + 1).bit_count()


def test_column_log_sum_exp_of_several_leaves():
    # 600 rows of 3 columns: three leaves of 256 rows, the last one padded.
    rng = np.random.default_rng(0)
    bank = rng.normal(size=(600, 3))
    bank[300:] += 1.0  # the leaves' maxima differ
    for beta in [0.5, 20.0]:
        (reducer,) = reduce_bank(ProbeMatrix(bank), lambda beta=beta: [ColumnLogSumExp(3, beta)])
        assert_allclose(reducer.result(), logsumexp(beta * bank, axis=0) / beta, rtol=1e-13)


def _fed_reducer(probe, make, **kwargs):
    """The reduced reducer and the widths of the blocks fed to it, or to the reducer
    it swapped in (``for_bank_rows``), in every job."""
    widths = set()

    def record(reducer):
        if reducer is not None:
            update = reducer.update
            reducer.update = lambda block, rows: (widths.add(block.shape[1]), update(block, rows))
        return reducer

    def make_recorded():
        reducers = [record(reducer) for reducer in make()]
        for reducer in reducers:
            swap = reducer.for_bank_rows
            reducer.for_bank_rows = lambda gallery_t, swap=swap: record(swap(gallery_t))
        return reducers

    (reducer,) = reduce_bank(probe, make_recorded, **kwargs)
    return reducer, widths


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_column_mean_reads_unit_bank_rows_instead_of_products(rng, n_jobs):
    # From cosine embeddings a column mean is fed the unit bank rows (3 columns, not
    # the gallery's 5000) and maps their mean through the gallery: the float64 mean
    # of the products, in RESULT_COLUMNS-wide pieces (5000 = 4096 + 904).
    bank, gallery = rng.normal(size=(700, 3)), rng.normal(size=(5000, 3))
    probe = ProbeMatrix(bank, unit_rows(gallery).T, "cosine")
    reducer, widths = _fed_reducer(probe, lambda: [ColumnMean(5000)], working_memory=0.01, n_jobs=n_jobs)
    assert widths == {3}
    assert_allclose(reducer.result(), (unit_rows(bank) @ unit_rows(gallery).T).mean(axis=0), rtol=1e-12, atol=1e-15)
    # under metric="dot" the products may overflow: they are computed, and checked
    probe = ProbeMatrix(bank, gallery.T, "dot")
    reducer, widths = _fed_reducer(probe, lambda: [ColumnMean(5000)], n_jobs=n_jobs)
    assert widths == {5000}
    assert_allclose(reducer.result(), (bank @ gallery.T).mean(axis=0), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("n_rows", [1, 7, 700, 1031])
def test_column_moments_from_the_bank_rows_covariance(rng, n_rows):
    # From cosine embeddings the moments come from the unit bank rows' mean and
    # covariance (4 columns fed, not 4500): those of the float64 products, bitwise the
    # same for every budget and job count, a partial last leaf included.
    bank, gallery = rng.normal(size=(n_rows, 4)), rng.normal(size=(4500, 4))
    probe = ProbeMatrix(bank, unit_rows(gallery).T, "cosine")
    sims = unit_rows(bank) @ unit_rows(gallery).T
    found = []
    for memory, n_jobs in [(None, 1), (0.01, 1), (0.01, 2)]:
        reducer, widths = _fed_reducer(probe, lambda: [ColumnMoments(4500)], working_memory=memory,
                                       n_jobs=n_jobs)
        assert widths == {4}
        found.append(reducer.result())
    assert_allclose(found[0][0], sims.mean(axis=0), rtol=0, atol=1e-15)
    assert_allclose(found[0][1], sims.std(axis=0), rtol=1e-12, atol=1e-15)
    for other in found[1:]:
        assert_array_equal(other[0], found[0][0])
        assert_array_equal(other[1], found[0][1])


def test_column_moments_read_the_products_where_the_covariance_costs_more(rng):
    # 6 dimensions for a gallery of 5: the d x d covariance would cost more than the products.
    bank, gallery = rng.normal(size=(40, 6)), rng.normal(size=(5, 6))
    probe = ProbeMatrix(bank, unit_rows(gallery).T, "cosine")
    reducer, widths = _fed_reducer(probe, lambda: [ColumnMoments(5)])
    assert widths == {5}
    sims = unit_rows(bank) @ unit_rows(gallery).T
    assert_allclose(reducer.result()[1], sims.std(axis=0), rtol=1e-12)


def test_column_mean_of_sums_beyond_float64():
    # Column sums overflow float64 within a leaf: the leaves are scaled first. One
    # leaf (4 rows of 200 columns), then two leaves of 256 rows (300 rows of 3).
    bank = np.tile([1.6e308, 1.2e308, 1.4e308, 1.0], (200, 1)).T
    (reducer,) = reduce_bank(ProbeMatrix(bank), lambda: [ColumnMean(200)])
    assert_allclose(reducer.result(), np.full(200, 1.05e308), rtol=1e-15)
    bank = np.tile([[1.5e308, 1.6e308, 1.0], [1.5e308, 1.2e308, 1.0]], (150, 1))
    (reducer,) = reduce_bank(ProbeMatrix(bank), lambda: [ColumnMean(3)])
    assert_allclose(reducer.result(), [1.5e308, 1.4e308, 1.0], rtol=1e-14)


def test_column_moments_combine_leaves_near_the_float64_limit():
    # One-row leaves: the pairwise update is scaled by the largest mean or standard
    # deviation of both nodes, so that neither the difference of the means nor the
    # squares overflow or underflow.
    cases = [
        ([1e308, -1e308], 1, 0.0, 1e308),
        ([1e308, 1e-300], 1, 5e307, 5e307),
        ([1e308, -1e308, 0.0, 0.0], 2, 0.0, 1e308 / np.sqrt(2)),
    ]
    for values, leaf, mean, std in cases:
        tree = ColumnMoments(1, leaf_rows=leaf)
        tree.update(np.array(values)[:, None], slice(0, len(values)))
        result = tree.result()
        assert_allclose(result[0], [mean], rtol=1e-15, atol=0)
        assert_allclose(result[1], [std], rtol=1e-15)


@pytest.mark.parametrize("leaf_cap", [1, 2, 4, 256])
def test_column_trees_against_closed_forms(monkeypatch, leaf_cap):
    monkeypatch.setattr(skqbnorm._core._trees, "MAX_LEAF_ROWS", leaf_cap)
    for n_rows in range(1, 20):
        column = np.arange(1.0, n_rows + 1)[:, None]  # sums exact in float64
        for working_memory in (1e-5, None):
            reducers = reduce_bank(
                ProbeMatrix(column), lambda: [ColumnMean(1), ColumnLogSumExp(1, 1.0)], working_memory
            )
            mean, soft_max = (reducer.result() for reducer in reducers)
            assert mean[0] == (n_rows + 1) / 2
            assert_allclose(soft_max, np.log(np.exp(column).sum()), rtol=1e-15)
    # two equal similarities: log(2) / beta above them
    pair = reduce_bank(ProbeMatrix(np.zeros((2, 1))), lambda: [ColumnLogSumExp(1, 10.0)])
    assert_allclose(pair[0].result(), [np.log(2) / 10.0], rtol=1e-15)
