"""A querybank made of the queries served: against a fixed training bank, and under a drift.

On every retrieval set with at least 1,000 test queries that loads here
(``skqbnorm.datasets.load_retrieval_set``; a set not built, or whose file does not
verify, is skipped with the reason on stderr), the test queries are served in a fixed
random order (seed 0), in batches of 25, by ``skqbnorm.LiveQueryBank``: each batch is
answered (``top_k``, k=1) with the bank of the queries served before it, then folded
in. The services, for IS, DIS and CSLS at their class defaults:

- **fixed**: the normaliser fitted once on the set's in-domain bank (its training
  split), never changed;
- **live**: starts with no bank (raw answers until it holds ``k`` rows: 10 for
  CSLS, 1 for DIS) and folds in every query it serves;
- **live + training bank**: starts from the in-domain bank and folds in every query.

R@1 is scored on every query served so far (cumulative, not a window), and each live
service is compared with the fixed one on the same queries: the change in R@1 with
its paired 95% percentile bootstrap interval (``paired_mean_change``, 10,000
resamples, seed 0; 1,000 for the figure's band). The checkpoints are 100, 1,000 and
10,000 queries served, as far as the set's test queries go (1,000 to 2,000: no set
reaches 10,000), and the set's last query.

The drift: the first half of the stream is in-domain; in the second half every test
query is preceded by one row of the set's out-of-domain bank (its ``far_bank``:
texts of another kind by the same encoder, in a fixed random order, seed 1), served
and folded in like any query but not scored (it has no answer in the gallery). R@1
is scored on the second half's test queries, for the fixed service, the live one
(no bank at the start, unbounded) and a live one bounded to the last 500 rows
(``max_bank_rows=500``), each live one against the fixed one and against the same
live service on the same stream without the far rows.

Writes the figure to ``docs/_static/live_querybank.png`` and prints the guide's
tables (reStructuredText). About four minutes on 2 cores::

    python scripts/live_querybank_study.py
"""

import sys
import time
from pathlib import Path

import numpy as np
from sklearn.base import clone

from skqbnorm import CSLS, DynamicInvertedSoftmax, InvertedSoftmax, LiveQueryBank
from skqbnorm.datasets import load_retrieval_set
from skqbnorm.datasets._retrieval_sets import RETRIEVAL_SETS
from skqbnorm.metrics import paired_mean_change

METHODS = {"IS": InvertedSoftmax(), "DIS": DynamicInvertedSoftmax(), "CSLS": CSLS()}
BATCH = 25
CHECKPOINTS = (100, 1_000, 10_000)
MIN_QUERIES = 1_000
WINDOW = 500
FIGURE = Path(__file__).parents[1] / "docs" / "_static" / "live_querybank.png"


def load_sets():
    sets = {}
    for name in RETRIEVAL_SETS:
        try:
            data = load_retrieval_set(name)
        except (OSError, ValueError) as error:
            print(f"skipped {name}: {str(error).splitlines()[0]}", file=sys.stderr)
            continue
        if len(data["query_embeddings"]) < MIN_QUERIES:
            print(f"skipped {name}: {len(data['query_embeddings'])} test queries", file=sys.stderr)
            continue
        sets[name] = data
    return sets


def serve(service, stream):
    """The top-1 item of every row of ``stream``, served batch by batch."""
    found = [service.top_k(queries=stream[start:start + BATCH], k=1, return_scores=False)[:, 0]
             for start in range(0, len(stream), BATCH)]
    return np.concatenate(found)


def fixed_hits(normalizer, data, queries, gt):
    fitted = clone(normalizer).fit(data["bank_embeddings"], gallery=data["gallery_embeddings"])
    return fitted.top_k(queries=queries, k=1, return_scores=False)[:, 0] == gt


def live_hits(normalizer, data, stream, gt, start_bank=None, max_bank_rows=None):
    service = LiveQueryBank(normalizer, max_bank_rows=max_bank_rows)
    service.fit(start_bank, gallery=data["gallery_embeddings"])
    return serve(service, stream) == gt


def change(fixed, live, n_resamples=10_000):
    result = paired_mean_change(fixed.astype(float), live.astype(float),
                                n_resamples=n_resamples, random_state=0)
    low, high = result.interval
    return {"fixed": 100 * result.value_a, "live": 100 * result.value_b,
            "change": 100 * result.change, "low": 100 * low, "high": 100 * high}


def checkpoints(n_queries):
    points = [n for n in CHECKPOINTS if n < n_queries]
    return points + [n_queries]


