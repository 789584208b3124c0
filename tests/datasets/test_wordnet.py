"""The bundled WordNet reverse-dictionary dataset."""

from importlib import resources

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skqbnorm import DynamicInvertedSoftmax, InvertedSoftmax
from skqbnorm.datasets import (
    load_wordnet_revdict,
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


@pytest.mark.slow
def test_in_domain_querybank_helps_on_wordnet():
    data = load_wordnet_revdict()
    sims = data.query_embeddings @ data.gallery_embeddings.T
    raw = retrieval_metrics(sims, data.query_gt)["R@1"]
    for normalizer in (InvertedSoftmax(), DynamicInvertedSoftmax()):
        normalizer.fit(data.bank_embeddings, gallery=data.gallery_embeddings)
        assert retrieval_metrics(normalizer.transform(sims), data.query_gt)["R@1"] > raw + 1
