"""Per-query gates for DIS and NNN: do they keep the in-domain gain and do no far-domain harm?

The ten splits of ``far_domain_study.py`` (split 0 is the bundled data). For each split
and bank (in-domain, far-domain), DIS and NNN at their defaults are fitted on the bank,
and each gate decides, per query, whether the query gets the normalised row or keeps
its raw similarities. Every gate threshold comes from the bank alone (or from the
diagnostic, which reads similarities, never an answer):

- ``none``: every query normalised (DIS keeps its own activation-set gate throughout);
- ``NN q%``: normalise a query when its nearest bank query is at least as similar as
  the bank's own q% quantile of nearest-neighbour similarity (each bank query to its
  nearest other bank query); q = 5 is the setting chosen beforehand, 1 and 10 show the
  sensitivity;
- ``top-1 range``: normalise a query when its top-1 gallery similarity lies within the
  2.5%-97.5% range of the bank queries' top-1 similarities;
- ``diagnostic: out of domain``: normalise every query, or none when
  ``querybank_diagnostics`` (on embeddings) finds the bank out of domain: a switch per
  bank and query set, from the queries' similarities, never their answers;
  ``diagnostic: top-1 KS``: the same from the similarity matrices alone, i.e. the KS
  test of top-1 similarities (``top1_gap``), as the CLI and ``transform`` have them;
- ``diagnostic + NN 5%``: the switch, then the NN 5% gate.

Target, over the ten splits: far-domain mean change in R@1 >= 0, no split below -0.2,
and an in-domain mean gain at least 90% of the ungated one. Every change carries a 95%
paired percentile bootstrap interval over the queries (``paired_comparison``).

Needs the embedded pools of ``far_domain_study.py`` (``--cache``)::

    .venv/bin/python scripts/gate_study.py --cache /tmp/revdict_pools.npz \\
        --markdown /tmp/gate_table.md
"""

import argparse
from pathlib import Path

import numpy as np
from far_domain_study import BANKS, draw_split, embedded_pools, interval_cell
from sklearn.base import clone

from skqbnorm import DynamicInvertedSoftmax, NearestNeighborNormalization
from skqbnorm.metrics import paired_comparison, querybank_diagnostics
from skqbnorm.metrics._querybank import nearest_bank_similarity

NORMALIZERS = {"DIS": DynamicInvertedSoftmax(), "NNN": NearestNeighborNormalization()}
GATES = ("none", "NN 5%", "NN 1%", "NN 10%", "top-1 range", "diagnostic: out of domain",
         "diagnostic: top-1 KS", "diagnostic + NN 5%")
N_RESAMPLES = 2000


def gate_masks(bank, queries, gallery):
    """Each gate's mask of the queries to normalise, from the bank's own distributions."""
    reference = nearest_bank_similarity(bank)
    nearest = nearest_bank_similarity(bank, queries)
    switch = not querybank_diagnostics(bank, queries, gallery=gallery, warn=False).out_of_domain
    bank_sims, query_sims = bank @ gallery.T, queries @ gallery.T
    sims_switch = not querybank_diagnostics(bank_sims, query_sims, warn=False).out_of_domain
    masks = {
        "none": np.ones(len(queries), dtype=bool),
        **{f"NN {q}%": nearest >= np.quantile(reference, q / 100) for q in (5, 1, 10)},
        "top-1 range": within(query_sims.max(axis=1), bank_sims.max(axis=1), 0.025),
        "diagnostic: out of domain": np.full(len(queries), switch),
        "diagnostic: top-1 KS": np.full(len(queries), sims_switch),
    }
    masks["diagnostic + NN 5%"] = masks["NN 5%"] & switch
    return masks


def adversarial(bank, gallery, size=1000):
    """The notebook's adversarial bank: the bank queries of the most retrieved items."""
    top1 = (bank @ gallery.T).argmax(axis=1)
    popularity = np.bincount(top1, minlength=len(gallery))
    return bank[np.argsort(-popularity[top1], kind="stable")[:size]]


def within(values, reference, tail):
    """Whether each value lies within the reference's central 1 - 2 * tail range."""
    low, high = np.quantile(reference, [tail, 1 - tail])
    return (values >= low) & (values <= high)


def gated(scores, raw, mask):
    """The normalised rows where ``mask`` holds, the raw ones elsewhere."""
    return np.where(mask[:, None], scores, raw)


