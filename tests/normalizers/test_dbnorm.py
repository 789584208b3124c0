"""DBNorm's dual inverted softmaxes and the gallery bank, against SPEC's formula."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold

from skqbnorm import (
    CSLS,
    Centering,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
)
from skqbnorm.datasets import make_hubness_sims
from skqbnorm.metrics import make_retrieval_scorer, retrieval_metrics

import reference as ref
from helpers import stable_ranking as ranking
from helpers import tolerance

# -- dense references, SPEC's formula taken literally ---------------------------------


def soft_max(bank_sims, beta):
    return logsumexp(beta * bank_sims, axis=0) / beta


def dual_inverted_softmax(query_sims, bank_sims, gallery_bank_sims, beta1, beta2):
    """log(eta1 * eta2) / (beta1 + beta2) + mean_j bias_j, from the log form of SPEC."""
    c1, c2 = soft_max(bank_sims, beta1), soft_max(gallery_bank_sims, beta2)
    log_eta = (
        (beta1 + beta2) * query_sims
        - logsumexp(beta1 * bank_sims, axis=0)
        - logsumexp(beta2 * gallery_bank_sims, axis=0)
    )
    bias = (beta1 * c1 + beta2 * c2) / (beta1 + beta2)
    return log_eta / (beta1 + beta2) + bias.mean()


def dual_product(query_sims, bank_sims, gallery_bank_sims, beta1, beta2):
    """The product of the two Inverted Softmaxes, in the exp domain (small betas only)."""
    eta1 = np.exp(beta1 * query_sims) / np.exp(beta1 * bank_sims).sum(axis=0)
    eta2 = np.exp(beta2 * query_sims) / np.exp(beta2 * gallery_bank_sims).sum(axis=0)
    return eta1 * eta2


def dual_dynamic_inverted_softmax(query_sims, bank_sims, gallery_bank_sims, beta1, beta2, k):
    """Per row, each factor's denominator only if the row's top-1 is in its bank's set."""
    w1, w2 = beta1 / (beta1 + beta2), beta2 / (beta1 + beta2)
    c1, c2 = soft_max(bank_sims, beta1), soft_max(gallery_bank_sims, beta2)
    query_set = ref.activation_set(bank_sims, k)
    gallery_set = ref.activation_set(gallery_bank_sims, k)
    out = np.array(query_sims, dtype=np.float64)
    for q, row in enumerate(query_sims):
        top1 = int(np.argmax(row))
        if top1 in query_set:
            out[q] -= w1 * (c1 - c1.mean())
        if top1 in gallery_set:
            out[q] -= w2 * (c2 - c2.mean())
    return out


# -- data --------------------------------------------------------------------------


def three_banks(rng, n_queries=40, n_bank=60, n_gallery_bank=45, n_gallery=25, dtype=np.float64):
    queries = rng.normal(size=(n_queries, n_gallery))
    bank = rng.normal(size=(n_bank, n_gallery))
    gallery_bank = rng.normal(size=(n_gallery_bank, n_gallery))
    return queries.astype(dtype), bank.astype(dtype), gallery_bank.astype(dtype)


def gated_banks(rng):
    """Banks whose activation sets differ, so every gate pattern occurs."""
    queries, bank, gallery_bank = three_banks(rng, n_queries=200, n_gallery=12)
    bank[:, :6] += 3.0  # the querybank activates items 0-5 only
    gallery_bank[:, 3:9] += 3.0  # the gallery bank items 3-8 only
    return queries, bank, gallery_bank


CASES = [
    (DualInvertedSoftmax(beta1=2.0, beta2=5.0),
     lambda q, b, h: dual_inverted_softmax(q, b, h, 2.0, 5.0)),
    (DualInvertedSoftmax(beta1=1 / 1.99, beta2=3.0),  # the released code's betas
     lambda q, b, h: dual_inverted_softmax(q, b, h, 1 / 1.99, 3.0)),
    (DualInvertedSoftmax(),
     lambda q, b, h: dual_inverted_softmax(q, b, h, 20.0, 1.0)),
    (DualDynamicInvertedSoftmax(beta1=2.0, beta2=5.0, k=1),
     lambda q, b, h: dual_dynamic_inverted_softmax(q, b, h, 2.0, 5.0, 1)),
    (DualDynamicInvertedSoftmax(beta1=7.0, beta2=1.5, k=2),
     lambda q, b, h: dual_dynamic_inverted_softmax(q, b, h, 7.0, 1.5, 2)),
]


