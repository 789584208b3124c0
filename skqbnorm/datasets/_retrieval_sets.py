"""Retrieval sets of several shapes, from weak to strong encoders.

Some ship with the package; the others are built by ``scripts/build_retrieval_sets.py``
into a data folder and read from there.
"""

import hashlib
import json
import os
from importlib import resources
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

BUILD = "python scripts/build_retrieval_sets.py --only {name} --out {home}"
MINILM = "all-MiniLM-L6-v2"
TFIDF = "character 2- to 4-gram TF-IDF + TruncatedSVD"
GETTEXT_LICENCE = ("the gettext catalogues' own licences (mostly GPL/LGPL, per package); "
                   "only vectors and catalogue names are stored, not the texts")
WORDNET_LICENCE = "WordNet 3.0 licence (wordnet_copyright.txt)"

RETRIEVAL_SETS = {
    "wordnet_revdict": {
        "description": "WordNet noun definition -> the noun (reverse dictionary)",
        "encoder": MINILM, "dim": 384, "raw_recall_at_1": 27.75,
        "sizes": {"query": 2000, "gallery": 2000, "bank": 4000, "far_bank": 2000, "gallery_bank": 3000},
        "bank": "4,000 other nouns' definitions", "far_bank": "2,000 gettext UI messages (English)",
        "source": "WordNet 3.0 (Debian wordnet-base 1:3.0-37); gettext catalogues",
        "licence": WORDNET_LICENCE, "ships": True, "file_bytes": 9_571_768,
        "sha256": "97704e89555b800ebbbc3fa78bbdbe12444e2d74dd3910d12a054e96f2b315fa"},
    "wordnet_example_minilm": {
        "description": "WordNet usage example -> the definition of its synset (all parts of speech)",
        "encoder": MINILM, "dim": 384, "raw_recall_at_1": 19.40,
        "sizes": {"query": 1500, "gallery": 1500, "bank": 3000, "far_bank": 2000, "gallery_bank": 1500},
        "bank": "3,000 other synsets' examples", "far_bank": "2,000 gettext UI messages (English)",
        "source": "WordNet 3.0 (Debian wordnet-base 1:3.0-37); gettext catalogues",
        "licence": WORDNET_LICENCE, "ships": False, "file_bytes": 7_006_270,
        "sha256": "854ace232919c565fc02a31eb12cfe93b1066025d9f77f74a378a3bdb112b723"},
    "freedict_en_fr_tfidf": {
        "description": "English headword -> its first French translation (spelled differently)",
        "encoder": TFIDF, "dim": 128, "raw_recall_at_1": 21.80,
        "sizes": {"query": 1500, "gallery": 1500, "bank": 3000, "far_bank": 2000, "gallery_bank": 3000},
        "bank": "3,000 other headwords", "far_bank": "2,000 WordNet nouns not in the dictionary",
        "source": "FreeDict English-French 0.1.6 (Debian dict-freedict-eng-fra 2022.04.21-1)",
        "licence": "GPL-2+ (FreeDict); not shipped", "ships": False, "file_bytes": 2_609_992,
        "sha256": "6553cca95eebf1a2dbba8dd30805abf7ef39c77f8e1c05e298e9b10f1fa21b3d"},
    "emoji_keyword_minilm": {
        "description": "one or two CLDR keywords of an emoji (not words of its name) -> its short name",
        "encoder": MINILM, "dim": 384, "raw_recall_at_1": 33.93,
        "sizes": {"query": 666, "gallery": 666, "bank": 759, "far_bank": 1000, "gallery_bank": 506},
        "bank": "759 keyword queries of 506 other emoji",
        "far_bank": "1,000 gettext UI messages (English)",
        "source": "Unicode CLDR 41 annotations (Debian unicode-cldr-core 41-0.1), Unicode 15.0 "
               "emoji-test.txt (unicode-data 15.0.0-1); gettext catalogues",
        "licence": "Unicode data files licence (unicode_copyright.txt)", "ships": True,
        "file_bytes": 2_576_598,
        "sha256": "ca367f94b4c1d5255646cd11c6366516f049ef422de16840d0e72816615e31ef"},
    "gettext_en_fr_tfidf": {
        "description": "English UI message (3 to 20 words) -> its French translation",
        "encoder": TFIDF, "dim": 128, "raw_recall_at_1": 41.73,
        "sizes": {"query": 1500, "gallery": 1500, "bank": 3000, "far_bank": 2000, "gallery_bank": 3000},
        "bank": "3,000 other English messages", "far_bank": "2,000 WordNet noun definitions",
        "source": "gettext catalogues under /usr/share/locale/fr (Debian bookworm); WordNet 3.0",
        "licence": GETTEXT_LICENCE, "ships": True, "file_bytes": 2_627_087,
        "sha256": "d7a83265e210bdf8e99a5ec75521d2c4ca354abda16c8eceee2376e2bca46a0e"},
    "gettext_en_fr_minilm": {
        "description": "English UI message (3 to 20 words) -> its French translation, "
                    "by an English-only encoder",
        "encoder": MINILM, "dim": 384, "raw_recall_at_1": 51.73,
        "sizes": {"query": 1500, "gallery": 1500, "bank": 3000, "far_bank": 2000, "gallery_bank": 2000},
        "bank": "3,000 other English messages", "far_bank": "2,000 WordNet noun definitions",
        "source": "gettext catalogues under /usr/share/locale/fr (Debian bookworm); WordNet 3.0",
        "licence": GETTEXT_LICENCE, "ships": False, "file_bytes": 7_107_186,
        "sha256": "94fc40f933d7f3d6976dfdf435053dddbdb2d7d8259cb8037d9bd234732505e5"},
    "gettext_pt_ptbr_tfidf": {
        "description": "European Portuguese UI message -> the Brazilian Portuguese translation "
                    "of the same English message, where the two differ",
        "encoder": TFIDF, "dim": 128, "raw_recall_at_1": 77.07,
        "sizes": {"query": 1500, "gallery": 1500, "bank": 3000, "far_bank": 2000, "gallery_bank": 3000},
        "bank": "3,000 other European Portuguese messages",
        "far_bank": "2,000 WordNet noun definitions (English)",
        "source": "gettext catalogues under /usr/share/locale/pt and pt_BR (Debian bookworm); "
               "WordNet 3.0",
        "licence": GETTEXT_LICENCE, "ships": True, "file_bytes": 2_624_590,
        "sha256": "e3a39a10c7f52aac5bcc8476dfe4ce12d635add33acac5233c11a2f0c6c7e169"},
    "gettext_en_gb_minilm": {
        "description": "US English UI message -> its British (or Canadian, Australian) English "
                    "version, where the two differ",
        "encoder": MINILM, "dim": 384, "raw_recall_at_1": 94.20,
        "sizes": {"query": 1000, "gallery": 1000, "bank": 572, "far_bank": 1500, "gallery_bank": 572},
        "bank": "572 other US English messages", "far_bank": "1,500 WordNet noun definitions",
        "source": "gettext catalogues under /usr/share/locale/en_GB, en_CA, en_AU, en_NZ "
               "(Debian bookworm); WordNet 3.0",
        "licence": GETTEXT_LICENCE, "ships": True, "file_bytes": 3_298_985,
        "sha256": "6571ba2dc407daee14f5386deba2351990089df1f6aa680e48a032f2db8874c1"},
}

