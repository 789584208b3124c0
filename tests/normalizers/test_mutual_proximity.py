"""Mutual proximity, empiric and Gaussian, against fractions and values written out by
hand; its Gaussian bank term as the querybank z-norm."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

from skqbnorm import (
    MutualProximity,
    QueryBankZNorm,
)

import reference as ref
from helpers import sims_pair_with_hubs as sims_pair


def test_empiric_ranking_is_the_exact_product_of_the_fractions(rng):
    # Coarse values: fractions tie, and distinct pairs of fractions have equal
    # products. The ranking must be that of the exact rational product.
    queries = rng.integers(0, 6, size=(30, 20)).astype(float)
    bank = rng.integers(0, 6, size=(45, 20)).astype(float)
    out = MutualProximity(method="empiric").fit(bank).transform(queries)
    expected = ref.mutual_proximity_empiric(queries, bank)
    assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    numerators = np.rint(np.exp(expected) * 4 * 46 * 20)  # (2 c_g + 1) (2 c_q), integers
    assert_allclose(np.exp(expected) * 4 * 46 * 20, numerators, rtol=1e-9)
    assert_array_equal(ref.dense_rank_rows(out), ref.dense_rank_rows(numerators))


def test_empiric_fractions_by_hand():
    bank = np.array([[0.2], [0.4], [0.4], [0.6]])
    queries = np.array([[0.4, 0.1, 0.4, 0.9]]).T  # one gallery item; four 1-item rows
    out = MutualProximity(method="empiric").fit(bank).transform(queries)
    # P_q = 1/2 for a row of one item; P_g = (below + (ties + 1) / 2) / 5
    assert_allclose(np.exp(out[:, 0]), [(1 + 1.5) / 5 / 2, 0.5 / 5 / 2, 2.5 / 10, 4.5 / 10])
    row = np.array([[0.3, 0.1, 0.3, 0.5]])
    bank = np.zeros((1, 4))
    out = MutualProximity(method="empiric").fit(bank).transform(row)
    # P_g = 1.5 / 2 everywhere (above the bank's 0); P_q: 0.1 -> 0.5/4, 0.3 -> 2/4, 0.5 -> 3.5/4
    assert_allclose(np.exp(out[0]), 0.75 * np.array([2, 0.5, 2, 3.5]) / 4)


def test_gaussian_by_hand():
    from scipy.stats import norm

    bank = np.array([[0.0, 1.0], [2.0, 1.0]])  # item 0: mu 1, sigma 1; item 1 constant
    row = np.array([[2.0, 0.0]])  # mu_q 1, sigma_q 1
    out = MutualProximity().fit(bank).transform(row)
    expected = np.log([norm.cdf(1.0) * norm.cdf(1.0), norm.cdf(-1.0) * norm.cdf(-1.0)])
    assert_allclose(out[0], expected, rtol=1e-13)
    z = QueryBankZNorm().fit(bank)
    assert_array_equal(z.bank_std_, [1.0, 0.0])
    assert_array_equal(z.transform(row), [[1.0, -1.0]])  # sigma 0 divides as 1


def test_empiric_ties_are_exact_across_dtypes(rng):
    # A float32 bank and float64 queries: a query one float64 step away from a bank
    # value is not tied with it, though both round to the same float32.
    bank = rng.normal(size=(40, 6)).astype(np.float32)
    queries = np.repeat(bank[:3].astype(np.float64), 3, axis=0)
    queries[1::3] = np.nextafter(queries[1::3], -np.inf)
    queries[2::3] = np.nextafter(queries[2::3], np.inf)
    out = MutualProximity(method="empiric").fit(bank).transform(queries)
    assert out.dtype == np.float64
    expected = ref.mutual_proximity_empiric(queries, bank.astype(np.float64))
    assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    assert (out[0::3] < out[2::3]).all() and (out[1::3] < out[0::3]).all()


def test_gaussian_bank_term_is_the_z_norm(rng):
    from scipy.special import log_ndtr

    queries, bank = sims_pair(rng)
    mp = MutualProximity().fit(bank)
    z = QueryBankZNorm().fit(bank)
    assert_array_equal(mp.bank_mean_, z.bank_mean_)
    assert_array_equal(mp.bank_std_, z.bank_std_)
    row_z = (queries - queries.mean(axis=1, keepdims=True)) / queries.std(axis=1, keepdims=True)
    assert_allclose(mp.transform(queries), log_ndtr(z.transform(queries)) + log_ndtr(row_z))


@pytest.mark.parametrize("first, then", [("empiric", "gaussian"), ("gaussian", "empiric")])
def test_a_refit_with_the_other_method_keeps_nothing_of_the_first(rng, first, then):
    queries, bank = sims_pair(rng)
    refitted = MutualProximity(method=first).fit(bank).set_params(method=then).fit(bank)
    fresh = MutualProximity(method=then).fit(bank)
    assert set(vars(refitted)) == set(vars(fresh))  # no sorted bank left behind (O(M N))
    assert_array_equal(refitted.transform(queries), fresh.transform(queries))


@pytest.mark.parametrize("estimator", [QueryBankZNorm(), MutualProximity(method="gaussian")], ids=repr)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bank_moments_from_cosine_embeddings_are_those_of_float64_products(rng, estimator, dtype):
    # The fit reads the unit bank rows' covariance, not the products (see BankRowMoments):
    # the moments to float64 accuracy, the same for every budget and job count.
    bank, gallery = (rng.normal(size=(n, 12)).astype(dtype) for n in (500, 80))
    units = [x.astype(np.float64) / np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True)
             for x in (bank, gallery)]
    sims = units[0] @ units[1].T
    fitted = [clone(estimator).set_params(working_memory=memory, n_jobs=n_jobs).fit(bank, gallery=gallery)
              for memory, n_jobs in [(None, None), (0.01, 1), (0.01, 2)]]
    tolerance = 1e-6 if dtype == np.float32 else 1e-13
    assert_allclose(fitted[0].bank_mean_, sims.mean(axis=0), rtol=0, atol=tolerance)
    assert_allclose(fitted[0].bank_std_, sims.std(axis=0), rtol=tolerance * 10)
    for other in fitted[1:]:
        assert_array_equal(other.bank_mean_, fitted[0].bank_mean_)
        assert_array_equal(other.bank_std_, fitted[0].bank_std_)
