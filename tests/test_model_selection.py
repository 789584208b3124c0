"""Normalisers and rerankers inside GridSearchCV and Pipeline, and RerankerCV."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from skqbnorm import CSLS, DynamicInvertedSoftmax, InvertedSoftmax
from skqbnorm.datasets import make_hubness_sims
from skqbnorm.metrics import make_retrieval_scorer, retrieval_metrics

BETAS = [0.3, 1.0, 3.0, 10.0, 30.0, 100.0]


def test_grid_search_selects_a_beta_that_helps():
    sims, gt, _ = make_hubness_sims(1500, 200, 0, random_state=0, dtype=np.float32)
    search = GridSearchCV(
        DynamicInvertedSoftmax(), {"beta": BETAS, "k": [1, 5]}, scoring=make_retrieval_scorer("R@1"), cv=3
    ).fit(sims, gt)
    raw = retrieval_metrics(sims, gt)["R@1"]
    scores = search.cv_results_["mean_test_score"]
    # On planted hubs, tiny beta barely normalises and huge beta over-sharpens:
    # the optimum is interior, and it is what GridSearchCV picks.
    assert search.best_params_["beta"] in (10.0, 30.0)
    assert search.best_score_ == scores.max() > 2 * raw
    assert scores[np.array(search.cv_results_["param_beta"]) == 0.3].max() < raw + 3


@pytest.mark.slow
def test_held_out_improvement_with_selected_beta():
    # The paper's protocol: tune and fit on training queries, test on unseen ones.
    sims, gt, _ = make_hubness_sims(2000, 200, 0, random_state=1)
    (train, train_gt), (test, test_gt) = (sims[:1000], gt[:1000]), (sims[1000:], gt[1000:])
    search = GridSearchCV(InvertedSoftmax(), {"beta": BETAS}, scoring=make_retrieval_scorer("geometric_mean"), cv=3)
    best = search.fit(train, train_gt).best_estimator_  # refitted on all training queries
    assert retrieval_metrics(best.transform(test), test_gt)["R@1"] > 2 * retrieval_metrics(test, test_gt)["R@1"]


def test_pipeline_passes_y_through_and_ignores_it():
    sims, gt, _ = make_hubness_sims(300, 50, 0, random_state=2)
    pipe = make_pipeline(CSLS(k=5))
    out = pipe.fit(sims, gt).transform(sims)
    assert out.shape == sims.shape
    assert np.allclose(out, CSLS(k=5).fit(sims).transform(sims))


@pytest.mark.slow
def test_grid_search_over_c_with_whole_queries_per_fold():
    import sklearn
    from sklearn.model_selection import GroupKFold

    from skqbnorm import PointwiseReranker
    from skqbnorm.metrics import make_map_scorer, mean_average_precision

    rng = np.random.default_rng(0)
    n_queries, n_items = 8, 60
    groups = np.repeat(np.arange(n_queries), n_items)
    relevance = rng.random(n_queries * n_items) < 0.3
    # Relevant items cluster together visually; the initial text scores are noisy.
    features = relevance[:, None] * 2.0 + rng.normal(scale=0.5, size=(len(groups), 3))
    initial = relevance + rng.normal(scale=1.0, size=len(groups))
    calls = []

    class RecordingGroupKFold(GroupKFold):
        def split(self, X, y=None, groups=None):
            for train, test in super().split(X, y, groups):
                assert not set(groups[train]) & set(groups[test])  # whole queries per fold
                calls.append(test)
                yield train, test

    with sklearn.config_context(enable_metadata_routing=True):
        search = GridSearchCV(
            PointwiseReranker(), {"c": [1e-3, 1e-1, 1e1, 1e5], "sigma": ["median", 2.0]},
            scoring=make_map_scorer(), cv=RecordingGroupKFold(n_splits=4),
        ).fit(features, initial, groups=groups, relevance=relevance)
    assert len(calls) == 4  # the splits are made once and shared by every candidate
    assert len(search.cv_results_["params"]) == 8
    # The scores GridSearchCV recorded are the MAP of each test fold's queries.
    test = calls[0]
    first = search.cv_results_["params"][0]
    expected = mean_average_precision(
        PointwiseReranker(**first).fit_predict(features[test], initial[test], groups=groups[test]),
        relevance[test], groups[test],
    )
    assert np.isclose(search.cv_results_["split0_test_score"][0], expected)
    # c=1e5 keeps the noisy initial order; the search picks a c that reranks.
    keeps_initial = np.array([params["c"] == 1e5 for params in search.cv_results_["params"]])
    assert search.best_params_["c"] < 1e5
    assert search.best_score_ > search.cv_results_["mean_test_score"][keeps_initial].max() + 0.05


def test_map_scorer_without_metadata_routing_says_what_to_enable():
    from skqbnorm import PointwiseReranker
    from skqbnorm.metrics import make_map_scorer

    rng = np.random.default_rng(0)
    features, initial = rng.normal(size=(20, 2)), rng.normal(size=20)
    with pytest.raises(ValueError, match=r"needs relevance .*enable_metadata_routing=True"):
        make_map_scorer()(PointwiseReranker(), features, initial)
    search = GridSearchCV(PointwiseReranker(), {"c": [0.1, 1.0]}, scoring=make_map_scorer(), cv=2)
    with pytest.warns(UserWarning, match=r"enable_metadata_routing=True"):  # every fit's score
        search.fit(features, initial)


def reranking_lists(n_queries=10, n_items=40, seed=0):
    """Lists whose relevant items cluster visually, with noisy initial (text) scores."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_queries), n_items)
    relevance = rng.random(len(groups)) < 0.3
    features = relevance[:, None] * 1.5 + rng.normal(scale=0.5, size=(len(groups), 4))
    initial = relevance + rng.normal(scale=1.2, size=len(groups))
    return features, initial, groups, relevance


