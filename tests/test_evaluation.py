"""The evaluation behind compare and ``skqbnorm evaluate`` (skqbnorm._evaluation): its
table cells, the near-chance warning and the diagonal ground truth, by hand."""

import numpy as np
import pytest

from skqbnorm._evaluation import (
    NEAR_CHANCE,
    diagonal_gt,
    header_cells,
    near_chance,
    rounded,
    row_cells,
)
from skqbnorm.catalogue import METHODS


def test_rounded_keeps_twelve_significant_digits_and_leaves_the_rest():
    assert rounded(1 / 3) == 0.333333333333
    assert rounded(123456.7890123456) == 123456.789012
    assert rounded(None) is None and rounded(7) == 7
    assert np.isnan(rounded(float("nan")))


def test_row_cells_by_hand():
    row = {"R@1": 12.345, "R@5": 50.0, "R@10": 75.0, "MdR": 3.0, "MnR": 4.25,
           "skewness": 1.234, "R@1 change": 2.06, "R@1 change low": -0.5,
           "R@1 change high": 4.44, "R@1 McNemar p": 0.0123}
    assert row_cells(row) == ["12.3", "50.0", "75.0", "3.0", "4.2", "1.23", "+2.1",
                              "[-0.5, +4.4]", "0.012"]
    raw = {**row, "R@1 change": None}
    assert row_cells(raw)[-3:] == ["", "", ""]
    assert header_cells(0.9)[-3:] == ["R@1 change", "90% interval", "McNemar p"]
    assert len(header_cells()) == len(row_cells(row))


def test_near_chance_warns_only_at_most_five_times_chance():
    raw = METHODS["raw"].label
    chance = 100.0 / 50
    assert NEAR_CHANCE == 5
    assert "near chance (2% for 50" in near_chance([{"method": raw, "R@1": 5 * chance}], 50)
    assert near_chance([{"method": raw, "R@1": 5 * chance + 0.1}], 50) is None
    assert near_chance([{"method": "other", "R@1": 0.0}], 50) is None
    assert near_chance([{"method": raw, "R@1": 0.0}], 4) is None  # 5 x 25% is not below 100%


def test_diagonal_gt_needs_a_square_matrix():
    assert (diagonal_gt((3, 3), "--sims") == np.arange(3)).all()
    with pytest.raises(ValueError, match=r"--sims has shape \(3, 4\), not square"):
        diagonal_gt((3, 4), "--sims")
