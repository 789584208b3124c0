"""The rerankers on array API inputs: reranked on the host, scores returned on the
inputs' namespace and device, equal to the NumPy path's to the bit."""

from functools import partial

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_array_equal
from sklearn.base import clone

from skqbnorm.rerankers import (
    DiffusionReranker,
    HingeReranker,
    KReciprocalReranker,
    PointwiseReranker,
    QueryExpansionReranker,
    RerankerCV,
)

from array_api_cases import NAMESPACES, host, namespace_and_device, put

dispatch = partial(sklearn.config_context, array_api_dispatch=True)

#: One of each family: the Bayesian rerankers (conjugate gradients, OSQP) and the
#: neighbourhood ones.
RERANKERS = [
    PointwiseReranker(n_neighbors=5),
    HingeReranker(c=1.0, n_neighbors=5, pairs="top_bottom", n_top=3, n_bottom=5),
    KReciprocalReranker(k1=6, k2=3),
    DiffusionReranker(n_neighbors=5),
    QueryExpansionReranker(n_query=5, n_database=5),
]


def lists(n_queries=4, n_items=30, seed=0):
    """Features, initial cosines, groups and relevance of a few lists."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_queries), n_items)
    relevance = rng.random(len(groups)) < 0.3
    features = relevance[:, None] * np.array([2.0, 0, 0]) + rng.normal(scale=0.7,
                                                                       size=(len(groups), 3))
    initial = np.clip(0.3 * relevance + rng.normal(scale=0.3, size=len(groups)), -1, 1)
    return features, initial, groups, relevance


def assert_on(xp, device, array, expected):
    """``array`` is of ``xp`` on ``device``, float64, and equals ``expected`` to the bit."""
    assert type(array) is type(xp.asarray([0.0], device=device))
    assert array.device == device and array.dtype == xp.float64
    assert_array_equal(host(array), expected, strict=True)


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("reranker", RERANKERS, ids=repr)
def test_scores_are_the_numpy_paths_on_the_inputs_device(case, reranker):
    xp, device = namespace_and_device(case)
    features, initial, groups, _ = lists()
    expected = clone(reranker).fit_predict(features, initial, groups)
    with dispatch():
        fitted = clone(reranker).fit(put(xp, device, features), put(xp, device, initial),
                                     put(xp, device, groups))
        scores = clone(reranker).fit_predict(put(xp, device, features), put(xp, device, initial),
                                             groups)  # NumPy groups beside device arrays
    assert_on(xp, device, fitted.scores_, expected)
    assert_on(xp, device, scores, expected)
    assert_array_equal(fitted.group_labels_, np.unique(groups))


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("reranker", [RERANKERS[0], RERANKERS[3]], ids=repr)
def test_rerank_path_returns_scores_on_the_inputs_device(case, reranker):
    xp, device = namespace_and_device(case)
    features, initial, groups, _ = lists(seed=1)
    name = f"{reranker.strength_param}s"
    values = [0.1, 0.9]
    expected = clone(reranker).rerank_path(features, initial, groups, **{name: values})
    with dispatch():
        path = clone(reranker).rerank_path(put(xp, device, features), put(xp, device, initial),
                                           put(xp, device, groups), **{name: values})
    for fitted, reference in zip(path, expected):
        assert_on(xp, device, fitted.scores_, reference.scores_)


@pytest.mark.parametrize("case", NAMESPACES)
def test_reranker_cv_returns_scores_on_the_inputs_device(case):
    xp, device = namespace_and_device(case)
    features, initial, groups, relevance = lists(n_queries=6, seed=2)
    search = RerankerCV(DiffusionReranker(n_neighbors=5), cs=[0.5, 0.9], cv=3)
    expected = clone(search).fit(features, initial, groups, relevance=relevance)
    with dispatch():
        fitted = clone(search).fit(*(put(xp, device, array) for array in
                                     (features, initial, groups)),
                                   relevance=put(xp, device, relevance))
    assert_on(xp, device, fitted.scores_, expected.scores_)
    assert fitted.best_estimator_.scores_ is fitted.scores_
    assert fitted.best_params_ == expected.best_params_
    assert_array_equal(fitted.average_precisions_, expected.average_precisions_, strict=True)


def test_float32_inputs_give_the_numpy_paths_float64_scores():
    xp, device = namespace_and_device(("array_api_strict", "device1"))
    features, initial, groups, _ = lists(seed=3)
    features, initial = features.astype(np.float32), initial.astype(np.float32)
    expected = PointwiseReranker(n_neighbors=5).fit_predict(features, initial, groups)
    with dispatch():
        scores = PointwiseReranker(n_neighbors=5).fit_predict(
            put(xp, device, features), put(xp, device, initial), put(xp, device, groups))
    assert_on(xp, device, scores, expected)


def test_mixed_namespaces_are_refused():
    xp, device = namespace_and_device(("array_api_strict", "CPU_DEVICE"))
    torch = pytest.importorskip("torch")
    features, initial, groups, _ = lists()
    with dispatch(), pytest.raises(ValueError, match="same namespace"):
        PointwiseReranker().fit(put(xp, device, features), torch.asarray(initial), groups)


@pytest.mark.torch
def test_without_dispatch_torch_tensors_give_numpy_scores():
    torch = pytest.importorskip("torch")
    features, initial, groups, _ = lists()
    expected = PointwiseReranker(n_neighbors=5).fit_predict(features, initial, groups)
    scores = PointwiseReranker(n_neighbors=5).fit_predict(
        torch.asarray(features), torch.asarray(initial), torch.asarray(groups))
    assert isinstance(scores, np.ndarray)
    assert_array_equal(scores, expected, strict=True)
