"""Boundary guards: tests that kill the mutants ``scripts/mutation_test.py`` found alive.

Each test pins one boundary (a threshold, a cut-off, an edge case) against values
written out by hand or an independent plain computation, never the library itself.
"""

import warnings

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from scipy.sparse.linalg import cg
from scipy.spatial.distance import cdist
from sklearn.base import BaseEstimator
from sklearn.model_selection import GridSearchCV, PredefinedSplit

from skqbnorm import (
    CSLS,
    Centering,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    HingeReranker,
    InvertedSoftmax,
    PointwiseReranker,
    PreferenceStrengthReranker,
)
from skqbnorm._ranks import count_greater
from skqbnorm.metrics import (
    average_precision,
    correct_item_ranks,
    hinge_distance,
    hubness_from_counts,
    k_occurrence,
    make_map_scorer,
    pointwise_distance,
    preference_strength_distance,
    recall_at_k,
)
from skqbnorm.rerankers._pairs import clustering_pairs, rho_adjacent_pairs, top_bottom_pairs

# ------------------------------------------------------------------------- hubness


def test_hub_threshold_is_twice_k():
    # k=2: hubs are items with N_k >= 4. Counts 4 (exactly 2k) and 3 (between k and 2k).
    measures = hubness_from_counts([4, 3, 1, 0], k=2)
    assert measures["hub_occurrence"] == pytest.approx(4 / 8)
    assert hubness_from_counts([3, 3, 2, 0], k=2)["hub_occurrence"] == 0.0
    assert hubness_from_counts([5, 3, 0, 0], k=2)["hub_occurrence"] == pytest.approx(5 / 8)


def test_hubness_measures_by_hand():
    # N_k = [3, 1, 0, 0]: mean 1, deviations (2, 0, -1, -1): m2 = 6/4, m3 = 6/4.
    measures = hubness_from_counts([3, 1, 0, 0], k=1)
    assert measures["skewness"] == pytest.approx(1.5 / 1.5**1.5)
    assert measures["antihub_occurrence"] == 0.5
    assert measures["hub_occurrence"] == pytest.approx(3 / 4)
    assert measures["robin_hood"] == pytest.approx(0.5 * 4 / 4)
    # Gini over sorted (0, 0, 1, 3) with weights (2i - n - 1) = (-3, -1, 1, 3): 10 / (4 * 4).
    assert measures["gini"] == pytest.approx(10 / 16)


def test_hubness_measures_of_huge_counts_are_finite_and_scale_free():
    # Cubes of 3e300 overflow: the measures must still be those of (3, 1, 0, 0).
    measures = hubness_from_counts([3e300, 1e300, 0.0, 0.0], k=1)
    assert measures["skewness"] == pytest.approx(1.5 / 1.5**1.5)
    assert measures["robin_hood"] == pytest.approx(0.5)
    assert measures["gini"] == pytest.approx(10 / 16)
    assert measures["hub_occurrence"] == 1.0  # both are >= 2
    assert hubness_from_counts([2e300, 2e300], k=1)["skewness"] == 0.0


def test_constant_counts_have_zero_skewness():
    assert hubness_from_counts([2, 2, 2], k=1)["skewness"] == 0.0
    # Unequal counts with a standard deviation below 1 still have a skewness: that of a
    # Bernoulli(1/4) sample, (1 - 2p) / sqrt(p (1 - p)).
    skewness = hubness_from_counts([1, 0, 0, 0], k=1)["skewness"]
    assert skewness == pytest.approx(0.5 / np.sqrt(0.25 * 0.75))


@pytest.mark.parametrize("counts", [[-1.0, 2.0], [2.0, -1.0], [0.5, 2.0]])
def test_counts_must_be_non_negative_whole_numbers(counts):
    with pytest.raises(ValueError, match="counts"):
        hubness_from_counts(counts, k=1)


def test_hubness_from_counts_refuses_k_zero():
    with pytest.raises(ValueError, match="k must be >= 1"):
        hubness_from_counts([1, 2], k=0)


# ----------------------------------------------------------------------- the core


def test_finite_check_accepts_values_whose_squares_overflow():
    # The fast test (a finite sum of squares) fails at 1e200; the fallback must accept.
    bank = np.full((3, 4), 1e200)
    centred = Centering().fit(bank).transform(np.full((2, 4), 1e200))
    assert_array_equal(centred, np.zeros((2, 4)))


