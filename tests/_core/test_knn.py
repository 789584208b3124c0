"""The core's exact nearest rows (skqbnorm._core._knn) against scikit-learn's brute-force
search and plain references: float32 products may only find candidates, never decide."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.neighbors import NearestNeighbors

import skqbnorm._core._parallel
from skqbnorm._core import _knn, cosine_top_k, euclidean_neighbors, prepare_embeddings
from skqbnorm._core._knn import GROUP, dot_error, equal_rows


def sklearn_neighbors(features, k):
    distances, indices = NearestNeighbors(n_neighbors=k, algorithm="brute").fit(
        features).kneighbors()
    return indices, distances


def reference_neighbors(features, k):
    """Plain rule: the k + 1 nearest rows (itself included) by (distance, index), less the
    row itself, or less the first if it is not among them."""
    features = np.asarray(features, dtype=np.float64)
    n = len(features)
    squares = np.vstack([((features[start:start + 100, None, :] - features[None]) ** 2).sum(-1)
                         for start in range(0, n, 100)])
    order = np.lexsort((np.broadcast_to(np.arange(n), (n, n)), squares), axis=1)[:, : k + 1]
    keep = order != np.arange(n)[:, None]
    keep[keep.all(axis=1), 0] = False
    indices = order[keep].reshape(n, k)
    return indices, np.sqrt(np.take_along_axis(squares, indices, axis=1))


def reference_top_k(unit, k):
    """Stable sort of each row of the cosine matrix (diagonal 1) by decreasing value."""
    similarities = unit @ unit.T
    np.fill_diagonal(similarities, 1.0)
    order = np.argsort(-similarities, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(similarities, order, axis=1), similarities.min(axis=1)


@pytest.mark.parametrize("n_items, n_features, k", [
    (50, 3, 5), (400, 32, 10), (2000, 32, 10), (2500, 8, 50), (500, 512, 10), (900, 1, 4),
    (1200, 2, 30)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_euclidean_neighbors_equal_sklearn(n_items, n_features, k, dtype):
    rng = np.random.default_rng(n_items + n_features)
    features = rng.normal(size=(n_items, n_features)).astype(dtype)
    indices, distances = euclidean_neighbors(features, k)
    expected, expected_distances = sklearn_neighbors(features, k)
    assert_array_equal(indices, expected)
    # scikit-learn's distances come from |x|^2 + |y|^2 - 2 x.y (float32: in float32),
    # which loses the digits of short distances
    tolerance = 1e-6 if dtype == np.float32 else 1e-9
    assert_allclose(distances, expected_distances, rtol=tolerance, atol=tolerance)
    assert_allclose(distances, reference_neighbors(features, k)[1], rtol=1e-14, atol=0)


@pytest.mark.parametrize("n_items, n_features, k, values", [
    (200, 2, 10, 4), (1500, 3, 10, 6), (1500, 6, 10, 3), (300, 5, 5, 3), (100, 2, 30, 2)])
def test_ties_go_to_the_lower_index(n_items, n_features, k, values):
    # Integer features: exact distances, many ties, duplicates at distance 0.
    features = np.random.default_rng(k).integers(0, values, size=(n_items, n_features)) * 1.0
    indices, distances = euclidean_neighbors(features, k)
    expected, expected_distances = reference_neighbors(features, k)
    assert_array_equal(indices, expected)
    assert_array_equal(distances, expected_distances)
    # scikit-learn finds the same distances; among ties at the k-th place its heap keeps
    # no particular index, so the neighbours agree on the rows without such a tie.
    sk_indices, sk_distances = sklearn_neighbors(features, k)
    assert_array_equal(np.sort(sk_distances, axis=1), distances)
    lengths = np.sort(np.linalg.norm(features[:, None] - features[None], axis=-1), axis=1)
    untied = lengths[:, k] != lengths[:, k + 1]
    assert_array_equal(np.sort(sk_indices[untied], axis=1), np.sort(indices[untied], axis=1))


def test_more_duplicates_than_neighbors_leave_out_the_first():
    features = np.array([[0.0], [0.0], [0.0], [0.0], [5.0], [7.0]])
    indices, distances = euclidean_neighbors(features, 2)
    # Row 3's three nearest (ties to the lower index) are 0, 1, 2: it is not among them.
    assert_array_equal(indices[:4], [[1, 2], [0, 2], [0, 1], [1, 2]])
    assert_array_equal(distances[:4], 0.0)
    assert_array_equal(indices[4:], [[5, 0], [4, 0]])


def list_with_copies(rng, n_items, n_features):
    """Random rows, a fifth of them copies of others and a tenth zero."""
    features = rng.normal(size=(n_items, n_features))
    features[rng.choice(n_items, n_items // 5)] = features[rng.choice(n_items, n_items // 5)]
    features[rng.choice(n_items, n_items // 10)] = 0.0
    return features


@pytest.mark.parametrize("n_items, k", [(300, 7), (2000, 11), (1500, 51), (40, 60)])
def test_equal_rows_are_searched_once_with_the_same_result(monkeypatch, rng, n_items, k):
    features = list_with_copies(rng, n_items, 6)
    unit = prepare_embeddings(features, "cosine")
    assert equal_rows(features) is not None and equal_rows(unit) is not None
    collapsed = [euclidean_neighbors(features, min(k, n_items - 1)),
                 cosine_top_k(unit, k, least=True)]
    monkeypatch.setattr(_knn, "equal_rows", lambda rows: None)  # every row searched
    plain = [euclidean_neighbors(features, min(k, n_items - 1)),
             cosine_top_k(unit, k, least=True)]
    for found, expected in zip(collapsed, plain):
        for part, expected_part in zip(found, expected):
            assert_array_equal(part, expected_part)
    assert_array_equal(collapsed[0][0], reference_neighbors(features, min(k, n_items - 1))[0])


def test_equal_rows_groups_by_value():
    rows = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 0.0], [-0.0, 2.0], [3.0, 3.0], [1.0, 0.0]])
    groups = equal_rows(rows)
    assert_array_equal(groups.first, [0, 1, 4])
    assert_array_equal(groups.group, [0, 1, 0, 1, 2, 0])
    assert equal_rows(rows[[0, 1, 4]]) is None


@pytest.mark.parametrize("value", [2.0, 0.0])
def test_lists_of_one_row_repeated(value):
    rows = np.tile([value, 0.0, 0.0], (6, 1))
    indices, distances = euclidean_neighbors(rows, 3)
    assert_array_equal(indices, [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2], [1, 2, 3], [1, 2, 3]])
    assert_array_equal(distances, 0.0)
    # Unit rows [1, 0, 0]: each copy as similar as the row itself, ties to the lower
    # index; zero rows: a copy's cosine is 0, the row's own 1.
    indices, similarities, least = cosine_top_k(prepare_embeddings(rows, "cosine"), 3, least=True)
    if value:
        assert_array_equal(indices, np.tile([0, 1, 2], (6, 1)))
        assert_array_equal(similarities, 1.0)
        assert_array_equal(least, 1.0)
    else:
        assert_array_equal(indices, [[0, 1, 2], [1, 0, 2], [2, 0, 1], [3, 0, 1], [4, 0, 1],
                                     [5, 0, 1]])
        assert_array_equal(similarities, np.tile([1.0, 0.0, 0.0], (6, 1)))
        assert_array_equal(least, 0.0)


@pytest.mark.parametrize("n_items", [2, 3, 4, 7, 12])
def test_tiny_lists_take_every_other_item(n_items):
    rng = np.random.default_rng(n_items)
    features = rng.normal(size=(n_items, 3))
    for k in range(1, n_items):
        indices, distances = euclidean_neighbors(features, k)
        assert_array_equal(indices, sklearn_neighbors(features, k)[0])
        assert_allclose(distances, reference_neighbors(features, k)[1], rtol=1e-14, atol=0)


@pytest.mark.parametrize("k", [0, 5])
def test_euclidean_neighbors_need_fewer_neighbors_than_items(k):
    with pytest.raises(ValueError, match="n_neighbors"):
        euclidean_neighbors(np.zeros((5, 2)), k)


def test_near_ties_below_float32_resolution_are_decided_in_float64():
    # Points on a sphere of radius 1 around item 0, radii 1 + i 1e-12 apart, and a far
    # cluster that moves the centre away: float32 rounds the sphere's distances by far
    # more than their differences, float64 sees the order of i.
    rng = np.random.default_rng(0)
    directions = rng.normal(size=(1500, 8))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    radii = 1 + 1e-12 * rng.permutation(1500)
    far = 1000 + rng.normal(size=(1500, 8))
    features = np.vstack([np.zeros(8), directions * radii[:, None], far])
    indices, distances = euclidean_neighbors(features, 20)
    expected, expected_distances = reference_neighbors(features, 20)
    assert_array_equal(indices[0], 1 + np.argsort(radii)[:20])
    assert_array_equal(indices, expected)
    assert_allclose(distances, expected_distances, rtol=1e-14, atol=0)


@pytest.mark.parametrize("working_memory", [0.001, 0.05, 1, 1000])
def test_results_do_not_depend_on_the_block_size(working_memory):
    rng = np.random.default_rng(7)
    features = rng.normal(size=(1500, 16))
    unit = prepare_embeddings(rng.integers(-1, 2, size=(1500, 4)) * 1.0, "cosine")
    for found, expected in [
        (euclidean_neighbors(features, 12, working_memory=working_memory),
         euclidean_neighbors(features, 12)),
        (cosine_top_k(unit, 9, least=True, working_memory=working_memory),
         cosine_top_k(unit, 9, least=True)),
    ]:
        for part, expected_part in zip(found, expected):
            assert_array_equal(part, expected_part)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_results_do_not_depend_on_the_threads(monkeypatch, n_threads):
    # Blocks of about 26 rows spread over 1 to 3 threads, each product on one BLAS
    # thread: the same neighbours and values as one block on the calling thread.
    rng = np.random.default_rng(8)
    features = rng.normal(size=(1500, 16))
    expected = euclidean_neighbors(features, 12, working_memory=1000)
    monkeypatch.setattr(skqbnorm._core._parallel, "blas_threads", lambda: n_threads)
    found = euclidean_neighbors(features, 12, working_memory=0.15)
    for part, expected_part in zip(found, expected):
        assert_array_equal(part, expected_part)


def test_every_size_of_group_and_its_tail(rng):
    # n_items % GROUP columns are in no group; around 4 k groups the bound changes path.
    for n_items in [GROUP * 40 - 1, GROUP * 40, GROUP * 40 + 5, GROUP * 330 + 3]:
        features = rng.normal(size=(n_items, 5))
        assert_array_equal(euclidean_neighbors(features, 9)[0],
                           reference_neighbors(features, 9)[0])


@pytest.mark.parametrize("n_items, n_features, k", [
    (40, 5, 7), (700, 32, 51), (2500, 32, 11), (1000, 512, 21), (300, 2, 300), (5, 3, 9)])
def test_cosine_top_k_equals_a_stable_sort_of_the_cosines(n_items, n_features, k):
    rng = np.random.default_rng(n_items)
    unit = prepare_embeddings(rng.normal(size=(n_items, n_features)), "cosine")
    indices, similarities, least = cosine_top_k(unit, k, least=True)
    expected, expected_similarities, expected_least = reference_top_k(unit, k)
    assert_array_equal(indices, expected)
    assert_allclose(similarities, expected_similarities, rtol=0, atol=1e-14)
    assert_allclose(least, expected_least, rtol=0, atol=1e-14)


def test_cosine_ties_go_to_the_lower_index_and_zero_rows_are_themselves_first():
    # Signed axes and zero rows: every cosine is exactly 0, 1 or -1.
    rng = np.random.default_rng(3)
    axes = np.zeros((400, 6))
    axes[np.arange(400), rng.integers(0, 6, size=400)] = rng.choice([-1.0, 1.0], size=400)
    axes[rng.random(400) < 0.1] = 0.0
    indices, similarities, least = cosine_top_k(axes, 30, least=True)
    expected, expected_similarities, expected_least = reference_top_k(axes, 30)
    assert_array_equal(indices, expected)
    assert_array_equal(similarities, expected_similarities)
    assert_array_equal(least, expected_least)
    zero = np.flatnonzero(~axes.any(axis=1))
    assert_array_equal(indices[zero, 0], zero)


def test_cosine_top_k_without_least_returns_none():
    unit = prepare_embeddings(np.eye(4), "cosine")
    assert cosine_top_k(unit, 2)[2] is None


@pytest.mark.parametrize("n_features", [2, 32, 512, 4096])
def test_float32_products_stay_within_the_error_bound(n_features):
    rng = np.random.default_rng(n_features)
    for scale in [1.0, 1e-20]:
        a = rng.normal(size=(200, n_features)) * scale
        b = rng.normal(size=(300, n_features))
        exact = a @ b.T
        products = a.astype(np.float32) @ b.astype(np.float32).T
        relative, absolute = dot_error(n_features)
        bound = relative * np.outer(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1))
        assert np.all(np.abs(products - exact) <= bound + absolute)
