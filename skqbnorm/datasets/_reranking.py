"""Reranking tasks from real labelled collections: a text engine queried by example, or
an engine that knows relevance only through noise."""

from numbers import Integral, Real

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import validate_params

from .._core import row_top_k_indices
from .._validation import NotBool
from ._wordnet import load_wordnet_revdict, packaged_arrays

#: Fewest items a category needs to be a query (its examples come out of them).
MIN_EMOJI, MIN_NOUNS = 10, 20
#: The loaders' parameters, alike for both tasks.
PARAMETERS = {
    "n_items": [NotBool(Integral, 2, None, closed="left")],
    "n_examples": [NotBool(Integral, 1, None, closed="left")],
    "noise": [NotBool(Real, 0, None, closed="left"), None],
    "random_state": ["random_state"],
}


def query_by_example(texts, features, labels, *, min_members, n_items, n_examples, noise,
                     random_state):
    """Stacked reranking lists, one per category of at least ``min_members`` items.

    A query is a category; ``n_examples`` of its items, drawn at random, are the
    query's examples and leave the collection. A lexical engine scores every other
    item by the cosine similarity of its text to the examples' mean, in TF-IDF
    weighted character 3- to 5-grams (within words) fitted on the whole collection.
    The query's list is the engine's top ``n_items``; relevant are the category's
    items in it, and each item carries its ``features``. With ``noise`` set,
    :func:`noisy_engine` ranks the whole collection instead (no examples).
    """
    rng = check_random_state(random_state)
    names, counts = np.unique(labels, return_counts=True)
    queries = names[counts >= min_members]
    if noise is not None:
        data = noisy_engine(labels, queries, n_items=n_items, noise=noise, rng=rng)
        return Bunch(**data, features=features[data.item_ids],
                     examples=np.empty((len(queries), 0), dtype=np.intp))
    if n_examples >= min_members:
        raise ValueError(
            f"n_examples={n_examples} must be below {min_members}, the fewest items of a "
            "query's category, so that every category keeps relevant items to find."
        )
    if n_items > len(texts) - n_examples:
        raise ValueError(
            f"n_items={n_items} exceeds the {len(texts) - n_examples} items left in the "
            f"collection of {len(texts)} after the n_examples={n_examples} examples."
        )
    vectors = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True,
                              dtype=np.float64).fit_transform(texts)
    examples = [rng.choice(np.flatnonzero(labels == query), n_examples, replace=False)
                for query in queries]
    centroids = normalize(np.vstack([np.asarray(vectors[rows].mean(axis=0)) for rows in examples]))
    similarity = np.asarray((vectors @ centroids.T).T)  # (n_queries, n_texts)
    for row, rows in enumerate(examples):
        similarity[row, rows] = -np.inf  # an example is the query, not a result
    # The engine's top n_items, best first; ties broken by the collection's order.
    lists = row_top_k_indices(similarity, n_items)[0]
    groups = np.repeat(np.arange(len(queries)), n_items)
    return Bunch(
        features=features[lists.ravel()],
        initial_scores=np.take_along_axis(similarity, lists, axis=1).ravel(),
        groups=groups,
        relevance=labels[lists.ravel()] == queries[groups],
        item_ids=lists.ravel(),
        query_names=queries,
        examples=np.array(examples),
    )


def noisy_engine(labels, queries, *, n_items, noise, rng):
    """Stacked lists of an engine that knows relevance only through noise.

    Every item's score for a query is the indicator of the query's category plus
    Gaussian noise of standard deviation ``noise``; a query's list is its top
    ``n_items``, best first. Returns ``initial_scores``, ``groups``, ``relevance``,
    ``item_ids`` and ``query_names``.
    """
    if n_items > len(labels):
        raise ValueError(f"n_items={n_items} exceeds the {len(labels)} items of the collection.")
    relevant = labels[None, :] == queries[:, None]
    scores = relevant + noise * rng.standard_normal(relevant.shape)
    lists = row_top_k_indices(scores, n_items)[0]
    groups = np.repeat(np.arange(len(queries)), n_items)
    return Bunch(
        initial_scores=np.take_along_axis(scores, lists, axis=1).ravel(),
        groups=groups,
        relevance=labels[lists.ravel()] == queries[groups],
        item_ids=lists.ravel(),
        query_names=queries,
    )


