"""The bundled and generated datasets."""

import numpy as np
from numpy.testing import assert_allclose

from skqbnorm import DynamicInvertedSoftmax, InvertedSoftmax
from skqbnorm.datasets import load_digits_retrieval, load_wordnet_revdict
from skqbnorm.metrics import retrieval_metrics


def test_wordnet_revdict_loads_and_is_consistent():
    data = load_wordnet_revdict()
    for name, rows in [("gallery", 2000), ("query", 2000), ("bank", 4000), ("far_bank", 2000)]:
        embeddings = data[f"{name}_embeddings"]
        assert embeddings.shape == (rows, 384) and embeddings.dtype == np.float32
        assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=2e-3)  # float16 storage
    assert len(data.gallery_words) == len(set(data.gallery_words)) == 2000
    assert len(data.query_glosses) == 2000 and len(data.bank_glosses) == 4000
    assert "WordNet" in data.provenance["wordnet"]
    # Definitions really retrieve their words, far above chance (0.05%).
    sims = data.query_embeddings @ data.gallery_embeddings.T
    assert retrieval_metrics(sims, data.query_gt)["R@1"] > 20


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