def split_changes(pools, test, bank_rows, far, split):
    """(bank, method, gate) -> (change in R@1, interval low, high, share of rows changed)."""
    gallery = pools["words"][test].astype(np.float32)
    queries = pools["glosses"][test].astype(np.float32)
    raw = queries @ gallery.T
    truth = np.arange(len(test))
    banks = {"in-domain": pools["glosses"][bank_rows], "far-domain": pools["messages"][far]}
    banks["adversarial"] = adversarial(banks["in-domain"].astype(np.float32), gallery)
    results = {}
    for bank_name, bank in banks.items():
        bank = bank.astype(np.float32)
        masks = gate_masks(bank, queries, gallery)
        for name, template in NORMALIZERS.items():
            normalizer = clone(template).fit(bank @ gallery.T)
            scores = normalizer.transform(raw)
            for gate, mask in masks.items():
                final = gated(scores, raw, mask)
                comparison = paired_comparison(raw, final, truth, k=(1,),
                                               n_resamples=N_RESAMPLES, random_state=split)
                low, high = comparison.interval["R@1"]
                changed = np.any(final != raw, axis=1).mean()  # DIS adds its own gate
                results[bank_name, name, gate] = (comparison.change["R@1"], low, high, changed)
    return results


def summary_rows(results, n_splits):
    """One row per method and gate: far-domain and in-domain figures, and the target."""
    rows = []
    for name in NORMALIZERS:
        ungated_gain = np.mean([change for change, *_ in results["in-domain", name, "none"]])
        for gate in GATES:
            # Changes are multiples of 100 / n_test: round off the float noise of the
            # difference before comparing with -0.2.
            far = np.round([change for change, *_ in results["far-domain", name, gate]], 6)
            near = np.array([change for change, *_ in results["in-domain", name, gate]])
            shares = [np.mean([share for *_, share in results[bank, name, gate]])
                      for bank in BANKS]
            attacked = np.array([change for change, *_ in results["adversarial", name, gate]])
            kept = near.mean() / ungated_gain
            met = far.mean() >= 0 and far.min() >= -0.2 and kept >= 0.9
            rows.append({
                "method": name, "gate": gate, "in mean": near.mean(), "in std": near.std(),
                "kept": kept, "far mean": far.mean(), "far std": far.std(),
                "far min": far.min(), "far below -0.2": int((far < -0.2).sum()),
                "far below 0": int((far < 0).sum()), "n": n_splits,
                "in share": shares[0], "far share": shares[1], "target": met,
                "adversarial mean": attacked.mean(), "adversarial std": attacked.std(),
            })
    return rows


def markdown_summary(rows):
    header = ("| method | gate | in-domain change (mean +- std) | kept | queries normalised "
              "(in / far) | far-domain change (mean +- std) | far min | splits < -0.2 | "
              "splits < 0 | target | adversarial change (mean +- std) |")
    lines = [header, "|" + " --- |" * 11]
    for row in rows:
        lines.append(
            f"| {row['method']} | {row['gate']} | {row['in mean']:+.2f} +- {row['in std']:.2f} "
            f"| {row['kept']:.0%} | {row['in share']:.0%} / {row['far share']:.0%} "
            f"| {row['far mean']:+.2f} +- {row['far std']:.2f} | {row['far min']:+.2f} "
            f"| {row['far below -0.2']} / {row['n']} | {row['far below 0']} / {row['n']} "
            f"| {'met' if row['target'] else 'not met'} "
            f"| {row['adversarial mean']:+.2f} +- {row['adversarial std']:.2f} |"
        )
    return "\n".join(lines)


def markdown_splits(results, n_splits):
    """Every split's change with its interval, one row per (bank, method, gate)."""
    header = "| bank | method | gate | " + " | ".join(f"split {s}" for s in range(n_splits)) + " |"
    lines = [header, "|" + " --- |" * (3 + n_splits)]
    for (bank_name, name, gate), values in results.items():
        cells = [interval_cell(change, low, high) for change, low, high, _ in values]
        lines.append(f"| {bank_name} | {name} | {gate} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-splits", type=int, default=10)
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--n-bank", type=int, default=4000)
    parser.add_argument("--n-far", type=int, default=2000)
    parser.add_argument("--pool-words", type=int, default=14000)
    parser.add_argument("--cache", help="the .npz file of far_domain_study.py's embedded pools")
    parser.add_argument("--markdown", help="a file to write the markdown tables to")
    args = parser.parse_args()

    pools = embedded_pools(args.pool_words, args.cache)
    results = {}
    for split in range(args.n_splits):
        test, bank_rows, far = draw_split(split, pools, args.n_test, args.n_bank, args.n_far)
        for key, value in split_changes(pools, test, bank_rows, far, split).items():
            results.setdefault(key, []).append(value)
        print(f"split {split} done", flush=True)
    rows = summary_rows(results, args.n_splits)
    markdown = (
        f"Change in R@1 against raw over {args.n_splits} splits; 'kept' is the in-domain "
        "mean gain over the ungated one. Target: far-domain mean >= 0, no split below -0.2, "
        f"kept >= 90%.\n\n{markdown_summary(rows)}\n\nEvery split: change in R@1 "
        f"[95% paired bootstrap interval, {N_RESAMPLES} resamples of the queries]:\n\n"
        f"{markdown_splits(results, args.n_splits)}\n"
    )
    print("\n" + markdown)
    if args.markdown:
        Path(args.markdown).write_text(markdown, encoding="utf-8")


if __name__ == "__main__":
    main()