_ARRAYS = ("query", "gallery", "bank", "far_bank", "gallery_bank")


def content_sha256(arrays):
    """SHA-256 of a mapping of arrays: their names, dtypes, shapes and bytes, by name.

    Unlike the digest of an ``.npz`` file it does not depend on the zip archive's
    timestamps, so a rebuild that gives the same arrays gives the same digest.
    """
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _data_home(data_home):
    if data_home is None:
        data_home = os.environ.get("SKQBNORM_DATA", Path.home() / "skqbnorm_data")
    return Path(data_home).expanduser()


def list_retrieval_sets():
    """The retrieval sets that :func:`load_retrieval_set` loads, one dict each.

    Returns
    -------
    sets : list of dict
        In order of raw R@1 (weakest first), each with ``name``, ``description``,
        ``encoder``, ``dim``, ``sizes`` (rows of ``query``, ``gallery``, ``bank``,
        ``far_bank`` and ``gallery_bank``), ``bank`` and ``far_bank`` (what the
        in-domain and out-of-domain querybanks hold), ``raw_recall_at_1`` (R@1 in %
        of the raw similarities on the test queries), ``source``, ``licence``,
        ``ships`` (whether the package includes it; the others are built by
        ``scripts/build_retrieval_sets.py``), ``file_bytes`` and ``sha256`` (of the
        arrays, as :func:`load_retrieval_set` checks them).

    Examples
    --------
    >>> from skqbnorm.datasets import list_retrieval_sets
    >>> [(s["name"], s["ships"]) for s in list_retrieval_sets()][:3]
    [('wordnet_example_minilm', False), ('freedict_en_fr_tfidf', False), ('wordnet_revdict', True)]
    """
    sets = [dict(name=name, **{k: (dict(v) if isinstance(v, dict) else v) for k, v in entry.items()})
            for name, entry in RETRIEVAL_SETS.items()]
    return sorted(sets, key=lambda entry: entry["raw_recall_at_1"])


