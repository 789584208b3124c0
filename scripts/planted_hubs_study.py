"""Planted hubs on the shipped retrieval sets: the traffic they capture, raw and normalised.

For every shipped set, the bank's rows are split once (seed 0): the attacker's pool
(its first 1,000 rows where the bank holds at least 2,000, else its first 100) and
the defender's bank, the rest; the attacker's sample of 100 is the pool's first 100
rows. The test queries are the set's queries, which no attack reads. Each attack
(centroid, optimised, adaptive) plants 1, 10 and 100 items; the adaptive one is
crafted against each column's normaliser, with the attacker's sample as its bank
(raw similarities have no normaliser: "-"). Every cell gives hub capture@1 (percent
of the test queries whose top-1 is planted) and the change of the real items' R@1
(attacked minus clean, same method), each with its 95% percentile bootstrap interval.

The detector (``hub_outliers`` over the defender's bank, k=10, threshold 3.5) is
scored on the planted items (precision, recall) and on the clean gallery (the share
of real items flagged).

Run (about 5 minutes on 2 cores)::

    .venv/bin/python scripts/planted_hubs_study.py            # markdown
    .venv/bin/python scripts/planted_hubs_study.py --rst      # the guide's tables
"""

import argparse
import time

import numpy as np

from skqbnorm.attacks import adaptive_hubs, centroid_hubs, optimized_hubs, plant
from skqbnorm.datasets import load_retrieval_set
from skqbnorm.index import NormalizedIndex
from skqbnorm.metrics import hub_capture, hub_outliers, planted_recall_change
from skqbnorm.normalizers import (
    CSLS,
    DynamicInvertedSoftmax,
    InvertedSoftmax,
    NearestNeighborNormalization,
    QueryBankGate,
)

SETS = ("wordnet_revdict", "emoji_keyword_minilm", "gettext_en_fr_tfidf",
        "gettext_pt_ptbr_tfidf", "gettext_en_gb_minilm")
N_HUBS = (1, 10, 100)
NORMALIZERS = {"IS": InvertedSoftmax, "DIS": DynamicInvertedSoftmax, "CSLS": CSLS,
               "NNN": NearestNeighborNormalization}
METHODS = ("raw", *NORMALIZERS, *(f"gate({name})" for name in NORMALIZERS),
           "index Flat(IS)", "index IVF(IS)")
ATTACKS = ("centroid", "optimised", "adaptive")
N_RESAMPLES = 1000
DETECTOR_K, DETECTOR_THRESHOLD = 10, 3.5


def unit(X):
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def split(name):
    data = load_retrieval_set(name)
    bank = unit(data["bank_embeddings"])
    order = np.random.default_rng(0).permutation(len(bank))
    pool = 1000 if len(bank) >= 2000 else 100
    return {"gallery": unit(data["gallery_embeddings"]), "queries": unit(data["query_embeddings"]),
            "gt": data["query_gt"], "pool": bank[order[:pool]], "bank": bank[order[pool:]]}


def attack_hubs(attack, sample, gallery, n_hubs):
    """``{method: hubs}``: one set of hubs for every column (the adaptive one per normaliser)."""
    if attack == "centroid":
        hubs = centroid_hubs(sample, n_hubs, random_state=0)
    elif attack == "optimised":
        hubs = optimized_hubs(sample, gallery, n_hubs, random_state=0)
    else:
        crafted = {name: adaptive_hubs(sample, gallery, cls(), sample, n_hubs, random_state=0)
                   for name, cls in NORMALIZERS.items()}
        hubs_of = {"raw": None, **crafted, **{f"gate({n})": h for n, h in crafted.items()},
                   "index Flat(IS)": crafted["IS"], "index IVF(IS)": crafted["IS"]}
        return hubs_of
    return dict.fromkeys(METHODS, hubs)


def ivf_factory(n_gallery):
    return f"IVF{max(4, round(np.sqrt(n_gallery)))},Flat"


def method_scores(method, gallery, queries, bank):
    """Every test query's scores over ``gallery`` under ``method`` (an index: one-hot top-1)."""
    sims = queries @ gallery.T
    if method == "raw":
        return sims
    if method.startswith("index"):
        factory = "Flat" if "Flat" in method else ivf_factory(len(gallery))
        index = NormalizedIndex(InvertedSoftmax(), factory, nprobe=4).fit(bank, gallery=gallery)
        top1 = index.search(queries, k=1)[0][:, 0]
        scores = np.zeros_like(sims)
        scores[np.arange(len(top1)), top1] = 1.0
        return scores
    bank_sims = bank @ gallery.T
    if method.startswith("gate"):
        inner = NORMALIZERS[method[5:-1]]()
        return QueryBankGate(inner).fit(bank_sims, queries=sims).transform(sims)
    return NORMALIZERS[method]().fit(bank_sims).transform(sims)


