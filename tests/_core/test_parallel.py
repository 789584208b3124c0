"""The parallel driver (skqbnorm._core._parallel): jobs, leaves, working memory and the
BLAS threads, against counts written out by hand."""

import contextlib
import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from threadpoolctl import threadpool_limits

import skqbnorm._core._parallel
from skqbnorm._core import (
    ProbeMatrix,
    _parallel,
    alignment,
    blas_threads,
    one_blas_thread,
    reduce_bank,
)

MIB = 2**20


class _Leafy:
    def __init__(self, leaf_rows):
        self.leaf_rows = leaf_rows


def test_alignment_is_the_largest_leaf():
    assert alignment([]) == 1
    assert alignment([object()]) == 1
    assert alignment([object(), _Leafy(4), _Leafy(16)]) == 16


def test_alignment_of_a_probe_matrix():
    assert ProbeMatrix(np.zeros((5, 3))).alignment(4) == 4  # precomputed: the leaves only
    embedded = ProbeMatrix(np.ones((5, 1)), np.ones((1, 2**18)))
    assert embedded.alignment(1) == 128  # whole products


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


@pytest.mark.parametrize("n_blas_threads, expected", [(8, 4), (3, 1), (2, 1), (1, 1)])
def test_jobs_share_the_blas_threads(monkeypatch, n_blas_threads, expected):
    # Two jobs: each may give BLAS half the threads it may use now, and at least one.
    recorded = []

    def record_limits(limits=None, user_api=None):
        recorded.append((limits, user_api))
        return contextlib.nullcontext()

    monkeypatch.setattr(_parallel, "threadpool_limits", record_limits)
    monkeypatch.setattr(_parallel, "blas_threads", lambda: n_blas_threads)
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


def test_blas_threads_follows_threadpoolctl_limits():

    with threadpool_limits(limits=1, user_api="blas"):
        assert blas_threads() == 1
    assert blas_threads() >= 1


def test_jobs_never_raise_a_threadpoolctl_limit(monkeypatch):
    # Under a limit of one BLAS thread on 8 cores, two jobs each get one: a share of
    # the limit, not of the cores. (What blas_share asks of threadpoolctl, rather than
    # what a job thread reads back: a thread left by another test may restore the
    # process-wide limit while the jobs run.)
    monkeypatch.setattr(_parallel.os, "cpu_count", lambda: 8)
    asked = []
    monkeypatch.setattr(_parallel, "threadpool_limits",
                        lambda limits, user_api: asked.append(limits) or contextlib.nullcontext())
    monkeypatch.setattr(_parallel, "blas_threads", lambda: 1)
    bank = np.arange(40.0).reshape(10, 4)
    reduce_bank(ProbeMatrix(bank), lambda: [_Recorder(bank)], n_jobs=2)
    assert asked == [1]
    monkeypatch.setattr(_parallel, "blas_threads", lambda: 8)
    reduce_bank(ProbeMatrix(bank), lambda: [_Recorder(bank)], n_jobs=2)
    assert asked == [1, 4]


def test_the_package_shares_one_thread_controller():
    # The rerankers limit their threads with the core's controller, looked up once.
    from skqbnorm.rerankers import _graph

    assert _graph.one_thread is _parallel.one_thread
    assert _parallel.thread_controller() is _parallel.thread_controller()
    with _parallel.one_thread():
        assert blas_threads() == 1


def test_the_kept_threads_belong_to_their_process():
    # A pool (and the BLAS limit's lock) is kept per process id: a forked child, which
    # has none of its parent's threads, makes its own rather than wait on the parent's.
    assert _parallel.worker_pool(2) is _parallel.worker_pool(2)
    assert _parallel._worker_pool(-1, 2) is not _parallel.worker_pool(2)
    assert _parallel._one_blas_thread_lock(-1) is not _parallel._one_blas_thread_lock(_parallel.os.getpid())
