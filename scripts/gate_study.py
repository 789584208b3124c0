"""The querybank gate and warnings, decided across retrieval sets of weak and strong models.

For every retrieval set and each of its querybanks (in-domain: a training split of the
same kind of queries; out-of-domain: texts of another kind in the same embedding space;
adversarial, a check: the quarter of the in-domain bank, at most 1,000 queries, whose
top-1 items are the most retrieved), four normalisers at their class defaults (IS, DIS,
CSLS, NNN) are fitted on the bank, and each gets the change in R@1 against the raw
similarities on the set's test queries with a 95% paired bootstrap interval
(``paired_comparison``, the same resamples for every method of a set). Beside them, what
the gate and the warnings read, from similarities and embeddings only, never the
answers: the KS distance of the depth test (``querybank_diagnostics``' ``depth_ks``, at
its default depth of 10, fixed beforehand), the top-1 KS distance, the
nearest-neighbour outlier share and the share of queries DIS would normalise.

A decision of the gate on a (bank, normaliser) cell is wrong when the gate is open and
the ungated change's interval lies below zero, or closed and it lies above zero (cells
whose interval holds zero count for neither). Thresholds are chosen on the in- and
out-of-domain banks, from a grid of 0.01 to 0.99: first ``max_ks``, on the depth test
alone (what the gate reads from similarities); then ``max_outlier_share`` with that
``max_ks``, on the two tests together (a gate fitted on embeddings closes when either
fires). Each is the one with the fewest wrong decisions, and of those the fewest open
on a loss; among ties, the middle of the widest run of grid values. Leave one set out:
each set is decided by thresholds chosen on the other sets alone. The defaults are the
thresholds this rule chooses on every set.

The gate at the package's defaults is run as users run it (``QueryBankGate`` fitted on
similarities, and on embeddings), and its decisions are checked against the study's
rule. The warnings are heard where users hear them: ``querybank_diagnostics`` (on
similarities and on embeddings), ``compare`` and ``QueryBankGate``. The acceptance
checked at the end: on every set, the gate is open where an ungated normaliser's
in-domain gain has its interval above zero, and no gated out-of-domain change lies
below zero beyond its interval; no querybank warning fires on an in-domain bank whose
normalisers gain, and the out-of-domain warning fires on every out-of-domain bank where
an ungated normaliser loses.

Run it from the repository's root (about a minute on two cores)::

    .venv/bin/python scripts/gate_study.py --data-home DATA_HOME --markdown /tmp/gate.md \\
        --rst /tmp/gate.rst

where ``DATA_HOME`` holds the sets built by ``scripts/build_retrieval_sets.py`` that do not
ship (without them the study runs on the shipped sets alone).
"""

import argparse
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.base import clone

from skqbnorm import (
    CSLS,
    DynamicInvertedSoftmax,
    InvertedSoftmax,
    NearestNeighborNormalization,
    QueryBankGate,
    compare,
)
from skqbnorm.datasets import list_retrieval_sets, load_retrieval_set
from skqbnorm.metrics import QueryBankWarning, paired_comparison, querybank_diagnostics
from skqbnorm.metrics._querybank import KS_ALPHA, MAX_KS, MAX_OUTLIER_SHARE

NORMALIZERS = {"IS": InvertedSoftmax(), "DIS": DynamicInvertedSoftmax(), "CSLS": CSLS(),
               "NNN": NearestNeighborNormalization()}
BANKS = ("in-domain", "out-of-domain", "adversarial")
# The banks that choose the thresholds; the adversarial banks are a check.
CHOOSING = ("in-domain", "out-of-domain")
N_RESAMPLES = 2000
GRID = np.round(np.arange(0.01, 1.0, 0.01), 2)
# Where a warning is heard, and the words that tell its kind.
SOURCES = ("diagnostics, similarities", "diagnostics, embeddings", "compare",
           "gate, similarities", "gate, embeddings")
KINDS = {"covers little": "covers little", "out of domain": "looks out of domain"}


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple
    rows: list
    note: str = ""


def load(name, data_home=None):
    """A retrieval set by name, as ``load_retrieval_set`` gives it."""
    return load_retrieval_set(name, data_home=data_home, verify=False)


def loadable_sets(data_home=None):
    """The sets that ship and those built into ``data_home``, by raw R@1."""
    names = []
    for entry in list_retrieval_sets():
        try:
            load(entry["name"], data_home)
        except ValueError:
            print(f"skipping {entry['name']}: not built into data_home")
            continue
        names.append(entry["name"])
    return names


