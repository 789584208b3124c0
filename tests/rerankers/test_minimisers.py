"""Rerankers against independent minimisers of their energies, limits and real data."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from reference_rerankers import dense_laplacian, two_clusters
from sklearn.base import clone

from skqbnorm import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
    catalogue,
)
from skqbnorm.datasets import load_digits_reranking
from skqbnorm.metrics import mean_average_precision
from skqbnorm.rerankers import BayesianReranker
from skqbnorm.rerankers._graph import affinity

#: The Bayesian rerankers of the catalogue (a registered one included).
ALL = [cls for cls in catalogue.rerankers() if issubclass(cls, BayesianReranker)]


@pytest.mark.parametrize("cls", ALL)
def test_large_c_keeps_the_initial_order(rng, cls):
    features, initial = two_clusters(rng)
    scores = cls(c=1e6).fit_predict(features, initial)
    assert_array_equal(np.argsort(-scores), np.argsort(-initial))


def dirichlet_ratio(scores, lap):
    centred = scores - scores.mean()
    return centred @ lap @ centred / (centred @ centred)


@pytest.mark.parametrize("cls", ALL)
def test_small_c_gives_graph_smooth_scores(rng, cls):
    features, initial = two_clusters(rng, 40)
    lap = dense_laplacian(features, n_neighbors=5)
    # The hinge's squared slacks stay near 1 (a margin) while the prior smooths: its
    # distance weighs little against the prior until c is far below 1.
    small = {HingeReranker: 1e-7}.get(cls, 1e-4)
    scores = cls(c=small, n_neighbors=5).fit_predict(features, initial)
    if cls is RandomWalkReranker:  # its prior smooths x_i / d_i (the walk's density)
        scores = scores / np.asarray(affinity(features, n_neighbors=5).sum(axis=1)).ravel()
    # Far smoother than the initial scores: almost constant within each cluster.
    assert dirichlet_ratio(scores, lap) < 0.05 * dirichlet_ratio(initial, lap)
    within = max(np.ptp(scores[:20]), np.ptp(scores[20:]))
    assert within < 0.1 * np.ptp(scores)


@pytest.fixture(scope="module")
def digits_lists():
    data = load_digits_reranking()
    return data.features, data.initial_scores, data.groups, data.relevance


@pytest.mark.slow
@pytest.mark.parametrize(
    "reranker",
    [
        HingeReranker(c=1.0, rho=5),
        HingeReranker(c=0.1, pairs="top_bottom", n_top=30, n_bottom=100),
        HingeReranker(c=1.0, pairs="clustering", n_top=20, n_bottom=200, n_clusters=2, random_state=0),
        PreferenceStrengthReranker(c=1.0, rho=5),
        PreferenceStrengthReranker(c=1e-4, pairs="all"),
        PointwiseReranker(c=1.0),
        RandomWalkReranker(c=1.0),
    ],
    ids=repr,
)
def test_reranking_raises_map_on_digits(digits_lists, reranker):
    features, initial, groups, relevance = digits_lists
    before = mean_average_precision(initial, relevance, groups)
    after = mean_average_precision(reranker.fit_predict(features, initial, groups=groups), relevance, groups)
    assert after > before + 0.01, (before, after)


@pytest.mark.slow
@pytest.mark.parametrize(
    "reranker",
    [HingeReranker(random_state=0), PreferenceStrengthReranker(random_state=0), PointwiseReranker(),
     RandomWalkReranker()],
    ids=repr,
)
def test_the_default_strength_gains_where_the_features_carry_relevance(reranker):
    # An engine that knows relevance only through noise, whose errors the pixels correct
    # (the guide's strength study: +36% and more at the defaults on such tasks). Six
    # draws, as one draw's gain varies (preference strength: +9% to +44% over these).
    gains = []
    for random_state in range(6):
        data = load_digits_reranking(n_pool=300, noise=1.0, random_state=random_state)
        features, initial, groups, relevance = data.features, data.initial_scores, data.groups, data.relevance
        before = mean_average_precision(initial, relevance, groups)
        scores = clone(reranker).fit_predict(features, initial, groups=groups)
        gains.append(mean_average_precision(scores, relevance, groups) / before - 1)
    assert np.mean(gains) > 0.1, gains


@pytest.mark.slow
def test_groups_rerank_independently_and_in_parallel(rng):
    features, initial = two_clusters(rng, 60)
    groups = np.repeat(["a", "b", "c"], 20)
    for cls in ALL:
        together = cls(n_jobs=2).fit(features, initial, groups=groups)
        assert together.solver_status_.shape == (3,)
        assert_array_equal(together.group_labels_, ["a", "b", "c"])
        for label in "abc":
            alone = cls().fit_predict(features[groups == label], initial[groups == label])
            assert_allclose(together.scores_[groups == label], alone, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("cls", ALL)
def test_clone_params_pickle(rng, cls):
    features, initial = two_clusters(rng)
    reranker = cls(c=0.5, graph="dense", sigma=1.5)
    assert clone(reranker).get_params() == reranker.get_params()
    fitted = reranker.fit(features, initial)
    restored = pickle.loads(pickle.dumps(fitted))
    assert_array_equal(restored.scores_, fitted.scores_)
    assert_allclose(clone(reranker).fit_predict(features, initial), fitted.scores_)
    assert "sk-" in fitted._repr_html_()


@pytest.mark.parametrize("cls", ALL)
def test_float32_input_gives_the_float64_scores(rng, cls):
    # The solvers work in double precision; float32 input must not change the answer.
    features, initial = two_clusters(rng)
    expected = cls().fit_predict(features.astype(np.float32).astype(float), initial.astype(np.float32).astype(float))
    scores = cls().fit_predict(features.astype(np.float32), initial.astype(np.float32))
    assert scores.dtype == np.float64
    assert_array_equal(scores, expected)


@pytest.mark.parametrize("cls", ALL)
def test_initial_score_strategies(rng, cls):
    features, initial = two_clusters(rng)
    for strategy in ("scores", "minmax", "rank"):  # a huge c reproduces the prior's order
        scores = cls(initial=strategy, c=1e6).fit_predict(features, initial)
        assert_array_equal(np.argsort(-scores), np.argsort(-initial))
    # Binary: only the top 5 against the rest is ordered; every such pair must count.
    binary = cls(initial="binary", n_positive=5, c=1e4)
    if "pairs" in binary.get_params():
        binary.set_params(pairs="all")
    assert set(np.argsort(-binary.fit_predict(features, initial))[:5]) == set(np.argsort(-initial)[:5])


@pytest.mark.parametrize("cls", ALL)
def test_bad_input(rng, cls):
    features, initial = two_clusters(rng)
    with pytest.raises(ValueError, match=r"X, y must have one entry per sample; got X of shape \(30, 2\) and y of shape \(29,\)"):
        cls().fit(features, initial[:-1])
    broken = initial.copy()
    broken[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cls().fit(features, broken)
    broken_features = features.copy()
    broken_features[0, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        cls().fit(broken_features, initial)
    with pytest.raises(ValueError, match=r"initial scores y are constant \(all 0.5\).*shape \(30,\)"):
        cls().fit(features, np.full(30, 0.5))
    with pytest.raises(ValueError, match=r"at least 2 samples to rerank; got 1 sample\(s\) in group 'b'"):
        cls().fit(features[:3], initial[:3], groups=["a", "a", "b"])
    for c in (0, -1.0):
        with pytest.raises(ValueError, match=r"The 'c' parameter of \w+ must be a float in the range \(0.0, inf\)"):
            cls(c=c).fit(features, initial)
    with pytest.raises(ValueError, match=r"The 'sigma' parameter of \w+ must be"):
        cls(sigma=0.0).fit(features, initial)
    with pytest.raises(ValueError, match=r"and groups must .* groups of shape \(5,\)"):
        cls().fit(features, initial, groups=np.zeros(5))
    features_copy, initial_copy = features.copy(), initial.copy()
    cls().fit(features, initial)
    assert_array_equal(features, features_copy) and assert_array_equal(initial, initial_copy)


def test_pair_selection_without_pairs_is_an_error(rng):
    features, initial = two_clusters(rng)
    # Binary initial scores with every sample a pseudo-positive: nothing is ordered.
    with pytest.raises(ValueError, match="pairs='rho_adjacent' selected no strictly ordered pair from 30"):
        HingeReranker(initial="binary", n_positive=30).fit(features, initial)


@pytest.mark.parametrize("cls", [PreferenceStrengthReranker, PointwiseReranker, RandomWalkReranker])
@pytest.mark.parametrize("laplacian_kind", ["unnormalized", "normalized"])
def test_iterative_solve_of_large_lists_equals_the_direct_one(rng, monkeypatch, cls, laplacian_kind):
    from skqbnorm.rerankers import _solvers

    features = rng.normal(size=(300, 8))
    initial = rng.normal(size=300)
    params = {} if cls is RandomWalkReranker else {"laplacian": laplacian_kind}
    reranker = cls(c=0.05, initial="scores", **params) if cls is PreferenceStrengthReranker else cls(**params)
    monkeypatch.setattr(_solvers, "factorisation_flops", lambda n_items: 0.0)  # factorise
    direct = clone(reranker).fit(features, initial)
    assert direct.n_iter_[0] == 0
    monkeypatch.setattr(_solvers, "factorisation_flops", lambda n_items: np.inf)  # iterate
    iterative = clone(reranker).fit(features, initial)
    assert iterative.n_iter_[0] > 0 and iterative.solver_status_[0] == "solved"
    assert_allclose(iterative.scores_, direct.scores_, rtol=1e-6, atol=1e-8)


REGULAR_LISTS = {
    "two samples": (np.array([[0.0], [1.0]]), np.array([1.0, 0.0])),
    "two duplicates": (np.ones((2, 3)), np.array([1.0, 0.0])),
    "five duplicates": (np.ones((5, 2)), np.array([5.0, 4.0, 1.0, 3.0, 2.0])),
    "a square": (np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]),
                 np.array([4.0, 1.0, 3.0, 2.0])),
}


@pytest.mark.parametrize("name", REGULAR_LISTS)
@pytest.mark.parametrize("cls", [HingeReranker, PreferenceStrengthReranker])
def test_normalized_laplacian_of_a_regular_graph_is_the_plain_one(cls, name):
    # Equal degrees d: I - D^-1/2 W D^-1/2 = L / d, so both energies are the same and
    # the normalised one leaves a shift free too (its null vector sqrt(d) is constant):
    # each list must keep the mean of its initial scores, not crash on a singular solve.
    features, initial = REGULAR_LISTS[name]
    params = {"graph": "dense", "initial": "scores", "pairs": "all"}
    plain = cls(**params).fit_predict(features, initial)
    normalized = cls(laplacian="normalized", **params).fit_predict(features, initial)
    assert_allclose(normalized, plain, rtol=1e-7, atol=1e-9)
    assert_allclose(normalized.mean(), initial.mean(), rtol=1e-12)


def test_a_regular_list_among_others_under_the_normalized_laplacian(rng):
    features = np.r_[rng.normal(size=(10, 2)), np.ones((2, 2))]
    initial = np.r_[rng.normal(size=10), [2.0, 1.0]]
    groups = np.r_[np.zeros(10, int), [1, 1]]
    for cls in (HingeReranker, PreferenceStrengthReranker):
        reranker = cls(laplacian="normalized", initial="scores")
        together = reranker.fit_predict(features, initial, groups=groups)
        assert_allclose(together[10:].mean(), 1.5, rtol=1e-12)
        assert_allclose(together[:10], clone(reranker).fit_predict(features[:10], initial[:10]),
                        rtol=1e-12)


@pytest.mark.parametrize("initial", ["rank", "binary"])
@pytest.mark.parametrize("cls", [HingeReranker, PreferenceStrengthReranker])
def test_tied_initial_scores_stay_tied_whatever_the_row_order(rng, cls, initial):
    # Tied raw scores get tied rank (or binary) scores, so their pair is dropped and
    # swapping the tied rows swaps their results. (pairs="all": the positions of
    # rho-adjacent and top-bottom selections break ties by row, as documented.)
    features = rng.normal(size=(8, 3))
    scores = np.array([5.0, 5.0, 4.0, 3.0, 2.0, 2.0, 0.0, -1.0])
    reranker = cls(initial=initial, n_positive=5, pairs="all", n_neighbors=3)
    assert_array_equal(reranker._initial_scores(scores)[[0, 4]], reranker._initial_scores(scores)[[1, 5]])
    expected = reranker.fit_predict(features, scores)
    for swap in ([1, 0, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 5, 4, 6, 7]):
        swap = np.array(swap)
        back = np.empty(8)
        back[swap] = reranker.fit_predict(features[swap], scores[swap])
        assert_allclose(back, expected, rtol=1e-9, atol=1e-12)


def test_rank_and_binary_scores_of_ties():
    reranker = PreferenceStrengthReranker(n_positive=2)
    scores = np.array([3.0, 5.0, 5.0, 1.0])
    assert_allclose(reranker._initial_scores(scores), 1 - np.array([2.0, 0.5, 0.5, 3.0]) / 4)
    reranker.set_params(initial="binary")
    assert_array_equal(reranker._initial_scores(scores), [0.0, 1.0, 1.0, 0.0])
    reranker.set_params(n_positive=1)  # the tie at the cut is all in
    assert_array_equal(reranker._initial_scores(scores), [0.0, 1.0, 1.0, 0.0])
    reranker.set_params(n_positive=3)
    assert_array_equal(reranker._initial_scores(scores), [1.0, 1.0, 1.0, 0.0])


@pytest.mark.slow
@pytest.mark.parametrize("cls", [HingeReranker, PreferenceStrengthReranker])
def test_a_random_state_instance_does_not_depend_on_n_jobs(rng, cls):
    # Each list gets its own seed, drawn at fit: worker processes each held a copy of
    # the RandomState and drew the same k-means seeds for every list.
    features, initial = rng.normal(size=(90, 4)), rng.normal(size=90)
    groups = np.repeat([0, 1, 2], 30)

    def scores(n_jobs):
        reranker = cls(pairs="clustering", n_top=15, n_clusters=4, n_jobs=n_jobs,
                       random_state=np.random.RandomState(0))
        return reranker.fit_predict(features, initial, groups=groups)

    assert_array_equal(scores(2), scores(1))
    seeds = np.random.RandomState(0).randint(np.iinfo(np.int32).max, size=3)
    for label, seed in enumerate(seeds):  # list by list, in the order of the labels
        alone = cls(pairs="clustering", n_top=15, n_clusters=4, random_state=int(seed))
        in_list = groups == label
        assert_allclose(scores(1)[in_list], alone.fit_predict(features[in_list], initial[in_list]),
                        rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("groups, message", [
    ([1, 1, 1, 1, "1", "1", "1", "1"], r"groups mixes numbers and strings, e.g. 1 and '1'"),
    (np.array([0, 0, 0, 0, "x", "x", "x", "x"], dtype=object), r"groups mixes numbers and strings, e.g. 0 and 'x'"),
    ([0.0, 0.0, 0.0, 0.0, np.nan, np.nan, np.nan, np.nan], r"groups must not hold NaN; groups\[4\] is nan"),
    ([b"a"] * 4 + ["a"] * 4, r"groups mixes bytes and strings, e.g. b'a' and 'a'"),
    (np.array([np.float32(0)] * 4 + [np.float32("nan")] * 4, dtype=object),
     r"groups must not hold NaN; groups\[4\] is nan"),
    (["a"] * 4 + [np.nan] * 4, r"groups must not hold NaN; groups\[4\] is nan"),
])
def test_group_labels_of_mixed_kinds_or_nan_are_refused(groups, message):
    # NumPy would read [1, "1"] as two strings "1": one list where the caller meant two.
    features, initial = np.arange(16.0).reshape(8, 2), np.arange(8.0)
    with pytest.raises(ValueError, match=message):
        HingeReranker().fit(features, initial, groups=groups)
    with pytest.raises(ValueError, match=message):
        mean_average_precision(initial, [1, 0] * 4, groups)


def test_object_group_labels_of_one_kind_are_lists(rng):
    features, initial = rng.normal(size=(8, 2)), rng.normal(size=8)
    as_objects = np.array([7, 7, 7, 7, 3, 3, 3, 3], dtype=object)
    reranker = PreferenceStrengthReranker(n_neighbors=2)
    got = reranker.fit_predict(features, initial, groups=as_objects)
    assert_array_equal(got, clone(reranker).fit_predict(features, initial, groups=as_objects.astype(int)))
    assert list(reranker.fit(features, initial, groups=as_objects).group_labels_) == [3, 7]


def test_osqp_prints_nothing(rng, capfd):
    # OSQP prints a note after a solve with no active constraint, even with
    # verbose=False; the reranker keeps stdout clean (CLI output, notebooks).
    features, initial = rng.normal(size=(30, 3)), rng.normal(size=30)
    reranker = HingeReranker(c=1e12).fit(features, initial)
    assert reranker.n_iter_[0] > 0  # OSQP ran
    assert capfd.readouterr().out == ""


def test_hinge_on_a_disconnected_normalized_graph_reaches_its_minimum():
    # Two far clusters and the normalised Laplacian: multiples of sqrt(d) on each
    # component meet every margin, so the energy's infimum is 0. OSQP's polishing
    # solved a near-singular reduced system there and returned energy 0.016, "solved".
    rng = np.random.default_rng(5)
    for _ in range(21):  # the 21st draw of a search for such lists
        n_items = int(rng.integers(8, 30))
        features = np.r_[rng.normal(size=(n_items // 2, 2)),
                         100 + rng.normal(size=(n_items - n_items // 2, 2))]
        initial = rng.normal(size=n_items)
    reranker = HingeReranker(c=100.0, laplacian="normalized", pairs="clustering", n_top=3,
                             n_bottom=3, n_neighbors=2, random_state=0, eps_abs=1e-10,
                             eps_rel=1e-10, max_iter=500000).fit(features, initial)
    assert reranker.solver_status_[0] == "solved"
    assert reranker.objective_[0] < 1e-5


@pytest.mark.parametrize("delta", [1e-10, 1e-8, 1e-7])
@pytest.mark.parametrize("cls", [HingeReranker, PreferenceStrengthReranker])
def test_a_nearly_regular_list_is_placed_as_a_regular_one(cls, delta):
    # A square with a corner moved by delta: the free direction of the normalised
    # energy bends at a curvature of order delta^2, which float64 cannot resolve; the
    # solve returned offsets of 1e6 set by round-off, or a singular factorisation.
    square, initial = REGULAR_LISTS["a square"]
    moved = square.copy()
    moved[0, 0] += delta
    params = {"laplacian": "normalized", "graph": "dense", "sigma": 1.0, "initial": "scores",
              "pairs": "all"}
    expected = cls(**params).fit_predict(square, initial)
    assert_allclose(cls(**params).fit_predict(moved, initial), expected, rtol=1e-6)


@pytest.mark.parametrize("c", [1e-16, 1e-20, 1e-300])
@pytest.mark.parametrize("cls", [HingeReranker, PreferenceStrengthReranker])
def test_tiny_c_under_the_normalized_laplacian_keeps_the_c_to_0_limit(cls, c):
    # Two clusters joined by pairs: their offsets, which the prior does not see, are
    # fixed by the pairs alone. A pinned offset on a component the energy does fix
    # went to 0 as c did (the exact solve made up for it only while c was not tiny).
    rng = np.random.default_rng(1)
    features = np.r_[rng.normal(size=(6, 2)), 100 + rng.normal(size=(6, 2))]
    initial = rng.normal(size=12)
    params = {"laplacian": "normalized", "n_neighbors": 3, "initial": "scores", "pairs": "all"}
    limit = cls(c=1e-12, **params).fit_predict(features, initial)
    assert_allclose(cls(c=c, **params).fit_predict(features, initial), limit, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("laplacian, initial", [
    ("normalized", [4, 5, 7, 8, 6, 10, 0, 9, 11, 1, 2, 3]),
    ("unnormalized", [6, 11, 4, 0, 3, 8, 5, 10, 7, 1, 9, 2]),
])
@pytest.mark.parametrize("c", [1e-30, 1e-300])
def test_tiny_c_on_a_graph_of_several_components(c, laplacian, initial):
    # Three clusters, rho-adjacent pairs: the pairs' system had pivots of order c between
    # components (a singular factorisation, or NaN scores); below a relative c of 1e-10
    # the solution has reached its c -> 0 limit, and is taken there.
    rng = np.random.default_rng(1)
    centres = np.array([[0, 0], [50, 0], [0, 50]])
    features = np.vstack([centre + 0.3 * rng.normal(size=(4, 2)) for centre in centres])
    initial = np.array(initial, dtype=float)
    params = {"laplacian": laplacian, "sigma": 1.0, "n_neighbors": 2, "pairs": "rho_adjacent",
              "rho": 2, "initial": "scores"}
    limit = PreferenceStrengthReranker(c=1e-12, **params).fit_predict(features, initial)
    got = PreferenceStrengthReranker(c=c, **params).fit_predict(features, initial)
    assert_allclose(got, limit, rtol=1e-6, atol=1e-8)
