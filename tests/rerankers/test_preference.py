"""The preference-strength reranker (skqbnorm.rerankers._preference): its closed form is the
minimiser of its normalised energy, written out here and minimised by BFGS; tiny c and gaps."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from reference_rerankers import (
    bfgs,
    bfgs_minimum,
    dense_laplacian,
    normalized_laplacian,
    rho_pairs,
    two_clusters,
)

from skqbnorm import PreferenceStrengthReranker


@pytest.mark.slow
@pytest.mark.parametrize("scale", [1.0, 1e-200, 1e200])
@pytest.mark.parametrize("c", [0.01, 1.0, 100.0])
def test_preference_strength_minimises_the_normalized_energy(rng, c, scale):
    features, initial = two_clusters(rng)
    initial = scale * initial
    pairs = rho_pairs(initial, 3)
    high, low = pairs[:, 0], pairs[:, 1]
    lap = dense_laplacian(features, n_neighbors=5)
    reranker = PreferenceStrengthReranker(c=c, rho=3, n_neighbors=5, initial="scores")
    reranker.fit(features, initial)
    unit = initial / scale  # the energy below in units where it is well scaled for BFGS
    gap = unit[high] - unit[low]

    def energy(r):  # r^T L r / (tr(L) var) + c g^2 / (|S| var) sum (1 - dr / gap)^2
        strength = (1 - (r[high] - r[low]) / gap) ** 2
        return (r @ lap @ r / np.trace(lap) + c * np.mean(gap**2) * strength.mean()) / unit.var()

    result = bfgs(energy, unit.copy())
    assert_allclose(reranker.objective_[0], result.fun, rtol=1e-6)
    centred = reranker.scores_ / scale - (reranker.scores_ / scale).mean()
    assert_allclose(centred, result.x - result.x.mean(), atol=1e-4)
    # The component keeps the mean of its initial scores.
    assert_allclose(reranker.scores_.mean() / scale, unit.mean(), rtol=1e-9, atol=1e-12)


def test_preference_strength_tiny_c_keeps_the_offset_the_pairs_ask_for(rng):
    # Two visual components joined only by pairs: with c -> 0 each is constant, and
    # their offset d minimises the pair term alone, sum over crossing pairs of
    # (1 - s d / gap)^2 (s = +1 when the pair's upper item is in the first cluster).
    features, initial = two_clusters(rng, gap=100.0)
    scores = PreferenceStrengthReranker(c=1e-300, n_neighbors=5, rho=2, initial="scores")
    scores = scores.fit_predict(features, initial)
    pairs = rho_pairs(initial, 2)
    first = np.arange(30) < 15
    crossing = pairs[first[pairs[:, 0]] != first[pairs[:, 1]]]
    sign = np.where(first[crossing[:, 0]], 1.0, -1.0)
    gap = initial[crossing[:, 0]] - initial[crossing[:, 1]]
    offset = np.sum(sign / gap) / np.sum(1 / gap**2)
    assert_allclose(scores[:15], scores[0], rtol=1e-12)
    assert_allclose(scores[15:], scores[15], rtol=1e-12)
    assert_allclose(scores[0] - scores[15], offset, rtol=1e-9)
    assert_allclose(scores.mean(), initial.mean(), rtol=1e-9)


def test_preference_strength_with_tiny_gaps(rng):
    features, initial = two_clusters(rng)
    # Uniformly tiny gaps are only a unit: the same answer as at scale 1.
    tiny = PreferenceStrengthReranker(initial="scores").fit_predict(features, 1e-200 * initial)
    plain = PreferenceStrengthReranker(initial="scores").fit_predict(features, initial)
    assert_allclose(tiny / 1e-200, plain, rtol=1e-7)
    # A gap 1e-200 times the spread makes 1 / gap^2 overflow: refused, naming y.
    skewed = initial.copy()
    skewed[:2] = 1e-200, 0.0  # adjacent in the initial order: no draw lies between them
    with pytest.raises(ValueError, match=r"initial scores y differ by .* standard deviation"):
        PreferenceStrengthReranker(initial="scores").fit(features, skewed)
    # The rank-based default is unaffected.
    assert np.all(np.isfinite(PreferenceStrengthReranker().fit_predict(features, skewed)))


@pytest.mark.slow
@pytest.mark.parametrize("laplacian_kind", ["unnormalized", "normalized"])
@pytest.mark.parametrize("pairs", ["rho_adjacent", "all", "top_bottom"])
def test_preference_strength_closed_form_is_the_minimiser(rng, pairs, laplacian_kind):
    features, initial = two_clusters(rng)
    c = 0.05
    reranker = PreferenceStrengthReranker(
        c=c, pairs=pairs, rho=3, n_top=5, n_bottom=5, n_neighbors=5, laplacian=laplacian_kind, initial="scores"
    ).fit(features, initial)
    if laplacian_kind == "normalized":
        prior = normalized_laplacian(features, n_neighbors=5)
    else:
        prior = dense_laplacian(features, n_neighbors=5)
    if pairs == "rho_adjacent":
        selected = np.array(rho_pairs(initial, 3))
    elif pairs == "all":
        selected = np.array(rho_pairs(initial, len(initial) - 1))
    else:
        order = np.argsort(-initial)
        selected = np.array([(i, j) for i in order[:5] for j in order[-5:]])
    gaps = initial[selected[:, 0]] - initial[selected[:, 1]]
    # Normalised: the prior over tr(L) and the scores' variance, the distance over |S| and
    # times the mean squared gap over the variance.
    prior_weight = 1 / (np.trace(prior) * initial.var())
    pair_weight = c * np.mean(gaps**2) / (len(gaps) * initial.var())

    def energy(r):
        return prior_weight * r @ prior @ r + pair_weight * np.sum(
            (1 - (r[selected[:, 0]] - r[selected[:, 1]]) / gaps) ** 2
        )

    def gradient(r):
        high, low = selected[:, 0], selected[:, 1]
        pull = -2 * pair_weight * (1 - (r[high] - r[low]) / gaps) / gaps
        return 2 * prior_weight * prior @ r + np.bincount(high, pull, len(r)) - np.bincount(low, pull, len(r))

    solution, reference = bfgs_minimum(energy, initial.copy())
    assert_allclose(reranker.objective_[0], reference, rtol=1e-6, atol=1e-9)
    assert reranker.objective_[0] <= reference + 1e-12  # never worse than BFGS
    assert np.abs(gradient(reranker.scores_)).max() < 1e-9  # a stationary point
    # The unnormalised prior leaves a constant shift free: compare up to it.
    centred = reranker.scores_ - reranker.scores_.mean()
    assert_allclose(centred, solution - solution.mean(), atol=1e-3)
