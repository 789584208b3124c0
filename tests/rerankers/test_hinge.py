"""The hinge reranker (skqbnorm.rerankers._hinge): its parameter bounds, margin overflow, the
QP's energy minimum against BFGS and the squared-hinge minimiser, and OSQP's status."""

import warnings

import numpy as np
import osqp
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from reference_rerankers import bfgs, bfgs_minimum, dense_laplacian, rho_pairs, two_clusters
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from skqbnorm import HingeReranker


@pytest.mark.parametrize("parameter", ["margin", "eps_abs", "eps_rel"])
def test_hinge_reranker_parameter_bounds(parameter):
    features = np.array([[0.0], [0.5], [1.2], [3.0], [3.1]])
    initial = [5.0, 4.0, 1.0, 3.0, 2.0]
    value = 0.0 if parameter == "margin" else -0.5
    with pytest.raises(ValueError, match=f"'{parameter}' parameter"):
        HingeReranker(n_neighbors=2, **{parameter: value}).fit(features, initial)
    if parameter != "margin":  # a zero tolerance alone is accepted
        HingeReranker(n_neighbors=2, **{parameter: 0.0}).fit(features, initial)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        HingeReranker(n_neighbors=2, max_iter=1).fit(features, initial)


def test_hinge_reranker_refuses_a_margin_that_overflows_some_scores():
    # Scores of 1e299 and margin 1e10: the reranked scores reach about +-3e308 at the
    # ends of the list (beyond float64) while the middle ones, about 6e307, fit.
    features = np.array([[0.0], [0.5], [1.2], [3.0], [3.1]])
    initial = np.array([5.0, 4.0, 1.0, 3.0, 2.0]) * 1e299
    with pytest.raises(ValueError, match="margin=10000000000.0 times"):
        HingeReranker(n_neighbors=2, margin=1e10).fit(features, initial)
    with pytest.raises(ValueError, match="'max_iter' parameter"):
        HingeReranker(n_neighbors=2, max_iter=0).fit(features, initial)