def growth_study(name, data):
    order = np.random.default_rng(0).permutation(len(data["query_embeddings"]))
    queries, gt = data["query_embeddings"][order], data["query_gt"][order]
    rows, curves = [], {}
    for method, normalizer in METHODS.items():
        fixed = fixed_hits(normalizer, data, queries, gt)
        live = live_hits(normalizer, data, queries, gt)
        trained = live_hits(normalizer, data, queries, gt, start_bank=data["bank_embeddings"])
        for n in checkpoints(len(queries)):
            rows.append({"set": name, "method": method, "served": n,
                         "live": change(fixed[:n], live[:n]),
                         "trained": change(fixed[:n], trained[:n])})
        xs = np.arange(100, len(queries) + 1, 100)
        curves[method] = (xs, [change(fixed[:n], live[:n], n_resamples=1_000) for n in xs])
    return rows, curves


def drift_stream(data, rng):
    """The test queries (shuffled), the second half each preceded by a far-domain row."""
    order = rng.permutation(len(data["query_embeddings"]))
    queries, gt = data["query_embeddings"][order], data["query_gt"][order]
    half = len(queries) // 2
    far = data["far_bank_embeddings"][np.random.default_rng(1).permutation(
        len(data["far_bank_embeddings"]))]
    n_far = min(len(queries) - half, len(far))
    tail = queries[half:]
    mixed = np.empty((len(tail) + n_far, queries.shape[1]), dtype=queries.dtype)
    scored = np.ones(len(mixed), dtype=bool)
    scored[0:2 * n_far:2] = False
    mixed[scored] = tail
    mixed[~scored] = far[:n_far]
    stream = np.concatenate([queries[:half], mixed])
    is_test = np.concatenate([np.ones(half, dtype=bool), scored])
    return queries, gt, stream, is_test, half, n_far


def drift_study(name, data):
    queries, gt, stream, is_test, half, n_far = drift_stream(data, np.random.default_rng(0))
    stream_gt = np.full(len(stream), -1)
    stream_gt[is_test] = gt
    after = slice(half, None)
    rows = []
    for method, normalizer in METHODS.items():
        fixed = fixed_hits(normalizer, data, queries, gt)[after]
        for label, bound in (("live", None), (f"live, last {WINDOW}", WINDOW)):
            drifted = live_hits(normalizer, data, stream, stream_gt, max_bank_rows=bound)[is_test][after]
            clean = live_hits(normalizer, data, queries, gt, max_bank_rows=bound)[after]
            rows.append({"set": name, "method": method, "service": label, "n_far": n_far,
                         "scored": len(fixed), "vs_fixed": change(fixed, drifted),
                         "vs_no_drift": change(clean, drifted)})
    return rows


def interval(cell):
    return f"{cell['change']:+.2f} [{cell['low']:+.2f}, {cell['high']:+.2f}]"


def print_table(header, lines):
    print(".. list-table::\n   :header-rows: 1\n")
    for line in [header, *lines]:
        print("   * - " + "\n     - ".join(str(cell) for cell in line))
    print()


def plot(curves_by_set):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(METHODS), figsize=(4.2 * len(METHODS), 3.6), sharey=True)
    for ax, method in zip(axes, METHODS):
        for name, curves in curves_by_set.items():
            xs, cells = curves[method]
            mean = [cell["change"] for cell in cells]
            line = ax.plot(xs, mean, label=name, linewidth=1.4)[0]
            ax.fill_between(xs, [cell["low"] for cell in cells], [cell["high"] for cell in cells],
                            color=line.get_color(), alpha=0.15, linewidth=0)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_title(method)
        ax.set_xlabel("test queries served")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("R@1 change, points (all served so far)")
    axes[-1].legend(fontsize=7)
    fig.suptitle("R@1 of a bank of the served queries (from none) minus a fixed training bank, "
                 "with 95% paired intervals", fontsize=10)
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)
    plt.close(fig)


def main():
    started = time.perf_counter()
    growth, drift, curves = [], [], {}
    for name, data in load_sets().items():
        set_started = time.perf_counter()
        rows, curves[name] = growth_study(name, data)
        growth += rows
        drift += drift_study(name, data)
        print(f"{name}: {time.perf_counter() - set_started:.0f} s", file=sys.stderr)
    print_table(
        ["set", "method", "test queries served", "R@1 fixed", "live - fixed [95%]",
         "live + training bank - fixed [95%]"],
        [[row["set"], row["method"], f"{row['served']:,}", f"{row['live']['fixed']:.2f}",
          interval(row["live"]), interval(row["trained"])] for row in growth])
    print_table(
        ["set", "method", "service", "far rows served", "test queries scored", "R@1 fixed",
         "live - fixed [95%]", "live - same service without drift [95%]"],
        [[row["set"], row["method"], row["service"], f"{row['n_far']:,}", f"{row['scored']:,}",
          f"{row['vs_fixed']['fixed']:.2f}", interval(row["vs_fixed"]),
          interval(row["vs_no_drift"])] for row in drift])
    plot(curves)
    print(f"total {time.perf_counter() - started:.0f} s; figure {FIGURE}", file=sys.stderr)


if __name__ == "__main__":
    main()
