"""hubness_from_counts at its boundaries: hand-worked skewness, thresholds and counts."""

import numpy as np
import pytest

from skqbnorm.metrics import (
    hubness_from_counts,
)


def test_hubness_measures_by_hand():
    # N_k = [3, 1, 0, 0]: mean 1, deviations (2, 0, -1, -1): m2 = 6/4, m3 = 6/4.
    measures = hubness_from_counts([3, 1, 0, 0], k=1)
    assert measures["skewness"] == pytest.approx(1.5 / 1.5**1.5)
    assert measures["antihub_occurrence"] == 0.5
    assert measures["hub_occurrence"] == pytest.approx(3 / 4)
    assert measures["robin_hood"] == pytest.approx(0.5 * 4 / 4)
    # Gini over sorted (0, 0, 1, 3) with weights (2i - n - 1) = (-3, -1, 1, 3): 10 / (4 * 4).
    assert measures["gini"] == pytest.approx(10 / 16)


def test_constant_counts_have_zero_skewness():
    assert hubness_from_counts([2, 2, 2], k=1)["skewness"] == 0.0
    # Unequal counts with a standard deviation below 1 still have a skewness: that of a
    # Bernoulli(1/4) sample, (1 - 2p) / sqrt(p (1 - p)).
    skewness = hubness_from_counts([1, 0, 0, 0], k=1)["skewness"]
    assert skewness == pytest.approx(0.5 / np.sqrt(0.25 * 0.75))
