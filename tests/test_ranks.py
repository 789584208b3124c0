"""Rank counting (skqbnorm._ranks): bucket table and bisection against plain np.searchsorted."""


import pickle

import numpy as np
import pytest
from joblib import parallel_config
from numpy.testing import assert_array_equal

from skqbnorm._ranks import ColumnRanks, SortedColumns, bisect, count_below_midpoint, count_greater


def searchsorted_greater(sorted_columns, values):
    """#{i : column[i] > v}, one np.searchsorted per column, in the common dtype."""
    dtype = np.result_type(sorted_columns, values)
    columns, values = sorted_columns.astype(dtype), values.astype(dtype)
    return np.stack(
        [len(column) - np.searchsorted(column, values[:, j], side="right")
         for j, column in enumerate(columns.T)],
        axis=1,
    )


def searchsorted_midpoint(sorted_columns, values):
    """#{i : column[i] < v} + #{i : column[i] == v} / 2, per column."""
    dtype = np.result_type(sorted_columns, values)
    columns, values = sorted_columns.astype(dtype), values.astype(dtype)
    return np.stack(
        [(np.searchsorted(column, values[:, j], side="left")
          + np.searchsorted(column, values[:, j], side="right")) / 2
         for j, column in enumerate(columns.T)],
        axis=1,
    )


def columns_of(kind, rng, n_rows, n_columns):
    if kind == "normal":
        return rng.normal(size=(n_rows, n_columns))
    if kind == "few values":  # long runs of ties: buckets larger than the window
        return rng.integers(-2, 3, size=(n_rows, n_columns)).astype(float)
    if kind == "signed zeros":
        zeros = np.where(rng.random((n_rows, n_columns)) < 0.5, 0.0, -0.0)
        return zeros + (rng.random((n_rows, n_columns)) < 0.2)
    if kind == "tiny":
        return np.round(rng.normal(size=(n_rows, n_columns)), 2) * 1e-300
    if kind == "outliers":  # one far entry per column stretches a min-max grid
        columns = rng.normal(size=(n_rows, n_columns))
        columns[0] = 1e30
        return columns
    if kind == "constant":
        return np.full((n_rows, n_columns), 0.25)
    raise ValueError(kind)


def values_for(sorted_columns, rng, n_values):
    """Half the values equal to entries (ties), half drawn around them, and both infinities."""
    n_rows, n_columns = sorted_columns.shape
    ties = sorted_columns[rng.integers(0, n_rows, size=(n_values, n_columns)), np.arange(n_columns)]
    spread = np.abs(sorted_columns).max(initial=1.0)
    near = rng.normal(size=(n_values, n_columns)) * spread
    values = np.where(rng.random((n_values, n_columns)) < 0.5, ties, near)
    values[0, 0], values[-1, -1] = np.inf, -np.inf
    return values


KINDS = ["normal", "few values", "signed zeros", "tiny", "outliers", "constant"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_rows", [1, 2, 15, 16, 17, 300, 1601])
@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.float64, np.float64),
                                    (np.float32, np.float64), (np.float64, np.float32)])
def test_counts_equal_searchsorted(kind, n_rows, dtypes):
    rng = np.random.default_rng(n_rows)
    bank_dtype, values_dtype = dtypes
    sorted_columns = np.sort(columns_of(kind, rng, n_rows, 7), axis=0).astype(bank_dtype)
    sorted_columns.sort(axis=0)  # rounding to float32 keeps the order, but -0.0 / 0.0 may mix
    values = values_for(sorted_columns, rng, 9).astype(values_dtype)
    if kind == "signed zeros":
        values[1:] = np.where(rng.random((8, 7)) < 0.5, 0.0, -0.0)
    ranks = ColumnRanks(sorted_columns)
    assert_array_equal(ranks.count_greater(values), searchsorted_greater(sorted_columns, values))
    assert_array_equal(ranks.count_below_midpoint(values),
                       searchsorted_midpoint(sorted_columns, values))


def test_ties_make_buckets_larger_than_the_window():
    # Every entry of a column equal: its one bucket is over-full and searched in full.
    sorted_columns = np.sort(np.repeat([[1.0, 2.0, 3.0]], 100, axis=0), axis=0)
    sorted_columns[:40, 1] = 0.5
    ranks = ColumnRanks(sorted_columns)
    assert (ranks.table == ranks.overfull).any()
    values = np.array([[1.0, 0.5, 3.0], [0.999, 2.0, 3.5], [1.001, 0.49, -3.0]])
    assert_array_equal(ranks.count_greater(values), [[0, 60, 0], [100, 0, 0], [0, 100, 100]])
    assert_array_equal(ranks.count_below_midpoint(values),
                       [[50, 20, 50], [0, 70, 100], [100, 0, 0]])


@pytest.mark.parametrize("tile_size", [1, 5, 64, 1 << 16])
def test_any_tiling_column_slice_and_output_dtype(tile_size):
    rng = np.random.default_rng(0)
    sorted_columns = np.sort(rng.normal(size=(500, 30)).astype(np.float32), axis=0)
    values = values_for(sorted_columns, rng, 11)[:, 4:19]
    expected = searchsorted_greater(sorted_columns[:, 4:19], values)
    ranks = ColumnRanks(sorted_columns, tile_size=tile_size)
    assert_array_equal(ranks.count_greater(values, slice(4, 19)), expected)
    into = np.full(values.shape, np.nan, dtype=np.float32)
    assert ranks.count_greater(values, slice(4, 19), out=into) is into
    assert_array_equal(into, expected)
    assert_array_equal(count_greater(sorted_columns[:, 4:19], values, tile_size), expected)


