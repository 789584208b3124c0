"""The pointwise and random-walk rerankers against their documented systems, by hand."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skqbnorm import (
    PointwiseReranker,
    RandomWalkReranker,
)

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
