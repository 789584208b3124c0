"""Dual softmax (DSL) against the dense formula of SPEC, transductive and with a querybank."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import softmax
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold

from skqbnorm import (
    DualSoftmax,
)
from skqbnorm.datasets import make_hubness_sims
from skqbnorm.metrics import make_retrieval_scorer, retrieval_metrics

from helpers import stable_ranking as order

# -- the dense reference (SPEC, "Dual softmax at inference"), literally ------------------


def dual_softmax_transductive(sims, temperature):
    """S'[q, g] = S[q, g] * softmax over the queries of S[:, g] / T."""
    return sims * softmax(sims / temperature, axis=0)


def dual_softmax_querybank(query_sims, bank_sims, temperature):
    """The softmax denominator over the querybank: S * exp(S / T) / sum_b exp(P / T)."""
    return query_sims * np.exp(query_sims / temperature) / np.exp(bank_sims / temperature).sum(axis=0)


def sims_pair(rng, n_queries=30, n_bank=70, n_gallery=25, scale=1.0, dtype=np.float64):
    spread = rng.lognormal(0.0, 0.5, size=n_gallery) * 0.15
    bank = rng.normal(size=(n_bank, n_gallery)) * spread + 0.3
    queries = rng.normal(size=(n_queries, n_gallery)) * spread + 0.3
    return (queries * scale).astype(dtype), (bank * scale).astype(dtype)


