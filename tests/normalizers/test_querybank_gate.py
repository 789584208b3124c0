"""QueryBankGate: the wrapped normaliser when the bank suits the queries, raw otherwise."""

import itertools
import pickle
import warnings
import zlib

import numpy as np
import pytest

from skqbnorm import (
    CSLS,
    DualInvertedSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    LiveQueryBank,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankGate,
    SinkhornNormalization,
)
from skqbnorm.datasets import load_wordnet_revdict
from skqbnorm.index import NormalizedIndex
from skqbnorm.metrics import QueryBankWarning, querybank_diagnostics
from skqbnorm.normalizers._partial_fit import PartialFitRefused

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


# -- partial_fit ---------------------------------------------------------------------

N_GALLERY = 40


def gate_banks(rng, domain, dtype):
    """(bank, queries, gallery bank) of similarities; the queries drawn as the bank
    ("open") or shifted off it ("closed": the KS distance at depth is far over max_ks)."""
    bank = rng.normal(size=(600, N_GALLERY)).astype(dtype)
    queries = rng.normal(size=(80, N_GALLERY)) + (1.5 if domain == "closed" else 0.0)
    return bank, queries.astype(dtype), rng.normal(size=(90, N_GALLERY)).astype(dtype)


def uneven_cuts(rng, n_rows, max_calls=20, first=3):
    """1 to ``max_calls`` consecutive, uneven parts of ``range(n_rows)``, the first of at
    least ``first`` rows (CSLS needs k bank rows)."""
    n_calls = int(rng.integers(1, max_calls + 1))
    inner = np.sort(rng.choice(np.arange(first, n_rows), size=n_calls - 1, replace=False))
    bounds = [0, *inner.tolist(), n_rows]
    return [slice(a, b) for a, b in itertools.pairwise(bounds)]


def as_kind(array, kind, rng, tmp_path):
    if kind == "memmap":
        mapped = np.memmap(tmp_path / "bank.dat", dtype=array.dtype, mode="w+", shape=array.shape)
        mapped[:] = array
        mapped.flush()
        return np.memmap(tmp_path / "bank.dat", dtype=array.dtype, mode="r", shape=array.shape)
    if kind == "dask":
        da = pytest.importorskip("dask.array")
        return da.from_array(array, chunks=(int(rng.integers(1, len(array) + 1)), -1))
    return array


def learned_arrays(normalizer):
    return {name: value for name, value in vars(normalizer).items()
            if name.endswith("_") and not name.startswith("__")
            and isinstance(value, (np.ndarray, np.generic, int, float, type(None)))}


def assert_same_gate(live, whole):
    """Every fitted attribute of the gate, and of its normaliser, bitwise."""
    assert live.open_ is whole.open_
    assert live.n_features_in_ == whole.n_features_in_
    assert live.diagnostics_.to_dict() == whole.diagnostics_.to_dict()
    assert live.diagnostics_ == whole.diagnostics_
    mine, theirs = learned_arrays(live.normalizer_), learned_arrays(whole.normalizer_)
    assert mine.keys() == theirs.keys()
    for name, value in theirs.items():
        np.testing.assert_array_equal(mine[name], value, err_msg=name, strict=True)


def fit_quietly(estimator, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QueryBankWarning)
        return estimator.fit(*args, **kwargs)


