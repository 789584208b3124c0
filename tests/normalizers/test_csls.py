"""CSLS: the bounds on its neighbourhood size k."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skqbnorm import (
    CSLS,
)

from helpers import GC_BANK


def test_csls_accepts_k_up_to_the_gallery_and_the_bank_size():
    # CSLS = 2 s - r_G(q) - r_B(g), with r_B the mean of each column's k largest bank
    # similarities and r_G the mean of the query's k largest: here k is the gallery
    # size (first) and the bank size (second), the largest allowed.
    bank = np.array([[0.9, 0.1], [0.5, 0.3], [0.2, 0.8]])  # r_B = (0.7, 0.55)
    assert_allclose(CSLS(k=2).fit(bank).transform([[0.6, 0.4]]), [[0.0, -0.25]], atol=1e-15)
    wide = np.array([[0.9, 0.1, 0.4], [0.5, 0.3, 0.6]])  # r_B = (0.7, 0.2, 0.5)
    assert_allclose(
        CSLS(k=2).fit(wide).transform([[0.6, 0.4, 0.2]]), [[0.0, 0.1, -0.6]], atol=1e-15
    )
    with pytest.raises(ValueError, match="querybank"):
        CSLS(k=3).fit(wide)
    with pytest.raises(ValueError, match="gallery"):
        CSLS(k=3).fit(bank)


def test_csls_k_starts_at_one():
    # k = 1: r_B is each column's largest bank similarity (0.9, 0.3), r_G the query's
    # largest (0.6): 2 s - r_G - r_B.
    scores = CSLS(k=1).fit(GC_BANK).transform([[0.6, 0.4]])
    assert_allclose(scores, [[1.2 - 0.6 - 0.9, 0.8 - 0.6 - 0.3]], atol=1e-15)
    with pytest.raises(ValueError, match=r"'k' parameter"):
        CSLS(k=0).fit(GC_BANK)
