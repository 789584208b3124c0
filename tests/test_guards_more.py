"""More boundary guards for mutants ``scripts/mutation_test.py`` found alive.

The streaming core's sizing rules (chunk rows, tree leaves, product rows), the
bookkeeping of blocks and jobs, the error positions, and the conjugate-gradient
solver's preconditioner and iteration cap, each against values written out by hand.
"""

import contextlib
import warnings
from fractions import Fraction

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning

from skqbnorm import (
    Centering,
    HingeReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
)
from skqbnorm._core import (
    ColumnLogSumExp,
    ColumnMean,
    ColumnMoments,
    ColumnTree,
    ProbeMatrix,
    _parallel,
    alignment,
    embedding_products,
    leaf_rows,
    moments,
    reduce_bank,
    rows_per_chunk,
)
from skqbnorm.metrics import hinge_distance
from skqbnorm.rerankers import _solvers
from skqbnorm.rerankers._solvers import conjugate_gradients, solve_pinned

MIB = 2**20

# ------------------------------------------------------------------ sizing rules


@pytest.mark.parametrize(
    "args, expected",
    [
        ((1024, 8, 1, 2), 64),  # 1 MiB / (1024 * 8 B * 2 buffers)
        ((1024, 8, None, 2), 1024),  # the default 16 MiB
        ((1, 8, 1, 1), 131072),  # 1 MiB / 8 B
        ((0, 8, 1, 1), 131072),  # no column counts as one
        ((10**9, 8, 1, 2), 1),  # nothing fits: still one row
    ],
)
def test_rows_per_chunk_by_hand(args, expected):
    assert rows_per_chunk(*args) == expected


@pytest.mark.parametrize(
    "n_columns, expected",
    [
        (0, 256),  # capped at MAX_LEAF_ROWS
        (1, 256),
        (2**17, 16),  # 16 MiB / (8 B * 2**17) = 16 rows exactly
        (2**17 + 1, 8),  # 15.99 rows: the power of two below
        (10**7, 1),  # less than a row fits: one row
    ],
)
def test_leaf_rows_by_hand(n_columns, expected):
    assert leaf_rows(n_columns) == expected


class _Leafy:
    def __init__(self, leaf_rows):
        self.leaf_rows = leaf_rows


def test_alignment_is_the_largest_leaf():
    assert alignment([]) == 1
    assert alignment([object()]) == 1
    assert alignment([object(), _Leafy(4), _Leafy(16)]) == 16


def test_product_rows_by_hand():
    # 256 MiB of products: 2**28 / (2**18 columns * 8 B) = 128 rows; float32 fits 256.
    wide = np.ones((1, 2**18))
    assert ProbeMatrix(np.ones((1, 1)), wide).product_rows() == 128
    assert ProbeMatrix(np.ones((1, 1)), wide, dtype=np.float32).product_rows() == 256
    assert ProbeMatrix(np.ones((1, 1)), wide).product_rows(align=512) == 512
    assert ProbeMatrix(np.ones((3, 1)), np.ones((1, 1000))).product_rows() == 2048  # the cap
    # 2**28 / (200_000 * 8) = 167.8 rows: the power of two below.
    assert ProbeMatrix(np.ones((1, 1)), np.ones((1, 200_000))).product_rows() == 128


def test_alignment_of_a_probe_matrix():
    assert ProbeMatrix(np.zeros((5, 3))).alignment(4) == 4  # precomputed: the leaves only
    embedded = ProbeMatrix(np.ones((5, 1)), np.ones((1, 2**18)))
    assert embedded.alignment(1) == 128  # whole products


# ------------------------------------------------------------------ blocks and jobs