@pytest.mark.slow
@pytest.mark.parametrize("name", ["PointwiseReranker", "HingeReranker", "PreferenceStrengthReranker"])
def test_reranker_cv_chooses_the_c_of_grid_search_on_the_same_folds(name):
    import sklearn
    from sklearn.model_selection import GroupKFold

    import skqbnorm
    from skqbnorm import RerankerCV
    from skqbnorm.metrics import make_map_scorer

    reranker = getattr(skqbnorm, name)()
    features, initial, groups, relevance = reranking_lists()
    cs = [1e-3, 1e-2, 0.1, 1.0, 10.0, 1e3]
    with sklearn.config_context(enable_metadata_routing=True):
        grid = GridSearchCV(reranker, {"c": cs}, scoring=make_map_scorer(n=20), cv=GroupKFold(n_splits=5))
        grid.fit(features, initial, groups=groups, relevance=relevance)
    search = RerankerCV(reranker, cs=cs, cv=GroupKFold(n_splits=5), n=20).fit(
        features, initial, groups, relevance=relevance)
    # The same fold scores, bitwise (each list is reranked alone either way), so the same choice.
    for key in ["mean_test_score", "std_test_score", "rank_test_score"] + [f"split{k}_test_score" for k in range(5)]:
        assert_array_equal(search.cv_results_[key], grid.cv_results_[key], err_msg=key)
    assert search.cv_results_["params"] == grid.cv_results_["params"]
    assert search.best_c_ == grid.best_params_["c"] and search.best_index_ == grid.best_index_
    assert search.best_score_ == grid.best_score_
    assert np.ptp(search.cv_results_["mean_test_score"]) > 0.01  # c matters here: the test can fail
    # The kept reranking is the best estimator's, refitted on every list by GridSearchCV.
    assert_allclose(search.scores_, grid.best_estimator_.scores_, rtol=1e-12, atol=1e-12)
    assert search.best_estimator_.get_params()["c"] == search.best_c_
    assert_array_equal(search.best_estimator_.solver_status_, grid.best_estimator_.solver_status_)
    assert search.n_splits_ == 5 and search.average_precisions_.shape == (len(cs), 10)


def test_reranker_cv_scores_are_the_map_of_each_held_out_fold():
    # An independent recomputation of one fold's score from a plain fit_predict.
    from sklearn.model_selection import GroupKFold

    from skqbnorm import PointwiseReranker, RerankerCV
    from skqbnorm.metrics import mean_average_precision

    features, initial, groups, relevance = reranking_lists(n_queries=6, seed=3)
    search = RerankerCV(PointwiseReranker(), cs=[0.01, 3.0], cv=3).fit(features, initial, groups,
                                                                       relevance=relevance)
    for k, (_, test) in enumerate(GroupKFold(n_splits=3).split(features, initial, groups)):
        for i, c in enumerate([0.01, 3.0]):
            scores = PointwiseReranker(c=c).fit_predict(features[test], initial[test], groups[test])
            expected = mean_average_precision(scores, relevance[test], groups[test])
            assert np.isclose(search.cv_results_[f"split{k}_test_score"][i], expected, rtol=1e-12)
    assert_allclose(search.fit_predict(features, initial, groups, relevance=relevance),
                    PointwiseReranker(c=search.best_c_).fit_predict(features, initial, groups))


@pytest.mark.filterwarnings("ignore:The groups parameter is ignored by KFold")
def test_reranker_cv_refuses_folds_that_cut_a_list_and_bad_candidates():
    from sklearn.model_selection import KFold

    from skqbnorm import RerankerCV

    features, initial, groups, relevance = reranking_lists(n_queries=4, n_items=20)
    with pytest.raises(ValueError, match=r"cut a list in test fold 0: a fold must hold whole lists"):
        RerankerCV(cv=KFold(n_splits=3, shuffle=True, random_state=0)).fit(
            features, initial, groups, relevance=relevance)
    with pytest.raises(ValueError, match=r"cv=5 folds need at least 5 lists; groups holds 4"):
        RerankerCV(cv=5).fit(features, initial, groups, relevance=relevance)
    with pytest.raises(ValueError, match=r"cs must be a non-empty 1-D sequence .* got cs=\[0.1, -1.0\]"):
        RerankerCV(cs=[0.1, -1.0], cv=2).fit(features, initial, groups, relevance=relevance)
    with pytest.raises(ValueError, match=r"RerankerCV needs groups"):
        RerankerCV(cv=2).fit(features, initial, None, relevance=relevance)
    with pytest.raises(ValueError, match=r"relevance has shape \(3,\)"):
        RerankerCV(cv=2).fit(features, initial, groups, relevance=[1, 0, 1])


def test_grid_search_without_routing_refuses_relevance_in_fit():
    # Without metadata routing GridSearchCV hands relevance to the reranker's fit, which
    # takes no such argument: scikit-learn's own TypeError names it.
    from sklearn.model_selection import GroupKFold

    from skqbnorm import PointwiseReranker
    from skqbnorm.metrics import make_map_scorer

    features, initial, groups, relevance = reranking_lists(n_queries=4, n_items=20)
    search = GridSearchCV(PointwiseReranker(), {"c": [0.1, 1.0]}, scoring=make_map_scorer(),
                          cv=GroupKFold(n_splits=2), error_score="raise")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'relevance'"):
        search.fit(features, initial, groups=groups, relevance=relevance)
