"""Why the rerankers gain on digits and not on emoji or WordNet: the tasks measured.

The seven tasks and the query split are those of ``reranker_defaults_study.py``'s
``ALL_TASKS`` (imported from it): ``digits`` (random_state 0 and 1 pooled, 20 lists of
400), ``digits-noisy`` (the indicator-plus-noise engine, draws 2 and 3, 20 lists of 500),
``glyphs`` (62 lists of 300), ``emoji`` (57 lists of 300), ``emoji-noisy`` (the same
collection, the indicator-plus-noise engine), ``wordnet`` (23 lists of 300) and
``wordnet-noisy``;
the strength study reads the oracle's training-query row to sort the tasks into those
whose features carry relevance and those whose features do not. Each task's queries split
in half at random (seed 0). Every figure is computed per list (query), then averaged
over the queries of a split; every split is reported (held-out and training), each
mean with a 95% percentile bootstrap interval over its queries
(:func:`skqbnorm.metrics.paired_mean_change` of the values against zeros, or of two
paired values, 10,000 resamples, seed 0). A list on which a figure is undefined (no
item of a kind it needs) is left out of that figure's mean; the tables give how
many lists each mean holds. The rule, fixed before running:

1. ``initial MAP``: MAP of the lexical (text-like) initial scores, as in the study.
2. ``oracle MAP`` (reads the labels): each list ranked by the cosine of an item's
   features to the mean feature vector of the list's relevant items, a relevant
   item's own vector left out of its mean (a list's only relevant item has no
   other to compare with and ranks last). An upper-bound-style figure of how well
   the features alone separate relevant from irrelevant items in the list; also
   its paired change over the initial MAP, and the AUCs of both scores.
3. k-NN label purity (reads the labels): for each relevant item, the share of
   relevant items among its ``K`` nearest other items of the list, by the
   features' cosine (the neighbourhood rerankers' measure) and by Euclidean
   distance (the Bayesian rerankers' k-NN graph, ``n_neighbors=10`` by default);
   averaged over the list's relevant items, against the base rate
   ``(n_relevant - 1) / (n_items - 1)`` of a random other item; ``lift`` is their
   ratio (lists with one relevant item have none).
4. Do the initial ranker's mistakes look like its hits? Among the initial top T
   (T = 20, and T = the list's number of relevant items): the mean feature cosine
   between the top's relevant items (``hits``, pairs of distinct items), of the
   top's irrelevant items (``mistakes``) to the hits, and of the relevant items
   ranked below T (``misses``) to the hits, beside the mean cosine of all pairs of
   the list; the paired gaps ``hits - mistakes`` and, the level every pair of the
   list shares taken off, ``hits - all pairs`` and ``mistakes - all pairs``. Then
   the AUC (relevant against irrelevant, over the whole list) of each item's mean
   cosine to the top T (itself left out): roughly the signal a visual-consistency reranker smooths with. 0.5 is
   no information; compare with the AUC of the initial scores themselves.

Usage: ``python scripts/reranking_task_diagnostics.py [--rst]`` (``--rst`` also
prints the guide's table of held-out queries as an rst list-table).
"""

import argparse

import numpy as np
from reranker_defaults_study import ALL_TASKS as TASKS
from reranker_defaults_study import SEED, query_split
from scipy.stats import rankdata
from sklearn.preprocessing import normalize

from skqbnorm.metrics import average_precisions, paired_mean_change

#: Neighbours of the purity figure: the Bayesian rerankers' default ``n_neighbors``.
K = 10
#: The initial tops of figure 4; None is the list's number of relevant items.
TOPS = (20, None)
N_RESAMPLES = 10_000
#: Figures in points (x100) rather than as they are.
PERCENT = ("initial MAP", "oracle MAP", "oracle - initial MAP")


def auc(score, relevant):
    """Area under the ROC curve of ``score`` for relevant against irrelevant items
    (ties count half); NaN without both kinds."""
    n_relevant = int(relevant.sum())
    n_irrelevant = len(relevant) - n_relevant
    if not n_relevant or not n_irrelevant:
        return np.nan
    ranks = rankdata(score)
    return (ranks[relevant].sum() - n_relevant * (n_relevant + 1) / 2) / (n_relevant * n_irrelevant)


