"""Normalisers inside GridSearchCV and Pipeline."""

import numpy as np
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
