"""Reranker timings, with the k-NN graph build of the same list as the baseline.

Prints seconds and the ratio to building the list's k-NN graph with scikit-learn's
``kneighbors_graph`` (the work every graph-based reranker does first), both measured
in this run:

- N = 1,000: hinge reranking with all pairs and with rho-adjacent pairs
  (target: rho-adjacent under 1 s on a 2-core machine);
- N = 10,000: k-NN graph, rho-adjacent pairs, preference strength
  (target: under 2 s), and the point-wise and random-walk baselines;
- N = 3,000: hinge with rho-adjacent pairs, whose OSQP factorisation of the KKT
  system fills in on a k-NN graph of 64-dimensional features.

Run: python benchmarks/bench_rerankers.py [--repeat 3] [--scale 1.0]

``--scale`` multiplies every list size (at least 50 items; the targets are for 1.0).
"""

import argparse
from functools import partial

import numpy as np
from sklearn.datasets import make_blobs
from sklearn.neighbors import kneighbors_graph

from skqbnorm import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
)

from _timing import best_time, machine_description


def make_list(n_items, seed=0):
    features, labels = make_blobs(n_samples=n_items, n_features=64, centers=10, random_state=seed)
    initial = (labels == 0) + np.random.default_rng(seed).normal(size=n_items)
    return features, initial


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    print(machine_description())
    cases = [
        (1_000, "hinge, all pairs", HingeReranker(pairs="all")),
        (1_000, "hinge, rho-adjacent (rho=5)", HingeReranker(pairs="rho_adjacent", rho=5)),
        (3_000, "hinge, kNN, rho-adjacent", HingeReranker(rho=5)),
        (10_000, "preference strength, kNN, rho-adjacent", PreferenceStrengthReranker(rho=5)),
        (10_000, "point-wise, kNN", PointwiseReranker()),
        (10_000, "random walk, kNN", RandomWalkReranker()),
    ]
    print(f"{'N':>7}  {'reranker':<42}{'seconds':>9}{'/ graph':>9}")
    baselines = {}
    for n_items, name, reranker in cases:
        n_items = max(50, int(n_items * args.scale))
        features, initial = make_list(n_items)
        if n_items not in baselines:
            graph = partial(kneighbors_graph, features, 10, mode="distance")
            baselines[n_items] = best_time(graph, args.repeat)
            print(f"{n_items:>7}  {'(baseline: kneighbors_graph, k=10)':<42}"
                  f"{baselines[n_items]:>9.3f}{1:>9.2f}")
        seconds = best_time(partial(reranker.fit, features, initial), args.repeat)
        print(f"{n_items:>7}  {name:<42}{seconds:>9.3f}{seconds / baselines[n_items]:>9.2f}")


if __name__ == "__main__":
    main()
