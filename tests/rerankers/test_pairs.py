"""Pair selection at its boundaries, against plain itertools references and pairs written
out by hand."""

import itertools
import warnings

import numpy as np
import pytest

from skqbnorm.rerankers._pairs import (
    clustering_pairs,
    rho_adjacent_pairs,
    select_pairs,
    top_bottom_pairs,
)

SCORES = {
    "distinct": [0.9, 0.5, 0.7, 0.1, 0.3, 0.65, 0.2],
    "tied": [3.0, 2.0, 2.0, 1.0, 2.0, 3.0, 0.0],
    "two": [0.2, 0.8],
    "three_tied": [1.0, 1.0, 0.0],
}


def as_set(pairs):
    high, low = pairs
    listed = list(zip(high.tolist(), low.tolist()))
    assert len(listed) == len(set(listed)), "a pair is selected twice"
    return set(listed)


def positions(scores):
    """Position of each item in the initial list; ties keep the lower index first."""
    order = sorted(range(len(scores)), key=lambda item: (-scores[item], item))
    return {item: position for position, item in enumerate(order)}


def reference_rho_adjacent(scores, rho):
    position = positions(scores)
    return {(i, j) for i, j in itertools.permutations(range(len(scores)), 2)
            if scores[i] > scores[j] and abs(position[i] - position[j]) <= rho}


def reference_top_bottom(scores, n_top, n_bottom, above=None):
    position, n = positions(scores), len(scores)
    above = [i for i in range(n) if position[i] < n_top] if above is None else above
    below = [j for j in range(n) if position[j] >= n - n_bottom]
    return {(i, j) for i, j in itertools.product(above, below) if scores[i] > scores[j]}


def all_strict_pairs(scores):
    return {(i, j) for i, j in itertools.permutations(range(len(scores)), 2)
            if scores[i] > scores[j]}


def sizes_around(n):
    """1, 2, N - 2, N - 1, N, N + 1 and 2N: the boundaries of a cap on N items."""
    return sorted({size for size in (1, 2, n - 2, n - 1, n, n + 1, 2 * n) if size >= 1})


@pytest.mark.parametrize("name", SCORES)
def test_rho_adjacent_matches_the_reference_at_every_boundary(name):
    scores = SCORES[name]
    for rho in sizes_around(len(scores)):
        selected = as_set(rho_adjacent_pairs(np.array(scores), rho))
        assert selected == reference_rho_adjacent(scores, rho), rho


def test_rho_adjacent_by_hand():
    # Initial list: 0 (.9), 2 (.7), 1 (.5), 4 (.3), 3 (.1). rho = N - 2 = 3 leaves out
    # only the first-last pair; rho = N - 1 is every pair.
    scores = np.array([0.9, 0.5, 0.7, 0.1, 0.3])
    every = {(0, 2), (0, 1), (0, 4), (0, 3), (2, 1), (2, 4), (2, 3), (1, 4), (1, 3), (4, 3)}
    assert as_set(rho_adjacent_pairs(scores, 1)) == {(0, 2), (2, 1), (1, 4), (4, 3)}
    assert as_set(rho_adjacent_pairs(scores, 3)) == every - {(0, 3)}
    assert as_set(rho_adjacent_pairs(scores, 4)) == every
    assert as_set(rho_adjacent_pairs(scores, 5)) == every


def test_tied_scores_carry_no_order():
    # Initial list 0, 1, 2, 3 with 1 and 2 tied: their pair is dropped at any reach.
    scores = np.array([3.0, 2.0, 2.0, 1.0])
    assert as_set(rho_adjacent_pairs(scores, 1)) == {(0, 1), (2, 3)}
    assert as_set(rho_adjacent_pairs(scores, 2)) == {(0, 1), (2, 3), (0, 2), (1, 3)}
    strict = {(0, 1), (0, 2), (0, 3), (1, 3), (2, 3)}
    assert as_set(rho_adjacent_pairs(scores, 3)) == strict
    assert as_set(top_bottom_pairs(scores, 4, 4)) == strict
    assert as_set(top_bottom_pairs(scores, 2, 2)) == {(0, 2), (0, 3), (1, 3)}


@pytest.mark.parametrize("name", SCORES)
def test_top_bottom_matches_the_reference_at_every_cap(name):
    scores = SCORES[name]
    caps = sizes_around(len(scores))
    for n_top, n_bottom in itertools.product(caps, caps):
        selected = as_set(top_bottom_pairs(np.array(scores), n_top, n_bottom))
        assert selected == reference_top_bottom(scores, n_top, n_bottom), (n_top, n_bottom)


