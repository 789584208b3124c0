"""Fit cost and memory on a precomputed bank: NNN, DN, z-norm, MP, DBNorm, SN, DSL against IS.

On one M x N float32 bank (default 10,000 x 10,000; ``--scale`` multiplies both) this
prints a markdown table of, for each normaliser:

- its fit time as a ratio to the Inverted Softmax fit on the same bank, each the
  best of ``--repeat`` runs, interleaved (every round fits every normaliser once);
  target <= 1.5x;
- Sinkhorn normalisation per pass: its fit reads the bank ``2 * n_iter_`` times
  (one u-update and one v-update per iteration; run with ``tol=0``, so all
  ``--sinkhorn-iter`` iterations), so its fit time is divided by ``2 * n_iter_``;
  target <= 1.5x the IS fit (one pass);
- DBNorm (``DualInvertedSoftmax``, ``DualDynamicInvertedSoftmax``) with a gallery bank
  of M further rows: its fit reads M + M rows, so its fit time is multiplied by
  M / (M + M) (per bank row, as IS reads M rows); target <= 1.5x;
- the peak extra memory of fit with the banks read from ``np.memmap`` files, traced
  by ``tracemalloc``, with M and with M / 2 bank rows. O(N) and O(k N) state does
  not grow with M (target: the peak at M within 1.25x + 1 MiB of the peak at M / 2);
  the sorted columns of Mutual Proximity's empiric method and of GloballyCorrected
  (reference rows) take O(M N) by design.

IS, DIS and GC are rows for reference. Every figure comes from this run, on this
machine. Run:

    python benchmarks/bench_precomputed_fits.py [--scale 1.0] [--repeat 3] [--sinkhorn-iter 5]
"""

import argparse
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skqbnorm import (
    Centering,
    DualBankSinkhornNormalization,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankZNorm,
    SinkhornNormalization,
)

from _timing import (
    interleaved_best_times,
    load_average,
    machine_description,
    memory_mapped,
    peak_mib,
    similarity_matrix,
)

TARGET = 1.5  # fit (per pass, per bank row) / IS fit
MEMORY_GROWTH = 1.25  # O(N) state: peak at M rows within this factor (+ 1 MiB) of that at M / 2


@dataclass
class Case:
    """One table row: how to make the normaliser, how to fit it, what its fit is divided by."""

    name: str
    make: Callable  # n_bank -> an unfitted normaliser
    state: str
    uses_gallery_bank: bool = False
    gallery_bank_keyword: str = "gallery_bank"  # DBSN: "querybank_to_gallery_bank", s(b, h)
    per_pass: bool = False  # Sinkhorn: divide by the number of passes, 2 * n_iter_
    reference: bool = False  # no target: shown for comparison

    def fit(self, normalizer, bank, gallery_bank):
        if self.uses_gallery_bank:
            return normalizer.fit(bank, **{self.gallery_bank_keyword: gallery_bank})
        return normalizer.fit(bank)

    def units(self, fitted, n_bank, n_gallery_bank):
        """How many IS-fit equivalents (bank passes of M rows) one fit of ``fitted`` does."""
        if self.per_pass:  # DBSN's passes read N + M_g columns: counted per N, as IS reads
            columns = fitted.n_features_in_ + getattr(fitted, "n_gallery_bank_", 0)
            return 2 * fitted.n_iter_ * columns / fitted.n_features_in_
        if self.uses_gallery_bank:
            return (n_bank + n_gallery_bank) / n_bank
        return 1