def test_functions_equal_the_plain_counts_by_hand():
    sorted_columns = np.array([[1.0, 2.0], [2.0, 2.0], [2.0, 2.0], [3.0, 2.0]])
    values = np.array([[2.0, 2.0], [1.0, 1.0], [3.0, 3.0], [0.0, 2.5]])
    assert_array_equal(count_greater(sorted_columns, values), [[1, 0], [3, 4], [0, 0], [4, 0]])
    assert_array_equal(count_below_midpoint(sorted_columns, values),
                       [[2, 2], [0.5, 0], [3.5, 4], [0, 4]])


def test_table_is_a_quarter_of_float32_columns_and_caller_arrays_stay():
    rng = np.random.default_rng(1)
    sorted_columns = np.asfortranarray(np.sort(rng.normal(size=(2000, 50)), axis=0), np.float32)
    before = sorted_columns.copy()
    ranks = ColumnRanks(sorted_columns)
    assert ranks.sorted is sorted_columns  # column-major columns are not copied
    assert ranks.table.nbytes <= sorted_columns.nbytes / 4
    values = rng.normal(size=(3, 50))
    values_before = values.copy()
    ranks.count_below_midpoint(values)
    assert_array_equal(sorted_columns, before)
    assert_array_equal(values, values_before)


def test_non_finite_columns_do_not_break_the_table():
    # A query's own sorted row may hold NaN or infinities (transform then refuses it):
    # counting must not fail, and the other columns stay exact.
    rows = np.sort(np.array([[0.1, 0.3, np.nan], [np.inf, 0.2, 0.5], [-np.inf, 0.0, 0.4]]), axis=1).T
    ranks = ColumnRanks(rows)
    values = np.array([[0.2, 0.3, 0.45]])
    counts = ranks.count_greater(values)
    assert_array_equal(counts[:, 1:], searchsorted_greater(rows[:, 1:], values[:, 1:]))


def test_bisect_counts_a_prefix_within_the_window():
    flat = np.array([0.0, 1.0, 1.0, 2.0, 5.0, 5.0, 7.0, 9.0])
    start = np.array([0, 0, 2, 4, 4])
    values = np.array([1.0, -1.0, 4.0, 5.0, 100.0])
    assert_array_equal(bisect(flat, start.copy(), values, 4, np.less_equal), [3, 0, 4, 6, 8])
    assert_array_equal(bisect(flat, start.copy(), values, 4, np.less), [1, 0, 4, 4, 8])


def test_a_pickle_leaves_the_table_out_and_counts_the_same():
    rng = np.random.default_rng(2)
    sorted_columns = np.sort(rng.normal(size=(200, 6)), axis=0)
    values = values_for(sorted_columns, rng, 5)
    ranks = ColumnRanks(sorted_columns)
    expected = ranks.count_greater(values)
    restored = pickle.loads(pickle.dumps(ranks))
    assert restored._table is None
    assert_array_equal(restored.count_greater(values), expected)
    assert_array_equal(restored.table, ranks.table)


@pytest.mark.parametrize("backend", ["threading", "loky"])
def test_sorted_columns_sorts_strips_in_place_under_any_backend(rng, backend):
    # The strips are written into one array: a process backend must not take them away.
    blocks = [np.round(rng.normal(size=(n, 11)), 1).astype(np.float32) for n in (5, 17, 1, 9)]
    expected = np.sort(np.concatenate(blocks), axis=0)
    for n_jobs in (1, 2, 3, 11, 20):
        reducer = SortedColumns(n_jobs)
        for block in blocks:
            reducer.update(block, None)
        with parallel_config(backend=backend):
            values = reducer.result()
        assert values.flags.f_contiguous and values.dtype == np.float32
        np.testing.assert_array_equal(values, expected)


@pytest.mark.parametrize("tile_size", [1, 7, 40, 1 << 16])
@pytest.mark.parametrize("order", ["C", "F"])
def test_count_greater_any_tiling_and_layout(rng, tile_size, order):
    # GC's bisection, against a brute-force count; ties with the bank and +-inf included.
    bank = np.sort(rng.integers(0, 6, size=(33, 9)).astype(np.float32), axis=0)
    values = rng.integers(-1, 7, size=(20, 9)).astype(np.float32)
    values[0, 0], values[1, 1] = np.inf, -np.inf
    expected = (bank[None, :, :] > values[:, None, :]).sum(axis=1)
    assert_array_equal(count_greater(np.asarray(bank, order=order), values, tile_size), expected)


@pytest.mark.parametrize("n_queries", [1, 2, 3])
def test_count_greater_in_tiles_matches_a_plain_count(n_queries):
    # With tile_size=4 and few queries, the gallery columns are searched in several
    # tiles: every tile (up to the last column) must be filled.
    rng = np.random.default_rng(0)
    bank = np.sort(rng.integers(0, 5, size=(7, 10)).astype(float), axis=0)
    queries = rng.integers(-1, 6, size=(n_queries, 10)).astype(float)
    expected = (bank[None, :, :] > queries[:, None, :]).sum(axis=1)
    assert_array_equal(count_greater(bank, queries, tile_size=4), expected)


def test_count_greater_at_equal_values():
    sorted_columns = np.array([[1.0, 2.0], [2.0, 2.0], [2.0, 2.0], [3.0, 2.0]])
    values = np.array([[2.0, 2.0], [1.0, 1.0], [3.0, 3.0], [0.0, 2.5]])
    # strictly greater: equal entries never count
    assert_array_equal(count_greater(sorted_columns, values), [[1, 0], [3, 4], [0, 0], [4, 0]])
