"""The pointwise and random-walk rerankers (skqbnorm.rerankers._baselines) against their
documented systems by hand, their normalised energies minimised by BFGS and their limits."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from reference_rerankers import bfgs, bfgs_minimum, dense_laplacian, two_clusters

from skqbnorm import (
    PointwiseReranker,
    RandomWalkReranker,
)
from skqbnorm.rerankers._graph import affinity

# ------------------------------------------------------------------ reranker solves


def dense_gaussian_weights(points, sigma):
    """``w_ij = exp(-(x_i - x_j)^2 / (2 sigma^2))`` off the diagonal, for 1-D points."""
    gaps = np.subtract.outer(points, points)
    return np.exp(-(gaps**2) / (2 * sigma**2)) * (1 - np.eye(len(points)))


@pytest.mark.parametrize("laplacian", ["unnormalized", "normalized"])
@pytest.mark.parametrize("c", [0.05, 0.5, 5.0])
def test_pointwise_reranker_solves_its_documented_system(laplacian, c):
    # Unequal degrees (points 0, 1, 3), so the normalised Laplacian's null vector
    # sqrt(d) is not constant. Documented: (L / dbar + c I) r = c rbar, dbar = tr(L) / N.
    points, initial = np.array([0.0, 1.0, 3.0]), np.array([1.0, 3.0, 2.0])
    weights = dense_gaussian_weights(points, sigma=1.0)
    degree = weights.sum(axis=1)
    if laplacian == "normalized":
        prior = np.eye(3) - weights / np.sqrt(np.outer(degree, degree))
    else:
        prior = np.diag(degree) - weights
    mean_degree = np.trace(prior) / 3
    expected = np.linalg.solve(prior / mean_degree + c * np.eye(3), c * initial)
    reranker = PointwiseReranker(c=c, graph="dense", sigma=1.0, laplacian=laplacian)
    assert_allclose(reranker.fit_predict(points[:, None], initial), expected, rtol=1e-9)


# ---------------------------------------------------------------------- rerankers


def test_random_walk_with_an_isolated_item_by_hand():
    # Item 2 lies far away: its Gaussian affinities underflow to 0, so it is isolated
    # and keeps its initial score. Items 0 and 1 (affinity w) solve, in scaled units
    # v = y / 3 = (1, 1/3): w [[1 + c, -1], [-1, 1 + c]] y = c v, x = w y, i.e.
    # x = c [[1.5, 1], [1, 1.5]] v / 1.25 = (0.7333.., 0.6) for c = 0.5: times 3, (2.2, 1.8).
    # Energy over the linked items, divided by sum 1/d = 2/w:
    # [(x0 - x1)^2 + c ((x0 - v0)^2 + (x1 - v1)^2)] / 2 = 2/45, and by the variance
    # of (1, 1/3, 2/3), 2/27: 0.6.
    features = np.array([[0.0], [1.0], [1e6]])
    model = RandomWalkReranker(c=0.5, graph="dense", sigma=1.0).fit(features, [3.0, 1.0, 2.0])
    assert_allclose(model.scores_, [2.2, 1.8, 2.0], rtol=1e-12)
    assert_allclose(model.objective_, [0.6], rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("c", [1e-3, 0.3, 30.0])
def test_pointwise_minimises_the_normalized_energy(rng, c):
    features, initial = two_clusters(rng)
    lap = dense_laplacian(features, n_neighbors=5)
    reranker = PointwiseReranker(c=c, n_neighbors=5).fit(features, initial)

    def energy(r):  # r^T L r / tr(L) + c/N ||r - rbar||^2, over the initial scores' variance
        return (r @ lap @ r / np.trace(lap) + c * np.mean((r - initial) ** 2)) / initial.var()

    result = bfgs(energy, initial.copy())
    assert_allclose(reranker.scores_, result.x, atol=1e-5)
    assert_allclose(reranker.objective_[0], result.fun, rtol=1e-7)
    # The closed form: (L / dbar + c I) r = c rbar with dbar = tr(L) / N.
    mean_degree = np.trace(lap) / len(initial)
    expected = np.linalg.solve(lap / mean_degree + c * np.eye(len(initial)), c * initial)
    assert_allclose(reranker.scores_, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("c", [1e-3, 0.3, 30.0])
def test_random_walk_energy_is_normalized_by_the_inverse_degrees(rng, c):
    features, initial = two_clusters(rng)
    reranker = RandomWalkReranker(c=c, n_neighbors=5).fit(features, initial)
    weights = affinity(features, n_neighbors=5).toarray()
    degree = weights.sum(axis=1)

    def energy(x):
        y = x / degree
        prior = 0.5 * np.sum(weights * (y[:, None] - y[None, :]) ** 2)
        return (prior + c * np.sum((x - initial) ** 2 / degree)) / np.sum(1 / degree) / initial.var()

    result = bfgs(energy, initial.copy())
    assert reranker.objective_[0] <= result.fun * (1 + 1e-9)  # never worse than BFGS
    assert_allclose(reranker.objective_[0], result.fun, rtol=1e-6)
    assert_allclose(reranker.scores_, result.x, atol=1e-4)


def test_pointwise_tiny_c_gives_each_component_its_initial_mean(rng):
    features, initial = two_clusters(rng, gap=100.0)  # two components
    scores = PointwiseReranker(c=1e-300, n_neighbors=5).fit_predict(features, initial)
    for part in (slice(0, 15), slice(15, 30)):
        assert_allclose(scores[part], initial[part].mean(), rtol=1e-12)


def test_random_walk_tiny_c_gives_the_stationary_distribution(rng):
    features, initial = two_clusters(rng, gap=100.0)
    scores = RandomWalkReranker(c=1e-300, n_neighbors=5).fit_predict(features, initial)
    degree = affinity(features, n_neighbors=5).toarray().sum(axis=1)
    for part in (slice(0, 15), slice(15, 30)):
        expected = degree[part] * initial[part].sum() / degree[part].sum()
        assert_allclose(scores[part], expected, rtol=1e-10)


def test_random_walk_is_its_fixed_point_and_its_energy_minimiser(rng):
    features, initial = two_clusters(rng)
    c = 0.5
    scores = RandomWalkReranker(c=c, n_neighbors=5).fit_predict(features, initial)
    weights = affinity(features, n_neighbors=5).toarray()
    degree = weights.sum(axis=1)
    alpha = 1 / (1 + c)
    walk = weights / degree[:, None]
    assert_allclose(scores, alpha * walk.T @ scores + (1 - alpha) * initial, atol=1e-10)

    def energy(x):
        y = x / degree
        return 0.5 * np.sum(weights * (y[:, None] - y[None, :]) ** 2) + c * np.sum((x - initial) ** 2 / degree)

    solution, _ = bfgs_minimum(energy, initial.copy())
    assert_allclose(scores, solution, atol=1e-5)


def test_pointwise_closed_form(rng):
    features, initial = two_clusters(rng)
    scores = PointwiseReranker(c=2.0, n_neighbors=5).fit_predict(features, initial)
    lap = dense_laplacian(features, n_neighbors=5)
    mean_degree = np.trace(lap) / len(initial)  # the prior is normalised by tr(L) / N
    assert_allclose(scores, np.linalg.solve(lap / mean_degree + 2.0 * np.eye(len(initial)), 2.0 * initial))
