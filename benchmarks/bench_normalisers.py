"""Fit and transform cost of the softmax normalisers, as ratios to bare numpy passes.

For an M x N float32 bank matrix (default 20,000 x 20,000, 1.6 GB) this prints:

- fit time of IS and DIS / one ``np.exp`` pass over the same matrix (target <= 2x);
- peak extra memory of fit, traced by ``tracemalloc`` (numpy reports its buffers
  to it), with the bank read from an ``np.memmap`` (target <= 256 MB);
- transform time for Q query rows / one ``np.subtract(S, v)`` pass (target <= 2x).

Every baseline is measured in the same run, on the same machine. Run:

    python benchmarks/bench_normalisers.py [--bank 20000] [--gallery 20000] [--queries 5000]
"""

import argparse
import tempfile
from functools import partial

import numpy as np

from skqbnorm import DynamicInvertedSoftmax, InvertedSoftmax

from _timing import best_time, machine_description, memory_mapped, peak_mib


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bank", type=int, default=20_000)
    parser.add_argument("--gallery", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    print(machine_description())
    rng = np.random.default_rng(0)
    bank = rng.standard_normal((args.bank, args.gallery), dtype=np.float32)
    bank *= 0.1
    queries = bank[: args.queries].copy()
    print(f"bank {bank.shape} float32 ({bank.nbytes / 2**30:.2f} GiB), queries {queries.shape}")

    exp_pass = best_time(partial(np.exp, bank), args.repeat)
    offsets = rng.standard_normal(args.gallery).astype(np.float32)
    subtract_pass = best_time(partial(np.subtract, queries, offsets), args.repeat)
    print(f"baseline: np.exp over the bank {exp_pass:.3f} s; "
          f"np.subtract(S, v) over the queries {subtract_pass:.3f} s")

    with tempfile.TemporaryDirectory() as tmp:
        bank_on_disk = memory_mapped(bank, tmp)
        print(f"{'method':<24}{'fit/exp':>10}{'fit MiB':>10}{'transform/subtract':>20}")
        for estimator in (InvertedSoftmax(), DynamicInvertedSoftmax()):
            fit = best_time(partial(estimator.fit, bank), args.repeat)
            memory = peak_mib(partial(estimator.fit, bank_on_disk))
            transform = best_time(partial(estimator.transform, queries), args.repeat)
            print(
                f"{type(estimator).__name__:<24}{fit / exp_pass:>10.2f}{memory:>10.1f}"
                f"{transform / subtract_pass:>20.2f}"
            )
        del bank_on_disk  # the file must be closed before its folder goes


if __name__ == "__main__":
    main()