@validate_params(PARAMETERS, prefer_skip_nested_validation=True)
def load_emoji_reranking(*, n_items=300, n_examples=3, noise=None, random_state=0):
    """Visual reranking of emoji found by their names, one query per emoji subgroup.

    The collection is the 1,849 emoji of Unicode 15.0's test file (less skin-tone and
    hair-style variants) with their CLDR short names ("grinning face", "dog face",
    "cherries") and Unicode's subgroups ("face-smiling", "animal-mammal",
    "food-fruit"). A query is one of the 57 subgroups of at least 10 emoji: a text
    engine, given the names of ``n_examples`` of its emoji drawn at random, scores
    every other emoji by the TF-IDF cosine similarity (character 3- to 5-grams) of
    its name to theirs, and returns its top ``n_items``. Relevant are the query's
    subgroup's emoji; the features are the emoji's Noto Color Emoji drawings, 16 x 16
    RGB pixels scaled to [0, 1]. Names mislead the engine ("dog face" is near the
    smileys' "... face"), while drawings of one subgroup look alike.

    Parameters
    ----------
    n_items : int, default=300
        Items in every query's list (the engine's top ones), at least 2 and at most
        the emoji left after the examples (with ``noise``, all 1,849).
    n_examples : int, default=3
        Example emoji given to the engine per query, >= 1 and below 10 (the fewest
        emoji of a query's subgroup); unused with ``noise``.
    noise : float or None, default=None
        None: the name engine above. A float >= 0: instead an engine that knows
        relevance only through noise (the indicator of the query's subgroup plus
        Gaussian noise of this standard deviation, as in
        :func:`load_glyph_reranking`) ranks every emoji; there are no examples.
    random_state : int, RandomState instance or None, default=0
        Seed of the examples, or of the noise.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``features`` (57 n_items, 768), ``initial_scores`` (57 n_items,),
        ``groups`` (the query of each row, 0 to 56), ``relevance`` (bool),
        ``item_ids`` (each row's emoji, an index into ``names``), ``query_names``
        (the subgroup of each query), ``examples`` (57, n_examples) (the indices
        of each query's examples; (57, 0) with ``noise``), ``names``, ``subgroups`` and ``DESCR``,
        lists stacked query after query, each in the engine's order.

    Notes
    -----
    ``skqbnorm/datasets/data/README.md`` gives the sources and licences; the
    source repository's ``scripts/build_emoji_reranking.py`` builds the file.

    Examples
    --------
    >>> from skqbnorm.datasets import load_emoji_reranking
    >>> from skqbnorm.metrics import mean_average_precision
    >>> data = load_emoji_reranking()
    >>> data.features.shape
    (17100, 768)
    >>> str(data.query_names[0]), int(data.relevance[data.groups == 0].sum())
    ('alphanum', 35)
    >>> round(mean_average_precision(data.initial_scores, data.relevance, data.groups), 3)
    0.397
    """
    arrays = packaged_arrays("emoji_reranking.npz")
    features = arrays["images"].reshape(len(arrays["images"]), -1) / 255.0
    data = query_by_example(arrays["names"], features, arrays["subgroups"], min_members=MIN_EMOJI,
                            n_items=n_items, n_examples=n_examples, noise=noise,
                            random_state=random_state)
    return Bunch(**data, names=arrays["names"], subgroups=arrays["subgroups"],
                 DESCR=load_emoji_reranking.__doc__.split("\n\n")[1])


@validate_params(PARAMETERS, prefer_skip_nested_validation=True)
def load_wordnet_reranking(*, n_items=300, n_examples=3, noise=None, random_state=0):
    """Reranking of nouns found by their definitions, one query per WordNet category.

    The collection is the 5,000 nouns with embeddings in
    :func:`load_wordnet_revdict` (its gallery and gallery-bank words), each with its
    definition (gloss) and the lexicographer file WordNet 3.0 sorts its synset into
    ("noun.animal", "noun.food", "noun.artifact"). A query is one of the 23 files of
    at least 20 of the nouns: a text engine, given the definitions of
    ``n_examples`` of its nouns drawn at random, scores every other noun by the
    TF-IDF cosine similarity (character 3- to 5-grams) of its definition to theirs,
    and returns its top ``n_items``. Relevant are the query's file's nouns; the
    features are the embeddings of the nouns themselves (all-MiniLM-L6-v2 on the
    word alone, 384 dimensions): a second view that never reads the definitions.

    Parameters
    ----------
    n_items : int, default=300
        Items in every query's list (the engine's top ones), at least 2 and at most
        the nouns left after the examples (with ``noise``, all 5,000).
    n_examples : int, default=3
        Example nouns given to the engine per query, >= 1 and below 20 (the fewest
        nouns of a query's file); unused with ``noise``.
    noise : float or None, default=None
        None: the definition engine above. A float >= 0: instead an engine that
        knows relevance only through noise (the indicator of the query's file plus
        Gaussian noise of this standard deviation, as in
        :func:`load_glyph_reranking`) ranks every noun; there are no examples.
    random_state : int, RandomState instance or None, default=0
        Seed of the examples, or of the noise.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``features`` (23 n_items, 384), ``initial_scores`` (23 n_items,),
        ``groups`` (the query of each row, 0 to 22), ``relevance`` (bool),
        ``item_ids`` (each row's noun, an index into ``words``), ``query_names``
        (the file of each query), ``examples`` (23, n_examples) (the indices of
        each query's examples; (23, 0) with ``noise``), ``words``, ``glosses``, ``categories`` and
        ``DESCR``, lists stacked query after query, each in the engine's order.

    Notes
    -----
    ``skqbnorm/datasets/data/README.md`` gives the sources and licences; the
    source repository's ``scripts/build_wordnet_categories.py`` builds the file.

    Examples
    --------
    >>> from skqbnorm.datasets import load_wordnet_reranking
    >>> from skqbnorm.metrics import mean_average_precision
    >>> data = load_wordnet_reranking()
    >>> data.features.shape
    (6900, 384)
    >>> str(data.query_names[1]), int(data.relevance[data.groups == 1].sum())
    ('noun.animal', 116)
    >>> round(mean_average_precision(data.initial_scores, data.relevance, data.groups), 3)
    0.423
    """
    revdict = load_wordnet_revdict()
    labels = packaged_arrays("wordnet_categories.npz")
    words = np.concatenate([revdict.gallery_words, revdict.gallery_bank_words])
    if not np.array_equal(words, labels["words"]):
        raise RuntimeError("wordnet_categories.npz does not label wordnet_revdict.npz's nouns; "
                           "rebuild it with scripts/build_wordnet_categories.py.")
    glosses = np.concatenate([revdict.query_glosses, revdict.bank_glosses[: len(revdict.gallery_bank_words)]])
    features = np.concatenate([revdict.gallery_embeddings, revdict.gallery_bank_embeddings]).astype(np.float64)
    data = query_by_example(glosses, features, labels["categories"], min_members=MIN_NOUNS,
                            n_items=n_items, n_examples=n_examples, noise=noise,
                            random_state=random_state)
    return Bunch(**data, words=words, glosses=glosses, categories=labels["categories"],
                 DESCR=load_wordnet_reranking.__doc__.split("\n\n")[1])


