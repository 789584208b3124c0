"""NormalizedIndex: FAISS serves each normaliser's exact top-k (flat) or nearly (IVF, HNSW)."""

import sys

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from sklearn.exceptions import NotFittedError

from skqbnorm import (
    CSLS,
    Centering,
    DualBankSinkhornNormalization,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankZNorm,
    SinkhornNormalization,
    catalogue,
)
from skqbnorm.index import NormalizedIndex, import_faiss, shared_per_row
from skqbnorm.normalizers import index_serving

N_DIMS, N_GALLERY = 16, 3000


def small_data(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "bank": rng.normal(size=(300, N_DIMS)),
        "gallery": rng.normal(size=(N_GALLERY, N_DIMS)),
        "gallery_bank": rng.normal(size=(250, N_DIMS)),
        "queries": rng.normal(size=(100, N_DIMS)),
    }


def fit(normalizer, data):
    dual = normalizer.capabilities.gallery_bank is not None
    extra = {"gallery_bank": data["gallery_bank"]} if dual else {}
    return normalizer.fit(data["bank"], gallery=data["gallery"], **extra)


BIAS_FORM = [
    InvertedSoftmax(beta=10.0),
    InvertedSoftmax(beta=10.0, output="probability"),
    DynamicInvertedSoftmax(beta=10.0, k=1),
    CSLS(k=5),
    NearestNeighborNormalization(k=5, alpha=0.75),
    Centering(alpha=0.5),
    DualInvertedSoftmax(beta1=10.0, beta2=5.0),
    DualDynamicInvertedSoftmax(beta1=10.0, beta2=5.0, k=1),
    SinkhornNormalization(tau=0.1, n_iter=50),
    DualBankSinkhornNormalization(tau=0.1, n_iter=50, tol=0.1),
]
RERANKED = [GloballyCorrected(), QueryBankZNorm(), MutualProximity(), DualSoftmax()]


def test_the_lists_cover_the_catalogue():
    """Every normaliser the catalogue lists is tested here, by how it declares it is served."""
    assert {type(n) for n in BIAS_FORM} == set(catalogue.normalizers(index="bias"))
    assert {type(n) for n in RERANKED} == set(catalogue.normalizers(index="rerank"))
    assert catalogue.normalizers(index=None) == []


def ids(normalizers):
    return [f"{type(getattr(n, 'values', [n])[0]).__name__}-{i}" for i, n in enumerate(normalizers)]


@pytest.fixture(scope="module")
def data():
    return small_data()


@pytest.mark.slow
@pytest.mark.parametrize("normalizer", BIAS_FORM + RERANKED, ids=ids(BIAS_FORM + RERANKED))
def test_flat_index_equals_top_k(normalizer, data):
    normalizer = fit(normalizer, data)
    index = NormalizedIndex(normalizer, "Flat", n_candidates=N_GALLERY).fit()
    indices, scores = index.search(data["queries"], k=10)
    exact_indices, exact_scores = normalizer.top_k(queries=data["queries"], k=10)
    np.testing.assert_array_equal(indices, exact_indices)
    np.testing.assert_allclose(scores, exact_scores, rtol=1e-12, atol=1e-12)
    assert index.bias_form_ == any(normalizer is other for other in BIAS_FORM)


def test_gated_cases_take_both_stages(data):
    """The DIS case above leaves some rows raw; the dual one sees every combination of gates."""
    dis = fit(DynamicInvertedSoftmax(beta=10.0, k=1), data)
    top1 = dis.similarities(data["queries"]).argmax(axis=1)
    assert set(index_serving(dis).row_forms(top1)) == {-1, 0}
    dual = fit(DualDynamicInvertedSoftmax(beta1=10.0, beta2=5.0, k=1), data)
    assert set(index_serving(dual).row_forms(top1)) == {-1, 0, 1, 2}


