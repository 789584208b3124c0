"""The rerankers' normalised energies: c is dimensionless, extreme parameters answered, components placed.

Every reference here is written out independently of the library: the Laplacian is
``diag(W 1) - W`` of the library's affinities (the graph itself is tested in
tests/rerankers/test_graph.py), the pairs and the energies are spelled out by hand.
"""

import numpy as np
import osqp
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize import minimize

from skqbnorm import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
)
from skqbnorm.rerankers._graph import affinity

ALL = [HingeReranker, PreferenceStrengthReranker, PointwiseReranker, RandomWalkReranker]


def two_clusters(rng, n=30, gap=3.0):
    features = np.r_[rng.normal(0, 0.3, size=(n // 2, 2)), rng.normal(gap, 0.3, size=(n - n // 2, 2))]
    return features, rng.normal(size=n)


def plain_laplacian(features, **graph):
    weights = affinity(features, **graph).toarray()
    return np.diag(weights.sum(axis=1)) - weights


def rho_pairs(initial, rho):
    order = np.argsort(-initial, kind="stable")
    return np.array([(order[p], order[p + d]) for d in range(1, rho + 1) for p in range(len(order) - d)])


def minimise(energy, x0):
    return minimize(energy, x0, method="BFGS", options={"gtol": 1e-11, "maxiter": 50000})


# --- the normalised energies, against BFGS --------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("c", [1e-3, 0.3, 30.0])
def test_pointwise_minimises_the_normalized_energy(rng, c):
    features, initial = two_clusters(rng)
    lap = plain_laplacian(features, n_neighbors=5)
    reranker = PointwiseReranker(c=c, n_neighbors=5).fit(features, initial)

    def energy(r):  # r^T L r / tr(L) + c/N ||r - rbar||^2, over the initial scores' variance
        return (r @ lap @ r / np.trace(lap) + c * np.mean((r - initial) ** 2)) / initial.var()

    result = minimise(energy, initial.copy())
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

    result = minimise(energy, initial.copy())
    assert reranker.objective_[0] <= result.fun * (1 + 1e-9)  # never worse than BFGS
    assert_allclose(reranker.objective_[0], result.fun, rtol=1e-6)
    assert_allclose(reranker.scores_, result.x, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("scale", [1.0, 1e-200, 1e200])
@pytest.mark.parametrize("c", [0.01, 1.0, 100.0])
def test_preference_strength_minimises_the_normalized_energy(rng, c, scale):
    features, initial = two_clusters(rng)
    initial = scale * initial
    pairs = rho_pairs(initial, 3)
    high, low = pairs[:, 0], pairs[:, 1]
    lap = plain_laplacian(features, n_neighbors=5)
    reranker = PreferenceStrengthReranker(c=c, rho=3, n_neighbors=5, initial="scores")
    reranker.fit(features, initial)
    unit = initial / scale  # the energy below in units where it is well scaled for BFGS
    gap = unit[high] - unit[low]

    def energy(r):  # r^T L r / (tr(L) var) + c g^2 / (|S| var) sum (1 - dr / gap)^2
        strength = (1 - (r[high] - r[low]) / gap) ** 2
        return (r @ lap @ r / np.trace(lap) + c * np.mean(gap**2) * strength.mean()) / unit.var()

    result = minimise(energy, unit.copy())
    assert_allclose(reranker.objective_[0], result.fun, rtol=1e-6)
    centred = reranker.scores_ / scale - (reranker.scores_ / scale).mean()
    assert_allclose(centred, result.x - result.x.mean(), atol=1e-4)
    # The component keeps the mean of its initial scores.
    assert_allclose(reranker.scores_.mean() / scale, unit.mean(), rtol=1e-9, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("margin", [1.0, 1e-3])
@pytest.mark.parametrize("c", [1e-3, 0.1, 10.0])
def test_hinge_minimises_the_normalized_energy(rng, c, margin):
    features, initial = two_clusters(rng)
    pairs = rho_pairs(initial, 3)
    high, low = pairs[:, 0], pairs[:, 1]
    lap = plain_laplacian(features, n_neighbors=5)
    reranker = HingeReranker(c=c, margin=margin, rho=3, n_neighbors=5, eps_abs=1e-10, eps_rel=1e-10)
    reranker.fit(features, initial)

    def energy(r):  # in margins: r^T L r / tr(L) + c/|S| sum [(1 - dr)_+]^2
        slack = np.maximum(1 - (r[high] - r[low]), 0)
        return r @ lap @ r / np.trace(lap) + c * np.mean(slack**2)

    result = minimise(energy, np.zeros(len(initial)))
    # A margin is `margin` times the pairs' root mean square initial gap.
    unit = margin * np.sqrt(np.mean((initial[high] - initial[low]) ** 2))
    margins = reranker.scores_ / unit
    assert_allclose(energy(margins), result.fun, rtol=1e-4)
    assert_allclose(reranker.objective_[0], result.fun, rtol=1e-4)
    assert_allclose(margins - margins.mean(), result.x - result.x.mean(), atol=1e-3)
    assert_allclose(reranker.scores_.mean(), initial.mean(), rtol=1e-9)


# --- c is dimensionless ----------------------------------------------------------------------


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("scale", [1e-250, 1e-3, 1e250])
def test_scores_scale_with_the_initial_scores(rng, cls, scale):
    # The same c on rescaled scores gives the rescaled answer: c has no unit of score.
    features, initial = two_clusters(rng)
    params = {"initial": "scores"}
    reference = cls(c=0.5, **params).fit_predict(features, initial)
    scaled = cls(c=0.5, **params).fit_predict(features, scale * initial)
    assert_allclose(scaled / scale, reference, rtol=1e-7, atol=1e-9 * np.abs(reference).max())


# --- extreme parameters: it works or a ValueError names the parameter ---------------------------


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("c", [1e-300, 1e-12, 1e12, 1e100, 1e300])
def test_extreme_c_gives_finite_sound_scores(rng, cls, c):
    features, initial = two_clusters(rng)
    scores = cls(c=c).fit_predict(features, initial)
    assert np.all(np.isfinite(scores))
    if c >= 1e12:  # the initial order, exactly
        assert_array_equal(np.argsort(-scores), np.argsort(-initial))


def test_pointwise_tiny_c_gives_each_component_its_initial_mean(rng):
    features, initial = two_clusters(rng, gap=100.0)  # two components
    scores = PointwiseReranker(c=1e-300, n_neighbors=5).fit_predict(features, initial)
    for part in (slice(0, 15), slice(15, 30)):
        assert_allclose(scores[part], initial[part].mean(), rtol=1e-12)


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


def test_random_walk_tiny_c_gives_the_stationary_distribution(rng):
    features, initial = two_clusters(rng, gap=100.0)
    scores = RandomWalkReranker(c=1e-300, n_neighbors=5).fit_predict(features, initial)
    degree = affinity(features, n_neighbors=5).toarray().sum(axis=1)
    for part in (slice(0, 15), slice(15, 30)):
        expected = degree[part] * initial[part].sum() / degree[part].sum()
        assert_allclose(scores[part], expected, rtol=1e-10)


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("magnitude", [1e300, -1e300, 1e-300])
def test_huge_and_tiny_initial_scores(rng, cls, magnitude):
    features, initial = two_clusters(rng)
    y = magnitude * (initial / np.abs(initial).max())
    for strategy in ("scores", "minmax", "rank"):
        scores = cls(c=0.5, initial=strategy).fit_predict(features, y)
        assert np.all(np.isfinite(scores)), strategy


def test_hinge_margin_is_a_unit_only(rng):
    features, initial = two_clusters(rng)
    reference = HingeReranker(c=0.3).fit_predict(features, initial)
    huge = HingeReranker(c=0.3, margin=1e300).fit_predict(features, initial)
    assert_array_equal(np.argsort(-huge), np.argsort(-reference))
    with pytest.raises(ValueError, match=r"margin=1e\+300 times the range of the initial scores"):
        HingeReranker(c=0.3, margin=1e300).fit(features, 1e300 * initial / np.abs(initial).max())


def test_hinge_tolerances_both_zero_are_refused(rng):
    features, initial = two_clusters(rng)
    with pytest.raises(ValueError, match="eps_abs and eps_rel are both 0"):
        HingeReranker(eps_abs=0, eps_rel=0).fit(features, initial)
    HingeReranker(eps_abs=0, eps_rel=1e-6).fit(features, initial)  # one of them suffices


def test_osqp_errors_name_the_parameters(rng, monkeypatch):
    features, initial = two_clusters(rng)

    def refuse(*args, **kwargs):
        raise osqp.OSQPException("problem non convex")

    monkeypatch.setattr(osqp.OSQP, "setup", refuse)
    # A large c satisfies pairs beyond the margin: only the QP can solve that.
    with pytest.raises(ValueError, match=r"OSQP refused the hinge QP with c=1000\.0, eps_abs="):
        HingeReranker(c=1e3).fit(features, initial)


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


@pytest.mark.parametrize("cls", ALL)
def test_constant_initial_scores_name_y(rng, cls):
    features, _ = two_clusters(rng)
    with pytest.raises(ValueError, match=r"initial scores y are constant"):
        cls().fit(features, np.full(30, 1e300))


# --- components without a selected pair --------------------------------------------------------


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


def test_hinge_closed_form_and_qp_agree(rng, monkeypatch):
    # Where every slack is positive the closed form is the hinge minimiser; forcing
    # OSQP instead must give the same scores.
    from skqbnorm.rerankers import _hinge

    features, initial = two_clusters(rng)
    reranker = HingeReranker(c=0.05, eps_abs=1e-10, eps_rel=1e-10)
    closed = reranker.fit(features, initial)
    assert closed.n_iter_[0] == 0  # no OSQP iteration
    closed_scores = closed.scores_.copy()
    monkeypatch.setattr(_hinge, "ACTIVE_TOLERANCE", -np.inf)
    by_qp = HingeReranker(c=0.05, eps_abs=1e-10, eps_rel=1e-10).fit(features, initial)
    assert by_qp.n_iter_[0] > 0
    assert_allclose(by_qp.scores_, closed_scores, rtol=1e-5, atol=1e-6 * np.ptp(closed_scores))
