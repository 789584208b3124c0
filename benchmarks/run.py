"""The scale benchmark: one table of ratios, each against a baseline measured in this run.

a. fit of IS and DIS on precomputed float32 similarities (M = N = 10,000) against a
   plain implementation of the published reference algorithm (a full argsort of
   the bank matrix for the activation set, exp of the full matrices, a Python-level
   membership test), with identical rankings required (target: >= 10x faster);
b. fit from embeddings (M = 50,000, N = 20,000, d = 512) of DIS and of the top-k
   statistics (DIS with k = 10, CSLS and NNN with k = 256) against the bare matrix
   product bank @ gallery.T, interleaved (target: <= 1.3x);
c. transform of 5,000 queries against one np.subtract(S, v) pass (target: <= 2x);
d. peak extra memory of fit over a 4 GB memory-mapped similarity file, traced by
   tracemalloc (target: <= 512 MB);
e. GC transform against IS transform (target: <= 20x), and top-10 search from
   query embeddings (5,000 queries, gallery 20,000) against one matrix product
   followed by np.argpartition (target: <= 1.2x).

Run: python benchmarks/run.py            (the sizes above; a few minutes on 2 cores)
     python benchmarks/run.py --scale 0.05  (a quick smoke run)
"""

import argparse
import tempfile
from functools import partial
from pathlib import Path

import numpy as np

from skqbnorm import (
    CSLS,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    NearestNeighborNormalization,
)

from _timing import (
    best_time,
    blocked_product,
    interleaved_best_times,
    machine_description,
    peak_mib,
    similarity_matrix,
)


class ReferenceDIS:
    """The published algorithm as plainly written: dense exp, full argsort, a Python loop."""

    def __init__(self, beta=20.0, k=1):
        self.beta, self.k = beta, k

    def fit(self, bank_sims):
        ranked = np.argsort(-bank_sims, axis=1)[:, : self.k]
        self.activated = list(np.unique(ranked))
        self.denominator = np.exp(self.beta * bank_sims).sum(axis=0)
        return self

    def transform(self, sims, dynamic=True):
        normalized = np.exp(self.beta * sims) / self.denominator
        out = sims.copy()
        for q in range(len(sims)):
            if not dynamic or np.argmax(sims[q]) in self.activated:
                out[q] = normalized[q]
        return out


def rows_equal_rankings(a, b, k=10):
    def top(sims):
        return np.argsort(-sims, axis=1, kind="stable")[:, :k]

    return bool(np.array_equal(top(a), top(b)))


def fit_against_reference(size, rng, repeat):
    """a. fit against the reference algorithm, M = N = 10,000."""
    bank = similarity_matrix(size(10_000), size(10_000), rng)
    queries = similarity_matrix(size(1_000), size(10_000), rng)
    rows = []
    for name, ours, dynamic in (("IS", InvertedSoftmax(), False),
                                ("DIS", DynamicInvertedSoftmax(), True)):
        reference = ReferenceDIS()
        reference_fit = best_time(partial(reference.fit, bank), 1)
        our_fit = best_time(partial(ours.fit, bank), repeat)
        same = rows_equal_rankings(ours.transform(queries), reference.transform(queries, dynamic))
        rows.append((f"a. {name} fit, {bank.shape} float32", our_fit, "reference algorithm",
                     reference_fit, reference_fit / our_fit, ">= 10x faster",
                     reference_fit / our_fit >= 10 and same,
                     f"rankings identical: {same}"))
    return rows


def fit_from_embeddings(size, rng, repeat):
    """b. fit from embeddings against the bare matrix product, interleaved."""
    bank = rng.standard_normal((size(50_000), 512), dtype=np.float32)
    gallery = rng.standard_normal((size(20_000), 512), dtype=np.float32)
    k = min(256, len(bank))  # smoke runs have small banks
    fits = {
        "DIS": DynamicInvertedSoftmax(metric="dot"),
        "DIS, k=10": DynamicInvertedSoftmax(metric="dot", k=10),
        f"CSLS, k={k}": CSLS(k=k, metric="dot"),
        f"NNN, k={k}": NearestNeighborNormalization(k=k, alpha=0.5, metric="dot"),
        f"CSLS, k={k}, n_jobs=-1": CSLS(k=k, metric="dot", n_jobs=-1),
    }
    functions = {"product": partial(np.matmul, bank, gallery.T),
                 "blocked product": partial(blocked_product, bank, gallery, reuse=True)}
    functions |= {name: partial(est.fit, bank, gallery=gallery) for name, est in fits.items()}
    times = interleaved_best_times(functions, repeat)
    product, blocked = times.pop("product"), times.pop("blocked product")
    rows = [("b. the same product in blocks of 2,048 bank rows", blocked,
             "bank @ gallery.T (BLAS)", product, blocked / product, "(the floor of a fit)", None,
             "one reused buffer")]
    for name, seconds in times.items():
        rows.append((f"b. {name} fit from embeddings, M={len(bank)}, N={len(gallery)}", seconds,
                     "bank @ gallery.T (BLAS)", product, seconds / product, "<= 1.3x",
                     seconds / product <= 1.3, f"{seconds / blocked:.2f}x the blocked product"))
    return rows


