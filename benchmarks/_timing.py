"""Measurement helpers shared by the benchmark scripts."""

import time
import tracemalloc


def best_time(func, repeat=3):
    """The fastest of ``repeat`` runs of ``func()``, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def peak_mib(func):
    """Peak memory ``func()`` allocates beyond what was held before (NumPy reports its
    buffers to tracemalloc; the pages of a memory-mapped file are not allocations)."""
    tracemalloc.start()
    func()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20
