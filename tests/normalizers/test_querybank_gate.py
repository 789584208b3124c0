"""QueryBankGate: the wrapped normaliser when the bank suits the queries, raw otherwise."""

import warnings

import numpy as np
import pytest

from skqbnorm import DynamicInvertedSoftmax, NearestNeighborNormalization, QueryBankGate
from skqbnorm.datasets import load_wordnet_revdict
from skqbnorm.metrics import QueryBankWarning, querybank_diagnostics

from helpers import strong_model_task


@pytest.fixture(scope="module")
def data():
    return load_wordnet_revdict()


@pytest.mark.slow
@pytest.mark.parametrize("template", [DynamicInvertedSoftmax(), NearestNeighborNormalization()])
def test_open_on_the_in_domain_bank_equals_the_normalizer(data, template):
    gallery = data.gallery_embeddings
    query_sims = data.query_embeddings @ gallery.T
    gate = QueryBankGate(template).fit(data.bank_embeddings, queries=data.query_embeddings,
                                       gallery=gallery)
    assert gate.open_ and not gate.diagnostics_.warnings
    expected = template.fit(data.bank_embeddings, gallery=gallery).transform(query_sims)
    np.testing.assert_array_equal(gate.transform(query_sims), expected)


def test_closed_on_the_far_domain_bank_returns_a_copy_of_the_input(data):
    query_sims = data.query_embeddings @ data.gallery_embeddings.T
    bank_sims = data.far_bank_embeddings @ data.gallery_embeddings.T
    with pytest.warns(QueryBankWarning) as record:
        gate = QueryBankGate().fit(bank_sims, queries=query_sims)
    assert any("looks out of domain" in str(w.message) for w in record)
    assert not gate.open_
    assert gate.diagnostics_ == querybank_diagnostics(bank_sims, query_sims, warn=False)
    scores = gate.transform(query_sims)
    assert scores.dtype == np.float32 and scores is not query_sims
    np.testing.assert_array_equal(scores, query_sims)
    scores[0, 0] = 5.0
    assert query_sims[0, 0] != 5.0


@pytest.mark.slow
def test_open_on_the_adversarial_bank(data):
    # It covers little of the gallery (a warning), but its queries land in the
    # neighbourhoods the queries do, and fewer than max_outlier_share of the queries
    # are far from it: the gate stays open.
    gallery = data.gallery_embeddings
    top1 = (data.bank_embeddings @ gallery.T).argmax(axis=1)
    popularity = np.bincount(top1, minlength=len(gallery))
    bank = data.bank_embeddings[np.argsort(-popularity[top1], kind="stable")[:1000]]
    with pytest.warns(QueryBankWarning, match="covers little"):
        gate = QueryBankGate().fit(bank, queries=data.query_embeddings, gallery=gallery)
    assert gate.open_ and not gate.diagnostics_.out_of_domain
    assert 0.2 < gate.diagnostics_.nn_outlier_share < gate.max_outlier_share
    strict = QueryBankGate(max_outlier_share=0.2)
    with pytest.warns(QueryBankWarning) as record:
        strict.fit(bank, queries=data.query_embeddings, gallery=gallery)
    assert {"covers little", "looks out of domain"} <= {
        phrase for w in record for phrase in ("covers little", "looks out of domain")
        if phrase in str(w.message)}
    assert not strict.open_ and strict.diagnostics_.neighbor_gap


def test_bad_input():
    bank = np.random.default_rng(0).random((6, 4))
    with pytest.raises(ValueError, match="queries"):
        QueryBankGate().fit(bank)
    with pytest.raises(ValueError, match=r"queries have shape \(2, 5\)"):
        QueryBankGate().fit(bank, queries=np.ones((2, 5)))
    with pytest.warns(QueryBankWarning):  # queries far above every bank top-1
        closed = QueryBankGate().fit(bank, queries=bank + 10)
    assert not closed.open_
    with pytest.raises(ValueError, match="expecting 4 features"):
        closed.transform(np.ones((2, 5)))


