"""skqbnorm beside nnn-retrieval, the packaged Nearest Neighbor Normalization (torch).

On float32 embeddings (default d = 512, bank 50,000, gallery 20,000, 5,000 queries,
k = 256, alpha = 0.5), with the same arrays given to every tool, this prints:

a. setup: nnn-retrieval's ``NNNRanker`` (its torch retriever, and its faiss retriever
   when ``faiss`` imports) at every ``--batch-sizes`` (128 to 4,096), against
   skqbnorm's ``CSLS(k).fit`` and ``NearestNeighborNormalization(k, alpha).fit`` from
   embeddings, and against the blocked matrix product (``bank @ gallery.T`` in products
   of 2,048 bank rows, the floor of a fit), each ratio to the peer at its fastest batch
   size;
b. top-10 search: the peer's ``search`` against skqbnorm's ``top_k(queries=..., k=10,
   return_scores=False)`` (the indices: what is compared here),
   and against one matrix product ``queries @ gallery.T`` plus ``np.argpartition``;
c. memory: peak RSS above the RSS before each step, in a fresh subprocess per tool
   (tracemalloc does not see torch's buffers), for the peer at its default and its
   fastest batch sizes;
d. whether the top-10 lists agree (NNN with alpha = 0.5 ranks as CSLS does);
e. the matrix products alone: torch's ``einsum`` in the peer's batches against NumPy's
   ``matmul`` in skqbnorm's, on the same shapes (what the BLAS, not the method, costs).

Times are the best of ``--repeat`` interleaved rounds. The peer is not a dependency of
skqbnorm; install it beside it (``faiss-cpu<1.10`` only for its faiss retriever):

    pip install torch nnn-retrieval "faiss-cpu<1.10"

Run: python benchmarks/peers.py               (the sizes above; several minutes on 2 cores)
     python benchmarks/peers.py --scale 0.05  (a quick smoke run)
"""

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from skqbnorm import CSLS, NearestNeighborNormalization

from _timing import (
    PRODUCT_ROWS,
    blocked_product,
    interleaved_best_times,
    load_average,
    machine_description,
)

SEARCH_K = 10
BATCH_SIZES = "128,256,512,1024,2048,4096"
PRODUCT = "numpy matrix product"
PRODUCT_SHOWN = {
    "setup": f"bank @ gallery.T, {PRODUCT_ROWS} rows a product",
    "search": "queries @ gallery.T + argpartition (numpy)",
}
WIDTH = 44
INSTALL_HINT = (
    "nnn-retrieval and torch are not importable, so there is no peer to measure.\n"
    "Install them beside skqbnorm (not a dependency of it):\n"
    "    pip install torch nnn-retrieval\n"
    "and, for nnn-retrieval's faiss retriever too:\n"
    '    pip install "faiss-cpu<1.10"'
)


