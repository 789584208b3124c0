"""Each row's top 1 and top k (skqbnorm._core._top_k) against a full stable sort,
ties to the lower index."""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skqbnorm._core import (
    ColumnTopKMean,
    RowTopKUnion,
    best_k,
    merge_top_k,
    row_top1,
    row_top_k,
    row_top_k_indices,
    take_rows,
    top_k_mask,
)
from skqbnorm._core._top_k import places_in_rows

from helpers import column_top_k_mean, stable_top_k, top_k_matrices


@pytest.mark.parametrize("k", [1, 2, 5, 10, 33, 100, 127, 128])
def test_row_top_k_indices_equals_a_stable_sort(rng, k):
    for values in top_k_matrices(rng):
        rows = values.T.copy()  # wide rows: the group bound applies
        k_rows = min(k, rows.shape[1])
        indices, top = row_top_k_indices(rows, k)
        expected_indices, expected_top = stable_top_k(rows, k_rows)
        assert_array_equal(indices, expected_indices)
        assert_array_equal(top, expected_top)
        mask = np.zeros(rows.shape, dtype=bool)
        np.put_along_axis(mask, expected_indices, True, axis=1)
        assert_array_equal(top_k_mask(rows, k_rows), mask)
        assert_array_equal(row_top_k(rows, k_rows), np.sort(expected_top, axis=1))


def test_row_top_k_indices_keeps_the_lowest_indices_among_ties():
    row = np.array([[1.0, 3.0, 3.0, 0.0, 3.0, 3.0, 2.0, 3.0] * 8])
    indices, values = row_top_k_indices(row, 6)
    assert_array_equal(indices, [[1, 2, 4, 5, 7, 9]])
    assert_array_equal(values, [[3.0] * 6])


def test_activation_set_is_the_union_of_row_top_k(rng):
    values = rng.integers(0, 4, size=(50, 400)).astype(float)
    union = RowTopKUnion(400, 12)
    for rows in np.array_split(values, 7):
        union.update(rows, None)
    expected = np.zeros(400, dtype=bool)
    expected[stable_top_k(values, 12)[0].ravel()] = True
    assert_array_equal(union.mask, expected)


@pytest.mark.parametrize("k", [np.uint8(2), np.int16(3)])
def test_numpy_integer_k_does_not_wrap_around(rng, k):
    values = rng.normal(size=(40, 30))
    reducer = ColumnTopKMean(k)
    for rows in np.array_split(values, 5):
        reducer.update(rows, None)
    assert_allclose(reducer.result(), column_top_k_mean(values, int(k)), rtol=1e-13)
    assert_array_equal(row_top_k_indices(values, k)[0], stable_top_k(values, int(k))[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_top1_of_column_chunks_is_that_of_whole_rows(rng, dtype):
    # Few distinct values: most rows have ties, many across chunks (the lowest column wins).
    block = rng.integers(0, 4, size=(50, 37)).astype(dtype)
    block[3] = 7.0  # a constant row: column 0
    expected = block.argmax(axis=1)
    values, columns = row_top1(block)
    assert_array_equal(columns, expected)
    assert_array_equal(values, block.max(axis=1))
    assert values.dtype == dtype
    for cuts in ([0, 37], [0, 1, 36, 37], [0, 5, 6, 20, 37]):
        state = None
        for start, stop in itertools.pairwise(cuts):
            state = row_top1(block[:, start:stop], start, state)
        assert_array_equal(state[1], expected)
        assert_array_equal(state[0], block.max(axis=1))
    # The k = 1 selection is the same search.
    indices, best = row_top_k_indices(block, 1)
    assert_array_equal(indices[:, 0], expected)
    assert_array_equal(best[:, 0], block.max(axis=1))


def test_top_k_mask_ties_at_the_kth_value():
    block = np.array(
        [[1.0, 3.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0, 2.0], [5.0, 4.0, 4.0, 9.0, 4.0]]
    )
    assert_array_equal(
        top_k_mask(block, 2),
        [[0, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 0, 0, 1, 0]],
    )
    assert_array_equal(
        top_k_mask(block, 3),
        [[0, 1, 1, 1, 0], [1, 1, 1, 0, 0], [1, 1, 0, 1, 0]],
    )
    assert_array_equal(top_k_mask(block, 1), [[0, 1, 0, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 1, 0]])


def test_merge_top_k_equals_a_stable_sort_of_the_whole_rows(rng):
    scores = np.round(rng.normal(size=(6, 50)), 1)  # many ties across the blocks
    best = None
    for start in range(0, 50, 9):
        best = merge_top_k(best, scores[:, start : start + 9], start, 5)
    indices, values = stable_top_k(scores, 5)
    assert_array_equal(best[0], indices)
    assert_array_equal(best[1], values)


def test_best_k_ranks_by_score_then_index_and_padding_last():
    candidates = np.array([[4, -1, 2, 7], [-1, 3, 1, -1]])
    scores = np.array([[0.5, 0.9, 0.5, 0.8], [0.2, 0.2, 0.2, 0.1]])
    indices, values = best_k(candidates, scores, 3)
    # by hand: row 0 has -1 at the top score (kept: scores decide first), then 7, then
    # the tie of 4 and 2 to the lower index; row 1's tie at 0.2 puts -1 after 1 and 3
    assert_array_equal(indices, [[-1, 7, 2], [1, 3, -1]])
    assert_array_equal(values, [[0.9, 0.8, 0.5], [0.2, 0.2, 0.2]])


def test_take_rows_of_every_kind_of_row_state():
    class Taker:
        def take(self, rows):
            return ("taken", rows)

    array, rows = np.arange(10.0), slice(2, 5)
    assert take_rows(None, rows) is None
    assert_array_equal(take_rows(array, rows), [2.0, 3.0, 4.0])
    first, second = take_rows((array, 2 * array), rows)
    assert_array_equal(first, [2.0, 3.0, 4.0]) and assert_array_equal(second, [4.0, 6.0, 8.0])
    assert take_rows(Taker(), rows) == ("taken", rows)


def test_places_in_rows_count_from_zero_in_each_row():
    rows, counts = np.array([0, 0, 0, 2, 2, 3]), np.array([3, 0, 2, 1])
    assert_array_equal(places_in_rows(rows, counts), [0, 1, 2, 0, 1, 0])
