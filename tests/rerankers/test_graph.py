"""The rerankers' affinity graphs and Laplacians against values written out by hand and
plain-loop references that share no code with the library."""

import math
import statistics
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from reference_rerankers import node_similarities
from scipy import sparse
from sklearn.neighbors import NearestNeighbors

from skqbnorm import (
    PointwiseReranker,
    PreferenceStrengthReranker,
)
from skqbnorm.catalogue import rerankers
from skqbnorm.rerankers import _graph
from skqbnorm.rerankers._graph import (
    affinity,
    degrees,
    laplacian,
    most_similar,
    pair_laplacian,
    unit_rows,
)
from skqbnorm.rerankers._neighborhood import CosineQueryReranker

# x = [0, 1, 3] on a line: lengths 1, 3, 2; the median, sigma = 2.
W01, W02, W12 = 0.8824969025845955, 0.32465246735834974, 0.6065306597126334  # e^-1/8, -9/8, -1/2


D0, D1, D2 = 1.2071493699429452, 1.4890275622972289, 0.9311831270709832


N01, N02, N12 = 0.6582355218034802, 0.30621090485226954, 0.5150908576754984  # w_ij/sqrt(d_i d_j)


E_HALF = 0.6065306597126334  # e^-1/2: an edge as long as the kernel width


def line(*points):
    return np.array(points, dtype=float)[:, None]


def reference_affinity(features, graph, n_neighbors, sigma="median"):
    """Plain loops: Gaussian weights over all pairs, or over the union of each item's
    nearest neighbours; "median" is the median positive length of the (directed) edges."""
    n = len(features)
    dist = [[math.dist(features[i], features[j]) for j in range(n)] for i in range(n)]
    if graph == "dense":
        edges = [(i, j) for i in range(n) for j in range(n) if i != j]
    else:
        edges = []
        for i in range(n):
            others = sorted((dist[i][j], j) for j in range(n) if j != i)
            edges += [(i, j) for _, j in others[:n_neighbors]]
    if sigma == "median":
        positive = [dist[i][j] for i, j in edges if dist[i][j] > 0]
        sigma = statistics.median(positive) if positive else 1.0
    weights = np.zeros((n, n))
    for i, j in edges:
        weights[i, j] = weights[j, i] = math.exp(-dist[i][j] ** 2 / (2 * sigma**2))
    return weights


def reference_laplacians(weights):
    n = len(weights)
    degree = [sum(row) for row in weights]
    plain, normalized = np.zeros((n, n)), np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                plain[i, i] = degree[i]
                normalized[i, i] = 1.0 if degree[i] > 0 else 0.0
            elif weights[i][j] > 0:
                plain[i, j] = -weights[i][j]
                normalized[i, j] = -weights[i][j] / math.sqrt(degree[i] * degree[j])
    return plain, normalized


def three_points_weights():
    return np.array([[0, W01, W02], [W01, 0, W12], [W02, W12, 0]])


# Affinities written out by hand.


@pytest.mark.parametrize("graph", ["dense", "knn"])  # knn with n_neighbors >= N - 1 is dense
def test_dense_affinity_by_hand(graph):
    weights = affinity(line(0, 1, 3), graph=graph, n_neighbors=2)
    assert_allclose(weights.toarray(), three_points_weights(), rtol=1e-14)
    assert_array_equal(weights.diagonal(), 0.0)


def test_numeric_sigma_by_hand():
    weights = affinity(line(0, 1, 3), graph="dense", sigma=1.0).toarray()
    assert_allclose(weights[0, 1:], [math.exp(-0.5), math.exp(-4.5)], rtol=1e-14)
    assert_allclose(weights[1, 2], math.exp(-2.0), rtol=1e-14)


