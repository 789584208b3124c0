"""How far fits and searches are from their arithmetic floor, as same-run ratios.

From embeddings, a fit is one matrix product plus a reduction, and a search one
product plus a selection; the product is the floor. On float32 unit vectors
(d = 512, k = 256) this prints, at M 20,000 x N 10,000 and M 50,000 x N 20,000:

a. fits from embeddings (IS, DIS, CSLS, NNN, Centering), with ``n_jobs=1`` and
   ``n_jobs=-1``, over the blocked product (2,048 bank rows a product, as a fit
   multiplies; target <= 1.15x), beside the same products written into one buffer, and
   over NumPy's floor for the same statistic: the blocked product with an exact column
   log-sum-exp of each 256 rows of it (max, subtract, scale, exp, float64 sum; IS and
   DIS), or products of 1,024 gallery items with the bank and ``np.partition`` of each
   item's k largest (CSLS and NNN), written plainly;
b. ``top_k(queries=Q, k=10)`` of CSLS, NNN and DIS with scores and without, over one
   product ``Q @ G.T`` plus ``np.argpartition`` (Q = 2,000 / 5,000 queries; targets
   <= 1.1x with scores, <= 0.8x without);
c. IS and DIS fits on a precomputed 10,000 x 10,000 float32 bank over one blocked
   ``np.exp`` pass over it (256 rows at a time into one buffer; target <= 1.5x), beside
   the NumPy passes of an exact column log-sum-exp (max, subtract, scale, exp, float64
   sum), written plainly.

Every time is the best of ``--repeat`` interleaved rounds. Run:

    python benchmarks/bench_floor.py               (the sizes above; about 10 minutes on 2 cores)
    python benchmarks/bench_floor.py --scale 0.02  (a quick smoke run)
"""

import argparse
from functools import partial

import numpy as np
from sklearn.base import clone

import skqbnorm

from _timing import (
    PRODUCT_ROWS,
    blocked_product,
    interleaved_best_times,
    load_average,
    machine_description,
)

SIZES = [(20_000, 10_000, 2_000), (50_000, 20_000, 5_000)]  # bank, gallery, queries
EXP_SIZE = 10_000
EXP_ROWS = 256


def unit_rows(n_rows, n_dims, rng):
    points = rng.standard_normal((n_rows, n_dims), dtype=np.float32)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points


def scaled(n, scale):
    """``n`` times ``scale``, at least 40."""
    return max(40, int(n * scale))


def embedding_sets(scale, dims, rng):
    """``(bank, gallery, queries)`` of unit float32 rows at each of ``SIZES``, scaled."""
    for n_bank, n_gallery, n_queries in SIZES:
        bank, gallery = unit_rows(scaled(n_bank, scale), dims, rng), unit_rows(scaled(n_gallery, scale), dims, rng)
        yield bank, gallery, unit_rows(scaled(n_queries, scale), dims, rng)


def similarity_bank(size, rng):
    """A ``size`` x ``size`` float32 bank of precomputed similarities (section c)."""
    bank = rng.standard_normal((size, size), dtype=np.float32)
    bank *= 0.1
    return bank


def fitters(k, package=skqbnorm):
    """The normalisers timed, by row name, from ``package`` (another version of skqbnorm
    imported under another name, for one)."""
    return {
        "IS": package.InvertedSoftmax(),
        "DIS": package.DynamicInvertedSoftmax(),
        f"CSLS(k={k})": package.CSLS(k=k),
        f"NNN(k={k})": package.NearestNeighborNormalization(k=k),
        "Centering": package.Centering(),
    }


def searched(estimators):
    """The normalisers whose top-10 search is timed: all but IS and Centering."""
    return {name: estimator for name, estimator in estimators.items() if name not in ("IS", "Centering")}


def fit_functions(estimators, bank, gallery):
    """``{"<name>, n_jobs=<n>": fit}`` with one job and with every core, each fitting a clone."""
    return {
        f"{name}, n_jobs={n_jobs}": partial(clone(estimator).set_params(n_jobs=n_jobs).fit, bank, gallery=gallery)
        for name, estimator in estimators.items()
        for n_jobs in (1, -1)
    }


def search_functions(fitted, queries):
    """``{"<name> with scores": search, "<name> without scores": search}``: the top-10
    of ``queries`` from each fitted normaliser."""
    functions = {}
    for name, estimator in fitted.items():
        functions[f"{name} with scores"] = partial(estimator.top_k, queries=queries, k=10)
        functions[f"{name} without scores"] = partial(estimator.top_k, queries=queries, k=10, return_scores=False)
    return functions


def report(title, baseline_name, times, target, floor=None):
    """A Markdown table of ``times`` over ``times["baseline"]``; ``target(name)``: the
    largest ratio allowed, or None for a reference row; ``floor(name)``: the name of the
    reference row that computes the same statistic in plain NumPy, or None."""
    baseline = times.pop("baseline")
    print(f"\n{title}: {baseline_name} {baseline:.3f} s")
    print(f"| | seconds | / {baseline_name} | target | met |" + ("" if floor is None else " / NumPy floor |"))
    print("| --- | --- | --- | --- | --- |" + ("" if floor is None else " --- |"))
    for name, seconds in times.items():
        ratio, most = seconds / baseline, target(name)
        met = "" if most is None else ("yes" if ratio <= most else "NO")
        row = f"| {name} | {seconds:.3f} | {ratio:.2f}x | {'' if most is None else f'<= {most}x'} | {met} |"
        if floor is not None:
            reference = floor(name)
            row += "" if reference is None else f" {seconds / times[reference]:.2f}x"
            row += " |"
        print(row)


