"""The rerankers' solvers: components without pairs, the direct and coarse solves, the
conjugate gradients' preconditioner and iteration cap, and the choice between conjugate
gradients and a factorisation by cost."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import sparse
from scipy.sparse.linalg import cg, splu
from scipy.spatial.distance import cdist
from sklearn.exceptions import ConvergenceWarning

from skqbnorm import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    catalogue,
)
from skqbnorm.rerankers import BayesianReranker, _solvers
from skqbnorm.rerankers._solvers import conjugate_gradients, solve_pinned

# Items 0-2 (features 100, 101, 103) and 3-5 (0, 1, 2) form two components of the
# 1-nearest-neighbour graph; in the first, degrees differ (w01 = e^-0.5, w12 = e^-2).
TWO_COMPONENTS = np.array([[100.0], [101.0], [103.0], [0.0], [1.0], [2.0]])


FIRST_NULL = {
    "unnormalized": np.ones(3),
    "normalized": np.sqrt([np.exp(-0.5), np.exp(-0.5) + np.exp(-2), np.exp(-2)]),
}


@pytest.mark.parametrize("reranker", [HingeReranker, PreferenceStrengthReranker])
@pytest.mark.parametrize("laplacian", ["unnormalized", "normalized"])
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
    # Offsets between components are solved first (by conjugate gradients here): a stop
    # there must reach solver_status_ and fit's warning, with the advice of the solver
    # that stopped (not OSQP's, for the hinge).
    real_cg, calls = _solvers.cg, []

    def coarse_stops_short(system, rhs, **options):
        scores, failed = real_cg(system, rhs, **options)
        calls.append(system.shape[0])
        return scores, (1 if len(calls) == 1 else failed)

    monkeypatch.setattr(_solvers, "factorisation_flops", lambda n_items: np.inf)
    monkeypatch.setattr(_solvers, "cg", coarse_stops_short)
    rng = np.random.default_rng(0)
    features, initial = rng.normal(size=(40, 3)), rng.normal(size=40)
    # c = 0.3 keeps the hinge's slacks positive: its closed form, not OSQP, gives the status.
    for reranker in (PreferenceStrengthReranker(n_neighbors=1, c=0.3), HingeReranker(n_neighbors=1, c=0.3)):
        calls.clear()
        with pytest.warns(ConvergenceWarning, match=r"^Conjugate gradients stopped .* on the list: "
                                                     r".*relative residual of 1e-10"):
            reranker.fit(features, initial)
        assert list(reranker.solver_status_) == ["maximum iterations reached"]


def test_free_directions_never_solve_iteratively(monkeypatch):
    # Its status would go unseen: the scales of the null vectors are always factorised.
    def no_cg(*args, **kwargs):
        raise AssertionError("conjugate gradients in free_directions")

    monkeypatch.setattr(_solvers, "factorisation_flops", lambda n_items: np.inf)
    monkeypatch.setattr(_solvers, "cg", no_cg)
    # Two affinity components {0, 1} and {2, 3}, degrees 1 and 2; pairs (0, 2) and (1, 3).
    prior_label = np.array([0, 0, 1, 1])
    null = np.sqrt(np.array([1.0, 1.0, 2.0, 2.0]))
    free, direction = _solvers.free_directions(np.zeros(4, dtype=int), (np.array([0, 1]), np.array([2, 3])),
                                               prior_label, null)
    assert free.tolist() == [True]
    assert_allclose(direction / direction[0], np.ones(4))  # scales 1 : 1/sqrt(2), equal on every pair


# -- the solver chosen by cost ------------------------------------------------------------

#: The Bayesian rerankers of the catalogue (a registered one included).
RERANKERS = [cls for cls in catalogue.rerankers() if issubclass(cls, BayesianReranker)]


def colamd_factorised(system):
    """The factorisation every list of up to 2,000 samples had before the cost-based choice."""
    return splu(sparse.csc_matrix(system))


@pytest.mark.parametrize("cls", RERANKERS)
@pytest.mark.parametrize("n_items, c", [(300, 1.0), (1200, 1.0), (1200, 0.01), (1200, 3.0)])
def test_scores_equal_the_former_direct_solves(monkeypatch, cls, n_items, c):
    # Lists of up to 2,000 samples were factorised (SuperLU, COLAMD ordering); the
    # cost-based choice iterates on most of them now (32-d k-NN graphs fill in).
    rng = np.random.default_rng(n_items)
    features, initial = rng.normal(size=(n_items, 32)), rng.normal(size=n_items)
    reranker = cls(c=c)  # the defaults (c = 1) and the range the former default (0.03) spanned
    now = reranker.fit(features, initial)
    scores, n_iter = now.scores_.copy(), now.n_iter_[0]
    monkeypatch.setattr(_solvers, "factorisation_flops", lambda n: 0.0)
    monkeypatch.setattr(_solvers, "factorised", colamd_factorised)
    before = reranker.fit(features, initial)
    assert before.n_iter_[0] == 0 and list(before.solver_status_) == ["solved"]
    assert_allclose(scores, before.scores_, rtol=1e-6, atol=1e-6 * np.abs(before.scores_).max())
    assert np.array_equal(np.argsort(-scores), np.argsort(-before.scores_))
    if n_items == 1200 and c == 1.0 and cls is not HingeReranker:
        assert n_iter > 0  # it iterated: the comparison is between two different solvers


def test_iterations_that_would_cost_more_than_the_factorisation_give_way_to_it(monkeypatch):
    # Samples along a line make a path-like graph, and a tiny c a nearly singular
    # point-wise system: conjugate gradients stop at their budget (a dense Cholesky's
    # operations) and the factorisation solves it.
    rng = np.random.default_rng(0)
    features, initial = rng.uniform(size=(600, 1)), rng.normal(size=600)
    budgets = []
    real = _solvers.conjugate_gradients

    def recording(system, rhs, start, max_iter=None):
        budgets.append(max_iter)
        return real(system, rhs, start, max_iter=max_iter)

    monkeypatch.setattr(_solvers, "conjugate_gradients", recording)
    tiny = PointwiseReranker(c=1e-9).fit(features, initial)
    assert len(budgets) == 1 and 50 <= budgets[0] < 20 * 600
    assert tiny.n_iter_[0] == 0 and list(tiny.solver_status_) == ["solved"]
    monkeypatch.setattr(_solvers, "factorisation_flops", lambda n: 0.0)
    assert_allclose(tiny.scores_, PointwiseReranker(c=1e-9).fit(features, initial).scores_, rtol=1e-12)
    # At c = 1 the same list converges within the budget.
    monkeypatch.setattr(_solvers, "factorisation_flops", lambda n: n**3 / 3)
    assert 0 < PointwiseReranker(c=1.0).fit(features, initial).n_iter_[0] < budgets[0]


def test_small_lists_are_factorised_at_once(monkeypatch):
    def no_cg(*args, **kwargs):
        raise AssertionError("conjugate gradients on a 60-item list")

    monkeypatch.setattr(_solvers, "conjugate_gradients", no_cg)
    rng = np.random.default_rng(1)
    features, initial = rng.normal(size=(60, 32)), rng.normal(size=60)
    for cls in RERANKERS:  # c = 0.3: the hinge's closed form (a larger c may need OSQP)
        assert cls(c=0.3).fit(features, initial).n_iter_[0] == 0


def test_the_sparse_factorisation_orders_symmetrically_and_refuses_a_singular_system():
    # A path graph's Laplacian plus a diagonal: minimum degree on A^T + A keeps the
    # factors' fill at that of a tridiagonal matrix.
    n_items = 200
    path = sparse.diags([np.full(n_items - 1, -1.0), np.full(n_items, 2.0), np.full(n_items - 1, -1.0)],
                        [-1, 0, 1])
    lu = _solvers.sparse_factorised(path + 0.1 * sparse.identity(n_items))
    assert lu.L.nnz + lu.U.nnz <= 4 * n_items
    rhs = np.random.default_rng(2).normal(size=n_items)
    assert_allclose((path + 0.1 * sparse.identity(n_items)) @ lu.solve(rhs), rhs, atol=1e-12)
    with pytest.raises(ValueError, match=r"list of 2 samples is singular \(Factor is exactly singular"):
        _solvers.sparse_factorised(sparse.csr_matrix(np.array([[1.0, -1.0], [-1.0, 1.0]])))


def test_systems_that_fit_the_dense_system_memory_are_factorised_densely(monkeypatch):
    # A k-NN system fills in nearly densely: LAPACK's LU solves it as SuperLU does,
    # and a system too large to hold densely (here: over 1 MiB) goes to SuperLU.
    rng = np.random.default_rng(3)
    features, initial = rng.normal(size=(400, 32)), rng.normal(size=400)
    systems = []
    real = _solvers.solve_by_cost

    def recording(system, rhs, start, *, factorise):
        systems.append((system, rhs))
        return real(system, rhs, start, factorise=factorise)

    monkeypatch.setattr(_solvers, "solve_by_cost", recording)
    PointwiseReranker(c=0.01).fit(features, initial)
    system, rhs = systems[-1]
    dense, sparse_lu = _solvers.factorised(system), _solvers.sparse_factorised(system)
    assert isinstance(dense, _solvers.DenseLU)
    assert_allclose(dense.solve(rhs), sparse_lu.solve(rhs), rtol=1e-10, atol=1e-12 * np.abs(rhs).max())
    assert_allclose(system @ dense.solve(rhs), rhs, atol=1e-10 * np.abs(rhs).max())
    monkeypatch.setattr(_solvers, "DENSE_SYSTEM_MEMORY", 1)
    assert not _solvers.holds_densely(363) and _solvers.holds_densely(362)
    assert not isinstance(_solvers.factorised(system), _solvers.DenseLU)
    with pytest.raises(ValueError, match=r"list of 2 samples is singular \(a zero pivot"):
        _solvers.factorised(sparse.csr_matrix(np.array([[1.0, -1.0], [-1.0, 1.0]])))


def test_small_lists_cost_no_more_than_longer_ones_to_solve():
    # The factorisation small lists get is the cheaper one: a dense LU of a 200-item
    # k-NN system costs fewer iterations than conjugate gradients take (SuperLU's
    # took 6-9 of them, which made 200 items dearer than 300).
    rng = np.random.default_rng(4)
    for n_items in (100, 200):
        iteration = 2 * 14 * n_items + 12 * n_items + _solvers.ITERATION_OVERHEAD  # ~14 entries a row
        assert _solvers.factorisation_flops(n_items) < 12 * iteration
    assert _solvers.factorisation_flops(1000) > _solvers.FEWEST_ITERATIONS * (
        2 * 14 * 1000 + 12 * 1000 + _solvers.ITERATION_OVERHEAD)
    features, initial = rng.normal(size=(200, 32)), rng.normal(size=200)
    assert PointwiseReranker().fit(features, initial).n_iter_[0] == 0


def test_small_lists_build_their_graph_and_every_list_solves_on_one_thread(monkeypatch):
    # Waking thread pools for a 100-item list cost more than its search (issue 20).
    from threadpoolctl import threadpool_info, threadpool_limits

    from skqbnorm.rerankers import _graph

    seen = {}
    real_edges, real_solve = _graph.nearest_neighbor_edges, _solvers.solve_by_cost

    def edges(features, n_neighbors):
        seen.setdefault("graph", []).append(max(p["num_threads"] for p in threadpool_info()))
        return real_edges(features, n_neighbors)

    def solve(*args, **kwargs):
        seen.setdefault("solve", []).append(max(p["num_threads"] for p in threadpool_info()))
        return real_solve(*args, **kwargs)

    monkeypatch.setattr(_graph, "nearest_neighbor_edges", edges)
    monkeypatch.setattr(_solvers, "solve_by_cost", solve)
    monkeypatch.setattr(_graph, "SERIAL_WORK", 2**26)
    rng = np.random.default_rng(3)
    with threadpool_limits(2):
        PointwiseReranker().fit(rng.normal(size=(100, 32)), rng.normal(size=100))
        large = rng.normal(size=(1500, 32))  # 1500^2 * 32 > 2^26: keeps the caller's threads
        PointwiseReranker().fit(large, rng.normal(size=1500))
    assert seen["graph"] == [1, 2] and seen["solve"] == [1, 1]
