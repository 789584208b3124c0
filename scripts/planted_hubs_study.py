"""Planted hubs on the retrieval sets: the traffic they capture, raw and normalised.

The sets are the five that ship with skqbnorm and three that
``scripts/build_retrieval_sets.py`` builds into the data folder
(``SKQBNORM_DATA``, else ``~/skqbnorm_data``; a set not built there is skipped with
the command that builds it). For every set, the bank's rows are shuffled once (seed
0) and split: the attacker's pool (the first 1,000 rows where the bank holds at
least 2,000, else the first 100) and the defender's bank, the rest. The attacker's
samples are the pool's first 100 rows and, where the pool holds 1,000, the whole
pool. Where it does not (emoji_keyword_minilm and gettext_en_gb_minilm, whose banks
hold 759 and 572 queries), the sample of 1,000 is drawn from the set's out-of-domain
bank instead (its first 1,000 rows after a shuffle with seed 0): texts of another
kind in the same embedding space, disjoint from the test queries and from the
defender's bank. That is a weaker attacker, one who knows the encoder but holds no
query of the service's kind; its rows are labelled "1000 off-domain". The test
queries are the set's queries, which no attack reads. Each attack (centroid,
optimised, adaptive) plants 1, 10 and 100 items.

The methods are raw similarities and every normaliser of the catalogue
(``skqbnorm.catalogue.METHODS``) at its class default, fitted on the defender's bank
over the attacked gallery (the dual-bank ones also on the set's gallery bank; the
transductive dual softmax on the test queries themselves), each alone and behind a
``QueryBankGate``, and the Inverted Softmax served by a ``NormalizedIndex`` (Flat,
IVF). A catalogue entry that cannot run here is skipped with a printed reason. The
adaptive attack is crafted against each column's normaliser where it models it (IS,
DIS, CSLS, NNN and their gates, the index's IS), with the attacker's sample as its
bank; elsewhere its cell is "-". Every cell gives hub capture@1 (percent of the test
queries whose top-1 is planted) and the change of the real items' R@1 (attacked
minus clean, same method), each with its 95% percentile bootstrap interval.

The detector (``hub_outliers`` over the defender's bank, k=10, threshold 3.5) is
scored on the planted items (precision, recall) and on the clean gallery (the share
of real items flagged).

Build the three sets first (TF-IDF needs scikit-learn only; the MiniLM sets need the
encoder, or its encodings cached under ``/tmp/skqbnorm_encodings``), then run it (16
minutes of CPU time, 21 of wall time on 2 cores shared with other jobs; the skipped
entries and each set's time go to stderr). ``--fast`` keeps, in the runs from samples
of 1,000, only raw similarities, IS, DIS, CSLS and NNN (alone and gated) and the
index (a shorter run; the guide's tables come from the full one)::

    python scripts/build_retrieval_sets.py --only freedict_en_fr_tfidf \\
        --only wordnet_example_minilm --only gettext_en_fr_minilm
    .venv/bin/python scripts/planted_hubs_study.py            # markdown
    .venv/bin/python scripts/planted_hubs_study.py --rst      # the guide's tables
"""

import argparse
import csv
import io
import sys
import time

import numpy as np

from skqbnorm.attacks import adaptive_hubs, centroid_hubs, optimized_hubs, plant
from skqbnorm.catalogue import METHODS as CATALOGUE
from skqbnorm.catalogue import make_normalizer
from skqbnorm.datasets import load_retrieval_set
from skqbnorm.index import NormalizedIndex
from skqbnorm.metrics import hub_capture, hub_outliers, planted_recall_change
from skqbnorm.normalizers import InvertedSoftmax, QueryBankGate

SHIPPED_SETS = ("wordnet_revdict", "emoji_keyword_minilm", "gettext_en_fr_tfidf",
                "gettext_pt_ptbr_tfidf", "gettext_en_gb_minilm")
