"""The neighbourhood rerankers (k-reciprocal, diffusion, alpha-QE / DBA) against dense
references written from the papers' formulas (tests/reference_rerankers.py)."""

import numpy as np
import pytest
import sklearn
from reference_rerankers import alpha_qe_dba, diffusion, k_reciprocal, node_similarities
from sklearn.model_selection import GridSearchCV, GroupKFold

from skqbnorm import DiffusionReranker, KReciprocalReranker, QueryExpansionReranker
from skqbnorm.metrics import make_map_scorer, mean_average_precision

from helpers import clustered_list

RERANKERS = [KReciprocalReranker(k1=6, k2=3), DiffusionReranker(n_neighbors=5),
             QueryExpansionReranker(n_query=3, n_database=3)]


@pytest.mark.parametrize("reranker", RERANKERS, ids=lambda r: type(r).__name__)
def test_lists_are_reranked_independently_whatever_n_jobs(reranker):
    lists = [clustered_list(seed, n_items=20 + 5 * seed) for seed in range(3)]
    features = np.vstack([f for f, _, _ in lists])
    initial = np.concatenate([i for _, i, _ in lists])
    groups = np.repeat(["b", "a", "c"], [len(i) for _, i, _ in lists])
    one = reranker.set_params(n_jobs=1).fit_predict(features, initial, groups=groups)
    two = reranker.set_params(n_jobs=2).fit_predict(features, initial, groups=groups)
    np.testing.assert_array_equal(one, two)
    for label in "abc":
        index = groups == label
        np.testing.assert_allclose(one[index], reranker.fit_predict(features[index], initial[index]),
                                   rtol=0, atol=1e-12)


@pytest.mark.parametrize("reranker", RERANKERS, ids=lambda r: type(r).__name__)
def test_float32_inputs_and_caller_arrays(reranker):
    features, initial, _ = clustered_list(2)
    features32, initial32 = features.astype(np.float32), initial.astype(np.float32)
    kept = features32.copy(), initial32.copy()
    scores = reranker.fit_predict(features32, initial32)
    np.testing.assert_array_equal(features32, kept[0])
    np.testing.assert_array_equal(initial32, kept[1])
    assert scores.dtype == np.float64 and np.all(np.isfinite(scores))
    expected = reranker.fit_predict(features32.astype(np.float64), initial32.astype(np.float64))
    np.testing.assert_array_equal(scores, expected)


@pytest.mark.parametrize("cls", [KReciprocalReranker, QueryExpansionReranker])
def test_cosine_initial_scores_must_be_cosines(cls):
    features, initial, _ = clustered_list(3)
    with pytest.raises(ValueError, match=r"initial='cosine'.*y of shape \(40,\).*'minmax'"):
        cls().fit_predict(features, 3 * initial)
    # minmax takes any scale: the scores of 3 y + 1 are those of y mapped onto [0, 1].
    mapped = (initial - initial.min()) / np.ptp(initial)
    np.testing.assert_allclose(cls(initial="minmax").fit_predict(features, 3 * initial + 1),
                               cls().fit_predict(features, mapped), rtol=0, atol=1e-12)


@pytest.mark.parametrize("reranker, grid", [
    (KReciprocalReranker(), {"k1": [3, 10], "lambda_value": [0.3, 1.0]}),
    (DiffusionReranker(), {"alpha": [0.0, 0.9], "n_neighbors": [5, 15]}),
    (QueryExpansionReranker(), {"n_query": [0, 5], "n_database": [0, 5]}),
], ids=lambda p: type(p).__name__ if not isinstance(p, dict) else "")
def test_grid_search_with_whole_queries_per_fold(reranker, grid):
    rng = np.random.default_rng(0)
    n_queries, n_items = 8, 50
    groups = np.repeat(np.arange(n_queries), n_items)
    relevance = rng.random(n_queries * n_items) < 0.3
    # Relevant items share a direction; the initial cosines are noisy.
    features = relevance[:, None] * np.array([2.0, 0, 0]) + rng.normal(scale=0.7, size=(len(groups), 3))
    initial = np.clip(0.3 * relevance + rng.normal(scale=0.3, size=len(groups)), -1, 1)
    with sklearn.config_context(enable_metadata_routing=True):
        search = GridSearchCV(reranker, grid, scoring=make_map_scorer(),
                              cv=GroupKFold(n_splits=4)).fit(features, initial, groups=groups,
                                                             relevance=relevance)
    assert len(search.cv_results_["params"]) == 4
    # Every candidate's fold score is the MAP of that fold's reranked queries.
    test = next(GroupKFold(n_splits=4).split(features, initial, groups))[1]
    first = search.cv_results_["params"][0]
    expected = mean_average_precision(
        type(reranker)(**first).fit_predict(features[test], initial[test], groups=groups[test]),
        relevance[test], groups[test],
    )
    assert np.isclose(search.cv_results_["split0_test_score"][0], expected)
    # Reranking by the features' clusters beats the noisy initial order.
    assert search.best_score_ > mean_average_precision(initial, relevance, groups) + 0.05


