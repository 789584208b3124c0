"""Chunk sizes, thread counts and streamed top-k search give the same answers."""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

from skqbnorm import CSLS, Centering, DynamicInvertedSoftmax, GloballyCorrected, InvertedSoftmax

pytestmark = pytest.mark.slow  # every chunking, thread count and shard layout: not quick

NORMALIZERS = [
    InvertedSoftmax(beta=5.0),
    InvertedSoftmax(beta=5.0, output="probability"),
    DynamicInvertedSoftmax(beta=5.0, k=2),
    CSLS(k=4),
    GloballyCorrected(),
    Centering(),
]


@pytest.fixture
def sims(rng):
    bank = rng.normal(size=(257, 61))
    bank[:, :4] += 1.0  # hubs, so that DIS gates some rows and not others
    queries = rng.normal(size=(83, 61))
    return queries, bank


FITTED_ARRAYS = (
    "bank_soft_max_", "activated_", "bank_neighborhood_", "sorted_bank_", "bank_mean_"
)




@pytest.mark.parametrize("estimator", NORMALIZERS, ids=repr)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_chunk_size_and_n_jobs_do_not_change_results(sims, leaves, estimator, dtype):
    # Bitwise: the fitted state is reduced over a fixed tree of bank rows.
    queries, bank = (a.astype(dtype) for a in sims)
    reference = clone(estimator).fit(bank)
    expected = reference.transform(queries)
    for working_memory in (1e-4, 0.01, 64):
        for n_jobs in (1, 2, 3):
            fitted = clone(estimator).set_params(working_memory=working_memory, n_jobs=n_jobs).fit(bank)
            for name in FITTED_ARRAYS:
                if hasattr(reference, name):
                    assert_array_equal(getattr(fitted, name), getattr(reference, name))
            assert_array_equal(fitted.transform(queries), expected)


def full_top_k(scores, k):
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)


@pytest.mark.parametrize("estimator", NORMALIZERS, ids=repr)
@pytest.mark.parametrize("k", [1, 7, 61])
def test_top_k_equals_full_transform_then_sort(sims, estimator, k):
    queries, bank = sims
    for working_memory in (1e-4, 0.02, None):  # one to many gallery chunks
        fitted = clone(estimator).set_params(working_memory=working_memory).fit(bank)
        indices, scores = fitted.top_k(queries, k=k)
        expected_indices, expected_scores = full_top_k(fitted.transform(queries), k)
        assert_array_equal(indices, expected_indices)
        assert_allclose(scores, expected_scores, rtol=1e-12)


@pytest.mark.parametrize("estimator", NORMALIZERS, ids=repr)
def test_top_k_with_ties_takes_lowest_indices(rng, estimator):
    bank = rng.integers(0, 3, size=(40, 30)).astype(float)
    queries = rng.integers(0, 3, size=(25, 30)).astype(float)  # many tied scores
    fitted = clone(estimator).set_params(working_memory=2e-4).fit(bank)
    indices, scores = fitted.top_k(queries, k=6)
    expected_indices, expected_scores = full_top_k(fitted.transform(queries), 6)
    assert_array_equal(indices, expected_indices)
    assert_allclose(scores, expected_scores)


def test_top_k_from_embeddings_and_from_a_memmap(rng, tmp_path):
    bank_emb, gallery_emb, query_emb = rng.normal(size=(90, 12)), rng.normal(size=(70, 12)), rng.normal(size=(33, 12))
    dis = DynamicInvertedSoftmax(beta=8.0, working_memory=1e-3).fit(bank_emb, gallery=gallery_emb)
    expected = full_top_k(dis.transform(dis.similarities(query_emb)), 5)
    indices, scores = dis.top_k(queries=query_emb, k=5)
    assert_array_equal(indices, expected[0])
    assert_allclose(scores, expected[1], rtol=1e-10)
    path = tmp_path / "query_sims.npy"
    np.save(path, dis.similarities(query_emb))
    indices, _ = dis.top_k(np.load(path, mmap_mode="r"), k=5)
    assert_array_equal(indices, expected[0])


def gallery_shards(sims, widths):
    bounds = np.cumsum([0, *widths])
    assert bounds[-1] == sims.shape[1]
    return [sims[:, start:stop].copy() for start, stop in itertools.pairwise(bounds)]


@pytest.mark.parametrize("estimator", NORMALIZERS, ids=repr)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_top_k_from_gallery_shards_equals_full_transform(sims, estimator, dtype):
    queries, bank = (a.astype(dtype) for a in sims)
    fitted = clone(estimator).fit(bank)
    expected_indices, expected_scores = full_top_k(fitted.transform(queries), 7)
    shards = gallery_shards(queries, [3, 20, 0, 1, 30, 7])  # narrower than k, and empty
    before = [shard.copy() for shard in shards]
    for chunks in (shards, lambda: iter(shards), tuple(shards)):
        indices, scores = fitted.top_k(chunks=chunks, k=7)
        assert scores.dtype == dtype
        assert_array_equal(indices, expected_indices)
        assert_allclose(scores, expected_scores, rtol=1e-6 if dtype == np.float32 else 1e-12)
    for shard, original in zip(shards, before):
        assert_array_equal(shard, original)


def test_top_k_from_a_one_shot_iterator(sims):
    queries, bank = sims
    shards = gallery_shards(queries, [30, 31])
    expected = InvertedSoftmax().fit(bank).top_k(queries, k=4)
    indices, _ = InvertedSoftmax().fit(bank).top_k(chunks=iter(shards), k=4)  # one pass suffices
    assert_array_equal(indices, expected[0])
    with pytest.raises(ValueError, match="one-shot iterator: pass a list"):
        DynamicInvertedSoftmax().fit(bank).top_k(chunks=iter(shards), k=4)  # needs two passes


def test_top_k_shard_errors(sims):
    queries, bank = sims
    fitted = CSLS(k=3).fit(bank)
    with pytest.raises(ValueError, match=r"chunks cover 60 gallery columns, but CSLS was fitted on a gallery of 61"):
        fitted.top_k(chunks=gallery_shards(queries[:, :60], [30, 30]), k=3)
    too_wide = gallery_shards(queries, [30, 31]) + [queries[:, :2]]
    with pytest.raises(ValueError, match=r"chunk 2 has shape \(\d+, 2\) after 61 gallery columns"):
        fitted.top_k(chunks=too_wide, k=3)
    ragged = [queries[:, :30], queries[:-1, 30:]]
    with pytest.raises(ValueError, match=r"chunk 1 has shape .* the first chunk has \d+ rows"):
        fitted.top_k(chunks=ragged, k=3)
    with pytest.raises(ValueError, match="exactly one of X"):
        fitted.top_k(queries, chunks=[queries], k=3)
    broken = gallery_shards(queries, [30, 31])
    broken[1][5, 10] = np.inf
    with pytest.raises(ValueError, match="X row 5 to gallery item 40"):
        fitted.top_k(chunks=broken, k=3)


def test_top_k_errors(sims):
    queries, bank = sims
    fitted = InvertedSoftmax().fit(bank)
    with pytest.raises(ValueError, match=r"k must be an integer in \[1, 61\]"):
        fitted.top_k(queries, k=62)
    with pytest.raises(ValueError, match="exactly one of X"):
        fitted.top_k(queries, queries=queries)
    with pytest.raises(ValueError, match="fitted on precomputed similarities"):
        fitted.top_k(queries=queries)
    broken = queries.copy()
    broken[5, 40] = np.nan
    with pytest.raises(ValueError, match="X row 5 to gallery item 40"):
        fitted.set_params(working_memory=1e-3).top_k(broken, k=3)
