"""Defaults for every reranker, chosen on training queries and reported on held-out ones.

Three reranking tasks, all offline, each of the paper's shape (a weak text-like
initial ranking, visual-like features, known relevance):

- ``digits``: :func:`skqbnorm.datasets.load_digits_reranking` with ``random_state``
  0 and 1 (two labelled sets and pools, ten class queries each: 20 lists of 400);
- ``emoji``: :func:`skqbnorm.datasets.load_emoji_reranking` (57 subgroup queries,
  lists of 300, names ranked by a lexical engine, drawings as features);
- ``wordnet``: :func:`skqbnorm.datasets.load_wordnet_reranking` (23 category
  queries, lists of 300, definitions ranked by a lexical engine, word embeddings
  as features).

The rule, fixed before running. Every reranker in ``RERANKERS`` is evaluated on a
grid: c over decades (``C_GRID``), and where the class has them, every pair
selection of ``PAIRS`` (at the class's default sizes) and every initial-score mode
of ``INITIAL``; ``pairs="all"`` is left out (O(N^2) pairs: the cost, not the
result, rules it out of a default). Each task's queries are split in half at random
(seed 0). A setting's training score is the mean over the training tasks of the
mean change of average precision over the initial list on that task's training
queries (each task weighs the same); the choice is the setting with the highest
training score, ties to the first in grid order. The neighbourhood rerankers
(k-reciprocal, diffusion, query expansion) have no c, pairs or initial-score mode of
that kind: each is tried on its own small grid (``OWN_AXES``) by the same rule. Held-out queries are reranked with
the same grid only to cache their average precisions; the choice never reads them.

Splits:

- ``queries``: train on the training queries of all three tasks; report on the
  held-out queries of each. Its choices are the classes' defaults.
- ``task: X``: train on the training queries of the two other tasks only; report
  on X's held-out queries (a task the choice has not seen at all).

Every reported change comes with a 95% paired bootstrap interval over the held-out
queries (:func:`skqbnorm.metrics.paired_mean_change`, 10,000 resamples, seed 0).

Usage: ``python scripts/reranker_defaults_study.py [--quick]``. To add a reranker,
add one line to ``RERANKERS``.
"""

import argparse
import itertools
import sys
import time
from functools import partial

import numpy as np
from reranker_c_study import cached

from skqbnorm import (
    DiffusionReranker,
    HingeReranker,
    KReciprocalReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    QueryExpansionReranker,
    RandomWalkReranker,
)
from skqbnorm.datasets import (
    load_digits_reranking,
    load_emoji_reranking,
    load_glyph_reranking,
    load_wordnet_reranking,
)
from skqbnorm.metrics import average_precisions, paired_mean_change
from skqbnorm.rerankers import _base

#: The rerankers studied, each with its own grid (see ``grid``): one line each.
RERANKERS = [HingeReranker, PreferenceStrengthReranker, PointwiseReranker, RandomWalkReranker,
             KReciprocalReranker, DiffusionReranker, QueryExpansionReranker]
#: The point-wise baseline every other reranker is also compared with, head to head.
BASELINE = PointwiseReranker
C_GRID = (0.01, 0.1, 1.0, 10.0)
PAIRS = ("rho_adjacent", "top_bottom", "clustering")
INITIAL = ("scores", "rank")
#: The neighbourhood rerankers' own axes: each takes the initial scores beside the
#: features' cosines (k-reciprocal, query expansion: "minmax" puts any scale on [0, 1]).
OWN_AXES = {
    KReciprocalReranker: {"initial": ("minmax",), "k1": (10, 20), "lambda_value": (0.1, 0.3)},
    DiffusionReranker: {"alpha": (0.5, 0.9, 0.99), "n_neighbors": (10, 50)},
    QueryExpansionReranker: {"initial": ("minmax",), "alpha": (1.0, 3.0), "n_query": (5, 10)},
}
SEED = 0


def digits_task():
    parts = [load_digits_reranking(random_state=draw) for draw in (0, 1)]
    return (np.concatenate([p.features for p in parts]),
            np.concatenate([p.initial_scores for p in parts]),
            np.concatenate([p.groups + 10 * draw for draw, p in enumerate(parts)]),
            np.concatenate([p.relevance for p in parts]))


def noisy_digits_task():
    """The indicator-plus-noise engine on digits: draws 2 and 3 (other pools than
    ``digits``'s), lists of 500."""
    parts = [load_digits_reranking(n_pool=500, noise=1.0, random_state=draw) for draw in (2, 3)]
    return (np.concatenate([p.features for p in parts]),
            np.concatenate([p.initial_scores for p in parts]),
            np.concatenate([p.groups + 10 * draw for draw, p in enumerate(parts)]),
            np.concatenate([p.relevance for p in parts]))


def bundled_task(load):
    data = load()
    return data.features, data.initial_scores, data.groups, data.relevance


#: This study's three tasks.
TASKS = {
    "digits": digits_task,
    "emoji": lambda: bundled_task(load_emoji_reranking),
    "wordnet": lambda: bundled_task(load_wordnet_reranking),
}
#: With four tasks of a noisy engine (the class indicator plus N(0, 1) noise), for the
#: strength study and the task diagnostics.
ALL_TASKS = {
    "digits": digits_task,
    "digits-noisy": noisy_digits_task,
    "glyphs": lambda: bundled_task(load_glyph_reranking),
    "emoji": TASKS["emoji"],
    "emoji-noisy": lambda: bundled_task(partial(load_emoji_reranking, noise=1.0)),
    "wordnet": TASKS["wordnet"],
    "wordnet-noisy": lambda: bundled_task(partial(load_wordnet_reranking, noise=1.0)),
}


