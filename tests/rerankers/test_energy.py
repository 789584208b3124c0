"""Every Bayesian reranker's normalised energy: c is dimensionless, extreme parameters answered,
components placed (each class's own energy is tested in its file).

Every reference here is written out independently of the library: the Laplacian is
``diag(W 1) - W`` of the library's affinities (the graph itself is tested in
tests/rerankers/test_graph.py), the pairs and the energies are spelled out by hand.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from reference_rerankers import two_clusters

from skqbnorm import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
    catalogue,
)
from skqbnorm.rerankers import BayesianReranker
from skqbnorm.rerankers._graph import affinity

#: The Bayesian rerankers of the catalogue (a registered one included).
ALL = [cls for cls in catalogue.rerankers() if issubclass(cls, BayesianReranker)]


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("scale", [1e-250, 1e-3, 1e250])
def test_scores_scale_with_the_initial_scores(rng, cls, scale):
    # The same c on rescaled scores gives the rescaled answer: c has no unit of score.
    features, initial = two_clusters(rng)
    params = {"initial": "scores"}
    reference = cls(c=0.5, **params).fit_predict(features, initial)
    scaled = cls(c=0.5, **params).fit_predict(features, scale * initial)
    assert_allclose(scaled / scale, reference, rtol=1e-7, atol=1e-9 * np.abs(reference).max())


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("c", [1e-300, 1e-12, 1e12, 1e100, 1e300])
def test_extreme_c_gives_finite_sound_scores(rng, cls, c):
    features, initial = two_clusters(rng)
    scores = cls(c=c).fit_predict(features, initial)
    assert np.all(np.isfinite(scores))
    if c >= 1e12:  # the initial order, exactly
        assert_array_equal(np.argsort(-scores), np.argsort(-initial))


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("magnitude", [1e300, -1e300, 1e-300])
def test_huge_and_tiny_initial_scores(rng, cls, magnitude):
    features, initial = two_clusters(rng)
    y = magnitude * (initial / np.abs(initial).max())
    for strategy in ("scores", "minmax", "rank"):
        scores = cls(c=0.5, initial=strategy).fit_predict(features, y)
        assert np.all(np.isfinite(scores)), strategy


@pytest.mark.parametrize("cls", ALL)
def test_constant_initial_scores_name_y(rng, cls):
    features, _ = two_clusters(rng)
    with pytest.raises(ValueError, match=r"initial scores y are constant"):
        cls().fit(features, np.full(30, 1e300))


def far_cluster_without_pairs(rng):
    """Two tight clusters 100 apart; top-bottom pairs only within the first."""
    features = np.r_[rng.normal(0, 0.3, size=(20, 2)), rng.normal(100, 0.3, size=(10, 2))]
    initial = np.r_[np.linspace(10, 0, 20), rng.uniform(3, 6, size=10)]
    initial[:20] = np.r_[np.linspace(10, 8, 5), np.linspace(6.9, 3.1, 10), np.linspace(2, 0, 5)]
    return features, initial


@pytest.mark.parametrize("laplacian_kind", ["unnormalized", "normalized"])
@pytest.mark.parametrize("cls", [HingeReranker, PreferenceStrengthReranker])
def test_components_without_pairs_keep_their_initial_mean(rng, cls, laplacian_kind):
    features, initial = far_cluster_without_pairs(rng)
    # n_top=5, n_bottom=5: top and bottom items all lie in the first cluster.
    reranker = cls(c=1.0, pairs="top_bottom", n_top=5, n_bottom=5, n_neighbors=4,
                   laplacian=laplacian_kind, initial="scores")
    scores = reranker.fit_predict(features, initial)
    far = slice(20, 30)
    assert_allclose(scores[far].mean(), initial[far].mean(), rtol=1e-9)
    degree = affinity(features, n_neighbors=4).toarray().sum(axis=1)
    shape = np.ones(10) if laplacian_kind == "unnormalized" else np.sqrt(degree[far])
    assert_allclose(scores[far], shape * initial[far].mean() / shape.mean(), rtol=1e-9)
    if laplacian_kind == "unnormalized":  # the paired component is shifted to its mean
        assert_allclose(scores[:20].mean(), initial[:20].mean(), rtol=1e-9)


@pytest.mark.parametrize("c", [1e-3, 1.0, 1e3])
def test_fidelity_rerankers_keep_each_component_mean(rng, c):
    features, initial = two_clusters(rng, gap=100.0)
    pointwise = PointwiseReranker(c=c, n_neighbors=5).fit_predict(features, initial)
    walk = RandomWalkReranker(c=c, n_neighbors=5).fit_predict(features, initial)
    for part in (slice(0, 15), slice(15, 30)):
        assert_allclose(pointwise[part].mean(), initial[part].mean(), rtol=1e-10)
        assert_allclose(walk[part].sum(), initial[part].sum(), rtol=1e-10)


@pytest.mark.parametrize("cls", ALL)
def test_fit_predict_validates_the_parameters(rng, cls):
    features, initial = two_clusters(rng)
    for bad in (0.0, np.inf, "1"):
        with pytest.raises((ValueError, TypeError), match=r"The 'c' parameter of \w+ must be"):
            cls(c=bad).fit_predict(features, initial)
