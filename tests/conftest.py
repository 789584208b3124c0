"""Fixtures shared by the whole suite."""

import os

# scikit-learn's array API checks (check_array_api_input) run only with SciPy's array
# API support on, which SciPy reads once, at its first import: set here, before any.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np
import pytest

import skqbnorm._core._trees
from skqbnorm.datasets import make_hubness_sims


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(params=["small leaves", "default leaves"])
def leaves(request, monkeypatch):
    """Leaves of 4 rows make every split cut the reduction trees in many places."""
    if request.param == "small leaves":
        monkeypatch.setattr(skqbnorm._core._trees, "MAX_LEAF_ROWS", 4)


@pytest.fixture
def bank(rng):
    """A small precomputed querybank: 20 bank queries over a 6-item gallery."""
    return rng.normal(size=(20, 6))


@pytest.fixture(scope="module")
def hubness_sims():
    """Synthetic similarities with planted hubs and their ground truth."""
    sims, gt, _ = make_hubness_sims(900, 150, 0, random_state=0)
    return sims, gt
