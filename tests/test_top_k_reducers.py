"""The top-k machinery of the streaming core against plain sorts.

``ColumnTopKMean`` (CSLS, NNN) keeps each column's running top k with a floor and
per-column buffers; on a precomputed bank, ``GroupedColumnTopKMean`` keeps the two
largest entries of groups of rows and reads a few groups again; ``row_top_k_indices`` (top_k search, CSLS's row term, DIS's
activation set, k-occurrence) bounds each row's k-th largest entry by group maxima.
Both must equal a full stable sort, whatever the blocks, ties and merges.
"""

import itertools
import pickle
import threading
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from joblib import parallel_config
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from threadpoolctl import threadpool_limits

import skqbnorm._core._parallel
import skqbnorm._core._probe
import skqbnorm._core._products
import skqbnorm.normalizers._top_k
from skqbnorm import (
    CSLS,
    Centering,
    DualDynamicInvertedSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankZNorm,
    SinkhornNormalization,
)
from skqbnorm._core import (
    ColumnTopKMean,
    GroupedColumnTopKMean,
    ProbeMatrix,
    RowTopKUnion,
    blas_threads,
    one_blas_thread,
    reduce_bank,
    row_top1,
    row_top_k,
    row_top_k_indices,
    top_k_mask,
)
from skqbnorm._core._column_top_k import (
    BankRowColumnTopKMean,
    _top_k_of_union,
)


def column_top_k_mean(values, k):
    return np.sort(values, axis=0)[len(values) - k :].mean(axis=0)


