"""A small list's reranking cost, with the default threads and with one thread.

Runs a 100-item ``HingeReranker.fit_predict`` (random 32-d features, defaults) in
fresh subprocesses, one with ``OMP_NUM_THREADS`` (and the BLAS thread variables)
unset and one with them set to 1, alternating over ``--rounds`` rounds; each
subprocess reports the fastest of ``--repeat`` runs after a warm-up, and the
script prints the fastest per setting and their ratio (target: within 1.5x; the
rerankers run lists this small on one thread, see ``_graph.thread_limit``).

Run: python benchmarks/bench_reranker_threads.py [--items 100] [--rounds 5] [--repeat 20]
"""

import argparse
import os
import subprocess
import sys

from _timing import machine_description

CHILD = """
import sys, time
import numpy as np
from skqbnorm import HingeReranker
n_items, repeat = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
features, initial = rng.normal(size=(n_items, 32)), rng.normal(size=n_items)
HingeReranker().fit_predict(features, initial)  # warm-up: imports, thread pools
best = float("inf")
for _ in range(repeat):
    start = time.perf_counter()
    HingeReranker().fit_predict(features, initial)
    best = min(best, time.perf_counter() - start)
print(best)
"""

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def child_seconds(n_items, repeat, threads):
    env = {key: value for key, value in os.environ.items() if key not in THREAD_VARIABLES}
    if threads is not None:
        env.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
    out = subprocess.run([sys.executable, "-c", CHILD, str(n_items), str(repeat)], env=env,
                         check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(machine_description())
    best = {"unset": float("inf"), "1": float("inf")}
    for _ in range(args.rounds):  # interleaved: a busy spell slows both settings
        best["unset"] = min(best["unset"], child_seconds(args.items, args.repeat, None))
        best["1"] = min(best["1"], child_seconds(args.items, args.repeat, 1))
    print(f"{args.items}-item HingeReranker.fit_predict, fastest of {args.rounds} x {args.repeat}:")
    print(f"  OMP_NUM_THREADS unset: {1000 * best['unset']:8.1f} ms")
    print(f"  OMP_NUM_THREADS=1:     {1000 * best['1']:8.1f} ms")
    print(f"  ratio unset / 1:       {best['unset'] / best['1']:8.2f}  (target <= 1.5)")


if __name__ == "__main__":
    main()
