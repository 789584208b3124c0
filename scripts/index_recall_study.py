"""Recall@10 of NormalizedIndex's approximate indexes against exact top_k, beside raw FAISS.

For every shipped retrieval set, the gallery is padded with 200,000 random unit vectors
(seed 0), so that it holds at least 200,000 items, a scale at which approximate indexes
serve. Normalisers at their defaults (or as listed) are fitted on the set's
in-domain querybank in embedding mode, and ``NormalizedIndex(normalizer, factory)``
is built at the package's defaults (``nprobe``, ``ef_search``, ``train_size``). Its
recall@10 is the share of the exact top 10 (``normalizer.top_k(queries=..., k=10)``)
that ``search`` returns, per query, on a fixed random subset of the test queries
(``--n-queries``, seed 0; nothing is chosen on them). Beside it, the same FAISS factory
at the same settings over the raw gallery vectors, against the exact raw top 10: the
recall the index reaches on raw search. Each figure has a 95% percentile bootstrap
interval over queries (``paired_mean_change``, 10,000 resamples, seed 0); the gap
(normalised minus raw) is paired query by query.

Two diagnostics explain a gap: the share of the exact normalised top 10 that are
padding items (random vectors have low hubness, so a normaliser lifts them, though
their raw similarities to a query are noise that no partition or graph puts near it),
and the index's recall on the exact top 10's real-gallery items alone.
``--bias-scale S`` adds, for each normaliser, the recall of the same factory over
augmented vectors whose bias coordinates are divided by ``S`` (queries' 1 multiplied
by ``S``: the same inner products), which for a large ``S`` trains the IVF coarse
quantiser and builds the HNSW graph on raw similarity alone.

Searches run one after another with FAISS's threads (two cores here); times are the
wall-clock of ``search`` and of exact ``top_k`` on the same queries. Run it from the
repository's root; one factory per run keeps each within about ten minutes on two
cores (IVF1024 with the four normalisers: about 10; HNSW32 with CSLS(k=3) alone:
about 8)::

    .venv/bin/python scripts/index_recall_study.py --factory IVF1024,Flat --rst /tmp/ivf.rst
    .venv/bin/python scripts/index_recall_study.py --factory HNSW32 --normalizers csls3 \\
        --rst /tmp/hnsw.rst
"""

import argparse
import json
import time

import numpy as np

from skqbnorm import CSLS, InvertedSoftmax, NearestNeighborNormalization
from skqbnorm.datasets import list_retrieval_sets, load_retrieval_set
from skqbnorm.index import NormalizedIndex, import_faiss, shared_per_row
from skqbnorm.metrics import paired_mean_change
from skqbnorm.normalizers import index_serving

N_PADDING = 200_000
K = 10
#: Search settings swept after the defaults, without rebuilding: what recall costs.
SWEEPS = {"nprobe": (256, 512, 1024), "ef_search": (1024, 2048)}
NORMALIZERS = {
    "csls3": lambda: CSLS(k=3),
    "csls": CSLS,
    "nnn": NearestNeighborNormalization,
    "is": InvertedSoftmax,
}


def padded_gallery(gallery, seed=0):
    """The gallery followed by ``N_PADDING`` random unit vectors (float32)."""
    rng = np.random.default_rng(seed)
    padding = rng.normal(size=(N_PADDING, gallery.shape[1])).astype(np.float32)
    padding /= np.linalg.norm(padding, axis=1, keepdims=True)
    return np.vstack([gallery.astype(np.float32), padding])


def query_sample(queries, n_queries, seed=0):
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(queries), size=min(n_queries, len(queries)), replace=False))
    return np.ascontiguousarray(queries[rows], dtype=np.float32)


def faiss_index(vectors, factory):
    """A FAISS inner-product index over ``vectors``, at NormalizedIndex's default settings."""
    faiss = import_faiss()
    defaults = NormalizedIndex(None).get_params()
    index = faiss.index_factory(vectors.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    index.train(vectors)
    index.add(vectors)
    space = faiss.ParameterSpace()
    ivf = faiss.try_extract_index_ivf(index)
    nprobe = defaults["nprobe"] if ivf is None else min(defaults["nprobe"], ivf.nlist)
    for name, value in (("nprobe", nprobe), ("efSearch", defaults["ef_search"])):
        try:
            space.set_index_parameter(index, name, value)
        except RuntimeError:
            pass
    return index


def exact_raw_top_k(queries, gallery, k):
    sims = queries @ gallery.T
    top = np.argpartition(-sims, k, axis=1)[:, :k]
    return np.take_along_axis(top, np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1), axis=1)


