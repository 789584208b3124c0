"""RerankerCV over every reranker: the neighbourhood rerankers' strength chosen as
GridSearchCV chooses it, the declared contract, and its refusals."""

import warnings

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import BaseEstimator
from sklearn.cluster import KMeans
from sklearn.model_selection import GridSearchCV, GroupKFold

from skqbnorm.metrics import make_map_scorer, mean_average_precision
from skqbnorm.rerankers import (
    DiffusionReranker,
    HingeReranker,
    KReciprocalReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    QueryExpansionReranker,
    RandomWalkReranker,
    RerankerCV,
)


def cosine_lists(n_queries=10, n_items=40, seed=0):
    """Lists whose relevant items share a direction, with noisy initial cosines."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_queries), n_items)
    relevance = rng.random(len(groups)) < 0.3
    features = relevance[:, None] * np.array([2.0, 0, 0]) + rng.normal(scale=0.7, size=(len(groups), 3))
    initial = np.clip(0.3 * relevance + rng.normal(scale=0.3, size=len(groups)), -1, 1)
    return features, initial, groups, relevance


NEIGHBOURHOOD = [
    (KReciprocalReranker(k1=6, k2=3), "lambda_value", [0.0, 0.3, 0.7, 1.0]),
    (DiffusionReranker(n_neighbors=5), "alpha", [0.0, 0.5, 0.9, 0.99]),
    (QueryExpansionReranker(n_query=5, n_database=5), "alpha", [0.0, 1.0, 3.0, 10.0]),
]


@pytest.mark.slow
@pytest.mark.parametrize(("reranker", "name", "values"), NEIGHBOURHOOD,
                         ids=lambda p: type(p).__name__ if isinstance(p, BaseEstimator) else "")
def test_neighborhood_reranker_cv_chooses_what_grid_search_chooses(reranker, name, values):
    features, initial, groups, relevance = cosine_lists()
    with sklearn.config_context(enable_metadata_routing=True):
        grid = GridSearchCV(reranker, {name: values}, scoring=make_map_scorer(n=20),
                            cv=GroupKFold(n_splits=5))
        grid.fit(features, initial, groups=groups, relevance=relevance)
    search = RerankerCV(reranker, cs=values, cv=GroupKFold(n_splits=5), n=20).fit(
        features, initial, groups, relevance=relevance)
    # Each list is reranked alone either way: the same fold scores, bitwise, so the same choice.
    for key in ["mean_test_score", "std_test_score", "rank_test_score"] + [f"split{k}_test_score" for k in range(5)]:
        assert_array_equal(search.cv_results_[key], grid.cv_results_[key], err_msg=key)
    assert search.cv_results_["params"] == grid.cv_results_["params"]
    assert_array_equal(search.cv_results_[f"param_{name}"], values)
    assert search.best_params_ == grid.best_params_ and search.best_index_ == grid.best_index_
    assert search.best_c_ == grid.best_params_[name] and search.best_score_ == grid.best_score_
    assert np.ptp(search.cv_results_["mean_test_score"]) > 0.01  # the value matters: the test can fail
    assert_allclose(search.scores_, grid.best_estimator_.scores_, rtol=0, atol=0)
    assert search.best_estimator_.get_params() == grid.best_estimator_.get_params()
    assert search.average_precisions_.shape == (len(values), 10)


def test_neighborhood_fold_score_is_the_map_of_a_plain_fit():
    # An independent recomputation of every fold's score from fit_predict on that fold.
    features, initial, groups, relevance = cosine_lists(n_queries=6, n_items=25, seed=3)
    values = [0.5, 0.9]
    search = RerankerCV(DiffusionReranker(n_neighbors=4), cs=values, cv=3).fit(
        features, initial, groups, relevance=relevance)
    for k, (_, test) in enumerate(GroupKFold(n_splits=3).split(features, initial, groups)):
        for i, alpha in enumerate(values):
            scores = DiffusionReranker(alpha, n_neighbors=4).fit_predict(
                features[test], initial[test], groups[test])
            expected = mean_average_precision(scores, relevance[test], groups[test])
            assert np.isclose(search.cv_results_[f"split{k}_test_score"][i], expected, rtol=1e-12)


@pytest.mark.parametrize(("cls", "name", "grid"), [
    (HingeReranker, "c", (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)),
    (PointwiseReranker, "c", (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)),
    (PreferenceStrengthReranker, "c", (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)),
    (RandomWalkReranker, "c", (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)),
    (KReciprocalReranker, "lambda_value", (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0)),
    (DiffusionReranker, "alpha", (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)),
    (QueryExpansionReranker, "alpha", (0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)),
])
def test_every_reranker_declares_its_strength_and_default_candidates(cls, name, grid):
    assert cls.strength_param == name and name in cls().get_params()
    assert tuple(cls.strength_grid) == grid
    for value in grid:  # every default candidate is a valid value
        cls(**{name: value})._validate_params()


def test_default_candidates_are_the_rerankers_own():
    features, initial, groups, relevance = cosine_lists(n_queries=4, n_items=15, seed=1)
    search = RerankerCV(KReciprocalReranker(k1=4, k2=2), cv=2).fit(features, initial, groups,
                                                                   relevance=relevance)
    assert [p["lambda_value"] for p in search.cv_results_["params"]] == list(
        KReciprocalReranker.strength_grid)
    # lambda_value=1 ranks by the original distance alone: the initial ranking's MAP.
    at_one = search.average_precisions_[-1].mean()
    assert np.isclose(at_one, mean_average_precision(initial, relevance, groups), rtol=1e-12)
    search = RerankerCV(PointwiseReranker(), cv=2).fit(features, initial, groups, relevance=relevance)
    assert_array_equal(search.cv_results_["param_c"], PointwiseReranker.strength_grid)


@pytest.mark.parametrize(("reranker", "name", "values"), NEIGHBOURHOOD,
                         ids=lambda p: type(p).__name__ if isinstance(p, BaseEstimator) else "")
def test_kept_reranking_is_a_plain_fit_at_the_chosen_value(reranker, name, values):
    features, initial, groups, relevance = cosine_lists(n_queries=4, n_items=20, seed=2)
    search = RerankerCV(reranker, cs=values, cv=2, n_jobs=2).fit(features, initial, groups,
                                                                 relevance=relevance)
    plain = reranker.set_params(**{name: search.best_c_}).fit_predict(features, initial, groups)
    assert_array_equal(search.scores_, plain)
    assert search.best_estimator_.get_params()[name] == search.best_c_
    assert search.best_estimator_.n_jobs is None  # the wrapped reranker's, not RerankerCV's


class NoContract(BaseEstimator):
    """A reranker-shaped estimator that declares nothing."""

    def __init__(self, c=1.0):
        self.c = c

    def fit_predict(self, X, y, groups=None):
        return np.asarray(y, dtype=float)


class WrongName(NoContract):
    strength_param = "beta"

    def rerank_path(self, X, y, groups=None, *, betas):
        raise AssertionError("never called")


@pytest.mark.parametrize(("estimator", "message"), [
    (NoContract(), (r"cannot tune NoContract: it declares no strength_param .*got None\) and "
                    r"has no rerank_path")),
    (WrongName(), r"cannot tune WrongName: it declares no strength_param .*got 'beta'\)\. "),
    (KMeans(n_clusters=2), r"cannot tune KMeans: it declares no strength_param"),
])
def test_an_estimator_without_the_contract_is_refused_by_name(estimator, message):
    features, initial, groups, relevance = cosine_lists(n_queries=4, n_items=10)
    with pytest.raises(ValueError, match=message):
        RerankerCV(estimator, cs=[1.0], cv=2).fit(features, initial, groups, relevance=relevance)


@pytest.mark.parametrize(("reranker", "cs", "message"), [
    (DiffusionReranker(), [0.5, 1.0], (r"values of alpha, each valid for DiffusionReranker; got "
                                       r"cs=\[0.5, 1.0\]\. The 'alpha' parameter .* Got 1.0")),
    (KReciprocalReranker(), [0.3, -0.1], r"values of lambda_value.* The 'lambda_value' parameter"),
    (QueryExpansionReranker(), [], r"values of alpha.*got cs=\[\]\.$"),
    (QueryExpansionReranker(), [[1.0, 2.0]], r"got cs=\[\[1.0, 2.0\]\]"),
    (QueryExpansionReranker(), ["three"], r"got cs=\['three'\]"),
    (HingeReranker(), [0.1, np.inf], r"values of c, each valid for HingeReranker; got cs=\[0.1, inf\]"),
])
def test_candidates_must_be_valid_values_of_the_strength(reranker, cs, message):
    features, initial, groups, relevance = cosine_lists(n_queries=4, n_items=10)
    with pytest.raises(ValueError, match=message):
        RerankerCV(reranker, cs=cs, cv=2).fit(features, initial, groups, relevance=relevance)


@pytest.mark.parametrize("reranker", [PointwiseReranker(), DiffusionReranker(n_neighbors=3),
                                      KReciprocalReranker(k1=3, k2=2)],
                         ids=lambda r: type(r).__name__)
@pytest.mark.parametrize("cs", [["0.1", True], [0.1, True], [np.True_], ["a"],
                                np.array(["0.5"]), [0.5, None]])
def test_candidates_must_be_numbers_not_booleans_or_strings(reranker, cs):
    features, initial, groups, relevance = cosine_lists(n_queries=4, n_items=10)
    with pytest.raises(ValueError, match=r"^cs must be a non-empty 1-D sequence of real numbers "
                                         r"\(not booleans or strings\)"):
        RerankerCV(reranker, cs=cs, cv=2).fit(features, initial, groups, relevance=relevance)


def test_diffusion_rerank_path_refuses_booleans_and_strings_by_name():
    features, initial, groups, _ = cosine_lists(n_queries=2, n_items=10)
    for alphas in (["0.1", True], [0.5, True], ["a"]):
        with pytest.raises(ValueError, match=r"^alphas must be .* of alpha; got alphas=.*\(real "
                                             r"numbers, not booleans or strings\)"):
            DiffusionReranker(n_neighbors=3).rerank_path(features, initial, groups, alphas=alphas)
    path = DiffusionReranker(n_neighbors=3).rerank_path(features, initial, groups,
                                                         alphas=np.array([0, 0.5], dtype=np.float32))
    assert [fitted.alpha for fitted in path] == [0.0, 0.5]


class NoFold:
    """A splitter that yields nothing (or, ``empty_test``, one fold with no test sample)."""

    def __init__(self, empty_test=False):
        self.empty_test = empty_test

    def split(self, X, y=None, groups=None):
        if self.empty_test:
            yield np.arange(len(X)), np.array([], dtype=int)


@pytest.mark.parametrize(("cv", "message"), [
    (NoFold(), (r"^cv=.*NoFold.* gave no fold: its split\(X, y, groups\) yielded no "
                r"train/test pair for 4 lists")),
    (NoFold(empty_test=True), r"^cv=.*NoFold.* gave test fold 0 no sample"),
    ("2", r"^cv must be an int >= 2 or a cross-validation splitter; got cv='2', a string"),
])
def test_a_splitter_without_a_test_fold_is_refused_by_name(cv, message):
    features, initial, groups, relevance = cosine_lists(n_queries=4, n_items=10)
    search = RerankerCV(PointwiseReranker(), cs=[0.1, 1.0], cv=cv)
    with pytest.raises(ValueError, match=message):
        search.fit(features, initial, groups, relevance=relevance)
    assert not hasattr(search, "best_c_")


def test_relevance_without_a_relevant_sample_warns_that_candidates_score_alike():
    features, initial, groups, _ = cosine_lists(n_queries=4, n_items=10)
    search = RerankerCV(PointwiseReranker(), cs=[0.1, 1.0], cv=2)
    with pytest.warns(UserWarning, match=r"relevance has no relevant sample \(all 40 are 0\): "
                                         r"every list's AP is 0 at every candidate"):
        search.fit(features, initial, groups, relevance=np.zeros(40))
    assert_array_equal(search.cv_results_["mean_test_score"], [0.0, 0.0])
    assert search.best_c_ == 0.1
    with warnings.catch_warnings():  # one relevant sample is enough to score
        warnings.simplefilter("error")
        RerankerCV(PointwiseReranker(), cs=[0.1, 1.0], cv=2).fit(
            features, initial, groups, relevance=np.arange(40) == 5)


def test_caller_arrays_are_left_as_they_were():
    features, initial, groups, relevance = cosine_lists(n_queries=4, n_items=10)
    kept = [a.copy() for a in (features, initial, groups, relevance)]
    cs = [0.5, 0.9]
    RerankerCV(DiffusionReranker(n_neighbors=3), cs=cs, cv=2).fit(*kept[:3], relevance=kept[3])
    for before, after in zip((features, initial, groups, relevance), kept):
        assert_array_equal(before, after)
    assert cs == [0.5, 0.9]