def test_finite_check_names_the_first_bad_entry():
    bank = np.zeros((5, 4))
    bank[1, 2] = np.nan
    bank[3, 0] = np.inf
    with pytest.raises(ValueError, match=r"row 1\b.*item 2\b"):
        Centering().fit(bank)


@pytest.mark.parametrize("n_queries", [1, 2, 3])
def test_count_greater_in_tiles_matches_a_plain_count(n_queries):
    # With tile_size=4 and few queries, the gallery columns are searched in several
    # tiles: every tile (up to the last column) must be filled.
    rng = np.random.default_rng(0)
    bank = np.sort(rng.integers(0, 5, size=(7, 10)).astype(float), axis=0)
    queries = rng.integers(-1, 6, size=(n_queries, 10)).astype(float)
    expected = (bank[None, :, :] > queries[:, None, :]).sum(axis=1)
    assert_array_equal(count_greater(bank, queries, tile_size=4), expected)


# ---------------------------------------------------------------- ranking distances


@pytest.mark.parametrize(
    "pairs", [([1, -1], [0, 2]), ([0, 1], [2, -1]), ([0, 3], [1, 2]), ([0, 1], [3, 2])]
)
def test_pairs_outside_the_list_are_refused(pairs):
    # Each side mixes a valid index with -1 or n_items (3): the first and the last bad
    # value of a side, just outside [0, n_items).
    with pytest.raises(ValueError, match=r"pairs\[[01]\]"):
        hinge_distance([1.0, 2.0, 3.0], [3.0, 2.0, 1.0], pairs=pairs)
    with pytest.raises(ValueError, match=r"pairs\[[01]\]"):
        preference_strength_distance([1.0, 2.0, 3.0], [3.0, 2.0, 1.0], pairs=pairs)


def test_pairs_at_the_ends_of_the_list_are_accepted():
    # Items 0 and 2 (the first and last index) are valid: gap 2 - 0 reversed by 2.
    assert hinge_distance([0.0, 5.0, 2.0], [3.0, 2.0, 1.0], pairs=([0], [2])) == 4.0


def test_pointwise_distance_near_the_float64_limits():
    # Squares of 1e308 overflow and those of 5e-324 (the smallest subnormal) underflow:
    # the power-of-two scaling must keep both exact.
    assert pointwise_distance([1e308, 0.0], [0.0, 0.0]) == 1e308
    assert pointwise_distance([0.0, 0.0], [0.0, -1e308]) == 1e308
    assert pointwise_distance([5e-324, 0.0], [0.0, 0.0]) == 5e-324
    assert pointwise_distance([3e-300, 0.0], [0.0, 4e-300]) == pytest.approx(5e-300)
    assert hinge_distance([0.0, 1e-155], [2.0, 1.0]) == pytest.approx(1e-310)


# ----------------------------------------------------------------- reranker pairs

# Initial scores whose order is items 1, 3, 2, 0 (positions 0..3); N = 4.
INITIAL = np.array([1.0, 4.0, 2.0, 3.0])
ALL_PAIRS = {(1, 3), (1, 2), (1, 0), (3, 2), (3, 0), (2, 0)}


def pair_set(pairs):
    high, low = pairs
    return set(zip(np.asarray(high).tolist(), np.asarray(low).tolist()))


@pytest.mark.parametrize(
    ("rho", "expected"),
    [
        (1, {(1, 3), (3, 2), (2, 0)}),
        (2, {(1, 3), (3, 2), (2, 0), (1, 2), (3, 0)}),  # rho = N - 2: all but (first, last)
        (3, ALL_PAIRS),
        (4, ALL_PAIRS),
    ],
)
def test_rho_adjacent_pairs_by_hand(rho, expected):
    assert pair_set(rho_adjacent_pairs(INITIAL, rho)) == expected


def test_rho_adjacent_pairs_skip_ties():
    # Items 0 and 1 tie: adjacent, but carry no order.
    assert pair_set(rho_adjacent_pairs(np.array([2.0, 2.0, 1.0]), 1)) == {(1, 2)}