def sweep_parameter(factory):
    """The NormalizedIndex parameter that trades recall for time with ``factory``."""
    return "nprobe" if "IVF" in factory else "ef_search" if "HNSW" in factory else None


def raw_recall(queries, gallery, factory):
    """Per-query recall of the raw index at the defaults, and its sweep (recall, seconds)."""
    index = faiss_index(gallery, factory)
    exact = exact_raw_top_k(queries, gallery, K)
    start = time.perf_counter()
    found = index.search(queries, K)[1]
    seconds = time.perf_counter() - start
    sweep = {}
    parameter = sweep_parameter(factory)
    for value in SWEEPS.get(parameter, ()):
        faiss_name = {"nprobe": "nprobe", "ef_search": "efSearch"}[parameter]
        import_faiss().ParameterSpace().set_index_parameter(index, faiss_name, value)
        start = time.perf_counter()
        swept = index.search(queries, K)[1]
        sweep[value] = [float(np.mean(shared_per_row(swept, exact, len(gallery)) / K)),
                        time.perf_counter() - start]
    return shared_per_row(found, exact, len(gallery)) / K, seconds, sweep


def index_sweep(index, queries, exact, factory):
    """Mean recall and search seconds of ``index`` at each swept setting."""
    parameter, sweep = sweep_parameter(factory), {}
    for value in SWEEPS.get(parameter, ()):
        index.set_params(**{parameter: value})
        start = time.perf_counter()
        found = index.search(queries, K)[0]
        sweep[value] = [float(np.mean(shared_per_row(found, exact, index.n_gallery_) / K)),
                        time.perf_counter() - start]
    return sweep


def scaled_bias_recall(normalizer, queries, factory, scale, exact):
    """Recall of ``factory`` over ``[g, -bias_g / scale]`` searched with ``[q, scale]``."""
    vectors = index_serving(normalizer).augmented_gallery(dtype=np.float32)
    vectors[:, -1] /= scale
    index = faiss_index(vectors, factory)
    augmented = np.hstack([queries, np.full((len(queries), 1), scale, dtype=np.float32)])
    found = index.search(augmented, K)[1]
    return shared_per_row(found, exact, len(vectors)) / K


def interval(values, reference=None):
    reference = np.zeros_like(values) if reference is None else reference
    result = paired_mean_change(reference, values, random_state=0)
    return {"mean": float(result.change), "low": float(result.interval[0]),
            "high": float(result.interval[1])}


def normalised_row(name, data, gallery, queries, factory, raw, bias_scale):
    normalizer = NORMALIZERS[name]().fit(data.bank_embeddings, gallery=gallery)
    start = time.perf_counter()
    index = NormalizedIndex(normalizer, factory).fit()
    build = time.perf_counter() - start
    start = time.perf_counter()
    found = index.search(queries, K)[0]
    search = time.perf_counter() - start
    start = time.perf_counter()
    exact = normalizer.top_k(queries=queries, k=K)[0]
    exact_seconds = time.perf_counter() - start
    recall = shared_per_row(found, exact, len(gallery)) / K
    real = exact < len(data.gallery_embeddings)
    real_exact = np.where(real, exact, -1)
    real_found = shared_per_row(found, real_exact, len(gallery))
    row = {"normalizer": repr(NORMALIZERS[name]()), "recall": interval(recall),
           "gap": interval(recall, raw), "padding_share": float(1 - real.mean()),
           "real_recall": float(real_found.sum() / max(real.sum(), 1)),
           "build_s": build, "search_s": search, "top_k_s": exact_seconds,
           "sweep": index_sweep(index, queries, exact, factory)}
    if bias_scale:
        row["scaled_recall"] = interval(scaled_bias_recall(normalizer, queries, factory, bias_scale, exact))
    return row