def test_embedding_blocks_are_numbered_and_computed_by_hand():
    # 2,100 bank rows in products of 2,048 rows, handed on in slices of 1,000 rows
    # (72,000 B / (3 columns * 8 B * 3 buffers)), numbered from first_row.
    rng = np.random.default_rng(0)
    bank = rng.normal(size=(2100, 2))
    gallery_t = rng.normal(size=(2, 3))
    probe = ProbeMatrix(bank, gallery_t)
    for first_row in [0, 4096]:
        blocks = list(probe.blocks(72_000 / MIB, first_row=first_row))
        bounds = [(0, 1000), (1000, 2000), (2000, 2048), (2048, 2100)]
        expected = [(first_row + start, first_row + stop) for start, stop in bounds]
        assert [(rows.start, rows.stop) for rows, _ in blocks] == expected
        for (start, stop), (_, block) in zip(bounds, blocks):
            assert_allclose(block, bank[start:stop] @ gallery_t, rtol=1e-12)


def test_a_non_finite_embedding_is_numbered_from_first_row():
    bank = np.ones((8, 2))
    bank[4, 1] = np.nan
    with pytest.raises(ValueError, match=r"embedding 14, dimension 1 "):
        ProbeMatrix(bank, np.ones((2, 3))).block(slice(3, 6), first_row=10)


def test_embedding_products_name_the_first_non_finite_entry():
    queries = np.ones((4, 3))
    queries[1, 2] = np.nan
    queries[3, 0] = np.inf
    with pytest.raises(ValueError, match=r"embedding 6, dimension 2 is nan"):
        embedding_products(queries, np.ones((3, 2)), slice(5, 9), "querybank", "dot")


class _Recorder:
    """A reducer that records the rows it is given and checks their values."""

    def __init__(self, bank, leaf_rows=1):
        self.bank = bank
        self.leaf_rows = leaf_rows
        self.rows = []

    def update(self, block, rows):
        assert_array_equal(block, self.bank[rows])
        self.rows.append((rows.start, rows.stop))

    def merge(self, other):
        self.rows += other.rows


def _recorded_reduction(bank, leaf_rows, **kwargs):
    made = []

    def make_reducers():
        made.append(_Recorder(bank, leaf_rows))
        return [made[-1]]

    (reducer,) = reduce_bank(ProbeMatrix(bank), make_reducers, **kwargs)
    return reducer, made


def test_two_jobs_split_the_bank_and_its_working_memory():
    # Two jobs of 5 rows, each with half of 384 B / MiB: blocks of
    # 192 B / (4 columns * 8 B * 3 buffers) = 2 rows.
    bank = np.arange(40.0).reshape(10, 4)
    reducer, made = _recorded_reduction(bank, 1, working_memory=384 / MIB, n_jobs=2)
    assert len(made) == 2  # the first job reuses the reducers made to read the leaves
    assert reducer is made[0]
    assert reducer.rows == [(0, 2), (2, 4), (4, 5), (5, 7), (7, 9), (9, 10)]


def test_jobs_hold_whole_leaves():
    # Leaves of 4 rows: 3 leaves in two jobs of 1 and 2 leaves; blocks of 1 leaf.
    bank = np.arange(40.0).reshape(10, 4)
    reducer, made = _recorded_reduction(bank, 4, working_memory=384 / MIB, n_jobs=2)
    assert len(made) == 2
    assert reducer.rows == [(0, 4), (4, 8), (8, 10)]
    reducer, made = _recorded_reduction(bank, 4, working_memory=384 / MIB, n_jobs=1)
    assert len(made) == 1
    assert reducer.rows == [(0, 4), (4, 8), (8, 10)]


@pytest.mark.parametrize(
    "cpu_count, expected", [(8, 4), (3, 1), (2, 1), (1, 1), (None, 1)]
)
def test_jobs_share_the_blas_threads(monkeypatch, cpu_count, expected):
    # Two jobs: each may give BLAS cpu_count // 2 threads, and at least one.
    recorded = []

    def record_limits(limits=None, user_api=None):
        recorded.append((limits, user_api))
        return contextlib.nullcontext()

    monkeypatch.setattr(_parallel, "threadpool_limits", record_limits)
    monkeypatch.setattr(_parallel.os, "cpu_count", lambda: cpu_count)
    _recorded_reduction(np.ones((4, 2)), 1, n_jobs=2)
    assert recorded == [(expected, "blas")]
    assert type(recorded[0][0]) is int


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