def test_knn_affinity_is_the_union_with_the_median_of_directed_edges():
    # k=1: 0->1 (1), 1->0 (1), 2->1 (2), 3->2 (4). Median of 1, 1, 2, 4 is 1.5. Edges
    # {1,2} and {2,3} are one-way: the union keeps their full weight.
    weights = affinity(line(0, 1, 3, 7), n_neighbors=1).toarray()
    expected = np.zeros((4, 4))
    expected[0, 1] = expected[1, 0] = 0.8007374029168081  # e^-(1/1.5)^2/2
    expected[1, 2] = expected[2, 1] = 0.41111229050718745  # e^-(2/1.5)^2/2
    expected[2, 3] = expected[3, 2] = 0.028565500784550377  # e^-(4/1.5)^2/2
    assert_allclose(weights, expected, rtol=1e-14)


def test_two_items_are_one_edge_as_long_as_the_kernel_width():
    for graph in ["dense", "knn"]:
        weights = affinity(np.array([[1.0, 2.0], [4.0, 6.0]]), graph=graph).toarray()
        assert_allclose(weights, [[0, E_HALF], [E_HALF, 0]], rtol=1e-14)
    weights = affinity(np.array([[1.0, 2.0], [4.0, 6.0]]), sigma=5.0).toarray()
    assert_allclose(weights[0, 1], math.exp(-0.5), rtol=1e-14)


@pytest.mark.parametrize("n_items", [0, 1])
def test_fewer_than_two_items_have_an_empty_graph(n_items):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights = affinity(np.ones((n_items, 3)), graph="dense")
        knn = affinity(np.ones((n_items, 3)))
    assert weights.shape == knn.shape == (n_items, n_items)
    assert weights.nnz == knn.nnz == 0


# Zero median edge length and duplicates.


def test_zero_median_edge_length_takes_the_median_of_positive_lengths():
    # 6 of 10 pairs have length 0: the kernel width is 3, the median positive length.
    weights = affinity(line(0, 0, 0, 0, 3), graph="dense").toarray()
    assert_allclose(weights[:4, :4], 1 - np.eye(4))
    assert_allclose(weights[:4, 4], E_HALF, rtol=1e-14)


def test_duplicates_do_not_shrink_the_kernel_width():
    # Lengths 0, 0, 0, 2, 2, 2: the width is 2 (the median of all six would be 1).
    weights = affinity(line(0, 0, 0, 2), graph="dense").toarray()
    assert_allclose(weights[:3, 3], E_HALF, rtol=1e-14)


def test_identical_features_are_linked_with_weight_one():
    features = np.tile([[0.1, 7.3, -2.0]], (6, 1)) * 3.0
    assert_array_equal(affinity(features, graph="dense").toarray(), 1 - np.eye(6))
    # Which 2 of the 5 equidistant neighbours an item gets is arbitrary.
    weights = affinity(features, n_neighbors=2)
    assert_array_equal(weights.data, 1.0)
    assert (weights != weights.T).nnz == 0
    assert weights.diagonal().max() == 0 and np.diff(weights.indptr).min() >= 2


def test_dense_duplicates_are_at_length_zero(rng):
    # The dot-product formula would give duplicates lengths of about 1e-8, which would
    # count as positive lengths in the median.
    features = np.repeat(rng.normal(size=(10, 33)), 3, axis=0)
    weights = affinity(features, graph="dense").toarray()
    assert_allclose(weights, reference_affinity(features, "dense", None), rtol=1e-9)
    assert_array_equal(weights[0, 1:3], 1.0)


def test_dense_lengths_are_accurate_when_most_pairs_are_close(rng):
    # 300 of 435 pairs lie in a cluster 1e-5 wide: the median is one of their lengths,
    # which the dot-product formula would give to about 1e-8 only.
    features = np.r_[rng.normal(size=(25, 5)) * 1e-5, rng.normal(size=(5, 5)) + 3.0]
    weights = affinity(features, graph="dense").toarray()
    assert_allclose(weights, reference_affinity(features, "dense", None), rtol=1e-11)


