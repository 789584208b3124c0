"""The mean of every column's k largest entries (skqbnorm._core._column_top_k) against a
full stable sort, whatever the blocks, ties, merges and memory layout."""

import itertools
import pickle
import tracemalloc

import numpy as np
import pytest
from joblib import parallel_config
from numpy.testing import assert_allclose, assert_array_equal
from threadpoolctl import threadpool_limits

import skqbnorm._core._probe
from skqbnorm._core import (
    ColumnTopKMean,
    GroupedColumnTopKMean,
    ProbeMatrix,
    reduce_bank,
)
from skqbnorm._core._column_top_k import (
    BankRowColumnTopKMean,
    _top_k_of_union,
)

from helpers import column_top_k_mean, top_k_matrices, unit_rows


@pytest.mark.parametrize("k", [1, 2, 7, 64, 90])
def test_column_top_k_mean_equals_a_full_sort_for_any_blocks_and_merges(rng, k):
    for values in top_k_matrices(rng):
        expected = column_top_k_mean(values, k)
        for _ in range(4):
            cuts = np.sort(rng.choice(np.arange(1, len(values)), size=6, replace=False))
            bounds = [0, *cuts, len(values)]
            parts = [ColumnTopKMean(k) for _ in range(3)]
            for index, (start, stop) in enumerate(itertools.pairwise(bounds)):
                parts[index % 3].update(values[start:stop], slice(start, stop))
            whole = parts[0]
            for part in parts[1:]:
                whole.merge(part)
            got = whole.result()
            assert got.dtype == np.float64
            assert_allclose(got, expected, rtol=1e-6 if values.dtype == np.float32 else 1e-13)


def test_column_top_k_mean_is_bitwise_the_same_for_any_blocks(rng):
    values = rng.normal(size=(1000, 40)).astype(np.float32)
    one = ColumnTopKMean(32)
    one.update(values, None)
    expected = one.result()
    many = ColumnTopKMean(32)
    for rows in np.array_split(values, 37):  # blocks taller and shorter than the buffers
        many.update(rows, None)
    assert_array_equal(many.result(), expected)


@pytest.mark.parametrize("k", [19, 20])
def test_column_top_k_mean_is_bitwise_the_same_for_either_memory_layout(rng, k):
    values = rng.normal(size=(20, 16))  # k = 20: the whole bank, kept as its transposed view
    c_order, f_order = (
        reduce_bank(ProbeMatrix(bank), lambda: [ColumnTopKMean(k)])[0].result()
        for bank in (values, np.asfortranarray(values))
    )
    assert_array_equal(c_order, f_order)


def test_column_top_k_mean_takes_blocks_taller_than_its_buffers(rng):
    values = rng.normal(size=(3000, 9))
    reducer = ColumnTopKMean(3)
    for rows in (values[:20], values[20:2500], values[2500:]):  # 2,480 rows > capacity
        reducer.update(rows, None)
    assert_allclose(reducer.result(), column_top_k_mean(values, 3), rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 5, 300])
def test_bank_row_column_top_k_mean_is_that_of_the_products(rng, monkeypatch, dtype, k):
    # From cosine embeddings the top k are found from the unit bank rows, in batches of
    # 32 rows (product_rows, here) and strips of 7 gallery items: the mean of each
    # column's k largest products, the same for every budget, job count and BLAS
    # thread count; k = 300 keeps every row of the 290-row bank.
    monkeypatch.setattr(skqbnorm._core._probe, "MIN_PRODUCT_ROWS", 32)
    monkeypatch.setattr(BankRowColumnTopKMean, "STRIP_COLUMNS", 7)
    bank, gallery = (rng.normal(size=(n, 6)).astype(dtype) for n in (290, 40))
    probe = ProbeMatrix(bank, unit_rows(gallery).T, "cosine", dtype)
    found = []
    for memory, n_jobs, threads in [(None, 1, None), (0.001, 2, 1), (0.001, 1, 2)]:
        with threadpool_limits(threads):
            (reducer,) = reduce_bank(probe, lambda: [ColumnTopKMean(k)], working_memory=memory,
                                     n_jobs=n_jobs)
        assert isinstance(reducer, BankRowColumnTopKMean)
        found.append(reducer.result())
    sims = unit_rows(bank.astype(np.float64)) @ unit_rows(gallery.astype(np.float64)).T
    expected = column_top_k_mean(sims, min(k, len(bank)))
    assert_allclose(found[0], expected, rtol=1e-5 if dtype == np.float32 else 1e-12)
    for other in found[1:]:
        assert_array_equal(other, found[0])