def import_peer():
    """The ``nnn`` module with torch, or None; quiet (no progress bars, no import notes)."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints which faiss is missing
            import nnn
            import torch
    except ImportError:
        return None
    return nnn, torch


def faiss_retriever_works(nnn):
    """Whether the peer's faiss retriever can be built (faiss-cpu >= 1.10 refuses the
    ``nprobe`` it sets on a flat index)."""
    try:
        nnn.FaissCPURetriever(4)
    except (AttributeError, ImportError):
        return False
    return True


def set_threads(threads):
    peer = import_peer()
    if peer is not None:
        peer[1].set_num_threads(threads)
    with contextlib.suppress(ImportError):
        import faiss

        faiss.omp_set_num_threads(threads)
    threadpool_limits(threads)


def versions():
    names = ("skqbnorm", "numpy", "torch", "nnn-retrieval", "faiss-cpu")
    found = []
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found.append(f"{name} {metadata.version(name)}")
    return "; ".join(found)


# -- data -----------------------------------------------------------------------------


def embeddings(n_rows, n_dims, centres, rng, unit):
    """Float32 points around the given cluster centres (unit rows if ``unit``)."""
    labels = rng.integers(len(centres), size=n_rows)
    points = rng.standard_normal((n_rows, n_dims), dtype=np.float32)
    points += centres[labels]
    if unit:
        points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points


def make_data(sizes, n_dims, metric, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((64, n_dims), dtype=np.float32) * 0.6
    unit = metric == "cosine"  # normalised once; every tool then sees the same arrays
    return {name: embeddings(n, n_dims, centres, rng, unit) for name, n in sizes.items()}


# -- the tools ------------------------------------------------------------------------


class Tool:
    """One way to set up from (bank, gallery) and to search the top 10 of queries."""

    def __init__(self, name, setup, search, kind):
        self.name, self.setup, self.search, self.kind = name, setup, search, kind


def peer_tool(retriever_name, params, batch_size):
    nnn, _ = import_peer()

    def setup(data):
        retriever = getattr(nnn, retriever_name)(data["gallery"].shape[1])
        return nnn.NNNRanker(
            retriever, data["gallery"], data["bank"],
            alternate_ks=params.k, alternate_weight=params.alpha, batch_size=batch_size,
        )

    def search(ranker, data):
        return ranker.search(data["queries"], SEARCH_K)[1]

    label = "torch" if retriever_name == "NNNRetriever" else "faiss"
    tool = Tool(f"nnn-retrieval NNNRanker ({label}, batch {batch_size})", setup, search, f"peer-{label}")
    tool.batch_size = batch_size
    return tool


def ours_tool(estimator):
    def setup(data):
        return estimator.fit(data["bank"], gallery=data["gallery"])

    def search(fitted, data):  # the indices, as the peer's search is used here
        return fitted.top_k(queries=data["queries"], k=SEARCH_K, return_scores=False)

    params = estimator.get_params()
    shown = ", ".join(f"{key}={params[key]}" for key in ("k", "alpha") if key in params)
    short = "NNN" if isinstance(estimator, NearestNeighborNormalization) else "CSLS"
    return Tool(f"skqbnorm {short}({shown})", setup, search, "ours")


def product_tool():
    def setup(data):
        blocked_product(data["bank"], data["gallery"])

    def search(_, data):
        scores = np.matmul(data["queries"], data["gallery"].T)
        top = np.argpartition(-scores, SEARCH_K - 1, axis=1)[:, :SEARCH_K]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
        return np.take_along_axis(top, order, axis=1)

    return Tool(PRODUCT, setup, search, "product")


def make_tools(params):
    ours = {"metric": params.metric, "n_jobs": params.n_jobs}
    tools = [
        ours_tool(CSLS(k=params.k, **ours)),
        ours_tool(NearestNeighborNormalization(k=params.k, alpha=params.alpha, **ours)),
        product_tool(),
    ]
    peer = import_peer()
    if peer is not None:
        retrievers = ["NNNRetriever"]
        if not params.no_faiss and faiss_retriever_works(peer[0]):
            retrievers.append("FaissCPURetriever")
        peers = [peer_tool(name, params, size) for name in retrievers for size in params.batch_sizes]
        tools = peers + tools
    return tools


def fastest(tools, times):
    """The tools to compare with: ours, the product, and each peer at its fastest batch size."""
    chosen = {}
    for tool in tools:
        best = chosen.get(tool.kind) if tool.kind.startswith("peer") else None
        if best is None or times[tool.name] < times[best.name]:
            chosen[tool.kind if tool.kind.startswith("peer") else tool.name] = tool
    return list(chosen.values())


# -- timing ---------------------------------------------------------------------------


def time_all(tools, data, repeat):
    """Best setup and search seconds per tool, and each tool's last fitted state and top 10."""
    fitted, found = {}, {}

    def setup(tool):
        return lambda: fitted.__setitem__(tool.name, tool.setup(data))

    def search(tool):
        return lambda: found.__setitem__(tool.name, tool.search(fitted[tool.name], data))

    setup_times = interleaved_best_times({tool.name: setup(tool) for tool in tools}, repeat)
    search_times = interleaved_best_times({tool.name: search(tool) for tool in tools}, repeat)
    return setup_times, search_times, fitted, found


# -- memory, one fresh subprocess per tool -------------------------------------------------


def rss_mib():
    """(current RSS, peak RSS since the last reset) in MiB, from /proc (Linux)."""
    status = Path("/proc/self/status").read_text()
    return tuple(
        int(re.search(rf"{key}:\s+(\d+) kB", status).group(1)) / 1024
        for key in ("VmRSS", "VmHWM")
    )


