"""Recall@10 of NormalizedIndex's approximate indexes at their "auto" settings, beside raw FAISS.

For every shipped retrieval set, the gallery is padded with 200,000 items (``--padding
random``: random unit vectors, seed 0, near no query and no bank query; ``--padding
gaussian``: unit-length draws from a Gaussian with the real gallery's mean and
covariance, seed 0, which lie where the gallery lies). Normalisers at their defaults
(or as listed) are fitted on the set's in-domain querybank in embedding mode, and
``NormalizedIndex(normalizer, factory)`` is built at the package's defaults with
``fit(calibration_queries=bank)``: it chooses ``nprobe`` (IVF) or ``ef_search`` (HNSW) as
the smallest value of its doubling ladder whose recall@10 on (256 rows of) the bank
reaches ``target_recall``. Nothing is chosen on the test queries.

Then, at every value of the ladder, the script measures the recall@10 of the index on
the calibration rows and on a fixed random subset of the test queries (``--n-queries``,
seed 0), and the recall of the same FAISS factory over the raw gallery vectors at the
same value against the exact raw top 10. From these it derives, for each target in
``TARGETS``, the value the index would choose, its recall on the test queries and the
paired gap to the raw index at that value (95% percentile bootstrap intervals over
queries: ``paired_mean_change``, 10,000 resamples, seed 0), and checks the index's own
choice at the default target against the derived one. A leave-one-set-out table picks,
for each held-out set, the smallest target at which every other set meets the goal
(recall@10 at least 0.95 and within 0.02 of the raw index), and reports the held-out set
at that target.

Searches run one after another with FAISS's threads (two cores here); times are the
wall-clock of ``search`` over the test queries and of exact ``top_k`` on them. Run it
from the repository's root, one factory per run::

    .venv/bin/python scripts/index_recall_study.py --factory IVF1024,Flat --rst /tmp/ivf.rst
    .venv/bin/python scripts/index_recall_study.py --factory HNSW32 --normalizers csls3 \\
        --rst /tmp/hnsw.rst
"""

import argparse
import json
import time
import warnings

import numpy as np

from skqbnorm import CSLS, InvertedSoftmax, NearestNeighborNormalization
from skqbnorm.datasets import list_retrieval_sets, load_retrieval_set
from skqbnorm.index import (
    NormalizedIndex,
    calibration_sample,
    import_faiss,
    search_ladders,
    shared_per_row,
)
from skqbnorm.metrics import paired_mean_change

N_PADDING = 200_000
K = 10
TARGETS = (0.9, 0.95, 0.97, 0.98, 0.99, 1.0)
GOAL = {"recall": 0.95, "gap": -0.02}
NORMALIZERS = {
    "csls3": lambda: CSLS(k=3),
    "csls": CSLS,
    "nnn": NearestNeighborNormalization,
    "is": InvertedSoftmax,
}


def padded_gallery(gallery, padding, seed=0):
    """The gallery followed by ``N_PADDING`` unit vectors (float32): random directions, or
    draws from a Gaussian with the gallery's mean and covariance."""
    rng = np.random.default_rng(seed)
    gallery = gallery.astype(np.float32)
    if padding == "random":
        extra = rng.normal(size=(N_PADDING, gallery.shape[1])).astype(np.float32)
    else:  # random combinations of the centred rows: the gallery's covariance
        mean = gallery.mean(axis=0)
        weights = rng.normal(size=(N_PADDING, len(gallery))).astype(np.float32) / np.sqrt(len(gallery))
        extra = mean + weights @ (gallery - mean)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    return np.vstack([gallery, extra])


def query_sample(queries, n_queries, seed=0):
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(queries), size=min(n_queries, len(queries)), replace=False))
    return np.ascontiguousarray(queries[rows], dtype=np.float32)


def exact_raw_top_k(queries, gallery, k):
    sims = queries @ gallery.T
    top = np.argpartition(-sims, k, axis=1)[:, :k]
    return np.take_along_axis(top, np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1), axis=1)


def parameter_of(factory):
    """The NormalizedIndex parameter that "auto" chooses with ``factory``."""
    return "nprobe" if "IVF" in factory else "ef_search"


def per_query_recall(found, exact, n_items):
    return shared_per_row(found, exact, n_items) / K