IDS = ["dual", "dual-released", "dual-defaults", "dynamic-k1", "dynamic-k2"]


# -- the formula -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("estimator, reference", CASES, ids=IDS)
def test_matches_reference_precomputed(rng, estimator, reference, dtype):
    queries, bank, gallery_bank = gated_banks(rng)
    queries, bank, gallery_bank = (a.astype(dtype) for a in (queries, bank, gallery_bank))
    out = clone(estimator).fit(bank, gallery_bank=gallery_bank).transform(queries)
    assert out.dtype == dtype
    expected = reference(*(a.astype(np.float64) for a in (queries, bank, gallery_bank)))
    assert_allclose(out, expected, **tolerance(dtype, np.abs(expected).max()))
    if dtype == np.float64:
        assert_array_equal(ranking(out), ranking(expected))


def test_log_form_is_the_product_of_two_inverted_softmaxes(rng):
    queries, bank, gallery_bank = three_banks(rng)
    out = DualInvertedSoftmax(beta1=2.0, beta2=3.0).fit(bank, gallery_bank=gallery_bank)
    scores = out.transform(queries)
    product = dual_product(queries, bank, gallery_bank, 2.0, 3.0)
    assert_allclose(np.exp(5.0 * (scores - out.mean_bias_)), product, rtol=1e-10)
    assert_array_equal(ranking(scores), ranking(product))


def test_dynamic_reference_covers_every_gate_pattern(rng):
    queries, bank, gallery_bank = gated_banks(rng)
    dynamic = DualDynamicInvertedSoftmax(beta1=2.0, beta2=5.0).fit(bank, gallery_bank=gallery_bank)
    top1 = queries.argmax(axis=1)
    patterns = set(zip(dynamic.activated_[top1], dynamic.gallery_bank_activated_[top1]))
    assert patterns == {(True, True), (True, False), (False, True), (False, False)}
    out = dynamic.transform(queries)
    raw = ~(dynamic.activated_[top1] | dynamic.gallery_bank_activated_[top1])
    assert_array_equal(out[raw], queries[raw])  # rows with both gates closed stay raw
    both = dynamic.activated_[top1] & dynamic.gallery_bank_activated_[top1]
    static = DualInvertedSoftmax(beta1=2.0, beta2=5.0).fit(bank, gallery_bank=gallery_bank)
    assert_array_equal(out[both], static.transform(queries)[both])


def test_dynamic_equals_static_when_both_banks_activate_every_item(rng):
    queries, bank, gallery_bank = three_banks(rng, n_gallery=15)
    bank[np.arange(15), np.arange(15)] += 10  # each item is some row's top-1 in both banks
    gallery_bank[np.arange(15), np.arange(15)] += 10
    dynamic = DualDynamicInvertedSoftmax(beta1=3.0, beta2=2.0).fit(bank, gallery_bank=gallery_bank)
    assert dynamic.activated_.all() and dynamic.gallery_bank_activated_.all()
    static = DualInvertedSoftmax(beta1=3.0, beta2=2.0).fit(bank, gallery_bank=gallery_bank)
    assert_array_equal(dynamic.transform(queries), static.transform(queries))


# -- equivalences ------------------------------------------------------------------


def test_without_gallery_bank_term_equals_inverted_softmax(rng):
    queries, bank, _ = three_banks(rng)
    dual = DualInvertedSoftmax(beta1=4.0, beta2=9.0).fit(bank)
    assert dual.gallery_bank_soft_max_ is None and dual.n_gallery_bank_ == 0
    assert_array_equal(dual.transform(queries), InvertedSoftmax(beta=4.0).fit(bank).transform(queries))
    dynamic = DualDynamicInvertedSoftmax(beta1=4.0, beta2=9.0, k=2).fit(bank)
    dis = DynamicInvertedSoftmax(beta=4.0, k=2).fit(bank)
    assert_array_equal(dynamic.transform(queries), dis.transform(queries))


def test_vanishing_beta2_tends_to_inverted_softmax(rng):
    queries, bank, gallery_bank = three_banks(rng)
    dual = DualInvertedSoftmax(beta1=4.0, beta2=1e-9).fit(bank, gallery_bank=gallery_bank)
    is_scores = InvertedSoftmax(beta=4.0).fit(bank).transform(queries)
    assert_allclose(dual.transform(queries), is_scores, atol=1e-8)