def reset_peak_rss():
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def step_memory(step):
    """Peak RSS above the RSS before ``step()`` and the RSS it leaves held, in MiB."""
    reset_peak_rss()
    before = rss_mib()[0]
    result = step()
    now, peak = rss_mib()
    return result, peak - before, now - before


def child(params):
    """Run one tool on the saved data and print its memory as JSON (the subprocess side)."""
    set_threads(params.threads)
    folder = Path(params.data)
    data = {name: np.load(folder / f"{name}.npy") for name in ("bank", "gallery", "queries")}
    tool = next(tool for tool in make_tools(params) if tool.name == params.child)
    fitted, setup_peak, setup_held = step_memory(lambda: tool.setup(data))
    _, search_peak, _ = step_memory(lambda: tool.search(fitted, data))
    print(json.dumps({"setup_peak": setup_peak, "setup_held": setup_held,
                      "search_peak": search_peak}))


def memory_tools(tools, setup_times, search_times):
    """Ours, the product, and each peer at its default batch size and its fastest ones."""
    chosen = {t.name for t in fastest(tools, setup_times)} | {t.name for t in fastest(tools, search_times)}
    return [t for t in tools if t.name in chosen or getattr(t, "batch_size", None) == 128]


def memory_all(tools, data, argv):
    """{tool name: memory figures}, each measured in a fresh interpreter."""
    if not Path("/proc/self/clear_refs").exists():
        return {}
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, array in data.items():
            np.save(Path(folder) / f"{name}.npy", array)
        for tool in tools:
            command = [sys.executable, __file__, *argv, "--data", folder, "--child", tool.name]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode:
                print(f"memory run of {tool.name} failed:\n{done.stderr[-2000:]}")
                continue
            results[tool.name] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


# -- agreement ------------------------------------------------------------------------


def near_tie_rows(rows, lists, data, bias, tolerance):
    """Whether each list of ``rows`` is the exact top 10 up to score gaps below ``tolerance``.

    Scores are recomputed in float64 as ``q . g - bias_g``.
    """
    queries = data["queries"][rows].astype(np.float64)
    scores = queries @ data["gallery"].T.astype(np.float64) - bias
    best = -np.sort(-scores, axis=1)[:, :SEARCH_K]
    listed = np.take_along_axis(scores, lists[rows], axis=1)
    return np.all(np.abs(listed - best) <= tolerance, axis=1)


def agreement(name_a, name_b, found, data, bias):
    a, b = found[name_a], found[name_b]
    same_order = np.all(a == b, axis=1)
    same_set = np.all(np.sort(a, axis=1) == np.sort(b, axis=1), axis=1)
    line = (f"{name_a} vs {name_b}: same order {100 * same_order.mean():.2f}%, "
            f"same set {100 * same_set.mean():.2f}% of {len(a)} queries")
    differ = np.flatnonzero(~same_order)
    if len(differ):
        tolerance = 1e-5 * max(1.0, float(np.abs(bias).max()))
        ties = near_tie_rows(differ, a, data, bias, tolerance)
        ties &= near_tie_rows(differ, b, data, bias, tolerance)
        agree = (len(a) - len(differ) + ties.sum()) / len(a)
        line += (f"; {len(differ)} differ, {ties.sum()} of them only within near-ties "
                 f"(float64 score gaps <= {tolerance:.0e}): agreement ties aside "
                 f"{100 * agree:.2f}%")
    return line


def agreements(tools, found, fitted, data, alpha, search_times):
    """Ours against each other, and against each peer at its fastest search batch size."""
    tools = fastest(tools, search_times)
    ours_nnn = next(t.name for t in tools if t.name.startswith("skqbnorm NNN"))
    ours_csls = next(t.name for t in tools if t.name.startswith("skqbnorm CSLS"))
    r_b = fitted[ours_nnn].bank_neighborhood_
    bias = alpha * r_b  # NNN's; CSLS's ranking is the ranking of q . g - r_B / 2
    lines = [agreement(ours_csls, ours_nnn, found, data, 0.5 * r_b)]
    for peer in (t.name for t in tools if t.kind.startswith("peer")):
        means = fitted[peer].alignment_means
        means = np.asarray(means.cpu() if hasattr(means, "cpu") else means).ravel()
        lines.append(f"{peer}: max |its reference mean - skqbnorm r_B| = "
                     f"{np.abs(means - r_b).max():.2e}")
        lines.append(agreement(peer, ours_nnn, found, data, bias))
        if alpha == 0.5:
            lines.append(agreement(peer, ours_csls, found, data, bias))
    return lines


