"""The rerankers' solvers: components without pairs, the direct and coarse solves and the
conjugate gradients' preconditioner and iteration cap."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import sparse
from scipy.sparse.linalg import cg
from scipy.spatial.distance import cdist
from sklearn.exceptions import ConvergenceWarning

from skqbnorm import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
)
from skqbnorm.rerankers import _solvers
from skqbnorm.rerankers._solvers import conjugate_gradients, solve_pinned

# Items 0-2 (features 100, 101, 103) and 3-5 (0, 1, 2) form two components of the
# 1-nearest-neighbour graph; in the first, degrees differ (w01 = e^-0.5, w12 = e^-2).
TWO_COMPONENTS = np.array([[100.0], [101.0], [103.0], [0.0], [1.0], [2.0]])


FIRST_NULL = {
    "unnormalised": np.ones(3),
    "normalised": np.sqrt([np.exp(-0.5), np.exp(-0.5) + np.exp(-2), np.exp(-2)]),
}


@pytest.mark.parametrize("reranker", [HingeReranker, PreferenceStrengthReranker])
@pytest.mark.parametrize("laplacian", ["unnormalised", "normalised"])
def test_a_component_without_pairs_keeps_its_initial_mean(reranker, laplacian):
    # The only selected pair (top item 3, bottom item 5) lies in the second component:
    # the first feels only the prior, and takes the multiple of its null vector (ones,
    # or sqrt(d)) whose mean is the mean of its initial scores.
    initial = np.array([3.0, 2.0, 2.5, 5.0, 4.0, 1.0])
    model = reranker(
        c=0.5,
        n_neighbors=1,
        sigma=1.0,
        laplacian=laplacian,
        pairs="top_bottom",
        n_top=1,
        n_bottom=1,
        initial="scores",
    )
    scores = model.fit_predict(TWO_COMPONENTS, initial)
    null = FIRST_NULL[laplacian]
    assert_allclose(scores[:3], 2.5 / null.mean() * null, rtol=1e-9)


@pytest.mark.parametrize("reranker", [HingeReranker, PreferenceStrengthReranker])
def test_a_component_holding_only_the_high_end_of_a_pair_is_solved(reranker):
    # The pair (item 3, item 2) links the components into one, solved as a whole: it
    # keeps the mean of all initial scores (35 / 12), and neither component stays at
    # the mean of its own (4 and 11 / 6), as a component without pairs would.
    initial = np.array([2.5, 2.0, 1.0, 5.0, 4.0, 3.0])
    model = reranker(
        c=0.5,
        n_neighbors=1,
        sigma=1.0,
        pairs="top_bottom",
        n_top=1,
        n_bottom=1,
        initial="scores",
    )
    scores = model.fit_predict(TWO_COMPONENTS, initial)
    assert scores.mean() == pytest.approx(35 / 12)
    assert abs(scores[3:].mean() - 4.0) > 0.1
    assert abs(scores[:3].mean() - 11 / 6) > 0.1


def test_conjugate_gradients_iterations_of_a_long_list():
    # Above 2,000 items the pointwise system (L / dbar + c I) r = c rbar is solved by
    # Jacobi-preconditioned conjugate gradients: n_iter_ must be the iteration count
    # of a plain scipy run on the same system (k-NN Gaussian graph built here from
    # its definition; x0 = 0 on the right-hand side with each component's mean
    # removed, which scaling by c does not change).
    rng = np.random.default_rng(0)
    features = rng.normal(size=(2001, 3))
    initial = features[:, 0] + rng.normal(scale=0.5, size=2001)
    distances = cdist(features, features)
    np.fill_diagonal(distances, np.inf)
    rows = np.repeat(np.arange(2001), 10)
    cols = np.argpartition(distances, 10, axis=1)[:, :10].ravel()
    weights = sparse.csr_matrix(
        (np.exp(-(distances[rows, cols] ** 2) / 2), (rows, cols)), shape=(2001, 2001)
    )
    weights = weights.maximum(weights.T)
    prior = sparse.diags(np.asarray(weights.sum(axis=1)).ravel()) - weights
    for c in [0.03, 0.3]:
        system = (prior / (prior.diagonal().mean()) + c * sparse.eye(2001)).tocsr()
        iterations = []
        cg(
            system,
            initial - initial.mean(),
            x0=np.zeros(2001),
            rtol=1e-10,
            atol=0.0,
            maxiter=20 * 2001,
            M=sparse.diags(1 / system.diagonal()),
            callback=iterations.append,
        )
        model = PointwiseReranker(c=c, sigma=1.0, n_neighbors=10).fit(features, initial)
        assert model.solver_status_.tolist() == ["solved"]
        assert model.n_iter_.tolist() == [len(iterations)]


# ------------------------------------------------------------ conjugate gradients


def test_conjugate_gradients_jacobi_preconditioner():
    # Jacobi-preconditioned CG solves a diagonal system in one iteration, also with
    # entries below 1. A zero diagonal entry (an empty row) keeps preconditioner 1.
    system = sparse.csr_matrix(np.diag([0.5, 2.0, 4.0]))
    scores, info = conjugate_gradients(system, np.array([1.0, 1.0, 1.0]), np.zeros(3))
    assert_allclose(scores, [2.0, 0.5, 0.25], rtol=1e-12)
    assert info == {"status": "solved", "n_iter": 1, "solver": "conjugate gradients"}
    system = sparse.csr_matrix(np.diag([0.5, 0.0, 4.0]))
    scores, info = conjugate_gradients(system, np.array([1.0, 0.0, 1.0]), np.zeros(3))
    assert_allclose(scores, [2.0, 0.0, 0.25], rtol=1e-12)
    assert info == {"status": "solved", "n_iter": 1, "solver": "conjugate gradients"}


def test_conjugate_gradients_stop_after_twenty_iterations_per_item():
    # An inconsistent system (rhs outside the range) never converges; fit reports it.
    system = sparse.csr_matrix(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _, info = conjugate_gradients(system, np.array([1.0, 1.0]), np.zeros(2))
    assert info == {"status": "maximum iterations reached", "n_iter": 40, "solver": "conjugate gradients"}


def test_a_singular_direct_solve_is_refused_by_name():
    # A Laplacian with nothing pinned: scipy's RuntimeError becomes a named ValueError.
    system = sparse.csr_matrix(np.array([[1.0, -1.0], [-1.0, 1.0]]))
    with pytest.raises(ValueError, match=r"reranking system of a list of 2 samples is singular"):
        solve_pinned(system, np.zeros(2), pinned=np.zeros(2, dtype=bool), start=np.zeros(2))


def test_a_short_stop_of_the_coarse_solve_is_reported(monkeypatch):
    # Offsets between components are solved first (conjugate gradients past 2,000
    # components): a stop there must reach solver_status_ and fit's warning, with the
    # advice of the solver that stopped (not OSQP's, for the hinge).
    real_cg, calls = _solvers.cg, []

    def coarse_stops_short(system, rhs, **options):
        scores, failed = real_cg(system, rhs, **options)
        calls.append(system.shape[0])
        return scores, (1 if len(calls) == 1 else failed)

    monkeypatch.setattr(_solvers, "DIRECT_MAX_SIZE", 10)
    monkeypatch.setattr(_solvers, "cg", coarse_stops_short)
    rng = np.random.default_rng(0)
    features, initial = rng.normal(size=(40, 3)), rng.normal(size=40)
    for reranker in (PreferenceStrengthReranker(n_neighbors=1), HingeReranker(n_neighbors=1)):
        calls.clear()
        with pytest.warns(ConvergenceWarning, match=r"^Conjugate gradients stopped .* on the list: "
                                                     r".*relative residual of 1e-10"):
            reranker.fit(features, initial)
        assert list(reranker.solver_status_) == ["maximum iterations reached"]


def test_free_directions_never_solve_iteratively(monkeypatch):
    # Its status would go unseen: the scales of the null vectors are always factorised.
    def no_cg(*args, **kwargs):
        raise AssertionError("conjugate gradients in free_directions")

    monkeypatch.setattr(_solvers, "DIRECT_MAX_SIZE", 1)
    monkeypatch.setattr(_solvers, "cg", no_cg)
    # Two affinity components {0, 1} and {2, 3}, degrees 1 and 2; pairs (0, 2) and (1, 3).
    prior_label = np.array([0, 0, 1, 1])
    null = np.sqrt(np.array([1.0, 1.0, 2.0, 2.0]))
    free, direction = _solvers.free_directions(np.zeros(4, dtype=int), (np.array([0, 1]), np.array([2, 3])),
                                               prior_label, null)
    assert free.tolist() == [True]
    assert_allclose(direction / direction[0], np.ones(4))  # scales 1 : 1/sqrt(2), equal on every pair
