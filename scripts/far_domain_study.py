"""How much does each normaliser gain or lose with an in-domain and a far-domain querybank?

The bundled WordNet reverse dictionary is one draw of a gallery, an in-domain bank
and a far-domain bank. This script repeats the draw: split 0 is exactly the bundled
data, and each further split draws, from the same text pools, a new set of 2,000
test nouns (gallery words and query glosses), an in-domain bank of 4,000 glosses of
other nouns and a far-domain bank of 2,000 gettext messages. It prints, for every
normaliser and bank, the change in R@1 against the raw similarities of the same
split: mean, standard deviation, range and how many splits fell below raw.

Not run in CI: it embeds about 45,000 texts with the build script's encoder, so it
needs the same environment as ``build_wordnet_revdict.py`` plus skqbnorm itself::

    /tmp/build/bin/pip install -e .
    /tmp/build/bin/python scripts/far_domain_study.py --cache /tmp/revdict_pools.npz
"""

import argparse
from pathlib import Path

import numpy as np

from skqbnorm import CSLS, Centering, DynamicInvertedSoftmax, GloballyCorrected, InvertedSoftmax
from skqbnorm.metrics import correct_item_ranks, recall_at_k

from build_wordnet_revdict import sentence_encoder, shuffled_texts

NORMALISERS = {
    "IS": InvertedSoftmax(),
    "DIS": DynamicInvertedSoftmax(),
    "CSLS": CSLS(),
    "GC": GloballyCorrected(),
    "CENT": Centering(),
}


def embedded_pools(n_words, cache=None):
    """Embeddings of the first ``n_words`` shuffled nouns, their glosses and every message."""
    if cache is not None and Path(cache).exists():
        with np.load(cache) as stored:
            if len(stored["words"]) >= n_words:
                return {name: stored[name][:n_words] if name != "messages" else stored[name] for name in stored.files}
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


def r1_changes(pools, test, bank, far):
    """Raw R@1 of one split, and each (bank, normaliser)'s change in R@1 against it."""
    gallery = pools["words"][test].astype(np.float32)
    query_sims = pools["glosses"][test].astype(np.float32) @ gallery.T
    truth = np.arange(len(test))
    raw = recall_at_k(correct_item_ranks(query_sims, truth), k=1)
    banks = {"in-domain": pools["glosses"][bank], "far-domain": pools["messages"][far]}
    changes = {}
    for bank_name, bank_embeddings in banks.items():
        bank_sims = bank_embeddings.astype(np.float32) @ gallery.T
        for name, normaliser in NORMALISERS.items():
            scores = normaliser.fit(bank_sims).transform(query_sims)
            changes[bank_name, name] = recall_at_k(correct_item_ranks(scores, truth), k=1) - raw
    return raw, changes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-splits", type=int, default=10)
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--n-bank", type=int, default=4000)
    parser.add_argument("--n-far", type=int, default=2000)
    parser.add_argument("--pool-words", type=int, default=14000)
    parser.add_argument("--cache", help="an .npz file to keep the embedded pools in")
    args = parser.parse_args()
    if args.n_test + args.n_bank > args.pool_words:
        parser.error(f"--n-test + --n-bank ({args.n_test + args.n_bank}) exceed --pool-words ({args.pool_words})")

    pools = embedded_pools(args.pool_words, args.cache)
    if args.n_far > len(pools["messages"]):
        parser.error(f"--n-far ({args.n_far}) exceeds the {len(pools['messages'])} gettext messages available")
    raws, changes = [], {}
    for split in range(args.n_splits):
        raw, split_changes = r1_changes(pools, *draw_split(split, pools, args.n_test, args.n_bank, args.n_far))
        raws.append(raw)
        for key, change in split_changes.items():
            changes.setdefault(key, []).append(change)
        dis = ", ".join(f"{bank} {split_changes[bank, 'DIS']:+.2f}" for bank in ("in-domain", "far-domain"))
        print(f"split {split}: raw R@1 {raw:.2f}; DIS {dis}", flush=True)

    print(f"\nraw R@1 over {args.n_splits} splits: {np.mean(raws):.2f} +- {np.std(raws):.2f}")
    print(f"{'bank':<12}{'method':<8}{'mean':>8}{'std':>8}{'min':>8}{'max':>8}{'below raw':>11}")
    for (bank_name, name), values in changes.items():
        values = np.array(values)
        print(f"{bank_name:<12}{name:<8}{values.mean():>+8.2f}{values.std():>8.2f}{values.min():>+8.2f}"
              f"{values.max():>+8.2f}{f'{(values < 0).sum()} / {len(values)}':>11}")


if __name__ == "__main__":
    main()