def adversarial(bank, gallery):
    """The quarter of the bank (at most 1,000 queries) whose top-1 items are the most
    retrieved: in domain, piled onto a few hubs."""
    top1 = (bank @ gallery.T).argmax(axis=1)
    popularity = np.bincount(top1, minlength=len(gallery))
    return bank[np.argsort(-popularity[top1], kind="stable")[:min(1000, len(bank) // 4)]]


def heard(call):
    """The kinds of QueryBankWarning that ``call()`` issues."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", QueryBankWarning)
        call()
    messages = [str(w.message) for w in caught if issubclass(w.category, QueryBankWarning)]
    return frozenset(kind for kind, words in KINDS.items()
                     if any(words in message for message in messages))


def change(query_sims, scores, gt):
    """The change in R@1 of ``scores`` against raw, with its 95% paired interval."""
    comparison = paired_comparison(query_sims, scores, gt, k=1, n_resamples=N_RESAMPLES,
                                   random_state=0)
    low, high = comparison.interval["R@1"]
    return {"raw": comparison.value_a["R@1"], "change": comparison.change["R@1"],
            "low": low, "high": high}


def bank_study(name, bank_name, bank, data):
    """One bank of one set: its diagnostics, the warnings heard, and a cell per normaliser
    (ungated change, and the gate's decision and change at the defaults in both modes)."""
    gallery, queries, query_sims, gt = data
    bank_sims = bank @ gallery.T
    report = querybank_diagnostics(bank, queries, gallery=gallery, warn=False)
    sources = dict(zip(SOURCES, (
        lambda: querybank_diagnostics(bank_sims, query_sims),
        lambda: querybank_diagnostics(bank, queries, gallery=gallery),
        lambda: compare(query_sims, gt, bank_sims=bank_sims, methods="dis", n_resamples=0,
                        as_frame=False),
        lambda: QueryBankGate().fit(bank_sims, queries=query_sims),
        lambda: QueryBankGate().fit(bank, queries=queries, gallery=gallery),
    )))
    warned = {source: heard(call) for source, call in sources.items()}
    cells = []
    for method, template in NORMALIZERS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", QueryBankWarning)
            scores = clone(template).fit(bank_sims).transform(query_sims)
            gates = {"similarities": QueryBankGate(template).fit(bank_sims, queries=query_sims),
                     "embeddings": QueryBankGate(template).fit(bank, queries=queries,
                                                               gallery=gallery)}
        cell = {"set": name, "bank": bank_name, "method": method,
                **change(query_sims, scores, gt), "ks": report.depth_ks,
                "pvalue": report.depth_ks_pvalue, "share": report.nn_outlier_share}
        for mode, gate in gates.items():
            cell[f"open, {mode}"] = gate.open_
            cell[f"gated, {mode}"] = change(query_sims, gate.transform(query_sims), gt)
        cells.append(cell)
    return report, warned, cells


def set_study(name, data_home=None):
    """Every bank of one set: reports, warnings heard and cells, by bank."""
    data = load(name, data_home)
    gallery, queries, in_domain, far = (np.asarray(data[key], dtype=np.float32) for key in (
        "gallery_embeddings", "query_embeddings", "bank_embeddings", "far_bank_embeddings"))
    inputs = (gallery, queries, queries @ gallery.T, np.asarray(data.query_gt))
    banks = dict(zip(BANKS, (in_domain, far, adversarial(in_domain, gallery))))
    return {bank_name: bank_study(name, bank_name, bank, inputs)
            for bank_name, bank in banks.items()}, {b: len(bank) for b, bank in banks.items()}


def wanted(cell):
    """+1 where the gate should be open, -1 where it should be closed, 0 for either."""
    return 1 if cell["low"] > 0 else -1 if cell["high"] < 0 else 0


def closes(cell, max_ks, max_share=None):
    """Whether the gate closes on a cell: the depth test, and with ``max_share`` the
    nearest-neighbour test too (either closes it)."""
    depth_gap = cell["ks"] > max_ks and cell["pvalue"] < KS_ALPHA
    return depth_gap or (max_share is not None and cell["share"] > max_share)


def errors(cells, max_ks, max_share=None):
    """The wrong decisions, and of them those that leave a loss open."""
    closed = [closes(cell, max_ks, max_share) for cell in cells]
    harmful = sum(wanted(c) == -1 and not shut for c, shut in zip(cells, closed))
    missed = sum(wanted(c) == 1 and shut for c, shut in zip(cells, closed))
    return harmful + missed, harmful


def middle_of_best(counts):
    """The middle of the widest run of grid values whose (errors, harmful) is least."""
    best = np.array([count == min(counts) for count in counts] + [False])
    edges = np.flatnonzero(np.diff(np.concatenate([[False], best]).astype(int)))
    starts, stops = edges[::2], edges[1::2] - 1
    widest = np.argmax(stops - starts)
    return float(np.round((GRID[starts[widest]] + GRID[stops[widest]]) / 2, 3))


def choose(cells):
    """``max_ks`` on the depth test alone, then ``max_outlier_share`` with it, on the
    choosing banks of ``cells``; and the wrong decisions of each mode."""
    cells = [cell for cell in cells if cell["bank"] in CHOOSING]
    max_ks = middle_of_best([errors(cells, t) for t in GRID])
    max_share = middle_of_best([errors(cells, max_ks, t) for t in GRID])
    return max_ks, max_share, errors(cells, max_ks)[0], errors(cells, max_ks, max_share)[0]


def interval(figures):
    return f"{figures['change']:+.2f} [{figures['low']:+.2f}, {figures['high']:+.2f}]"


def of(cells, name, bank_name):
    return [cell for cell in cells if cell["set"] == name and cell["bank"] == bank_name]


def ungated_table(names, reports, sizes, cells):
    rows = []
    for name in names:
        for bank_name in BANKS:
            row_cells, report = of(cells, name, bank_name), reports[name][bank_name]
            rows.append((name, bank_name, f"{sizes[name][bank_name]:,}",
                         f"{row_cells[0]['raw']:.2f}", *map(interval, row_cells),
                         f"{report.depth_ks:.3f} ({report.depth_ks_pvalue:.1g})",
                         f"{report.top1_ks:.3f}", f"{report.nn_outlier_share:.1%}",
                         f"{report.dis_share:.1%}"))
    return Table("Ungated change in R@1 against raw, and what the rules read",
                 ("set", "bank", "bank queries", "raw R@1", *NORMALIZERS, "depth KS (p)",
                  "top-1 KS", "NN outliers", "DIS share"), rows)


def default_gate_table(names, cells):
    rows = []
    for name in names:
        for bank_name in BANKS:
            row_cells = of(cells, name, bank_name)
            row = [name, bank_name]
            for mode in ("similarities", "embeddings"):
                row.append("open" if row_cells[0][f"open, {mode}"] else "closed")
                row.append(" / ".join(interval(c[f"gated, {mode}"]) for c in row_cells))
            rows.append(tuple(row))
    return Table(f"QueryBankGate at its defaults (max_ks={MAX_KS}, "
                 f"max_outlier_share={MAX_OUTLIER_SHARE}): gated change in R@1",
                 ("set", "bank", "on similarities", " / ".join(NORMALIZERS),
                  "on embeddings", " / ".join(NORMALIZERS)), rows)


def held_out_table(names, cells):
    """Each set decided by thresholds chosen on the others; the wrong decisions."""
    rows, failures = [], []
    for name in names:
        max_ks, max_share, ks_errors, both_errors = choose(
            [c for c in cells if c["set"] != name])
        for bank_name in BANKS:
            row_cells = of(cells, name, bank_name)
            row = [name, bank_name]
            for mode, share, n_errors in (("similarities", None, ks_errors),
                                          ("embeddings", max_share, both_errors)):
                shut = closes(row_cells[0], max_ks, share)
                wrong = [c["method"] for c in row_cells if wanted(c) == (1 if shut else -1)]
                row += [f"{max_ks:.3f}" + ("" if share is None else f", {share:.3f}")
                        + f" ({n_errors})", "closed" if shut else "open",
                        ", ".join(wrong) or "none"]
                failures += [f"{name} {bank_name} {m} on {mode}: "
                             + ("closed on a gain" if shut else "open on a loss") for m in wrong]
            rows.append(tuple(row))
    return Table("Leave one set out: each set decided by thresholds chosen on the others",
                 ("held-out set", "bank", "max_ks (wrong on the others)", "on similarities",
                  "wrong decisions", "max_ks, max_outlier_share (wrong on the others)",
                  "on embeddings", "wrong decisions"), rows,
                 "Wrong decisions on held-out sets: " + ("; ".join(failures) or "none") + ".")


def warnings_table(names, warned, cells):
    rows = []
    for name in names:
        for bank_name in BANKS:
            row_cells = of(cells, name, bank_name)
            counts = (f"{sum(wanted(c) == 1 for c in row_cells)} / "
                      f"{sum(wanted(c) == -1 for c in row_cells)}")
            rows.append((name, bank_name, counts,
                         *(", ".join(sorted(warned[name][bank_name][s])) or "none"
                           for s in SOURCES)))
    return Table("QueryBankWarning at the package's defaults",
                 ("set", "bank", "normalisers gaining / losing", *SOURCES), rows)


def acceptance(names, warned, cells):
    """The acceptance checks at the defaults, one line each, with what fails."""
    lines = []
    for mode in ("similarities", "embeddings"):
        closed_gain = [f"{c['set']} {c['method']}" for c in cells if c["bank"] == "in-domain"
                       and wanted(c) == 1 and not c[f"open, {mode}"]]
        far_loss = [f"{c['set']} {c['method']}" for c in cells if c["bank"] == "out-of-domain"
                    and c[f"gated, {mode}"]["high"] < 0]
        lines.append(f"gate on {mode}: open on every in-domain gain: "
                     f"{'yes' if not closed_gain else 'no, ' + ', '.join(closed_gain)}; "
                     f"no gated out-of-domain loss beyond its interval: "
                     f"{'yes' if not far_loss else 'no, ' + ', '.join(far_loss)}")
    silent = [f"{name} ({s}: {', '.join(sorted(warned[name]['in-domain'][s]))})"
              for name in names for s in SOURCES if warned[name]["in-domain"][s]
              and any(wanted(c) == 1 for c in of(cells, name, "in-domain"))]
    missing = [f"{name} ({s})" for name in names for s in SOURCES
               if "out of domain" not in warned[name]["out-of-domain"][s]
               and any(wanted(c) == -1 for c in of(cells, name, "out-of-domain"))]
    lines.append("warnings: none on an in-domain bank whose normalisers gain: "
                 + ("yes" if not silent else "no, " + "; ".join(silent)))
    lines.append("warnings: out of domain on every out-of-domain bank where a normaliser "
                 "loses: " + ("yes" if not missing else "no, " + "; ".join(missing)))
    return lines


def check_rule(cells):
    """The study's rule at the defaults must decide as QueryBankGate does."""
    for cell in cells:
        for mode, share in (("similarities", None), ("embeddings", MAX_OUTLIER_SHARE)):
            if closes(cell, MAX_KS, share) == cell[f"open, {mode}"]:
                raise SystemExit(f"the study's rule and QueryBankGate disagree on {cell['set']} "
                                 f"{cell['bank']} {cell['method']} ({mode})")


def markdown(table):
    lines = [f"### {table.title}", "", "| " + " | ".join(table.header) + " |",
             "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(row) + " |" for row in table.rows]
    return "\n".join(lines + ([f"\n{table.note}"] if table.note else []))


def rst(table):
    def quoted(values):
        return ", ".join('"' + value.replace('"', '""') + '"' for value in values)
    lines = [f".. csv-table:: {table.title}", "   :header: " + quoted(table.header),
             "   :widths: auto", ""]
    lines += ["   " + quoted(row) for row in table.rows]
    return "\n".join(lines + ([f"\n{table.note}"] if table.note else []))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="*", default=None,
                        help="retrieval set names (default: every set that can be loaded)")
    parser.add_argument("--data-home", type=Path, default=None,
                        help="where the sets that do not ship were built (default: "
                             "$SKQBNORM_DATA, else ~/skqbnorm_data)")
    parser.add_argument("--markdown", type=Path, help="also write the tables here")
    parser.add_argument("--rst", type=Path, help="also write them as reST csv-tables here")
    args = parser.parse_args()
    names = args.sets or loadable_sets(args.data_home)
    reports, warned, sizes, cells = {}, {}, {}, []
    for name in names:
        banks, sizes[name] = set_study(name, args.data_home)
        reports[name] = {bank_name: study[0] for bank_name, study in banks.items()}
        warned[name] = {bank_name: study[1] for bank_name, study in banks.items()}
        cells += [cell for study in banks.values() for cell in study[2]]
    check_rule(cells)
    tables = [ungated_table(names, reports, sizes, cells), default_gate_table(names, cells),
              held_out_table(names, cells), warnings_table(names, warned, cells)]
    max_ks, max_share, ks_errors, both_errors = choose(cells)
    n_choosing = sum(cell["bank"] in CHOOSING for cell in cells)
    chosen = (f"Chosen on every set: max_ks {max_ks:.3f} ({ks_errors} wrong decisions of "
              f"{n_choosing} in- and out-of-domain cells on similarities), max_outlier_share "
              f"{max_share:.3f} ({both_errors} on embeddings). The package's defaults: "
              f"max_ks {MAX_KS}, max_outlier_share {MAX_OUTLIER_SHARE}.")
    text = "\n\n".join([*map(markdown, tables), chosen, "\n".join(acceptance(names, warned, cells))])
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.rst:
        args.rst.write_text("\n\n".join(map(rst, tables)) + "\n")


if __name__ == "__main__":
    main()