@pytest.mark.slow
@pytest.mark.parametrize("normalizer", RERANKED, ids=ids(RERANKED))
def test_rerank_scores_the_raw_candidates(normalizer, data):
    """The k best, by the normaliser's scores, of each query's 50 best raw similarities."""
    normalizer = fit(normalizer, data)
    index = NormalizedIndex(normalizer, "Flat", n_candidates=50).fit()
    indices, scores = index.search(data["queries"], k=10)
    sims = normalizer.similarities(data["queries"])
    candidates = np.argsort(-sims, axis=1, kind="stable")[:, :50]
    candidate_scores = np.take_along_axis(normalizer.transform(sims), candidates, axis=1)
    order = np.argsort(-candidate_scores, axis=1, kind="stable")[:, :10]
    np.testing.assert_array_equal(np.sort(indices, axis=1), np.sort(np.take_along_axis(candidates, order, axis=1), axis=1))
    np.testing.assert_allclose(scores, np.take_along_axis(candidate_scores, order, axis=1), atol=1e-12)


def test_fit_on_data_equals_prefit(data):
    normalizer = fit(DynamicInvertedSoftmax(beta=10.0, k=1), data)
    prefit = NormalizedIndex(normalizer).fit()
    unfitted = DynamicInvertedSoftmax(beta=10.0, k=1)
    fitted_here = NormalizedIndex(unfitted).fit(data["bank"], gallery=data["gallery"])
    assert not hasattr(unfitted, "activated_")  # a clone was fitted
    for left, right in zip(prefit.search(data["queries"]), fitted_here.search(data["queries"])):
        np.testing.assert_array_equal(left, right)


@pytest.mark.slow
def test_batches_and_dtype(data):
    normalizer = fit(CSLS(k=5), data)
    whole = NormalizedIndex(normalizer).fit().search(data["queries"], k=7)
    batched = NormalizedIndex(normalizer, batch_size=3).fit().search(data["queries"], k=7)
    for left, right in zip(whole, batched):
        np.testing.assert_array_equal(left, right)
    indices, scores = NormalizedIndex(normalizer).fit().search(data["queries"].astype(np.float32), k=7)
    assert scores.dtype == np.float32
    assert (indices == whole[0]).mean() > 0.95  # float32 rounding may swap near-ties


@pytest.mark.slow
def test_missing_results_are_minus_one(data):
    """An IVF search with nprobe=1 finds fewer than k items: -1, with a score of -inf."""
    normalizer = fit(NearestNeighborNormalization(k=5), data)
    index = NormalizedIndex(normalizer, "IVF64,Flat", nprobe=1).fit()
    indices, scores = index.search(data["queries"], k=100)
    missing = indices < 0
    assert missing.any() and (~missing).any()
    np.testing.assert_array_equal(np.isneginf(scores), missing)
    exact = normalizer.transform(normalizer.similarities(data["queries"]))
    found = np.take_along_axis(exact, np.maximum(indices, 0), axis=1)
    np.testing.assert_allclose(scores[~missing], found[~missing], atol=1e-12)
    assert (scores[:, 1:] <= scores[:, :-1]).all()


@pytest.mark.slow
def test_search_parameters_reach_the_index(data):
    normalizer = fit(Centering(), data)
    ivf = NormalizedIndex(normalizer, "IVF16,Flat", nprobe=1000).fit()
    ivf.search(data["queries"][:1])
    assert faiss.extract_index_ivf(ivf.index_).nprobe == 16  # capped at the number of lists
    hnsw = NormalizedIndex(normalizer, "HNSW8", ef_search=77).fit()
    hnsw.search(data["queries"][:1])
    assert hnsw.index_.hnsw.efSearch == 77
    hnsw.set_params(ef_search=99).search(data["queries"][:1])  # no refit needed
    assert hnsw.index_.hnsw.efSearch == 99
    trained = NormalizedIndex(normalizer, "IVF16,Flat", train_size=1000).fit()
    assert trained.index_.ntotal == N_GALLERY


