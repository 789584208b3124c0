"""Query products as a search makes them (skqbnorm._core._products): tiles, strips and
threads give the products a plain matrix product gives."""

import threading

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.utils import gen_batches

import skqbnorm._core._parallel
import skqbnorm._core._products
import skqbnorm.normalizers._top_k
from skqbnorm import (
    CSLS,
    DynamicInvertedSoftmax,
    NearestNeighborNormalization,
)
from skqbnorm._core._products import (
    MIN_SEARCH_PRODUCT_ROWS,
    SEARCH_PRODUCT_MEMORY,
    SEARCH_PRODUCT_ROWS,
    STRIP_COLUMNS,
    _batches,
    product_parts,
    product_strips,
    query_products,
    search_product_rows,
    searches_in_parts,
)

from helpers import stable_top_k


@pytest.mark.parametrize("n_queries", [17, 5, 1])
@pytest.mark.parametrize("in_parts", [True, False], ids=["tiles on one BLAS thread", "blocks"])
@pytest.mark.parametrize("metric, dtype", [("cosine", np.float32), ("dot", np.float64)])
def test_similarities_and_top_k_read_the_same_products(rng, monkeypatch, in_parts, metric, dtype, n_queries):
    # Parts of 4 query rows (the last of 1) in strips of 150 gallery items (the last of
    # 100), each tile on one BLAS thread, over 1 to 3 threads: with as many parts as
    # threads or more (17 queries), each thread multiplies and searches its own parts;
    # with fewer (5 or 1), the tiles spread over the threads, then pieces of the rows.
    # Or (a gallery too wide for parts) blocks on the BLAS's threads. similarities and
    # top_k multiply alike, so top_k is transform then a stable sort, bitwise, and the
    # products are the same for every thread count.
    monkeypatch.setattr(skqbnorm._core._products, "SEARCH_PRODUCT_ROWS", 4)
    monkeypatch.setattr(skqbnorm._core._products, "MIN_SEARCH_PRODUCT_ROWS", 4 if in_parts else 8)
    monkeypatch.setattr(skqbnorm._core._products, "STRIP_COLUMNS", 150)
    monkeypatch.setattr(skqbnorm._core._products, "SPREAD_BYTES", 0)  # however small
    bank, gallery, queries = (rng.normal(size=(n, 9)).astype(dtype) for n in (70, 400, n_queries))
    for estimator in (NearestNeighborNormalization(k=4, alpha=0.7), DynamicInvertedSoftmax(), CSLS(k=3)):
        fitted = estimator.set_params(metric=metric).fit(bank, gallery=gallery)
        assert skqbnorm._core.searches_in_parts(400, np.dtype(dtype).itemsize) == in_parts
        products = []
        for n_threads in (1, 2, 3) if in_parts else (1,):
            monkeypatch.setattr(skqbnorm._core._parallel, "blas_threads", lambda n=n_threads: n)
            sims = fitted.similarities(queries)
            expected = stable_top_k(fitted.transform(sims), 6)
            indices, scores = fitted.top_k(queries=queries, k=6)
            assert_array_equal(indices, expected[0])
            assert_array_equal(scores, expected[1])
            assert_array_equal(fitted.top_k(queries=queries, k=6, return_scores=False), expected[0])
            products.append(sims)
        for sims in products[1:]:
            assert_array_equal(sims, products[0])


def test_a_single_query_spreads_its_product_over_the_threads(rng, monkeypatch):
    # One query in strips of 150 gallery items of a gallery as large as SPREAD_BYTES:
    # its tiles run on both threads (it ran on one, a part being one thread's).

    monkeypatch.setattr(skqbnorm._core._products, "STRIP_COLUMNS", 150)
    monkeypatch.setattr(skqbnorm._core._products, "SPREAD_BYTES", 400 * 9 * 4)
    monkeypatch.setattr(skqbnorm._core._parallel, "blas_threads", lambda: 2)
    real, seen, both = skqbnorm.normalizers._top_k.embedding_products, [], threading.Barrier(2, timeout=10)

    def recording(*args, **kwargs):
        name = threading.current_thread().name
        if name not in seen:
            both.wait()  # a thread's first tile waits for the other thread's
        seen.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(skqbnorm.normalizers._top_k, "embedding_products", recording)
    bank, gallery, queries = (rng.normal(size=(n, 9)).astype(np.float32) for n in (70, 400, 1))
    fitted = NearestNeighborNormalization(k=4).fit(bank, gallery=gallery)
    indices, _ = fitted.top_k(queries=queries, k=6)
    assert len(seen) == 3 and len(set(seen)) == 2
    assert_array_equal(indices, stable_top_k(fitted.transform(fitted.similarities(queries)), 6)[0])
    # A gallery one byte smaller is searched on the calling thread: a dispatch would
    # cost more than it saves.
    monkeypatch.setattr(skqbnorm._core._products, "SPREAD_BYTES", 400 * 9 * 4 + 1)
    names = []
    monkeypatch.setattr(skqbnorm.normalizers._top_k, "embedding_products",
                        lambda *args, **kwargs: names.append(threading.current_thread().name)
                        or real(*args, **kwargs))
    fitted.top_k(queries=queries, k=6)
    assert names == [threading.current_thread().name] * 3


@pytest.mark.parametrize(("n_items", "size"), [(1, 4), (7, 3), (9, 3), (2048, 256), (5000, 2048)])
def test_parts_and_strips_are_sklearns_batches(n_items, size):
    assert _batches(n_items, size) == list(gen_batches(n_items, size))
    assert product_strips(n_items) == list(gen_batches(n_items, STRIP_COLUMNS))
    assert _batches(0, size) == []


@pytest.mark.parametrize(("n_columns", "itemsize"), [(10, 8), (5000, 4), (20000, 8), (10**6, 4)])
def test_search_product_rows_is_a_power_of_two_within_the_budget(n_columns, itemsize):
    rows = search_product_rows(n_columns, itemsize)
    assert rows & (rows - 1) == 0 and 1 <= rows <= SEARCH_PRODUCT_ROWS
    assert rows == 1 or rows * n_columns * itemsize <= SEARCH_PRODUCT_MEMORY * 2**20
    assert searches_in_parts(n_columns, itemsize) == (rows >= MIN_SEARCH_PRODUCT_ROWS)
    parts = product_parts(1000, n_columns, itemsize)
    assert parts == list(gen_batches(1000, rows))


@pytest.mark.parametrize("n_columns", [300, 5000])
@pytest.mark.parametrize("metric", ["dot", "cosine"])
def test_query_products_are_the_matrix_product(rng, monkeypatch, metric, n_columns):
    monkeypatch.setattr(skqbnorm._core._products, "STRIP_COLUMNS", 128)  # several strips
    queries, gallery = rng.normal(size=(37, 16)), rng.normal(size=(n_columns, 16))
    assert_allclose(query_products(queries, gallery.T, metric), queries @ gallery.T, rtol=1e-12,
                    atol=1e-12)
    broken = queries.copy()
    broken[30, 3] = np.inf
    with pytest.raises(ValueError, match="queries"):
        query_products(broken, gallery.T, metric)
