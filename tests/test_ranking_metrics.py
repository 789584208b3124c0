"""Average precision and the ranking distances, including the paper's toy example."""

import pytest
from numpy.testing import assert_allclose

from skqbnorm.metrics import (
    average_precision,
    discordant_pairs,
    hinge_distance,
    mean_average_precision,
    pointwise_distance,
    preference_strength_distance,
)

R0 = [1.0, 0.9, 0.8, 0.7, 0.6]
R1 = [0.6, 0.7, 0.8, 0.9, 1.0]
R2 = [1.5, 0.7, 0.8, 0.9, 1.0]
R3 = [0.5, 0.4, 0.3, 0.2, 0.1]


def test_paper_toy_example():
    distances = [round(pointwise_distance(r, R0), 2) for r in (R1, R2, R3)]
    assert distances == [0.63, 0.70, 1.12]
    assert [discordant_pairs(r, R0) for r in (R1, R2, R3)] == [10, 6, 0]
    # The pair-wise distances see what the point-wise one misses: r3 keeps the order.
    assert hinge_distance(R3, R0) == 0.0 < hinge_distance(R2, R0) < hinge_distance(R1, R0)
    assert preference_strength_distance(R3, R0) == pytest.approx(0.0, abs=1e-20)  # same gaps


def test_hinge_and_preference_by_hand():
    initial = [3.0, 2.0, 1.0]
    scores = [1.0, 2.0, 0.0]  # pairs (0,1) reversed by 1; (0,2), (1,2) kept by 1 and 2
    assert hinge_distance(scores, initial) == 1.0
    assert hinge_distance(scores, initial, margin=1.5) == 2.5**2 + 0.5**2 + 0.0
    # gaps ratio: (0,1): -1/1, (0,2): 1/2, (1,2): 2/1
    assert_allclose(preference_strength_distance(scores, initial), 4 + 0.25 + 1)


def test_average_precision_by_hand():
    assert_allclose(average_precision([4, 3, 2, 1], [0, 1, 0, 1]), (1 / 2 + 2 / 4) / 2)
    assert_allclose(average_precision([4, 3, 2, 1], [0, 1, 0, 1], n=2), (1 / 2) / 2)
    assert_allclose(average_precision([4, 3, 2, 1], [0, 1, 0, 1], n=2, normaliser="truncated"), (1 / 2) / 2)
    assert_allclose(average_precision([4, 3, 2, 1], [1, 0, 0, 1], n=1, normaliser="truncated"), 1.0)
    assert average_precision([1, 2], [0, 0]) == 0.0


def test_average_precision_matches_sklearn_without_ties(rng):
    from sklearn.metrics import average_precision_score

    for _ in range(20):
        scores, relevance = rng.normal(size=50), rng.random(50) < 0.3
        if relevance.any():
            assert_allclose(average_precision(scores, relevance), average_precision_score(relevance, scores))


def test_ties_never_flatter():
    # A constant list: the relevant item is placed after the irrelevant ones.
    assert_allclose(average_precision([1, 1, 1, 1], [1, 0, 0, 0]), 1 / 4)


def test_mean_average_precision_over_groups():
    scores = [3, 2, 1, 3, 2, 1]
    relevance = [1, 0, 0, 0, 0, 1]
    assert_allclose(mean_average_precision(scores, relevance, [7, 7, 7, 9, 9, 9]), (1 + 1 / 3) / 2)


def test_ranking_metric_errors():
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        average_precision([1, 2, 3], [1, 0])
    with pytest.raises(ValueError, match="normaliser must be"):
        average_precision([1, 2], [1, 0], normaliser="all")
    with pytest.raises(ValueError, match=r"n must be >= 1; got n=0"):
        average_precision([1, 2], [1, 0], n=0)