def tolerance(dtype):
    return {"rtol": 1e-4, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


# -- the formula --------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [1.0, 0.1, 0.02])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matches_dense_reference(rng, temperature, dtype):
    queries, bank = sims_pair(rng, dtype=dtype)
    q64, b64 = queries.astype(np.float64), bank.astype(np.float64)
    fitted = DualSoftmax(temperature=temperature).fit(bank)
    out = fitted.transform(queries)
    assert out.dtype == dtype
    expected = dual_softmax_querybank(q64, b64, temperature)
    assert_allclose(out, expected, **tolerance(dtype))
    if dtype == np.float64:
        assert_array_equal(order(out), order(expected))
    # transductive: fit_transform on the test matrix runs the softmax over the test queries
    transductive = DualSoftmax(temperature=temperature).fit_transform(queries)
    assert transductive.dtype == dtype
    assert_allclose(transductive, dual_softmax_transductive(q64, temperature), **tolerance(dtype))


def test_hand_computed_values_and_the_sign_of_similarities():
    # Column 0: softmax weights e^.5 / (e^.5 + e^-.5) and e^-.5 / (...); column 1 ties.
    sims = np.array([[0.5, -0.3], [-0.5, -0.3]])
    out = DualSoftmax(temperature=1.0).fit_transform(sims)
    high = np.exp(0.5) / (np.exp(0.5) + np.exp(-0.5))
    assert_allclose(out, [[0.5 * high, -0.15], [-0.5 * (1 - high), -0.15]], rtol=1e-14)
    # literally S * weight: a negative similarity grows more negative with its weight,
    # and a similarity of 0 scores 0 whatever its weight
    normalizer = DualSoftmax(temperature=1.0).fit(np.array([[-0.2, 0.0], [-0.4, 0.0]]))
    weights = np.exp(np.array([-0.2, -0.4]) - np.log(np.exp(-0.2) + np.exp(-0.4)))
    assert_allclose(normalizer.transform([[-0.2, 0.0]]), [[-0.2 * weights[0], 0.0]], rtol=1e-14)
    assert normalizer.transform([[-0.2, 0.0]])[0, 0] < normalizer.transform([[-0.4, 0.0]])[0, 0] * 0.5


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_embedding_mode_matches_reference(rng, metric):
    bank_emb, gallery_emb, query_emb = (rng.normal(size=(n, 12)) * 0.3 for n in (90, 30, 15))

    def prepare(a):
        return a / np.linalg.norm(a, axis=1, keepdims=True) if metric == "cosine" else a

    bank_sims = prepare(bank_emb) @ prepare(gallery_emb).T
    query_sims = prepare(query_emb) @ prepare(gallery_emb).T
    fitted = DualSoftmax(temperature=0.1, metric=metric).fit(bank_emb, gallery=gallery_emb)
    out = fitted.transform(fitted.similarities(query_emb))
    expected = dual_softmax_querybank(query_sims, bank_sims, 0.1)
    assert_allclose(out, expected, rtol=1e-10, atol=1e-12)
    assert_array_equal(order(out), order(expected))
    transductive = DualSoftmax(temperature=0.1, metric=metric).fit_transform(
        query_emb, gallery=gallery_emb
    )
    assert_allclose(transductive, dual_softmax_transductive(query_sims, 0.1), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("embedded", [False, True])
def test_bitwise_the_same_for_every_split(rng, tmp_path, leaves, embedded):
    queries, bank = sims_pair(rng, n_bank=333)
    bank = np.round(bank, 3)
    if embedded:
        bank, gallery = rng.normal(size=(333, 8)), rng.normal(size=(25, 8))
        queries = DualSoftmax().fit(bank, gallery=gallery).similarities(rng.normal(size=(30, 8)))
    else:
        gallery = None
        np.save(tmp_path / "bank.npy", bank)
        bank = np.load(tmp_path / "bank.npy", mmap_mode="r")
    expected = DualSoftmax(temperature=0.05).fit(bank, gallery=gallery)
    scores, top = expected.transform(queries), expected.top_k(queries, k=5)
    for working_memory in (1e-4, None):
        for n_jobs in (1, 2):
            fitted = clone(expected).set_params(working_memory=working_memory, n_jobs=n_jobs)
            fitted.fit(bank, gallery=gallery)
            assert_array_equal(fitted.bank_soft_max_, expected.bank_soft_max_)
            assert_array_equal(fitted.transform(queries), scores)
            for got, want in zip(fitted.top_k(queries, k=5), top):
                assert_array_equal(got, want)
    bank_sims = np.asarray(bank) if gallery is None else expected.similarities(bank)
    assert_allclose(scores, dual_softmax_querybank(queries, bank_sims, 0.05), rtol=1e-10)


def test_dask_equals_numpy(rng):
    da = pytest.importorskip("dask.array")
    queries, bank = sims_pair(rng, n_bank=300)
    expected = DualSoftmax(temperature=0.1).fit(bank)
    fitted = clone(expected).fit(da.from_array(bank, chunks=(70, 10)))
    assert_array_equal(fitted.bank_soft_max_, expected.bank_soft_max_)
    assert_array_equal(fitted.transform(da.from_array(queries)).compute(), expected.transform(queries))


def test_top_k_equals_transform_then_stable_sort(rng):
    queries, bank = sims_pair(rng)
    queries[:, 5] = queries[:, 6]
    bank[:, 5] = bank[:, 6]  # tied scores
    fitted = DualSoftmax(temperature=0.1).fit(bank)
    scores = fitted.transform(queries)
    indices, top = fitted.top_k(queries, k=7)
    assert_array_equal(indices, order(scores)[:, :7])
    assert_array_equal(top, np.take_along_axis(scores, indices, axis=1))


# -- numerics and input -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_finite_on_logit_scale_similarities(rng, dtype):
    # CLIP-style logits (x100) at T = 1: exp(S / T) overflows, the log-domain form does not.
    queries, bank = sims_pair(rng, scale=100.0, dtype=dtype)
    out = DualSoftmax(temperature=1.0).fit_transform(queries)
    assert out.dtype == dtype and np.isfinite(out).all()
    assert_allclose(out, dual_softmax_transductive(queries.astype(float), 1.0), **tolerance(dtype))
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.exp(queries.astype(np.float32))).all()  # the literal form
    fitted = DualSoftmax().fit(bank)
    assert np.isfinite(fitted.bank_soft_max_).all() and np.isfinite(fitted.transform(bank)).all()


def test_scores_beyond_the_dtype_are_refused(rng):
    # A query far above the whole bank: its weight exp((S - c) / T) overflows float64.
    normalizer = DualSoftmax(temperature=0.1).fit(rng.normal(size=(20, 4)))
    with pytest.raises(ValueError, match=r"overflow float64, first at X row 0, gallery item"):
        normalizer.transform(np.full((1, 4), 100.0))
    # in float32 the score is computed again in float64 before it is refused
    with pytest.raises(ValueError, match=r"overflow float32"):
        normalizer.transform(np.full((1, 4), 20.0, dtype=np.float32))


@pytest.mark.parametrize("dtype, temperature, small", [(np.float64, 0.01, 2.3e-308),
                                                       (np.float32, 0.1, 1e-30)])
def test_a_finite_score_whose_weight_overflows_is_kept(dtype, temperature, small):
    # Every bank similarity to item 0 is -10: the weight of S = 0, about e^(10 / T), is
    # beyond the dtype, yet S * weight is 0 for S = 0 and finite for a small S.
    normalizer = DualSoftmax(temperature=temperature).fit(np.full((5, 2), -10.0, dtype=dtype))
    queries = np.array([[0.0, -10.0], [small, -10.0], [-small, -10.0]], dtype=dtype)
    with np.errstate(over="ignore"):
        assert np.isinf(np.exp(dtype(10.0 / temperature)))
    out = normalizer.transform(queries)
    c = -10.0 + temperature * np.log(5.0)
    expected = [np.sign(s) * np.exp(np.log(abs(s)) + (s - c) / temperature) if s else 0.0
                for s in queries[:, 0].astype(float)]
    assert out.dtype == dtype and np.isfinite(out).all()
    assert out[0, 0] == 0
    assert_allclose(out[:, 0], expected, rtol=1e-12 if dtype == np.float64 else 1e-4)
    assert_allclose(out[:, 1], -10.0 * np.exp((-10.0 - c) / temperature), rtol=1e-5)


def test_temperature_beyond_float32(rng):
    bank = rng.normal(size=(30, 5)).astype(np.float32)
    out = DualSoftmax(temperature=1e-60).fit(bank).transform(bank)
    assert out.dtype == np.float32 and np.isfinite(out).all()
    # T -> 0: each column's weight is 1 at the bank's maximum, 0 elsewhere
    winners = bank == bank.max(axis=0)
    assert_array_equal(out, np.where(winners, bank, 0))


@pytest.mark.parametrize(
    "temperature", [0.0, -1.0, np.nan, np.inf, True, "1"], ids=repr
)
def test_bad_temperature_is_named(rng, temperature):
    with pytest.raises(ValueError, match=r"'temperature' parameter of DualSoftmax"):
        DualSoftmax(temperature=temperature).fit(rng.normal(size=(5, 3)))


def test_a_gallery_bank_is_refused(rng):
    _, bank = sims_pair(rng)
    with pytest.raises(ValueError, match=r"DualSoftmax does not use a gallery bank"):
        DualSoftmax().fit(bank, gallery_bank=bank[:5])


def test_non_finite_input_is_named(rng):
    _, bank = sims_pair(rng)
    bank[2, 3] = np.inf
    with pytest.raises(ValueError, match=r"querybank row 2 to gallery item 3 is inf"):
        DualSoftmax().fit(bank)
    fitted = DualSoftmax().fit(bank[:2])
    queries = np.zeros((3, bank.shape[1]))
    queries[1, 4] = np.nan
    with pytest.raises(ValueError, match=r"X row 1 to gallery item 4 is nan"):
        fitted.transform(queries)


def test_inputs_are_never_modified_and_pickle(rng):
    queries, bank = sims_pair(rng)
    copies = queries.copy(), bank.copy()
    fitted = DualSoftmax().fit(bank)
    out = fitted.transform(queries)
    fitted.fit_transform(bank)
    assert_array_equal(queries, copies[0])
    assert_array_equal(bank, copies[1])
    assert_array_equal(pickle.loads(pickle.dumps(fitted)).transform(queries), fitted.transform(queries))
    assert_array_equal(DualSoftmax().fit(bank).transform(queries), out)


# -- scikit-learn -------------------------------------------------------------------------


@pytest.mark.slow
def test_grid_search_over_temperature():
    sims, gt, _ = make_hubness_sims(900, 150, 0, random_state=0)
    grid = {"temperature": [0.003, 0.03, 1.0]}
    folds = KFold(3)
    search = GridSearchCV(
        DualSoftmax(), grid, scoring=make_retrieval_scorer("R@1"), cv=folds
    ).fit(sims, gt)
    scores = search.cv_results_["mean_test_score"]
    assert len(scores) == 3 and search.best_score_ == scores.max()
    assert search.best_score_ > retrieval_metrics(sims, gt)["R@1"]
    # a recorded score: the held-out rows, normalised over a querybank of the other folds
    train, test = next(folds.split(sims))
    first = DualSoftmax(**search.cv_results_["params"][0]).fit(sims[train]).transform(sims[test])
    assert np.isclose(search.cv_results_["split0_test_score"][0], retrieval_metrics(first, gt[test])["R@1"])


def test_dual_softmax_refuses_a_bank_overflowing_in_one_column_only():
    # column 0's soft maximum, 1.7e308 + 1e308 * log(2), overflows float64; column 1's does not
    bank = np.array([[1.7e308, 0.0], [1.7e308, 0.0]])
    with pytest.raises(ValueError, match=r"temperature=1e\+308 is too large.*overflow float64"):
        DualSoftmax(temperature=1e308).fit(bank)


def test_dual_softmax_temperature_beyond_float32_in_float32():
    # T = 4e38 is inf in float32, but the soft maxima 0 + T * log(2) = 2.77e38 are not:
    # the weights are exp((s - T log 2) / T) = exp(-log 2) = 1/2, the scores s / 2.
    bank = np.zeros((2, 2), dtype=np.float32)
    out = DualSoftmax(temperature=4e38).fit(bank).transform(np.array([[1.0, 2.0]], np.float32))
    assert out.dtype == np.float32
    assert_allclose(out, [[0.5, 1.0]], rtol=1e-6)