def _read(name, data_home):
    entry = RETRIEVAL_SETS[name]
    filename = f"{name}.npz"
    if entry["ships"]:
        resource = resources.files("skqbnorm.datasets").joinpath("data", filename)
        with resource.open("rb") as handle:
            return dict(np.load(handle, allow_pickle=False)), f"skqbnorm/datasets/data/{filename}"
    home = _data_home(data_home)
    path = home / filename
    if not path.is_file():
        raise ValueError(
            f"The retrieval set {name!r} does not ship with skqbnorm and {path} does not exist. "
            f"Build it (the Debian and PyPI packages it needs are listed at the top of the "
            f"script) from a checkout of skqbnorm with:\n    {BUILD.format(name=name, home=home)}")
    with np.load(path, allow_pickle=False) as arrays:
        return dict(arrays), str(path)


def load_retrieval_set(name, *, data_home=None, verify=True):
    """Load a retrieval set by name: test queries, their gallery and three banks.

    Each set has test queries with a one-to-one gallery (query ``i`` is answered by
    gallery item ``i``), an in-domain querybank (queries of the same kind from a
    training split, whose answers are not in the gallery), an out-of-domain querybank
    (texts of another kind, embedded by the same encoder) and a gallery bank (gallery
    samples outside the gallery, the answers of in-domain bank queries). The sets span
    encoders from weak to strong: :func:`list_retrieval_sets` gives each one's task,
    sizes, raw R@1, source and licence. Embeddings are L2-normalised (stored as float16,
    returned as float32), so ``query_embeddings @ gallery_embeddings.T`` is the cosine
    similarity matrix.

    Sets that ship with the package load from it; the others load from ``data_home``
    once the source repository's ``scripts/build_retrieval_sets.py`` has built them
    there.

    Parameters
    ----------
    name : str
        A name from :func:`list_retrieval_sets`; ``"wordnet_revdict"`` gives the
        data of :func:`load_wordnet_revdict` with the fields below added.
    data_home : str or path-like, default=None
        The folder of the built sets; by default the environment variable
        ``SKQBNORM_DATA``, else ``~/skqbnorm_data``. Not used for shipped sets.
    verify : bool, default=True
        Check the arrays' SHA-256 against the catalogue's. A set rebuilt on another
        CPU may differ in the last float16 digit of an embedding (the sentence
        encoder's rounding depends on the CPU); pass ``False`` to load it anyway.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``query_embeddings``, ``gallery_embeddings``, ``bank_embeddings`` (in-domain
        bank), ``far_bank_embeddings`` (out-of-domain bank), ``gallery_bank_embeddings``,
        ``query_gt`` (the gallery index of each query's answer), ``bank_gt`` (the
        gallery-bank index of each in-domain bank query's answer, ``-1`` where it is
        not in the gallery bank), the texts where the set stores them
        (``query_texts``, ``gallery_texts``, ``bank_texts``, ``gallery_bank_texts``),
        ``query_domains`` and ``bank_domains`` (message catalogues) where stored,
        ``provenance`` (dict), ``name``, ``description``, ``encoder``, ``source``,
        ``licence`` and ``DESCR``.

    Raises
    ------
    ValueError
        For an unknown name, a built set missing from ``data_home`` (the message
        gives the command that builds it), or arrays whose SHA-256 differs from the
        catalogue's.

    Examples
    --------
    >>> from skqbnorm.datasets import load_retrieval_set
    >>> data = load_retrieval_set("gettext_en_gb_minilm")
    >>> data.query_embeddings.shape, data.gallery_embeddings.shape
    ((1000, 384), (1000, 384))
    >>> data.bank_embeddings.shape, data.far_bank_embeddings.shape
    ((572, 384), (1500, 384))
    >>> scores = data.query_embeddings @ data.gallery_embeddings.T
    >>> round(float((scores.argmax(axis=1) == data.query_gt).mean()), 3)
    0.942
    """
    if name not in RETRIEVAL_SETS:
        raise ValueError(f"Unknown retrieval set name={name!r}; expected one of {sorted(RETRIEVAL_SETS)}.")
    entry = RETRIEVAL_SETS[name]
    arrays, where = _read(name, data_home)
    if verify:
        digest = content_sha256(arrays)
        if digest != entry["sha256"]:
            raise ValueError(
                f"The arrays of {where} have SHA-256 {digest}, not the {entry['sha256']} of "
                f"the retrieval set {name!r}: the file is damaged or from another build. "
                f"Rebuild it with {BUILD.format(name=name, home=_data_home(data_home))}, "
                f"or pass verify=False to load it as it is.")
    n_bank_gallery = len(arrays["gallery_bank_embeddings"])
    n_bank = len(arrays["bank_embeddings"])
    if "bank_gt" in arrays:
        bank_gt = arrays.pop("bank_gt").astype(np.intp)
    else:  # bank query i is answered by gallery-bank item i, for the first ones
        bank_gt = np.where(np.arange(n_bank) < n_bank_gallery, np.arange(n_bank), -1)
    extra = {"name": name, "description": entry["description"], "encoder": entry["encoder"],
                 "source": entry["source"], "licence": entry["licence"], "bank_gt": bank_gt}
    if name == "wordnet_revdict":
        from ._wordnet import load_wordnet_revdict

        data = load_wordnet_revdict()
        data.update(extra)
        return data
    data = Bunch(**{f"{part}_embeddings": arrays.pop(f"{part}_embeddings").astype(np.float32)
                    for part in _ARRAYS})
    data.query_gt = np.arange(len(data.query_embeddings))
    data.provenance = json.loads(str(arrays.pop("provenance")))
    data.update(arrays)  # texts and domains, where the set stores them
    data.update(extra)
    data.DESCR = (f"{name}: {entry['description']}. Encoder: {entry['encoder']} "
                  f"({entry['dim']} dimensions). In-domain bank: {entry['bank']}; out-of-domain "
                  f"bank: {entry['far_bank']}. Raw R@1 {entry['raw_recall_at_1']:.2f}%. "
                  f"Source: {entry['source']}. Licence: {entry['licence']}.")
    return data
