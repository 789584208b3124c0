"""Pair selection: which initially ordered pairs the ranking distance keeps."""

import numpy as np
from sklearn.cluster import KMeans

from ..metrics import ordered_pairs


def initial_order(initial_scores):
    """Items from first to last in the initial list (ties: lower index first)."""
    return np.argsort(-initial_scores, kind="stable")


def strictly_ordered(high, low, initial_scores):
    """Keep the pairs whose initial scores differ: tied pairs carry no order."""
    strict = initial_scores[high] > initial_scores[low]
    return high[strict], low[strict]


def rho_adjacent_pairs(initial_scores, rho):
    """Pairs at most ``rho`` positions apart in the initial list."""
    order = initial_order(initial_scores)
    n_items = len(order)
    if rho >= n_items - 1:
        return ordered_pairs(initial_scores)
    high = np.concatenate([order[: n_items - offset] for offset in range(1, rho + 1)])
    low = np.concatenate([order[offset:] for offset in range(1, rho + 1)])
    return strictly_ordered(high, low, initial_scores)


def top_and_bottom(initial_scores, n_top, n_bottom):
    """The first ``n_top`` and last ``n_bottom`` items of the initial list (each at most N - 1)."""
    order = initial_order(initial_scores)
    n_top, n_bottom = min(n_top, len(order) - 1), min(n_bottom, len(order) - 1)
    return order[:n_top], order[len(order) - n_bottom :]


def pairs_between(above, below, initial_scores):
    """Each item of ``above`` with each of ``below``, where strictly ordered."""
    high, low = np.repeat(above, len(below)), np.tile(below, len(above))
    return strictly_ordered(high, low, initial_scores)


def top_bottom_pairs(initial_scores, n_top, n_bottom):
    """Each of the top ``n_top`` items with each of the bottom ``n_bottom``."""
    top, bottom = top_and_bottom(initial_scores, n_top, n_bottom)
    return pairs_between(top, bottom, initial_scores)


def clustering_pairs(features, initial_scores, n_top, n_bottom, n_clusters, random_state):
    """Pseudo-positives: the largest cluster of the top ``n_top`` items' features;
    pseudo-negatives: the bottom ``n_bottom``; every positive-negative pair."""
    top, bottom = top_and_bottom(initial_scores, n_top, n_bottom)
    n_clusters = min(n_clusters, len(top))
    labels = KMeans(n_clusters=n_clusters, n_init=3, random_state=random_state).fit_predict(features[top])
    positives = top[labels == np.bincount(labels).argmax()]
    return pairs_between(positives, bottom, initial_scores)


def select_pairs(strategy, features, initial_scores, *, rho, n_top, n_bottom, n_clusters, random_state):
    if strategy == "all":
        return ordered_pairs(initial_scores)
    if strategy == "rho_adjacent":
        return rho_adjacent_pairs(initial_scores, rho)
    if strategy == "top_bottom":
        return top_bottom_pairs(initial_scores, n_top, n_bottom)
    return clustering_pairs(features, initial_scores, n_top, n_bottom, n_clusters, random_state)
