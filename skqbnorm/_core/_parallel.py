"""The parallel driver: reduce the probe matrix in jobs of whole row groups, then merge.

Every block of bank rows is fed to a few *reducers* that keep only O(N) state (GC's
sorted columns excepted); jobs hold whole groups of rows, so that each reducer's
result is bitwise independent of the split (see ``_trees.ColumnTree``).
"""

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cache, partial

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from threadpoolctl import ThreadpoolController, threadpool_limits

from ._memory import DEFAULT_WORKING_MEMORY


def reduce_bank(probe, make_reducers, working_memory=None, n_jobs=None):
    """Reduce the probe matrix with the reducers ``make_reducers()`` returns.

    With several jobs, each reduces a contiguous range of bank rows (threads share
    the bank; under joblib's dask backend each task receives only its rows) within
    its share of ``working_memory``, and the partial reducers are merged. Every
    reducer's result is bitwise independent of the split (see ``ColumnTree``).

    Two optional hooks let a reducer use what the probe allows: ``for_probe(probe)``
    returns the reducer to use in its place (``ColumnTopKMean`` turns into
    ``GroupedColumnTopKMean`` on a precomputed bank, which it reads again), and
    ``reattach(probe)`` hands the merged reducer the probe that a job's copy from
    another process travelled without.
    """
    n_rows = probe.shape[0]
    make_reducers = partial(_reducers_for, probe, make_reducers)
    first = make_reducers()
    align = probe.alignment(alignment(first))  # whole leaves and products per job
    n_groups = -(-n_rows // align)
    n_parts = max(1, min(effective_n_jobs(n_jobs), n_groups))
    if n_parts == 1 or bank_row_reducers(probe, first) is not None:
        # Bank rows (see reduce_rows) are read in one job: their reductions are cheap
        # (a mean, a covariance) or spread their own products over the threads.
        return reduce_rows(probe, first, 0, working_memory)
    bounds = np.minimum(np.linspace(0, n_groups, n_parts + 1).astype(int) * align, n_rows)
    share = (DEFAULT_WORKING_MEMORY if working_memory is None else working_memory) / n_parts
    with blas_share(n_parts):
        parts = Parallel(n_jobs=n_jobs, prefer="threads")(
            delayed(reduce_rows)(
                probe.rows(slice(start, stop)),
                first if start == 0 else make_reducers(),
                start,
                share,
            )
            for start, stop in itertools.pairwise(bounds)
        )
    reducers = parts[0]
    for part in parts[1:]:
        for reducer, other in zip(reducers, part):
            reducer.merge(other)
    for reducer in reducers:  # a job's copy from another process travels without the bank
        if hasattr(reducer, "reattach"):
            reducer.reattach(probe)
    return reducers


def _reducers_for(probe, make_reducers):
    """The reducers of ``make_reducers()``, each replaced by its ``for_probe(probe)`` where it has one."""
    return [reducer.for_probe(probe) if hasattr(reducer, "for_probe") else reducer for reducer in make_reducers()]


@cache
def thread_controller():
    """The process's thread pools (``threadpoolctl``), looked up once for the package: a
    lookup is slow beside a search."""
    return ThreadpoolController()


def one_thread():
    """A context that limits BLAS and OpenMP to one thread, for work too small to gain
    from threads, whose wake-ups cost more than the arithmetic when cores are shared."""
    return thread_controller().limit(limits=1)


def blas_threads():
    """The threads the BLAS may use now (under any ``threadpoolctl`` limit), at least one."""
    return max((pool.num_threads for pool in thread_controller().select(user_api="blas").lib_controllers),
               default=1)


def in_blas_threads(search, parts, n_threads=None):
    """``search(group)`` for contiguous groups of ``parts``, one group per BLAS thread.

    The selection after a product is as parallel as the product itself: it runs on
    as many threads as the BLAS may use (``threadpoolctl`` limits both; a job of
    ``n_jobs`` has its share), or on ``n_threads``. Each part's result does not
    depend on the split. The threads are kept (``worker_pool``); a call from one of
    them runs on its caller's thread.
    """
    n_threads = min(blas_threads() if n_threads is None else n_threads, len(parts))
    if n_threads <= 1 or getattr(_WORKER, "busy", False):
        return [search(parts)]
    groups = [parts[group[0] : group[-1] + 1] for group in np.array_split(np.arange(len(parts)), n_threads)]
    if getattr(_HOLDER, "depth", 0):  # the caller's limit, in each thread (see one_blas_thread)
        search = partial(_on_one_blas_thread, search)
    return list(worker_pool(n_threads).map(search, groups))


def _on_one_blas_thread(search, group):
    with one_blas_thread():
        return search(group)


#: Marks the threads of ``worker_pool``: their work may not wait for the pool.
_WORKER = threading.local()


def _mark_worker():
    _WORKER.busy = True


def worker_pool(n_threads):
    """A pool of ``n_threads`` threads kept for the process: a forked child, which has
    none of its parent's threads, gets its own (the pools are kept per process id).

    Kept, not joblib's ``Parallel``: a pool started for every search costs more than the
    search on a few queries (the user guide's performance page gives the measurements).
    """
    return _worker_pool(os.getpid(), n_threads)


@cache
def _worker_pool(pid, n_threads):
    return ThreadPoolExecutor(n_threads, thread_name_prefix="skqbnorm", initializer=_mark_worker)


@cache
def _one_blas_thread_lock(pid):
    """``one_blas_thread``'s lock, one per process, so that a forked child never waits
    for a thread that the fork left behind.

    Kept beside ``threadpoolctl``: OpenBLAS's thread count is process-wide, so that
    concurrent limits would restore each other's in the middle of a product.
    """
    return threading.RLock()


#: How many times the current thread has entered ``one_blas_thread``.
_HOLDER = threading.local()


@contextmanager
def one_blas_thread():
    """The BLAS on one thread while inside; yields how many it had (threads for the work).

    For work that spreads its own products over threads: each product then runs on
    one thread, so that it rounds the same way whatever the thread count. One holder
    at a time (a lock), so that concurrent holders (jobs, dask tasks) neither
    oversubscribe nor restore each other's limits. The holder may enter again; the
    kept threads (``worker_pool``), whose work a holder may be waiting for, enter
    without the lock, limiting only their own thread, and ``in_blas_threads`` enters
    for them when its caller holds the limit.
    """
    if getattr(_WORKER, "busy", False):
        # An OpenMP BLAS keeps a limit per thread: the caller's does not reach here.
        with thread_controller().limit(limits=1, user_api="blas"):
            yield 1
        return
    with _one_blas_thread_lock(os.getpid()):
        depth = getattr(_HOLDER, "depth", 0)
        _HOLDER.depth = depth + 1
        try:
            n_threads = blas_threads()
            with thread_controller().limit(limits=1, user_api="blas"):
                yield n_threads
        finally:
            _HOLDER.depth = depth


def in_product_threads(search, parts):
    """``search(group)`` for groups of ``parts`` on the BLAS's threads, each thread's
    products on one BLAS thread (``one_blas_thread``): the groups' results, in order.

    For work that multiplies and then reduces each part in the same thread, while
    it is in cache, and whose products must round the same way for any thread count.
    """
    with one_blas_thread() as n_threads:
        return in_blas_threads(search, parts, n_threads)


def blas_share(n_parts):
    """Context in which each of ``n_parts`` parallel jobs may use its share of the BLAS threads.

    The jobs share the BLAS's threads (``threadpoolctl`` limits them): BLAS (the
    embedding products) must not spawn its own threads on top, or both oversubscribe.
    """
    return threadpool_limits(limits=max(1, blas_threads() // n_parts), user_api="blas")


def bank_row_reducers(probe, reducers):
    """The reducers to feed the unit bank rows in place of ``reducers`` (see
    ``reduce_rows``), or None when the products are to be read."""
    if not probe.bounded_products:
        return None
    swapped = [reducer.for_bank_rows(probe.gallery_t) if hasattr(reducer, "for_bank_rows") else None
               for reducer in reducers]
    return None if any(reducer is None for reducer in swapped) else swapped


def alignment(reducers):
    """Rows per group that blocks must keep whole: the largest leaf of the reducers' trees."""
    return max((getattr(reducer, "leaf_rows", 1) for reducer in reducers), default=1)


def keeps_no_block(reducers):
    """Whether every reducer declares (``keeps_blocks = False``) that it holds no block
    once its ``update`` returns, so that one buffer may serve every block."""
    return not any(getattr(reducer, "keeps_blocks", True) for reducer in reducers)


def reduce_rows(probe, reducers, first_row, working_memory):
    """Feed every block of ``probe`` (its rows numbered from ``first_row``) to ``reducers``.

    From cosine embeddings, where every reducer offers one (``for_bank_rows``), a
    reducer is replaced by one fed the unit bank rows instead of the products, whose
    result it maps through the gallery: a column mean of the similarities is the
    gallery's product with the mean bank row, their variance a quadratic form of the
    rows' covariance. The decision rests on the metric and the shapes alone, so every
    job and dask task takes the same path; returns the reducers fed.
    """
    swapped = bank_row_reducers(probe, reducers)
    if swapped is not None:
        reducers, probe = swapped, probe.prepared_bank()
    blocks = probe.blocks(working_memory, first_row=first_row, align=alignment(reducers),
                          reuse=keeps_no_block(reducers))
    for rows, block in blocks:
        for reducer in reducers:
            reducer.update(block, rows)
    return reducers
