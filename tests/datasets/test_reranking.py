"""The bundled reranking tasks: emoji found by name, WordNet nouns found by definition."""

from importlib import resources

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.feature_extraction.text import TfidfVectorizer

from skqbnorm.datasets import load_emoji_reranking, load_wordnet_reranking, load_wordnet_revdict
from skqbnorm.metrics import mean_average_precision

LOADERS = {
    "emoji": (load_emoji_reranking, "names", "subgroups", 57, 10),
    "wordnet": (load_wordnet_reranking, "glosses", "categories", 23, 20),
}


@pytest.fixture(scope="module", params=list(LOADERS))
def task(request):
    load, texts, labels, n_queries, min_members = LOADERS[request.param]
    data = load(n_items=40, n_examples=2, random_state=3)
    return data, data[texts], data[labels], n_queries, min_members


def test_lists_are_stacked_query_after_query(task):
    data, texts, labels, n_queries, _ = task
    n_rows = 40 * n_queries
    assert_array_equal(data.groups, np.repeat(np.arange(n_queries), 40))
    for name in ("features", "initial_scores", "relevance", "item_ids"):
        assert len(data[name]) == n_rows
    assert data.relevance.dtype == bool
    assert data.examples.shape == (n_queries, 2)
    assert len(texts) == len(labels)


def test_queries_are_the_categories_with_enough_items(task):
    data, _, labels, n_queries, min_members = task
    names, counts = np.unique(labels, return_counts=True)
    assert_array_equal(data.query_names, names[counts >= min_members])
    assert len(data.query_names) == n_queries


def test_relevance_is_the_items_category_and_examples_are_of_it(task):
    data, _, labels, _, _ = task
    assert_array_equal(data.relevance, labels[data.item_ids] == data.query_names[data.groups])
    assert np.all(labels[data.examples] == data.query_names[:, None])
    # An example is the query: it never appears among the query's results.
    for query, examples in enumerate(data.examples):
        assert not np.isin(examples, data.item_ids[data.groups == query]).any()


def test_initial_scores_are_the_engines_top_list(task):
    # Reference, query by query: the cosine of each item's TF-IDF vector to the
    # examples' mean vector; the list is the top of the non-examples.
    data, texts, _, _, _ = task
    vectors = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True).fit_transform(texts)
    for query in (0, len(data.query_names) - 1):
        centroid = np.asarray(vectors[data.examples[query]].mean(axis=0)).ravel()
        expected = vectors @ (centroid / np.linalg.norm(centroid))
        rows = data.groups == query
        assert_allclose(data.initial_scores[rows], expected[data.item_ids[rows]], atol=1e-12)
        others = np.setdiff1d(np.arange(len(texts)), np.concatenate([data.item_ids[rows], data.examples[query]]))
        assert expected[others].max() <= data.initial_scores[rows].min() + 1e-12
        assert np.all(np.diff(data.initial_scores[rows]) <= 0)  # the engine's order


def test_the_same_seed_gives_the_same_lists_and_another_seed_other_examples():
    first, again = load_emoji_reranking(n_items=20), load_emoji_reranking(n_items=20)
    assert_array_equal(first.item_ids, again.item_ids)
    assert_array_equal(first.initial_scores, again.initial_scores)
    other = load_emoji_reranking(n_items=20, random_state=1)
    assert not np.array_equal(first.examples, other.examples)


def test_emoji_features_are_the_drawings_and_labels_are_unicodes():
    data = load_emoji_reranking(n_items=10)
    assert data.features.shape == (570, 768)
    assert data.features.min() >= 0 and data.features.max() <= 1
    subgroup = dict(zip(data.names.tolist(), data.subgroups.tolist(), strict=True))
    assert subgroup["dog face"] == "animal-mammal"
    assert subgroup["grinning face"] == "face-smiling"
    assert subgroup["cherries"] == "food-fruit"
    # Two drawings differ: no emoji is stored twice.
    pixels = data.features[np.unique(data.item_ids, return_index=True)[1]]
    assert len(np.unique(pixels, axis=0)) == len(pixels)


def test_wordnet_features_are_the_words_own_embeddings():
    data, revdict = load_wordnet_reranking(n_items=10), load_wordnet_revdict()
    words = np.concatenate([revdict.gallery_words, revdict.gallery_bank_words])
    embeddings = np.concatenate([revdict.gallery_embeddings, revdict.gallery_bank_embeddings])
    assert_array_equal(data.words, words)
    assert_array_equal(data.features, embeddings[data.item_ids].astype(np.float64))
    category = dict(zip(data.words.tolist(), data.categories.tolist(), strict=True))
    assert category["tody"] == "noun.animal"  # WordNet 3.0: "tiny insectivorous West Indian bird"
    assert category["receptiveness"] == "noun.attribute"


@pytest.mark.parametrize("load", [load_emoji_reranking, load_wordnet_reranking])
def test_the_engine_beats_chance_but_leaves_room(load):
    data = load()
    initial = mean_average_precision(data.initial_scores, data.relevance, data.groups)
    chance = mean_average_precision(-np.arange(len(data.groups)) % 7, data.relevance, data.groups)
    assert chance + 0.1 < initial < 0.6


@pytest.mark.parametrize("name", ["emoji_reranking.npz", "wordnet_categories.npz"])
def test_files_stay_small(name):
    path = resources.files("skqbnorm.datasets").joinpath("data", name)
    assert path.stat().st_size < 2_000_000


