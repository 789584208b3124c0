"""The normalisers' shared template (fit, transform, embedding mode, chunking) against
the dense reference implementations of SPEC, over several normalisers at once."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

from skqbnorm import CSLS, Centering, DynamicInvertedSoftmax, GloballyCorrected, InvertedSoftmax

import reference as ref
from helpers import sims_pair, tolerance

CASES = [
    (InvertedSoftmax(beta=7.0), lambda q, b: ref.inverted_softmax(q, b, 7.0)),
    (DynamicInvertedSoftmax(beta=7.0, k=1), lambda q, b: ref.dynamic_inverted_softmax(q, b, 7.0, 1)),
    (DynamicInvertedSoftmax(beta=3.0, k=3), lambda q, b: ref.dynamic_inverted_softmax(q, b, 3.0, 3)),
    (CSLS(k=5), lambda q, b: ref.csls(q, b, 5)),
    (Centering(), ref.centering),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("estimator, reference", CASES, ids=lambda c: repr(c)[:40])
def test_matches_reference(rng, estimator, reference, dtype):
    queries, bank = sims_pair(rng, dtype=dtype)
    out = clone(estimator).fit(bank).transform(queries)
    assert out.dtype == dtype
    expected = reference(queries.astype(np.float64), bank.astype(np.float64))
    assert_allclose(out, expected, **tolerance(dtype, np.abs(expected).max()))


@pytest.mark.parametrize("estimator, reference", CASES, ids=lambda c: repr(c)[:40])
def test_memmap_and_chunking_do_not_change_results(rng, tmp_path, estimator, reference):
    queries, bank = sims_pair(rng, n_bank=333)
    path = tmp_path / "bank.npy"
    np.save(path, bank)
    bank_mm = np.load(path, mmap_mode="r")
    whole = clone(estimator).fit(bank).transform(queries)
    # A budget of ~one row per block exercises every merge across blocks.
    tiny = clone(estimator).set_params(working_memory=1e-4).fit(bank_mm).transform(queries)
    assert_allclose(tiny, whole, rtol=1e-12, atol=1e-12)


def test_embedding_mode_equals_precomputed(rng):
    bank_emb = rng.normal(size=(80, 16))
    gallery_emb = rng.normal(size=(30, 16))
    query_emb = rng.normal(size=(10, 16))

    def unit(a):
        return a / np.linalg.norm(a, axis=1, keepdims=True)

    for metric, prepare in (("cosine", unit), ("dot", lambda a: a)):
        bank_sims = prepare(bank_emb) @ prepare(gallery_emb).T
        query_sims = prepare(query_emb) @ prepare(gallery_emb).T
        for estimator in (InvertedSoftmax(), DynamicInvertedSoftmax(k=2), CSLS(k=3), Centering(), GloballyCorrected()):
            embedded = clone(estimator).set_params(metric=metric).fit(bank_emb, gallery=gallery_emb)
            assert embedded.n_features_in_ == 30
            assert_allclose(embedded.similarities(query_emb), query_sims, rtol=1e-12, atol=1e-12)
            precomputed = clone(estimator).fit(bank_sims)
            assert_allclose(
                embedded.transform(embedded.similarities(query_emb)),
                precomputed.transform(query_sims),
                rtol=1e-10, atol=1e-10,
            )
            assert_allclose(
                embedded.fit_transform(bank_emb, gallery=gallery_emb),
                precomputed.transform(bank_sims), rtol=1e-10, atol=1e-10,
            )


@pytest.mark.parametrize("estimator", [e for e, _ in CASES] + [GloballyCorrected()], ids=repr)
def test_inputs_are_never_modified(rng, estimator):
    queries, bank = sims_pair(rng)
    queries_copy, bank_copy = queries.copy(), bank.copy()
    fitted = clone(estimator).fit(bank)
    fitted.transform(queries)
    fitted.fit_transform(bank)
    assert_array_equal(queries, queries_copy)
    assert_array_equal(bank, bank_copy)


@pytest.mark.parametrize("estimator", [e for e, _ in CASES] + [GloballyCorrected()], ids=repr)
def test_pickle_and_clone_round_trip(rng, estimator):
    queries, bank = sims_pair(rng)
    fitted = clone(estimator).fit(bank)
    restored = pickle.loads(pickle.dumps(fitted))
    assert_array_equal(restored.transform(queries), fitted.transform(queries))
    assert clone(fitted).get_params() == fitted.get_params()
    assert "<pre>" in fitted._repr_html_() or "sk-" in fitted._repr_html_()


def test_transform_is_row_independent(rng):
    # A query's scores never depend on which other queries share its batch.
    queries, bank = sims_pair(rng, n_queries=50)
    for estimator in (DynamicInvertedSoftmax(k=2), CSLS(k=4), GloballyCorrected()):
        fitted = estimator.fit(bank)
        full = fitted.transform(queries)
        assert_array_equal(fitted.transform(queries[17:18]), full[17:18])
        assert_array_equal(fitted.set_params(working_memory=1e-4).transform(queries), full)
