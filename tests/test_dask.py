"""Dask arrays in and out, on a dask.distributed LocalCluster, and joblib's dask backend."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("dask.distributed")

from joblib import parallel_config

import skqbnorm._core._trees
from skqbnorm import (
    CSLS,
    Centering,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    catalogue,
)

NORMALIZERS = [InvertedSoftmax(beta=5.0), DynamicInvertedSoftmax(beta=5.0, k=2), CSLS(k=3), GloballyCorrected(), Centering()]
#: Every other class of the catalogue, at its defaults but for at most 3 iterations (a
#: registered method joins them).
OTHER_NORMALIZERS = [
    cls(**({"n_iter": 3} if "n_iter" in cls().get_params() else {}))
    for cls in catalogue.normalizers() if cls not in {type(n) for n in NORMALIZERS}
]


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


@pytest.fixture
def data(rng):
    bank = rng.normal(size=(400, 50)).astype(np.float32)
    bank[:, :3] += 1.0
    return rng.normal(size=(90, 50)).astype(np.float32), bank


@pytest.mark.slow
@pytest.mark.parametrize("estimator", NORMALIZERS, ids=repr)
def test_dask_fit_and_lazy_transform_match_numpy(client, data, estimator):
    queries, bank = data
    reference = clone(estimator).fit(bank)
    fitted = clone(estimator).fit(da.from_array(bank, chunks=(64, 20)))
    assert fitted.n_features_in_ == 50 and fitted.n_bank_ == 400
    lazy = fitted.transform(da.from_array(queries, chunks=(32, 16)))
    assert isinstance(lazy, da.Array)
    assert lazy.chunks == ((32, 32, 26), (16, 16, 16, 2)) and lazy.dtype == np.float32
    out = lazy.compute()
    assert out.dtype == np.float32
    assert_allclose(out, reference.transform(queries), rtol=1e-5, atol=1e-5)
    assert_array_equal(out.argmax(axis=1), reference.transform(queries).argmax(axis=1))


@pytest.mark.slow
def test_dask_embedding_mode(client, rng):
    bank, gallery, queries = rng.normal(size=(300, 8)), rng.normal(size=(40, 8)), rng.normal(size=(20, 8))
    reference = DynamicInvertedSoftmax().fit(bank, gallery=gallery)
    fitted = DynamicInvertedSoftmax().fit(da.from_array(bank, chunks=(70, 8)), gallery=gallery)
    assert_array_equal(fitted.activated_, reference.activated_)
    assert_array_equal(fitted.bank_soft_max_, reference.bank_soft_max_)
    sims = reference.similarities(queries)
    assert_allclose(fitted.transform(sims), reference.transform(sims))


FITTED_ARRAYS = ("bank_soft_max_", "activated_", "bank_neighborhood_", "sorted_bank_", "bank_mean_")


@pytest.mark.slow
@pytest.mark.parametrize("estimator", NORMALIZERS, ids=repr)
def test_dask_embeddings_of_a_narrower_dtype_meet_the_gallery_in_its_dtype(client, rng, estimator):
    # A float32 bank and a float64 gallery: NumPy computes the products in float64,
    # and so must the dask blocks (they computed them in float32).
    bank = rng.normal(size=(300, 8)).astype(np.float32)
    gallery, queries = rng.normal(size=(40, 8)), rng.normal(size=(20, 8))
    reference = clone(estimator).fit(bank, gallery=gallery)
    fitted = clone(estimator).fit(da.from_array(bank, chunks=(70, 8)), gallery=gallery)
    for name in FITTED_ARRAYS:
        if hasattr(reference, name):
            assert getattr(fitted, name).dtype == getattr(reference, name).dtype
            assert_array_equal(getattr(fitted, name), getattr(reference, name))
    sims = reference.similarities(queries)
    assert_array_equal(fitted.transform(sims), reference.transform(sims))


@pytest.mark.slow
@pytest.mark.parametrize("estimator", NORMALIZERS, ids=repr)
def test_dask_fit_is_bitwise_the_numpy_fit(client, rng, monkeypatch, estimator):
    # Tied similarities, and leaves of 4 rows that the dask chunks (33 rows) cut.
    monkeypatch.setattr(skqbnorm._core._trees, "MAX_LEAF_ROWS", 4)
    bank = np.round(rng.normal(size=(301, 40)), 2)
    bank[:, :3] += 1.0
    queries = np.round(rng.normal(size=(50, 40)), 2)
    reference = clone(estimator).fit(bank)
    for chunks in ((33, 40), (301, 7)):
        fitted = clone(estimator).fit(da.from_array(bank, chunks=chunks))
        for name in FITTED_ARRAYS:
            if hasattr(reference, name):
                assert_array_equal(getattr(fitted, name), getattr(reference, name))
        assert_array_equal(fitted.transform(da.from_array(queries, chunks=(20, 40))).compute(),
                           reference.transform(queries))


@pytest.mark.slow
def test_dask_bad_input_raises_at_compute(client, data):
    queries, bank = data
    broken = bank.copy()
    broken[123, 7] = np.nan
    with pytest.raises(ValueError, match="querybank row 123 to gallery item 7"):
        InvertedSoftmax().fit(da.from_array(broken, chunks=(50, 50)))
    fitted = InvertedSoftmax().fit(bank)
    with pytest.raises(ValueError, match=r"X has shape \(90, 49\)"):
        fitted.transform(da.from_array(queries[:, :49]))
    with pytest.raises(ValueError, match="k=3 is larger than the querybank"):
        CSLS(k=3).fit(da.from_array(bank[:2]))


@pytest.mark.parametrize("metric", ["cosine", "dot"])
@pytest.mark.parametrize("make", [InvertedSoftmax, Centering, lambda **kw: CSLS(k=3, **kw)],
                         ids=["products", "bank rows", "bank-row top k"])
def test_a_dask_bank_names_its_bad_embedding(rng, make, metric):
    # Dask banks are not checked whole at fit's entry: the row that a task prepares
    # (for a product, or for a fit that reads the bank rows) is named, as NumPy's is.
    bank, gallery = rng.normal(size=(300, 8)), rng.normal(size=(20, 8))
    bank[123, 5] = np.inf
    for chunks in [(70, 8), (300, 8)]:
        with pytest.raises(ValueError, match=r"querybank contains NaN or infinity: querybank "
                                             r"embedding 123, dimension 5 is inf"):
            make(metric=metric).fit(da.from_array(bank, chunks=chunks), gallery=gallery)


@pytest.mark.slow
@pytest.mark.parametrize("estimator", NORMALIZERS, ids=repr)
def test_joblib_dask_backend_runs_the_chunked_loops(client, data, estimator):
    queries, bank = data
    reference = clone(estimator).fit(bank)
    with parallel_config(backend="dask"):
        fitted = clone(estimator).set_params(n_jobs=3, working_memory=0.01).fit(bank)
        out = fitted.transform(queries)
    assert_allclose(out, reference.transform(queries), rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("estimator", OTHER_NORMALIZERS, ids=repr)
def test_every_other_catalogue_normalizer_fits_a_dask_bank_as_numpy(client, rng, estimator):
    """The same scores, bitwise, from a dask querybank cut into chunks that split leaves."""
    bank = np.round(rng.normal(size=(301, 40)), 2) / 4
    queries = np.round(rng.normal(size=(50, 40)), 2) / 4
    reference = clone(estimator).fit(bank)
    fitted = clone(estimator).fit(da.from_array(bank, chunks=(33, 40)))
    assert fitted.n_bank_ == 301
    assert_array_equal(fitted.transform(da.from_array(queries, chunks=(20, 40))).compute(),
                       reference.transform(queries))


def test_a_dask_querybank_of_one_row_fits_and_one_of_none_is_refused():
    da = pytest.importorskip("dask.array")
    # Centering by hand: the bank mean of a single row is that row.
    model = Centering().fit(da.from_array(np.array([[1.0, 2.0]])))
    assert_array_equal(model.transform(np.array([[3.0, 5.0]])), [[2.0, 3.0]])
    with pytest.raises(ValueError, match="0 sample"):
        Centering().fit(da.from_array(np.zeros((0, 2))))


def test_a_float64_dask_querybank_keeps_float64_precision():
    da = pytest.importorskip("dask.array")
    # The bank mean of 1 and 1 + 2^-40 is 1 + 2^-41: lost in float32, exact in float64.
    bank = da.from_array(np.array([[1.0], [1.0 + 2.0**-40]]))
    assert Centering().fit(bank).transform(np.array([[1.0]]))[0, 0] == -(2.0**-41)
