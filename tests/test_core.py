"""The streaming core: chunk and leaf sizing, the probe matrix, the parallel driver, the
column trees and the moments, each against values written out by hand or closed forms."""

import contextlib
import multiprocessing
import threading
from fractions import Fraction
from functools import partial

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
    _finite,
    _parallel,
    alignment,
    embedding_products,
    largest_norm,
    leaf_rows,
    moments,
    reduce_bank,
    rows_per_chunk,
)

# -- the streaming moments ------------------------------------------------------------------


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


MIB = 2**20


# ------------------------------------------------------------------ sizing rules


@pytest.mark.parametrize(
    "args, expected",
    [
        ((1024, 8, 1, 2), 64),  # 1 MiB / (1024 * 8 B * 2 buffers)
        ((1024, 8, None, 2), 1024),  # the default 16 MiB
        ((1, 8, 1, 1), 131072),  # 1 MiB / 8 B
        ((0, 8, 1, 1), 131072),  # no column counts as one
        ((10**9, 8, 1, 2), 1),  # nothing fits: still one row
    ],
)
def test_rows_per_chunk_by_hand(args, expected):
    assert rows_per_chunk(*args) == expected


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


class _Leafy:
    def __init__(self, leaf_rows):
        self.leaf_rows = leaf_rows


def test_alignment_is_the_largest_leaf():
    assert alignment([]) == 1
    assert alignment([object()]) == 1
    assert alignment([object(), _Leafy(4), _Leafy(16)]) == 16


def test_product_rows_by_hand():
    # 256 MiB of products: 2**28 / (2**18 columns * 8 B) = 128 rows; float32 fits 256.
    wide = np.ones((1, 2**18))
    assert ProbeMatrix(np.ones((1, 1)), wide).product_rows() == 128
    assert ProbeMatrix(np.ones((1, 1)), wide, dtype=np.float32).product_rows() == 256
    assert ProbeMatrix(np.ones((1, 1)), wide).product_rows(align=512) == 512
    assert ProbeMatrix(np.ones((3, 1)), np.ones((1, 1000))).product_rows() == 2048  # the cap
    # 2**28 / (200_000 * 8) = 167.8 rows: the power of two below.
    assert ProbeMatrix(np.ones((1, 1)), np.ones((1, 200_000))).product_rows() == 128


def test_alignment_of_a_probe_matrix():
    assert ProbeMatrix(np.zeros((5, 3))).alignment(4) == 4  # precomputed: the leaves only
    embedded = ProbeMatrix(np.ones((5, 1)), np.ones((1, 2**18)))
    assert embedded.alignment(1) == 128  # whole products


# ------------------------------------------------------------------ blocks and jobs


def test_embedding_blocks_are_numbered_and_computed_by_hand():
    # 2,100 bank rows in products of 2,048 rows, handed on in slices of 1,000 rows
    # (72,000 B / (3 columns * 8 B * 3 buffers)), numbered from first_row.
    rng = np.random.default_rng(0)
    bank = rng.normal(size=(2100, 2))
    gallery_t = rng.normal(size=(2, 3))
    probe = ProbeMatrix(bank, gallery_t)
    for first_row in [0, 4096]:
        blocks = list(probe.blocks(72_000 / MIB, first_row=first_row))
        bounds = [(0, 1000), (1000, 2000), (2000, 2048), (2048, 2100)]
        expected = [(first_row + start, first_row + stop) for start, stop in bounds]
        assert [(rows.start, rows.stop) for rows, _ in blocks] == expected
        for (start, stop), (_, block) in zip(bounds, blocks):
            assert_allclose(block, bank[start:stop] @ gallery_t, rtol=1e-12)


def test_a_non_finite_embedding_is_numbered_from_first_row():
    bank = np.ones((8, 2))
    bank[4, 1] = np.nan
    with pytest.raises(ValueError, match=r"embedding 14, dimension 1 "):
        ProbeMatrix(bank, np.ones((2, 3))).block(slice(3, 6), first_row=10)