@pytest.mark.parametrize(
    ("n_top", "n_bottom", "expected"),
    [
        (1, 1, {(1, 0)}),
        (1, 2, {(1, 2), (1, 0)}),
        (2, 1, {(1, 0), (3, 0)}),
        (3, 3, ALL_PAIRS),  # N - 1 each: every pair
        (4, 4, ALL_PAIRS),
        (5, 5, ALL_PAIRS),  # beyond N: capped at the whole list
    ],
)
def test_top_bottom_pairs_by_hand(n_top, n_bottom, expected):
    assert pair_set(top_bottom_pairs(INITIAL, n_top, n_bottom)) == expected


# ----------------------------------------------------------------------- normalisers

GC_BANK = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]])


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # Ranks (bank entries above the query) 2 and 1; the tie-break u = 0.5 * (s -
        # min) / (max - min) is 0.5 on item 0 and 0 on item 1.
        ([0.75, 0.25], [-2 + 0.5, -1.0]),
        # A constant row has nothing to break: u = 0, the scores are exactly -rank.
        ([0.5, 0.5], [-3.0, 0.0]),
        ([0.95, 0.95], [0.0, 0.0]),
        # Spread beyond float64 (1e308 - -1e308): still u = 0.5 and 0.
        ([1e308, -1e308], [0.5, -3.0]),
    ],
)
def test_globally_corrected_scores_by_hand(query, expected):
    scores = GloballyCorrected().fit(GC_BANK).transform([query])
    assert_array_equal(scores, [expected])


# -------------------------------------------------------------- metrics validation


def test_k_occurrence_accepts_k_equal_to_the_gallery_size():
    # k = n_gallery puts every item in every query's top k.
    assert_array_equal(k_occurrence([[0.9, 0.5, 0.1], [0.8, 0.1, 0.7]], k=3), [2, 2, 2])


def test_recall_at_k_refuses_k_zero():
    with pytest.raises(ValueError, match="k must be >= 1"):
        recall_at_k([0.0, 1.0], 0)


def test_bad_relevance_labels_are_named_at_the_first():
    with pytest.raises(ValueError, match=r"relevance\[1\] is 2"):
        average_precision([3.0, 2.0, 1.0], [0, 2, 5])


def test_bad_relevance_matrix_entries_are_named_at_the_first():
    sims = [[0.9, 0.5, 0.1], [0.8, 0.1, 0.7]]
    with pytest.raises(ValueError, match=r"gt\[0, 1\] is 2"):
        correct_item_ranks(sims, [[1, 2, 0], [3, 1, 0]])


# -------------------------------------------------------------------- MAP scorer


class FirstColumn(BaseEstimator):
    """Scores every item by its first feature (a fixed, hand-checkable reranker)."""

    def __init__(self, offset=0.0):
        self.offset = offset

    def fit(self, X, y=None):
        return self

    def fit_predict(self, X, y=None, groups=None):
        return np.asarray(X, dtype=float)[:, 0] + self.offset


# Two queries of two items: scores (10, 9) with relevance (0, 1): AP 1/2; scores (2, 1)
# with relevance (1, 0): AP 1. Their mean is 3/4; pooled into one list (10, 9, 2, 1)
# with relevance (0, 1, 1, 0), the AP is (1/2 + 2/3) / 2 = 7/12.
MAP_X = np.array([[10.0], [9.0], [2.0], [1.0]])
MAP_RELEVANCE = np.array([0, 1, 1, 0])


def test_map_scorer_without_groups_scores_one_list():
    scorer = make_map_scorer()
    assert scorer(FirstColumn(), MAP_X, None, MAP_RELEVANCE) == pytest.approx(7 / 12)
    groups = [0, 0, 1, 1]
    assert scorer(FirstColumn(), MAP_X, None, MAP_RELEVANCE, groups) == pytest.approx(3 / 4)


def test_map_scorer_receives_each_folds_groups_in_a_search():
    X, relevance = np.vstack([MAP_X, MAP_X]), np.concatenate([MAP_RELEVANCE, MAP_RELEVANCE])
    groups = np.repeat([0, 1, 2, 3], 2)
    with sklearn.config_context(enable_metadata_routing=True):
        search = GridSearchCV(
            FirstColumn(),
            {"offset": [0.0]},
            scoring=make_map_scorer(),
            cv=PredefinedSplit(np.repeat([0, 1], 4)),
        ).fit(X, np.zeros(len(X)), groups=groups, relevance=relevance)
    assert search.cv_results_["split0_test_score"][0] == pytest.approx(3 / 4)
    assert search.cv_results_["split1_test_score"][0] == pytest.approx(3 / 4)


