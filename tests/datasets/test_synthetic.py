"""Synthetic similarities with planted hubs (skqbnorm.datasets._synthetic) against the
documented model, redrawn here from the same random stream."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skqbnorm.datasets import make_hubness_sims


def test_the_similarities_follow_the_documented_model():
    # scale * (sigma_j * z + signal * [j is correct]), sigma_j log-normal: redrawn here
    sims, gt, bank = make_hubness_sims(7, 5, 4, hub_spread=0.8, signal=2.0, scale=0.5,
                                       random_state=3)
    rng = np.random.RandomState(3)
    spread = rng.lognormal(0.0, 0.8, size=5)
    expected = []
    for n in (7, 4):
        rows_gt = rng.randint(0, 5, size=n)
        rows = rng.standard_normal((n, 5)) * spread
        rows[np.arange(n), rows_gt] += 2.0
        expected.append((0.5 * rows, rows_gt))
    assert_allclose(sims, expected[0][0], rtol=1e-15)
    assert_array_equal(gt, expected[0][1])
    assert_allclose(bank, expected[1][0], rtol=1e-15)


def test_no_spread_plants_no_hubs_and_the_dtype_is_kept():
    sims, gt, bank = make_hubness_sims(400, 6, 0, hub_spread=0.0, signal=0.0, scale=1.0,
                                       random_state=0, dtype=np.float32)
    assert sims.dtype == bank.dtype == np.float32 and bank.shape == (0, 6)
    # every column standard normal: sample standard deviations near 1 (400 draws each)
    assert_allclose(sims.std(axis=0), 1.0, atol=0.12)
    assert gt.min() >= 0 and gt.max() < 6


@pytest.mark.parametrize("random_state", [0, 1])
def test_a_seed_gives_the_same_draws(random_state):
    first, second = (make_hubness_sims(5, 4, 3, random_state=random_state) for _ in range(2))
    for a, b in zip(first, second):
        assert_array_equal(a, b)