BUILT_SETS = ("freedict_en_fr_tfidf", "wordnet_example_minilm", "gettext_en_fr_minilm")
SETS = (*SHIPPED_SETS, *BUILT_SETS)
SAMPLE_SIZES = (100, 1000)
OFF_DOMAIN = "1000 off-domain"
N_HUBS = (1, 10, 100)
ATTACKS = ("centroid", "optimised", "adaptive")
N_RESAMPLES = 1000
DETECTOR_K, DETECTOR_THRESHOLD = 10, 3.5
INDEX_COLUMNS = ("index Flat(IS)", "index IVF(IS)")


def catalogue_columns():
    """``({column: (catalogue name, gated)}, [skipped reasons])``, from the catalogue."""
    columns, skipped = {"raw": (None, False)}, []
    for name, method in CATALOGUE.items():
        if method.normalizer is None:
            continue
        if method.gated:
            skipped.append(f"{name}: the gate(...) columns put every normaliser behind a gate")
            continue
        columns[method.label] = (name, False)
    for name, method in CATALOGUE.items():
        if method.normalizer is None or method.gated:
            continue
        if method.data == "test queries":
            skipped.append(f"gate({method.label}): fitted on the test queries themselves, "
                           "it has no querybank for the gate to check")
            continue
        columns[f"gate({method.label})"] = (name, True)
    return columns, skipped


COLUMNS, SKIPPED = catalogue_columns()
METHODS = (*COLUMNS, *INDEX_COLUMNS)
FAST_CORE = ("raw", "IS", "DIS", "CSLS", "NNN")
FAST_METHODS = tuple(m for m in METHODS if m in INDEX_COLUMNS
                     or m.removeprefix("gate(").removesuffix(")") in FAST_CORE)


def unit(X):
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def load(name):
    """The set's arrays and a note on their checksum (a built set whose float16
    embeddings differ from the catalogue's by the encoder's rounding still loads)."""
    try:
        return load_retrieval_set(name), "checksum verified"
    except ValueError as error:
        if "SHA-256" not in str(error):
            raise
        return load_retrieval_set(name, verify=False), "checksum differs from the catalogue's"


def shuffled(X):
    return X[np.random.default_rng(0).permutation(len(X))]


def attacker_samples(pool, far_bank):
    """``{label: sample}``: the pool's first 100 and 1,000 rows, the latter from the
    out-of-domain bank where the pool holds fewer."""
    samples = {str(n): pool[:n] for n in SAMPLE_SIZES if n <= len(pool)}
    if len(pool) < max(SAMPLE_SIZES) <= len(far_bank):
        samples[OFF_DOMAIN] = shuffled(far_bank)[:max(SAMPLE_SIZES)]
    return samples


def split(name):
    data, checksum = load(name)
    bank = shuffled(unit(data["bank_embeddings"]))
    n_pool = max(SAMPLE_SIZES) if len(bank) >= 2 * max(SAMPLE_SIZES) else min(SAMPLE_SIZES)
    gallery, queries = unit(data["gallery_embeddings"]), unit(data["query_embeddings"])
    raw_r1 = 100 * np.mean((queries @ gallery.T).argmax(axis=1) == data["query_gt"])
    return {"gallery": gallery, "queries": queries, "gt": data["query_gt"],
            "samples": attacker_samples(bank[:n_pool], unit(data["far_bank_embeddings"])),
            "bank": bank[n_pool:], "gallery_bank": unit(data["gallery_bank_embeddings"]),
            "note": f"raw R@1 {raw_r1:.2f}%, {checksum}"}


def adaptive_targets():
    """``{column: catalogue name}`` of the normalisers the adaptive attack models (it
    refuses the others, naming them), probed on random unit rows."""
    probe = unit(np.random.default_rng(0).normal(size=(200, 4)))
    targets = {}
    for column, (name, gated) in COLUMNS.items():
        if name is None or gated:
            continue
        try:
            adaptive_hubs(probe, probe, make_normalizer(name), probe, 1, n_iter=0, random_state=0)
        except ValueError as refusal:
            if "not modelled" not in str(refusal):
                raise
            continue
        targets[column] = name
    return targets


