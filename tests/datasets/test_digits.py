"""The digits retrieval task built from scikit-learn's digits."""

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