def test_errors(data):
    rng = np.random.default_rng(1)
    with pytest.raises(NotFittedError):
        NormalizedIndex(Centering()).fit()
    with pytest.raises(NotFittedError):
        NormalizedIndex(Centering()).search(data["queries"])
    precomputed = Centering().fit(rng.normal(size=(20, 30)))
    with pytest.raises(ValueError, match="precomputed similarities"):
        NormalizedIndex(precomputed).fit()
    index = NormalizedIndex(fit(Centering(), data)).fit()
    with pytest.raises(ValueError, match=r"queries have shape \(2, 5\).*16 dimensions"):
        index.search(rng.normal(size=(2, 5)))
    for k in (0, N_GALLERY + 1, 2.0, True):
        with pytest.raises(ValueError, match="k must be an integer"):
            index.search(data["queries"], k=k)
    with pytest.raises(ValueError, match="not a FAISS index_factory string"):
        NormalizedIndex(fit(Centering(), data), "NoSuchIndex").fit()
    with pytest.raises(ValueError, match="method='empiric'"):
        NormalizedIndex(fit(MutualProximity(method="empiric"), data)).fit()
    with pytest.raises(ValueError, match="need X"):
        NormalizedIndex(Centering()).fit(gallery=data["gallery"])
    with pytest.raises(ValueError, match="n_candidates"):
        NormalizedIndex(Centering(), n_candidates=0).fit()


def test_missing_faiss_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(ImportError, match=r"pip install skqbnorm\[faiss\]"):
        import_faiss()


# -- short searches: missing results and raw searches that find nothing ------------------

@pytest.mark.slow
@pytest.mark.parametrize("normalizer", BIAS_FORM + RERANKED + [CSLS(k=100)],
                         ids=ids(BIAS_FORM + RERANKED + [CSLS(k=100)]))
def test_missing_results_leave_every_score_finite_or_minus_inf(normalizer, data):
    """-1 slots score -inf and nothing else breaks, even where CSLS's raw top k (100
    here, more than one IVF list holds) or GC's range searches come back short."""
    normalizer = fit(normalizer, data)
    index = NormalizedIndex(normalizer, "IVF64,Flat", nprobe=1, n_candidates=100).fit()
    indices, scores = index.search(data["queries"], k=100)
    missing = indices < 0
    assert missing.any() and (~missing).any()
    np.testing.assert_array_equal(np.isneginf(scores), missing)
    assert np.isfinite(scores[~missing]).all()
    assert (scores[:, 1:] <= scores[:, :-1]).all()


def find_nothing_raw_for_query_0(index, monkeypatch):
    """Make the index's raw searches (queries ``[q, 0]``) find nothing for query 0."""
    search = index._index_search

    def finding_nothing_for_query_0_raw(vectors, tails, k):
        found = search(vectors, tails, k)
        if not np.any(tails):  # a raw search: queries [q, 0]
            found[0] = -1
        return found

    monkeypatch.setattr(index, "_index_search", finding_nothing_for_query_0_raw)


@pytest.mark.slow
@pytest.mark.parametrize("normalizer", BIAS_FORM + RERANKED, ids=ids(BIAS_FORM + RERANKED))
def test_a_query_whose_raw_search_finds_nothing(monkeypatch, normalizer, data):
    normalizer = fit(normalizer, data)
    index = NormalizedIndex(normalizer, "Flat", n_candidates=50).fit()
    queries = data["queries"][:6]
    expected = index.search(queries, k=10)
    find_nothing_raw_for_query_0(index, monkeypatch)
    indices, scores = index.search(queries, k=10)
    for got, want in zip((indices, scores), expected):
        np.testing.assert_array_equal(got[1:], want[1:])
    np.testing.assert_array_equal(np.isneginf(scores[0]), indices[0] < 0)
    assert np.isfinite(scores[0][indices[0] >= 0]).all()


