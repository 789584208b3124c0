"""Fits and searches on a device (torch tensors under array API dispatch), as same-run ratios.

On float32 unit vectors held as torch tensors on ``--device`` (``cuda`` or ``cpu``; by
default cuda where torch sees one), under ``sklearn.config_context(array_api_dispatch=True)``,
this prints:

a. fits from embeddings (IS, DIS, ``CSLS(k=256)``, ``NearestNeighborNormalization(k=256)``)
   over the device's own blocked product: ``torch.matmul`` of the same blocks of bank rows
   (as many as the fit reads at once under ``working_memory``) against the gallery, each
   result dropped, synchronised on CUDA; beside the same fits on the NumPy path
   (NumPy arrays, no dispatch, ``n_jobs=-1``);
b. ``top_k(queries=..., k=10)`` of each fitted normaliser over the device's product of the
   same blocks of query rows with the gallery, beside the NumPy path's ``top_k``;
c. nnn-retrieval's ``NNNRanker`` (its torch retriever, on the same device), where it is
   installed: its setup against the NNN fit, its search against NNN's ``top_k`` (it takes
   NumPy arrays and returns them, so its times include the copies to and from the device).

Each row gives seconds (best of ``--repeat`` interleaved rounds), the ratio to the device's
blocked product, the speed-up over the NumPy path, and the peak memory: on CUDA
``torch.cuda.max_memory_allocated`` during the call (the resident inputs included); on the
CPU the process's peak resident set (``resource.getrusage``), reset before each call where
Linux allows it. Where the NumPy path would take too long (a bank or a query set larger
than ``--numpy-bank`` / ``--numpy-queries`` rows), it runs on the first rows only and its
time is scaled up in proportion to the rows, and the output says so.

The blocks are those the normalisers read under ``working_memory``; by default the
device's own budget (``device_working_memory``: on CUDA a quarter of the free memory, at
most 4 GiB, which is 1,342 bank rows of float64 statistics at a gallery of 100,000; on
torch CPU 256 MiB, 838 rows at a gallery of 10,000), taken once before the fits (on CUDA
the fits ask again, so their blocks may differ a little with the free memory);
``--working-memory`` sets it for every fit, search and baseline alike.

Needs torch (not a dependency of skqbnorm) and array-api-compat. Run:

    python benchmarks/bench_device.py --device cuda        (bank 1,000,000 x gallery 100,000,
                                                              d = 512, 100,000 queries)
    python benchmarks/bench_device.py --small              (bank 20,000 x gallery 10,000,
                                                              d = 256, 10,000 queries)
    python benchmarks/bench_device.py --small --device cpu --working-memory 16
"""

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # before scipy is first imported
os.environ.setdefault("TQDM_DISABLE", "1")  # the peer's progress bars, read when tqdm is imported

import argparse
import contextlib
import io
import platform
import resource
import time
from functools import partial
from importlib import metadata

import numpy as np
import sklearn
from sklearn.base import clone

from skqbnorm import (
    CSLS,
    DynamicInvertedSoftmax,
    InvertedSoftmax,
    NearestNeighborNormalization,
)
from skqbnorm._core import rows_per_chunk
from skqbnorm._core._array_api import compat, device_working_memory, max_float
from skqbnorm._core._array_api import device as array_device
from skqbnorm.normalizers._array_api_path import N_BUFFERS

from _timing import load_average

LARGE = {"bank": 1_000_000, "gallery": 100_000, "dims": 512, "queries": 100_000}
SMALL = {"bank": 20_000, "gallery": 10_000, "dims": 256, "queries": 10_000}
SEARCH_K = 10
CHECKED_QUERIES = 1_000
PRODUCT = "baseline"
NO_PEER = "nnn-retrieval is not importable (pip install nnn-retrieval beside torch): no peer row."


# -- the device ------------------------------------------------------------------------


def import_torch():
    try:
        import torch
    except ImportError:
        raise SystemExit("bench_device.py needs torch (pip install torch); it is not installed.")
    return torch