def test_embedding_products_name_the_first_non_finite_entry():
    queries = np.ones((4, 3))
    queries[1, 2] = np.nan
    queries[3, 0] = np.inf
    with pytest.raises(ValueError, match=r"embedding 6, dimension 2 is nan"):
        embedding_products(queries, np.ones((3, 2)), slice(5, 9), "querybank", "dot")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_vouched_for_by_the_norms_cannot_overflow(rng, dtype):
    # Parallel rows whose norms multiply to just under a quarter of the largest float:
    # the bound holds, and the products it vouches for are finite.
    largest = np.finfo(dtype).max
    direction = np.abs(rng.normal(size=(1, 64)))
    direction /= np.linalg.norm(direction)
    queries = (direction * np.sqrt(largest / 4.1)).astype(dtype)
    gallery_t = queries.T.copy()
    norm = largest_norm(gallery_t, axis=0)
    assert _finite.products_stay_finite(queries, norm, dtype)
    assert np.isfinite(embedding_products(queries, gallery_t, slice(0, 1), "querybank", "dot",
                                          gallery_norm=norm)).all()
    # Twice as long: the bound no longer vouches, and the products themselves are tested.
    assert not _finite.products_stay_finite(2 * queries, norm, dtype)
    with pytest.raises(ValueError, match=r"row 0 to gallery item 0 overflows"):
        embedding_products(8 * queries, gallery_t, slice(0, 1), "querybank", "dot", gallery_norm=norm)
    nan = queries.copy()
    nan[0, 3] = np.nan
    assert not _finite.products_stay_finite(nan, norm, dtype)
    with pytest.raises(ValueError, match=r"embedding 0, dimension 3 is nan"):
        embedding_products(nan, gallery_t, slice(0, 1), "querybank", "dot", gallery_norm=norm)
    assert not _finite.products_stay_finite(queries, float("nan"), dtype)
    assert not _finite.products_stay_finite(queries, None, dtype)


class _Keeper:
    """A reducer that keeps every block it is given (and a copy), declaring so or not."""

    def __init__(self, keeps_blocks):
        if keeps_blocks is not None:
            self.keeps_blocks = keeps_blocks
        self.blocks, self.copies = [], []

    def update(self, block, rows):
        self.blocks.append(block)
        self.copies.append(block.copy())


@pytest.mark.parametrize("keeps_blocks", [True, None, False])
def test_one_product_buffer_serves_reducers_that_keep_no_block(rng, keeps_blocks):
    # 4,100 bank rows: three products of up to 2,048 rows. A reducer that keeps its
    # blocks (declared, or by default) gets fresh ones; one that declares it keeps none
    # gets every product in one buffer.
    bank, gallery_t = rng.normal(size=(4100, 3)), rng.normal(size=(3, 5))
    (keeper,) = reduce_bank(ProbeMatrix(bank, gallery_t), lambda: [_Keeper(keeps_blocks)], n_jobs=1)
    assert_allclose(np.concatenate(keeper.copies), bank @ gallery_t, rtol=1e-12)
    bases = {id(block.base) for block in keeper.blocks}
    if keeps_blocks is False:
        assert len(bases) == 1
    else:
        assert len(bases) == 3
        assert_array_equal(np.concatenate(keeper.blocks), np.concatenate(keeper.copies))


class _Recorder:
    """A reducer that records the rows it is given and checks their values."""

    def __init__(self, bank, leaf_rows=1):
        self.bank = bank
        self.leaf_rows = leaf_rows
        self.rows = []

    def update(self, block, rows):
        assert_array_equal(block, self.bank[rows])
        self.rows.append((rows.start, rows.stop))

    def merge(self, other):
        self.rows += other.rows


def _recorded_reduction(bank, leaf_rows, **kwargs):
    made = []

    def make_reducers():
        made.append(_Recorder(bank, leaf_rows))
        return [made[-1]]

    (reducer,) = reduce_bank(ProbeMatrix(bank), make_reducers, **kwargs)
    return reducer, made


def test_two_jobs_split_the_bank_and_its_working_memory():
    # Two jobs of 5 rows, each with half of 384 B / MiB: blocks of
    # 192 B / (4 columns * 8 B * 3 buffers) = 2 rows.
    bank = np.arange(40.0).reshape(10, 4)
    reducer, made = _recorded_reduction(bank, 1, working_memory=384 / MIB, n_jobs=2)
    assert len(made) == 2  # the first job reuses the reducers made to read the leaves
    assert reducer is made[0]
    assert reducer.rows == [(0, 2), (2, 4), (4, 5), (5, 7), (7, 9), (9, 10)]


def test_jobs_hold_whole_leaves():
    # Leaves of 4 rows: 3 leaves in two jobs of 1 and 2 leaves; blocks of 1 leaf.
    bank = np.arange(40.0).reshape(10, 4)
    reducer, made = _recorded_reduction(bank, 4, working_memory=384 / MIB, n_jobs=2)
    assert len(made) == 2
    assert reducer.rows == [(0, 4), (4, 8), (8, 10)]
    reducer, made = _recorded_reduction(bank, 4, working_memory=384 / MIB, n_jobs=1)
    assert len(made) == 1
    assert reducer.rows == [(0, 4), (4, 8), (8, 10)]


@pytest.mark.parametrize(
    "cpu_count, expected", [(8, 4), (3, 1), (2, 1), (1, 1), (None, 1)]
)
def test_jobs_share_the_blas_threads(monkeypatch, cpu_count, expected):
    # Two jobs: each may give BLAS cpu_count // 2 threads, and at least one.
    recorded = []

    def record_limits(limits=None, user_api=None):
        recorded.append((limits, user_api))
        return contextlib.nullcontext()

    monkeypatch.setattr(_parallel, "threadpool_limits", record_limits)
    monkeypatch.setattr(_parallel.os, "cpu_count", lambda: cpu_count)
    _recorded_reduction(np.ones((4, 2)), 1, n_jobs=2)
    assert recorded == [(expected, "blas")]
    assert type(recorded[0][0]) is int


