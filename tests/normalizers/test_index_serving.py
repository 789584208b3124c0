"""The index's serving protocol: ``index_serving`` and ``IndexServing``, against exact
references built from ``similarities`` and ``transform``, with no vector index."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from skqbnorm import (
    CSLS,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    MutualProximity,
    QueryBankGate,
    catalogue,
)
from skqbnorm.normalizers import IndexServing, index_serving

N_DIMS, N_GALLERY = 6, 40


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return {
        "bank": rng.normal(size=(60, N_DIMS)),
        "gallery": rng.normal(size=(N_GALLERY, N_DIMS)),
        "gallery_bank": rng.normal(size=(50, N_DIMS)),
        "queries": rng.normal(size=(7, N_DIMS)),
    }


def fit(normalizer, data):
    dual = normalizer.capabilities.gallery_bank is not None
    extra = {"gallery_bank": data["gallery_bank"]} if dual else {}
    return normalizer.fit(data["bank"], gallery=data["gallery"], **extra)


def exact_search(serving):
    """The raw top k of query-space vectors, by brute force: what an index's search gives."""
    gallery = serving.normalizer.gallery_embeddings_

    def search(vectors, k):
        return np.argsort(-(vectors @ gallery.T), axis=1, kind="stable")[:, :k]

    return search


SERVED = [cls() for cls in catalogue.normalizers() if cls.capabilities.index is not None]


@pytest.mark.parametrize("normalizer", SERVED, ids=lambda n: type(n).__name__)
def test_scores_from_the_protocol_equal_transform(normalizer, data):
    """Every item a candidate, the row state from an exact raw search: ``transform``."""
    fitted = fit(normalizer, data)
    serving = index_serving(fitted).check()
    queries = serving.prepare_queries(data["queries"])
    every = np.tile(np.arange(N_GALLERY), (len(queries), 1))
    sims = serving.candidate_similarities(queries, every)
    n_found = max(serving.n_neighbors(), 1)
    neighbors = exact_search(serving)(queries, n_found)
    state = serving.row_state(queries, neighbors, np.take_along_axis(sims, neighbors, axis=1),
                              exact_search(serving), serving.context())
    scores = serving.score_block(sims, np.arange(N_GALLERY), state)
    expected = fitted.transform(fitted.similarities(data["queries"]))
    np.testing.assert_allclose(scores, expected, rtol=1e-10, atol=1e-10)


def test_candidate_similarities_are_dot_products_and_minus_inf_for_none(data):
    fitted = fit(InvertedSoftmax(), data)
    serving = index_serving(fitted)
    queries = serving.prepare_queries(data["queries"])
    candidates = np.array([[3, -1, 0]] * len(queries))
    sims = serving.candidate_similarities(queries, candidates)
    gallery = fitted.gallery_embeddings_
    np.testing.assert_allclose(sims[:, 0], queries @ gallery[3])
    np.testing.assert_allclose(sims[:, 2], queries @ gallery[0])
    assert np.all(sims[:, 1] == -np.inf)
    # cosine: unit query rows
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0)


@pytest.mark.parametrize(("normalizer", "n_neighbors"), [
    (InvertedSoftmax(), 0), (DynamicInvertedSoftmax(k=1), 1), (CSLS(k=4), 4),
    (GloballyCorrected(), 1), (MutualProximity(), 0),
], ids=lambda value: type(value).__name__)
def test_n_neighbors_is_what_the_row_state_reads(normalizer, n_neighbors, data):
    assert index_serving(fit(normalizer, data)).n_neighbors() == n_neighbors


def test_mutual_proximity_context_is_the_gallery_moments(data):
    serving = index_serving(fit(MutualProximity(), data))
    gallery = serving.normalizer.gallery_embeddings_  # unit rows under cosine
    mean, covariance = serving.context()
    np.testing.assert_allclose(mean, gallery.mean(axis=0))
    np.testing.assert_allclose(covariance, np.cov(gallery, rowvar=False, bias=True))
    assert index_serving(fit(InvertedSoftmax(), data)).context() is None


def test_check_refuses_what_no_index_serves(data):
    empiric = fit(MutualProximity(method="empiric"), data)
    with pytest.raises(ValueError, match="method='empiric'"):
        index_serving(empiric).check()
    serving = index_serving(fit(CSLS(), data))
    assert serving.check() is serving


@pytest.mark.parametrize("normalizer", SERVED, ids=lambda n: type(n).__name__)
def test_bias_form_and_gated_follow_the_capabilities(normalizer, data):
    serving = index_serving(fit(normalizer, data))
    assert isinstance(serving, IndexServing) and serving.normalizer is normalizer
    assert serving.bias_form == (normalizer.capabilities.index == "bias")
    assert serving.gated == normalizer.capabilities.gated
    if not normalizer.capabilities.bias_form:
        with pytest.raises(ValueError, match="is not a bias form"):
            serving.augmented_gallery()


@pytest.mark.parametrize("normalizer", [cls() for cls in catalogue.normalizers(index="bias")],
                         ids=lambda n: type(n).__name__)
def test_augmented_products_are_the_scores_ranking(normalizer, data):
    """``<[q, e_f], [g, -bias]>`` ranks each row as ``transform`` does."""
    fitted = fit(normalizer, data)
    serving = index_serving(fitted)
    products = serving.augmented_queries(data["queries"]) @ serving.augmented_gallery().T
    sims = fitted.similarities(data["queries"])
    forms = serving.row_forms(sims.argmax(axis=1))
    biases = np.vstack([serving.gallery_biases(), np.zeros(N_GALLERY)])
    np.testing.assert_allclose(products, sims - biases[forms], rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(serving.normalized_rows(sims.argmax(axis=1)), forms >= 0)
    scores = fitted.transform(sims)
    top = np.argmax(products, axis=1)
    np.testing.assert_allclose(scores[np.arange(len(top)), top], scores.max(axis=1))


@pytest.mark.parametrize("open_", [True, False])
def test_a_gate_is_served_by_what_it_serves_with(open_, data):
    gate = QueryBankGate(InvertedSoftmax()).fit(data["bank"], queries=data["queries"], gallery=data["gallery"])
    gate.open_ = open_  # as a fit that decided so leaves it
    served = index_serving(gate).normalizer
    if open_:
        assert served is gate.normalizer_
    else:
        assert served is not gate.normalizer_
        np.testing.assert_array_equal(served.gallery_bias(), np.zeros(N_GALLERY))
        sims = served.similarities(data["queries"])
        np.testing.assert_array_equal(index_serving(gate).score_block(sims), sims)


def test_index_serving_refuses_what_is_not_a_fitted_normalizer():
    with pytest.raises(TypeError, match="fitted querybank normaliser"):
        index_serving(InvertedSoftmax)
    with pytest.raises(TypeError, match="fitted querybank normaliser"):
        index_serving(np.eye(2))
    with pytest.raises(NotFittedError):
        index_serving(InvertedSoftmax())
    with pytest.raises(NotFittedError):
        index_serving(QueryBankGate())
