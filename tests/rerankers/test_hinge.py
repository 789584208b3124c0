"""The hinge reranker: its parameter bounds, margin overflow and the QP's energy minimum."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from skqbnorm import (
    HingeReranker,
)


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