@pytest.mark.parametrize("normalizer", [None, CSLS(k=3), DualInvertedSoftmax()], ids=repr)
@pytest.mark.parametrize("domain", ["open", "closed"])
@pytest.mark.parametrize("kind", ["numpy", "memmap", "dask"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_partial_fit_equals_one_fit_bitwise(normalizer, domain, kind, dtype, tmp_path):
    seed = zlib.crc32(f"{normalizer!r} {domain} {kind} {np.dtype(dtype).name}".encode())
    rng = np.random.default_rng(seed)
    bank, queries, gallery_bank = gate_banks(rng, domain, dtype)
    dual = isinstance(normalizer, DualInvertedSoftmax)
    extra = {"gallery_bank": gallery_bank} if dual else {}
    whole = fit_quietly(QueryBankGate(normalizer), bank, queries=queries, **extra)
    assert whole.open_ is (domain == "open")

    source = as_kind(bank, kind, rng, tmp_path)
    parts = uneven_cuts(rng, len(bank))
    gallery_parts = uneven_cuts(rng, len(gallery_bank), max_calls=len(parts)) if dual else []
    live = QueryBankGate(normalizer)
    for call, rows in enumerate(parts):
        kwargs = {"queries": queries} if call == 0 or rng.random() < 0.3 else {}
        if call < len(gallery_parts):
            kwargs["gallery_bank"] = gallery_bank[gallery_parts[call]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", QueryBankWarning)
            assert live.partial_fit(source[rows], **kwargs) is live
        assert live.diagnostics_.n_bank == live.normalizer_.n_bank_ == rows.stop
    assert_same_gate(live, whole)
    np.testing.assert_array_equal(live.transform(queries), whole.transform(queries), strict=True)
    for mine, theirs in zip(live.top_k(queries, k=5), whole.top_k(queries, k=5), strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_every_call_leaves_the_gate_of_the_rows_so_far():
    """The gate opens as the bank grows towards the queries' domain: each call's
    decision, distances and thresholds are those of one fit on the rows so far."""
    rng = np.random.default_rng(7)
    far = rng.normal(size=(40, N_GALLERY)) + 1.5
    near = rng.normal(size=(560, N_GALLERY))
    bank, queries = np.concatenate([far, near]), rng.normal(size=(80, N_GALLERY))
    live, decisions = QueryBankGate(CSLS(k=3)), []
    for rows in [slice(0, 40), slice(40, 45), slice(45, 300), slice(300, 600)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", QueryBankWarning)
            live.partial_fit(bank[rows], queries=queries)
        assert_same_gate(live, fit_quietly(QueryBankGate(CSLS(k=3)), bank[: rows.stop],
                                           queries=queries))
        decisions.append(live.open_)
    assert decisions[0] is False and decisions[-1] is True


def test_partial_fit_warns_as_fit_does():
    rng = np.random.default_rng(3)
    bank, queries, _ = gate_banks(rng, "closed", np.float64)
    live = QueryBankGate()
    with pytest.warns(QueryBankWarning, match="looks out of domain"):
        live.partial_fit(bank[:100], queries=queries)
    with pytest.warns(QueryBankWarning, match="looks out of domain") as record:
        live.partial_fit(bank[100:])
    with pytest.warns(QueryBankWarning) as expected:
        QueryBankGate().fit(bank, queries=queries)
    assert [str(w.message) for w in record] == [str(w.message) for w in expected]


@pytest.mark.parametrize("normalizer", [SinkhornNormalization(), GloballyCorrected(),
                                        MutualProximity(method="empiric")], ids=repr)
def test_the_gate_refuses_partial_fit_where_its_normalizer_does(normalizer):
    gate = QueryBankGate(normalizer)
    assert not hasattr(gate, "partial_fit")
    with pytest.raises(ValueError, match=rf"QueryBankGate does not support partial_fit: its "
                                         rf"normalizer {type(normalizer).__name__} has no partial_fit"):
        gate.partial_fit  # noqa: B018
    assert hasattr(QueryBankGate(), "partial_fit") and hasattr(QueryBankGate(CSLS()), "partial_fit")


def test_embeddings_are_refused_by_name_and_leave_the_gate_as_it_was():
    rng = np.random.default_rng(5)
    bank, queries, gallery = rng.normal(size=(50, 8)), rng.normal(size=(20, 8)), rng.normal(size=(30, 8))
    with pytest.raises(PartialFitRefused, match="nearest other bank query"):
        QueryBankGate().partial_fit(bank, queries=queries, gallery=gallery)
    live = QueryBankGate().partial_fit(bank @ gallery.T, queries=queries @ gallery.T)
    before = live.diagnostics_
    with pytest.raises(ValueError, match="on embeddings"):
        live.partial_fit(bank, gallery=gallery)
    assert live.diagnostics_ is before and live.normalizer_.n_bank_ == 50


def test_bad_calls_are_refused_and_change_nothing():
    rng = np.random.default_rng(6)
    bank, queries, _ = gate_banks(rng, "open", np.float64)
    with pytest.raises(ValueError, match="needs the queries to serve"):
        QueryBankGate().partial_fit(bank)
    with pytest.raises(ValueError, match=r"same number of gallery items.*\(600, 40\).*\(80, 39\)"):
        QueryBankGate().partial_fit(bank, queries=queries[:, :-1])
    live = QueryBankGate(CSLS(k=3)).partial_fit(bank[:100], queries=queries)
    state = (live.diagnostics_, live.normalizer_.n_bank_)
    bad_calls = [
        (lambda: live.partial_fit(bank[100:200, :-1]), r"X has 39 features.*expecting 40"),
        (lambda: live.partial_fit(bank[100:200].astype(np.float32)), "dtype float32"),
        (lambda: live.partial_fit(bank[100:200], queries=queries[1:]), "not the queries"),
        (lambda: live.partial_fit(bank[100:200], queries=queries + 1), "not the queries"),
    ]
    for call, message in bad_calls:
        with pytest.raises(ValueError, match=message):
            call()
        assert (live.diagnostics_, live.normalizer_.n_bank_) == state
    for name, value in [("depth", 5), ("max_ks", 0.5), ("normalizer", CSLS(k=4))]:
        original = getattr(live, name)
        live.set_params(**{name: value})
        with pytest.raises(ValueError, match="differs from the .* of the first partial_fit call"):
            live.partial_fit(bank[100:200])
        live.set_params(**{name: original})
    live.set_params(normalizer=CSLS(k=3, working_memory=1))  # a block size changes no figure
    live.partial_fit(bank[100:], queries=queries)
    assert_same_gate(live, QueryBankGate(CSLS(k=3)).fit(bank, queries=queries))


def test_fit_starts_afresh_and_partial_fit_after_fit_starts_a_new_bank():
    rng = np.random.default_rng(8)
    bank, queries, _ = gate_banks(rng, "open", np.float64)
    gate = QueryBankGate().partial_fit(bank[:200], queries=queries)
    gate.fit(bank[200:], queries=queries)
    assert gate.diagnostics_.n_bank == 400 and not hasattr(gate, "_partial_state")
    with pytest.warns(UserWarning, match="starts a new querybank") as record:
        gate.partial_fit(bank[:50], queries=queries)
    assert {w.filename for w in record if w.category is UserWarning} == {__file__}
    assert_same_gate(gate, QueryBankGate().fit(bank[:50], queries=queries))


def test_a_pickled_gate_goes_on_appending():
    rng = np.random.default_rng(9)
    bank, queries, _ = gate_banks(rng, "open", np.float32)
    live = pickle.loads(pickle.dumps(QueryBankGate().partial_fit(bank[:250], queries=queries)))
    live.partial_fit(bank[250:])
    assert_same_gate(live, QueryBankGate().fit(bank, queries=queries))


def test_live_bank_and_index_refuse_a_gate_by_name():
    """LiveQueryBank and NormalizedIndex grow a normaliser without queries to serve (and
    the index on embeddings): the gate's partial_fit says what it needs."""
    rng = np.random.default_rng(10)
    bank, gallery = rng.normal(size=(60, 8)), rng.normal(size=(30, 8))
    refusal = r"QueryBankGate\(\.\.\.\) cannot follow the traffic: its partial_fit needs the queries"
    with pytest.raises(ValueError, match=refusal):
        LiveQueryBank(QueryBankGate(CSLS(k=3))).fit(bank @ gallery.T)
    with pytest.raises(ValueError, match=refusal):  # at fit, not at its first growth
        LiveQueryBank(QueryBankGate(CSLS(k=3))).fit(gallery=gallery)
    with pytest.raises(PartialFitRefused, match="on embeddings"):
        NormalizedIndex(QueryBankGate(CSLS(k=3)), "Flat").partial_fit(bank, gallery=gallery)