def mean_block(cosines, rows, cols, distinct=False):
    """Mean cosine of ``rows`` to ``cols`` (pairs of distinct items if ``distinct``:
    ``rows`` is ``cols``); NaN without a pair."""
    block = cosines[np.ix_(rows, cols)]
    if distinct:
        n = len(rows)
        return (block.sum() - np.trace(block)) / (n * (n - 1)) if n > 1 else np.nan
    return block.mean() if block.size else np.nan


def oracle_scores(features, relevant):
    """Each item's cosine to the mean feature vector of the list's relevant items,
    a relevant item's own vector left out (a list's lone relevant item: last)."""
    n_relevant = int(relevant.sum())
    total = features[relevant].sum(axis=0)  # the mean's direction is the sum's
    scores = normalize(features) @ normalize(total[None, :])[0]
    if n_relevant > 1:
        rows = np.flatnonzero(relevant)
        others = total[None, :] - features[rows]  # leave-one-out sums, one row each
        scores[rows] = np.einsum("ij,ij->i", normalize(features[rows]), normalize(others))
    else:
        scores[relevant] = -2.0  # below every cosine
    return scores


def purity(distances, relevant):
    """Mean share of relevant items among each relevant item's ``K`` nearest other items."""
    distances = distances[relevant].copy()
    distances[np.arange(len(distances)), np.flatnonzero(relevant)] = np.inf  # not itself
    nearest = np.argpartition(distances, K - 1, axis=1)[:, :K]
    return relevant[nearest].mean()


def list_figures(features, initial, oracle, relevant):
    """Every figure but the MAPs of one list, as a dict of floats (NaN: undefined)."""
    n_items, n_relevant = len(relevant), int(relevant.sum())
    unit = normalize(features)
    cosines = unit @ unit.T
    squared = np.einsum("ij,ij->i", features, features)
    euclidean = squared[:, None] + squared[None, :] - 2 * features @ features.T
    base = (n_relevant - 1) / (n_items - 1) if n_relevant else np.nan
    figures = {"relevant items": n_relevant, "base rate": base,
               "AUC initial": auc(initial, relevant), "AUC oracle": auc(oracle, relevant)}
    for name, distances in (("cosine", -cosines), ("euclidean", euclidean)):
        share = purity(distances, relevant) if n_relevant else np.nan
        figures[f"purity {name}"] = share
        figures[f"lift {name}"] = share / base if base > 0 else np.nan
    figures["all pairs"] = mean_block(cosines, np.arange(n_items), np.arange(n_items), True)
    order = np.argsort(-initial, kind="stable")
    for top_size in TOPS:
        size = n_relevant if top_size is None else top_size
        tag = "T=R" if top_size is None else f"T={top_size}"
        top, below = order[:size], order[size:]
        hits, mistakes, misses = top[relevant[top]], top[~relevant[top]], below[relevant[below]]
        figures[f"P@{tag}"] = relevant[top].mean() if size else np.nan
        figures[f"hits-hits {tag}"] = mean_block(cosines, hits, hits, True)
        figures[f"mistakes-hits {tag}"] = mean_block(cosines, mistakes, hits)
        figures[f"misses-hits {tag}"] = mean_block(cosines, misses, hits)
        in_top = np.zeros(n_items, dtype=bool)
        in_top[top] = True
        # Each item's mean cosine to the top, itself left out where it is in it.
        signal = (cosines[:, top].sum(axis=1) - np.where(in_top, np.diag(cosines), 0.0))
        signal /= np.maximum(size - in_top, 1)
        figures[f"AUC top-mean {tag}"] = auc(signal, relevant) if size > 1 else np.nan
    return figures


def task_figures(features, initial, groups, relevance):
    """Per-query figures of a task: a dict of arrays in the order of the sorted groups."""
    labels, query = np.unique(groups, return_inverse=True)
    oracle = np.empty(len(initial))
    rows = []
    for number in range(len(labels)):
        items = np.flatnonzero(query == number)
        features_q, relevant = features[items].astype(np.float64), relevance[items]
        oracle[items] = oracle_scores(features_q, relevant)
        rows.append(list_figures(features_q, initial[items], oracle[items], relevant))
    figures = {"initial MAP": average_precisions(initial, relevance, groups),
               "oracle MAP": average_precisions(oracle, relevance, groups)}
    figures |= {name: np.array([row[name] for row in rows], dtype=float) for name in rows[0]}
    return figures


def interval(values, reference=None):
    """Mean of ``values`` (less ``reference``, paired) over the lists where both are
    defined, with its bootstrap interval, and the number of lists."""
    reference = np.zeros_like(values) if reference is None else reference
    kept = ~(np.isnan(values) | np.isnan(reference))
    result = paired_mean_change(reference[kept], values[kept], n_resamples=N_RESAMPLES,
                                random_state=SEED)
    return result.change, result.low, result.high, int(kept.sum())


