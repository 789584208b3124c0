"""What the custom pieces of the thread model save over the standard tools, same run.

The searches from embeddings spread their parts over threads kept for the process
(``skqbnorm._core._parallel.worker_pool``) and limit the BLAS through one
``threadpoolctl`` controller looked up once. This times ``top_k(queries=Q, k=10)`` of
DIS (gallery 10,000 x d = 512, float32 unit rows) for 1, 32 and 2,000 queries:

- ``kept``: the package as it is;
- ``joblib``: every spread through ``joblib.Parallel(prefer="threads")`` instead of
  the kept threads (a fresh pool per call, as joblib runs it);
- ``threadpool_limits``: every BLAS limit through ``threadpoolctl.threadpool_limits``,
  which looks the thread pools up again on each call;

and ``one_blas_thread`` on its own against ``threadpool_limits(1)``. Last, four threads
call ``similarities`` and ``top_k`` of 64 queries ten times each, with
``one_blas_thread``'s lock, then without it (each caller's ``threadpoolctl`` limit
alone): the results that differ from a lone caller's, bitwise, and the BLAS threads
left once they are done. Every figure is
the median of ``--repeat`` interleaved rounds (each round runs every variant once),
with the rounds' range. Run:

    python benchmarks/bench_threads.py               (about 2 minutes on 2 cores)
    python benchmarks/bench_threads.py --repeat 3    (a quick run)
"""

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext

import numpy as np
from joblib import Parallel, delayed
from threadpoolctl import ThreadpoolController, threadpool_limits

from skqbnorm import DynamicInvertedSoftmax
from skqbnorm._core import _parallel

from _timing import load_average, machine_description

N_GALLERY, N_DIMS, N_BANK = 10_000, 512, 4_000
#: Queries per search, and searches per timed call (so that one call takes a while).
QUERIES = {1: 200, 32: 20, 2_000: 1}


class JoblibPool:
    """``worker_pool``'s ``map`` run by ``joblib.Parallel`` with threads, one pool per call."""

    def __init__(self, n_threads):
        self.n_threads = n_threads

    def map(self, function, groups):
        return Parallel(n_jobs=self.n_threads, prefer="threads")(
            delayed(_as_worker)(function, group) for group in groups)


def _as_worker(function, group):
    _parallel._WORKER.busy = True  # as the kept threads are marked: no nested spread, no lock
    try:
        return function(group)
    finally:
        _parallel._WORKER.busy = False


@contextmanager
def patched(name, value):
    saved = getattr(_parallel, name)
    setattr(_parallel, name, value)
    try:
        yield
    finally:
        setattr(_parallel, name, saved)


VARIANTS = {
    "kept": nullcontext,
    "joblib": lambda: patched("worker_pool", JoblibPool),
    "threadpool_limits": lambda: patched("thread_controller", ThreadpoolController),
}


def unit_rows(n_rows, rng):
    points = rng.standard_normal((n_rows, N_DIMS), dtype=np.float32)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points


def timed(function, calls):
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls


def summary(times):
    return f"{np.median(times) * 1e3:.2f} ms [{min(times) * 1e3:.2f}, {max(times) * 1e3:.2f}]"


def searches(repeat, rng):
    gallery = unit_rows(N_GALLERY, rng)
    fitted = DynamicInvertedSoftmax().fit(unit_rows(N_BANK, rng), gallery=gallery)
    queries = {n: unit_rows(n, rng) for n in QUERIES}
    expected = {n: fitted.top_k(queries=queries[n], k=10) for n in QUERIES}
    times = {(n, name): [] for n in QUERIES for name in VARIANTS}
    for _ in range(repeat):
        for n, calls in QUERIES.items():
            for name, variant in VARIANTS.items():
                with variant():
                    times[n, name].append(timed(lambda n=n: fitted.top_k(queries=queries[n], k=10), calls))
                    found = fitted.top_k(queries=queries[n], k=10)
                assert all(np.array_equal(a, b) for a, b in zip(found, expected[n])), name
    print(f"\ntop_k(queries=Q, k=10) of DIS, gallery {N_GALLERY} x d={N_DIMS}, per search: "
          "median [range] of the rounds, and the median over 'kept'")
    print("| queries | " + " | ".join(VARIANTS) + " |")
    print("| --- |" + " --- |" * len(VARIANTS))
    for n in QUERIES:
        kept = np.median(times[n, "kept"])
        cells = [summary(times[n, name]) + ("" if name == "kept" else f", {np.median(times[n, name]) / kept:.2f}x")
                 for name in VARIANTS]
        print(f"| {n} | " + " | ".join(cells) + " |")


def limits(repeat, calls=2000):
    def kept():
        with _parallel.one_blas_thread():
            pass

    def standard():
        with threadpool_limits(limits=1, user_api="blas"):
            pass

    times = {"one_blas_thread": [], "threadpool_limits(1)": []}
    for _ in range(repeat):
        times["one_blas_thread"].append(timed(kept, calls))
        times["threadpool_limits(1)"].append(timed(standard, calls))
    print("\nentering and leaving a limit of one BLAS thread, per call")
    for name, values in times.items():
        print(f"- {name}: {np.median(values) * 1e6:.1f} us [{min(values) * 1e6:.1f}, {max(values) * 1e6:.1f}]")


def concurrent_callers(rng, n_callers=4, calls=10):
    """Bitwise mismatches against a lone caller, and the BLAS threads left: with the lock,
    then without it (once: a limit changed behind the package's back, even when set back,
    makes later concurrent calls round differently, so that a second round would not
    compare like with like)."""
    fitted = DynamicInvertedSoftmax().fit(unit_rows(N_BANK, rng), gallery=unit_rows(N_GALLERY, rng))
    queries = [unit_rows(64, rng) for _ in range(n_callers)]
    alone = [(fitted.similarities(q), *fitted.top_k(queries=q, k=10)) for q in queries]
    before = _parallel.blas_threads()

    def caller(i):
        found = [(fitted.similarities(queries[i]), *fitted.top_k(queries=queries[i], k=10)) for _ in range(calls)]
        return sum(not all(np.array_equal(a, b) for a, b in zip(result, alone[i])) for result in found)

    variants = {"with the lock": nullcontext,
                "without it": lambda: patched("_one_blas_thread_lock", lambda pid: nullcontext())}
    print(f"\n{n_callers} threads, {calls} x (similarities, top_k) of 64 queries each:")
    for name, variant in variants.items():
        with variant(), ThreadPoolExecutor(n_callers) as pool:
            start = time.perf_counter()
            mismatches = sum(pool.map(caller, range(n_callers)))
            seconds = time.perf_counter() - start
        print(f"- {name}: {mismatches} of {n_callers * calls} results differ bitwise from a lone "
              f"caller's; BLAS threads after: {_parallel.blas_threads()} (before: {before}); {seconds:.2f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(machine_description())
    rng = np.random.default_rng(0)
    searches(args.repeat, rng)
    limits(args.repeat)
    concurrent_callers(rng)
    print(f"\nload average at the end: {load_average()}")


if __name__ == "__main__":
    main()