def stable_top_k(values, k):
    order = np.argsort(-values, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(values, order, axis=1)


def matrices(rng):
    """Continuous, heavily tied, sorted (every row beats the floor) and constant columns."""
    yield rng.normal(size=(300, 23))
    yield rng.integers(-3, 3, size=(257, 19)).astype(np.float32)
    yield np.sort(rng.normal(size=(200, 17)), axis=0)  # ascending: each row a candidate
    yield np.sort(rng.normal(size=(200, 17)), axis=0)[::-1].copy()  # descending: none after the start
    yield np.full((90, 11), 0.25)


@pytest.mark.parametrize("k", [1, 2, 7, 64, 90])
def test_column_top_k_mean_equals_a_full_sort_for_any_blocks_and_merges(rng, k):
    for values in matrices(rng):
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


def _unit(rows):
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


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
    probe = ProbeMatrix(bank, _unit(gallery).T, "cosine", dtype)
    found = []
    for memory, n_jobs, threads in [(None, 1, None), (0.001, 2, 1), (0.001, 1, 2)]:
        with threadpool_limits(threads):
            (reducer,) = reduce_bank(probe, lambda: [ColumnTopKMean(k)], working_memory=memory,
                                     n_jobs=n_jobs)
        assert isinstance(reducer, BankRowColumnTopKMean)
        found.append(reducer.result())
    sims = _unit(bank.astype(np.float64)) @ _unit(gallery.astype(np.float64)).T
    expected = column_top_k_mean(sims, min(k, len(bank)))
    assert_allclose(found[0], expected, rtol=1e-5 if dtype == np.float32 else 1e-12)
    for other in found[1:]:
        assert_array_equal(other, found[0])


def test_one_blas_thread_restores_the_limit_under_concurrent_holders():
    before = blas_threads()

    def hold(_):
        with one_blas_thread() as n_threads:
            assert blas_threads() == 1
            return n_threads

    with ThreadPoolExecutor(4) as pool:
        assert set(pool.map(hold, range(8))) == {before}
    assert blas_threads() == before


def test_one_blas_thread_may_be_entered_again_and_from_the_kept_threads():
    # The holder enters again; work on the kept threads, which the holder waits for,
    # enters too (with the lock held by its caller, a lock of its own would never come).
    before = blas_threads()

    def nested(group):
        with one_blas_thread() as n_threads:
            return n_threads, blas_threads()

    def hold():
        with one_blas_thread() as outer, one_blas_thread() as inner:
            found = skqbnorm._core._parallel.in_blas_threads(nested, [0, 1], 2)
            return outer, inner, blas_threads(), found

    results = []
    holder = threading.Thread(target=lambda: results.append(hold()), daemon=True)
    holder.start()
    holder.join(timeout=60)
    assert not holder.is_alive(), "one_blas_thread deadlocked"
    (outer, inner, inside, found), = results
    assert (outer, inner, inside) == (before, 1, 1)
    assert found == [(1, 1), (1, 1)]
    assert blas_threads() == before


def grouped_matrices(rng):
    """``matrices`` and a partial last group, Fortran order and an integer memmap's dtype."""
    yield from matrices(rng)
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


@pytest.mark.parametrize("k", [1, 2, 5, 10, 33, 100, 127, 128])
def test_row_top_k_indices_equals_a_stable_sort(rng, k):
    for values in matrices(rng):
        rows = values.T.copy()  # wide rows: the group bound applies
        k_rows = min(k, rows.shape[1])
        indices, top = row_top_k_indices(rows, k)
        expected_indices, expected_top = stable_top_k(rows, k_rows)
        assert_array_equal(indices, expected_indices)
        assert_array_equal(top, expected_top)
        mask = np.zeros(rows.shape, dtype=bool)
        np.put_along_axis(mask, expected_indices, True, axis=1)
        assert_array_equal(top_k_mask(rows, k_rows), mask)
        assert_array_equal(row_top_k(rows, k_rows), np.sort(expected_top, axis=1))


def test_row_top_k_indices_keeps_the_lowest_indices_among_ties():
    row = np.array([[1.0, 3.0, 3.0, 0.0, 3.0, 3.0, 2.0, 3.0] * 8])
    indices, values = row_top_k_indices(row, 6)
    assert_array_equal(indices, [[1, 2, 4, 5, 7, 9]])
    assert_array_equal(values, [[3.0] * 6])


def test_activation_set_is_the_union_of_row_top_k(rng):
    values = rng.integers(0, 4, size=(50, 400)).astype(float)
    union = RowTopKUnion(400, 12)
    for rows in np.array_split(values, 7):
        union.update(rows, None)
    expected = np.zeros(400, dtype=bool)
    expected[stable_top_k(values, 12)[0].ravel()] = True
    assert_array_equal(union.mask, expected)


@pytest.mark.parametrize(
    "estimator",
    [CSLS(k=4), NearestNeighborNormalization(k=3), DynamicInvertedSoftmax(k=3)],
    ids=repr,
)
def test_top_k_search_streams_the_gallery_when_whole_rows_do_not_fit(rng, monkeypatch, estimator):
    bank, gallery, queries = rng.normal(size=(60, 8)), rng.normal(size=(50, 8)), rng.normal(size=(30, 8))
    fitted = estimator.fit(bank, gallery=gallery)
    whole_rows = fitted.top_k(queries=queries, k=6)
    monkeypatch.setattr(skqbnorm.normalizers._top_k, "MIN_WHOLE_ROWS", 10**9)
    fitted.set_params(working_memory=1e-3)  # many column chunks
    streamed = fitted.top_k(queries=queries, k=6)
    assert_array_equal(streamed[0], whole_rows[0])
    assert_allclose(streamed[1], whole_rows[1], rtol=1e-12)
    expected = stable_top_k(fitted.transform(fitted.similarities(queries)), 6)
    assert_array_equal(whole_rows[0], expected[0])


def test_top_k_search_is_the_same_with_parallel_jobs(rng):
    bank, gallery, queries = rng.normal(size=(80, 6)), rng.normal(size=(300, 6)), rng.normal(size=(900, 6))
    fitted = CSLS(k=5).fit(bank, gallery=gallery)
    expected = fitted.top_k(queries=queries, k=4)
    fitted.set_params(n_jobs=3)
    for got, want in zip(fitted.set_params(working_memory=0.05).top_k(queries=queries, k=4), expected):
        assert_array_equal(got, want)
    sims = fitted.similarities(queries)
    for got, want in zip(fitted.top_k(sims, k=4), stable_top_k(fitted.transform(sims), 4)):
        assert_array_equal(got, want)


@pytest.mark.parametrize("k", [np.uint8(2), np.int16(3)])
def test_numpy_integer_k_does_not_wrap_around(rng, k):
    values = rng.normal(size=(40, 30))
    reducer = ColumnTopKMean(k)
    for rows in np.array_split(values, 5):
        reducer.update(rows, None)
    assert_allclose(reducer.result(), column_top_k_mean(values, int(k)), rtol=1e-13)
    assert_array_equal(row_top_k_indices(values, k)[0], stable_top_k(values, int(k))[0])


@pytest.mark.slow
@pytest.mark.parametrize(
    "estimator",
    [
        CSLS(k=5),
        NearestNeighborNormalization(k=4),
        DynamicInvertedSoftmax(k=2),
        InvertedSoftmax(),
        InvertedSoftmax(output="probability", beta=1.0),
        Centering(alpha=0.5),
        SinkhornNormalization(tau=0.5, n_iter=3),
        QueryBankZNorm(),
    ],
    ids=repr,
)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # Sinkhorn's
def test_top_k_without_scores_ranks_as_with_them(rng, estimator):
    bank, gallery, queries = rng.normal(size=(70, 9)), rng.normal(size=(400, 9)), rng.normal(size=(60, 9))
    fitted = estimator.fit(bank, gallery=gallery)
    indices, _ = fitted.top_k(queries=queries, k=8)
    alone = fitted.top_k(queries=queries, k=8, return_scores=False)
    assert isinstance(alone, np.ndarray)
    assert_array_equal(alone, indices)
    assert_array_equal(alone, stable_top_k(fitted.transform(fitted.similarities(queries)), 8)[0])
    sims = fitted.similarities(queries)
    assert_array_equal(fitted.top_k(sims, k=8, return_scores=False), indices)
    with pytest.raises(TypeError, match="return_scores must be True or False"):
        fitted.top_k(sims, k=8, return_scores="no")


def test_csls_ranks_by_its_bias_without_scores(rng, monkeypatch):
    """Without scores CSLS skips each row's own top k (its r_G), which ranks nothing."""
    bank, gallery, queries = rng.normal(size=(70, 9)), rng.normal(size=(400, 9)), rng.normal(size=(60, 9))
    fitted = CSLS(k=5).fit(bank, gallery=gallery)
    expected = fitted.top_k(queries=queries, k=8)[0]

    def no_row_term(*args, **kwargs):
        raise AssertionError("the row term was computed")

    monkeypatch.setattr(CSLS, "_row_state", no_row_term)
    assert_array_equal(fitted.top_k(queries=queries, k=8, return_scores=False), expected)


@pytest.mark.parametrize("estimator", [DynamicInvertedSoftmax(k=2), DualDynamicInvertedSoftmax(k=2)],
                         ids=repr)
def test_gated_normalisers_rank_each_row_by_its_forms_bias_without_scores(rng, monkeypatch, estimator):
    """Without scores a gated method ranks by ``s - bias`` of each row's form, no score computed."""
    bank, gallery, queries = rng.normal(size=(70, 9)), rng.normal(size=(400, 9)), rng.normal(size=(300, 9))
    gallery_bank = rng.normal(size=(50, 9))
    dual = isinstance(estimator, DualDynamicInvertedSoftmax)
    fitted = estimator.fit(bank, gallery=gallery, **({"gallery_bank": gallery_bank} if dual else {}))
    expected = fitted.top_k(queries=queries, k=8)[0]
    forms = fitted.row_forms(fitted.similarities(queries).argmax(axis=1))
    assert len(np.unique(forms)) >= 2  # raw rows beside normalised ones
    assert_array_equal(expected, stable_top_k(fitted.transform(fitted.similarities(queries)), 8)[0])

    def no_scores(*args, **kwargs):
        raise AssertionError("scores were computed")

    monkeypatch.setattr(type(fitted), "score_block", no_scores)
    assert_array_equal(fitted.top_k(queries=queries, k=8, return_scores=False), expected)


def test_probe_entries_broadcast_rows_and_columns_either_way(rng):
    values = rng.normal(size=(6, 5))
    rows, columns = np.array([[1], [4]]), np.array([[0, 3, 2], [4, 1, 1]])
    for bank in (values, np.asfortranarray(values)):
        assert_array_equal(ProbeMatrix(bank).entries(rows, columns), values[rows, columns])
        assert_array_equal(ProbeMatrix(bank).entries(columns, rows), values[columns, rows])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_top1_of_column_chunks_is_that_of_whole_rows(rng, dtype):
    # Few distinct values: most rows have ties, many across chunks (the lowest column wins).
    block = rng.integers(0, 4, size=(50, 37)).astype(dtype)
    block[3] = 7.0  # a constant row: column 0
    expected = block.argmax(axis=1)
    values, columns = row_top1(block)
    assert_array_equal(columns, expected)
    assert_array_equal(values, block.max(axis=1))
    assert values.dtype == dtype
    for cuts in ([0, 37], [0, 1, 36, 37], [0, 5, 6, 20, 37]):
        state = None
        for start, stop in itertools.pairwise(cuts):
            state = row_top1(block[:, start:stop], start, state)
        assert_array_equal(state[1], expected)
        assert_array_equal(state[0], block.max(axis=1))
    # The k = 1 selection is the same search.
    indices, best = row_top_k_indices(block, 1)
    assert_array_equal(indices[:, 0], expected)
    assert_array_equal(best[:, 0], block.max(axis=1))


@pytest.mark.parametrize(
    "estimator",
    [
        CSLS(k=5),
        NearestNeighborNormalization(k=4, alpha=0.7),
        InvertedSoftmax(beta=3.0),
        DynamicInvertedSoftmax(beta=3.0, k=2),
        MutualProximity(),
        QueryBankZNorm(),
        GloballyCorrected(),
    ],
    ids=repr,
)
@pytest.mark.parametrize("part_bytes", [1, 3 * 400 * 8], ids=["a row a part", "three rows a part"])
def test_top_k_scores_a_few_rows_at_a_time_as_transform_does(rng, monkeypatch, estimator, part_bytes):
    # 10 query rows in parts of one or three rows (the last part shorter): each part's
    # scores land in one reused buffer, and each row's top k is that of its own scores.
    bank, gallery, queries = rng.normal(size=(70, 9)), rng.normal(size=(400, 9)), rng.normal(size=(10, 9))
    fitted = clone(estimator).fit(bank, gallery=gallery)
    sims = np.round(fitted.similarities(queries), 1)  # ties, which go to the lowest index
    expected = stable_top_k(fitted.transform(sims), 6)
    monkeypatch.setattr(skqbnorm.normalizers._top_k, "SEARCH_PART_BYTES", part_bytes)
    indices, scores = fitted.top_k(sims, k=6)
    assert_array_equal(indices, expected[0])
    assert_array_equal(scores, expected[1])


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("return_scores", [True, False])
def test_top_k_selects_in_as_many_threads_as_the_blas_with_the_same_result(rng, monkeypatch, n_threads,
                                                                           return_scores):
    # 10 query rows in parts of one row, split among 1 to 3 threads: the same lists.
    bank, gallery, queries = rng.normal(size=(70, 9)), rng.normal(size=(400, 9)), rng.normal(size=(10, 9))
    fitted = NearestNeighborNormalization(k=4, alpha=0.7).fit(bank, gallery=gallery)
    expected = stable_top_k(fitted.transform(fitted.similarities(queries)), 6)
    monkeypatch.setattr(skqbnorm.normalizers._top_k, "SEARCH_PART_BYTES", 1)
    monkeypatch.setattr(skqbnorm._core._parallel, "blas_threads", lambda: n_threads)
    found = fitted.top_k(queries=queries, k=6, return_scores=return_scores)
    assert_array_equal(found[0] if return_scores else found, expected[0])
    if return_scores:
        assert_allclose(found[1], expected[1], rtol=1e-12)


@pytest.mark.parametrize("n_queries", [17, 5, 1])
@pytest.mark.parametrize("in_parts", [True, False], ids=["tiles on one BLAS thread", "blocks"])
@pytest.mark.parametrize("metric, dtype", [("cosine", np.float32), ("dot", np.float64)])
def test_similarities_and_top_k_read_the_same_products(rng, monkeypatch, in_parts, metric, dtype, n_queries):
    # Parts of 4 query rows (the last of 1) in strips of 150 gallery items (the last of
    # 100), each tile on one BLAS thread, over 1 to 3 threads: with as many parts as
    # threads or more (17 queries), each thread multiplies and searches its own parts;
    # with fewer (5 or 1), the tiles spread over the threads, then pieces of the rows.
    # Or (a gallery too wide for parts) blocks on the BLAS's threads. similarities and
    # top_k multiply alike, so top_k is transform then a stable sort, bitwise, and the
    # products are the same for every thread count.
    monkeypatch.setattr(skqbnorm._core._products, "SEARCH_PRODUCT_ROWS", 4)
    monkeypatch.setattr(skqbnorm._core._products, "MIN_SEARCH_PRODUCT_ROWS", 4 if in_parts else 8)
    monkeypatch.setattr(skqbnorm._core._products, "STRIP_COLUMNS", 150)
    monkeypatch.setattr(skqbnorm._core._products, "SPREAD_BYTES", 0)  # however small
    bank, gallery, queries = (rng.normal(size=(n, 9)).astype(dtype) for n in (70, 400, n_queries))
    for estimator in (NearestNeighborNormalization(k=4, alpha=0.7), DynamicInvertedSoftmax(), CSLS(k=3)):
        fitted = estimator.set_params(metric=metric).fit(bank, gallery=gallery)
        assert skqbnorm._core.searches_in_parts(400, np.dtype(dtype).itemsize) == in_parts
        products = []
        for n_threads in (1, 2, 3) if in_parts else (1,):
            monkeypatch.setattr(skqbnorm._core._parallel, "blas_threads", lambda n=n_threads: n)
            sims = fitted.similarities(queries)
            expected = stable_top_k(fitted.transform(sims), 6)
            indices, scores = fitted.top_k(queries=queries, k=6)
            assert_array_equal(indices, expected[0])
            assert_array_equal(scores, expected[1])
            assert_array_equal(fitted.top_k(queries=queries, k=6, return_scores=False), expected[0])
            products.append(sims)
        for sims in products[1:]:
            assert_array_equal(sims, products[0])


def test_a_single_query_spreads_its_product_over_the_threads(rng, monkeypatch):
    # One query in strips of 150 gallery items of a gallery as large as SPREAD_BYTES:
    # its tiles run on both threads (it ran on one, a part being one thread's).
    import threading

    monkeypatch.setattr(skqbnorm._core._products, "STRIP_COLUMNS", 150)
    monkeypatch.setattr(skqbnorm._core._products, "SPREAD_BYTES", 400 * 9 * 4)
    monkeypatch.setattr(skqbnorm._core._parallel, "blas_threads", lambda: 2)
    real, seen, both = skqbnorm.normalizers._top_k.embedding_products, [], threading.Barrier(2, timeout=10)

    def recording(*args, **kwargs):
        name = threading.current_thread().name
        if name not in seen:
            both.wait()  # a thread's first tile waits for the other thread's
        seen.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(skqbnorm.normalizers._top_k, "embedding_products", recording)
    bank, gallery, queries = (rng.normal(size=(n, 9)).astype(np.float32) for n in (70, 400, 1))
    fitted = NearestNeighborNormalization(k=4).fit(bank, gallery=gallery)
    indices, _ = fitted.top_k(queries=queries, k=6)
    assert len(seen) == 3 and len(set(seen)) == 2
    assert_array_equal(indices, stable_top_k(fitted.transform(fitted.similarities(queries)), 6)[0])
    # A gallery one byte smaller is searched on the calling thread: a dispatch would
    # cost more than it saves.
    monkeypatch.setattr(skqbnorm._core._products, "SPREAD_BYTES", 400 * 9 * 4 + 1)
    names = []
    monkeypatch.setattr(skqbnorm.normalizers._top_k, "embedding_products",
                        lambda *args, **kwargs: names.append(threading.current_thread().name)
                        or real(*args, **kwargs))
    fitted.top_k(queries=queries, k=6)
    assert names == [threading.current_thread().name] * 3


def test_blas_threads_follows_threadpoolctl_limits():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        assert blas_threads() == 1
    assert blas_threads() >= 1