def study_set(name, factory, normalizers, n_queries, bias_scale):
    data = load_retrieval_set(name)
    gallery = padded_gallery(data.gallery_embeddings)
    queries = query_sample(data.query_embeddings, n_queries)
    raw, raw_seconds, raw_sweep = raw_recall(queries, gallery, factory)
    rows = [normalised_row(n, data, gallery, queries, factory, raw, bias_scale) for n in normalizers]
    result = {"set": name, "n_gallery": len(gallery), "n_queries": len(queries),
              "raw_recall": interval(raw), "raw_search_s": raw_seconds, "raw_sweep": raw_sweep,
              "rows": rows}
    print(json.dumps(result), flush=True)
    return result


def fmt(value):
    return f"{value['mean']:.3f} [{value['low']:.3f}, {value['high']:.3f}]"


def fmt_gap(value):
    return f"{value['mean']:+.3f} [{value['low']:+.3f}, {value['high']:+.3f}]"


def rst_table(results, factory):
    header = ["set", "normaliser", "recall@10", "raw index", "gap", "padding share",
              "real-item recall", "search s", "top_k s"]
    lines = []
    for result in results:
        for row in result["rows"]:
            lines.append([result["set"], row["normalizer"], fmt(row["recall"]),
                          fmt(result["raw_recall"]), fmt_gap(row["gap"]),
                          f"{row['padding_share']:.2f}", f"{row['real_recall']:.3f}",
                          f"{row['search_s']:.2f}", f"{row['top_k_s']:.2f}"])
            if "scaled_recall" in row:
                lines[-1].append(fmt(row["scaled_recall"]))
    if any("scaled_recall" in row for result in results for row in result["rows"]):
        header.append("bias scaled")
    title = f"{factory} at the defaults: recall@10 [95% interval] over a normalised and a raw gallery"
    return "\n".join([f".. list-table:: {title}", "   :header-rows: 1", ""]
                     + ["   * - " + "\n     - ".join(cells) for cells in [header] + lines])


def sweep_table(results, factory):
    """Recall@10 / search seconds at each swept setting, raw index and normalised."""
    parameter = sweep_parameter(factory)
    values = SWEEPS.get(parameter, ())
    header = ["set", "index over", "top_k s"] + [f"{parameter}={value}" for value in values]
    lines = []
    for result in results:
        lines.append([result["set"], "raw vectors", "-"]
                     + [f"{r:.3f} / {t:.2f} s" for r, t in result["raw_sweep"].values()])
        for row in result["rows"]:
            lines.append([result["set"], row["normalizer"], f"{row['top_k_s']:.2f}"]
                         + [f"{r:.3f} / {t:.2f} s" for r, t in row["sweep"].values()])
    title = f"{factory}: recall@10 / search seconds for the same queries at larger settings"
    return "\n".join([f".. list-table:: {title}", "   :header-rows: 1", ""]
                     + ["   * - " + "\n     - ".join(cells) for cells in [header] + lines])


def acceptance(results):
    """Recall@10 at least 0.95 and within 0.02 of the raw index, per (set, normaliser)."""
    failures = []
    for result in results:
        for row in result["rows"]:
            recall, gap = row["recall"]["mean"], row["gap"]["mean"]
            if recall < 0.95 or gap < -0.02:
                failures.append(f"{result['set']} {row['normalizer']}: recall {recall:.3f}, gap {gap:+.3f}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factory", default="IVF1024,Flat")
    parser.add_argument("--normalizers", nargs="+", default=list(NORMALIZERS), choices=list(NORMALIZERS))
    parser.add_argument("--sets", nargs="+", default=None, help="default: every shipped set")
    parser.add_argument("--n-queries", type=int, default=500)
    parser.add_argument("--bias-scale", type=float, default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument("--rst", default=None)
    args = parser.parse_args()
    sets = args.sets or [entry["name"] for entry in list_retrieval_sets() if entry["ships"]]
    results = [study_set(name, args.factory, args.normalizers, args.n_queries, args.bias_scale)
               for name in sets]
    table = rst_table(results, args.factory) + "\n\n" + sweep_table(results, args.factory)
    print(table)
    failures = acceptance(results)
    print("acceptance (recall >= 0.95, gap >= -0.02):", "holds" if not failures else "fails on")
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
