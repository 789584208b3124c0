"""How much does each normaliser gain or lose with an in-domain and a far-domain querybank?

The bundled WordNet reverse dictionary is one draw of a gallery, an in-domain bank
and a far-domain bank. This script repeats the draw: split 0 is exactly the bundled
data, and each further split draws, from the same text pools, a new set of 2,000
test nouns (gallery words and query glosses), an in-domain bank of 4,000 glosses of
other nouns and a far-domain bank of 2,000 gettext messages. It prints, for every
normaliser and bank, the change in R@1 against the raw similarities of the same
split: mean, standard deviation, range and how many splits fell below raw; and every
split's change with its 95% paired bootstrap interval over that split's test queries
(``paired_comparison``, 1,000 resamples, the same for every method of a split).

The dual-bank normalisers (DBNorm) also get a gallery bank: the head words of the
first 3,000 in-domain bank nouns, as in the bundled data (never a test noun). They
keep it with the far-domain querybank: a gallery bank is drawn from the gallery's
own modality, which a query-side domain shift does not touch, so only the querybank
changes between the two banks. Their far-domain rows thus still see in-domain
gallery-modality samples, which the other normalisers do not have; the row "IS on
the gallery bank" (DBNorm's gallery-bank factor alone: an Inverted Softmax with
DBNorm's ``beta2`` fitted on the gallery bank, ranking as ``s - c2``) shows what that
factor does on its own.

Dual softmax is run both ways: as a querybank normaliser ("DSL", fitted on the bank)
and transductively ("DSL (transductive)", ``fit_transform`` on the test matrix),
which uses no bank; like the gallery-bank row, its change is the same under both banks.

Not run in CI: it embeds about 43,000 texts with the build script's encoder, so it
needs the same environment as ``build_wordnet_revdict.py`` plus skqbnorm itself::

    /tmp/build/bin/pip install -e .
    /tmp/build/bin/python scripts/far_domain_study.py --cache /tmp/revdict_pools.npz \\
        --markdown /tmp/far_domain_table.md
"""

import argparse
import warnings
from pathlib import Path

import numpy as np
from sklearn.base import clone

from skqbnorm import (
    CSLS,
    Centering,
    DualBankSinkhornNormalization,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankGate,
    QueryBankZNorm,
    SinkhornNormalization,
)
from skqbnorm.metrics import correct_item_ranks, paired_comparison, recall_at_k

from build_wordnet_revdict import sentence_encoder, shuffled_texts

# Every normaliser of the study, with the package's defaults: edit here to change the
# list or a setting. A normaliser whose capabilities declare a gallery bank is fitted
# with the split's gallery bank, in the form it declares.
NORMALIZERS = {
    "IS": InvertedSoftmax(),
    "DIS": DynamicInvertedSoftmax(),
    "CSLS": CSLS(),
    "GC": GloballyCorrected(),
    "CENT": Centering(),
    "DN": Centering(alpha=0.5),
    "NNN": NearestNeighborNormalization(),
    "z-norm": QueryBankZNorm(),
    "MP (Gaussian)": MutualProximity(method="gaussian"),
    "MP (empiric)": MutualProximity(method="empiric"),
    "DBNorm": DualInvertedSoftmax(),
    "DBNorm (dynamic)": DualDynamicInvertedSoftmax(),
    "SN": SinkhornNormalization(),
    "DBSN": DualBankSinkhornNormalization(),
    "DSL": DualSoftmax(),
    "gated DIS": QueryBankGate(DynamicInvertedSoftmax()),
    "gated NNN": QueryBankGate(NearestNeighborNormalization()),
}
# Normalisers fitted on another matrix than the querybank's, so the same under both banks:
# the test matrix itself (transductive), or the gallery bank alone (DBNorm's second factor
# without its first: what the gallery bank does on its own).
SINGLE_FIT = {
    "DSL (transductive)": ("test queries", DualSoftmax()),
    "IS on the gallery bank": ("gallery bank", InvertedSoftmax(beta=DualInvertedSoftmax().beta2)),
}
BANKS = ("in-domain", "far-domain")


def embedded_pools(n_words, cache=None):
    """Embeddings of the first ``n_words`` shuffled nouns, their glosses and every message."""
    if cache is not None and Path(cache).exists():
        with np.load(cache) as stored:
            if len(stored["words"]) >= n_words:
                return {name: stored[name] if name == "messages" else stored[name][:n_words]
                        for name in stored.files}
    first_sense, words, _, messages = shuffled_texts(seed=0)
    encode = sentence_encoder(progress=False)
    pools = {
        "words": encode(words[:n_words]),
        "glosses": encode([first_sense[word] for word in words[:n_words]]),
        "messages": encode(messages),
    }
    if cache is not None:
        np.savez(cache, **pools)
    return pools