def grid(cls):
    """Every setting of ``cls`` the study tries: c, pairs and initial where it has them
    (a class with none of them is tried at its defaults)."""
    params = cls().get_params()
    if cls in OWN_AXES:
        axes = dict(OWN_AXES[cls])
        return [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())]
    axes = {}
    if "c" in params:
        axes["c"] = C_GRID
    if "pairs" in params:
        axes["pairs"] = PAIRS
    if "initial" in params:
        axes["initial"] = INITIAL
    extra = {"random_state": 0} if "random_state" in params else {}
    return [{**dict(zip(axes, values, strict=True)), **extra}
            for values in itertools.product(*axes.values())]


def label(setting):
    return ", ".join(f"{k}={v!r}" for k, v in setting.items() if k != "random_state")


def query_split(n_queries, seed=SEED):
    """Boolean mask of the training queries: a random half (rounded down)."""
    train = np.zeros(n_queries, dtype=bool)
    train[np.random.default_rng(seed).permutation(n_queries)[: n_queries // 2]] = True
    return train


def choose(aps, baseline, train, tasks):
    """The setting index with the best mean over ``tasks`` of the training queries' mean AP change."""
    scores = [np.mean([np.mean(aps[t][i][train[t]] - baseline[t][train[t]]) for t in tasks])
              for i in range(len(next(iter(aps.values()))))]
    return int(np.argmax(scores)), float(np.max(scores))


def interval_cell(change, low, high):
    return f"{100 * change:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="c in {0.1, 1} only, for a smoke run")
    args = parser.parse_args()
    global C_GRID
    if args.quick:
        C_GRID = (0.1, 1.0)
    _base.affinity = cached(_base.affinity)  # the graph depends on the features only
    lists = {name: make() for name, make in TASKS.items()}
    baseline = {name: average_precisions(li[1], li[3], li[2]) for name, li in lists.items()}
    train = {name: query_split(len(ap)) for name, ap in baseline.items()}
    for name, ap in baseline.items():
        print(f"{name}: {len(ap)} queries ({train[name].sum()} training), "
              f"{len(lists[name][1])} items, initial MAP {100 * ap.mean():.1f}", flush=True)
    aps = {}  # (reranker, task) -> list over the grid of per-query APs
    for cls in RERANKERS:
        for setting in grid(cls):
            start = time.perf_counter()
            for name, (features, initial, groups, relevance) in lists.items():
                scores = cls(**setting).fit_predict(features, initial, groups=groups)
                aps.setdefault((cls.__name__, name), []).append(
                    average_precisions(scores, relevance, groups))
            print(f"  {cls.__name__} {label(setting)} ({time.perf_counter() - start:.0f} s)",
                  file=sys.stderr, flush=True)
    splits = {"queries": list(TASKS)} | {f"task: {t}": [o for o in TASKS if o != t] for t in TASKS}
    print("\nChoices (training score: mean over training tasks of the training queries' "
          "mean AP change, x100):")
    rows, held_out_aps = [], {}
    for split, training_tasks in splits.items():
        held_out = list(TASKS) if split == "queries" else [split.removeprefix("task: ")]
        for cls in RERANKERS:
            per_task = {t: aps[(cls.__name__, t)] for t in TASKS}
            index, score = choose(per_task, baseline, train, training_tasks)
            setting = grid(cls)[index]
            print(f"  {split:14s} {cls.__name__:27s} {label(setting)}  (training {100 * score:+.2f})")
            for task in held_out:
                test = ~train[task]
                reranked, initial = per_task[task][index][test], baseline[task][test]
                held_out_aps[(split, task, cls.__name__)] = reranked
                result = paired_mean_change(initial, reranked, random_state=SEED)
                rows.append((split, task, cls.__name__, label(setting), 100 * initial.mean(),
                             100 * reranked.mean(), interval_cell(result.change, result.low, result.high)))
    print("\nHeld-out MAP (x100) and its change over the initial list, 95% paired interval:\n")
    print("| split | held-out task | reranker | chosen setting | initial MAP | reranked MAP | change [95% CI] |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for split, task, name, setting, before, after, cell in rows:
        print(f"| {split} | {task} | {name} | {setting} | {before:.1f} | {after:.1f} | {cell} |")
    print(f"\nHead to head with {BASELINE.__name__} (each at its chosen setting): held-out MAP "
          "change (x100) of the reranker over the baseline, 95% paired interval "
          "(> 0: the reranker beats the baseline):\n")
    others = [cls.__name__ for cls in RERANKERS if cls is not BASELINE]
    print("| split | held-out task | " + " | ".join(others) + " |")
    print("| --- | --- |" + " --- |" * len(others))
    for split, task in dict.fromkeys((split, task) for split, task, _ in held_out_aps):
        base = held_out_aps[(split, task, BASELINE.__name__)]
        results = [paired_mean_change(base, held_out_aps[(split, task, name)], random_state=SEED)
                   for name in others]
        cells = [interval_cell(r.change, r.low, r.high) for r in results]
        print(f"| {split} | {task} | " + " | ".join(cells) + " |")
    print("\nEvery setting's mean AP change on each task's held-out queries (x100; not used to choose):")
    for cls in RERANKERS:
        for index, setting in enumerate(grid(cls)):
            cells = [f"{t} {100 * np.mean(aps[(cls.__name__, t)][index][~train[t]] - baseline[t][~train[t]]):+.1f}"
                     for t in TASKS]
            print(f"  {cls.__name__:27s} {label(setting):45s} " + "  ".join(cells))


if __name__ == "__main__":
    main()