def cell(clean, attacked, planted, gt):
    capture = hub_capture(attacked, planted, n_resamples=N_RESAMPLES, random_state=0)
    change = planted_recall_change(clean, attacked, gt, n_resamples=N_RESAMPLES, random_state=0)
    return {"capture": 100 * capture.capture, "capture_ci": tuple(100 * v for v in capture.interval),
            "dr1": change.change, "dr1_ci": change.interval}


def detection(bank, gallery, hubs):
    attacked, planted = plant(gallery, hubs)
    flagged = hub_outliers(bank @ attacked.T, k=DETECTOR_K, threshold=DETECTOR_THRESHOLD).flagged
    hits = np.isin(flagged, planted).sum()
    precision = hits / len(flagged) if len(flagged) else float("nan")
    return precision, hits / len(planted)


def run_set(name):
    data = split(name)
    gallery, queries, bank, gt = data["gallery"], data["queries"], data["bank"], data["gt"]
    clean = {method: method_scores(method, gallery, queries, bank) for method in METHODS}
    alarms = len(hub_outliers(bank @ gallery.T, k=DETECTOR_K,
                              threshold=DETECTOR_THRESHOLD).flagged) / len(gallery)
    cells, detector = {}, []
    for n_sample in sorted({100, len(data["pool"])}):
        sample = data["pool"][:n_sample]
        for n_hubs in N_HUBS:
            for attack in ATTACKS:
                hubs_of = attack_hubs(attack, sample, gallery, n_hubs)
                for method in METHODS:
                    if hubs_of[method] is None:
                        continue
                    attacked, planted = plant(gallery, hubs_of[method])
                    scores = method_scores(method, attacked, queries, bank)
                    cells[n_sample, n_hubs, attack, method] = cell(clean[method], scores, planted, gt)
                hubs = hubs_of["IS"]
                detector.append((n_sample, n_hubs, attack, *detection(bank, gallery, hubs)))
    return {"cells": cells, "detector": detector, "alarms": alarms,
            "sizes": (len(gallery), len(queries), len(bank), len(data["pool"]))}


def interval(value, bounds, signed=False):
    fmt = "{:+.1f}" if signed else "{:.1f}"
    low, high = (fmt.format(b) for b in bounds)
    return f"{fmt.format(value)} [{low}, {high}]"


def tables(name, result):
    """``[(title, header, rows)]``: capture, R@1 change, detector."""
    cells = result["cells"]
    keys = sorted({key[:3] for key in cells}, key=lambda k: (k[0], k[1], ATTACKS.index(k[2])))
    header = ["sample", "hubs", "attack", *METHODS]
    out = []
    for metric, title in (("capture", "hub capture@1, % of test queries"),
                          ("dr1", "change of the real items' R@1, points")):
        rows = [[str(s), str(h), a, *(interval(cells[s, h, a, m][metric],
                                               cells[s, h, a, m][metric + "_ci"],
                                               signed=metric == "dr1")
                                      if (s, h, a, m) in cells else "-" for m in METHODS)]
                for s, h, a in keys]
        out.append((f"{name}: {title}", header, rows))
    rows = [[str(s), str(h), a, "-" if np.isnan(p) else f"{p:.2f}", f"{r:.2f}"]
            for s, h, a, p, r in result["detector"]]
    title = (f"{name}: detector on the planted items (adaptive: crafted against IS); "
             f"false alarms on the clean gallery {100 * result['alarms']:.1f}%")
    out.append((title, ["sample", "hubs", "attack", "precision", "recall"], rows))
    return out


def markdown(title, header, rows):
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def rst(title, header, rows):
    lines = [f".. list-table:: {title}", "   :header-rows: 1", ""]
    for row in [header, *rows]:
        lines.append("   * - " + row[0])
        lines += [f"     - {value}" for value in row[1:]]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rst", action="store_true", help="print reStructuredText tables")
    parser.add_argument("--sets", nargs="+", default=SETS, choices=SETS)
    args = parser.parse_args()
    render = rst if args.rst else markdown
    for name in args.sets:
        start = time.perf_counter()
        result = run_set(name)
        n_gallery, n_queries, n_bank, n_pool = result["sizes"]
        if args.rst:
            print(f"{name}\n{'~' * len(name)}\n")
        print(f"{name}: gallery {n_gallery}, test queries {n_queries}, defender's bank "
              f"{n_bank}, attacker's pool {n_pool} ({time.perf_counter() - start:.0f} s)\n")
        for table in tables(name, result):
            print(render(*table))


if __name__ == "__main__":
    main()