@pytest.mark.parametrize("call, message", [
    (lambda: load_emoji_reranking(n_items=1), r"'n_items' parameter of load_emoji_reranking"),
    (lambda: load_emoji_reranking(n_items=1847), r"n_items=1847 exceeds the 1846 items left"),
    (lambda: load_emoji_reranking(n_examples=0), r"'n_examples' parameter"),
    (lambda: load_emoji_reranking(n_examples=10), r"n_examples=10 must be below 10"),
    (lambda: load_emoji_reranking(n_items=True), r"'n_items' parameter"),
    (lambda: load_wordnet_reranking(n_items=4999), r"n_items=4999 exceeds the 4997 items left"),
    (lambda: load_wordnet_reranking(n_examples=20), r"n_examples=20 must be below 20"),
    (lambda: load_wordnet_reranking(random_state="a"), r"'random_state' parameter"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("name", list(LOADERS))
def test_a_noisy_engine_ranks_the_whole_collection_by_indicator_plus_noise(name):
    # Reference: the same draws of a RandomState, each query's scores sorted in full.
    load, _, labels_name, n_queries, _ = LOADERS[name]
    data = load(n_items=40, noise=1.0, random_state=3)
    labels = data[labels_name]
    assert data.examples.shape == (n_queries, 0)
    scores = ((labels[None, :] == data.query_names[:, None])
              + np.random.RandomState(3).standard_normal((n_queries, len(labels))))
    expected = np.argsort(-scores, axis=1, kind="stable")[:, :40]
    assert_array_equal(data.query_names, load(n_items=40).query_names)  # the text engine's
    assert_array_equal(data.groups, np.repeat(np.arange(n_queries), 40))
    assert_array_equal(data.item_ids, expected.ravel())
    assert_array_equal(data.initial_scores, np.take_along_axis(scores, expected, axis=1).ravel())
    assert_array_equal(data.relevance, (labels[expected] == data.query_names[:, None]).ravel())
    # Each item carries its own features, as the text engine's lists give them.
    text = load(n_items=300)
    by_item = dict(zip(text.item_ids.tolist(), text.features, strict=True))
    shared = [row for row, item in enumerate(data.item_ids) if item in by_item]
    assert len(shared) > 100
    assert_array_equal(data.features[shared], [by_item[data.item_ids[row]] for row in shared])


@pytest.mark.parametrize("name", list(LOADERS))
def test_a_noiseless_engine_ranks_every_relevant_item_first(name):
    load = LOADERS[name][0]
    data = load(noise=0.0)
    assert mean_average_precision(data.initial_scores, data.relevance, data.groups) == 1.0
    with pytest.raises(ValueError, match=r"n_items=9999 exceeds the \d+ items of the collection"):
        load(n_items=9999, noise=1.0)
    with pytest.raises(ValueError, match=r"'noise' parameter of load_"):
        load(noise=-1.0)


# -- printed characters found by a noisy engine ------------------------------------


def test_glyph_lists_are_the_noisy_engines_top_items():
    from skqbnorm.datasets import load_glyph_reranking

    data = load_glyph_reranking(n_items=40, random_state=3)
    n_characters = len(data.characters)
    assert data.features.shape == (40 * n_characters, 256)
    assert data.features.min() >= 0 and data.features.max() <= 1
    character = data.item_ids % n_characters  # item i: font i // 62, character i % 62
    assert_array_equal(data.relevance, character == data.groups)
    for query in (0, 30, 61):  # each list: the engine's order, its top 40 of every rendering
        rows = data.groups == query
        assert np.all(np.diff(data.initial_scores[rows]) <= 0)
        assert len(np.unique(data.item_ids[rows])) == 40
    # Reference: the same RandomState draws over every rendering, sorted in full.
    every_character = np.tile(np.arange(n_characters), len(data.fonts))
    scores = ((every_character[None, :] == np.arange(n_characters)[:, None])
              + np.random.RandomState(3).standard_normal((n_characters, len(every_character))))
    expected = np.argsort(-scores, axis=1, kind="stable")[:, :40]
    assert_array_equal(data.item_ids, expected.ravel())
    assert_array_equal(data.initial_scores, np.take_along_axis(scores, expected, axis=1).ravel())
    again = load_glyph_reranking(n_items=40, random_state=3)
    assert_array_equal(again.initial_scores, data.initial_scores)
    assert not np.array_equal(load_glyph_reranking(n_items=40, random_state=4).item_ids, data.item_ids)


def test_a_noiseless_glyph_engine_ranks_every_relevant_item_first():
    from skqbnorm.datasets import load_glyph_reranking
    from skqbnorm.metrics import mean_average_precision

    data = load_glyph_reranking(n_items=300, noise=0.0)
    assert mean_average_precision(data.initial_scores, data.relevance, data.groups) == 1.0
    assert data.relevance.reshape(62, 300).sum(axis=1).tolist() == [291] * 62


def test_glyph_n_items_is_bounded_by_the_collection():
    from skqbnorm.datasets import load_glyph_reranking

    with pytest.raises(ValueError, match=r"n_items=20000 exceeds the 18042 items of the collection"):
        load_glyph_reranking(n_items=20000)
    with pytest.raises(ValueError, match=r"'n_items' parameter of load_glyph_reranking"):
        load_glyph_reranking(n_items=1)
