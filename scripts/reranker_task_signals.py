"""Label-free signals of whether a reranking task's features carry relevance.

``c="auto"`` cannot tell a task whose features carry relevance from one whose features
do not (see the guide's "The strength c, set per list"). This script measures two
label-free statistics per list, on the seven tasks of ``reranker_strength_study.py``,
to see whether either separates the two kinds (fixed beforehand by
``reranking_task_diagnostics.py`` on training queries):

- **Moran's z** of the initial scores over the reranker's default graph (kNN, 10
  neighbours, Gaussian weights at the median edge length): how far the scores'
  graph autocorrelation lies above a random permutation's, in standard deviations
  (normality approximation);
- **top cohesion**: the kNN edges among the top 10% of the list by initial score,
  over the number a random subset of that size would hold.

Each row gives a task's median over its lists with the 2.5% and 97.5% quantiles of
the lists (a spread, not an interval of the median), and, as a reference that
reads the labels, Moran's z of the relevance itself.

Usage: ``python scripts/reranker_task_signals.py [--rst]`` (a few seconds).
"""

import argparse

import numpy as np
from reranker_defaults_study import ALL_TASKS
from reranker_strength_study import RELEVANCE_TASKS

from skqbnorm.rerankers._graph import affinity

TOP_SHARE = 0.1


def moran_z(weights, values):
    """Moran's I of ``values`` over the symmetric ``weights``, as a z-score under
    the normality approximation."""
    weights = ((weights + weights.T) / 2).tocsr()
    n_items = len(values)
    centred = values - values.mean()
    total = weights.sum()
    moran = n_items / total * (centred @ (weights @ centred)) / (centred @ centred)
    expected = -1.0 / (n_items - 1)
    s1 = 2.0 * weights.power(2).sum()
    s2 = ((2.0 * np.asarray(weights.sum(axis=0)).ravel()) ** 2).sum()
    variance = ((n_items**2 * s1 - n_items * s2 + 3 * total**2)
                / ((n_items**2 - 1) * total**2) - expected**2)
    return (moran - expected) / np.sqrt(variance)


def top_cohesion(weights, values, share=TOP_SHARE):
    """Edges among the top ``share`` of the list over a random subset's expected count."""
    edges = ((weights + weights.T) > 0).astype(float).tocsr()
    n_items = len(values)
    n_top = max(3, int(share * n_items))
    top = np.argsort(-values, kind="stable")[:n_top]
    expected = edges.sum() * n_top * (n_top - 1) / (n_items * (n_items - 1))
    return edges[top][:, top].sum() / expected


def task_rows():
    for task, make_task in ALL_TASKS.items():
        features, initial, groups, relevance = make_task()
        signals = []
        for label in np.unique(groups):
            rows = groups == label
            weights = affinity(features[rows], warn=False)
            signals.append((moran_z(weights, initial[rows]), top_cohesion(weights, initial[rows]),
                            moran_z(weights, relevance[rows].astype(float))))
        signals = np.array(signals)
        kind = "carries relevance" if task in RELEVANCE_TASKS else "does not"
        cells = [f"{np.median(s):.2f} [{np.quantile(s, 0.025):.2f}, {np.quantile(s, 0.975):.2f}]"
                 for s in signals.T]
        yield (task, kind, str(len(signals)), *cells)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rst", action="store_true", help="print the guide's table")
    args = parser.parse_args()
    header = ("task", "features", "lists", "Moran's z, initial", "top cohesion",
              "Moran's z, relevance (reads labels)")
    rows = list(task_rows())
    if args.rst:
        print(".. csv-table::\n   :header: " + ", ".join(f'"{h}"' for h in header) + "\n")
        for row in rows:
            print("   " + ", ".join(f'"{value}"' for value in row))
        return
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
