"""Centering (DN, weighted Centering): the bank-mean bias, its default and its weight."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skqbnorm import (
    Centering,
)

import reference as ref
from helpers import sims_pair_with_hubs as sims_pair


def test_dn_subtracts_half_the_mean_bank_embedding(rng):
    # DN as released: the query embedding less half the bank's mean embedding.
    bank, gallery, queries = (rng.normal(size=(n, 8)) for n in (70, 30, 12))
    dn = Centering(alpha=0.5, metric="dot").fit(bank, gallery=gallery)
    expected = (queries - 0.5 * bank.mean(axis=0)) @ gallery.T
    assert_allclose(dn.transform(dn.similarities(queries)), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_centering_from_cosine_embeddings_is_the_mean_of_float64_products(rng, dtype):
    # The fit reads the unit bank rows, not their products (see ColumnMean): the mean
    # similarity to float64 accuracy, the same for every budget and job count.
    bank, gallery = (rng.normal(size=(n, 16)).astype(dtype) for n in (600, 90))
    units = [x.astype(np.float64) / np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True)
             for x in (bank, gallery)]
    fitted = [Centering(working_memory=memory, n_jobs=n_jobs).fit(bank, gallery=gallery).bank_mean_
              for memory, n_jobs in [(None, None), (0.01, 1), (0.01, 2)]]
    tolerance = 1e-6 if dtype == np.float32 else 1e-14
    assert_allclose(fitted[0], (units[0] @ units[1].T).mean(axis=0), rtol=0, atol=tolerance)
    for other in fitted[1:]:
        assert_array_equal(other, fitted[0])


def test_centering_default_is_unchanged(rng):
    queries, bank = sims_pair(rng)
    plain = Centering().fit(bank).transform(queries)
    assert Centering().alpha == 1.0
    assert_array_equal(plain, Centering(alpha=1.0).fit(bank).transform(queries))
    assert_allclose(plain, ref.centering(queries, bank), rtol=1e-12, atol=1e-12)
    assert_allclose(
        Centering(alpha=0.0).fit(bank).transform(queries), queries, rtol=0, atol=0
    )


def test_centering_alpha_must_be_non_negative():
    bank = np.array([[0.9, 0.1], [0.7, 0.3]])
    with pytest.raises(ValueError, match="'alpha' parameter"):
        Centering(alpha=-0.5).fit(bank)
    assert_allclose(Centering(alpha=0.0).fit(bank).transform([[0.8, 0.4]]), [[0.8, 0.4]])