def log_sum_exp_of(rows, beta, out):
    """Each column's ``log(sum(exp(beta * rows)))`` in float64, pass by pass through ``out``."""
    largest = rows.max(axis=0)
    shifted = np.subtract(rows, largest, out=out[: len(rows)])
    shifted *= np.float32(beta)
    np.exp(shifted, out=shifted)
    return np.log(shifted.sum(axis=0, dtype=np.float64)) + beta * largest.astype(np.float64)


def product_then_log_sum_exp(bank, gallery, beta=20.0):
    """IS's column statistic in plain NumPy: the blocked product, each 256 rows of each
    block reduced in cache, the pieces joined by ``np.logaddexp``."""
    gallery_t = gallery.T
    products = np.empty((min(PRODUCT_ROWS, len(bank)), len(gallery)), np.float32)
    piece = np.empty((EXP_ROWS, len(gallery)), np.float32)
    total = np.full(len(gallery), -np.inf)
    for start in range(0, len(bank), PRODUCT_ROWS):
        block = np.matmul(bank[start : start + PRODUCT_ROWS], gallery_t,
                          out=products[: min(PRODUCT_ROWS, len(bank) - start)])
        for first in range(0, len(block), EXP_ROWS):
            total = np.logaddexp(total, log_sum_exp_of(block[first : first + EXP_ROWS], beta, piece))
    return total


def product_then_partition_top_k(bank, gallery, k, items=1024):
    """CSLS's and NNN's column statistic in plain NumPy: each item's mean of its k largest
    similarities to the bank, 1,024 items a product."""
    bank_t = bank.T
    means = np.empty(len(gallery))
    for start in range(0, len(gallery), items):
        products = gallery[start : start + items] @ bank_t
        means[start : start + items] = np.partition(products, len(bank) - k, axis=1)[:, len(bank) - k :].mean(axis=1)
    return means


def fits_from_embeddings(bank, gallery, k, repeat):
    """a. every fit, with one job and with every core, over the blocked product."""
    softmax_floor = "product + column log-sum-exp, plain NumPy (reference)"
    top_k_floor = f"products + np.partition of the k={k} largest, plain NumPy (reference)"
    functions = {
        "baseline": partial(blocked_product, bank, gallery),
        "the same products into one buffer (reference)": partial(blocked_product, bank, gallery, reuse=True),
        softmax_floor: partial(product_then_log_sum_exp, bank, gallery),
        top_k_floor: partial(product_then_partition_top_k, bank, gallery, k),
    }
    functions.update(fit_functions(fitters(k), bank, gallery))
    floors = {}
    for name in fitters(k):
        for n_jobs in (1, -1):
            if name in ("IS", "DIS"):
                floors[f"{name}, n_jobs={n_jobs}"] = softmax_floor
            elif name != "Centering":
                floors[f"{name}, n_jobs={n_jobs}"] = top_k_floor
    report(f"a. fits from embeddings, bank {bank.shape[0]} x gallery {gallery.shape[0]}, d={bank.shape[1]}",
           "blocked product", interleaved_best_times(functions, repeat),
           lambda name: None if name.endswith("(reference)") else 1.15, floors.get)


def searches(bank, gallery, queries, k, repeat):
    """b. top-10 with scores and without, over one product plus argpartition."""

    def product_then_partition():
        return np.argpartition(queries @ gallery.T, -10, axis=1)[:, -10:]

    fitted = {name: clone(estimator).fit(bank, gallery=gallery) for name, estimator in searched(fitters(k)).items()}
    functions = {"baseline": product_then_partition, **search_functions(fitted, queries)}
    report(f"b. top-10 of {len(queries)} queries over gallery {gallery.shape[0]}",
           "product + argpartition", interleaved_best_times(functions, repeat),
           lambda name: 1.1 if name.endswith("with scores") else 0.8)


def fits_on_similarities(size, repeat, rng):
    """c. IS and DIS fits on a precomputed bank over one blocked exp pass."""
    bank = similarity_bank(size, rng)
    block = np.empty((EXP_ROWS, size), dtype=np.float32)

    def exp_pass():  # each block of rows exponentiated into one buffer that stays in cache
        for start in range(0, size, EXP_ROWS):
            rows = bank[start : start + EXP_ROWS]
            np.exp(rows, out=block[: len(rows)])

    def log_sum_exp_passes(beta=20.0):  # IS's exact column statistic, pass by pass
        total = np.full(size, -np.inf)
        for start in range(0, size, EXP_ROWS):
            total = np.logaddexp(total, log_sum_exp_of(bank[start : start + EXP_ROWS], beta, block))
        return total

    floor = "max, subtract, scale, exp and float64 sum passes, joined by np.logaddexp (reference)"
    functions = {
        "baseline": exp_pass,
        floor: log_sum_exp_passes,
        "IS": partial(skqbnorm.InvertedSoftmax().fit, bank),
        "DIS": partial(skqbnorm.DynamicInvertedSoftmax().fit, bank),
    }
    report(f"c. fits on a precomputed {size} x {size} float32 bank", "one blocked np.exp pass",
           interleaved_best_times(functions, repeat),
           lambda name: None if name.endswith("(reference)") else 1.5,
           lambda name: None if name.endswith("(reference)") else floor)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size by this")
    parser.add_argument("--dims", type=int, default=512)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    print(machine_description())
    rng = np.random.default_rng(0)
    for bank, gallery, queries in embedding_sets(args.scale, args.dims, rng):
        k = min(args.k, len(bank), len(gallery))
        fits_from_embeddings(bank, gallery, k, args.repeat)
        searches(bank, gallery, queries, k, args.repeat)
    fits_on_similarities(scaled(EXP_SIZE, args.scale), args.repeat, rng)
    print(f"\nload average at the end: {load_average()}")


if __name__ == "__main__":
    main()