# -- report ---------------------------------------------------------------------------


def ratio_columns(tools, times):
    """Each tool's seconds over each reference (the peers and the product)."""
    references = [t for t in tools if t.kind != "ours"]
    header = "".join(f"{'/' + ref.kind:>15}" for ref in references)
    rows = {
        tool.name: "".join(f"{times[tool.name] / times[ref.name]:>14.2f}x" for ref in references)
        for tool in tools
    }
    return header, rows


def print_times(title, step, tools, times):
    """The times of ours, the product and each peer at its fastest batch size, with ratios."""
    tools = fastest(tools, times)
    header, ratios = ratio_columns(tools, times)
    print(f"\n{title:<{WIDTH}}{'seconds':>10}{header}")
    for tool in tools:
        shown = PRODUCT_SHOWN[step] if tool.name == PRODUCT else tool.name
        print(f"{shown:<{WIDTH}}{times[tool.name]:>10.3f}{ratios[tool.name]}")


def print_sweep(tools, setup_times, search_times):
    """The peer's setup and search seconds at every batch size."""
    peers = [tool for tool in tools if tool.kind.startswith("peer")]
    if not peers:
        return
    print(f"\nthe peer's batch size{'':<{WIDTH - 21}}{'setup':>10}{'search':>10}")
    for tool in peers:
        print(f"{tool.name:<{WIDTH}}{setup_times[tool.name]:>10.3f}{search_times[tool.name]:>10.3f}")


def print_products(data, tools, search_times, repeat):
    """e. torch's product against NumPy's on the search's shapes, in each one's batches."""
    peer = next((t for t in fastest(tools, search_times) if t.kind == "peer-torch"), None)
    if peer is None:
        return
    torch = import_peer()[1]
    queries, gallery = data["queries"], data["gallery"]
    as_torch = torch.from_numpy(queries), torch.from_numpy(gallery)

    def batches(product, rows):
        return lambda: [product(start, start + rows) for start in range(0, len(queries), rows)]

    def torch_product(start, stop):
        return torch.einsum("ik,jk->ij", as_torch[0][start:stop], as_torch[1])

    def numpy_product(start, stop):
        return np.matmul(queries[start:stop], gallery.T)

    rows = {"torch einsum": peer.batch_size, "numpy matmul": peer.batch_size,
            "numpy matmul (one product)": len(queries)}
    times = interleaved_best_times({
        "torch einsum": batches(torch_product, peer.batch_size),
        "numpy matmul": batches(numpy_product, peer.batch_size),
        "numpy matmul (one product)": batches(numpy_product, len(queries)),
    }, repeat)
    print(f"\ne. queries @ gallery.T alone{'':<{WIDTH - 27}}{'seconds':>10}{'rows':>8}{'/torch':>10}")
    for name, seconds in times.items():
        print(f"{name:<{WIDTH}}{seconds:>10.3f}{rows[name]:>8}{seconds / times['torch einsum']:>9.2f}x")


def print_memory(tools, memory, data):
    held = sum(array.nbytes for array in data.values()) / 2**20
    print("\nc. memory (MiB): peak RSS above the RSS before the step, one fresh process per "
          f"tool (the embeddings, {held:.0f} MiB, are loaded before)")
    if not memory:
        print("  not measured: needs Linux /proc/self/clear_refs")
        return
    print(f"{'':<{WIDTH}}{'setup peak':>12}{'held after':>12}{'search peak':>13}"
          f"{'lifetime peak':>15}")
    for tool in tools:
        figures = memory.get(tool.name)
        if figures:
            print(f"{tool.name:<{WIDTH}}{figures['setup_peak']:>12.0f}{figures['setup_held']:>12.0f}"
                  f"{figures['search_peak']:>13.0f}{lifetime_peak(figures):>15.0f}")
    print("  lifetime peak: max(setup peak, held after + search peak)")


