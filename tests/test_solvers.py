"""The rerankers' sparse solves: conjugate gradients or a factorisation, by cost."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import sparse
from scipy.sparse.linalg import splu

from skqbnorm import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
)
from skqbnorm.rerankers import _solvers

RERANKERS = [HingeReranker, PreferenceStrengthReranker, PointwiseReranker, RandomWalkReranker]


def colamd_factorised(system):
    """The factorisation every list of up to 2,000 samples had before the cost-based choice."""
    return splu(sparse.csc_matrix(system))


@pytest.mark.parametrize("cls", RERANKERS)
@pytest.mark.parametrize("n_items, relative_c", [(300, 1.0), (1200, 1.0), (1200, 0.01), (1200, 100.0)])
def test_scores_equal_the_former_direct_solves(monkeypatch, cls, n_items, relative_c):
    # Lists of up to 2,000 samples were factorised (SuperLU, COLAMD ordering); the
    # cost-based choice iterates on most of them now (32-d k-NN graphs fill in).
    rng = np.random.default_rng(n_items)
    features, initial = rng.normal(size=(n_items, 32)), rng.normal(size=n_items)
    reranker = cls()
    reranker.set_params(c=reranker.c * relative_c)
    now = reranker.fit(features, initial)
    scores, n_iter = now.scores_.copy(), now.n_iter_[0]
    monkeypatch.setattr(_solvers, "factorisation_flops", lambda n: 0.0)
    monkeypatch.setattr(_solvers, "factorised", colamd_factorised)
    before = reranker.fit(features, initial)
    assert before.n_iter_[0] == 0 and list(before.solver_status_) == ["solved"]
    assert_allclose(scores, before.scores_, rtol=1e-6, atol=1e-6 * np.abs(before.scores_).max())
    assert np.array_equal(np.argsort(-scores), np.argsort(-before.scores_))
    if n_items == 1200 and relative_c == 1.0 and cls is not HingeReranker:
        assert n_iter > 0  # it iterated: the comparison is between two different solvers


def test_iterations_that_would_cost_more_than_the_factorisation_give_way_to_it(monkeypatch):
    # Samples along a line make a path-like graph, and a tiny c a nearly singular
    # point-wise system: conjugate gradients stop at their budget (a dense Cholesky's
    # operations) and the factorisation solves it.
    rng = np.random.default_rng(0)
    features, initial = rng.uniform(size=(300, 1)), rng.normal(size=300)
    budgets = []
    real = _solvers.conjugate_gradients

    def recording(system, rhs, start, max_iter=None):
        budgets.append(max_iter)
        return real(system, rhs, start, max_iter=max_iter)

    monkeypatch.setattr(_solvers, "conjugate_gradients", recording)
    tiny = PointwiseReranker(c=1e-9).fit(features, initial)
    assert len(budgets) == 1 and 50 <= budgets[0] < 20 * 300
    assert tiny.n_iter_[0] == 0 and list(tiny.solver_status_) == ["solved"]
    monkeypatch.setattr(_solvers, "factorisation_flops", lambda n: 0.0)
    assert_allclose(tiny.scores_, PointwiseReranker(c=1e-9).fit(features, initial).scores_, rtol=1e-12)
    # At the default c the same list converges within the budget.
    monkeypatch.setattr(_solvers, "factorisation_flops", lambda n: n**3 / 3)
    assert 0 < PointwiseReranker().fit(features, initial).n_iter_[0] < budgets[0]


def test_small_lists_are_factorised_at_once(monkeypatch):
    def no_cg(*args, **kwargs):
        raise AssertionError("conjugate gradients on a 60-item list")

    monkeypatch.setattr(_solvers, "conjugate_gradients", no_cg)
    rng = np.random.default_rng(1)
    features, initial = rng.normal(size=(60, 32)), rng.normal(size=60)
    for cls in RERANKERS:
        assert cls().fit(features, initial).n_iter_[0] == 0


def test_the_factorisation_orders_symmetrically_and_refuses_a_singular_system():
    # A path graph's Laplacian plus a diagonal: minimum degree on A^T + A keeps the
    # factors' fill at that of a tridiagonal matrix.
    n_items = 200
    path = sparse.diags([np.full(n_items - 1, -1.0), np.full(n_items, 2.0), np.full(n_items - 1, -1.0)],
                        [-1, 0, 1])
    lu = _solvers.factorised(path + 0.1 * sparse.identity(n_items))
    assert lu.L.nnz + lu.U.nnz <= 4 * n_items
    rhs = np.random.default_rng(2).normal(size=n_items)
    assert_allclose((path + 0.1 * sparse.identity(n_items)) @ lu.solve(rhs), rhs, atol=1e-12)
    with pytest.raises(ValueError, match="singular"):
        _solvers.factorised(sparse.csr_matrix(np.array([[1.0, -1.0], [-1.0, 1.0]])))


def test_small_lists_build_their_graph_and_every_list_solves_on_one_thread(monkeypatch):
    # Waking thread pools for a 100-item list cost more than its search (issue 20).
    from threadpoolctl import threadpool_info, threadpool_limits

    from skqbnorm.rerankers import _graph

    seen = {}
    real_edges, real_solve = _graph.nearest_neighbour_edges, _solvers.solve_by_cost

    def edges(features, n_neighbors):
        seen.setdefault("graph", []).append(max(p["num_threads"] for p in threadpool_info()))
        return real_edges(features, n_neighbors)

    def solve(*args, **kwargs):
        seen.setdefault("solve", []).append(max(p["num_threads"] for p in threadpool_info()))
        return real_solve(*args, **kwargs)

    monkeypatch.setattr(_graph, "nearest_neighbour_edges", edges)
    monkeypatch.setattr(_solvers, "solve_by_cost", solve)
    monkeypatch.setattr(_graph, "SERIAL_WORK", 2**26)
    rng = np.random.default_rng(3)
    with threadpool_limits(2):
        PointwiseReranker().fit(rng.normal(size=(100, 32)), rng.normal(size=100))
        large = rng.normal(size=(1500, 32))  # 1500^2 * 32 > 2^26: keeps the caller's threads
        PointwiseReranker().fit(large, rng.normal(size=1500))
    assert seen["graph"] == [1, 2] and seen["solve"] == [1, 1]