# Items 0..5 ranked in index order; in the top 4, items 0 and 2 lie together (feature
# near 0) and items 1 and 3 together (near 10): two equally large clusters, of which the
# one holding the best-ranked item (0) is the pseudo-positive one.
CLUSTER_INITIAL = np.array([6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
POSITIVE_PAIRS = {(0, 4), (0, 5), (2, 4), (2, 5)}


def test_clustering_pairs_tie_goes_to_the_best_ranked_item():
    features = np.array([[0.0], [10.0], [0.1], [10.1], [5.0], [5.0]])
    pairs = clustering_pairs(features, CLUSTER_INITIAL, 4, 2, 2, 0)
    assert pair_set(pairs) == POSITIVE_PAIRS


def test_clustering_pairs_cap_the_clusters_at_the_distinct_top_features():
    # Two distinct feature vectors among the top 4: asking for 3 clusters gets 2,
    # without k-means' warning about duplicate points.
    features = np.array([[0.0], [10.0], [0.0], [10.0], [5.0], [5.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pairs = clustering_pairs(features, CLUSTER_INITIAL, 4, 2, 3, 0)
    assert pair_set(pairs) == POSITIVE_PAIRS


# ------------------------------------------------------------------ reranker solves


def dense_gaussian_weights(points, sigma):
    """``w_ij = exp(-(x_i - x_j)^2 / (2 sigma^2))`` off the diagonal, for 1-D points."""
    gaps = np.subtract.outer(points, points)
    return np.exp(-(gaps**2) / (2 * sigma**2)) * (1 - np.eye(len(points)))


@pytest.mark.parametrize("laplacian", ["unnormalised", "normalised"])
@pytest.mark.parametrize("c", [0.05, 0.5, 5.0])
def test_pointwise_reranker_solves_its_documented_system(laplacian, c):
    # Unequal degrees (points 0, 1, 3), so the normalised Laplacian's null vector
    # sqrt(d) is not constant. Documented: (L / dbar + c I) r = c rbar, dbar = tr(L) / N.
    points, initial = np.array([0.0, 1.0, 3.0]), np.array([1.0, 3.0, 2.0])
    weights = dense_gaussian_weights(points, sigma=1.0)
    degree = weights.sum(axis=1)
    if laplacian == "normalised":
        prior = np.eye(3) - weights / np.sqrt(np.outer(degree, degree))
    else:
        prior = np.diag(degree) - weights
    mean_degree = np.trace(prior) / 3
    expected = np.linalg.solve(prior / mean_degree + c * np.eye(3), c * initial)
    reranker = PointwiseReranker(c=c, graph="dense", sigma=1.0, laplacian=laplacian)
    assert_allclose(reranker.fit_predict(points[:, None], initial), expected, rtol=1e-9)


# Items 0-2 (features 100, 101, 103) and 3-5 (0, 1, 2) form two components of the
# 1-nearest-neighbour graph; in the first, degrees differ (w01 = e^-0.5, w12 = e^-2).
TWO_COMPONENTS = np.array([[100.0], [101.0], [103.0], [0.0], [1.0], [2.0]])
FIRST_NULL = {
    "unnormalised": np.ones(3),
    "normalised": np.sqrt([np.exp(-0.5), np.exp(-0.5) + np.exp(-2), np.exp(-2)]),
}


@pytest.mark.parametrize("reranker", [HingeReranker, PreferenceStrengthReranker])
@pytest.mark.parametrize("laplacian", ["unnormalised", "normalised"])
def test_a_component_without_pairs_keeps_its_initial_mean(reranker, laplacian):
    # The only selected pair (top item 3, bottom item 5) lies in the second component:
    # the first feels only the prior, and takes the multiple of its null vector (ones,
    # or sqrt(d)) whose mean is the mean of its initial scores.
    initial = np.array([3.0, 2.0, 2.5, 5.0, 4.0, 1.0])
    model = reranker(
        c=0.5,
        n_neighbors=1,
        sigma=1.0,
        laplacian=laplacian,
        pairs="top_bottom",
        n_top=1,
        n_bottom=1,
        initial="scores",
    )
    scores = model.fit_predict(TWO_COMPONENTS, initial)
    null = FIRST_NULL[laplacian]
    assert_allclose(scores[:3], 2.5 / null.mean() * null, rtol=1e-9)


@pytest.mark.parametrize("reranker", [HingeReranker, PreferenceStrengthReranker])
def test_a_component_holding_only_the_high_end_of_a_pair_is_solved(reranker):
    # The pair (item 3, item 2) links the components into one, solved as a whole: it
    # keeps the mean of all initial scores (35 / 12), and neither component stays at
    # the mean of its own (4 and 11 / 6), as a component without pairs would.
    initial = np.array([2.5, 2.0, 1.0, 5.0, 4.0, 3.0])
    model = reranker(
        c=0.5,
        n_neighbors=1,
        sigma=1.0,
        pairs="top_bottom",
        n_top=1,
        n_bottom=1,
        initial="scores",
    )
    scores = model.fit_predict(TWO_COMPONENTS, initial)
    assert scores.mean() == pytest.approx(35 / 12)
    assert abs(scores[3:].mean() - 4.0) > 0.1
    assert abs(scores[:3].mean() - 11 / 6) > 0.1


def test_validation_errors_name_the_shape_and_dtype():
    with pytest.raises(ValueError, match=r"shape \(2, 2, 2\), dtype float64"):
        Centering().fit(np.zeros((2, 2, 2)))


def test_non_finite_embeddings_are_named_at_the_first():
    bank = np.ones((4, 3))
    bank[1, 2] = bank[3, 0] = np.nan
    with pytest.raises(ValueError, match=r"embedding 1, dimension 2 is nan"):
        Centering().fit(bank, gallery=np.ones((5, 3)))


def test_a_one_dimensional_y_is_ignored_and_a_two_dimensional_one_refused():
    # Centering by hand: each column minus its mean over the bank (1/3 for the identity).
    expected = np.eye(3) - 1 / 3
    assert_allclose(Centering().fit(np.eye(3), np.arange(3)).transform(np.eye(3)), expected)
    with pytest.raises(ValueError, match="y"):
        Centering().fit(np.eye(3), np.ones((3, 2)))


def test_csls_accepts_k_up_to_the_gallery_and_the_bank_size():
    # CSLS = 2 s - r_G(q) - r_B(g), with r_B the mean of each column's k largest bank
    # similarities and r_G the mean of the query's k largest: here k is the gallery
    # size (first) and the bank size (second), the largest allowed.
    bank = np.array([[0.9, 0.1], [0.5, 0.3], [0.2, 0.8]])  # r_B = (0.7, 0.55)
    assert_allclose(CSLS(k=2).fit(bank).transform([[0.6, 0.4]]), [[0.0, -0.25]], atol=1e-15)
    wide = np.array([[0.9, 0.1, 0.4], [0.5, 0.3, 0.6]])  # r_B = (0.7, 0.2, 0.5)
    assert_allclose(
        CSLS(k=2).fit(wide).transform([[0.6, 0.4, 0.2]]), [[0.0, 0.1, -0.6]], atol=1e-15
    )
    with pytest.raises(ValueError, match="querybank"):
        CSLS(k=3).fit(wide)
    with pytest.raises(ValueError, match="gallery"):
        CSLS(k=3).fit(bank)


def test_dynamic_inverted_softmax_accepts_k_equal_to_the_gallery_size():
    scores = DynamicInvertedSoftmax(k=2, beta=1.0).fit(GC_BANK).transform([[0.6, 0.4]])
    assert np.isfinite(scores).all()
    with pytest.raises(ValueError, match="larger than the gallery"):
        DynamicInvertedSoftmax(k=3, beta=1.0).fit(GC_BANK)


def test_non_finite_queries_are_named_by_row_and_gallery_item():
    with pytest.raises(ValueError, match=r"row 0 to gallery item 1 is nan"):
        CSLS(k=2).fit(GC_BANK).transform([[0.6, np.nan]])


def test_csls_k_starts_at_one():
    # k = 1: r_B is each column's largest bank similarity (0.9, 0.3), r_G the query's
    # largest (0.6): 2 s - r_G - r_B.
    scores = CSLS(k=1).fit(GC_BANK).transform([[0.6, 0.4]])
    assert_allclose(scores, [[1.2 - 0.6 - 0.9, 0.8 - 0.6 - 0.3]], atol=1e-15)
    with pytest.raises(ValueError, match=r"'k' parameter"):
        CSLS(k=0).fit(GC_BANK)


def test_inverted_softmax_refuses_soft_maxima_beyond_float64():
    # max + log(2) / beta: 1.7e308 + 6.9e307 overflows in the first column only.
    bank = np.array([[1.7e308, 0.1], [1.7e308, 0.2]])
    with pytest.raises(ValueError, match="beta"):
        InvertedSoftmax(beta=1e-308).fit(bank)


def test_transform_checks_the_gallery_width_against_fit():
    model = CSLS(k=1).fit(GC_BANK)
    with pytest.raises(ValueError, match="expecting 2 features"):
        model.transform([[0.1, 0.2, 0.3]])
    assert model.n_features_in_ == 2


def test_a_dask_querybank_of_one_row_fits_and_one_of_none_is_refused():
    da = pytest.importorskip("dask.array")
    # Centering by hand: the bank mean of a single row is that row.
    model = Centering().fit(da.from_array(np.array([[1.0, 2.0]])))
    assert_array_equal(model.transform(np.array([[3.0, 5.0]])), [[2.0, 3.0]])
    with pytest.raises(ValueError, match="0 sample"):
        Centering().fit(da.from_array(np.zeros((0, 2))))


def test_a_float64_dask_querybank_keeps_float64_precision():
    da = pytest.importorskip("dask.array")
    # The bank mean of 1 and 1 + 2^-40 is 1 + 2^-41: lost in float32, exact in float64.
    bank = da.from_array(np.array([[1.0], [1.0 + 2.0**-40]]))
    assert Centering().fit(bank).transform(np.array([[1.0]]))[0, 0] == -(2.0**-41)


def test_overflowing_scores_are_named_at_the_first():
    # Centering: 1.7e308 - (-1.7e308) overflows float64 in rows 1 and 2 of item 0.
    model = Centering().fit(np.array([[-1.7e308, 0.0]]))
    queries = np.array([[1.0, 1.0], [1.7e308, 1.0], [1.7e308, 2.0]])
    with pytest.raises(ValueError, match=r"first at X row 1, gallery item 0 "):
        model.transform(queries)


def test_conjugate_gradients_iterations_of_a_long_list():
    # Above 2,000 items the pointwise system (L / dbar + c I) r = c rbar is solved by
    # Jacobi-preconditioned conjugate gradients: n_iter_ must be the iteration count
    # of a plain scipy run on the same system (k-NN Gaussian graph built here from
    # its definition; x0 = 0 on the right-hand side with each component's mean
    # removed, which scaling by c does not change).
    rng = np.random.default_rng(0)
    features = rng.normal(size=(2001, 3))
    initial = features[:, 0] + rng.normal(scale=0.5, size=2001)
    distances = cdist(features, features)
    np.fill_diagonal(distances, np.inf)
    rows = np.repeat(np.arange(2001), 10)
    cols = np.argpartition(distances, 10, axis=1)[:, :10].ravel()
    weights = sparse.csr_matrix(
        (np.exp(-(distances[rows, cols] ** 2) / 2), (rows, cols)), shape=(2001, 2001)
    )
    weights = weights.maximum(weights.T)
    prior = sparse.diags(np.asarray(weights.sum(axis=1)).ravel()) - weights
    for c in [0.03, 0.3]:
        system = (prior / (prior.diagonal().mean()) + c * sparse.eye(2001)).tocsr()
        iterations = []
        cg(
            system,
            initial - initial.mean(),
            x0=np.zeros(2001),
            rtol=1e-10,
            atol=0.0,
            maxiter=20 * 2001,
            M=sparse.diags(1 / system.diagonal()),
            callback=iterations.append,
        )
        model = PointwiseReranker(c=c, sigma=1.0, n_neighbors=10).fit(features, initial)
        assert model.solver_status_.tolist() == ["solved"]
        assert model.n_iter_.tolist() == [len(iterations)]