# ------------------------------------------------------------------ reduction trees


class _Structure(ColumnTree):
    """A tree whose root value spells its structure: combining is not commutative."""

    def _leaves(self, groups):
        return (groups.sum(axis=1, dtype=np.float64),)

    def _combine(self, left, right):
        return (2 * left[0] + 3 * right[0],)

    def _promote(self, node):
        return (5 * node[0],)


def _structure_by_hand(values):
    # Pair neighbours level by level, left then right; a last node without a right
    # sibling is promoted alone.
    values = list(values)
    while len(values) > 1:
        pairs = [2 * values[i] + 3 * values[i + 1] for i in range(0, len(values) - 1, 2)]
        values = pairs + ([5 * values[-1]] if len(values) % 2 else [])
    return values[0]


def _one_row_leaves(bank, bounds):
    tree = _Structure(bank.shape[1])
    tree.leaf_rows = 1
    for start, stop in bounds:
        tree.update(bank[start:stop], slice(start, stop))
    return tree


@pytest.mark.parametrize("n_rows", [1, 2, 5, 7, 8, 11, 13])
def test_column_tree_combines_children_in_order_for_every_split(n_rows):
    bank = np.arange(1.0, n_rows + 1)[:, None]
    expected = _structure_by_hand(range(1, n_rows + 1))
    splits = [[(0, n_rows)], [(row, row + 1) for row in range(n_rows)]]
    splits.append([(0, min(3, n_rows)), (min(3, n_rows), n_rows)])
    for bounds in splits:
        (root,), _ = _one_row_leaves(bank, bounds).root()
        assert root.tolist() == [expected]
    middle = n_rows // 2
    for first, second in [((0, middle), (middle, n_rows)), ((middle, n_rows), (0, middle))]:
        tree = _one_row_leaves(bank, [first])
        tree.merge(_one_row_leaves(bank, [second]))
        (root,), _ = tree.root()
        assert root.tolist() == [expected]


def test_column_tree_keeps_one_node_per_binary_digit():
    # Leaves added one by one are combined as soon as their sibling is there: after
    # k leaves, one node per set bit of k (O(log M) nodes).
    bank = np.ones((11, 1))
    tree = _Structure(1)
    tree.leaf_rows = 1
    for row in range(11):
        tree.update(bank[row : row + 1], slice(row, row + 1))
        assert len(tree.nodes) == (row + 1).bit_count()


def test_column_log_sum_exp_of_several_leaves():
    # 600 rows of 3 columns: three leaves of 256 rows, the last one padded.
    rng = np.random.default_rng(0)
    bank = rng.normal(size=(600, 3))
    bank[300:] += 1.0  # the leaves' maxima differ
    for beta in [0.5, 20.0]:
        (reducer,) = reduce_bank(ProbeMatrix(bank), lambda beta=beta: [ColumnLogSumExp(3, beta)])
        assert_allclose(reducer.result(), logsumexp(beta * bank, axis=0) / beta, rtol=1e-13)


def test_column_mean_of_sums_beyond_float64():
    # Column sums overflow float64 within a leaf: the leaves are scaled first. One
    # leaf (4 rows of 200 columns), then two leaves of 256 rows (300 rows of 3).
    bank = np.tile([1.6e308, 1.2e308, 1.4e308, 1.0], (200, 1)).T
    (reducer,) = reduce_bank(ProbeMatrix(bank), lambda: [ColumnMean(200)])
    assert_allclose(reducer.result(), np.full(200, 1.05e308), rtol=1e-15)
    bank = np.tile([[1.5e308, 1.6e308, 1.0], [1.5e308, 1.2e308, 1.0]], (150, 1))
    (reducer,) = reduce_bank(ProbeMatrix(bank), lambda: [ColumnMean(3)])
    assert_allclose(reducer.result(), [1.5e308, 1.4e308, 1.0], rtol=1e-14)


