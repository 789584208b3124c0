"""The normalisers' top_k search against their own transform and a stable sort:
streamed galleries, parallel jobs, few rows at a time, as many threads as the BLAS, and
rankings by the bias alone (without scores)."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

import skqbnorm._core._parallel
import skqbnorm.normalizers._top_k
from skqbnorm import (
    CSLS,
    Centering,
    DualDynamicInvertedSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankZNorm,
    SinkhornNormalization,
)
from skqbnorm.normalizers import index_serving

from helpers import stable_top_k


@pytest.mark.parametrize(
    "estimator",
    [CSLS(k=4), NearestNeighborNormalization(k=3), DynamicInvertedSoftmax(k=3)],
    ids=repr,
)
def test_top_k_search_streams_the_gallery_when_whole_rows_do_not_fit(rng, monkeypatch, estimator):
    bank, gallery, queries = rng.normal(size=(60, 8)), rng.normal(size=(50, 8)), rng.normal(size=(30, 8))
    fitted = estimator.fit(bank, gallery=gallery)
    whole_rows = fitted.top_k(queries=queries, k=6)
    monkeypatch.setattr(skqbnorm.normalizers._top_k, "MIN_WHOLE_ROWS", 10**9)
    fitted.set_params(working_memory=1e-3)  # many column chunks
    streamed = fitted.top_k(queries=queries, k=6)
    assert_array_equal(streamed[0], whole_rows[0])
    assert_allclose(streamed[1], whole_rows[1], rtol=1e-12)
    expected = stable_top_k(fitted.transform(fitted.similarities(queries)), 6)
    assert_array_equal(whole_rows[0], expected[0])


def test_top_k_search_is_the_same_with_parallel_jobs(rng):
    bank, gallery, queries = rng.normal(size=(80, 6)), rng.normal(size=(300, 6)), rng.normal(size=(900, 6))
    fitted = CSLS(k=5).fit(bank, gallery=gallery)
    expected = fitted.top_k(queries=queries, k=4)
    fitted.set_params(n_jobs=3)
    for got, want in zip(fitted.set_params(working_memory=0.05).top_k(queries=queries, k=4), expected):
        assert_array_equal(got, want)
    sims = fitted.similarities(queries)
    for got, want in zip(fitted.top_k(sims, k=4), stable_top_k(fitted.transform(sims), 4)):
        assert_array_equal(got, want)


@pytest.mark.slow
@pytest.mark.parametrize(
    "estimator",
    [
        CSLS(k=5),
        NearestNeighborNormalization(k=4),
        DynamicInvertedSoftmax(k=2),
        InvertedSoftmax(),
        InvertedSoftmax(output="probability", beta=1.0),
        Centering(alpha=0.5),
        SinkhornNormalization(tau=0.5, n_iter=3),
        QueryBankZNorm(),
    ],
    ids=repr,
)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # Sinkhorn's
def test_top_k_without_scores_ranks_as_with_them(rng, estimator):
    bank, gallery, queries = rng.normal(size=(70, 9)), rng.normal(size=(400, 9)), rng.normal(size=(60, 9))
    fitted = estimator.fit(bank, gallery=gallery)
    indices, _ = fitted.top_k(queries=queries, k=8)
    alone = fitted.top_k(queries=queries, k=8, return_scores=False)
    assert isinstance(alone, np.ndarray)
    assert_array_equal(alone, indices)
    assert_array_equal(alone, stable_top_k(fitted.transform(fitted.similarities(queries)), 8)[0])
    sims = fitted.similarities(queries)
    assert_array_equal(fitted.top_k(sims, k=8, return_scores=False), indices)
    with pytest.raises(TypeError, match="return_scores must be True or False"):
        fitted.top_k(sims, k=8, return_scores="no")


def test_csls_ranks_by_its_bias_without_scores(rng, monkeypatch):
    """Without scores CSLS skips each row's own top k (its r_G), which ranks nothing."""
    bank, gallery, queries = rng.normal(size=(70, 9)), rng.normal(size=(400, 9)), rng.normal(size=(60, 9))
    fitted = CSLS(k=5).fit(bank, gallery=gallery)
    expected = fitted.top_k(queries=queries, k=8)[0]

    def no_row_term(*args, **kwargs):
        raise AssertionError("the row term was computed")

    monkeypatch.setattr(CSLS, "_row_state", no_row_term)
    assert_array_equal(fitted.top_k(queries=queries, k=8, return_scores=False), expected)