def grouped_matrices(rng):
    """``matrices`` and a partial last group, Fortran order and an integer memmap's dtype."""
    yield from top_k_matrices(rng)
    yield rng.normal(size=(301, 7))  # 301 rows: the last group is partial for any group size
    yield np.asfortranarray(rng.normal(size=(240, 9)))  # read again by fancy indexing
    yield rng.integers(-50, 50, size=(260, 13)).astype(np.int16)  # cast as it is read
    ties = rng.integers(-2, 3, size=(256, 15)).astype(np.float64)  # ties, and values an ulp above them
    above = rng.random(ties.shape) < 0.3
    ties[above] = np.nextafter(ties[above], np.inf)
    yield ties


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2, 3, 7, 16])
@pytest.mark.parametrize("memory", [None, 2e-3, 1e-4], ids=["one chunk and strip", "small", "one group, one column"])
def test_grouped_column_top_k_mean_equals_a_full_sort_and_the_streaming_floors(rng, monkeypatch, k, memory):
    if memory is not None:  # blocks straddle the state's chunks; strips of few columns (or one)
        monkeypatch.setattr(GroupedColumnTopKMean, "CHUNK_MEMORY", memory)
        monkeypatch.setattr(GroupedColumnTopKMean, "STRIP_MEMORY", memory)
    for values in grouped_matrices(rng):
        dtype = np.float32 if values.dtype != np.float64 else np.float64
        expected = column_top_k_mean(values.astype(dtype), k)
        streamed = ColumnTopKMean(k)
        streamed.update(values.astype(dtype), None)
        probe = ProbeMatrix(values, dtype=dtype)
        tall_enough = len(values) >= 2 * GroupedColumnTopKMean.GROUPS_PER_K * k  # groups of 2 rows or more
        assert GroupedColumnTopKMean.suits(probe, k) == tall_enough
        for working_memory, n_jobs in [(None, None), (1e-3, None), (0.02, 3), (1e-3, 2)]:
            (reducer,) = reduce_bank(probe, lambda: [ColumnTopKMean(k)], working_memory, n_jobs)
            assert isinstance(reducer, GroupedColumnTopKMean) == GroupedColumnTopKMean.suits(probe, k)
            got = reducer.result()
            assert_allclose(got, expected, rtol=1e-6 if dtype == np.float32 else 1e-13)
            assert_array_equal(got, streamed.result())


def test_grouped_column_top_k_mean_reads_again_the_groups_that_hold_several_of_the_top(rng):
    """Sorted columns put the whole top k in the last groups: most of it is read again."""
    values = np.sort(rng.normal(size=(512, 5)), axis=0)
    (reducer,) = reduce_bank(ProbeMatrix(values), lambda: [ColumnTopKMean(8)], 1e-3)
    assert reducer.leaf_rows == 16  # 32 groups, of which the top k of maxima are 8
    assert_allclose(reducer.result(), column_top_k_mean(values, 8), rtol=1e-13)