@pytest.mark.parametrize("normalizer", [DynamicInvertedSoftmax(beta=10.0, k=1), CSLS(k=3)], ids=["DIS", "CSLS"])
def test_a_gate_leaves_raw_a_query_whose_raw_search_finds_nothing(data, normalizer, monkeypatch):
    """No raw top-1, no open gate: the DIS serves that row's raw results (none); an
    ungated normaliser still searches the augmented vectors."""
    index = NormalizedIndex(fit(normalizer, data), "Flat").fit()
    find_nothing_raw_for_query_0(index, monkeypatch)
    indices, scores = index.search(data["queries"][:4], k=5)
    gated = normalizer.capabilities.gated
    assert (indices[0] < 0).all() == gated and np.isneginf(scores[0]).all() == gated
    assert (indices[1:] >= 0).all()


def test_scores_beyond_the_dtype_as_top_k_has_them():
    # float32 scores that overflow: clipped with a warning (probabilities) or refused
    # naming the gallery item, as top_k does; the index scores a union of candidates.
    rng = np.random.default_rng(2)
    bank, gallery, queries = (rng.normal(size=(n, 16)).astype(np.float32) for n in (300, 500, 40))
    probability = InvertedSoftmax(metric="dot", beta=10.0, output="probability").fit(bank, gallery=gallery)
    index = NormalizedIndex(probability, "Flat", n_candidates=500).fit()
    with pytest.warns(RuntimeWarning, match=r"overflows float32 for some scores of X"):
        _, scores = index.search(3 * queries, k=5)
    assert (scores[:, 0] == np.finfo(np.float32).max).any()
    dual_softmax = DualSoftmax(metric="dot").fit(bank, gallery=gallery)
    with pytest.raises(ValueError, match=r"overflow float32, first at X row 32, gallery item 492"):
        dual_softmax.top_k(queries=queries, k=10)
    with pytest.raises(ValueError, match=r"overflow float32, first at X row 32, gallery item 492"):
        NormalizedIndex(dual_softmax, "Flat").fit().search(queries, k=10)


# -- recall against exact search ----------------------------------------------------------

def test_shared_per_row_by_hand():
    found = np.array([[0, 1, 2], [5, -1, -1], [-1, -1, -1], [3, 4, 0]])
    exact = np.array([[2, 1, 9], [5, 6, 7], [0, 1, 2], [2, -1, 4]])
    np.testing.assert_array_equal(shared_per_row(found, exact, 10), [2, 1, 0, 1])
    # keys of a row never reach the next one: item 9 of row 0 is not item -1 of row 1
    np.testing.assert_array_equal(shared_per_row(np.array([[9], [-1]]), np.array([[1], [-1]]), 10), [0, 0])


def reference_recall(found, exact):
    """Per query, |found & exact| / k, with Python sets (exact holds no -1)."""
    return np.array([len(set(f) & set(e)) / len(e) for f, e in zip(found.tolist(), exact.tolist())])


@pytest.mark.parametrize("factory, nprobe", [("Flat", 1), ("IVF64,Flat", 1), ("IVF64,Flat", 8)])
def test_recall_against_sets_of_search_and_top_k(data, factory, nprobe):
    normalizer = fit(CSLS(k=3), data)
    index = NormalizedIndex(normalizer, factory, nprobe=nprobe).fit()
    queries = data["queries"][:40]
    per_query = index.recall(queries, k=10, per_query=True)
    found = index.search(queries, k=10)[0]
    exact = normalizer.top_k(queries=queries, k=10)[0]
    np.testing.assert_allclose(per_query, reference_recall(found, exact))
    assert index.recall(queries, k=10) == pytest.approx(per_query.mean())
    if factory == "Flat":
        assert per_query.min() == 1.0
    else:  # an IVF index misses items, more of them at a small nprobe
        assert per_query.mean() < 1.0


