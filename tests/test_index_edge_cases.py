"""Edge cases of NormalizedIndex and QueryBankGate served by it: refitted normalisers,
open and closed gates, refusals by name, IVF training sets, overflows and k."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import StandardScaler

from skqbnorm import (
    CSLS,
    DualBankSinkhornNormalization,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    InvertedSoftmax,
    NearestNeighborNormalization,
    QueryBankGate,
)
from skqbnorm.normalizers import index_serving

N_DIMS = 8


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    return {
        "bank": rng.normal(size=(120, N_DIMS)),
        "gallery": rng.normal(size=(1000, N_DIMS)),
        "gallery_bank": rng.normal(size=(80, N_DIMS)),
        "queries": rng.normal(size=(30, N_DIMS)),
    }


def unit(rows):
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def raw_top_k(queries, gallery, k):
    sims = unit(queries) @ unit(gallery).T
    return np.argsort(-sims, axis=1, kind="stable")[:, :k]


# -- the index --------------------------------------------------------------------------


@pytest.fixture
def index_module():
    pytest.importorskip("faiss")
    from skqbnorm import index

    return index


def test_the_index_serves_its_own_copy_when_the_normalizer_is_refitted(data, index_module):
    normalizer = CSLS(k=5).fit(data["bank"], gallery=data["gallery"])
    index = index_module.NormalizedIndex(normalizer, "Flat").fit()
    before = index.search(data["queries"], k=5)
    rng = np.random.default_rng(9)
    normalizer.fit(rng.normal(size=(50, 4)), gallery=rng.normal(size=(300, 4)))  # another dimension
    after = index.search(data["queries"], k=5)
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    assert index.normalizer_ is not normalizer and index.normalizer_.n_features_in_ == 1000


@pytest.mark.parametrize("gallery_bank", [False, True])
def test_an_open_gate_is_served_as_its_normalizer(data, index_module, gallery_bank):
    inner = DualInvertedSoftmax(beta1=10.0, beta2=5.0) if gallery_bank else DynamicInvertedSoftmax(k=2)
    extra = {"gallery_bank": data["gallery_bank"]} if gallery_bank else {}
    gate = QueryBankGate(inner).fit(data["bank"], queries=data["bank"][:60], gallery=data["gallery"], **extra)
    assert gate.open_
    indices, scores = index_module.NormalizedIndex(gate, "Flat").fit().search(data["queries"], k=4)
    expected_indices, expected_scores = gate.top_k(queries=data["queries"], k=4)
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-6)


def closed_gate(data):
    """A gate over a bank crowded around one gallery item, far from the queries."""
    far_bank = 5 * unit(data["gallery"][:1]) + 0.1 * np.random.default_rng(4).normal(size=(120, N_DIMS))
    with pytest.warns(Warning):
        return QueryBankGate(InvertedSoftmax()).fit(far_bank, queries=data["bank"][:60],
                                                    gallery=data["gallery"])


def test_a_closed_gate_is_served_raw(data, index_module):
    gate = closed_gate(data)
    assert not gate.open_
    indices, _ = index_module.NormalizedIndex(gate, "Flat").fit().search(data["queries"], k=4)
    np.testing.assert_array_equal(indices, raw_top_k(data["queries"], data["gallery"], 4))


def test_an_unfitted_gate_with_data_is_refused_by_name(data, index_module):
    index = index_module.NormalizedIndex(QueryBankGate(), "Flat")
    with pytest.raises(ValueError, match="QueryBankGate needs the queries"):
        index.fit(data["bank"], gallery=data["gallery"])


@pytest.mark.parametrize("name", ["n_candidates", "nprobe", "ef_search", "train_size", "batch_size"])
def test_bools_are_refused(data, index_module, name):
    normalizer = InvertedSoftmax().fit(data["bank"], gallery=data["gallery"])
    with pytest.raises(ValueError, match=f"'{name}' parameter"):
        index_module.NormalizedIndex(normalizer, **{name: True}).fit()


def test_a_factory_that_cannot_be_trained_names_a_setting_that_fits(data, index_module):
    normalizer = NearestNeighborNormalization(k=5).fit(data["bank"], gallery=data["gallery"])
    with pytest.raises(ValueError, match=r"factory='IVF1024,Flat' on 1000 vectors of the 1000-item "
                                         r"gallery.*factory='IVF16,Flat'") as caught:
        index_module.NormalizedIndex(normalizer, "IVF1024,Flat").fit()
    assert isinstance(caught.value.__cause__, RuntimeError)
    # the suggestion trains
    index_module.NormalizedIndex(normalizer, "IVF16,Flat").fit()
    with pytest.raises(ValueError, match=r"on 100 vectors .*train_size=100.*'IVF2,Flat'"):
        index_module.NormalizedIndex(normalizer, "IVF256,Flat", train_size=100).fit()
    with pytest.raises(ValueError, match=r"factory='Flat'"):  # no IVF to shrink
        index_module.NormalizedIndex(normalizer, "PQ3", train_size=100).fit()


def test_the_empiric_mutual_proximity_is_refused_by_name(data, index_module):
    from skqbnorm import MutualProximity

    normalizer = MutualProximity(method="empiric").fit(data["bank"], gallery=data["gallery"])
    with pytest.raises(ValueError, match=r"MutualProximity\(method='empiric'\)"):
        index_module.NormalizedIndex(normalizer).fit()


def test_a_class_declaring_no_index_is_refused_by_name(data, index_module):
    from skqbnorm.normalizers import Capabilities

    class Unserved(InvertedSoftmax):
        capabilities = Capabilities(bias_form=True, index=None)

    normalizer = Unserved().fit(data["bank"], gallery=data["gallery"])
    with pytest.raises(ValueError, match="Unserved is not supported by NormalizedIndex"):
        index_module.NormalizedIndex(normalizer).fit()


# -- the gate ---------------------------------------------------------------------------


def test_the_gate_wraps_dbsn_on_precomputed_similarities(data):
    bank_sims = unit(data["bank"]) @ unit(data["gallery"]).T
    cross = unit(data["bank"]) @ unit(data["gallery_bank"]).T
    dbsn = DualBankSinkhornNormalization(tau=0.1, n_iter=50, tol=0.1)
    gate = QueryBankGate(dbsn).fit(bank_sims, queries=bank_sims[:60], querybank_to_gallery_bank=cross)
    assert gate.open_ and gate.normalizer_.n_gallery_bank_ == 80
    alone = DualBankSinkhornNormalization(tau=0.1, n_iter=50, tol=0.1).fit(
        bank_sims, querybank_to_gallery_bank=cross)
    query_sims = unit(data["queries"]) @ unit(data["gallery"]).T
    np.testing.assert_array_equal(gate.transform(query_sims), alone.transform(query_sims))
    with pytest.raises(ValueError, match="querybank_to_gallery_bank is for .* InvertedSoftmax does not"):
        QueryBankGate(InvertedSoftmax()).fit(bank_sims, queries=bank_sims, querybank_to_gallery_bank=cross)


@pytest.mark.parametrize("wrapped", [StandardScaler(), "DIS", InvertedSoftmax, QueryBankGate()])
def test_the_gate_refuses_what_is_not_a_normalizer_by_name(data, wrapped):
    with pytest.raises(ValueError, match=r"QueryBankGate wraps a querybank normaliser.*normalizer="):
        QueryBankGate(wrapped).fit(data["bank"][:, :5], queries=data["bank"][:, :5])


def test_a_gate_fitted_with_a_gallery_bank_uses_it(data):
    bank_sims = unit(data["bank"]) @ unit(data["gallery"]).T
    bank_of_gallery = unit(data["gallery_bank"]) @ unit(data["gallery"]).T
    inner = DualInvertedSoftmax(beta1=10.0, beta2=5.0)
    gate = QueryBankGate(inner).fit(bank_sims, queries=bank_sims[:60], gallery_bank=bank_of_gallery)
    alone = DualInvertedSoftmax(beta1=10.0, beta2=5.0).fit(bank_sims, gallery_bank=bank_of_gallery)
    assert gate.open_ and gate.normalizer_.n_gallery_bank_ == 80
    query_sims = unit(data["queries"]) @ unit(data["gallery"]).T
    np.testing.assert_array_equal(gate.transform(query_sims), alone.transform(query_sims))
    single = DualInvertedSoftmax(beta1=10.0, beta2=5.0).fit(bank_sims)
    assert not np.array_equal(gate.transform(query_sims), single.transform(query_sims))


def test_an_unfitted_gate_is_not_fitted(data):
    gate = QueryBankGate()
    for serve in (lambda: gate.transform(data["queries"]), lambda: gate.top_k(data["queries"]),
                  lambda: index_serving(gate), lambda: gate.similarities(data["queries"])):
        with pytest.raises(NotFittedError):
            serve()


def test_the_gate_serves_raw_with_the_normalizers_checks_when_closed(data):
    gate = closed_gate(data)
    served = index_serving(gate).normalizer
    assert served is not gate.normalizer_ and served.capabilities.index == "bias"
    np.testing.assert_array_equal(served.gallery_bias(), np.zeros(1000))
    sims = gate.similarities(data["queries"])
    np.testing.assert_array_equal(gate.transform(sims), sims)


# -- the serving protocol ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int32, np.int64, bool])
def test_augmented_vectors_refuse_an_integer_dtype(data, dtype):
    normalizer = InvertedSoftmax().fit(data["bank"], gallery=data["gallery"])
    with pytest.raises(ValueError, match="dtype must be a floating dtype"):
        index_serving(normalizer).augmented_gallery(dtype=dtype)
    with pytest.raises(ValueError, match="dtype must be a floating dtype"):
        index_serving(normalizer).augmented_queries(data["queries"], dtype=dtype)
    assert index_serving(normalizer).augmented_gallery(dtype=np.float16).dtype == np.float16


def test_query_embeddings_in_place_of_similarities_name_what_to_call(data):
    normalizer = CSLS(k=3).fit(data["bank"], gallery=data["gallery"])
    with pytest.raises(ValueError, match=r"use transform\(normaliser.similarities\(queries\)\)"):
        normalizer.transform(data["queries"])
    with pytest.raises(ValueError, match=r"use top_k\(queries=...\)"):
        normalizer.top_k(data["queries"])  # positional: X, the similarities
    # precomputed mode: nothing to suggest, the width is named
    precomputed = CSLS(k=3).fit(unit(data["bank"]) @ unit(data["gallery"]).T)
    with pytest.raises(ValueError, match=r"expecting 1000 features as input: the query similarities "
                                         r"\(shape \(30, 8\)\) need one column per fitted gallery item\.$"):
        precomputed.transform(data["queries"])


def test_an_overflow_through_the_temperature_names_it():
    rng = np.random.default_rng(0)
    normalizer = DualSoftmax(temperature=1e-300).fit(rng.uniform(-0.2, 0.8, size=(20, 5)))
    queries = rng.uniform(-0.2, 0.8, size=(3, 5))
    queries[0, 0] = 0.95
    with pytest.raises(ValueError, match=r"^temperature=1e-300 is too small .* Use a larger temperature"):
        normalizer.transform(queries)
    # data far above the bank is still blamed on the data
    with pytest.raises(ValueError, match=r"^DualSoftmax's scores .*Rescale the similarities"):
        DualSoftmax(temperature=0.1).fit(rng.normal(size=(20, 4))).transform(np.full((1, 4), 100.0))


# -- what the mutation tests of skqbnorm/index.py asked for -------------------------------


@pytest.mark.parametrize("name", ["n_candidates", "nprobe", "ef_search", "train_size", "batch_size"])
def test_each_count_takes_one_and_refuses_zero(data, index_module, name):
    normalizer = DualSoftmax().fit(data["bank"], gallery=data["gallery"])
    factory = {"nprobe": "IVF16,Flat", "ef_search": "HNSW8", "train_size": "Flat"}.get(name, "Flat")
    index = index_module.NormalizedIndex(normalizer, factory, **{name: 1}).fit()
    indices, _ = index.search(data["queries"][:3], k=1)
    assert indices.shape == (3, 1)
    with pytest.raises(ValueError, match=f"'{name}' parameter"):
        index_module.NormalizedIndex(normalizer, factory, **{name: 0}).fit()


@pytest.mark.parametrize("train_size", [None, 300, 1000])
def test_an_ivf_index_is_trained_on_evenly_spaced_items(data, index_module, train_size):
    """The same index as FAISS builds by hand from every ceil(n / train_size)-th vector,
    its bias coordinate set to zero (the lists then hold the items by their embeddings)."""
    normalizer = NearestNeighborNormalization(k=5).fit(data["bank"], gallery=data["gallery"])
    index = index_module.NormalizedIndex(normalizer, "IVF8,Flat", nprobe=1, train_size=train_size).fit()
    vectors = index_serving(normalizer).augmented_gallery(dtype=np.float32)
    step = 1 if train_size is None else -(-1000 // train_size)
    by_hand = faiss_module().index_factory(vectors.shape[1], "IVF8,Flat", faiss_module().METRIC_INNER_PRODUCT)
    training = vectors[::step].copy()
    training[:, -1] = 0
    by_hand.train(training)
    by_hand.add(vectors)
    by_hand.nprobe = 1
    queries = index_serving(normalizer).augmented_queries(data["queries"], dtype=np.float32)
    np.testing.assert_array_equal(index.search(data["queries"], k=20)[0], by_hand.search(queries, 20)[1])


def faiss_module():
    import faiss

    return faiss


@pytest.mark.parametrize(("train_size", "fits"), [(20, 1), (50, 1), (100, 2), (200, 4)])
def test_the_suggested_ivf_has_39_training_vectors_a_list(data, index_module, train_size, fits):
    normalizer = InvertedSoftmax().fit(data["bank"], gallery=data["gallery"])
    with pytest.raises(ValueError, match=rf"with {train_size}, use e\.g\. factory='IVF{fits},Flat'"):
        index_module.NormalizedIndex(normalizer, "IVF512,Flat", train_size=train_size).fit()


@pytest.mark.parametrize("normalizer", [
    DynamicInvertedSoftmax(beta=50.0, k=1), CSLS(k=3), DualSoftmax(), InvertedSoftmax(beta=50.0)],
    ids=["DIS", "CSLS", "DSL", "IS"])
def test_the_first_gallery_item_is_found(data, index_module, normalizer):
    """Gallery item 0 as the raw top-1 (the gate opened by it) and as a candidate."""
    gallery = data["gallery"]
    bank = np.vstack([gallery[:40] + 0.01, data["bank"]])  # item 0 activated for the DIS
    normalizer = normalizer.fit(bank, gallery=gallery)
    queries = np.vstack([gallery[:3], data["queries"][:5]])
    index = index_module.NormalizedIndex(normalizer, "Flat", n_candidates=50).fit()
    indices, scores = index.search(queries, k=1000)
    exact_indices, exact_scores = normalizer.top_k(queries=queries, k=1000)
    assert (indices == 0).any()
    if isinstance(normalizer, DualSoftmax):  # reranked: the 50 raw candidates, then -1
        exact_scores = np.take_along_axis(normalizer.transform(normalizer.similarities(queries)),
                                          np.maximum(indices, 0), axis=1)
        np.testing.assert_allclose(scores[:, :50], exact_scores[:, :50], rtol=1e-6)
        assert (indices[:, :50] >= 0).all()
        return
    np.testing.assert_array_equal(indices[:, :1], exact_indices[:, :1])
    np.testing.assert_allclose(scores[:, :20], exact_scores[:, :20], rtol=1e-6)
    if isinstance(normalizer, DynamicInvertedSoftmax):
        assert normalizer.activated_[0]


def test_reranking_many_candidates_over_a_large_bank(index_module):
    """GC's exact scores of 3,000 candidates over a bank of 800: blocks of one query."""
    from skqbnorm import GloballyCorrected

    rng = np.random.default_rng(5)
    bank, gallery, queries = rng.normal(size=(800, 6)), rng.normal(size=(3000, 6)), rng.normal(size=(3, 6))
    normalizer = GloballyCorrected().fit(bank, gallery=gallery)
    indices, scores = index_module.NormalizedIndex(normalizer, n_candidates=3000).fit().search(queries, k=5)
    exact_indices, exact_scores = normalizer.top_k(queries=queries, k=5)
    np.testing.assert_array_equal(indices, exact_indices)
    np.testing.assert_allclose(scores, exact_scores, rtol=1e-12)