@pytest.mark.parametrize("c", [1.0, 100.0])
def test_hinge_qp_reaches_the_energy_minimum(c):
    # All 6 pairs of a 4-item list: the quadratic closed form would stretch the
    # (0, 3) gap beyond the margin, so the QP runs. Its energy (margin units)
    # r^T L r / tr(L) + c / |S| sum (1 - (r_i - r_j))_+^2 over a dense Gaussian graph
    # (sigma 1, built here) must be the minimum that BFGS finds.
    features = np.array([[0.0], [3.0], [6.0], [9.0]])
    weights = np.exp(-((features - features.T) ** 2) / 2)
    np.fill_diagonal(weights, 0.0)
    prior = np.diag(weights.sum(axis=1)) - weights
    high, low = np.triu_indices(4, 1)

    def energy(r):
        slack = np.maximum(0.0, 1.0 - (r[high] - r[low]))
        return r @ prior @ r / np.trace(prior) + c / len(high) * np.sum(slack**2)

    best = min(
        (
            minimize(energy, start * np.arange(4.0)[::-1], method="BFGS", options={"gtol": 1e-13})
            for start in [0.0, 1.0]
        ),
        key=lambda result: result.fun,
    )
    model = HingeReranker(c=c, graph="dense", sigma=1.0, pairs="top_bottom", n_top=3, n_bottom=3)
    model.fit(features, [4.0, 3.0, 2.0, 1.0])
    assert model.solver_status_.tolist() == ["solved"]
    assert_allclose(model.objective_, [best.fun], rtol=1e-10)
    # Scores in margin units: over y's largest magnitude (4) and the pairs' RMS gap.
    unit = 4 * np.sqrt(np.mean((np.array([1, 2, 3, 1, 2, 1]) / 4) ** 2))
    assert_allclose(np.diff(model.scores_) / unit, np.diff(best.x), rtol=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("margin", [1.0, 1e-3])
@pytest.mark.parametrize("c", [1e-3, 0.1, 10.0])
def test_hinge_minimises_the_normalized_energy(rng, c, margin):
    features, initial = two_clusters(rng)
    pairs = rho_pairs(initial, 3)
    high, low = pairs[:, 0], pairs[:, 1]
    lap = dense_laplacian(features, n_neighbors=5)
    reranker = HingeReranker(c=c, margin=margin, rho=3, n_neighbors=5, eps_abs=1e-10, eps_rel=1e-10)
    reranker.fit(features, initial)

    def energy(r):  # in margins: r^T L r / tr(L) + c/|S| sum [(1 - dr)_+]^2
        slack = np.maximum(1 - (r[high] - r[low]), 0)
        return r @ lap @ r / np.trace(lap) + c * np.mean(slack**2)

    result = bfgs(energy, np.zeros(len(initial)))
    # A margin is `margin` times the pairs' root mean square initial gap.
    unit = margin * np.sqrt(np.mean((initial[high] - initial[low]) ** 2))
    margins = reranker.scores_ / unit
    assert_allclose(energy(margins), result.fun, rtol=1e-4)
    assert_allclose(reranker.objective_[0], result.fun, rtol=1e-4)
    assert_allclose(margins - margins.mean(), result.x - result.x.mean(), atol=1e-3)
    assert_allclose(reranker.scores_.mean(), initial.mean(), rtol=1e-9)


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


def test_hinge_matches_squared_hinge_minimiser(rng):
    features, initial = two_clusters(rng)
    for c, rho in [(0.1, 3), (1.0, 29), (10.0, 1)]:
        reranker = HingeReranker(c=c, rho=rho, n_neighbors=5, eps_abs=1e-9, eps_rel=1e-9).fit(features, initial)
        lap = dense_laplacian(features, n_neighbors=5)
        pairs = np.array(rho_pairs(initial, rho))
        # One margin is the selected pairs' root mean square initial gap.
        unit = np.sqrt(np.mean((initial[pairs[:, 0]] - initial[pairs[:, 1]]) ** 2))

        def energy(r, lap=lap, pairs=pairs, c=c):  # normalised, in margins
            slack = np.maximum(1.0 - (r[pairs[:, 0]] - r[pairs[:, 1]]), 0)
            return r @ lap @ r / np.trace(lap) + c * np.mean(slack**2)

        _, reference = bfgs_minimum(energy, np.zeros(len(initial)))
        assert reranker.solver_status_[0] == "solved"
        assert_allclose(reranker.objective_[0], reference, rtol=1e-4)
        assert_allclose(energy(reranker.scores_ / unit), reference, rtol=1e-4)


@pytest.mark.parametrize("margin", [0.01, 1.0, 100.0])
def test_hinge_ranking_does_not_depend_on_the_margin(rng, margin):
    features, initial = two_clusters(rng, 40)
    reference = HingeReranker(c=0.3, rho=4).fit_predict(features, initial)
    scores = HingeReranker(c=0.3, rho=4, margin=margin).fit_predict(features, initial)
    assert_array_equal(np.argsort(-scores), np.argsort(-reference))
    # r*(a) = a r*(1), up to the constant shift the energy does not see
    centred = scores - scores.mean()
    assert_allclose(centred, margin * (reference - reference.mean()), rtol=1e-4, atol=1e-6 * margin)


def test_hinge_reports_osqp_status(rng):
    features, initial = two_clusters(rng, 40)
    # c=1e3 satisfies pairs beyond the margin: the QP, not the closed form, solves it.
    with pytest.warns(ConvergenceWarning, match="OSQP stopped with status 'maximum iterations reached'"):
        reranker = HingeReranker(c=1e3, max_iter=3, eps_abs=1e-12, eps_rel=1e-12).fit(features, initial)
    assert reranker.solver_status_[0] == "maximum iterations reached"
    assert reranker.n_iter_[0] == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = HingeReranker(c=1e3).fit(features, initial)
    assert fitted.solver_status_[0] == "solved" and fitted.n_iter_[0] > 0
