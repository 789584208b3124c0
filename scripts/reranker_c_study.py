"""Is each reranker's c dimensionless? Best c (by MAP) on short and long lists of the same data.

For every reranker (defaults except c), a half-decade grid of c from 1e-3 to 30,
lists of about 200 and about 2,000 items drawn from the same data, several draws
(each: a new initial scorer and pool, five queries): the MAP curve per reranker
and list size, and the c that maximises the mean MAP over the draws.
Two datasets, both offline:

- ``digits``: :func:`skqbnorm.datasets.load_digits_reranking` (ten class queries; a
  logistic regression on two labelled images per class gives the initial scores,
  pixels the graph). Digits has 1,797 images, so the long lists hold 1,750. Draw
  d takes the queries 5d..5d+4 (mod 10): two draws cover the ten classes.
- ``messages``: the 2,000 English user-interface messages bundled with
  :func:`skqbnorm.datasets.load_wordnet_revdict` (all-MiniLM-L6-v2 embeddings),
  labelled by the gettext catalogue they come from. A query is one of the five
  largest catalogues; three of its messages, drawn at random, are the examples of a
  query-by-example text engine: the initial score of a message is its cosine
  similarity to their mean embedding. The list is the other messages (about 2,000,
  or a random 200 of them); relevant are the query's catalogue's messages; the
  graph is built on the embeddings.

Usage: ``python scripts/reranker_c_study.py [--draws 2] [--quick]``. The acceptance
of issue 9: per reranker, the best c on short and long lists lies within one
decade, and the default c within one decade of the best c on each dataset.
"""

import argparse
import functools
import hashlib
import time

import numpy as np

from skqbnorm import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
)
from skqbnorm.datasets import load_digits_reranking, load_wordnet_revdict
from skqbnorm.metrics import mean_average_precision
from skqbnorm.rerankers import _base

RERANKERS = [HingeReranker, PreferenceStrengthReranker, PointwiseReranker, RandomWalkReranker]
GRID = 10.0 ** np.arange(-3, 1.75, 0.5)
N_CATALOGUES, N_EXAMPLES = 5, 3


def cached(function):
    """The affinity graph of a list, computed once for the whole c grid."""
    cache = {}

    def wrapper(features, **params):
        key = (hashlib.sha1(features.tobytes()).hexdigest(), tuple(sorted(params.items())))
        if key not in cache:
            cache[key] = function(features, **params)
        return cache[key]

    return wrapper


def digits_lists(n_items, draw):
    """Draw d: a new labelled set and pool; five of the ten class queries, in turn."""
    data = load_digits_reranking(n_pool=n_items, random_state=draw)
    keep = np.isin(data.groups, (5 * draw + np.arange(5)) % 10)
    return data.features[keep], data.initial_scores[keep], data.groups[keep], data.relevance[keep]


@functools.cache
def messages():
    return load_wordnet_revdict()


def message_lists(n_items, draw):
    rng, data = np.random.default_rng(draw), messages()
    embeddings, catalogue = data.far_bank_embeddings.astype(np.float64), data.far_bank_domains
    names, counts = np.unique(catalogue, return_counts=True)
    features, initial, groups, relevance = [], [], [], []
    for query, name in enumerate(names[np.argsort(-counts, kind="stable")[:N_CATALOGUES]]):
        examples = rng.choice(np.flatnonzero(catalogue == name), N_EXAMPLES, replace=False)
        pool = np.setdiff1d(np.arange(len(catalogue)), examples)
        pool = rng.choice(pool, min(n_items, len(pool)), replace=False)
        centroid = embeddings[examples].mean(axis=0)
        features.append(embeddings[pool])
        initial.append(embeddings[pool] @ centroid / np.linalg.norm(centroid))
        groups.append(np.full(len(pool), query))
        relevance.append(catalogue[pool] == name)
    return tuple(np.concatenate(parts) for parts in (features, initial, groups, relevance))


DATASETS = {"digits": (digits_lists, (200, 1750)), "messages": (message_lists, (200, 1997))}


def map_curve(cls, lists):
    features, initial, groups, relevance = lists
    return np.array([
        mean_average_precision(cls(c=c).fit_predict(features, initial, groups=groups), relevance, groups)
        for c in GRID
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="one draw, digits only")
    args = parser.parse_args()
    _base.affinity = cached(_base.affinity)  # the graph does not depend on c
    datasets = {"digits": DATASETS["digits"]} if args.quick else DATASETS
    draws = 1 if args.quick else args.draws
    print("c grid: " + " ".join(f"{c:.3g}" for c in GRID))
    summary = []
    for name, (make_lists, sizes) in datasets.items():
        for n_items in sizes:
            lists = [make_lists(n_items, draw) for draw in range(draws)]
            baseline = np.mean([mean_average_precision(li[1], li[3], li[2]) for li in lists])
            for cls in RERANKERS:
                start = time.perf_counter()
                curve = np.mean([map_curve(cls, li) for li in lists], axis=0)
                best = GRID[np.argmax(curve)]
                default = cls().c
                summary.append((name, n_items, cls.__name__, best, default, curve.max(),
                                curve[np.argmin(np.abs(np.log10(GRID / default)))], baseline))
                print(f"{name:8s} N={n_items:4d} {cls.__name__:27s} best c={best:8.3g}  MAP "
                      + " ".join(f"{value:.3f}" for value in curve)
                      + f"  ({time.perf_counter() - start:.0f} s)", flush=True)
    print("\n| data | N | reranker | best c | MAP at best c | default c | MAP at default | initial MAP |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, n_items, reranker, best, default, top, at_default, baseline in summary:
        print(f"| {name} | {n_items} | {reranker} | {best:.3g} | {top:.3f} | {default:.3g} | "
              f"{at_default:.3f} | {baseline:.3f} |")
    print("\nAcceptance (decades: |log10 ratio| <= 1):")
    for name in datasets:
        for reranker in [cls.__name__ for cls in RERANKERS]:
            rows = [row for row in summary if row[0] == name and row[2] == reranker]
            best = [row[3] for row in rows]
            across_sizes = abs(np.log10(best[0] / best[-1]))
            to_default = max(abs(np.log10(b / rows[0][4])) for b in best)
            print(f"  {name:8s} {reranker:27s} sizes {across_sizes:.1f} decade(s) "
                  f"{'ok' if across_sizes <= 1 else 'FAIL'}; default {to_default:.1f} "
                  f"{'ok' if to_default <= 1 else 'FAIL'}")


if __name__ == "__main__":
    main()