def test_a_closed_gate_checks_its_input_as_an_open_one():
    # The same named errors, and a lazy dask array for a dask one.
    rng = np.random.default_rng(0)
    bank = rng.random((40, 6))
    with pytest.warns(QueryBankWarning):
        closed = QueryBankGate().fit(bank, queries=bank + 10)
    opened = QueryBankGate(max_ks=1).fit(bank, queries=bank)
    assert not closed.open_ and opened.open_
    broken = bank[:3].copy()
    broken[1, 4] = np.inf
    for gate in (closed, opened):
        with pytest.raises(ValueError, match=r"X row 1 to gallery item 4 is inf"):
            gate.transform(broken)
    assert closed.transform(bank[:3].astype(np.int16)).dtype == np.float64
    da = pytest.importorskip("dask.array")
    lazy = closed.transform(da.from_array(bank, chunks=(10, 3)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), bank)
    broken_lazy = closed.transform(da.from_array(np.where(bank > 0.99, np.nan, bank), chunks=(10, 3)))
    with pytest.raises(ValueError, match=r"X contains NaN or infinity: the similarity of X row"):
        broken_lazy.compute()


@pytest.mark.parametrize("mode", ["similarities", "embeddings"])
def test_top_k_is_the_normalizers_when_open_and_the_raw_one_when_closed(mode):
    bank, queries, gallery = strong_model_task(n_gallery=100, n_dims=16)
    far = strong_model_task(n_gallery=100, n_dims=16, shift=4.0)[1]  # closed
    to_sims = DynamicInvertedSoftmax().fit(bank, gallery=gallery).similarities
    gates = {}
    for name, served in (("open", queries), ("closed", far)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", QueryBankWarning)
            gate = QueryBankGate()
            if mode == "embeddings":
                gates[name] = gate.fit(bank, queries=served, gallery=gallery)
            else:
                gates[name] = gate.fit(to_sims(bank), queries=to_sims(served))
    assert gates["open"].open_ and not gates["closed"].open_
    sims = to_sims(queries)
    for name, gate in gates.items():
        if mode == "embeddings":
            np.testing.assert_array_equal(gate.similarities(queries), sims)
            indices, scores = gate.top_k(queries=queries, k=4)
        else:
            indices, scores = gate.top_k(sims, k=4)
        expected = gate.transform(sims)
        order = np.argsort(-expected, axis=1, kind="stable")[:, :4]
        np.testing.assert_array_equal(indices, order)
        np.testing.assert_array_equal(scores, np.take_along_axis(expected, order, axis=1))
        if name == "closed":
            np.testing.assert_array_equal(expected, sims)
            np.testing.assert_array_equal(gate.top_k(sims, k=4, return_scores=False), order)


def test_the_gate_wraps_dbsn_on_every_input_form():
    """DBSN through the gate, open or closed, as the bad-input sweep drives a normaliser:
    embeddings with a gallery bank, and similarities whose gallery bank is given in the
    form the other dual-bank normalisers take (refused, naming DBSN and the input it needs)."""
    from skqbnorm import DualBankSinkhornNormalization

    rng = np.random.default_rng(4)
    bank, gallery, gallery_bank = (rng.normal(size=(n, 5)) for n in (100, 40, 9))
    bank += [4.0, 0, 0, 0, 0]  # off the queries' domain: max_ks decides
    queries = gallery + 0.1 * rng.normal(size=gallery.shape)
    dbsn = DualBankSinkhornNormalization(tau=0.1, n_iter=200)
    alone = DualBankSinkhornNormalization(tau=0.1, n_iter=200).fit(
        bank, gallery=gallery, gallery_bank=gallery_bank)
    for max_ks, is_open in ((1.0, True), (1e-9, False)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", QueryBankWarning)
            gate = QueryBankGate(dbsn, max_ks=max_ks, max_outlier_share=1.0).fit(
                bank, queries=queries, gallery=gallery, gallery_bank=gallery_bank)
        assert gate.open_ is is_open and gate.normalizer_.n_gallery_bank_ == 9
        sims = gate.similarities(queries)
        expected = alone.transform(sims) if is_open else sims
        np.testing.assert_allclose(gate.transform(sims), expected, rtol=1e-12, atol=0)
        indices, _ = gate.top_k(queries=queries, k=3)
        np.testing.assert_array_equal(indices, np.argsort(-expected, axis=1, kind="stable")[:, :3])
    bank_sims = bank @ gallery.T
    with pytest.raises(ValueError, match=r"DualBankSinkhornNormalization needs .* no "
                                         r"querybank_to_gallery_bank"):
        QueryBankGate(dbsn).fit(bank_sims, queries=queries @ gallery.T,
                                gallery_bank=gallery_bank @ gallery.T)
