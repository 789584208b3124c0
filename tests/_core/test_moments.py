"""Means and moments (skqbnorm._core._moments) against exact fractions and values by hand."""

from fractions import Fraction

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skqbnorm._core import excess_over_mean, finite_mean, moments


def test_moments_by_hand():
    # float32 values: mean 2.5, population std sqrt(1.25), exactly as float64.
    mean, std = moments(np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32), axis=1)
    assert mean.tolist() == [2.5]
    assert_allclose(std, [np.sqrt(1.25)], rtol=1e-15)
    # float64 values whose differences overflow: scaled first.
    mean, std = moments(np.array([[1.5e308, -1.5e308], [3.0, 5.0]]), axis=1)
    assert mean.tolist() == [0.0, 4.0]
    assert std.tolist() == [1.5e308, 1.0]
    # The scale is set by the largest magnitude, of either sign.
    mean, std = moments(np.array([[1e308, -1e-300], [-1e308, 1e-300]]), axis=1)
    assert_allclose(mean, [5e307, -5e307], rtol=1e-15)
    assert_allclose(std, [5e307, 5e307], rtol=1e-15)


def test_moments_pivot_on_the_first_entry():
    # The two passes run about the first entry: here that gives the correctly rounded
    # mean (exact rational mean, rounded once); about the last entry it is 1 ulp low.
    values = [3.45584192064786, 8.216181435011583, 3.304370761833871]
    exact = float(sum(map(Fraction, values)) / 3)
    mean, _ = moments(np.array([values]), axis=1)
    assert mean.tolist() == [exact] == [4.992131372497772]


@pytest.mark.parametrize("scale", [1.0, 1e-300, 1e300, 1.7e308])
def test_finite_mean_equals_the_exact_mean_at_any_scale(scale):
    values = np.array([[1.0, 2.0, 3.0, 6.0], [1.0, 1.0, 1.0, 1.0], [0.5, 0.25, 0.75, 1.0]]).T
    values = values / values.max() * scale
    exact = [float(sum(Fraction(v) for v in column) / len(column)) for column in values.T]
    assert_allclose(finite_mean(values, axis=0), exact, rtol=4e-16)


def test_excess_over_mean_of_equal_values_is_exactly_zero():
    values = np.full(7, 0.1)  # their float64 mean is one ulp off 0.1
    mean, excess = excess_over_mean(values)
    assert mean == 0.1 and not excess.any()
    mean, excess = excess_over_mean(np.array([1.0, 2.0, 6.0]))
    assert mean == 3.0
    assert_array_equal(excess, [-2.0, -1.0, 3.0])
