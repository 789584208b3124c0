"""The retrieval and mAP scorers: tie conventions, argument checks and groups in a search."""

import numpy as np
import pytest
import sklearn
from sklearn.base import BaseEstimator
from sklearn.model_selection import GridSearchCV, PredefinedSplit

from skqbnorm.metrics import (
    make_map_scorer,
    make_retrieval_scorer,
)


def test_scorer_uses_its_tie_convention():
    sims, gt = np.array([[0.7, 0.7, 0.1], [0.9, 0.2, 0.1]]), np.array([0, 0])
    assert make_retrieval_scorer("R@1")(None, sims, gt) == 50.0
    assert make_retrieval_scorer("R@1", ties="optimistic")(None, sims, gt) == 100.0


# -- scorers and conventions ---------------------------------------------------------------


def test_scorer_arguments_are_checked_at_construction():
    denominators = r"denominator must be one of \('relevant', 'truncated'\); got denominator='x'"
    with pytest.raises(ValueError, match=denominators):
        make_map_scorer(denominator="x")
    with pytest.raises(ValueError, match="n must be >= 1; got n=0"):
        make_map_scorer(n=0)
    with pytest.raises(ValueError, match="metric must be one of .*got metric='MdR'"):
        make_retrieval_scorer("MdR")
    with pytest.raises(ValueError, match="ties must be one of .*got ties='random'"):
        make_retrieval_scorer("R@1", ties="random")


# -------------------------------------------------------------------- MAP scorer


class FirstColumn(BaseEstimator):
    """Scores every item by its first feature (a fixed, hand-checkable reranker)."""

    def __init__(self, offset=0.0):
        self.offset = offset

    def fit(self, X, y=None):
        return self

    def fit_predict(self, X, y=None, groups=None):
        return np.asarray(X, dtype=float)[:, 0] + self.offset


# Two queries of two items: scores (10, 9) with relevance (0, 1): AP 1/2; scores (2, 1)
# with relevance (1, 0): AP 1. Their mean is 3/4; pooled into one list (10, 9, 2, 1)
# with relevance (0, 1, 1, 0), the AP is (1/2 + 2/3) / 2 = 7/12.
MAP_X = np.array([[10.0], [9.0], [2.0], [1.0]])


MAP_RELEVANCE = np.array([0, 1, 1, 0])


def test_map_scorer_without_groups_scores_one_list():
    scorer = make_map_scorer()
    assert scorer(FirstColumn(), MAP_X, None, MAP_RELEVANCE) == pytest.approx(7 / 12)
    groups = [0, 0, 1, 1]
    assert scorer(FirstColumn(), MAP_X, None, MAP_RELEVANCE, groups) == pytest.approx(3 / 4)


def test_map_scorer_receives_each_folds_groups_in_a_search():
    X, relevance = np.vstack([MAP_X, MAP_X]), np.concatenate([MAP_RELEVANCE, MAP_RELEVANCE])
    groups = np.repeat([0, 1, 2, 3], 2)
    with sklearn.config_context(enable_metadata_routing=True):
        search = GridSearchCV(
            FirstColumn(),
            {"offset": [0.0]},
            scoring=make_map_scorer(),
            cv=PredefinedSplit(np.repeat([0, 1], 4)),
        ).fit(X, np.zeros(len(X)), groups=groups, relevance=relevance)
    assert search.cv_results_["split0_test_score"][0] == pytest.approx(3 / 4)
    assert search.cv_results_["split1_test_score"][0] == pytest.approx(3 / 4)