def cases(sinkhorn_iter):
    return [
        Case("InvertedSoftmax (IS, the baseline)", lambda m: InvertedSoftmax(), "O(N)",
             reference=True),
        Case("DynamicInvertedSoftmax (DIS)", lambda m: DynamicInvertedSoftmax(), "O(N)",
             reference=True),
        Case("Centering(alpha=0.5) (DN)", lambda m: Centering(alpha=0.5), "O(N)"),
        Case("NearestNeighborNormalization(k=256)",
             lambda m: NearestNeighborNormalization(k=min(256, m)), "O(kN)"),
        Case("QueryBankZNorm", lambda m: QueryBankZNorm(), "O(N)"),
        Case('MutualProximity("gaussian")', lambda m: MutualProximity(), "O(N)"),
        Case('MutualProximity("empiric")', lambda m: MutualProximity(method="empiric"), "O(MN)"),
        Case("GloballyCorrected (GC)", lambda m: GloballyCorrected(), "O(MN)", reference=True),
        Case("DualInvertedSoftmax, per bank row", lambda m: DualInvertedSoftmax(), "O(N)",
             uses_gallery_bank=True),
        Case("DualDynamicInvertedSoftmax, per bank row", lambda m: DualDynamicInvertedSoftmax(),
             "O(N)", uses_gallery_bank=True),
        Case(f"SinkhornNormalization(n_iter={sinkhorn_iter}), per pass",
             lambda m: SinkhornNormalization(n_iter=sinkhorn_iter, tol=0.0), "O(N + M)",
             per_pass=True),
        Case(f"DualBankSinkhornNormalization(n_iter={sinkhorn_iter}), per pass and column",
             lambda m: DualBankSinkhornNormalization(n_iter=sinkhorn_iter, tol=0.0),
             "O(N + M_g + M)", uses_gallery_bank=True, per_pass=True,
             gallery_bank_keyword="querybank_to_gallery_bank"),
        Case("DualSoftmax", lambda m: DualSoftmax(), "O(N)"),
    ]


def fit_times(all_cases, bank, gallery_bank, repeat):
    """Best fit time of every case (interleaved rounds), and one fitted normaliser of each."""
    fitted = {case.name: case.make(len(bank)) for case in all_cases}
    functions = {
        case.name: partial(case.fit, fitted[case.name], bank, gallery_bank) for case in all_cases
    }
    return interleaved_best_times(functions, repeat), fitted


def fit_peaks(case, bank, gallery_bank):
    """Peak extra memory of fit (MiB) over the memory-mapped banks: all rows, then half."""
    peaks = []
    for rows in (len(bank), len(bank) // 2):
        normalizer = case.make(rows)
        peaks.append(peak_mib(partial(case.fit, normalizer, bank[:rows], gallery_bank[:rows])))
    return peaks


def row(case, seconds, ratio, peaks):
    full, half = peaks
    if case.state == "O(MN)":
        memory = "O(MN) by design"
    else:
        memory = "yes" if full <= MEMORY_GROWTH * half + 1 else "NO"
    target = "(reference)" if case.reference else (
        f"<= {TARGET}x per pass" if case.per_pass else f"<= {TARGET}x"
    )
    met = "" if case.reference else ("yes" if ratio <= TARGET else "NO")
    return (f"| {case.name} | {case.state} | {seconds:.3f} | {ratio:.2f} | {target} | {met} "
            f"| {full:.1f} | {half:.1f} | {memory} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply M and N by this")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sinkhorn-iter", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)  # tol=0: Sinkhorn runs every iteration

    size = max(20, int(10_000 * args.scale))
    rng = np.random.default_rng(0)
    bank = similarity_matrix(size, size, rng)
    gallery_bank = similarity_matrix(size, size, rng)
    all_cases = cases(args.sinkhorn_iter)
    print(machine_description())
    print(f"bank and gallery bank {bank.shape} float32 ({bank.nbytes / 2**30:.2f} GiB each)")

    times, fitted = fit_times(all_cases, bank, gallery_bank, args.repeat)
    baseline = times[all_cases[0].name]
    print(f"IS fit (one pass over the bank): {baseline:.3f} s; load average {load_average()}")
    with tempfile.TemporaryDirectory() as folder:
        bank_on_disk = memory_mapped(bank, folder, "bank")
        gallery_bank_on_disk = memory_mapped(gallery_bank, folder, "gallery_bank")
        peaks = {case.name: fit_peaks(case, bank_on_disk, gallery_bank_on_disk)
                 for case in all_cases}
        del bank_on_disk, gallery_bank_on_disk  # the files must be closed before their folder goes

    print()
    print("| normaliser | state | fit (s) | fit / IS fit | target | met "
          "| peak extra MiB of fit (memmap), M rows | M / 2 rows | O(N) memory |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in all_cases:
        seconds = times[case.name] / case.units(fitted[case.name], len(bank), len(gallery_bank))
        print(row(case, seconds, seconds / baseline, peaks[case.name]))
    print(f"\nload average at the end: {load_average()}")


if __name__ == "__main__":
    main()