def two_lists():
    """Two clustered lists, their query vectors and their groups."""
    lists = [clustered_list(seed, n_items=30 + 5 * seed) for seed in (5, 6)]
    features = np.vstack([f for f, _, _ in lists])
    initial = np.concatenate([i for _, i, _ in lists])
    groups = np.repeat([1, 0], [len(i) for _, i, _ in lists])
    return lists, features, initial, groups


@pytest.mark.parametrize(("reranker", "keyword", "values", "reference"), [
    (KReciprocalReranker(k1=7, k2=3), "lambda_values", [0.0, 0.3, 1.0],
     lambda f, i, q, v: -k_reciprocal(2 - 2 * node_similarities(f, i), 7, 3, v)),
    (DiffusionReranker(n_neighbors=6, n_source=None), "alphas", [0.0, 0.5, 0.99],
     lambda f, i, q, v: diffusion(f, i, v, 6, 3.0, len(i))),
    (QueryExpansionReranker(n_query=4, n_database=3), "alphas", [0.0, 1.0, 3.0],
     lambda f, i, q, v: alpha_qe_dba(f, q, v, 4, 3)),
], ids=["KReciprocalReranker", "DiffusionReranker", "QueryExpansionReranker"])
def test_rerank_path_is_the_reference_at_every_value(reranker, keyword, values, reference):
    lists, features, initial, groups = two_lists()
    path = reranker.rerank_path(features, initial, groups, **{keyword: values})
    name = type(reranker).strength_param
    assert [fitted.get_params()[name] for fitted in path] == values
    for value, fitted in zip(values, path):
        for label, (f, i, q) in zip([1, 0], lists):
            expected = reference(f, i, q, value)
            np.testing.assert_allclose(fitted.scores_[groups == label], expected, rtol=0,
                                       atol=1e-8 * max(1.0, np.abs(expected).max()))
        # what fit gives at that value, bitwise
        plain = type(reranker)(**{**reranker.get_params(), name: value})
        np.testing.assert_array_equal(fitted.scores_, plain.fit_predict(features, initial, groups))
        np.testing.assert_array_equal(fitted.group_labels_, [0, 1])
    assert reranker.get_params()[name] == type(reranker)().get_params()[name]  # left unchanged


@pytest.mark.parametrize(("reranker", "keyword", "values", "message"), [
    (KReciprocalReranker(), "lambda_values", [0.5, 2.0],
     r"lambda_values=\[0.5, 2.0\] holds 2.0: The 'lambda_value' parameter of KReciprocalReranker"),
    (DiffusionReranker(), "alphas", [], (r"alphas must be a non-empty 1-D sequence of finite "
                                         r"values of alpha; got alphas=\[\]")),
    (QueryExpansionReranker(), "alphas", [1.0, np.nan], r"got alphas=\[1.0, nan\]"),
])
def test_rerank_path_refuses_bad_values_by_name(reranker, keyword, values, message):
    features, initial, _ = clustered_list(0)
    with pytest.raises(ValueError, match=message):
        reranker.rerank_path(features, initial, **{keyword: values})


@pytest.mark.parametrize("reranker", RERANKERS, ids=lambda r: type(r).__name__)
def test_grid_search_without_routing_refuses_relevance_in_fit(reranker):
    # Without metadata routing GridSearchCV hands relevance to fit, which takes no such
    # argument: scikit-learn's own TypeError names it. With routing it reaches the scorer.
    _, features, initial, groups = two_lists()
    relevance = initial > np.median(initial)
    search = GridSearchCV(reranker, {"n_jobs": [None, 1]}, scoring=make_map_scorer(),
                          cv=GroupKFold(n_splits=2), error_score="raise")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'relevance'"):
        search.fit(features, initial, groups=groups, relevance=relevance)
    with sklearn.config_context(enable_metadata_routing=True):
        search.fit(features, initial, groups=groups, relevance=relevance)
    assert np.isfinite(search.best_score_)