def raw_ladder(queries, gallery, factory, ladder):
    """Per-query recall of the raw FAISS index at each value of the ladder."""
    faiss = import_faiss()
    index = faiss.index_factory(gallery.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    index.train(gallery)
    index.add(gallery)
    exact = exact_raw_top_k(queries, gallery, K)
    name = {"nprobe": "nprobe", "ef_search": "efSearch"}[parameter_of(factory)]
    recalls = {}
    for value in ladder:
        faiss.ParameterSpace().set_index_parameter(index, name, value)
        recalls[value] = per_query_recall(index.search(queries, K)[1], exact, len(gallery))
    return recalls


def normalised_ladder(index, calibration, queries, parameter, ladder):
    """Recall on the calibration rows (mean) and on the test queries (per query), and the
    test search's seconds, at each value of the ladder; the exact search's seconds and
    its top 10 of the test queries."""
    exact_calibration = index.normalizer_.top_k(queries=calibration, k=K)[0]
    start = time.perf_counter()
    exact = index.normalizer_.top_k(queries=queries, k=K)[0]
    top_k_seconds = time.perf_counter() - start
    rows = {}
    for value in ladder:
        index.set_params(**{parameter: value})
        found = index.search(calibration, K)[0]
        start = time.perf_counter()
        test_found = index.search(queries, K)[0]
        seconds = time.perf_counter() - start
        rows[value] = {"calibration": float(per_query_recall(found, exact_calibration, index.n_gallery_).mean()),
                       "test": per_query_recall(test_found, exact, index.n_gallery_), "seconds": seconds}
    index.set_params(**{parameter: "auto"})
    return rows, top_k_seconds, exact


def chosen_value(ladder_rows, target):
    """The ladder value that "auto" takes for ``target``: the first reaching it, else the top."""
    for value, row in ladder_rows.items():
        if row["calibration"] >= target:
            return value
    return value


def interval(values, reference=None):
    reference = np.zeros_like(values) if reference is None else reference
    result = paired_mean_change(reference, values, random_state=0)
    return {"mean": float(result.change), "low": float(result.interval[0]),
            "high": float(result.interval[1])}


def at_target(ladder_rows, raw, target):
    value = chosen_value(ladder_rows, target)
    test = ladder_rows[value]["test"]
    return {"value": value, "calibration": ladder_rows[value]["calibration"], "recall": interval(test),
            "raw": interval(raw[value]), "gap": interval(test, raw[value]),
            "search_s": ladder_rows[value]["seconds"]}


def normalised_row(name, data, gallery, queries, factory, raw, ladder):
    normalizer = NORMALIZERS[name]().fit(data.bank_embeddings, gallery=gallery)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        index = NormalizedIndex(normalizer, factory).fit(calibration_queries=data.bank_embeddings)
    build = time.perf_counter() - start
    parameter = parameter_of(factory)
    calibration = calibration_sample(data.bank_embeddings)
    ladder_rows, top_k_seconds, exact = normalised_ladder(index, calibration, queries, parameter, ladder)
    default = index.get_params()["target_recall"]
    own = getattr(index, parameter + "_")
    assert own == chosen_value(ladder_rows, default), (own, chosen_value(ladder_rows, default))
    return {"normalizer": repr(NORMALIZERS[name]()), "build_s": build, "top_k_s": top_k_seconds,
            "chosen": own, "calibration_recall": index.calibration_recall_,
            "warnings": [str(w.message)[:90] for w in caught],
            "padding_share": float((exact >= len(data.gallery_embeddings)).mean()),
            "targets": {str(t): at_target(ladder_rows, raw, t) for t in TARGETS},
            "ladder": {str(v): [row["calibration"], float(row["test"].mean()), float(raw[v].mean()), row["seconds"]]
                       for v, row in ladder_rows.items()}}


def study_set(name, factory, normalizers, n_queries, padding):
    data = load_retrieval_set(name)
    gallery = padded_gallery(data.gallery_embeddings, padding)
    queries = query_sample(data.query_embeddings, n_queries)
    ladder = ladder_of(factory)
    raw = raw_ladder(queries, gallery, factory, ladder)
    rows = [normalised_row(n, data, gallery, queries, factory, raw, ladder) for n in normalizers]
    result = {"set": name, "factory": factory, "padding": padding, "n_gallery": len(gallery),
              "n_queries": len(queries),
              "rows": rows}
    print(json.dumps(result), flush=True)
    return result


def ladder_of(factory):
    """The "auto" ladder for ``factory``, read from an untrained index of it."""
    faiss = import_faiss()
    return search_ladders(faiss.index_factory(8, factory, faiss.METRIC_INNER_PRODUCT))[parameter_of(factory)]


def meets_goal(entry):
    return entry["recall"]["mean"] >= GOAL["recall"] and entry["gap"]["mean"] >= GOAL["gap"]


def fmt(value):
    return f"{value['mean']:.3f} [{value['low']:.3f}, {value['high']:.3f}]"


def fmt_gap(value):
    return f"{value['mean']:+.3f} [{value['low']:+.3f}, {value['high']:+.3f}]"


def list_table(title, header, lines):
    return "\n".join([f".. list-table:: {title}", "   :header-rows: 1", ""]
                     + ["   * - " + "\n     - ".join(cells) for cells in [header] + lines])


def default_target():
    return NormalizedIndex(None).get_params()["target_recall"]


def default_table(results, factory):
    """At the default target: the setting chosen on the bank, and the test queries' recall."""
    parameter, target = parameter_of(factory), default_target()
    header = ["set", "normaliser", f"{parameter} chosen", "bank recall", "recall@10", "raw index",
              "gap", "padding share", "search s", "top_k s"]
    lines = []
    for result in results:
        for row in result["rows"]:
            entry = row["targets"][str(target)]
            lines.append([fold_name(result, results), row["normalizer"], str(entry["value"]),
                          f"{entry['calibration']:.3f}", fmt(entry["recall"]), fmt(entry["raw"]),
                          fmt_gap(entry["gap"]), f"{row['padding_share']:.2f}",
                          f"{entry['search_s']:.2f}", f"{row['top_k_s']:.2f}"])
    title = (f"{factory}, {paddings_of(results)} padding, at the defaults (target_recall={target}): "
             "recall@10 [95% interval] of the test queries")
    return list_table(title, header, lines)


def ladder_table(results, factory, first=64):
    """Recall@10 of the test queries / search seconds at the ladder's larger values:
    the raw index's, then each normaliser's."""
    parameter = parameter_of(factory)
    values = [value for value in results[0]["rows"][0]["ladder"] if int(value) >= first]
    header = ["set", "index over", "top_k s"] + [f"{parameter}={value}" for value in values]
    lines = []
    for result in results:
        raw, name = result["rows"][0]["ladder"], fold_name(result, results)
        lines.append([name, "raw vectors", "-"] + [f"{raw[v][2]:.3f}" for v in values])
        for row in result["rows"]:
            lines.append([name, row["normalizer"], f"{row['top_k_s']:.2f}"]
                         + [f"{row['ladder'][v][1]:.3f} / {row['ladder'][v][3]:.2f} s" for v in values])
    title = (f"{factory}, {paddings_of(results)} padding: recall@10 of the test queries "
             "(/ search seconds) along the ladder")
    return list_table(title, header, lines)


def paddings_of(results):
    return " and ".join(sorted({result["padding"] for result in results}))


def fold_name(result, results):
    """The set, with its padding where the results hold more than one."""
    paddings = {r["padding"] for r in results}
    return result["set"] if len(paddings) == 1 else f"{result['set']} ({result['padding']})"


def tables(results):
    """The default and ladder tables of each factory, and one leave-one-set-out table
    over them all: a held-out set leaves with every factory and padding of it."""
    factories = list(dict.fromkeys(result["factory"] for result in results))
    parts = []
    for factory in factories:
        mine = [result for result in results if result["factory"] == factory]
        parts += [default_table(mine, factory), ladder_table(mine, factory)]
    return "\n\n".join(parts + [loso_table(results)])


def loso_table(results):
    """Per held-out set: the smallest target at which every other set meets the goal."""
    lines = []
    for held_out in dict.fromkeys(result["set"] for result in results):
        others = [r for r in results if r["set"] != held_out]  # every factory and padding of it out
        target = next((t for t in TARGETS if all(meets_goal(row["targets"][str(t)])
                                                 for r in others for row in r["rows"])), None)
        if target is None:
            lines.append([held_out, "none", "-", "-"])
            continue
        entries = [(f"{r['factory']} {r['padding']} {row['normalizer']}", row["targets"][str(target)])
                   for r in results if r["set"] == held_out for row in r["rows"]]
        label, worst = min(entries, key=lambda entry: entry[1]["gap"]["mean"])
        lines.append([held_out, str(target), f"{label}: {fmt(worst['recall'])} / {fmt_gap(worst['gap'])}",
                      "yes" if all(meets_goal(entry) for _, entry in entries) else "no"])
    header = ["held-out set", "target chosen on the others", "largest gap: recall / gap", "meets goal"]
    return list_table("Leave one set out: the smallest target meeting the goal on the others", header, lines)


def acceptance(results):
    failures, target = [], default_target()
    for result in results:
        for row in result["rows"]:
            entry = row["targets"][str(target)]
            if not meets_goal(entry):
                failures.append(f"{result['set']} {row['normalizer']}: recall {entry['recall']['mean']:.3f}, "
                                f"gap {entry['gap']['mean']:+.3f} at {entry['value']}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factory", default="IVF1024,Flat")
    parser.add_argument("--normalizers", nargs="+", default=list(NORMALIZERS), choices=list(NORMALIZERS))
    parser.add_argument("--sets", nargs="+", default=None, help="default: every shipped set")
    parser.add_argument("--padding", choices=("random", "gaussian"), default="random")
    parser.add_argument("--n-queries", type=int, default=500)
    parser.add_argument("--json", default=None)
    parser.add_argument("--rst", default=None)
    parser.add_argument("--from-json", nargs="+", default=None,
                        help="tables from earlier runs' --json (one factory; each set and padding a fold)")
    args = parser.parse_args()
    if args.from_json:
        results = []
        for name in args.from_json:
            with open(name) as file:
                results += json.load(file)
    else:
        sets = args.sets or [entry["name"] for entry in list_retrieval_sets() if entry["ships"]]
        results = [study_set(name, args.factory, args.normalizers, args.n_queries, args.padding)
                   for name in sets]
    table = tables(results)
    print(table)
    failures = acceptance(results)
    verdict = "holds" if not failures else "fails on"
    print(f"acceptance (recall >= 0.95, gap >= -0.02) at target_recall={default_target()}: {verdict}")
    for failure in failures:
        print("  ", failure)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(results, file, indent=1)
    if args.rst:
        with open(args.rst, "w") as file:
            file.write(table + "\n")


if __name__ == "__main__":
    main()