def test_an_overflow_in_a_later_block_names_its_query(index_module):
    """Exact scoring works in blocks of queries; an error names the caller's row."""
    rng = np.random.default_rng(2)
    gallery = unit(rng.normal(size=(40, 4)))
    normalizer = DualSoftmax(temperature=1e-300).fit(rng.normal(size=(30, 4)) * 0.01, gallery=gallery)
    queries = np.tile(-gallery[:1], (1200, 1))
    queries[[500, 1100]] = gallery[0]  # far above the bank: exp((s - c) / T) overflows
    # 40 candidates: blocks of sqrt(2**21 / 40) = 228 queries, so row 500 lies in the
    # third block of the first batch of 1024
    index = index_module.NormalizedIndex(normalizer, n_candidates=40).fit()
    with pytest.raises(ValueError, match=r"first at X row 500, gallery item 0"):
        index.search(queries, k=1)
    with pytest.raises(ValueError, match=r"first at X row 500, gallery item 0"):  # rows as given
        index.search(queries[600:], k=1)


@pytest.mark.parametrize("k", [1, 1000])
def test_k_from_one_to_the_gallery_size(data, index_module, k):
    normalizer = CSLS(k=3).fit(data["bank"], gallery=data["gallery"])
    indices, _ = index_module.NormalizedIndex(normalizer).fit().search(data["queries"][:4], k=k)
    np.testing.assert_array_equal(indices, normalizer.top_k(queries=data["queries"][:4], k=k)[0])


def test_an_overflowing_bias_weight_names_alpha():
    rng = np.random.default_rng(0)
    bank, queries = rng.uniform(0.5, 3, size=(20, 5)), rng.uniform(0.5, 3, size=(3, 5))
    with pytest.raises(ValueError, match=r"^alpha=1e\+308 is too large .* Use a smaller alpha"):
        NearestNeighborNormalization(k=2, alpha=1e308).fit(bank).transform(queries)
    # a finite bias: scores as they come
    assert np.isfinite(NearestNeighborNormalization(k=2, alpha=1e300).fit(bank).transform(queries)).all()