@pytest.mark.parametrize("estimator", [DynamicInvertedSoftmax(k=2), DualDynamicInvertedSoftmax(k=2)],
                         ids=repr)
def test_gated_normalisers_rank_each_row_by_its_forms_bias_without_scores(rng, monkeypatch, estimator):
    """Without scores a gated method ranks by ``s - bias`` of each row's form, no score computed."""
    bank, gallery, queries = rng.normal(size=(70, 9)), rng.normal(size=(400, 9)), rng.normal(size=(300, 9))
    gallery_bank = rng.normal(size=(50, 9))
    dual = isinstance(estimator, DualDynamicInvertedSoftmax)
    fitted = estimator.fit(bank, gallery=gallery, **({"gallery_bank": gallery_bank} if dual else {}))
    expected = fitted.top_k(queries=queries, k=8)[0]
    forms = index_serving(fitted).row_forms(fitted.similarities(queries).argmax(axis=1))
    assert len(np.unique(forms)) >= 2  # raw rows beside normalised ones
    assert_array_equal(expected, stable_top_k(fitted.transform(fitted.similarities(queries)), 8)[0])

    def no_scores(*args, **kwargs):
        raise AssertionError("scores were computed")

    monkeypatch.setattr(type(fitted), "_score_block", no_scores)
    assert_array_equal(fitted.top_k(queries=queries, k=8, return_scores=False), expected)


@pytest.mark.parametrize(
    "estimator",
    [
        CSLS(k=5),
        NearestNeighborNormalization(k=4, alpha=0.7),
        InvertedSoftmax(beta=3.0),
        DynamicInvertedSoftmax(beta=3.0, k=2),
        MutualProximity(),
        QueryBankZNorm(),
        GloballyCorrected(),
    ],
    ids=repr,
)
@pytest.mark.parametrize("part_bytes", [1, 3 * 400 * 8], ids=["a row a part", "three rows a part"])
def test_top_k_scores_a_few_rows_at_a_time_as_transform_does(rng, monkeypatch, estimator, part_bytes):
    # 10 query rows in parts of one or three rows (the last part shorter): each part's
    # scores land in one reused buffer, and each row's top k is that of its own scores.
    bank, gallery, queries = rng.normal(size=(70, 9)), rng.normal(size=(400, 9)), rng.normal(size=(10, 9))
    fitted = clone(estimator).fit(bank, gallery=gallery)
    sims = np.round(fitted.similarities(queries), 1)  # ties, which go to the lowest index
    expected = stable_top_k(fitted.transform(sims), 6)
    monkeypatch.setattr(skqbnorm.normalizers._top_k, "SEARCH_PART_BYTES", part_bytes)
    indices, scores = fitted.top_k(sims, k=6)
    assert_array_equal(indices, expected[0])
    assert_array_equal(scores, expected[1])


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("return_scores", [True, False])
def test_top_k_selects_in_as_many_threads_as_the_blas_with_the_same_result(rng, monkeypatch, n_threads,
                                                                           return_scores):
    # 10 query rows in parts of one row, split among 1 to 3 threads: the same lists.
    bank, gallery, queries = rng.normal(size=(70, 9)), rng.normal(size=(400, 9)), rng.normal(size=(10, 9))
    fitted = NearestNeighborNormalization(k=4, alpha=0.7).fit(bank, gallery=gallery)
    expected = stable_top_k(fitted.transform(fitted.similarities(queries)), 6)
    monkeypatch.setattr(skqbnorm.normalizers._top_k, "SEARCH_PART_BYTES", 1)
    monkeypatch.setattr(skqbnorm._core._parallel, "blas_threads", lambda: n_threads)
    found = fitted.top_k(queries=queries, k=6, return_scores=return_scores)
    assert_array_equal(found[0] if return_scores else found, expected[0])
    if return_scores:
        assert_allclose(found[1], expected[1], rtol=1e-12)
