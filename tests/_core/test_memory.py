"""Memory budgets (skqbnorm._core._memory): rows per chunk and power-of-two row counts
against values by hand and a plain search."""

import pytest

from skqbnorm._core import DEFAULT_WORKING_MEMORY, rows_per_chunk
from skqbnorm._core._memory import power_of_two_rows


@pytest.mark.parametrize(
    "args, expected",
    [
        ((1024, 8, 1, 2), 64),  # 1 MiB / (1024 * 8 B * 2 buffers)
        ((1024, 8, None, 2), 1024),  # the default 16 MiB
        ((1, 8, 1, 1), 131072),  # 1 MiB / 8 B
        ((0, 8, 1, 1), 131072),  # no column counts as one
        ((10**9, 8, 1, 2), 1),  # nothing fits: still one row
    ],
)
def test_rows_per_chunk_by_hand(args, expected):
    assert rows_per_chunk(*args) == expected


@pytest.mark.parametrize(("n_columns", "itemsize", "memory", "most"), [
    (1000, 8, 1, 10**6), (1000, 4, 1, 100), (3, 8, 16, 2048), (10**9, 8, 1, 2048),
    (0, 8, 1, 5), (1 << 17, 8, 1, 4096),
])
def test_power_of_two_rows_is_the_largest_power_of_two_that_fits(n_columns, itemsize, memory,
                                                                  most):
    # by search: the largest power of two at most `most` whose rows fit, at least one row
    fits = [2**p for p in range(40) if 2**p <= most
            and 2**p * max(n_columns, 1) * itemsize <= memory * 2**20]
    assert power_of_two_rows(n_columns, itemsize, memory, most) == max(fits, default=1)


def test_rows_per_chunk_uses_the_default_budget_for_none():
    assert rows_per_chunk(1024, 8) == rows_per_chunk(1024, 8, DEFAULT_WORKING_MEMORY)
    assert rows_per_chunk(1024, 8) == DEFAULT_WORKING_MEMORY * 2**20 // (1024 * 8 * 2)
