"""Pair selection: which initially ordered pairs the ranking distance keeps."""

import numpy as np
from sklearn.cluster import KMeans

from ..metrics import ordered_pairs
from ._graph import unit_scaled

#: k-means restarts of the clustering pair selection.
KMEANS_INITS = 3


def initial_order(initial_scores):
    """Items from first to last in the initial list (ties: lower index first).

    Positions, and so the rho-adjacent, top and bottom sets, follow this order; a
    pair of tied items is never selected, whatever its positions.
    """
    return np.argsort(-initial_scores, kind="stable")


def strictly_ordered(high, low, initial_scores):
    """Keep the pairs whose initial scores differ: tied pairs carry no order."""
    strict = initial_scores[high] > initial_scores[low]
    return high[strict], low[strict]


def rho_adjacent_pairs(initial_scores, rho):
    """Pairs at most ``rho`` positions apart in the initial list (all pairs from
    ``rho = N - 1`` on)."""
    order = initial_order(initial_scores)
    n_items = len(order)
    if rho >= n_items - 1:
        return ordered_pairs(initial_scores)
    high = np.concatenate([order[: n_items - offset] for offset in range(1, rho + 1)])
    low = np.concatenate([order[offset:] for offset in range(1, rho + 1)])
    return strictly_ordered(high, low, initial_scores)


def top_and_bottom(initial_scores, n_top, n_bottom):
    """The first ``n_top`` and the last ``n_bottom`` items of the initial list (all of
    it for a size of N or more; the two sets overlap when ``n_top + n_bottom > N``)."""
    order = initial_order(initial_scores)
    return order[:n_top], order[-n_bottom:]  # n_bottom >= 1


def pairs_between(above, below, initial_scores):
    """Each item of ``above`` with each of ``below``, where strictly ordered."""
    high, low = np.repeat(above, len(below)), np.tile(below, len(above))
    return strictly_ordered(high, low, initial_scores)


def top_bottom_pairs(initial_scores, n_top, n_bottom):
    """Each of the top ``n_top`` items with each of the bottom ``n_bottom`` ranked below
    it (from ``n_top + n_bottom >= N`` on, the pairs ranked above-below across the
    overlap too; ``n_top = n_bottom = N - 1`` gives all pairs)."""
    top, bottom = top_and_bottom(initial_scores, n_top, n_bottom)
    return pairs_between(top, bottom, initial_scores)


def clustering_pairs(features, initial_scores, n_top, n_bottom, n_clusters, random_state):
    """Pseudo-positives: the largest k-means cluster of the top ``n_top`` items'
    features; pseudo-negatives: the bottom ``n_bottom``; every positive-negative pair.

    ``n_clusters`` is capped at the number of distinct feature vectors in the top; of
    equally large clusters, the one holding the best-ranked item wins. The features
    are scaled as the graph's are, so the clusters do not depend on their magnitude.
    """
    top, bottom = top_and_bottom(initial_scores, n_top, n_bottom)
    top_features = unit_scaled(features[top])[0]
    n_clusters = min(n_clusters, len(np.unique(top_features, axis=0)))
    kmeans = KMeans(n_clusters=n_clusters, n_init=KMEANS_INITS, random_state=random_state)
    labels = kmeans.fit_predict(top_features)
    sizes = np.bincount(labels)
    largest = labels[np.flatnonzero(sizes[labels] == sizes.max())[0]]
    return pairs_between(top[labels == largest], bottom, initial_scores)


def select_pairs(strategy, features, initial_scores, *, rho, n_top, n_bottom, n_clusters,
                 random_state):
    if strategy == "all":
        return ordered_pairs(initial_scores)
    if strategy == "rho_adjacent":
        return rho_adjacent_pairs(initial_scores, rho)
    if strategy == "top_bottom":
        return top_bottom_pairs(initial_scores, n_top, n_bottom)
    return clustering_pairs(features, initial_scores, n_top, n_bottom, n_clusters, random_state)
