"""Globally Corrected retrieval: rankings against the reference, ties, the bisection over
the sorted bank and scores written out by hand."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from skqbnorm import GloballyCorrected

import reference as ref
from helpers import GC_BANK, sims_pair


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gc_ranking_matches_reference(rng, dtype):
    queries, bank = sims_pair(rng, n_bank=37, dtype=dtype)
    out = GloballyCorrected().fit(bank).transform(queries)
    assert out.dtype == dtype
    assert_array_equal(ref.dense_rank_rows(out), ref.gc_order_keys(queries, bank))


def test_gc_with_many_ties(rng):
    # Coarse similarities: ranks tie within rows, similarities tie with the bank.
    queries = rng.integers(0, 4, size=(30, 10)).astype(float)
    bank = rng.integers(0, 4, size=(64, 10)).astype(float)
    gc = GloballyCorrected().fit(bank)
    assert_array_equal(-np.floor(gc.transform(queries)), ref.gc_rank(queries, bank))
    assert_array_equal(ref.dense_rank_rows(gc.transform(queries)), ref.gc_order_keys(queries, bank))


@pytest.mark.parametrize("n_bank", [1, 2, 3, 8, 100])
def test_gc_bisection_for_every_bank_size(rng, n_bank):
    queries, bank = sims_pair(rng, n_bank=n_bank)
    queries[:, :3] = bank[0, :3]  # exact ties with a bank entry
    gc = GloballyCorrected().fit(bank)
    assert_array_equal(-np.floor(gc.transform(queries)), ref.gc_rank(queries, bank))


def test_gc_keeps_sorted_bank_column_major(rng):
    # Column-major lets every transform search the bank without copying it.
    _, bank = sims_pair(rng)
    sorted_bank = GloballyCorrected().fit(bank).sorted_bank_
    assert sorted_bank.flags.f_contiguous
    assert_array_equal(sorted_bank, np.sort(bank, axis=0))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # Ranks (bank entries above the query) 2 and 1; the tie-break u = 0.5 * (s -
        # min) / (max - min) is 0.5 on item 0 and 0 on item 1.
        ([0.75, 0.25], [-2 + 0.5, -1.0]),
        # A constant row has nothing to break: u = 0, the scores are exactly -rank.
        ([0.5, 0.5], [-3.0, 0.0]),
        ([0.95, 0.95], [0.0, 0.0]),
        # Spread beyond float64 (1e308 - -1e308): still u = 0.5 and 0.
        ([1e308, -1e308], [0.5, -3.0]),
    ],
)
def test_globally_corrected_scores_by_hand(query, expected):
    scores = GloballyCorrected().fit(GC_BANK).transform([query])
    assert_array_equal(scores, [expected])
