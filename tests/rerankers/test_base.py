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


@pytest.mark.parametrize("cs", [[], [[0.1]], [0.1, 0.0], [np.inf], "0.1"])
def test_rerank_path_refuses_bad_values_of_c(cs):
    X, y = np.random.default_rng(3).normal(size=(6, 3)), np.arange(6.0)
    with pytest.raises(ValueError, match="cs must be a non-empty 1-D sequence of finite values of c > 0"):
        PointwiseReranker().rerank_path(X, y, cs=cs)
