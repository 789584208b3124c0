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

``--part cv`` times model selection over c instead: ``RerankerCV`` against
``GridSearchCV`` with the MAP scorer on the same ``GroupKFold`` folds (8 values of c
x 5 folds x 50 lists of ``--items`` items, interleaved, best of ``--repeat``), and
prints their ratio (target: at most 1/3) and whether they chose the same c.

``--part sizes`` times every reranker of the catalogue at its defaults on lists of
100 to 50,000 items (random 32-d features, random initial scores, divided by their
largest magnitude for the rerankers that read them as cosines; ``--sizes`` to
choose), in rounds over every size and reranker, best of ``--repeat`` (of at least
``SMALL_ROUNDS`` rounds up to 1,000 items, whose few milliseconds a busy spell of the
machine would otherwise decide), beside the list's exact k-NN search (k=10, default threads: the floor
of the graph-based rerankers) and scikit-learn's (``kneighbors_graph``, which it
replaced). It prints a Markdown table, whether any list cost more than a longer one
and whether 50,000 items took under 4 s (targets: none does; every reranker).
"""

import argparse
from functools import partial

import numpy as np
import sklearn
from sklearn.datasets import make_blobs
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.neighbors import kneighbors_graph

from skqbnorm import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
    RerankerCV,
)
from skqbnorm._core import euclidean_neighbors
from skqbnorm.catalogue import rerankers
from skqbnorm.metrics import make_map_scorer
from skqbnorm.rerankers._neighborhood import CosineQueryReranker

from _timing import best_time, interleaved_best_times, machine_description

CS = [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0]


def make_list(n_items, seed=0):
    features, labels = make_blobs(n_samples=n_items, n_features=64, centers=10, random_state=seed)
    initial = (labels == 0) + np.random.default_rng(seed).normal(size=n_items)
    return features, initial


def reranking_lists(n_lists, n_items, seed=0):
    """Lists of random 32-d features whose relevant items (30%) sit apart, with noisy
    initial scores: a c that smooths over the graph helps, one that keeps them does not."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_lists), n_items)
    relevance = rng.random(len(groups)) < 0.3
    features = rng.normal(size=(len(groups), 32)) + 0.5 * relevance[:, None]
    initial = relevance + rng.normal(scale=1.5, size=len(groups))
    return features, initial, groups, relevance


def model_selection(args):
    features, initial, groups, relevance = reranking_lists(50, args.items)
    print(f"{len(CS)} values of c x 5 folds x 50 lists of {args.items} items, HingeReranker, "
          f"best of {args.repeat}, interleaved")
    chosen = {}

    def grid():
        with sklearn.config_context(enable_metadata_routing=True):
            search = GridSearchCV(HingeReranker(), {"c": CS}, scoring=make_map_scorer(),
                                  cv=GroupKFold(n_splits=5))
            chosen["GridSearchCV"] = search.fit(features, initial, groups=groups,
                                                relevance=relevance).best_params_["c"]

    def path():
        search = RerankerCV(HingeReranker(), cs=CS, cv=GroupKFold(n_splits=5))
        chosen["RerankerCV"] = search.fit(features, initial, groups, relevance=relevance).best_c_

    seconds = interleaved_best_times({"GridSearchCV": grid, "RerankerCV": path}, args.repeat)
    for name in seconds:
        print(f"  {name:<14}{seconds[name]:>9.2f} s   c = {chosen[name]}")
    ratio = seconds["RerankerCV"] / seconds["GridSearchCV"]
    same = "same c" if chosen["RerankerCV"] == chosen["GridSearchCV"] else "DIFFERENT c"
    print(f"  RerankerCV / GridSearchCV: {ratio:.3f} (target <= 0.333, "
          f"{'met' if ratio <= 1 / 3 else 'NOT met'}); {same}")


SIZES = [100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000]
SEARCHES = ["k-NN search", "scikit-learn k-NN"]
TARGET_SECONDS = 4.0
#: Rounds at least for lists of up to 1,000 items (1-15 ms a fit).
SMALL_ROUNDS = 30


def list_sizes(args):
    sizes = SIZES if args.sizes is None else [int(size) for size in args.sizes.split(",")]
    names = [cls.__name__ for cls in rerankers()]
    small_rounds = max(args.repeat, SMALL_ROUNDS)
    print(f"defaults, random 32-d features and initial scores; best of {args.repeat} rounds "
          f"over every size and reranker ({small_rounds} up to 1,000 items); seconds")
    functions = {}
    for n_items in sizes:
        rng = np.random.default_rng(n_items)
        features, initial = rng.normal(size=(n_items, 32)), rng.normal(size=n_items)
        cosines = initial / np.abs(initial).max()
        functions[n_items, "k-NN search"] = partial(euclidean_neighbors, features, 10)
        functions[n_items, "scikit-learn k-NN"] = partial(kneighbors_graph, features, 10,
                                                          mode="distance")
        for cls in rerankers():
            y = cosines if issubclass(cls, CosineQueryReranker) else initial
            functions[n_items, cls.__name__] = partial(cls().fit, features, y)
    # Rounds over every size: a busy spell of a shared machine slows every size alike.
    table = interleaved_best_times(
        {key: function for key, function in functions.items() if key[0] <= 1_000}, small_rounds)
    table.update(interleaved_best_times(
        {key: function for key, function in functions.items() if key[0] > 1_000}, args.repeat))
    columns = [*SEARCHES, *names]
    print("| items | " + " | ".join(columns) + " |")
    print("| ---: | " + " | ".join("---:" for _ in columns) + " |")
    for n_items in sizes:
        print(f"| {n_items:,} | " + " | ".join(f"{table[n_items, name]:.3f}" for name in columns) + " |")
    for name in names:
        seconds = [table[n_items, name] for n_items in sizes]
        cliffs = [f"{small:,} items {a:.3f} s > {large:,} items {b:.3f} s"
                  for (small, a), (large, b) in zip(zip(sizes, seconds), zip(sizes[1:], seconds[1:]))
                  if a > b]
        verdict = "no list costs more than a longer one" if not cliffs else "; ".join(cliffs)
        if 50_000 in sizes:
            met = table[50_000, name] < TARGET_SECONDS
            verdict += f"; 50,000 items {'under' if met else 'NOT under'} {TARGET_SECONDS:g} s"
        print(f"{name}: {verdict}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["cases", "cv", "sizes"], default="cases")
    parser.add_argument("--sizes", default=None, help="comma-separated list sizes (--part sizes)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--items", type=int, default=200, help="items per list (--part cv)")
    args = parser.parse_args()
    print(machine_description())
    if args.part == "cv":
        model_selection(args)
        return
    if args.part == "sizes":
        list_sizes(args)
        return
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