class Device:
    """A torch device: synchronisation, peak memory and its name."""

    def __init__(self, torch, name):
        self.torch, self.name = torch, name
        self.is_cuda = name.startswith("cuda")

    def sync(self):
        if self.is_cuda:
            self.torch.cuda.synchronize(self.name)

    def reset_peak(self):
        if self.is_cuda:
            self.torch.cuda.reset_peak_memory_stats(self.name)
        else:
            reset_peak_rss()

    def peak_mib(self):
        if self.is_cuda:
            return self.torch.cuda.max_memory_allocated(self.name) / 2**20
        return peak_rss_mib()

    def memory_label(self):
        if self.is_cuda:
            return "peak device MiB (torch.cuda.max_memory_allocated, inputs included)"
        reset = "reset before each call" if reset_peak_rss() else "the run so far: Linux did not reset it"
        return f"peak RSS MiB (process, resource.getrusage; {reset})"

    def description(self):
        if self.is_cuda:
            return f"device: {self.torch.cuda.get_device_name(self.name)} ({self.name})"
        return f"device: CPU, {cpu_model()} ({os.cpu_count()} cores, {self.torch.get_num_threads()} torch threads)"


def reset_peak_rss():
    """Resets the process's peak resident set (Linux >= 4.0); whether it could."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def peak_rss_mib():
    scale = 2**20 if platform.system() == "Darwin" else 2**10  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def cpu_model():
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def timings(functions, repeat, device, host_names=()):
    """``{name: (best seconds, peak MiB)}`` of each ``functions[name]()``, in ``repeat``
    interleaved rounds, each call synchronised on the device; the peak of the names in
    ``host_names`` is the process's resident set, whatever the device."""
    found = {name: (float("inf"), 0.0) for name in functions}
    for _ in range(repeat):
        for name, func in functions.items():
            on_host = name in host_names
            if on_host:
                reset_peak_rss()
            else:
                device.reset_peak()
            start = time.perf_counter()
            func()
            device.sync()
            seconds = time.perf_counter() - start
            best, peak = found[name]
            found[name] = (min(best, seconds), max(peak, peak_rss_mib() if on_host else device.peak_mib()))
    return found


# -- data and the work ------------------------------------------------------------------


