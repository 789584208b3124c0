"""Retrieval metrics and hubness measures against plain references."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import skew

from skqbnorm.metrics import correct_item_ranks, hubness, k_occurrence, retrieval_metrics

import reference as ref


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 8), st.integers(1, 9)), elements=st.sampled_from([0.0, 0.5, 1.0, 2.0])),
    st.data(),
)
def test_ranks_average_ties(sims, data):
    gt = np.array([data.draw(st.integers(0, sims.shape[1] - 1)) for _ in range(len(sims))])
    assert_allclose(correct_item_ranks(sims, gt), ref.correct_ranks(sims, gt))


def test_constant_matrix_scores_like_chance():
    metrics = retrieval_metrics(np.zeros((10, 100)), np.arange(10))
    assert metrics["R@1"] == metrics["R@5"] == metrics["R@10"] == 0.0
    assert metrics["MdR"] == metrics["MnR"] == 50.5


def test_recalls_and_ranks_by_hand():
    sims = np.array([[0.9, 0.1, 0.0], [0.1, 0.9, 0.5], [0.3, 0.2, 0.1], [0.2, 0.2, 0.9]])
    gt = np.array([0, 2, 2, 1])  # ranks 0, 1, 2, 1.5
    metrics = retrieval_metrics(sims, gt)
    assert metrics["R@1"] == 25.0 and metrics["R@5"] == 100.0
    assert metrics["MdR"] == 2.25 and metrics["MnR"] == 2.125
    assert_allclose(metrics["geometric_mean"], (25.0 * 100 * 100) ** (1 / 3))


def test_relevance_matrix_takes_the_best_correct_item(rng):
    sims = rng.normal(size=(30, 20))
    relevant = rng.random((30, 20)) < 0.2
    relevant[np.arange(30), rng.integers(0, 20, 30)] = True
    per_item = np.array([[ref.correct_ranks(sims[[q]], [j])[0] for j in range(20)] for q in range(30)])
    expected = np.where(relevant, per_item, np.inf).min(axis=1)
    assert_allclose(correct_item_ranks(sims, relevant), expected)


def test_metric_input_errors():
    with pytest.raises(ValueError, match=r"gt must hold gallery indices in \[0, 3\).*got values in \[0, 3\]"):
        retrieval_metrics(np.zeros((2, 3)), [0, 3])
    with pytest.raises(ValueError, match=r"one gallery index per query \(shape \(2,\)\)"):
        retrieval_metrics(np.zeros((2, 3)), [0, 1, 2])
    with pytest.raises(ValueError, match="rows \\[1\\] have none"):
        retrieval_metrics(np.zeros((2, 3)), np.array([[1, 0, 0], [0, 0, 0]], dtype=bool))
    with pytest.raises(ValueError, match="integer gallery indices"):
        retrieval_metrics(np.zeros((2, 3)), [0.5, 1.0])


@settings(max_examples=40, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 12), st.integers(3, 15)), elements=st.integers(0, 3).map(float)),
    st.integers(1, 3),
)
def test_k_occurrence_matches_reference_with_ties(sims, k):
    assert_array_equal(k_occurrence(sims, k), ref.k_occurrence(sims, k))


def test_hubness_measures_by_hand(rng):
    sims = rng.normal(size=(200, 40))
    sims[:, :3] += 1.5  # three hubs
    counts = ref.k_occurrence(sims, 10)
    measures = hubness(sims, k=10)
    assert_allclose(measures["skewness"], skew(counts))
    assert_allclose(measures["antihub_occurrence"], np.mean(counts == 0))
    assert_allclose(measures["hub_occurrence"], counts[counts >= 20].sum() / counts.sum())
    assert_allclose(measures["robin_hood"], 0.5 * np.abs(counts - counts.mean()).sum() / counts.sum())
    pairs = np.abs(counts[:, None] - counts[None, :]).sum()
    assert_allclose(measures["gini"], pairs / (2 * len(counts) ** 2 * counts.mean()))
    assert measures["skewness"] > 1.0


def test_no_hubs_when_every_item_is_retrieved_equally():
    sims = np.eye(10)
    measures = hubness(sims, k=1)
    assert measures["skewness"] == 0.0 and measures["gini"] == 0.0 and measures["antihub_occurrence"] == 0.0


def test_k_occurrence_rejects_bad_k():
    with pytest.raises(ValueError, match=r"k must be in \[1, 3\] for sims of shape \(2, 3\); got k=4"):
        k_occurrence(np.zeros((2, 3)), 4)