def test_knn_duplicates_are_nearest_at_length_zero():
    # Three duplicates (each the other two's neighbours, k=2) and 10, 11, 13 (lengths
    # 1, 3, 1, 2, 2, 3): the width is 2; the old median of all 12 edges was 0.5.
    features = line(0, 0, 0, 10, 11, 13) + 1e6  # an offset the dot-product formula blurs
    weights = affinity(features, n_neighbors=2).toarray()
    expected = np.zeros((6, 6))
    expected[:3, :3] = 1 - np.eye(3)
    expected[3, 4] = expected[4, 3] = W01  # e^-(1/2)^2/2
    expected[4, 5] = expected[5, 4] = W12  # e^-(2/2)^2/2
    expected[3, 5] = expected[5, 3] = W02  # e^-(3/2)^2/2
    assert_allclose(weights, expected, rtol=1e-9)


# Plain-loop reference on random data.


@pytest.mark.parametrize("n_neighbors", [1, 2, 5, 8, 9, 10, 30])
@pytest.mark.parametrize("graph", ["dense", "knn"])
def test_affinity_matches_the_plain_loop_reference(rng, graph, n_neighbors):
    # The offset defeats a dot-product distance on uncentred features.
    features = rng.normal(size=(10, 3)) * [1.0, 5.0, 0.1] + 1e8
    weights = affinity(features, graph=graph, n_neighbors=n_neighbors)
    expected = reference_affinity(features, graph, n_neighbors)
    assert_allclose(weights.toarray(), expected, rtol=1e-9, atol=0)
    assert (weights != weights.T).nnz == 0
    assert weights.nnz == np.count_nonzero(expected)


@pytest.mark.parametrize("sigma", [0.3, 2.0, 40.0])
def test_numeric_sigma_matches_the_plain_loop_reference(rng, sigma):
    features = rng.normal(size=(9, 2))
    for graph in ["dense", "knn"]:
        weights = affinity(features, graph=graph, n_neighbors=3, sigma=sigma).toarray()
        assert_allclose(weights, reference_affinity(features, graph, 3, sigma), rtol=1e-9)


def test_knn_with_n_items_minus_one_neighbors_is_the_dense_graph(rng):
    features = rng.normal(size=(8, 4))
    dense = affinity(features, graph="dense").toarray()
    for n_neighbors in [7, 8, 100]:
        assert_array_equal(affinity(features, n_neighbors=n_neighbors).toarray(), dense)
    assert np.count_nonzero(affinity(features, n_neighbors=6).toarray()) < np.count_nonzero(dense)


# Scale-free graph, and sigma at the ends of the float range.