@validate_params(
    {
        "n_items": [NotBool(Integral, 2, None, closed="left")],
        "noise": [NotBool(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def load_glyph_reranking(*, n_items=300, noise=1.0, random_state=0):
    """Visual reranking of printed characters found by a noisy engine, one query per character.

    The collection is 62 characters (``a-z``, ``A-Z``, ``0-9``) each drawn in 291
    fonts of 19 Debian font packages (18,042 items). A query is a character: a
    weak text-like engine scores every item by the indicator of its character
    plus Gaussian noise of standard deviation ``noise`` (it knows relevance only
    through that noise), and returns its top ``n_items``. Relevant are the
    renderings of the query's character; the features are the renderings, 16 x 16
    grey pixels of ink scaled to [0, 1]. Drawings of one character look alike
    across most fonts, so the features carry relevance the engine lacks (look-alikes
    such as ``o``, ``O`` and ``0`` or ``l``, ``I`` and ``1`` do not separate).

    Parameters
    ----------
    n_items : int, default=300
        Items in every query's list (the engine's top ones), in [2, 18042].
    noise : float, default=1.0
        Standard deviation of the engine's noise, >= 0 (0: a perfect engine).
    random_state : int, RandomState instance or None, default=0
        Seed of the engine's noise.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``features`` (62 n_items, 256), ``initial_scores`` (62 n_items,),
        ``groups`` (the query of each row, 0 to 61), ``relevance`` (bool),
        ``item_ids`` (each row's rendering, ``font * 62 + character``),
        ``query_names`` (the character of each query), ``characters``, ``fonts``
        and ``DESCR``, lists stacked query after query, each in the engine's order.

    Notes
    -----
    ``skqbnorm/datasets/data/README.md`` gives the sources and licences; the
    source repository's ``scripts/build_glyph_reranking.py`` builds the file.

    Examples
    --------
    >>> from skqbnorm.datasets import load_glyph_reranking
    >>> from skqbnorm.metrics import mean_average_precision
    >>> data = load_glyph_reranking()
    >>> data.features.shape
    (18600, 256)
    >>> str(data.query_names[0]), int(data.relevance[data.groups == 0].sum())
    ('a', 41)
    >>> round(mean_average_precision(data.initial_scores, data.relevance, data.groups), 3)
    0.201
    """
    arrays = packaged_arrays("glyph_reranking.npz")
    images, characters = arrays["images"], arrays["characters"]
    n_fonts, n_characters = images.shape[:2]
    character = np.tile(np.arange(n_characters), n_fonts)  # item i: font i // 62, character i % 62
    data = noisy_engine(character, np.arange(n_characters), n_items=n_items, noise=noise,
                        rng=check_random_state(random_state))
    data.query_names = characters
    return Bunch(
        **data,
        features=images.reshape(n_fonts * n_characters, -1)[data.item_ids] / 255.0,
        characters=characters,
        fonts=arrays["fonts"],
        DESCR=load_glyph_reranking.__doc__.split("\n\n")[1],
    )