def draw_split(split, pools, n_test, n_bank, n_far):
    """Indices of the test nouns, the in-domain bank's nouns and the far-domain messages."""
    if split == 0:  # the bundled dataset's draw
        order = np.arange(len(pools["words"]))
        far = np.arange(n_far)
    else:
        rng = np.random.default_rng(split)
        order = rng.permutation(len(pools["words"]))
        far = rng.choice(len(pools["messages"]), n_far, replace=False)
    return order[:n_test], order[n_test : n_test + n_bank], far


def r1(scores, truth):
    """R@1 under skqbnorm's official tie convention (a tie at the top is a miss)."""
    return recall_at_k(correct_item_ranks(scores, truth), k=1)


def fitted(template, bank_sims, inputs, caught):
    """A fresh copy of ``template`` fitted on the bank; its warnings go to ``caught``.

    ``inputs`` holds what some normalisers take beside the bank: the gallery bank's
    similarities to the gallery (DBNorm), the bank's to the gallery bank (DBSN), and
    the query similarities (QueryBankGate). A Sinkhorn fit's marginal error goes to
    ``caught`` too, as a float.
    """
    normalizer = clone(template)
    if isinstance(normalizer, QueryBankGate):
        extra = {"queries": inputs["queries"]}
    elif normalizer.capabilities.gallery_bank is not None:
        key = normalizer.capabilities.gallery_bank  # "gallery_bank" or "querybank_to_gallery_bank"
        extra = {key: inputs[key]}
    else:
        extra = {}
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        normalizer.fit(bank_sims, **extra)
    caught.extend(str(record.message).split(":")[0] for record in records)
    if hasattr(normalizer, "marginal_error_"):
        caught.append(normalizer.marginal_error_)
    return normalizer


def r1_change(query_sims, scores, truth, seed):
    """``(change, low, high)``: the change in R@1 against raw and its 95% paired interval."""
    comparison = paired_comparison(query_sims, scores, truth, k=1, n_resamples=1000,
                                   random_state=seed)
    return (comparison.change["R@1"], *comparison.interval["R@1"])


def r1_changes(pools, test, bank, far, n_gallery_bank, caught, seed=0):
    """Raw R@1 of one split, and each (bank, normaliser)'s change in R@1 against it,
    with its interval: ``(change, low, high)``."""
    gallery = pools["words"][test].astype(np.float32)
    query_sims = pools["glosses"][test].astype(np.float32) @ gallery.T
    truth = np.arange(len(test))
    raw = r1(query_sims, truth)
    banks = {"in-domain": pools["glosses"][bank], "far-domain": pools["messages"][far]}
    gallery_bank = pools["words"][bank[:n_gallery_bank]].astype(np.float32)
    gallery_bank_sims = gallery_bank @ gallery.T
    changes = {}
    for bank_name, bank_embeddings in banks.items():
        bank_sims = bank_embeddings.astype(np.float32) @ gallery.T
        inputs = {"gallery_bank": gallery_bank_sims, "queries": query_sims,
                  "querybank_to_gallery_bank": bank_embeddings.astype(np.float32) @ gallery_bank.T}
        for name, template in NORMALIZERS.items():
            normalizer = fitted(template, bank_sims, inputs,
                                caught.setdefault((bank_name, name), []))
            changes[bank_name, name] = r1_change(query_sims, normalizer.transform(query_sims), truth, seed)
    fit_on = {"test queries": query_sims, "gallery bank": gallery_bank_sims}
    for name, (source, template) in SINGLE_FIT.items():
        scores = clone(template).fit(fit_on[source]).transform(query_sims)
        changes[source, name] = r1_change(query_sims, scores, truth, seed)
    return raw, changes


def settings():
    """Each normaliser's hyperparameters, as run (the defaults may change)."""
    lines = []
    for name, template in {**NORMALIZERS, **{n: t for n, (_, t) in SINGLE_FIT.items()}}.items():
        params = {key: value for key, value in template.get_params().items()
                  if key not in ("metric", "working_memory", "n_jobs")}
        lines.append(f"  {name}: {type(template).__name__}"
                     f"({', '.join(f'{key}={value!r}' for key, value in params.items())})")
    return "\n".join(lines)


def summary(values):
    values = np.asarray([change for change, _, _ in values])
    return values.mean(), values.std(), values.min(), values.max(), int((values < 0).sum())


def text_table(changes, n_splits):
    header = f"{'bank':<14}{'method':<24}{'mean':>8}{'std':>8}{'min':>8}{'max':>8}"
    lines = [header + f"{'below raw':>11}"]
    for (bank_name, name), values in changes.items():
        mean, std, low, high, below = summary(values)
        lines.append(f"{bank_name:<14}{name:<24}{mean:>+8.2f}{std:>8.2f}{low:>+8.2f}"
                     f"{high:>+8.2f}{f'{below} / {n_splits}':>11}")
    return "\n".join(lines)