ADAPTIVE = adaptive_targets()


def attack_hubs(attack, sample, gallery, n_hubs):
    """``{method: hubs}``: one set of hubs for every column (the adaptive one per normaliser,
    None where the adaptive attack does not model the column's normaliser)."""
    if attack == "centroid":
        return dict.fromkeys(METHODS, centroid_hubs(sample, n_hubs, random_state=0))
    if attack == "optimised":
        return dict.fromkeys(METHODS, optimized_hubs(sample, gallery, n_hubs, random_state=0))
    crafted = {column: adaptive_hubs(sample, gallery, make_normalizer(name), sample, n_hubs,
                                     random_state=0)
               for column, name in ADAPTIVE.items()}
    hubs_of = dict.fromkeys(METHODS)
    hubs_of.update(crafted)
    hubs_of.update({f"gate({column})": hubs for column, hubs in crafted.items()})
    hubs_of.update(dict.fromkeys(INDEX_COLUMNS, crafted["IS"]))
    return hubs_of


def ivf_factory(n_gallery):
    return f"IVF{max(4, round(np.sqrt(n_gallery)))},Flat"


def index_scores(method, gallery, queries, bank):
    """A one-hot top-1 of every test query through a NormalizedIndex of the Inverted Softmax."""
    factory = "Flat" if "Flat" in method else ivf_factory(len(gallery))
    index = NormalizedIndex(InvertedSoftmax(), factory, nprobe=4).fit(bank, gallery=gallery)
    top1 = index.search(queries, k=1)[0][:, 0]
    scores = np.zeros((len(queries), len(gallery)))
    scores[np.arange(len(top1)), top1] = 1.0
    return scores


def gallery_bank_inputs(name, gallery, bank, gallery_bank):
    """The gallery-bank keyword of a dual-bank normaliser's fit (empty for the others)."""
    needs = make_normalizer(name).capabilities.gallery_bank
    if needs == "gallery_bank":
        return {"gallery_bank": gallery_bank @ gallery.T}
    if needs == "querybank_to_gallery_bank":
        return {"querybank_to_gallery_bank": bank @ gallery_bank.T}
    return {}


def method_scores(method, gallery, queries, bank, gallery_bank):
    """Every test query's scores over ``gallery`` under ``method`` (an index: one-hot top-1)."""
    sims = queries @ gallery.T
    if method in INDEX_COLUMNS:
        return index_scores(method, gallery, queries, bank)
    name, gated = COLUMNS[method]
    if name is None:
        return sims
    normalizer = make_normalizer(name)
    if CATALOGUE[name].data == "test queries":
        return normalizer.fit(sims).transform(sims)
    extra = gallery_bank_inputs(name, gallery, bank, gallery_bank)
    if gated:
        return QueryBankGate(normalizer).fit(bank @ gallery.T, queries=sims, **extra).transform(sims)
    return normalizer.fit(bank @ gallery.T, **extra).transform(sims)


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


def clean_scores(name, gallery, queries, bank, gallery_bank):
    """``{method: scores}`` on the clean gallery, leaving out (with the reason, on stderr)
    a method that cannot run on this set's inputs."""
    clean = {}
    for method in METHODS:
        try:
            clean[method] = method_scores(method, gallery, queries, bank, gallery_bank)
        except (TypeError, ValueError) as error:
            print(f"{name}: skipped {method}: {error}", file=sys.stderr)
    return clean


