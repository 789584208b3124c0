"""Finiteness (skqbnorm._core._finite): the fast test, and errors that name the first
NaN, infinity or overflowing product."""

import numpy as np
import pytest

from skqbnorm._core import (
    _finite,
    all_finite,
    check_finite_block,
    embedding_products,
    largest_norm,
)


def test_embedding_products_name_the_first_non_finite_entry():
    queries = np.ones((4, 3))
    queries[1, 2] = np.nan
    queries[3, 0] = np.inf
    with pytest.raises(ValueError, match=r"embedding 6, dimension 2 is nan"):
        embedding_products(queries, np.ones((3, 2)), slice(5, 9), "querybank", "dot")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_vouched_for_by_the_norms_cannot_overflow(rng, dtype):
    # Parallel rows whose norms multiply to just under a quarter of the largest float:
    # the bound holds, and the products it vouches for are finite.
    largest = np.finfo(dtype).max
    direction = np.abs(rng.normal(size=(1, 64)))
    direction /= np.linalg.norm(direction)
    queries = (direction * np.sqrt(largest / 4.1)).astype(dtype)
    gallery_t = queries.T.copy()
    norm = largest_norm(gallery_t, axis=0)
    assert _finite.products_stay_finite(queries, norm, dtype)
    assert np.isfinite(embedding_products(queries, gallery_t, slice(0, 1), "querybank", "dot",
                                          gallery_norm=norm)).all()
    # Twice as long: the bound no longer vouches, and the products themselves are tested.
    assert not _finite.products_stay_finite(2 * queries, norm, dtype)
    with pytest.raises(ValueError, match=r"row 0 to gallery item 0 overflows"):
        embedding_products(8 * queries, gallery_t, slice(0, 1), "querybank", "dot", gallery_norm=norm)
    nan = queries.copy()
    nan[0, 3] = np.nan
    assert not _finite.products_stay_finite(nan, norm, dtype)
    with pytest.raises(ValueError, match=r"embedding 0, dimension 3 is nan"):
        embedding_products(nan, gallery_t, slice(0, 1), "querybank", "dot", gallery_norm=norm)
    assert not _finite.products_stay_finite(queries, float("nan"), dtype)
    assert not _finite.products_stay_finite(queries, None, dtype)


def test_all_finite_falls_back_when_the_squares_overflow():
    huge = np.full((3, 4), 1e200)  # finite, but the sum of squares is inf
    assert all_finite(huge) and all_finite(np.full((2, 2), 3e38, dtype=np.float32))
    check_finite_block(huge, slice(0, 3))  # no error
    for bad in (np.nan, np.inf, -np.inf):
        broken = huge.copy()
        broken[2, 1] = bad
        assert not all_finite(broken)
        with pytest.raises(ValueError, match=r"row 2 to gallery item 1 is"):
            check_finite_block(broken, slice(0, 3))
    assert not all_finite(np.array([1.0, np.nan]))  # NaN without overflow too