def markdown_table(changes, n_splits):
    """One row per method: each bank's mean +- std, range and splits below raw."""
    header = ["method"]
    for bank_name in BANKS:
        header += [f"{bank_name} mean +- std", f"{bank_name} min / max",
                   f"{bank_name} below raw"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for name in [*NORMALIZERS, *SINGLE_FIT]:
        source = SINGLE_FIT[name][0] if name in SINGLE_FIT else None
        cells = [name + (" \\*" if source else "")]
        for bank_name in BANKS:
            mean, std, low, high, below = summary(changes[source or bank_name, name])
            cells += [f"{mean:+.2f} +- {std:.2f}", f"{low:+.2f} / {high:+.2f}",
                      f"{below} / {n_splits}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def interval_cell(change, low, high):
    """A change and its interval, as the per-split tables print them."""
    return f"{change:+.2f} [{low:+.2f}, {high:+.2f}]"


def markdown_splits(changes, n_splits):
    """Every split's change in R@1 with its 95% paired interval, one row per (bank, method)."""
    header = "| bank | method | " + " | ".join(f"split {split}" for split in range(n_splits)) + " |"
    lines = [header, "|" + " --- |" * (2 + n_splits)]
    for (bank_name, name), values in changes.items():
        cells = [interval_cell(*value) for value in values]
        lines.append(f"| {bank_name} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-splits", type=int, default=10)
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--n-bank", type=int, default=4000)
    parser.add_argument("--n-far", type=int, default=2000)
    parser.add_argument("--n-gallery-bank", type=int, default=3000,
                        help="head words of the first in-domain bank nouns (at most --n-bank)")
    parser.add_argument("--pool-words", type=int, default=14000)
    parser.add_argument("--cache", help="an .npz file to keep the embedded pools in")
    parser.add_argument("--markdown", help="a file to write the markdown table to")
    args = parser.parse_args()
    if args.n_test + args.n_bank > args.pool_words:
        parser.error(f"--n-test + --n-bank ({args.n_test + args.n_bank}) exceed "
                     f"--pool-words ({args.pool_words})")
    if not 0 < args.n_gallery_bank <= args.n_bank:
        parser.error(f"--n-gallery-bank must be in [1, --n-bank={args.n_bank}]; "
                     f"got {args.n_gallery_bank}")

    pools = embedded_pools(args.pool_words, args.cache)
    if args.n_far > len(pools["messages"]):
        parser.error(f"--n-far ({args.n_far}) exceeds the {len(pools['messages'])} gettext "
                     "messages available")
    print(f"settings:\n{settings()}", flush=True)
    raws, changes, caught = [], {}, {}
    for split in range(args.n_splits):
        test, bank, far = draw_split(split, pools, args.n_test, args.n_bank, args.n_far)
        raw, split_changes = r1_changes(pools, test, bank, far, args.n_gallery_bank, caught)
        raws.append(raw)
        for key, change in split_changes.items():
            changes.setdefault(key, []).append(change)
        print(f"split {split}: raw R@1 {raw:.2f}", flush=True)
        for bank_name in dict.fromkeys(bank for bank, _ in split_changes):
            row = ", ".join(f"{name} {interval_cell(*value)}"
                            for (bank, name), value in split_changes.items() if bank == bank_name)
            print(f"  {bank_name}: {row}", flush=True)

    raw_line = (f"raw R@1 over {args.n_splits} splits: {np.mean(raws):.2f} +- "
                f"{np.std(raws):.2f} (min {np.min(raws):.2f}, max {np.max(raws):.2f})")
    print(f"\n{raw_line}\nchange in R@1 against raw:")
    print(text_table(changes, args.n_splits))
    print("\nwarnings and marginal errors in fit, over the splits:")
    for (bank_name, name), notes in caught.items():
        messages = [note for note in notes if isinstance(note, str)]
        for message in sorted(set(messages)):
            print(f"  {bank_name} {name}: {messages.count(message)} x {message}")
        errors = [note for note in notes if not isinstance(note, str)]
        if errors:
            print(f"  {bank_name} {name}: marginal error {np.mean(errors):.3g} on average "
                  f"(from {np.min(errors):.3g} to {np.max(errors):.3g})")
    markdown = (f"{raw_line}\n\nChange in R@1 against raw, over the {args.n_splits} splits:\n\n"
                f"{markdown_table(changes, args.n_splits)}\n\n"
                "\\* fitted on the test queries or on the gallery bank, without a querybank: "
                "the same numbers under both banks.\n\nEvery split's change in R@1 against raw "
                "with its 95% paired bootstrap interval over the split's test queries:\n\n"
                f"{markdown_splits(changes, args.n_splits)}\n\nSettings:\n\n"
                + settings().replace("  ", "- ", 1).replace("\n  ", "\n- ") + "\n")
    print("\n" + markdown)
    if args.markdown:
        Path(args.markdown).write_text(markdown, encoding="utf-8")


if __name__ == "__main__":
    main()
