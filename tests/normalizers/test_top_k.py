"""top_k against its contract: ``transform`` followed by a stable sort of each row."""

import numpy as np
import pytest

from skqbnorm import CSLS, InvertedSoftmax, catalogue

N_DIMS, N_GALLERY = 5, 30


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    return {
        "bank": rng.normal(size=(50, N_DIMS)),
        "gallery": rng.normal(size=(N_GALLERY, N_DIMS)),
        "gallery_bank": rng.normal(size=(40, N_DIMS)),
        "queries": rng.normal(size=(9, N_DIMS)),
    }


def fit(cls, data):
    normalizer = cls()
    extra = {"gallery_bank": data["gallery_bank"]} if cls.capabilities.gallery_bank else {}
    return normalizer.fit(data["bank"], gallery=data["gallery"], **extra)


def reference_top_k(scores, k):
    """The k best of each row by a stable sort: ties go to the lowest gallery index."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)


@pytest.mark.parametrize("cls", catalogue.normalizers(), ids=lambda cls: cls.__name__)
def test_top_k_of_similarities_is_the_sorted_transform(cls, data):
    fitted = fit(cls, data)
    sims = fitted.similarities(data["queries"])
    indices, scores = fitted.top_k(sims, k=4)
    expected_indices, expected_scores = reference_top_k(fitted.transform(sims), 4)
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_array_equal(scores, expected_scores)


@pytest.mark.parametrize("cls", catalogue.normalizers(), ids=lambda cls: cls.__name__)
def test_chunks_and_queries_give_what_similarities_give(cls, data):
    fitted = fit(cls, data)
    sims = fitted.similarities(data["queries"])
    indices, scores = fitted.top_k(sims, k=5)
    chunks = [sims[:, :7], sims[:, 7:20], sims[:, 20:]]
    chunked = fitted.top_k(chunks=chunks, k=5)
    np.testing.assert_array_equal(chunked[0], indices)
    np.testing.assert_allclose(chunked[1], scores, rtol=1e-12, atol=1e-12)
    embedded = fitted.top_k(queries=data["queries"], k=5)
    np.testing.assert_array_equal(embedded[0], indices)
    np.testing.assert_allclose(embedded[1], scores, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(fitted.top_k(sims, k=5, return_scores=False), indices)


def test_ties_go_to_the_lowest_gallery_index():
    bank = np.zeros((4, 6))
    fitted = InvertedSoftmax().fit(bank)  # equal biases: scores rank as the similarities
    sims = np.array([[0.5, 0.9, 0.5, 0.9, 0.1, 0.5]])
    indices, _ = fitted.top_k(sims, k=5)
    np.testing.assert_array_equal(indices, [[1, 3, 0, 2, 5]])
    np.testing.assert_array_equal(fitted.top_k(sims, k=5, return_scores=False), [[1, 3, 0, 2, 5]])
    chunked = fitted.top_k(chunks=[sims[:, :1], sims[:, 1:4], sims[:, 4:]], k=5)[0]
    np.testing.assert_array_equal(chunked, [[1, 3, 0, 2, 5]])


@pytest.mark.parametrize("k", [0, N_GALLERY + 1, 2.0, True])
def test_k_outside_the_gallery_is_refused(k, data):
    fitted = fit(CSLS, data)
    with pytest.raises(ValueError, match=rf"k must be an integer in \[1, {N_GALLERY}\]"):
        fitted.top_k(queries=data["queries"], k=k)


def test_exactly_one_source(data):
    fitted = fit(CSLS, data)
    sims = fitted.similarities(data["queries"])
    with pytest.raises(ValueError, match="Pass exactly one of X"):
        fitted.top_k(sims, queries=data["queries"])
    with pytest.raises(ValueError, match="Pass exactly one of X"):
        fitted.top_k()
    with pytest.raises(TypeError, match="return_scores must be True or False"):
        fitted.top_k(sims, return_scores=1)