def test_top_bottom_by_hand():
    # Initial list 0, 2, 1, 4, 3.
    scores = np.array([0.9, 0.5, 0.7, 0.1, 0.3])
    assert as_set(top_bottom_pairs(scores, 1, 1)) == {(0, 3)}
    assert as_set(top_bottom_pairs(scores, 2, 2)) == {(0, 4), (0, 3), (2, 4), (2, 3)}
    # Overlapping sets (3 + 3 > 5): item 1 is in both, paired both ways.
    overlap = {(0, 1), (0, 4), (0, 3), (2, 1), (2, 4), (2, 3), (1, 4), (1, 3)}
    assert as_set(top_bottom_pairs(scores, 3, 3)) == overlap
    every = all_strict_pairs(scores.tolist())
    for n_top, n_bottom in [(4, 4), (5, 5), (6, 100)]:
        assert as_set(top_bottom_pairs(scores, n_top, n_bottom)) == every


@pytest.mark.parametrize("name", SCORES)
def test_all_pairs_are_the_strictly_ordered_ones(name):
    scores = SCORES[name]
    selected = select_pairs("all", None, np.array(scores), rho=1, n_top=1, n_bottom=1,
                            n_clusters=1, random_state=0)
    assert as_set(selected) == all_strict_pairs(scores)


# Clustering: items 0..7 in list order; the top five's features form two blobs.

CLUSTER_SCORES = np.linspace(1.0, 0.3, 8)


BLOBS = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1], [9.0, 9.0], [9.1, 9.0],
                  [5.0, 1.0], [3.0, 2.0], [1.0, 7.0]])


def clustering(features, n_top, n_bottom, n_clusters, scores=CLUSTER_SCORES):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return as_set(clustering_pairs(features, scores, n_top, n_bottom, n_clusters, 0))


def test_clustering_pairs_the_largest_top_cluster_with_the_bottom():
    expected = reference_top_bottom(CLUSTER_SCORES, 5, 2, above=[0, 1, 2])
    assert expected == {(p, b) for p in (0, 1, 2) for b in (6, 7)}
    assert clustering(BLOBS, 5, 2, 2) == expected


@pytest.mark.parametrize("factor", [1e200, 1e-200, 3.0])
def test_clustering_does_not_depend_on_the_feature_scale(factor):
    assert clustering(BLOBS * factor, 5, 2, 2) == clustering(BLOBS, 5, 2, 2)


def test_one_cluster_takes_the_whole_top():
    assert clustering(BLOBS, 5, 2, 1) == reference_top_bottom(CLUSTER_SCORES, 5, 2)


@pytest.mark.parametrize("n_clusters", [5, 6, 100])
def test_as_many_clusters_as_top_items_keep_the_best_ranked_one(n_clusters):
    assert clustering(BLOBS, 5, 2, n_clusters) == {(0, 6), (0, 7)}


def test_equally_large_clusters_go_to_the_one_holding_the_best_ranked_item():
    # Top four: items 0 and 3 alike, 1 and 2 alike.
    features = BLOBS[[0, 3, 4, 1, 5, 6, 7, 2]]
    assert clustering(features, 4, 1, 2) == {(0, 7), (3, 7)}
    assert clustering(features[[1, 0, 2, 3, 4, 5, 6, 7]], 4, 1, 2) == {(0, 7), (2, 7)}


def test_clusters_are_capped_at_the_distinct_top_features():
    features = np.r_[np.ones((5, 2)), BLOBS[5:]]  # a top of five duplicates
    assert clustering(features, 5, 2, 3) == reference_top_bottom(CLUSTER_SCORES, 5, 2)


def test_a_top_of_every_item_clusters_the_whole_list():
    # The last item joins the clustering and makes {2, 3, 4} the largest cluster (the
    # top without it would be two clusters of two).
    features = np.array([[0.0], [0.1], [5.0], [5.1], [5.2]])
    scores = np.linspace(1.0, 0.0, 5)
    assert clustering(features, 5, 1, 2, scores) == {(2, 4), (3, 4)}
    assert clustering(features, 100, 1, 2, scores) == {(2, 4), (3, 4)}


def test_clustering_drops_tied_pairs():
    scores = np.array([1.0, 1.0, 1.0, 0.5, 0.0, 0.0])
    features = np.array([[0.0], [0.1], [0.2], [9.0], [9.1], [9.2]])
    # Top three (one cluster) against a bottom of four that holds item 2, tied with it.
    expected = {(p, b) for p in (0, 1, 2) for b in (3, 4, 5)}
    assert clustering(features, 3, 4, 1, scores) == expected


def test_select_pairs_dispatches_to_each_strategy():
    common = {"rho": 2, "n_top": 5, "n_bottom": 2, "n_clusters": 2, "random_state": 0}
    strategies = {
        "all": all_strict_pairs(CLUSTER_SCORES),
        "rho_adjacent": reference_rho_adjacent(CLUSTER_SCORES, 2),
        "top_bottom": reference_top_bottom(CLUSTER_SCORES, 5, 2),
        "clustering": reference_top_bottom(CLUSTER_SCORES, 5, 2, above=[0, 1, 2]),
    }
    assert len({frozenset(pairs) for pairs in strategies.values()}) == 4
    for strategy, expected in strategies.items():
        assert as_set(select_pairs(strategy, BLOBS, CLUSTER_SCORES, **common)) == expected


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
