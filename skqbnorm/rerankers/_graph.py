"""Affinity graphs over a list's samples, and their Laplacians."""

import numpy as np
from scipy import sparse
from sklearn.metrics import pairwise_distances
from sklearn.neighbors import NearestNeighbors


def affinity(features, *, graph="knn", n_neighbors=10, sigma="median"):
    """Gaussian affinities ``w_ij = exp(-||x_i - x_j||^2 / (2 sigma^2))``, sparse.

    Parameters
    ----------
    features : ndarray of shape (n_items, n_features)
    graph : {"knn", "dense"}
        ``"dense"`` links every pair; ``"knn"`` keeps each item's ``n_neighbors``
        nearest neighbours and symmetrises (``w_ij = max`` of both directions).
    n_neighbors : int
        Neighbours per item for ``"knn"`` (clipped to n_items - 1).
    sigma : float or "median"
        Kernel width; ``"median"`` takes the median distance over the graph's edges.

    Returns
    -------
    weights : sparse CSR matrix of shape (n_items, n_items)
        Symmetric, zero diagonal.
    """
    n_items = len(features)
    if graph == "dense":
        distances = pairwise_distances(features)
        rows, cols = np.nonzero(~np.eye(n_items, dtype=bool))
        edge_distances = distances[rows, cols]
    else:
        k = min(n_neighbors, n_items - 1)
        neighbours = NearestNeighbors(n_neighbors=k + 1).fit(features)
        distances, indices = neighbours.kneighbors(features)
        # Drop each item's own entry, wherever duplicates put it.
        keep = indices != np.arange(n_items)[:, None]
        keep[keep.sum(axis=1) > k, -1] = False
        cols, edge_distances = indices[keep], distances[keep]
        rows = np.repeat(np.arange(n_items), keep.sum(axis=1))
    width = kernel_width(edge_distances, sigma)
    weights = np.exp(-(edge_distances**2) / (2 * width**2))
    matrix = sparse.csr_matrix((weights, (rows, cols)), shape=(n_items, n_items))
    return matrix.maximum(matrix.T).tocsr()


def kernel_width(edge_distances, sigma):
    if sigma != "median":
        return float(sigma)
    width = float(np.median(edge_distances))
    if width > 0:
        return width
    positive = edge_distances[edge_distances > 0]
    return float(np.median(positive)) if len(positive) else 1.0


def degrees(weights):
    """``d_i = sum_j w_ij``, as a 1-D array."""
    return np.asarray(weights.sum(axis=1)).ravel()


def laplacian(weights, *, normalised=False):
    """``L = D - W``, or ``I - D^-1/2 W D^-1/2`` (isolated items get a zero row)."""
    degree = degrees(weights)
    if not normalised:
        return (sparse.diags(degree) - weights).tocsr()
    inv_sqrt = np.divide(1.0, np.sqrt(degree), out=np.zeros_like(degree), where=degree > 0)
    scaled = sparse.diags(inv_sqrt) @ weights @ sparse.diags(inv_sqrt)
    return (sparse.diags((degree > 0).astype(float)) - scaled).tocsr()


def pair_laplacian(pairs, weights, n_items):
    """Laplacian of a graph whose edges are the given pairs with the given weights."""
    high, low = pairs
    matrix = sparse.csr_matrix(
        (np.concatenate([weights, weights]), (np.concatenate([high, low]), np.concatenate([low, high]))),
        shape=(n_items, n_items),
    )
    return laplacian(matrix)


def quadratic_form(matrix, vector):
    return float(vector @ (matrix @ vector))
