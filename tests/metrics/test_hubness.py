"""The k-occurrence and hubness measures against plain references and values written
out by hand."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import skew

from skqbnorm.metrics import (
    hubness,
    hubness_from_counts,
    k_occurrence,
)

import reference as ref
from helpers import tied_matrix


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


# -- hubness --------------------------------------------------------------------------------


def plain_skewness(counts):
    mean = sum(counts) / len(counts)
    m2 = sum((c - mean) ** 2 for c in counts) / len(counts)
    m3 = sum((c - mean) ** 3 for c in counts) / len(counts)
    return m3 / m2**1.5


def test_hub_threshold_is_exactly_twice_k():
    # k = 2, four queries: N_k = 4 = 2k is a hub, N_k = 3 is not.
    assert hubness_from_counts([4, 3, 1, 0], k=2)["hub_occurrence"] == 4 / 8
    assert hubness_from_counts([3, 3, 2, 0], k=2)["hub_occurrence"] == 0.0
    assert hubness_from_counts([2, 1, 0], k=1)["hub_occurrence"] == 2 / 3


def test_hub_threshold_through_hubness():
    # Top-1 of three queries: item 0 twice (2 = 2k, a hub), item 2 once.
    sims = np.array([[0.9, 0.1, 0.0], [0.8, 0.2, 0.1], [0.1, 0.0, 0.6]])
    measures = hubness(sims, k=1)
    assert measures["hub_occurrence"] == 2 / 3
    assert measures["antihub_occurrence"] == 1 / 3
    assert measures["skewness"] == pytest.approx(plain_skewness([2, 0, 1]))


def test_constant_counts_have_zero_skewness():
    for counts in ([3, 3, 3, 3], [7] * 13, [1]):
        measures = hubness_from_counts(counts, k=1)
        assert measures["skewness"] == 0.0
        assert measures["gini"] == 0.0 and measures["robin_hood"] == 0.0
    assert hubness_from_counts([1, 1, 1, 2], k=1)["skewness"] == pytest.approx(
        plain_skewness([1, 1, 1, 2])
    )


def test_hubness_measures_written_out():
    measures = hubness_from_counts([4, 2, 0, 0], k=1)
    assert measures["robin_hood"] == pytest.approx(0.5 * (2.5 + 0.5 + 1.5 + 1.5) / 6)
    pairs = sum(abs(a - b) for a in (4, 2, 0, 0) for b in (4, 2, 0, 0))
    assert measures["gini"] == pytest.approx(pairs / (2 * 4**2 * 1.5))
    assert measures["skewness"] == pytest.approx(plain_skewness([4, 2, 0, 0]))


def test_huge_counts_stay_finite():
    measures = hubness_from_counts([1e300, 0.0, 0.0, 3e300], k=1)
    assert all(np.isfinite(value) for value in measures.values())
    assert measures["skewness"] == pytest.approx(plain_skewness([1.0, 0.0, 0.0, 3.0]))


@pytest.mark.parametrize(
    "counts, message",
    [
        ([0, 0, 0], r"all zero \(shape \(3,\)\)"),
        ([2, -1, 0], r"counts\[1\] is -1.0"),
        ([2, 1.5, 0], r"counts\[1\] is 1.5"),
        ([2, np.nan], r"counts must be finite; counts\[1\] is nan"),
        ([[1, 2]], r"1-D array; got shape \(1, 2\)"),
        ([], r"got shape \(0,\)"),
    ],
)
def test_bad_counts_are_refused(counts, message):
    with pytest.raises(ValueError, match=message):
        hubness_from_counts(counts, k=1)


def test_default_neighborhood_is_ten(rng):
    sims = tied_matrix(rng, (15, 12))
    assert_array_equal(k_occurrence(sims), k_occurrence(sims, 10))
    assert hubness(sims) == hubness(sims, 10)
    assert k_occurrence(sims).sum() == 15 * 10


@pytest.mark.parametrize("function", [hubness, k_occurrence])
def test_hubness_k_must_be_an_integer(function):
    sims = np.eye(4)
    for k in (2.5, True, 2.0, "2"):
        with pytest.raises(TypeError, match=rf"k must be an integer; got k={k!r}"):
            function(sims, k=k)
    for k in (0, 5):
        message = rf"k must be in \[1, 4\] for sims of shape \(4, 4\); got k={k}"
        with pytest.raises(ValueError, match=message):
            function(sims, k=k)
    function(sims, k=np.int64(2))
    function(sims, k=4)  # k = n_gallery is the largest valid k
    with pytest.raises(TypeError, match="k must be an integer"):
        hubness_from_counts([1, 1], k=1.0)
    with pytest.raises(ValueError, match="k must be >= 1"):
        hubness_from_counts([1, 1], k=0)


# ------------------------------------------------------------------------- hubness


def test_hub_threshold_is_twice_k():
    # k=2: hubs are items with N_k >= 4. Counts 4 (exactly 2k) and 3 (between k and 2k).
    measures = hubness_from_counts([4, 3, 1, 0], k=2)
    assert measures["hub_occurrence"] == pytest.approx(4 / 8)
    assert hubness_from_counts([3, 3, 2, 0], k=2)["hub_occurrence"] == 0.0
    assert hubness_from_counts([5, 3, 0, 0], k=2)["hub_occurrence"] == pytest.approx(5 / 8)


def test_hubness_measures_of_huge_counts_are_finite_and_scale_free():
    # Cubes of 3e300 overflow: the measures must still be those of (3, 1, 0, 0).
    measures = hubness_from_counts([3e300, 1e300, 0.0, 0.0], k=1)
    assert measures["skewness"] == pytest.approx(1.5 / 1.5**1.5)
    assert measures["robin_hood"] == pytest.approx(0.5)
    assert measures["gini"] == pytest.approx(10 / 16)
    assert measures["hub_occurrence"] == 1.0  # both are >= 2
    assert hubness_from_counts([2e300, 2e300], k=1)["skewness"] == 0.0


@pytest.mark.parametrize("counts", [[-1.0, 2.0], [2.0, -1.0], [0.5, 2.0]])
def test_counts_must_be_non_negative_whole_numbers(counts):
    with pytest.raises(ValueError, match="counts"):
        hubness_from_counts(counts, k=1)


def test_hubness_from_counts_refuses_k_zero():
    with pytest.raises(ValueError, match="k must be >= 1"):
        hubness_from_counts([1, 2], k=0)


# -------------------------------------------------------------- metrics validation


def test_k_occurrence_accepts_k_equal_to_the_gallery_size():
    # k = n_gallery puts every item in every query's top k.
    assert_array_equal(k_occurrence([[0.9, 0.5, 0.1], [0.8, 0.1, 0.7]], k=3), [2, 2, 2])
