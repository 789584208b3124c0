"""k-reciprocal re-ranking of one query against N items: memory and time.

``KReciprocalReranker`` keeps the k-reciprocal sets and encodings sparse and finds the
distances block by block; the published ``re_ranking`` (Zhong et al.'s code, also
vendored in torchreid as ``torchreid/utils/rerank.py``) takes dense query-gallery,
query-query and gallery-gallery distance matrices and builds dense (N + 1) x (N + 1)
matrices. Each measurement runs in a fresh process and reports its seconds, the peak
memory NumPy allocated (tracemalloc) and the process's peak resident set (ru_maxrss).

The published function is not shipped with skqbnorm: pass ``--published FILE``, a Python
file defining ``re_ranking(q_g_dist, q_q_dist, g_g_dist, k1, k2, lambda_value)`` (e.g. a
copy of torchreid's ``rerank.py``), or have ``torchreid`` installed. It is run on the same
distances (its inputs ``sqrt(2 - 2 s)``: it squares them), at the sizes of
``--published-sizes``, each also against ``KReciprocalReranker`` (largest score
difference; the published code works in float32). Without it, only the sparse
reranker runs, and the size of the published function's dense float32 matrices is shown.

Run: python benchmarks/bench_kreciprocal.py [--n-items 20000] [--published FILE]
"""

import argparse
import importlib.util
import resource
import time
import tracemalloc
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import numpy as np

from _timing import machine_description


def make_list(n_items, n_features, seed=0):
    """Unit features in 50 clusters, a query near the first, and its cosines to the items."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(50, n_features))
    features = centres[rng.integers(50, size=n_items)] + rng.normal(size=(n_items, n_features))
    features /= np.linalg.norm(features, axis=1, keepdims=True)
    query = centres[0] + rng.normal(size=n_features)
    return features, features @ (query / np.linalg.norm(query))


def load_published(path):
    if path is None:
        from torchreid.utils.rerank import re_ranking  # optional: not a dependency

        return re_ranking
    spec = importlib.util.spec_from_file_location("published_rerank", path)
    if spec is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.re_ranking


def measure(kind, n_items, n_features, published_path, k1, k2, lambda_value):
    """In a fresh process: seconds, tracemalloc peak (MiB), ru_maxrss (MiB), scores."""
    from skqbnorm import KReciprocalReranker

    features, initial = make_list(n_items, n_features)
    tracemalloc.start()
    start = time.perf_counter()
    if kind == "skqbnorm":
        scores = KReciprocalReranker(k1, k2, lambda_value).fit_predict(features, initial)
    else:
        re_ranking = load_published(published_path)
        # The published function's inputs: dense distances (sqrt(2 - 2 s), which it squares).
        g_g = np.sqrt(np.maximum(2.0 - 2.0 * (features @ features.T), 0.0))
        np.fill_diagonal(g_g, 0.0)
        q_g = np.sqrt(np.maximum(2.0 - 2.0 * initial, 0.0))[None, :]
        scores = -re_ranking(q_g, np.zeros((1, 1)), g_g, k1, k2, lambda_value)[0]
        scores = scores.astype(np.float64)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10  # KiB on Linux
    return seconds, peak, rss, scores


def in_fresh_process(*args):
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(measure, *args).result()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-items", type=int, default=20_000)
    parser.add_argument("--n-features", type=int, default=128)
    parser.add_argument("--published", default=None, help="file defining re_ranking")
    parser.add_argument("--published-sizes", type=int, nargs="*", default=[2_500, 5_000, 10_000])
    parser.add_argument("--k1", type=int, default=20)
    parser.add_argument("--k2", type=int, default=6)
    parser.add_argument("--lambda-value", type=float, default=0.3)
    args = parser.parse_args()
    params = (args.n_features, args.published, args.k1, args.k2, args.lambda_value)
    print(machine_description())
    try:
        load_published(args.published)
        sizes = sorted(set(args.published_sizes))
    except (ImportError, OSError) as error:
        print(f"published re_ranking: not given (--published FILE) or not loaded ({error})")
        sizes = []
    print(f"k1={args.k1}, k2={args.k2}, lambda={args.lambda_value}, "
          f"{args.n_features} features, one query")
    print(f"| {'N':>7} | {'implementation':<17} | {'seconds':>8} | {'time ratio':>10} | "
          f"{'peak MiB (tracemalloc)':>22} | {'max RSS MiB':>11} | {'dense float32 matrix MiB':>24}"
          f" | {'max abs diff':>12} |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n_items in sorted(set(sizes) | {args.n_items}):
        dense = (n_items + 1) ** 2 * 4 / 2**20
        ours = in_fresh_process("skqbnorm", n_items, *params)
        print(f"| {n_items:>7,} | {'skqbnorm (sparse)':<17} | {ours[0]:>8.2f} | {1:>10.2f} | "
              f"{ours[1]:>22,.0f} | {ours[2]:>11,.0f} | {dense:>24,.0f} | {'':>12} |", flush=True)
        if n_items in sizes:
            theirs = in_fresh_process("published", n_items, *params)
            diff = np.abs(theirs[3] - ours[3]).max()
            print(f"| {n_items:>7,} | {'published (dense)':<17} | {theirs[0]:>8.2f} | "
                  f"{theirs[0] / ours[0]:>10.2f} | {theirs[1]:>22,.0f} | {theirs[2]:>11,.0f} | "
                  f"{dense:>24,.0f} | {diff:>12.1e} |", flush=True)


if __name__ == "__main__":
    main()
