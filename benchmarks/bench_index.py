"""Serving a normaliser from FAISS indexes on a large gallery: build, queries/s, recall@10.

A synthetic gallery (default 1,000,000 items of dimension 64, float32, clustered
around 1,000 random centres with noise as large as the centres, as real embeddings
cluster) is normalised by ``NearestNeighborNormalization(k=16)`` fitted on a bank of
``--bank`` queries from the same distribution. For each FAISS factory (default flat,
IVF and HNSW), :class:`skqbnorm.index.NormalizedIndex` is built over the augmented
gallery ``[g, -bias_g]``; the script prints a markdown table of its build time, the
index size, queries per second over ``--queries`` queries searched in one call, and
recall@10 against the exact ``normalizer.top_k`` (itself timed, as a row), then the
per-item costs that the README's "At scale" section extrapolates. IVF and HNSW are
built at the defaults, which choose ``nprobe`` / ``ef_search`` on (256 rows of) the bank
(the build time includes that calibration), and searched at half, one and twice the
chosen value. ``--normalizer dis`` serves ``DynamicInvertedSoftmax`` instead (two stages:
the raw search for the gate, then the augmented search).

Every figure comes from this run, on this machine (timings are single runs: the
build dominates, and a shared machine makes them noisy; the load average is
printed). Run:

    python benchmarks/bench_index.py [--gallery 1000000] [--dims 64] [--bank 1000]
        [--queries 1000] [--factories Flat IVF1024,Flat HNSW32]
"""

import argparse
import time

import faiss
import numpy as np

from skqbnorm import DynamicInvertedSoftmax, NearestNeighborNormalization
from skqbnorm.index import NormalizedIndex

from _timing import machine_description


def clustered(rng, n, centres, block=100_000):
    """float32 embeddings around random centres (noise as large as the centres)."""
    out = np.empty((n, centres.shape[1]), dtype=np.float32)
    for start in range(0, n, block):
        labels = rng.integers(len(centres), size=min(block, n - start))
        out[start : start + len(labels)] = centres[labels] + rng.standard_normal(
            (len(labels), centres.shape[1]), dtype=np.float32
        )
    return out


def timed(func):
    start = time.perf_counter()
    result = func()
    return result, time.perf_counter() - start


def recall_at(found, exact):
    """Mean share of each query's exact top k that the index found."""
    hits = [len(np.intersect1d(a, b)) for a, b in zip(found, exact)]
    return float(np.mean(hits)) / exact.shape[1]


def index_mib(index):
    return faiss.serialize_index(index).nbytes / 2**20


def search_settings(factory, index):
    """The search settings to try on one built index: half, one and twice the chosen ones."""
    name = "nprobe" if "IVF" in factory else "ef_search" if "HNSW" in factory else None
    if name is None:
        return [{}]
    chosen = getattr(index, name + "_")
    return [{name: max(1, chosen // 2)}, {name: chosen}, {name: 2 * chosen}]


def measure(normalizer, factory, queries, exact, bank, args):
    """Table rows for one factory (one per search setting), and its (build s, bytes,
    search s at the defaults) per item or query."""
    index = NormalizedIndex(normalizer, factory, train_size=args.train_size)
    _, build_seconds = timed(lambda: index.fit(calibration_queries=bank))
    size = index_mib(index.index_)
    rows, search_seconds = [], []
    for settings in search_settings(factory, index):
        index.set_params(**settings)
        (found, _), seconds = timed(lambda: index.search(queries, k=args.k))
        search_seconds.append(seconds)
        label = ", ".join(f"{name}={value}" for name, value in settings.items()) or "exact"
        rows.append(f"| {factory} ({label}) | {build_seconds:.1f} | {size:,.0f} | "
                    f"{len(queries) / seconds:,.0f} | {recall_at(found, exact):.3f} |")
    costs = (build_seconds / args.gallery, size * 2**20 / args.gallery, search_seconds[len(search_seconds) // 2] / len(queries))
    return rows, costs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gallery", type=int, default=1_000_000)
    parser.add_argument("--dims", type=int, default=64)
    parser.add_argument("--bank", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--normalizer", choices=["nnn", "dis"], default="nnn")
    parser.add_argument("--factories", nargs="+", default=["Flat", "IVF1024,Flat", "HNSW32"])
    parser.add_argument("--train-size", type=int, default=65_536,
                        help="gallery items an IVF index is trained on")
    args = parser.parse_args()

    print(machine_description())
    print(f"faiss {faiss.__version__}, {faiss.omp_get_max_threads()} threads")
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((1000, args.dims), dtype=np.float32)
    (gallery, bank, queries), seconds = timed(lambda: (
        clustered(rng, args.gallery, centres), clustered(rng, args.bank, centres),
        clustered(rng, args.queries, centres),
    ))
    print(f"data: gallery {gallery.shape}, bank {bank.shape}, queries {queries.shape}, float32, "
          f"generated in {seconds:.1f} s")

    normalizer = (NearestNeighborNormalization(k=16) if args.normalizer == "nnn"
                  else DynamicInvertedSoftmax(k=16))
    _, fit_seconds = timed(lambda: normalizer.fit(bank, gallery=gallery))
    (exact, _), exact_seconds = timed(lambda: normalizer.top_k(queries=queries, k=args.k))
    print(f"{type(normalizer).__name__} fit (bank statistics, {args.bank} x {args.gallery}): "
          f"{fit_seconds:.1f} s")
    print()
    print(f"| search | build (s) | index (MiB) | queries/s | recall@{args.k} |")
    print("|---|---:|---:|---:|---:|")
    print(f"| exact top_k | | | {args.queries / exact_seconds:,.0f} | 1.000 |")
    per_item = {}
    for factory in args.factories:
        rows, per_item[factory] = measure(normalizer, factory, queries, exact, bank, args)
        print("\n".join(rows))
    print()
    print("Per gallery item (for the extrapolation):")
    bank_cell = fit_seconds / (args.bank * args.gallery)
    print(f"- bank statistics: {bank_cell * 1e9:.3f} ns per (bank row, gallery item) pair")
    print(f"- exact search: {exact_seconds / args.queries / args.gallery * 1e9:.3f} ns per "
          "(query, gallery item) pair")
    for factory, (build, size, search) in per_item.items():
        print(f"- {factory}: build {build * 1e6:.2f} us/item, {size:.0f} bytes/item, "
              f"search {search * 1e3:.2f} ms/query at {args.gallery:,} items")


if __name__ == "__main__":
    main()
