"""The bundled and generated datasets."""

from importlib import resources

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skqbnorm import DynamicInvertedSoftmax, InvertedSoftmax
from skqbnorm.datasets import (
    load_digits_reranking,
    load_digits_retrieval,
    load_wordnet_revdict,
    make_hubness_sims,
)
from skqbnorm.metrics import retrieval_metrics


def test_wordnet_revdict_loads_and_is_consistent():
    data = load_wordnet_revdict()
    sizes = {"gallery": 2000, "query": 2000, "bank": 4000, "far_bank": 2000, "gallery_bank": 3000}
    for name, rows in sizes.items():
        embeddings = data[f"{name}_embeddings"]
        assert embeddings.shape == (rows, 384) and embeddings.dtype == np.float32
        assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=2e-3)  # float16 storage
    assert len(data.gallery_words) == len(set(data.gallery_words)) == 2000
    assert len(data.query_glosses) == 2000 and len(data.bank_glosses) == 4000
    assert "WordNet" in data.provenance["wordnet"]
    assert "bank_glosses[i]" in data.provenance["gallery_bank"]
    # Definitions really retrieve their words, far above chance (0.05%).
    sims = data.query_embeddings @ data.gallery_embeddings.T
    assert retrieval_metrics(sims, data.query_gt)["R@1"] > 20


def test_wordnet_gallery_bank_is_outside_the_gallery():
    data = load_wordnet_revdict()
    words = data.gallery_bank_words
    assert len(words) == len(set(words)) == 3000
    assert set(words).isdisjoint(data.gallery_words)
    # Distinct words, distinct vectors: no gallery-bank row copies a gallery row.
    cross_sims = data.gallery_bank_embeddings @ data.gallery_embeddings.T
    assert cross_sims.max() < 0.99


def test_wordnet_gallery_bank_word_i_is_defined_by_bank_gloss_i():
    data = load_wordnet_revdict()
    n_words = len(data.gallery_bank_words)
    sims = data.bank_embeddings[:n_words] @ data.gallery_bank_embeddings.T
    paired = np.diag(sims).mean()
    unpaired = (sims.sum() - np.trace(sims)) / (n_words * (n_words - 1))
    assert paired > unpaired + 0.2  # 0.34 against 0.08
    # A training retrieval task: each gloss finds its own word far above chance (0.03%),
    # which fails if the words were stored shifted or in another order than the glosses.
    assert retrieval_metrics(sims, np.arange(n_words))["R@1"] > 20


def test_wordnet_file_stays_under_ten_megabytes():
    data_file = resources.files("skqbnorm.datasets").joinpath("data", "wordnet_revdict.npz")
    with resources.as_file(data_file) as path:
        assert path.stat().st_size < 10_000_000


def test_in_domain_querybank_helps_on_wordnet():
    data = load_wordnet_revdict()
    sims = data.query_embeddings @ data.gallery_embeddings.T
    raw = retrieval_metrics(sims, data.query_gt)["R@1"]
    for normaliser in (InvertedSoftmax(), DynamicInvertedSoftmax()):
        normaliser.fit(data.bank_embeddings, gallery=data.gallery_embeddings)
        assert retrieval_metrics(normaliser.transform(sims), data.query_gt)["R@1"] > raw + 1


def test_digits_retrieval_task_has_hubs_that_normalisation_corrects():
    data = load_digits_retrieval()
    raw = retrieval_metrics(data.query_sims, data.query_gt)["R@1"]
    normalised = DynamicInvertedSoftmax().fit(data.bank_sims).transform(data.query_sims)
    assert retrieval_metrics(normalised, data.query_gt)["R@1"] > raw + 5


@pytest.mark.parametrize("call, message", [
    (lambda: load_digits_retrieval(n_gallery=0.5), r"'n_gallery' parameter of load_digits_retrieval .* \[1, 1796\]"),
    (lambda: load_digits_retrieval(n_gallery=1797), r"'n_gallery' parameter .* \[1, 1796\]. Got 1797"),
    (lambda: load_digits_retrieval(drop=1.5), r"'drop' parameter .* \[0.0, 1.0\]"),
    (lambda: load_digits_retrieval(noise=-1.0), r"'noise' parameter"),
    (lambda: load_digits_retrieval(dtype=int), r"dtype must be a float dtype such as np.float32; got int64"),
    (lambda: load_digits_reranking(n_pool=0), r"'n_pool' parameter of load_digits_reranking"),
    (lambda: load_digits_reranking(n_pool=5000), r"n_pool=5000 exceeds the 1777 digits left unlabelled"),
    (lambda: load_digits_reranking(n_labelled_per_class=175), r"'n_labelled_per_class' .* \[1, 174\]"),
    (lambda: make_hubness_sims(10, 0, 20), r"'n_gallery' parameter of make_hubness_sims"),
    (lambda: make_hubness_sims(10, 5, 20, hub_spread=-1.0), r"'hub_spread' parameter"),
    (lambda: make_hubness_sims(10, 5, 20, scale=0.0), r"'scale' parameter"),
    (lambda: make_hubness_sims(10, 5, 20, dtype=np.int32), r"dtype must be a float dtype"),
    (lambda: make_hubness_sims(True, 5, 20), r"'n_queries' parameter"),
    (lambda: make_hubness_sims(10, 5, -1), r"'n_bank' parameter"),
])
def test_bad_loader_arguments_are_named(call, message):
    # numpy or scikit-learn internals answered before (test_size, "high <= 0"), or an
    # integer dtype silently gave matrices of zeros.
    with pytest.raises(ValueError, match=message):
        call()