def test_moments_by_hand():
    # float32 values: mean 2.5, population std sqrt(1.25), exactly as float64.
    mean, std = moments(np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32), axis=1)
    assert mean.tolist() == [2.5]
    assert_allclose(std, [np.sqrt(1.25)], rtol=1e-15)
    # float64 values whose differences overflow: scaled first.
    mean, std = moments(np.array([[1.5e308, -1.5e308], [3.0, 5.0]]), axis=1)
    assert mean.tolist() == [0.0, 4.0]
    assert std.tolist() == [1.5e308, 1.0]
    # The scale is set by the largest magnitude, of either sign.
    mean, std = moments(np.array([[1e308, -1e-300], [-1e308, 1e-300]]), axis=1)
    assert_allclose(mean, [5e307, -5e307], rtol=1e-15)
    assert_allclose(std, [5e307, 5e307], rtol=1e-15)


def test_moments_pivot_on_the_first_entry():
    # The two passes run about the first entry: here that gives the correctly rounded
    # mean (exact rational mean, rounded once); about the last entry it is 1 ulp low.
    values = [3.45584192064786, 8.216181435011583, 3.304370761833871]
    exact = float(sum(map(Fraction, values)) / 3)
    mean, _ = moments(np.array([values]), axis=1)
    assert mean.tolist() == [exact] == [4.992131372497772]


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


def test_column_moments_combine_leaves_near_the_float64_limit():
    # One-row leaves: the pairwise update is scaled by the largest mean or standard
    # deviation of both nodes, so that neither the difference of the means nor the
    # squares overflow or underflow.
    cases = [
        ([1e308, -1e308], 1, 0.0, 1e308),
        ([1e308, 1e-300], 1, 5e307, 5e307),
        ([1e308, -1e308, 0.0, 0.0], 2, 0.0, 1e308 / np.sqrt(2)),
    ]
    for values, leaf, mean, std in cases:
        tree = ColumnMoments(1, leaf_rows=leaf)
        tree.update(np.array(values)[:, None], slice(0, len(values)))
        result = tree.result()
        assert_allclose(result[0], [mean], rtol=1e-15, atol=0)
        assert_allclose(result[1], [std], rtol=1e-15)


# ------------------------------------------------------------------ small API edges


def test_hinge_distance_overflow_names_the_margin_only_when_there_is_one():
    # The reversed gap 2e308 squared exceeds float64: with margin 0 the distance
    # depends on the scores alone, with margin 1 on the margin too.
    with pytest.raises(ValueError, match="of scores and initial_scores exceeds"):
        hinge_distance([-1e308, 1e308], [2.0, 1.0], margin=0.0)
    with pytest.raises(ValueError, match="of scores and margin=1 exceeds"):
        hinge_distance([-1e308, 1e308], [2.0, 1.0], margin=1.0)


def test_centering_weight_must_be_non_negative():
    bank = np.array([[0.9, 0.1], [0.7, 0.3]])
    with pytest.raises(ValueError, match="'weight' parameter"):
        Centering(weight=-0.5).fit(bank)
    assert_allclose(Centering(weight=0.0).fit(bank).transform([[0.8, 0.4]]), [[0.8, 0.4]])


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

    monkeypatch.setattr(_solvers, "factorisation_flops", lambda n_items: np.inf)
    monkeypatch.setattr(_solvers, "cg", no_cg)
    # Two affinity components {0, 1} and {2, 3}, degrees 1 and 2; pairs (0, 2) and (1, 3).
    prior_label = np.array([0, 0, 1, 1])
    null = np.sqrt(np.array([1.0, 1.0, 2.0, 2.0]))
    free, direction = _solvers.free_directions(np.zeros(4, dtype=int), (np.array([0, 1]), np.array([2, 3])),
                                               prior_label, null)
    assert free.tolist() == [True]
    assert_allclose(direction / direction[0], np.ones(4))  # scales 1 : 1/sqrt(2), equal on every pair
