"""Build skqbnorm's WordNet category labels (``wordnet_categories.npz``).

Not run in CI: it needs Debian's ``wordnet-base`` package (WordNet 3.0's database
under /usr/share/wordnet)::

    apt-get install wordnet-base
    python scripts/build_wordnet_categories.py

For each of the 5,000 nouns with an embedding in ``wordnet_revdict.npz`` (the 2,000
gallery words, then the 3,000 gallery-bank words), the lexicographer file of the
synset whose gloss the dataset stores (the first usable synset ``data.noun`` lists
for the word, as ``build_wordnet_revdict.py`` chose it): ``noun.animal``,
``noun.food``, ... WordNet's lexicographers sorted every synset into one of 26 noun
files by its meaning, so the file is a category label made by hand, independent of
the embeddings and of any lexical match. The build checks that every stored gloss is
the gloss of the synset it labels.
"""

from pathlib import Path

import numpy as np

from build_wordnet_revdict import WORDNET, noun_synsets, usable

DATA = Path(__file__).resolve().parents[1] / "skqbnorm" / "datasets" / "data"
OUTPUT = DATA / "wordnet_categories.npz"
#: WordNet 3.0's noun lexicographer files, by number (lexnames(5WN): files 3 to 28).
NOUN_FILES = {
    3: "noun.Tops", 4: "noun.act", 5: "noun.animal", 6: "noun.artifact", 7: "noun.attribute",
    8: "noun.body", 9: "noun.cognition", 10: "noun.communication", 11: "noun.event",
    12: "noun.feeling", 13: "noun.food", 14: "noun.group", 15: "noun.location",
    16: "noun.motive", 17: "noun.object", 18: "noun.person", 19: "noun.phenomenon",
    20: "noun.plant", 21: "noun.possession", 22: "noun.process", 23: "noun.quantity",
    24: "noun.relation", 25: "noun.shape", 26: "noun.state", 27: "noun.substance",
    28: "noun.time",
}


def lexicographer_files(path=WORDNET):
    """The lexicographer file number of every synset, in the order noun_synsets reads them."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("  "):  # noun_synsets skips the same licence header
            yield int(line.split()[1])


def main():
    revdict = np.load(DATA / "wordnet_revdict.npz", allow_pickle=False)
    words = np.concatenate([revdict["gallery_words"], revdict["gallery_bank_words"]])
    glosses = np.concatenate([revdict["query_glosses"],
                              revdict["bank_glosses"][: len(revdict["gallery_bank_words"])]])
    first = {}
    for (word, definition), number in zip(noun_synsets(), lexicographer_files(), strict=True):
        if usable(word, definition):
            first.setdefault(word, (definition, number))
    mismatched = [w for w, g in zip(words, glosses, strict=True) if first[str(w)][0] != str(g)]
    if mismatched:
        raise SystemExit(f"{len(mismatched)} stored glosses are not their word's first synset's: "
                         f"{mismatched[:5]}")
    categories = np.array([NOUN_FILES[first[str(w)][1]] for w in words])
    np.savez_compressed(OUTPUT, words=words, categories=categories)
    names, counts = np.unique(categories, return_counts=True)
    print(f"{len(words)} nouns, {len(names)} files -> {OUTPUT} ({OUTPUT.stat().st_size} bytes)")
    print(", ".join(f"{n} {c}" for n, c in zip(names, counts, strict=True)))


if __name__ == "__main__":
    main()
