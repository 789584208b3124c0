"""top_k called from several threads at once, and from a forked child, gives what one
call in the parent gives (the thread pools and BLAS limits are shared process state)."""

import multiprocessing
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from skqbnorm import CSLS, DynamicInvertedSoftmax, InvertedSoftmax

SETTINGS = [InvertedSoftmax(n_jobs=2), DynamicInvertedSoftmax(n_jobs=2), CSLS(k=5, n_jobs=2)]


@pytest.fixture(scope="module")
def embeddings():
    rng = np.random.default_rng(0)
    return {name: rng.normal(size=(rows, 32)).astype(np.float32)
            for name, rows in (("bank", 600), ("gallery", 3000), ("queries", 300))}


def fitted(estimator, embeddings):
    return estimator.fit(embeddings["bank"], gallery=embeddings["gallery"])


@pytest.mark.parametrize("estimator", SETTINGS, ids=repr)
def test_top_k_from_several_threads(estimator, embeddings):
    model = fitted(estimator, embeddings)
    queries = embeddings["queries"]
    expected = model.top_k(queries=queries, k=10)
    sims = model.similarities(queries)
    calls = [lambda: model.top_k(queries=queries, k=10), lambda: model.top_k(sims, k=10)] * 4
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = list(pool.map(lambda call: call(), calls))
    for indices, scores in found:
        np.testing.assert_array_equal(indices, expected[0])
        np.testing.assert_allclose(scores, expected[1], rtol=0, atol=1e-6)


def _child_top_k(model, queries, out):
    indices, _ = model.top_k(queries=queries, k=10)
    out.put(indices)


@pytest.mark.skipif(sys.platform == "win32" or "fork" not in multiprocessing.get_all_start_methods(),
                    reason="needs fork")
def test_top_k_in_a_forked_child_after_the_parent_used_its_threads(embeddings):
    model = fitted(InvertedSoftmax(n_jobs=2), embeddings)
    queries = embeddings["queries"]
    expected, _ = model.top_k(queries=queries, k=10)  # the parent's pools are started
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_child_top_k, args=(model, queries, out))
    child.start()
    indices = out.get(timeout=120)
    child.join(timeout=120)
    assert child.exitcode == 0
    np.testing.assert_array_equal(indices, expected)