def unit_rows(n_rows, n_dims, rng, step=100_000):
    """Gaussian float32 rows scaled to unit length, built ``step`` rows at a time."""
    points = np.empty((n_rows, n_dims), dtype=np.float32)
    for start in range(0, n_rows, step):
        block = rng.standard_normal((min(step, n_rows - start), n_dims), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        points[start : start + len(block)] = block
    return points


def fitters(k, working_memory):
    estimators = {
        "IS": InvertedSoftmax(),
        "DIS": DynamicInvertedSoftmax(),
        f"CSLS(k={k})": CSLS(k=k),
        f"NNN(k={k})": NearestNeighborNormalization(k=k),
    }
    return {name: est.set_params(working_memory=working_memory) for name, est in estimators.items()}


def fit_block_rows(bank, n_gallery, working_memory):
    """Bank rows a fit on the device reads at once (float64 statistics where the device has
    them), under the device's budget where ``working_memory`` is None."""
    xp = compat().array_namespace(bank)
    where = array_device(bank)
    itemsize = 8 if max_float(xp, where) == xp.float64 else 4
    return rows_per_chunk(n_gallery, itemsize, device_working_memory(xp, where, working_memory),
                          N_BUFFERS)


def search_block_rows(queries, n_gallery, working_memory):
    """Query rows ``top_k`` on the device scores at once."""
    xp = compat().array_namespace(queries)
    budget = device_working_memory(xp, array_device(queries), working_memory)
    return rows_per_chunk(n_gallery, 8, budget, N_BUFFERS)


def blocked_product(torch, rows, gallery, step, select=None):
    """``rows @ gallery.T`` in blocks of ``step`` rows, each result dropped (or, with
    ``select``, cut to its ``select`` largest by ``torch.topk``)."""
    gallery_t = gallery.T
    for start in range(0, rows.shape[0], step):
        block = torch.matmul(rows[start : start + step], gallery_t)
        if select is not None:
            torch.topk(block, select, dim=1)


def dispatched(func):
    def run():
        with sklearn.config_context(array_api_dispatch=True):
            return func()
    return run


# -- the peer ---------------------------------------------------------------------------


def import_peer():
    """nnn-retrieval's ``nnn`` module, or None; quiet (it prints which faiss is missing)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            import nnn
    except ImportError:
        return None
    return nnn


def peer_functions(nnn, data, k, alpha, batch_size, device):
    """The peer's setup and search on ``device``; the ranker built first is reused to search."""
    use_gpu = device.is_cuda
    gpu_id = (int(device.name.split(":")[1]) if ":" in device.name else 0) if use_gpu else -1

    def setup():
        retriever = nnn.NNNRetriever(data["gallery"].shape[1], use_gpu=use_gpu, gpu_id=gpu_id)
        return nnn.NNNRanker(retriever, data["gallery"], data["bank"], alternate_ks=k,
                             alternate_weight=alpha, batch_size=batch_size,
                             use_gpu=use_gpu, gpu_id=gpu_id)

    ranker = {}

    def timed_setup():
        ranker["last"] = setup()

    def search():
        return ranker["last"].search(data["queries"], SEARCH_K)

    return timed_setup, search


# -- the report -------------------------------------------------------------------------


def report(title, found, numpy_of, device, scaled):
    """A Markdown table over the ``PRODUCT`` row of ``found``; ``numpy_of(name)``: the
    NumPy-path row computing the same thing, or None; ``scaled``: the NumPy rows'
    time factors (their memory is the host's resident set)."""
    baseline = found[PRODUCT][0]
    print(f"\n{title}")
    print(f"| | seconds | / device blocked product | speed-up over the NumPy path | {device.memory_label()} |")
    print("| --- | --- | --- | --- | --- |")
    for name, (seconds, peak) in found.items():
        seconds *= scaled.get(name, 1.0)
        reference = numpy_of(name)
        speed_up = "" if reference is None else f"{found[reference][0] * scaled.get(reference, 1.0) / seconds:.3g}x"
        label = "device blocked product (torch.matmul)" if name == PRODUCT else name
        host = " (host RSS)" if device.is_cuda and name in scaled else ""
        print(f"| {label} | {seconds:.3f} | {seconds / baseline:.2f}x | {speed_up} | {peak:,.0f}{host} |")


def fit_part(torch, device, data, tensors, args, nnn):
    step = fit_block_rows(tensors["bank"], args.gallery, args.working_memory)
    n_numpy = min(args.numpy_bank, args.bank)
    factor = args.bank / n_numpy
    functions = {PRODUCT: partial(blocked_product, torch, tensors["bank"], tensors["gallery"], step)}
    numpy_of, scaled, fitted = {}, {}, {}
    for name, estimator in fitters(args.k, args.working_memory).items():
        on_device, on_host = clone(estimator), clone(estimator).set_params(n_jobs=-1)
        fitted[name] = (on_device, on_host)
        functions[name] = dispatched(partial(on_device.fit, tensors["bank"], gallery=tensors["gallery"]))
        host_name = f"{name}, NumPy path" + (f" (x{factor:.4g} of {n_numpy:,} bank rows)" if factor > 1 else "")
        functions[host_name] = partial(on_host.fit, data["bank"][:n_numpy], gallery=data["gallery"])
        numpy_of[name], scaled[host_name] = host_name, factor
    if nnn is not None:
        setup, search = peer_functions(nnn, data, args.k, NearestNeighborNormalization().alpha,
                                       args.peer_batch, device)
        peer_name = f"nnn-retrieval NNNRanker setup (torch, batch {args.peer_batch})"
        functions[peer_name] = setup
        numpy_of[peer_name] = numpy_of[f"NNN(k={args.k})"]
    found = timings(functions, args.repeat, device, scaled)
    report(f"a. fits from embeddings, bank {args.bank:,} x gallery {args.gallery:,}, d={args.dims}, "
           f"{step:,} bank rows a block", found, numpy_of.get, device, scaled)
    return fitted, (search if nnn is not None else None)


def search_part(torch, device, data, tensors, fitted, peer_search, args):
    step = search_block_rows(tensors["queries"], args.gallery, args.working_memory)
    n_numpy = min(args.numpy_queries, args.queries)
    factor = args.queries / n_numpy
    queries = tensors["queries"]
    functions = {
        PRODUCT: partial(blocked_product, torch, queries, tensors["gallery"], step),
        f"the same products + torch.topk(k={SEARCH_K}) (reference)": partial(
            blocked_product, torch, queries, tensors["gallery"], step, SEARCH_K),
    }
    numpy_of, scaled = {}, {}
    for name, (on_device, on_host) in fitted.items():
        functions[name] = dispatched(partial(on_device.top_k, queries=queries, k=SEARCH_K))
        host_name = f"{name}, NumPy path" + (f" (x{factor:.4g} of {n_numpy:,} queries)" if factor > 1 else "")
        functions[host_name] = partial(on_host.top_k, queries=data["queries"][:n_numpy], k=SEARCH_K)
        numpy_of[name], scaled[host_name] = host_name, factor
    if peer_search is not None:
        peer_name = f"nnn-retrieval NNNRanker search (torch, batch {args.peer_batch})"
        functions[peer_name] = peer_search
        numpy_of[peer_name] = numpy_of[f"NNN(k={args.k})"]
    found = timings(functions, args.repeat, device, scaled)
    report(f"b. top_k(queries, k={SEARCH_K}) of {args.queries:,} queries over gallery {args.gallery:,}, "
           f"{step:,} query rows a block", found, numpy_of.get, device, scaled)


def agreement(fitted, data, tensors, args):
    """The share of queries whose top 10 equals the NumPy path's (full bank only)."""
    if args.numpy_bank < args.bank:
        print("\n(top-10 agreement with the NumPy path not checked: its fit saw a share of the bank)")
        return
    n = min(CHECKED_QUERIES, args.queries)
    shares = []
    for name, (on_device, on_host) in fitted.items():
        with sklearn.config_context(array_api_dispatch=True):
            found = on_device.top_k(queries=tensors["queries"][:n], k=SEARCH_K, return_scores=False)
        found = found.cpu().numpy() if hasattr(found, "cpu") else np.asarray(found)
        expected = on_host.top_k(queries=data["queries"][:n], k=SEARCH_K, return_scores=False)
        shares.append(f"{name} {np.mean(np.all(found == expected, axis=1)):.1%}")
    print(f"\ntop-10 identical to the NumPy path's, first {n:,} queries: " + "; ".join(shares))


# -- main -------------------------------------------------------------------------------


def parse_args(torch):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda if available)")
    parser.add_argument("--small", action="store_true",
                        help="bank 20,000 x gallery 10,000, d=256, 10,000 queries (a few minutes on 2 cores)")
    for name in ("bank", "gallery", "dims", "queries"):
        parser.add_argument(f"--{name}", type=int, default=None, help=f"default {LARGE[name]:,}")
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--working-memory", type=float, default=None,
                        help="MiB a fit or search holds at once (default: the device's budget, as the "
                             "normalisers take it on the device)")
    parser.add_argument("--numpy-bank", type=int, default=20_000,
                        help="most bank rows the NumPy path fits on (its time scaled up beyond)")
    parser.add_argument("--numpy-queries", type=int, default=10_000,
                        help="most queries the NumPy path searches (its time scaled up beyond)")
    parser.add_argument("--peer-batch", type=int, default=128, help="nnn-retrieval's batch size")
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--repeat", type=int, default=None, help="rounds (default 3, or 1 at the full size)")
    args = parser.parse_args()
    preset = SMALL if args.small else LARGE
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.repeat is None:
        args.repeat = 3 if args.bank * args.gallery <= SMALL["bank"] * SMALL["gallery"] * 25 else 1
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.k = min(args.k, args.bank, args.gallery)
    return args