def lifetime_peak(figures):
    """The most RSS a tool needs above the embeddings: its setup, or what it holds and searches."""
    return max(figures["setup_peak"], figures["setup_held"] + figures["search_peak"])


def print_targets(tools, setup_times, search_times, found):
    """The targets: ours <= 0.9x the torch peer at its fastest batch size (setup and search),
    setup <= 1.15x the blocked product, and the same top-10 lists as the peer's."""
    peers = {"setup": fastest(tools, setup_times), "search": fastest(tools, search_times)}
    peer = {step: next((t.name for t in chosen if t.kind == "peer-torch"), None)
            for step, chosen in peers.items()}
    if peer["setup"] is None:
        return
    print("\ntargets (against nnn-retrieval's torch retriever at its fastest batch size)")
    for tool in (t for t in tools if t.kind == "ours"):
        same = np.mean(np.all(found[tool.name] == found[peer["search"]], axis=1))
        checks = [
            ("setup <= 0.9x peer", setup_times[tool.name] <= 0.9 * setup_times[peer["setup"]]),
            ("setup <= 1.15x blocked product", setup_times[tool.name] <= 1.15 * setup_times[PRODUCT]),
            ("search <= 0.9x peer", search_times[tool.name] <= 0.9 * search_times[peer["search"]]),
            (f"same top-{SEARCH_K} as the peer ({100 * same:.2f}% of queries)", same == 1.0),
        ]
        print(f"  {tool.name}: " + "; ".join(f"{name}: {'yes' if met else 'NO'}"
                                             for name, met in checks))


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size by this")
    parser.add_argument("--dims", type=int, default=512)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--metric", choices=("cosine", "dot"), default="cosine")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0))
                        if hasattr(os, "sched_getaffinity") else os.cpu_count())
    parser.add_argument("--n-jobs", type=int, default=None, help="skqbnorm's n_jobs")
    parser.add_argument("--no-faiss", action="store_true", help="skip the peer's faiss retriever")
    parser.add_argument("--batch-sizes", default=BATCH_SIZES,
                        help=f"the peer's batch sizes, comma-separated (default {BATCH_SIZES})")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory subprocesses")
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    params = parser.parse_args(argv)
    params.sizes = {name: max(20, int(n * params.scale))
                    for name, n in (("bank", 50_000), ("gallery", 20_000), ("queries", 5_000))}
    params.k = min(params.k, params.sizes["bank"], params.sizes["gallery"])
    params.batch_sizes = [int(size) for size in params.batch_sizes.split(",")]
    return params


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    params = parse(argv)
    if params.child:
        return child(params)
    if import_peer() is None:
        print(INSTALL_HINT)
        return 0
    set_threads(params.threads)
    sizes = params.sizes
    print(machine_description())
    print(f"versions: {versions()}; threads {params.threads} (torch, faiss, BLAS)")
    print(f"float32 embeddings, d={params.dims}, metric {params.metric}: bank {sizes['bank']}, "
          f"gallery {sizes['gallery']}, {sizes['queries']} queries; k={params.k}, "
          f"alpha={params.alpha}, top-{SEARCH_K}; best of {params.repeat}, interleaved")
    data = make_data(sizes, params.dims, params.metric)
    tools = make_tools(params)
    setup_times, search_times, fitted, found = time_all(tools, data, params.repeat)
    print_times("a. setup (from embeddings)", "setup", tools, setup_times)
    print_times(f"b. top-{SEARCH_K} search", "search", tools, search_times)
    print_sweep(tools, setup_times, search_times)
    measured = memory_tools(tools, setup_times, search_times)
    memory = {} if params.no_memory else memory_all(measured, data, argv)
    print_memory(measured, memory, data)
    print(f"\nd. top-{SEARCH_K} agreement")
    for line in agreements(tools, found, fitted, data, params.alpha, search_times):
        print(f"  {line}")
    print_products(data, tools, search_times, params.repeat)
    print_targets(tools, setup_times, search_times, found)
    print(f"\nload average at the end: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