@pytest.mark.parametrize("graph", ["dense", "knn"])
@pytest.mark.parametrize("factor", [1e200, 1e-200, 3.7, 1e-300, 1e300])
def test_median_graph_is_invariant_to_positive_scaling(rng, graph, factor):
    features = rng.normal(size=(40, 5))
    expected = affinity(features, graph=graph, n_neighbors=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights = affinity(features * factor, graph=graph, n_neighbors=5)
    assert_allclose(weights.toarray(), expected.toarray(), rtol=1e-12, atol=1e-300)
    assert_array_equal(weights.indices, expected.indices)


@pytest.mark.parametrize("graph", ["dense", "knn"])
def test_power_of_two_scaling_gives_the_same_graph_exactly(rng, graph):
    features = rng.normal(size=(30, 4))
    expected = affinity(features, graph=graph, n_neighbors=4).toarray()
    for exponent in [-1000, -600, 3, 900]:
        scaled = affinity(np.ldexp(features, exponent), graph=graph, n_neighbors=4).toarray()
        assert_array_equal(scaled, expected)


def test_numeric_sigma_scales_with_the_features(rng):
    features = rng.normal(size=(20, 3))
    expected = affinity(features, graph="dense", sigma=0.8).toarray()
    for factor in [1e250, 1e-250]:
        weights = affinity(features * factor, graph="dense", sigma=0.8 * factor).toarray()
        assert_allclose(weights, expected, rtol=1e-12)


def test_huge_sigma_links_every_pair_with_weight_one(rng):
    features = rng.normal(size=(6, 2)) * 1e200
    weights = affinity(features, graph="dense", sigma=1e300).toarray()
    assert_array_equal(weights, 1 - np.eye(6))


def test_tiny_sigma_isolates_every_item_with_a_warning(rng):
    features = rng.normal(size=(6, 2))
    with pytest.warns(UserWarning, match=r"sigma=1e-300 .* underflows to 0: the graph has no"):
        weights = affinity(features, graph="dense", sigma=1e-300)
    assert weights.nnz == 0
    assert laplacian(weights).nnz == 0
    assert laplacian(weights, normalized=True).nnz == 0


def test_tiny_sigma_keeps_duplicates_linked_and_finite():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights = affinity(line(0, 0, 1, 2), graph="dense", sigma=5e-324).toarray()
    expected = np.zeros((4, 4))
    expected[0, 1] = expected[1, 0] = 1.0
    assert_array_equal(weights, expected)


@pytest.mark.parametrize("sigma", ["mean", 0.0, -1.0, float("nan"), float("inf"), True])
def test_bad_sigma_is_a_value_error_naming_it(sigma):
    with pytest.raises(ValueError, match="sigma"):
        affinity(line(0, 1, 2), sigma=sigma)


def test_underflowed_weights_are_no_edges():
    # Item 2 lies 100 widths away: its weights underflow; nothing is stored for them.
    weights = affinity(line(0, 1, 100), graph="dense", sigma=1.0)
    assert weights.nnz == 2
    assert_array_equal(degrees(weights), [math.exp(-0.5), math.exp(-0.5), 0.0])


@pytest.mark.parametrize("factor", [1e200, 1e-200])
@pytest.mark.parametrize(
    "reranker",
    [PointwiseReranker(c=0.1, n_neighbors=5),
     PointwiseReranker(c=0.1, graph="dense", laplacian="normalized"),
     PreferenceStrengthReranker(pairs="clustering", n_top=10, n_bottom=10, random_state=0)],
)
def test_rerankings_do_not_depend_on_the_feature_scale(rng, reranker, factor):
    features, initial = rng.normal(size=(40, 5)), rng.normal(size=40)
    expected = np.argsort(-reranker.fit_predict(features, initial))
    assert_array_equal(np.argsort(-reranker.fit_predict(features * factor, initial)), expected)


# Laplacians.


def test_unnormalized_laplacian_by_hand():
    lap = laplacian(sparse.csr_matrix(three_points_weights())).toarray()
    expected = [[D0, -W01, -W02], [-W01, D1, -W12], [-W02, -W12, D2]]
    assert_allclose(lap, expected, rtol=1e-14)


def test_normalized_laplacian_by_hand():
    lap = laplacian(sparse.csr_matrix(three_points_weights()), normalized=True).toarray()
    expected = [[1, -N01, -N02], [-N01, 1, -N12], [-N02, -N12, 1]]
    assert_allclose(lap, expected, rtol=1e-14)


def test_isolated_items_get_zero_rows_in_both_laplacians():
    weights = affinity(line(0, 1, 100), graph="dense", sigma=1.0)
    w = math.exp(-0.5)
    assert_allclose(laplacian(weights).toarray(), [[w, -w, 0], [-w, w, 0], [0, 0, 0]], rtol=1e-14)
    normalized = laplacian(weights, normalized=True).toarray()
    assert_allclose(normalized, [[1, -1, 0], [-1, 1, 0], [0, 0, 0]], rtol=1e-14)


@pytest.mark.parametrize("normalized", [False, True])
def test_laplacians_match_the_plain_loop_reference(rng, normalized):
    dense = np.triu(rng.uniform(size=(9, 9)) * (rng.uniform(size=(9, 9)) < 0.5), 1)
    dense[[2, 6], :] = 0.0
    dense[:, [2, 6]] = 0.0  # two isolated items
    dense = dense + dense.T
    lap = laplacian(sparse.csr_matrix(dense), normalized=normalized).toarray()
    assert_allclose(lap, reference_laplacians(dense)[normalized], rtol=1e-13, atol=1e-15)
    assert np.isfinite(lap).all()


@pytest.mark.parametrize("normalized", [False, True])
def test_laplacian_quadratic_forms_are_the_priors(rng, normalized):
    weights = affinity(rng.normal(size=(12, 3)), n_neighbors=3)
    dense, scores = weights.toarray(), rng.normal(size=12)
    degree = dense.sum(axis=1)
    scaled = scores / np.sqrt(degree) if normalized else scores
    prior = 0.5 * sum(dense[i, j] * (scaled[i] - scaled[j]) ** 2
                      for i in range(12) for j in range(12))
    lap = laplacian(weights, normalized=normalized)
    assert_allclose(scores @ (lap @ scores), prior, rtol=1e-12)


def test_pair_laplacian_matches_the_sum_of_pair_terms(rng):
    high, low = np.array([0, 0, 3, 1]), np.array([1, 4, 2, 4])
    pair_weights = rng.uniform(size=4)
    expected = np.zeros((5, 5))
    for h, lo, w in zip(high, low, pair_weights):
        difference = np.zeros(5)
        difference[h], difference[lo] = 1.0, -1.0
        expected += w * np.outer(difference, difference)
    assert_allclose(pair_laplacian((high, low), pair_weights, 5).toarray(), expected, rtol=1e-14)


# The searches against the plain ones they replaced: scikit-learn's k-NN search and the
# float64 cosine matrix.


def sklearn_neighbors(features, n_neighbors):
    indices = NearestNeighbors(n_neighbors=n_neighbors).fit(features).kneighbors(
        return_distance=False)
    rows = np.repeat(np.arange(len(features)), n_neighbors)
    lengths = np.linalg.norm(features[rows] - features[indices.ravel()], axis=1)
    return indices, lengths.reshape(indices.shape)


def dense_cosine_top_k(unit, k, least=False):
    similarities = unit @ unit.T
    np.fill_diagonal(similarities, 1.0)
    order = np.argsort(-similarities, axis=1, kind="stable")[:, :k]
    smallest = similarities.min(axis=1) if least else None
    return order, np.take_along_axis(similarities, order, axis=1), smallest


@pytest.mark.parametrize("n_items", [60, 700, pytest.param(2500, marks=pytest.mark.slow)])
def test_every_reranker_scores_as_with_the_plain_searches(monkeypatch, n_items):
    # As benchmarks/bench_rerankers.py --part sizes: random 32-d features and scores.
    rng = np.random.default_rng(n_items)
    features, initial = rng.normal(size=(n_items, 32)), rng.normal(size=n_items)
    cosines = initial / np.abs(initial).max()
    scores = {}
    for searches in ["library", "plain"]:
        if searches == "plain":
            monkeypatch.setattr(_graph, "euclidean_neighbors", sklearn_neighbors)
            monkeypatch.setattr(_graph, "cosine_top_k", dense_cosine_top_k)
        for cls in rerankers():
            y = cosines if issubclass(cls, CosineQueryReranker) else initial
            scores[searches, cls] = cls().fit_predict(features, y)
    for cls in rerankers():
        expected = scores["plain", cls]
        assert_allclose(scores["library", cls], expected, rtol=0,
                        atol=1e-6 * np.abs(expected).max(), err_msg=cls.__name__)


def test_most_similar_orders_by_similarity_then_index():
    rng = np.random.default_rng(1)
    features = rng.integers(0, 3, size=(30, 2)).astype(float)  # many exact ties
    query = rng.uniform(-1, 1, size=30)
    neighbours, similarities, least = most_similar(unit_rows(features), 7, query=query, least=True)
    full = node_similarities(features, query)
    order = np.argsort(-full, axis=1, kind="stable")[:, :7]
    np.testing.assert_array_equal(neighbours, order)
    np.testing.assert_allclose(similarities, np.take_along_axis(full, order, axis=1), atol=1e-12)
    np.testing.assert_allclose(least, full.min(axis=1), atol=1e-12)
