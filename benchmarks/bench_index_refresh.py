"""Refreshing a NormalizedIndex after its normaliser's bank grew, against rebuilding it.

A gallery of random unit vectors (default 1,000,000 items of dimension 64, float32)
is normalised by ``InvertedSoftmax`` grown by ``partial_fit``: ``--bank`` rows, then
``--grow`` more. For each FAISS factory, a :class:`skqbnorm.index.NormalizedIndex`
is built on the first bank; after the normaliser grows, ``index.refresh()`` (which
rewrites the stored bias coordinates of a ``"Flat"`` or ``"IVF...,Flat"`` index in
place) is timed against ``NormalizedIndex(normalizer, factory).fit()`` (a rebuild
on the grown normaliser), best of ``--repeat``, interleaved. The script prints their
ratio, the normaliser's own ``partial_fit`` time for context, and whether the
refreshed index answers ``--queries`` queries exactly as the rebuilt one (indices
and scores, bitwise). Every figure comes from this run; the load average is printed.
Run:

    python benchmarks/bench_index_refresh.py [--gallery 1000000] [--dims 64]
        [--bank 256] [--grow 256] [--queries 100] [--factories Flat IVF1024,Flat]
"""

import argparse
import time

import faiss
import numpy as np

from skqbnorm import InvertedSoftmax
from skqbnorm.index import NormalizedIndex

from _timing import interleaved_best_times, machine_description


def unit_rows(rng, n, dims, block=100_000):
    """float32 random unit vectors."""
    out = rng.standard_normal((n, dims), dtype=np.float32)
    for start in range(0, n, block):
        part = out[start : start + block]
        part /= np.linalg.norm(part, axis=1, keepdims=True)
    return out


def timed(func):
    start = time.perf_counter()
    result = func()
    return result, time.perf_counter() - start


def same_answers(index, rebuilt, queries, k=10):
    (indices, scores), (expected_indices, expected_scores) = (
        index.search(queries, k=k), rebuilt.search(queries, k=k))
    return bool(np.array_equal(indices, expected_indices) and np.array_equal(scores, expected_scores))


def measure(normalizer, factory, grow_rows, queries, args):
    """One table row: refresh and rebuild seconds, their ratio, and the answers' check."""
    # Fixed search settings: what is timed is the refresh, not a calibration of them.
    settings = {"nprobe": 128, "ef_search": 512, "train_size": args.train_size}
    index = NormalizedIndex(normalizer, factory, **settings).fit()
    _, grow_seconds = timed(lambda: normalizer.partial_fit(grow_rows))
    rebuild = NormalizedIndex(normalizer, factory, **settings)
    best = interleaved_best_times({"refresh": index.refresh, "rebuild": rebuild.fit}, repeat=args.repeat)
    same = same_answers(index, rebuild, queries)
    ratio = best["refresh"] / best["rebuild"]
    return (f"| {factory} | {index.refresh_in_place_} | {best['refresh']:.3f} | {best['rebuild']:.3f} | "
            f"{ratio:.3f} | {'yes' if same else 'NO'} | {grow_seconds:.1f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gallery", type=int, default=1_000_000)
    parser.add_argument("--dims", type=int, default=64)
    parser.add_argument("--bank", type=int, default=256)
    parser.add_argument("--grow", type=int, default=256)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--factories", nargs="+", default=["Flat", "IVF1024,Flat"])
    parser.add_argument("--train-size", type=int, default=65_536,
                        help="gallery items an IVF index is trained on")
    args = parser.parse_args()

    print(machine_description())
    print(f"faiss {faiss.__version__}, {faiss.omp_get_max_threads()} threads")
    rng = np.random.default_rng(0)
    gallery = unit_rows(rng, args.gallery, args.dims)
    bank = unit_rows(rng, args.bank + args.grow * len(args.factories), args.dims)
    queries = unit_rows(rng, args.queries, args.dims)
    normalizer = InvertedSoftmax()
    _, fit_seconds = timed(lambda: normalizer.partial_fit(bank[: args.bank], gallery=gallery))
    print(f"InvertedSoftmax partial_fit, first {args.bank} bank rows x {args.gallery:,} items: "
          f"{fit_seconds:.1f} s")
    print()
    print("| factory | in place | refresh (s) | rebuild (s) | refresh / rebuild | same answers "
          f"| normaliser partial_fit of {args.grow} rows (s) |")
    print("|---|---|---:|---:|---:|---|---:|")
    for number, factory in enumerate(args.factories):
        rows = bank[args.bank + number * args.grow : args.bank + (number + 1) * args.grow]
        print(measure(normalizer, factory, rows, queries, args), flush=True)
    print(machine_description().split("; ")[-1])


if __name__ == "__main__":
    main()