def test_recall_counts_missing_results_as_misses(data):
    """nprobe=1 over 64 lists leaves -1 slots: they are misses, never matches."""
    normalizer = fit(NearestNeighborNormalization(k=5), data)
    index = NormalizedIndex(normalizer, "IVF64,Flat", nprobe=1).fit()
    queries = data["queries"][:30]
    found = index.search(queries, k=100)[0]
    assert (found < 0).any()
    exact = normalizer.top_k(queries=queries, k=100)[0]
    per_query = index.recall(queries, k=100, per_query=True)
    np.testing.assert_allclose(per_query, reference_recall(found, exact))
    assert (per_query <= (found >= 0).mean(axis=1)).all()


def test_recall_needs_a_fitted_index_and_a_valid_k(data):
    with pytest.raises(NotFittedError):
        NormalizedIndex(Centering()).recall(data["queries"])
    index = NormalizedIndex(fit(Centering(), data)).fit()
    with pytest.raises(ValueError, match="k must be an integer"):
        index.recall(data["queries"], k=0)


# -- factory strings FAISS cannot take --------------------------------------------------


@pytest.mark.parametrize("factory, match", [
    ("HNSW1", r"factory='HNSW1' cannot be built: an HNSW graph needs at least 2 links"),
    ("HNSW0", r"factory='HNSW0' cannot be built"),
    ("IVF4_HNSW1,Flat", r"got 'HNSW1'"),
    ("IVF4,PQ4x0", r"factory='IVF4,PQ4x0' cannot be built: a quantiser's codes need at least 1 bit"),
    ("RQ1x0", r"cannot be built: a quantiser's codes"),
])
def test_factories_that_would_crash_faiss_are_refused_before_it_sees_them(data, factory, match,
                                                                          monkeypatch):
    faiss = import_faiss()

    def unreachable(*args):
        raise AssertionError("FAISS was given a factory that crashes it")

    monkeypatch.setattr(faiss, "index_factory", unreachable)
    with pytest.raises(ValueError, match=match):
        NormalizedIndex(fit(Centering(), data), factory).fit()


@pytest.mark.parametrize("factory, match", [
    ("IDMap,Flat", (r"FAISS could not add the \d+ gallery vectors with factory='IDMap,Flat': "
                   r"add does not make sense with IndexIDMap")),
    ("IVF0,Flat", (r"FAISS could not search \d+ queries with factory='IVF0,Flat': "
                  r"Error: 'cur_nprobe > 0' failed")),
    ("NSG4", r"FAISS could not add the \d+ gallery vectors with factory='NSG4'"),
    ("HNSW100000000", r"FAISS could not add the \d+ gallery vectors with factory='HNSW100000000'"),
])
def test_faiss_errors_become_value_errors_naming_the_factory(factory, match):
    rng = np.random.default_rng(3)  # 40 items: NSG needs more than 100
    bank, gallery, queries = (rng.normal(size=(n, N_DIMS)) for n in (30, 40, 3))
    normalizer = Centering().fit(bank, gallery=gallery)
    with pytest.raises(ValueError, match=match):
        NormalizedIndex(normalizer, factory).fit().search(queries, k=5)


def test_hnsw2_and_up_still_build(data):
    index = NormalizedIndex(fit(Centering(), data), "HNSW2").fit()
    assert index.search(data["queries"], k=3)[0].shape == (len(data["queries"]), 3)


# -- "auto" search settings, chosen on calibration queries ---------------------------------