def test_grouped_column_top_k_mean_only_where_the_bank_can_be_read_again(rng):
    bank, gallery = rng.normal(size=(400, 6)), rng.normal(size=(30, 6))
    precomputed = ProbeMatrix(bank @ gallery.T)
    assert GroupedColumnTopKMean.suits(precomputed, 5)
    assert not GroupedColumnTopKMean.suits(ProbeMatrix(bank, gallery.T), 5)  # products again
    assert not GroupedColumnTopKMean.suits(precomputed, 60)  # fewer than two rows a group
    wide = ProbeMatrix(np.lib.stride_tricks.as_strided(np.zeros(1), (400, 10**8), (0, 0)))
    assert not GroupedColumnTopKMean.suits(wide, 5)  # the groups' state beyond its memory bound
    tall = ProbeMatrix(np.lib.stride_tricks.as_strided(np.zeros(1), (10**6, 100), (0, 0)))
    assert GroupedColumnTopKMean.group_rows(10**6, 2000) == 128
    assert GroupedColumnTopKMean.suits(tall, 2000)
    assert not GroupedColumnTopKMean.suits(tall, 1000)  # groups of 256 rows: the floors
    wider = ProbeMatrix(np.lib.stride_tricks.as_strided(np.zeros(1), (10**6, 40_000), (0, 0)))
    assert not GroupedColumnTopKMean.suits(wider, 2000)  # 128 rows exceed a ColumnTree leaf of the gallery


def test_grouped_column_top_k_mean_reads_sorted_columns_again_in_batches(rng, monkeypatch):
    """Sorted columns read about M / 4 entries each again: in batches within the budget."""
    values = np.sort(rng.normal(size=(4096, 64)), axis=0)
    (reducer,) = reduce_bank(ProbeMatrix(values), lambda: [ColumnTopKMean(8)])
    assert reducer.leaf_rows == 128
    expected = column_top_k_mean(values, 8)
    monkeypatch.setattr(GroupedColumnTopKMean, "STRIP_MEMORY", 0.05)
    tracemalloc.start()
    got = reducer.result()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**20  # the 512 groups read again hold 65,536 entries: 2 MB of indices at once
    assert_allclose(got, expected, rtol=1e-13)


def test_grouped_column_top_k_mean_reads_a_joined_matrix_from_both_sides(rng):
    from skqbnorm.normalizers._gallery_bank import _JoinedSims

    left, right = rng.normal(size=(300, 7)), np.sort(rng.normal(size=(300, 5)), axis=0)  # right: read again
    joined = _JoinedSims(ProbeMatrix(left), ProbeMatrix(right))
    (reducer,) = reduce_bank(joined, lambda: [ColumnTopKMean(4)])
    assert isinstance(reducer, GroupedColumnTopKMean)
    assert_allclose(reducer.result(), column_top_k_mean(np.hstack([left, right]), 4), rtol=1e-13)


def test_top_k_of_union_keeps_k_per_row_before_widening_for_one_crowded_row(rng):
    """A sorted column puts about M / 4 entries in its read-again groups: the union must not take that width."""
    top, extras = rng.normal(size=(200, 2)), rng.normal(size=20_000)
    columns = np.zeros(len(extras), dtype=np.intp)  # all in row 0
    tracemalloc.start()
    got = _top_k_of_union(top, columns, extras, 2)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * 2**20  # a 200 x 20,002 union would take 32 MB
    assert_array_equal(got[0], np.sort(np.concatenate([top[0], extras]))[-2:])
    assert_array_equal(got[1:], np.sort(top[1:], axis=1))


def test_grouped_column_top_k_mean_travels_to_a_process_without_the_bank(rng):
    """Under joblib's process backends each job's reducer is pickled: not the whole bank with it."""
    values = rng.normal(size=(4000, 50))
    probe = ProbeMatrix(values)
    (reducer,) = reduce_bank(probe, lambda: [ColumnTopKMean(16)])
    assert isinstance(reducer, GroupedColumnTopKMean)
    copy = pickle.loads(pickle.dumps(reducer))
    assert copy.probe is None
    assert len(pickle.dumps(GroupedColumnTopKMean(16, probe))) < 10_000
    with parallel_config(backend="loky"):  # the merged copy gets the bank back
        (reducer,) = reduce_bank(probe, lambda: [ColumnTopKMean(16)], n_jobs=2)
    assert_allclose(reducer.result(), column_top_k_mean(values, 16), rtol=1e-13)