def versions():
    found = []
    for name in ("skqbnorm", "numpy", "scikit-learn", "torch", "array-api-compat", "nnn-retrieval"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found.append(f"{name} {metadata.version(name)}")
    return "; ".join(found)


def main():
    torch = import_torch()
    args = parse_args(torch)
    device = Device(torch, args.device)
    print(f"{device.description()}\n{versions()}\nhost: {cpu_model()}, {os.cpu_count()} cores; "
          f"load average {load_average()}")
    rng = np.random.default_rng(0)
    data = {name: unit_rows(getattr(args, name), args.dims, rng) for name in ("bank", "gallery", "queries")}
    tensors = {name: torch.from_numpy(array).to(args.device) for name, array in data.items()}
    blocked_product(torch, tensors["queries"][:256], tensors["gallery"], 256)  # warm-up (CUDA context)
    device.sync()
    nnn = None if args.no_peer else import_peer()
    if nnn is None:
        print("peer: " + ("skipped (--no-peer)." if args.no_peer else NO_PEER))
    fitted, peer_search = fit_part(torch, device, data, tensors, args, nnn)
    search_part(torch, device, data, tensors, fitted, peer_search, args)
    agreement(fitted, data, tensors, args)
    if args.numpy_bank < args.bank or args.numpy_queries < args.queries:
        print("extrapolated: the NumPy path ran on the first rows its rows name, and its times "
              "above are scaled up in proportion to the rows.")
    if not device.is_cuda:
        print("no accelerator was measured: these are torch CPU tensors (run with --device cuda on a GPU).")
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