def run_set(name, data, fast=False):
    """Every cell and the detector's scores on one set; ``fast`` keeps only
    ``FAST_METHODS`` in the runs from samples of more than 100 queries."""
    gallery, queries, bank, gt = data["gallery"], data["queries"], data["bank"], data["gt"]
    gallery_bank = data["gallery_bank"]
    clean = clean_scores(name, gallery, queries, bank, gallery_bank)
    alarms = len(hub_outliers(bank @ gallery.T, k=DETECTOR_K,
                              threshold=DETECTOR_THRESHOLD).flagged) / len(gallery)
    cells, detector = {}, []
    for n_sample, sample in data["samples"].items():
        for n_hubs in N_HUBS:
            for attack in ATTACKS:
                hubs_of = attack_hubs(attack, sample, gallery, n_hubs)
                for method in clean:
                    if fast and len(sample) > 100 and method not in FAST_METHODS:
                        continue
                    if hubs_of[method] is None:
                        continue
                    attacked, planted = plant(gallery, hubs_of[method])
                    scores = method_scores(method, attacked, queries, bank, gallery_bank)
                    cells[n_sample, n_hubs, attack, method] = cell(clean[method], scores, planted, gt)
                detector.append((n_sample, n_hubs, attack, *detection(bank, gallery, hubs_of["IS"])))
    return {"cells": cells, "detector": detector, "alarms": alarms, "samples": list(data["samples"]),
            "summary": (f"gallery {len(gallery)}, test queries {len(queries)}, defender's bank "
                        f"{len(bank)}, gallery bank {len(gallery_bank)}; attacker's samples: "
                        f"{' and '.join(data['samples'])}; {data['note']}.")}


def interval(value, bounds, signed=False):
    fmt = "{:+.1f}" if signed else "{:.1f}"
    low, high = (fmt.format(b) for b in bounds)
    return f"{fmt.format(value)} [{low}, {high}]"


def tables(name, result):
    """``[(title, header, rows)]``: for each attacker's sample, capture and R@1 change (a row
    per method, a column per planted count and attack); then the detector."""
    cells = result["cells"]
    settings = [(h, a) for h in N_HUBS for a in ATTACKS]
    header = ["method", *(f"{h} {a}" for h, a in settings)]
    out = []
    for n_sample in result["samples"]:
        for metric, title in (("capture", "hub capture@1, % of test queries"),
                              ("dr1", "change of the real items' R@1, points")):
            rows = [[m, *(interval(cells[n_sample, h, a, m][metric],
                                   cells[n_sample, h, a, m][metric + "_ci"],
                                   signed=metric == "dr1")
                          if (n_sample, h, a, m) in cells else "-" for h, a in settings)]
                    for m in METHODS if (n_sample, 1, "centroid", m) in cells]
            out.append((f"{name}, sample of {n_sample}: {title}", header, rows))
    rows = [[s, str(h), a, "-" if np.isnan(p) else f"{p:.2f}", f"{r:.2f}"]
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
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([header, *rows])
    lines = [f".. csv-table:: {title}", "   :header-rows: 1", ""]
    lines += [f"   {line}" for line in buffer.getvalue().splitlines()]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rst", action="store_true", help="print reStructuredText tables")
    parser.add_argument("--sets", nargs="+", default=SETS, choices=SETS)
    parser.add_argument("--fast", action="store_true",
                        help="samples of 1,000: raw, IS, DIS, CSLS, NNN (alone, gated), the index")
    args = parser.parse_args()
    render = rst if args.rst else markdown
    for reason in SKIPPED:
        print(f"skipped {reason}.", file=sys.stderr)
    for name in args.sets:
        start = time.perf_counter()
        try:
            data = split(name)
        except ValueError as error:  # a built set not built here
            if name not in BUILT_SETS:
                raise
            print(f"skipped {name}: {error}", file=sys.stderr)
            continue
        result = run_set(name, data, fast=args.fast)
        print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
        if args.rst:
            print(f"{name}\n{'~' * len(name)}\n")
        print(f"{name}: {result['summary']}\n")
        for table in tables(name, result):
            print(render(*table))


if __name__ == "__main__":
    main()