def cell(name, change, low, high, digits=3):
    """``mean [low, high]``, signed for a paired difference (a name with " - ")."""
    scale, digits = (100, 1) if name in PERCENT else (1, digits)
    form = f"{'+' if ' - ' in name else ''}.{digits}f"
    return f"{scale * change:{form}} [{scale * low:{form}}, {scale * high:{form}}]"


def rows_of(figures):
    """The reported rows: (label, values, reference) with reference None or paired."""
    rows = [(name, figures[name], None) for name in ("initial MAP", "oracle MAP")]
    rows.append(("oracle - initial MAP", figures["oracle MAP"], figures["initial MAP"]))
    rows += [(name, figures[name], None) for name in
             ("AUC initial", "AUC oracle", "relevant items", "base rate", "purity cosine",
              "lift cosine", "purity euclidean", "lift euclidean", "all pairs")]
    for top_size in TOPS:
        tag = "T=R" if top_size is None else f"T={top_size}"
        rows += [(name, figures[name], None) for name in
                 (f"P@{tag}", f"hits-hits {tag}", f"mistakes-hits {tag}", f"misses-hits {tag}")]
        rows += [(f"{kind} - all pairs {tag}", figures[f"{kind}-hits {tag}"], figures["all pairs"])
                 for kind in ("hits", "mistakes")]
        rows.append((f"hits - mistakes {tag}", figures[f"hits-hits {tag}"],
                     figures[f"mistakes-hits {tag}"]))
        rows.append((f"AUC top-mean {tag}", figures[f"AUC top-mean {tag}"], None))
    return rows


#: The guide's rows (held-out queries): the script's label, the guide's label.
GUIDE = [
    ("initial MAP", "initial MAP (the engine's scores)"),
    ("oracle MAP", "oracle MAP (features, reads the labels)"),
    ("purity cosine", "k-NN purity, cosine, k = 10 (reads the labels)"),
    ("base rate", "base rate of that purity"),
    ("lift cosine", "lift: purity / base rate"),
    ("P@T=20", "precision of the initial top 20"),
    ("hits-hits T=20", "cosine, top-20 hits to hits"),
    ("mistakes-hits T=20", "cosine, top-20 mistakes to hits"),
    ("misses-hits T=20", "cosine, misses below 20 to top-20 hits"),
    ("all pairs", "cosine, all pairs of the list"),
    ("AUC initial", "AUC of the initial scores"),
    ("AUC top-mean T=20", "AUC of the mean cosine to the initial top 20"),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rst", action="store_true",
                        help="also print the guide's held-out table as an rst list-table")
    args = parser.parse_args()
    results, n_held_out = {}, {}
    for name, make in TASKS.items():
        figures = task_figures(*make())
        train = query_split(len(figures["initial MAP"]))
        n_held_out[name] = int((~train).sum())
        for split, mask in (("held-out", ~train), ("training", train)):
            results[(split, name)] = {
                label: interval(values[mask], None if reference is None else reference[mask])
                for label, values, reference in rows_of(figures)}
    for split in ("held-out", "training"):
        print(f"\n{split} queries: mean over the lists [95% bootstrap interval] (lists)\n")
        print("| figure | " + " | ".join(TASKS) + " |")
        print("| --- |" + " --- |" * len(TASKS))
        for label in results[(split, next(iter(TASKS)))]:
            cells = [f"{cell(label, *results[(split, task)][label][:3])} "
                     f"({results[(split, task)][label][3]})" for task in TASKS]
            print(f"| {label} | " + " | ".join(cells) + " |")
    if args.rst:
        print("\n.. list-table:: What the features and the initial top hold, held-out queries "
              "(mean over the lists [95% bootstrap interval])")
        print("   :header-rows: 1\n\n   * - figure")
        print("".join(f"     - {task}\n" for task in TASKS), end="")
        for label, text in GUIDE:
            print(f"   * - {text}")
            digits = 2 if label.startswith(("lift", "AUC")) else 3
            for task in TASKS:
                *mean, n_lists = results[("held-out", task)][label]
                total = n_held_out[task]
                note = f" ({n_lists} of {total} lists)" if n_lists < total else ""
                print(f"     - {cell(label, *mean, digits)}{note}")


if __name__ == "__main__":
    main()