def lifted_data(seed=0):
    """Clustered items near the bank, then random directions far from every query: the items
    a normaliser lifts, in lists no query is near."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, N_DIMS)) * 3
    near = centres[rng.integers(20, size=1500)] + rng.normal(size=(1500, N_DIMS))
    far = rng.normal(size=(1500, N_DIMS))
    bank = centres[rng.integers(20, size=300)] + rng.normal(size=(300, N_DIMS))
    queries = centres[rng.integers(20, size=200)] + rng.normal(size=(200, N_DIMS))
    return {"bank": bank, "gallery": np.vstack([near, far]), "queries": queries}


def smallest_reaching(normalizer, factory, parameter, ladder, queries, target):
    """By hand: an index per setting, the first whose recall@10 on ``queries`` reaches the target."""
    exact = normalizer.top_k(queries=queries, k=10)[0]
    for value in ladder:
        index = NormalizedIndex(normalizer, factory, **{parameter: value}).fit()
        recall = reference_recall(index.search(queries, k=10)[0], exact).mean()
        if recall >= target:
            break
    return value, recall


@pytest.mark.parametrize(("factory", "parameter", "ladder"), [
    ("IVF64,Flat", "nprobe", [1, 2, 4, 8, 16, 32, 64]),
    ("HNSW4", "ef_search", [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]),
])
def test_auto_settings_are_the_smallest_that_reach_the_target(factory, parameter, ladder):
    data = lifted_data()
    normalizer = InvertedSoftmax(beta=30.0).fit(data["bank"], gallery=data["gallery"])
    index = NormalizedIndex(normalizer, factory, target_recall=0.9).fit(calibration_queries=data["queries"])
    value, recall = smallest_reaching(normalizer, factory, parameter, ladder, data["queries"], 0.9)
    assert getattr(index, parameter + "_") == value
    assert index.calibration_recall_ == pytest.approx(recall)
    assert 1 < value < ladder[-1]  # the ladder was climbed, and stopped before its top
    assert index.recall(data["queries"], k=10) == pytest.approx(recall)


def test_auto_settings_are_chosen_on_the_bank_when_no_queries_are_given():
    data = lifted_data()
    from_bank = NormalizedIndex(CSLS(k=3), "IVF64,Flat").fit(data["bank"], gallery=data["gallery"])
    given = NormalizedIndex(CSLS(k=3), "IVF64,Flat").fit(
        data["bank"], gallery=data["gallery"], calibration_queries=data["bank"][::-1])
    assert from_bank.nprobe_ == given.nprobe_ and from_bank.calibration_recall_ >= 0.98
    assert from_bank.ef_search_ is None


def test_integer_settings_are_kept_and_measure_nothing(data, monkeypatch):
    normalizer = fit(CSLS(k=3), data)
    def no_exact_search(*args, **kwargs):
        raise AssertionError("calibrated with integer settings")

    monkeypatch.setattr(type(normalizer), "top_k", no_exact_search)
    index = NormalizedIndex(normalizer, "IVF16,Flat", nprobe=5).fit(calibration_queries=data["queries"])
    assert (index.nprobe_, index.ef_search_, index.calibration_recall_) == (5, None, None)
    flat = NormalizedIndex(normalizer, "Flat").fit(calibration_queries=data["queries"])
    assert (flat.nprobe_, flat.ef_search_, flat.calibration_recall_) == (None, None, None)


def test_without_calibration_queries_auto_warns_and_uses_the_fixed_settings(data):
    normalizer = fit(CSLS(k=3), data)
    with pytest.warns(UserWarning, match=r"chose nprobe=16 without measuring recall.*calibration_queries"):
        index = NormalizedIndex(normalizer, "IVF16,Flat").fit()
    assert (index.nprobe_, index.calibration_recall_) == (16, None)  # 128, capped at 16 lists
    with pytest.warns(UserWarning, match=r"chose ef_search=512 without measuring"):
        assert NormalizedIndex(normalizer, "HNSW8").fit().ef_search_ == 512


def test_a_target_met_only_by_every_list_warns_that_flat_answers_as_well():
    data = lifted_data()
    normalizer = InvertedSoftmax(beta=30.0).fit(data["bank"], gallery=data["gallery"])
    with pytest.warns(UserWarning, match=r"only at nprobe=64, every inverted list.*factory='Flat'"):
        index = NormalizedIndex(normalizer, "IVF64,Flat", target_recall=1.0).fit(
            calibration_queries=data["queries"])
    assert index.calibration_recall_ == 1.0


def test_a_target_hnsw_does_not_reach_warns_with_the_recall_it_reaches(monkeypatch):
    data = lifted_data()
    monkeypatch.setattr(sys.modules[NormalizedIndex.__module__], "MAX_EF_SEARCH", 16)
    normalizer = InvertedSoftmax(beta=30.0).fit(data["bank"], gallery=data["gallery"])
    with pytest.warns(UserWarning, match=r"reaches recall@10 0\.\d+ .* at ef_search=16, below target_recall=1\.0"):
        index = NormalizedIndex(normalizer, "HNSW4", target_recall=1.0).fit(calibration_queries=data["queries"])
    assert index.ef_search_ == 16 and index.calibration_recall_ < 1.0


def test_a_later_integer_setting_overrides_the_chosen_one(data):
    normalizer = fit(CSLS(k=3), data)
    index = NormalizedIndex(normalizer, "IVF16,Flat").fit(calibration_queries=data["queries"])
    index.set_params(nprobe=3).search(data["queries"][:1])
    assert faiss.extract_index_ivf(index.index_).nprobe == 3
    index.set_params(nprobe="auto").search(data["queries"][:1])
    assert faiss.extract_index_ivf(index.index_).nprobe == index.nprobe_


@pytest.mark.parametrize("factory", ["IVF16,Flat", "Flat"])
@pytest.mark.parametrize("queries, match", [
    (np.zeros((0, N_DIMS)), "calibration_queries .*has no rows"),
    (np.zeros((5, N_DIMS + 1)), r"calibration_queries must have shape \(n_queries, 16\).*\(5, 17\)"),
    (np.full((5, N_DIMS), np.nan), "calibration_queries"),
])
def test_bad_calibration_queries_are_refused_before_the_index_is_built(data, factory, queries, match):
    normalizer = fit(CSLS(k=3), data)
    index = NormalizedIndex(normalizer, factory)
    with pytest.raises(ValueError, match=match):
        index.fit(calibration_queries=queries)
    assert not hasattr(index, "index_")


def test_a_reranked_normalisers_recall_is_capped_by_its_candidates_not_the_lists():
    """GC is served from the n_candidates best raw items: past the setting where they are
    all found, more lists add nothing, and the warning names n_candidates."""
    data = lifted_data()
    normalizer = GloballyCorrected().fit(data["bank"], gallery=data["gallery"])
    with pytest.warns(UserWarning, match=r"reaches at most recall@10 0\.\d+ .*n_candidates=10.*Raise n_candidates"):
        index = NormalizedIndex(normalizer, "IVF64,Flat", n_candidates=10).fit(calibration_queries=data["queries"])
    every_list = NormalizedIndex(normalizer, "IVF64,Flat", n_candidates=10, nprobe=64).fit()
    ceiling = every_list.recall(data["queries"], k=10)
    assert index.calibration_recall_ == pytest.approx(ceiling) and ceiling < 0.98
    assert index.nprobe_ < 64
    smaller = index.nprobe_ // 2
    if smaller:
        below = NormalizedIndex(normalizer, "IVF64,Flat", n_candidates=10, nprobe=smaller).fit()
        assert below.recall(data["queries"], k=10) < ceiling


def test_the_index_holds_the_settings_after_fit_and_search_validates_them(data):
    normalizer = fit(CSLS(k=3), data)
    hnsw = NormalizedIndex(normalizer, "HNSW8", ef_search=300).fit()
    assert hnsw.index_.hnsw.efSearch == 300  # as written by faiss.write_index
    ivf = NormalizedIndex(normalizer, "IVF16,Flat", nprobe=3).fit()
    assert faiss.extract_index_ivf(ivf.index_).nprobe == 3
    with pytest.raises(ValueError, match="'nprobe' parameter"):
        ivf.set_params(nprobe=0).search(data["queries"][:1])


@pytest.mark.parametrize("target_recall", [0, -0.5, 1.01, True, "high"])
def test_target_recall_must_lie_in_the_unit_interval(data, target_recall):
    normalizer = fit(CSLS(k=3), data)
    with pytest.raises(ValueError, match="'target_recall' parameter"):
        NormalizedIndex(normalizer, "IVF16,Flat", target_recall=target_recall).fit()
