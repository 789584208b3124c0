"""The rerankers' shared base: parameter bounds, group handling, initial-score strategies,
tags and the score scale, with hand-worked values."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import DataConversionWarning
from sklearn.utils import get_tags

from skqbnorm import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
    catalogue,
)
from skqbnorm.rerankers._base import BayesianReranker, score_scale, trace_or_one


@pytest.mark.parametrize("param", ["n_neighbors", "n_positive"])
def test_reranker_counts_must_be_at_least_one(param):
    X, y = np.random.default_rng(2).normal(size=(6, 3)), np.arange(6.0)
    with pytest.raises(ValueError, match=rf"'{param}' parameter .* range \[1, inf\)\. Got 0"):
        PointwiseReranker(**{param: 0}).fit(X, y)


def test_reranker_accepts_one_positive_and_records_the_feature_count():
    X, y = np.random.default_rng(3).normal(size=(6, 3)), np.arange(6.0)
    fitted = PointwiseReranker(initial="binary", n_positive=1).fit(X, y)
    assert fitted.n_features_in_ == 3
    assert fitted.scores_.shape == (6,) and np.isfinite(fitted.scores_).all()


def test_reranker_requests_groups_for_fit():
    assert PointwiseReranker().get_metadata_routing().fit.requests["groups"] is True


def test_a_single_short_list_is_not_named_as_a_group():
    with pytest.raises(ValueError, match=r"got 1 sample\(s\) \(rows of X"):
        PointwiseReranker().fit(np.zeros((1, 3)), np.ones(1))


@pytest.mark.parametrize("scores, expected", [
    ([-1.0, 0.0, 1.0], [0.0, 0.5, 1.0]),
    ([4.0, -1e308, 1e308], [0.5, 0.0, 1.0]),  # max - min overflows float64 unscaled
])
def test_minmax_initial_scores(scores, expected):
    initial = PointwiseReranker(initial="minmax")._initial_scores(np.array(scores))
    assert_allclose(initial, expected)


def test_reranker_tags():
    tags = get_tags(PointwiseReranker())
    assert tags.target_tags.required is True and tags.non_deterministic is False


def test_normalized_null_vector_is_one_on_isolated_items():
    weights = np.array([[0.0, 4.0, 0.0], [4.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # degrees 4, 4, 0
    assert_allclose(PointwiseReranker._null(weights, True), [2.0, 2.0, 1.0])
    assert_allclose(PointwiseReranker._null(weights, False), [1.0, 1.0, 1.0])


def test_rank_initial_scores():
    # positions of [3, 1, 2] from the top: 0, 2, 1; the prior is 1 - position / n
    initial = PointwiseReranker(initial="rank")._initial_scores(np.array([3.0, 1.0, 2.0]))
    assert_allclose(initial, [1.0, 1.0 / 3.0, 2.0 / 3.0])


@pytest.mark.parametrize("param", ["rho", "n_top", "n_bottom", "n_clusters"])
def test_pairwise_counts_must_be_at_least_one(param):
    X, y = np.random.default_rng(4).normal(size=(6, 3)), np.arange(6.0)
    with pytest.raises(ValueError, match=rf"'{param}' parameter .* range \[1, inf\)\. Got 0"):
        HingeReranker(**{param: 0}).fit(X, y)


def test_pairwise_binary_prior_without_pairs_names_n_positive():
    X, y = np.random.default_rng(5).normal(size=(6, 3)), np.arange(6.0)
    with pytest.raises(ValueError, match=r"initial='binary' with n_positive=6\)"):
        HingeReranker(initial="binary", n_positive=6).fit(X, y)


def test_reranker_warns_on_a_column_vector_y():
    X, y = np.random.default_rng(6).normal(size=(6, 3)), np.arange(6.0)
    with pytest.warns(DataConversionWarning):
        fitted = PointwiseReranker().fit(X, y[:, None])
    assert fitted.scores_.shape == (6,)


def test_score_scale_divides_by_the_largest_magnitude():
    magnitude, mean, std = score_scale(np.array([3.0, -6.0]))  # t = [0.5, -1]
    assert (magnitude, mean, std) == (6.0, -0.25, 0.75)
    assert score_scale(np.zeros(3)) == (1.0, 0.0, 0.0)


def test_trace_or_one():
    assert trace_or_one(np.diag([1.0, 2.0])) == 3.0
    assert trace_or_one(np.zeros((2, 2))) == 1.0


def test_pairwise_accepts_a_single_cluster():
    X, y = np.random.default_rng(4).normal(size=(8, 3)), np.arange(8.0)
    fitted = HingeReranker(pairs="clustering", n_clusters=1).fit(X, y)
    assert np.isfinite(fitted.scores_).all()


BAYESIAN = [cls for cls in catalogue.rerankers() if issubclass(cls, BayesianReranker)]


@pytest.mark.parametrize("cls", BAYESIAN, ids=lambda cls: cls.__name__)
def test_rerank_path_is_fit_at_every_c(cls):
    # Every c of the path: a fitted clone with what fit gives at that c, bitwise,
    # the clustering pair selection's per-list seeds included; the reranker itself
    # stays unfitted.
    rng = np.random.default_rng(5)
    X, y = rng.normal(size=(60, 3)), rng.normal(size=60)
    groups = np.repeat(["b", "a", "c"], 20)
    def params():  # the clustering pairs draw each list's seed from one RandomState
        return {"pairs": "clustering", "random_state": np.random.RandomState(0)} \
            if "random_state" in cls().get_params() else {}

    reranker = cls(**params())
    cs = [0.05, 2.0, 0.5]
    path = reranker.rerank_path(X, y, groups, cs=cs)
    assert [fitted.c for fitted in path] == cs and not hasattr(reranker, "scores_")
    for c, fitted in zip(cs, path):
        expected = cls(c=c, **params()).fit(X, y, groups)
        assert fitted is not reranker and fitted.get_params()["n_jobs"] == reranker.n_jobs
        for name in ("scores_", "solver_status_", "n_iter_", "objective_", "group_labels_"):
            assert_array_equal(getattr(fitted, name), getattr(expected, name))


@pytest.mark.parametrize("cs", [[], [[0.1]], [0.1, 0.0], [np.inf], "0.1", ["0.1", True],
                                [0.1, True], [np.True_], ["a"], np.array(["0.1"]),
                                np.array([True, True]), [0.1, None]])
def test_rerank_path_refuses_bad_values_of_c(cs):
    X, y = np.random.default_rng(3).normal(size=(6, 3)), np.arange(6.0)
    with pytest.raises(ValueError, match="cs must be a non-empty 1-D sequence of finite values of c > 0"):
        PointwiseReranker().rerank_path(X, y, cs=cs)


@pytest.mark.parametrize("cs", [[0.1, 2], (np.float32(0.5), np.int64(3)), np.array([1, 2]),
                                np.array([0.25], dtype=np.float16)])
def test_rerank_path_takes_any_real_numbers(cs):
    X, y = np.random.default_rng(3).normal(size=(6, 3)), np.arange(6.0)
    path = PointwiseReranker().rerank_path(X, y, cs=cs)
    assert [fitted.c for fitted in path] == [float(c) for c in cs]


# -- c="auto": generalised cross-validation of the point-wise smoother ---------------


def gcv_reference(prior, target):
    """GCV by its definition: S_c = c (L / dbar + c I)^-1 formed and applied for every c."""
    from skqbnorm.rerankers._base import AUTO_GRID

    dense = prior.toarray()
    n_items = len(target)
    scaled = dense * (n_items / np.trace(dense))
    scores = []
    for c in AUTO_GRID:
        smoother = c * np.linalg.inv(scaled + c * np.eye(n_items))
        rest = np.eye(n_items) - smoother
        scores.append(n_items * np.sum((rest @ target) ** 2) / np.trace(rest) ** 2)
    scores = np.array(scores)
    return AUTO_GRID[np.flatnonzero(scores <= scores.min() * (1 + 1e-9))[-1]]


def two_cluster_list(rng, n_per_cluster=30, noise=1.0, signal=1.0):
    """Two overlapping clusters (one connected k-NN graph); scores: signal on the first."""
    features = np.vstack([rng.normal(0, 0.5, (n_per_cluster, 4)), rng.normal(1, 0.5, (n_per_cluster, 4))])
    relevant = np.repeat([1.0, 0.0], n_per_cluster)
    return features, signal * relevant + noise * rng.normal(size=2 * n_per_cluster)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auto_c_is_generalised_cross_validation(seed):
    from skqbnorm.rerankers._base import auto_c
    from skqbnorm.rerankers._graph import affinity, laplacian

    rng = np.random.default_rng(seed)
    features, initial = two_cluster_list(rng, n_per_cluster=20)
    prior = laplacian(affinity(features, graph="knn", n_neighbors=5, sigma="median"))
    assert auto_c(prior, initial) == pytest.approx(gcv_reference(prior, initial), rel=1e-12)
    # The choice ignores the scores' scale, even where their squares would underflow.
    assert auto_c(prior, 1e-200 * initial) == auto_c(prior, initial)


@pytest.mark.parametrize("seed", range(4))
def test_auto_c_smooths_rough_scores_and_keeps_smooth_ones(seed):
    from skqbnorm.rerankers._base import AUTO_GRID, auto_c
    from skqbnorm.rerankers._graph import affinity, laplacian

    rng = np.random.default_rng(seed)
    prior = laplacian(affinity(rng.normal(size=(60, 4)), graph="knn", n_neighbors=10, sigma="median"))
    _, modes = np.linalg.eigh(prior.toarray())
    noise = 0.05 * rng.normal(size=60)
    assert auto_c(prior, modes[:, 1] + noise) >= 10  # the smoothest non-constant mode
    assert auto_c(prior, modes[:, -1] + noise) == AUTO_GRID[0]  # the roughest


@pytest.mark.parametrize("cls", [HingeReranker, PointwiseReranker, RandomWalkReranker,
                                 PreferenceStrengthReranker], ids=lambda cls: cls.__name__)
def test_c_auto_is_each_lists_scaled_choice_and_its_scores(cls):
    rng = np.random.default_rng(5)
    parts = [two_cluster_list(rng, noise=0.5, signal=signal) for signal in (2.0, 0.0)]
    features = np.vstack([p[0] for p in parts])
    initial = np.concatenate([p[1] for p in parts])
    groups = np.repeat([0, 1], 60)
    auto = cls(c="auto").fit(features, initial, groups=groups)
    assert auto.c_.shape == (2,)
    for label, c in zip(auto.group_labels_, auto.c_):
        rows = groups == label
        reranker = cls(c="auto").fit(features[rows], initial[rows])
        prior_ranking = reranker._initial_scores(initial[rows])
        assert c == pytest.approx(cls.auto_c_scale * gcv_reference(
            laplacian_of(reranker, features[rows]), prior_ranking), rel=1e-12)
        fixed = cls(c=float(c)).fit_predict(features[rows], initial[rows])
        assert_allclose(auto.scores_[rows], fixed, rtol=1e-9, atol=1e-12)


def laplacian_of(reranker, features):
    from skqbnorm.rerankers._graph import affinity, is_normalized, laplacian

    weights = affinity(features, graph=reranker.graph, n_neighbors=reranker.n_neighbors,
                       sigma=reranker.sigma)
    return laplacian(weights, normalized=is_normalized(getattr(reranker, "laplacian", "unnormalized")))


def test_c_auto_of_a_long_list_reads_its_best_items():
    from skqbnorm.rerankers import _base
    from skqbnorm.rerankers._graph import affinity, laplacian

    rng = np.random.default_rng(6)
    features, initial = rng.normal(size=(60, 3)), rng.normal(size=60)
    prior = laplacian(affinity(features, graph="knn", n_neighbors=5, sigma="median"))
    best = np.sort(np.argsort(-initial)[:25])
    expected = gcv_reference(prior[best][:, best], initial[best])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_base, "AUTO_MAX_ITEMS", 25)
        assert _base.auto_c(prior, initial) == pytest.approx(expected, rel=1e-12)


def test_c_auto_without_edges_or_signal_is_one():
    from scipy import sparse

    from skqbnorm.rerankers._base import auto_c

    assert auto_c(sparse.csr_matrix((5, 5)), np.arange(5.0)) == 1.0
    path = np.diag([1.0, 2, 2, 1]) - np.diag([1.0, 1, 1], 1) - np.diag([1.0, 1, 1], -1)
    assert auto_c(sparse.csr_matrix(path), np.zeros(4)) == 1.0


@pytest.mark.parametrize("c", ["Auto", "none", -1.0, 0.0])
def test_c_must_be_positive_or_auto(c):
    X, y = np.random.default_rng(7).normal(size=(6, 3)), np.arange(6.0)
    with pytest.raises(ValueError, match=r"'c' parameter"):
        PointwiseReranker(c=c).fit(X, y)
