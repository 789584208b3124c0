"""The metrics of score matrices under array API dispatch: computed on the scores'
device, equal to the NumPy path (which its own tests hold to the reference)."""

import numpy as np
import pytest
import sklearn

from skqbnorm.metrics import (
    correct_item_ranks,
    hubness,
    k_occurrence,
    recall_at_k,
    retrieval_metrics,
)

from array_api_cases import NAMESPACES, host, namespace_and_device, put

TIES = ["official", "average", "optimistic", "pessimistic"]


@pytest.fixture(scope="module")
def scores():
    """Scores with ties (a constant row, a tie at the top), one correct index per query,
    and a relevance matrix."""
    rng = np.random.default_rng(0)
    sims = rng.normal(size=(60, 25))
    sims[3] = 0.5
    sims[7, :3] = sims[7].max() + 1
    gt = rng.integers(0, 25, size=60)
    relevant = rng.random((60, 25)) < 0.1
    relevant[np.arange(60), gt] = True
    return sims, gt, relevant


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ranks_and_retrieval_metrics_equal_the_numpy_path(case, ties, dtype, scores):
    xp, device = namespace_and_device(case)
    sims, gt, relevant = scores
    sims = sims.astype(dtype)
    for truth in (gt, relevant):
        expected_ranks = correct_item_ranks(sims, truth, ties=ties)
        expected = retrieval_metrics(sims, truth, ties=ties)
        with sklearn.config_context(array_api_dispatch=True):
            ranks = correct_item_ranks(put(xp, device, sims), truth, ties=ties)
            metrics = retrieval_metrics(put(xp, device, sims), truth, ties=ties)
        assert type(ranks).__module__.split(".")[0] == xp.__name__.split(".")[0]
        assert ranks.device == device
        np.testing.assert_array_equal(host(ranks), expected_ranks)
        assert metrics == expected
        assert all(type(value) is float for value in metrics.values())


@pytest.mark.parametrize("case", NAMESPACES)
def test_recall_at_k_counts_on_the_device(case):
    xp, device = namespace_and_device(case)
    ranks = [0.0, 0.5, 4.5, 7.0]
    with sklearn.config_context(array_api_dispatch=True):
        assert recall_at_k(put(xp, device, ranks), 1) == 25.0
        assert recall_at_k(put(xp, device, ranks), 5) == 75.0
        assert recall_at_k(put(xp, device, ranks), 5, ties="average") == 50.0
        with pytest.raises(ValueError, match=r"ranks\[1\] is -1.0"):
            recall_at_k(put(xp, device, [0.0, -1.0]), 1)


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("k", [1, 3, 25])
def test_k_occurrence_and_hubness_equal_the_numpy_path(case, k, scores):
    xp, device = namespace_and_device(case)
    sims = scores[0]
    with sklearn.config_context(array_api_dispatch=True):
        counts = k_occurrence(put(xp, device, sims), k)
        measures = hubness(put(xp, device, sims), k)
    assert counts.device == device
    if xp.__name__ == "array_api_strict":  # ties go to the lowest index, as in NumPy
        np.testing.assert_array_equal(host(counts), k_occurrence(sims, k))
    else:  # torch.topk orders exact ties its own way: the tied rows may differ
        untied = np.ones(len(sims), bool)
        untied[[3, 7]] = False
        with sklearn.config_context(array_api_dispatch=True):
            untied_counts = k_occurrence(put(xp, device, sims[untied]), k)
        np.testing.assert_array_equal(host(untied_counts), k_occurrence(sims[untied], k))
        return
    assert measures == hubness(sims, k)


@pytest.mark.parametrize("case", NAMESPACES)
def test_bad_scores_are_named(case):
    xp, device = namespace_and_device(case)
    sims = np.ones((3, 4))
    sims[1, 2] = np.nan
    with sklearn.config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match="sims row 1 to gallery item 2 is nan"):
            correct_item_ranks(put(xp, device, sims), [0, 1, 2])
        with pytest.raises(ValueError, match=r"k must be"):
            k_occurrence(put(xp, device, np.ones((3, 4))), 5)
        with pytest.raises(ValueError, match="non-empty 2-D"):
            k_occurrence(put(xp, device, np.ones(4)), 1)


def test_without_dispatch_the_numpy_path_is_unchanged(scores):
    sims, gt, _ = scores
    assert isinstance(correct_item_ranks(sims, gt), np.ndarray)
    with sklearn.config_context(array_api_dispatch=True):  # NumPy in: NumPy path
        np.testing.assert_array_equal(correct_item_ranks(sims, gt), correct_item_ranks(sims, gt))
        assert isinstance(k_occurrence(sims, 3), np.ndarray)
