"""The digits retrieval task built from scikit-learn's digits."""

from numpy.testing import assert_array_equal

from skqbnorm import DynamicInvertedSoftmax
from skqbnorm.datasets import (
    load_digits_retrieval,
)
from skqbnorm.metrics import retrieval_metrics


def test_digits_retrieval_task_has_hubs_that_normalization_corrects():
    data = load_digits_retrieval()
    raw = retrieval_metrics(data.query_sims, data.query_gt)["R@1"]
    normalized = DynamicInvertedSoftmax().fit(data.bank_sims).transform(data.query_sims)
    assert retrieval_metrics(normalized, data.query_gt)["R@1"] > raw + 5


def test_digits_reranking_with_a_noisy_engine():
    from skqbnorm.datasets import load_digits_reranking
    from skqbnorm.metrics import mean_average_precision

    perfect = load_digits_reranking(n_pool=200, noise=0.0)
    assert mean_average_precision(perfect.initial_scores, perfect.relevance, perfect.groups) == 1.0
    noisy = load_digits_reranking(n_pool=200, noise=1.0)
    assert_array_equal(noisy.relevance, perfect.relevance)  # the same pool
    residual = noisy.initial_scores - noisy.relevance
    assert abs(residual.std() - 1.0) < 0.05 and abs(residual.mean()) < 0.05