def test_refit_without_gallery_bank_forgets_it(rng):
    queries, bank, gallery_bank = three_banks(rng)
    dual = DualDynamicInvertedSoftmax(beta1=4.0).fit(bank, gallery_bank=gallery_bank)
    dual.fit(bank)
    assert dual.gallery_bank_activated_ is None and dual.gallery_bank_soft_max_ is None
    dis = DynamicInvertedSoftmax(beta=4.0).fit(bank)
    assert_array_equal(dual.transform(queries), dis.transform(queries))


# -- inputs: embeddings, memmaps, chunks, threads, dask --------------------------------


@pytest.mark.parametrize("metric", ["cosine", "dot"])
@pytest.mark.parametrize("estimator, reference", CASES, ids=IDS)
def test_matches_reference_on_embeddings(rng, estimator, reference, metric):
    dims = 8
    gallery = rng.normal(size=(25, dims))
    bank, gallery_bank, queries = (rng.normal(size=(n, dims)) for n in (60, 45, 30))
    fitted = clone(estimator).set_params(metric=metric)
    fitted.fit(bank, gallery=gallery, gallery_bank=gallery_bank)

    def sims(a):
        if metric == "cosine":
            a, g = (x / np.linalg.norm(x, axis=1, keepdims=True) for x in (a, gallery))
            return a @ g.T
        return a @ gallery.T

    expected = reference(sims(queries), sims(bank), sims(gallery_bank))
    out = fitted.transform(fitted.similarities(queries))
    assert_allclose(out, expected, rtol=1e-10, atol=1e-10)
    assert_array_equal(ranking(out), ranking(expected))
    precomputed = clone(fitted).fit(sims(bank), gallery_bank=sims(gallery_bank))
    assert_allclose(fitted.bias_, precomputed.bias_, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("estimator, reference", CASES, ids=IDS)
def test_chunks_threads_and_memmaps_do_not_change_results(rng, tmp_path, estimator, reference):
    queries, bank, gallery_bank = three_banks(rng, n_bank=333, n_gallery_bank=277)
    np.save(tmp_path / "bank.npy", bank)
    np.save(tmp_path / "gallery_bank.npy", gallery_bank)
    whole = clone(estimator).fit(bank, gallery_bank=gallery_bank)
    tiny = clone(estimator).set_params(working_memory=1e-4, n_jobs=2).fit(
        np.load(tmp_path / "bank.npy", mmap_mode="r"),
        gallery_bank=np.load(tmp_path / "gallery_bank.npy", mmap_mode="r"),
    )
    assert_array_equal(tiny.bias_, whole.bias_)  # bitwise: one fixed reduction tree
    assert_array_equal(tiny.transform(queries), whole.transform(queries))
    assert_allclose(whole.transform(queries), reference(queries, bank, gallery_bank), rtol=1e-10, atol=1e-10)


def test_embedding_chunks_and_threads_do_not_change_results(rng):
    gallery = rng.normal(size=(30, 6))
    bank, gallery_bank, queries = (rng.normal(size=(n, 6)) for n in (90, 70, 20))
    estimator = DualDynamicInvertedSoftmax(beta1=3.0, beta2=4.0, k=2)
    whole = clone(estimator).fit(bank, gallery=gallery, gallery_bank=gallery_bank)
    tiny = clone(estimator).set_params(working_memory=1e-4, n_jobs=2)
    tiny.fit(bank, gallery=gallery, gallery_bank=gallery_bank)
    assert_array_equal(tiny.bias_, whole.bias_)
    assert_array_equal(tiny.gallery_bank_activated_, whole.gallery_bank_activated_)
    assert_array_equal(tiny.top_k(queries=queries, k=5)[0], whole.top_k(queries=queries, k=5)[0])


def test_dask_querybank_with_a_gallery_bank(rng):
    da = pytest.importorskip("dask.array")
    queries, bank, gallery_bank = three_banks(rng, n_bank=200)
    estimator = DualInvertedSoftmax(beta1=2.0, beta2=5.0)
    lazy = clone(estimator).fit(da.from_array(bank, chunks=(37, 25)), gallery_bank=gallery_bank)
    eager = clone(estimator).fit(bank, gallery_bank=gallery_bank)
    assert_allclose(lazy.transform(queries), eager.transform(queries), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("estimator", [c[0] for c in CASES], ids=IDS)
def test_top_k_equals_transform_then_stable_sort(rng, estimator):
    queries, bank, gallery_bank = gated_banks(rng)
    fitted = clone(estimator).set_params(working_memory=1e-3).fit(bank, gallery_bank=gallery_bank)
    full = fitted.transform(queries)
    order = ranking(full)[:, :4]
    for indices, scores in (
        fitted.top_k(queries, k=4),
        fitted.top_k(chunks=[queries[:, :5], queries[:, 5:7], queries[:, 7:]], k=4),
    ):
        assert_array_equal(indices, order)
        assert_array_equal(scores, np.take_along_axis(full, order, axis=1))


def test_fit_transform_and_caller_arrays_untouched(rng):
    _, bank, gallery_bank = three_banks(rng)
    copies = bank.copy(), gallery_bank.copy()
    estimator = DualDynamicInvertedSoftmax(beta1=2.0, beta2=5.0)
    out = estimator.fit_transform(bank, gallery_bank=gallery_bank)
    assert_array_equal(out, estimator.transform(bank))
    assert_array_equal(bank, copies[0])
    assert_array_equal(gallery_bank, copies[1])


# -- dtypes and numerics --------------------------------------------------------------


@pytest.mark.parametrize("estimator", [c[0] for c in CASES], ids=IDS)
def test_float32_in_float32_out_and_finite_where_exp_overflows(rng, estimator):
    # CLIP-style logits (x100): beta * s reaches thousands, far past exp's range.
    queries, bank, gallery_bank = (100 * a for a in three_banks(rng, dtype=np.float32))
    fitted = clone(estimator).set_params(beta1=20.0, beta2=30.0)
    out = fitted.fit(bank, gallery_bank=gallery_bank).transform(queries)
    assert out.dtype == np.float32 and np.isfinite(out).all()
    with np.errstate(over="ignore", invalid="ignore"):
        literal = dual_product(*(a.astype(np.float64) for a in (queries, bank, gallery_bank)), 20.0, 30.0)
    assert not np.isfinite(literal).all()  # the literal product really does overflow


def test_mixed_dtypes_keep_the_query_dtype(rng):
    queries, bank, gallery_bank = three_banks(rng)
    fitted = DualInvertedSoftmax(beta1=2.0).fit(bank, gallery_bank=gallery_bank.astype(np.float32))
    assert fitted.transform(queries.astype(np.float32)).dtype == np.float32
    assert fitted.transform(queries).dtype == np.float64


# -- scikit-learn ------------------------------------------------------------------



def hub_data(seed):
    """Queries with planted hubs, a querybank and a gallery bank of the same gallery."""
    sims, gt, bank = make_hubness_sims(600, 80, 300, random_state=seed)
    gallery_bank = make_hubness_sims(1, 80, 250, random_state=seed)[2]
    return sims, gt, bank, gallery_bank


@pytest.mark.slow
def test_grid_search_passes_the_gallery_bank_to_fit():
    sims, gt, _, gallery_bank = hub_data(0)
    grid = {"beta1": [1.0, 30.0], "beta2": [0.5, 30.0]}
    cv = KFold(3)
    search = GridSearchCV(DualInvertedSoftmax(), grid, scoring=make_retrieval_scorer("R@1"), cv=cv)
    search.fit(sims, gt, gallery_bank=gallery_bank)
    assert search.best_estimator_.n_gallery_bank_ == len(gallery_bank)
    # Each recorded score is that of a fit with the gallery bank, on its fold.
    train, test = next(cv.split(sims))
    for params, score in zip(search.cv_results_["params"], search.cv_results_["split0_test_score"]):
        fitted = DualInvertedSoftmax(**params).fit(sims[train], gallery_bank=gallery_bank)
        assert score == retrieval_metrics(fitted.transform(sims[test]), gt[test])["R@1"]
    assert search.best_score_ > retrieval_metrics(sims, gt)["R@1"]


@pytest.mark.slow
def test_grid_search_over_the_dynamic_variant():
    sims, gt, _, gallery_bank = hub_data(1)
    grid = {"beta1": [1.0, 30.0], "beta2": [1.0, 30.0], "k": [1, 5]}
    search = GridSearchCV(DualDynamicInvertedSoftmax(), grid, scoring=make_retrieval_scorer("R@1"), cv=3)
    search.fit(sims, gt, gallery_bank=gallery_bank)
    assert len(search.cv_results_["params"]) == 8
    assert search.best_estimator_.gallery_bank_activated_ is not None
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


# -- bad input -----------------------------------------------------------------------


@pytest.mark.parametrize("normalizer", [
    InvertedSoftmax(), DynamicInvertedSoftmax(), CSLS(k=2), Centering(), GloballyCorrected(),
])
def test_normalizers_without_a_gallery_bank_refuse_one(rng, normalizer):
    _, bank, gallery_bank = three_banks(rng)
    name = type(normalizer).__name__
    with pytest.raises(ValueError, match=rf"{name} does not use a gallery bank.*gallery_bank"):
        normalizer.fit(bank, gallery_bank=gallery_bank)
    assert not hasattr(normalizer, "n_features_in_")  # refused before any work


def test_gallery_bank_column_count_must_match_the_gallery(rng):
    _, bank, gallery_bank = three_banks(rng)
    with pytest.raises(ValueError, match=r"gallery_bank has shape \(45, 24\).*gallery of 25 items"):
        DualInvertedSoftmax().fit(bank, gallery_bank=gallery_bank[:, :24])
    gallery = rng.normal(size=(25, 8))
    with pytest.raises(ValueError, match=r"gallery_bank has shape \(45, 7\).*8 columns"):
        DualInvertedSoftmax().fit(rng.normal(size=(60, 8)), gallery=gallery,
                                  gallery_bank=rng.normal(size=(45, 7)))


@pytest.mark.parametrize("estimator", [DualInvertedSoftmax(), DualDynamicInvertedSoftmax()])
def test_non_finite_gallery_bank_is_named(rng, estimator):
    _, bank, gallery_bank = three_banks(rng)
    gallery_bank[7, 3] = np.nan
    with pytest.raises(ValueError, match=r"gallery_bank contains NaN.*gallery_bank row 7 to gallery item 3"):
        clone(estimator).set_params(working_memory=1e-4, n_jobs=2).fit(bank, gallery_bank=gallery_bank)
    embeddings = rng.normal(size=(10, 4))
    embeddings[2, 1] = np.inf
    with pytest.raises(ValueError, match=r"gallery_bank contains NaN or infinity: gallery_bank embedding 2"):
        clone(estimator).fit(rng.normal(size=(9, 4)), gallery=rng.normal(size=(5, 4)), gallery_bank=embeddings)


@pytest.mark.parametrize("gallery_bank, message", [
    (np.zeros((0, 25)), r"gallery_bank: .*0 sample"),
    (np.zeros(25), r"gallery_bank: Expected 2D array"),
    (np.full((3, 25), "a"), r"gallery_bank"),
])
def test_empty_or_malformed_gallery_bank_is_named(rng, gallery_bank, message):
    _, bank, _ = three_banks(rng)
    with pytest.raises(ValueError, match=message):
        DualInvertedSoftmax().fit(bank, gallery_bank=gallery_bank)


@pytest.mark.parametrize("params, name", [
    ({"beta1": 0.0}, "beta1"), ({"beta1": -1.0}, "beta1"), ({"beta2": 0}, "beta2"),
    ({"beta1": True}, "beta1"), ({"beta2": False}, "beta2"), ({"beta2": np.inf}, "beta2"),
    ({"k": 0}, "k"), ({"k": True}, "k"), ({"k": 1.5}, "k"),
])
def test_bad_parameters_are_named(rng, params, name):
    _, bank, gallery_bank = three_banks(rng)
    with pytest.raises(ValueError, match=rf"'{name}' parameter"):
        DualDynamicInvertedSoftmax(**params).fit(bank, gallery_bank=gallery_bank)


def test_k_beyond_the_gallery_is_refused(rng):
    _, bank, gallery_bank = three_banks(rng)
    with pytest.raises(ValueError, match="k=26 is larger than the gallery"):
        DualDynamicInvertedSoftmax(k=26).fit(bank, gallery_bank=gallery_bank)


def test_overflowing_soft_maxima_name_the_beta(rng):
    _, bank, gallery_bank = three_banks(rng)
    with pytest.raises(ValueError, match=r"beta2=1e-320 is too small.*gallery bank"):
        DualInvertedSoftmax(beta1=1.0, beta2=1e-320).fit(bank, gallery_bank=gallery_bank)


def test_dbnorm_refuses_a_querybank_overflowing_in_one_column_only():
    # column 0's soft maximum, 1.7e308 + log(2) / 1e-308, overflows float64; column 1's does not
    bank = np.array([[1.7e308, 0.0], [1.7e308, 0.0]])
    with pytest.raises(ValueError, match=r"beta1=1e-308 is too small.*overflow float64"):
        DualInvertedSoftmax(beta1=1e-308).fit(bank)