def transform_against_subtract(size, rng, repeat):
    """c. transform against one subtract pass."""
    bank = similarity_matrix(size(5_000), size(20_000), rng)
    queries = similarity_matrix(size(5_000), size(20_000), rng)
    offsets = rng.standard_normal(queries.shape[1]).astype(np.float32)
    subtract = best_time(partial(np.subtract, queries, offsets), repeat)
    rows = []
    for name, normalizer in (("IS", InvertedSoftmax()), ("DIS", DynamicInvertedSoftmax())):
        normalizer.fit(bank)
        transform = best_time(partial(normalizer.transform, queries), repeat)
        rows.append((f"c. {name} transform, {queries.shape}", transform, "np.subtract(S, v)",
                     subtract,
                     transform / subtract, "<= 2x", transform / subtract <= 2, ""))
    return rows


def fit_memory_over_memmap(size, rng, repeat):
    """d. peak memory of fit over a 4 GB memory-mapped file."""
    n_bank, n_gallery = size(50_000), size(20_000)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bank.npy"
        on_disk = np.lib.format.open_memmap(
            path, mode="w+", dtype=np.float32, shape=(n_bank, n_gallery)
        )
        for start in range(0, n_bank, 2_000):
            on_disk[start : start + 2_000] = similarity_matrix(
                min(2_000, n_bank - start), n_gallery, rng
            )
        on_disk.flush()
        del on_disk
        mapped = np.load(path, mmap_mode="r")
        gib = mapped.nbytes / 2**30
        for name, normalizer in (("IS", InvertedSoftmax()), ("DIS", DynamicInvertedSoftmax())):
            memory = peak_mib(partial(normalizer.fit, mapped))
            rows.append((f"d. {name} fit over a {gib:.1f} GiB memmap", memory, "(MiB, traced)",
                         512.0,
                         memory / 512, "<= 512 MiB", memory <= 512, "peak extra memory"))
        del mapped  # the file must be closed before its folder goes
    return rows


def gc_and_top_k(size, rng, repeat):
    """e. GC against IS, top-k against one matrix product + argpartition."""
    bank = similarity_matrix(size(2_000), size(20_000), rng)
    queries = similarity_matrix(size(1_000), size(20_000), rng)
    inverted, corrected = InvertedSoftmax().fit(bank), GloballyCorrected().fit(bank)
    corrected.transform(queries[:1])  # GC builds its lookup table on its first transform
    times = interleaved_best_times(
        {"IS": partial(inverted.transform, queries), "GC": partial(corrected.transform, queries)},
        repeat,
    )
    rows = [(f"e. GC transform, bank {bank.shape}, {len(queries)} queries", times["GC"],
             "IS transform", times["IS"], times["GC"] / times["IS"], "<= 20x",
             times["GC"] / times["IS"] <= 20, "interleaved; table built before")]
    bank = rng.standard_normal((size(10_000), 512), dtype=np.float32)
    gallery = rng.standard_normal((size(20_000), 512), dtype=np.float32)
    queries = rng.standard_normal((size(5_000), 512), dtype=np.float32)
    k = min(256, len(bank))
    searchers = {
        "DIS": DynamicInvertedSoftmax(metric="dot").fit(bank, gallery=gallery),
        f"CSLS, k={k}": CSLS(k=k, metric="dot").fit(bank, gallery=gallery),
        f"NNN, k={k}": NearestNeighborNormalization(k=k, metric="dot").fit(bank, gallery=gallery),
    }

    def product_then_partition():
        return np.argpartition(queries @ gallery.T, -10, axis=1)[:, -10:]

    functions = {"product": product_then_partition}
    functions |= {name: partial(est.top_k, queries=queries, k=10) for name, est in searchers.items()}
    times = interleaved_best_times(functions, repeat)
    baseline = times.pop("product")
    for name, seconds in times.items():
        rows.append((f"e. {name} top-10 search from embeddings, {len(queries)} queries",
                     seconds, "queries @ gallery.T + argpartition", baseline, seconds / baseline,
                     "<= 1.2x", seconds / baseline <= 1.2, f"gallery {len(gallery)}"))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size by this")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    def size(n):
        return max(20, int(n * args.scale))

    rng = np.random.default_rng(0)
    rows = []
    for measure in (fit_against_reference, fit_from_embeddings, transform_against_subtract,
                    fit_memory_over_memmap, gc_and_top_k):
        rows += measure(size, rng, args.repeat)

    print(machine_description())
    print(f"{'measurement':<66}{'ours':>10}  {'baseline':<36}{'base':>9}{'ratio':>8}  "
          f"{'target':<22}{'met':<5}")
    for name, ours, baseline_name, baseline, ratio, target, met, note in rows:
        verdict = "" if met is None else ("yes" if met else "NO")
        print(f"{name:<66}{ours:>10.3f}  {baseline_name:<36}{baseline:>9.3f}{ratio:>8.2f}  "
              f"{target:<22}{verdict:<5}{note}")


if __name__ == "__main__":
    main()
