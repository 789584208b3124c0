"""Measurement helpers shared by the benchmark scripts."""

import os
import platform
import time
import tracemalloc
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info


def best_time(func, repeat=3):
    """The fastest of ``repeat`` runs of ``func()``, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def interleaved_best_times(functions, repeat=3):
    """The fastest of ``repeat`` runs of each ``functions[name]()``, in rounds that run each once.

    Interleaving spreads a slow spell of a shared machine over all the functions,
    instead of over whichever one happened to be running. Returns ``{name: seconds}``.
    """
    best = dict.fromkeys(functions, float("inf"))
    for _ in range(repeat):
        for name, func in functions.items():
            start = time.perf_counter()
            func()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


#: Bank rows per product of a fit from embeddings (skqbnorm._core.MIN_PRODUCT_ROWS).
PRODUCT_ROWS = 2048


def blocked_product(bank, gallery, reuse=False):
    """``bank @ gallery.T`` in products of ``PRODUCT_ROWS`` bank rows, each result
    dropped: the floor of a fit. With ``reuse``, written into one buffer."""
    gallery_t = gallery.T
    out = np.empty((min(PRODUCT_ROWS, len(bank)), len(gallery)), np.result_type(bank, gallery)) if reuse else None
    for start in range(0, len(bank), PRODUCT_ROWS):
        rows = bank[start : start + PRODUCT_ROWS]
        np.matmul(rows, gallery_t, out=None if out is None else out[: len(rows)])


def peak_mib(func):
    """Peak memory ``func()`` allocates beyond what was held before (NumPy reports its
    buffers to tracemalloc; the pages of a memory-mapped file are not allocations)."""
    tracemalloc.start()
    func()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def similarity_matrix(n_rows, n_columns, rng, scale=0.1):
    """Gaussian float32 similarities, with the first 1% of the columns raised (a few hubs)."""
    sims = rng.standard_normal((n_rows, n_columns), dtype=np.float32)
    sims *= scale
    sims[:, : max(1, n_columns // 100)] += 2 * scale
    return sims


def memory_mapped(array, folder, name="bank"):
    """``array`` saved in ``folder`` and opened read-only as an ``np.memmap``.

    Delete the returned map before ``folder`` goes: the file must be closed first.
    """
    path = Path(folder) / f"{name}.npy"
    np.save(path, array)
    return np.load(path, mmap_mode="r")


def load_average():
    """The 1-, 5- and 15-minute load averages, as text ("n/a" where the OS has none)."""
    try:
        return ", ".join(f"{load:.2f}" for load in os.getloadavg())
    except (AttributeError, OSError):
        return "n/a"


def machine_description():
    """One line: CPU, core count, NumPy and BLAS versions, load average."""
    blas = ", ".join(sorted(
        {f"{i['internal_api']} {i.get('version') or ''}".strip() for i in threadpool_info()}
    ))
    return (
        f"machine: {platform.machine()}, {platform.processor() or platform.platform()}, "
        f"{os.cpu_count()} cores; numpy {np.__version__}; {blas}; load average {load_average()}"
    )