def test_blas_thread_work_runs_on_kept_threads():
    # Both groups run at once (each waits for the other), on two kept threads, the
    # same for the next call; a call from one of them (which the pool could not
    # serve while its threads wait) runs on its caller's thread.
    def on_thread(group, barrier):
        barrier.wait(timeout=30)
        return [(part, threading.current_thread().name, _parallel.in_blas_threads(len, [1, 2], 2))
                for part in group]

    first, second = (_parallel.in_blas_threads(partial(on_thread, barrier=threading.Barrier(2)),
                                               list(range(5)), 2) for _ in range(2))
    assert [part for group in first for part, _, _ in group] == list(range(5))
    names = {name for group in first for _, name, _ in group}
    assert len(names) == 2 and all(name.startswith("skqbnorm") for name in names)
    assert {name for group in second for _, name, _ in group} == names
    assert all(nested == [2] for group in first for _, _, nested in group)


def _in_forked_child(queue):
    with _parallel.one_blas_thread() as n_threads:
        queue.put(_parallel.in_blas_threads(sum, [1, 2, 3, 4], max(n_threads, 2)))


def test_a_forked_child_gets_threads_and_a_lock_of_its_own():
    # The parent's kept threads do not exist in a forked child, nor the thread that
    # holds the BLAS limit's lock at the fork: the child starts its own of both.
    _parallel.in_blas_threads(sum, [1, 2], 2)
    held, release = threading.Event(), threading.Event()

    def hold():
        with _parallel.one_blas_thread():
            held.set()
            release.wait(timeout=60)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    held.wait(timeout=60)
    try:
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_in_forked_child, args=(queue,))
        child.start()
        child.join(timeout=60)
        if child.is_alive():
            child.kill()
    finally:
        release.set()
        holder.join(timeout=60)
    assert child.exitcode == 0 and queue.get(timeout=1) == [3, 7]


# ------------------------------------------------------------------ reduction trees


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


def _unit(rows):
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_column_mean_reads_unit_bank_rows_instead_of_products(rng, n_jobs):
    # From cosine embeddings a column mean is fed the unit bank rows (3 columns, not
    # the gallery's 5000) and maps their mean through the gallery: the float64 mean
    # of the products, in RESULT_COLUMNS-wide pieces (5000 = 4096 + 904).
    bank, gallery = rng.normal(size=(700, 3)), rng.normal(size=(5000, 3))
    probe = ProbeMatrix(bank, _unit(gallery).T, "cosine")
    reducer, widths = _fed_reducer(probe, lambda: [ColumnMean(5000)], working_memory=0.01, n_jobs=n_jobs)
    assert widths == {3}
    assert_allclose(reducer.result(), (_unit(bank) @ _unit(gallery).T).mean(axis=0), rtol=1e-12, atol=1e-15)
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
    probe = ProbeMatrix(bank, _unit(gallery).T, "cosine")
    sims = _unit(bank) @ _unit(gallery).T
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
    probe = ProbeMatrix(bank, _unit(gallery).T, "cosine")
    reducer, widths = _fed_reducer(probe, lambda: [ColumnMoments(5)])
    assert widths == {5}
    sims = _unit(bank) @ _unit(gallery).T
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


def test_moments_by_hand():
    # float32 values: mean 2.5, population std sqrt(1.25), exactly as float64.
    mean, std = moments(np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32), axis=1)
    assert mean.tolist() == [2.5]
    assert_allclose(std, [np.sqrt(1.25)], rtol=1e-15)
    # float64 values whose differences overflow: scaled first.
    mean, std = moments(np.array([[1.5e308, -1.5e308], [3.0, 5.0]]), axis=1)
    assert mean.tolist() == [0.0, 4.0]
    assert std.tolist() == [1.5e308, 1.0]
    # The scale is set by the largest magnitude, of either sign.
    mean, std = moments(np.array([[1e308, -1e-300], [-1e308, 1e-300]]), axis=1)
    assert_allclose(mean, [5e307, -5e307], rtol=1e-15)
    assert_allclose(std, [5e307, 5e307], rtol=1e-15)


def test_moments_pivot_on_the_first_entry():
    # The two passes run about the first entry: here that gives the correctly rounded
    # mean (exact rational mean, rounded once); about the last entry it is 1 ulp low.
    values = [3.45584192064786, 8.216181435011583, 3.304370761833871]
    exact = float(sum(map(Fraction, values)) / 3)
    mean, _ = moments(np.array([values]), axis=1)
    assert mean.tolist() == [exact] == [4.992131372497772]


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
