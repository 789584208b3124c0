"""Affinity graphs over a list's samples, and their Laplacians.

Distances are measured on the features centred and scaled by powers of two to a largest
magnitude in [0.5, 1): powers of two scale exactly and translations leave distances
unchanged, so no square overflows or underflows whatever the features' magnitude, and
the graph of ``sigma="median"`` is the same, to rounding, for features multiplied by
any positive factor.
"""

from contextlib import nullcontext

import numpy as np
from scipy import sparse
from sklearn.metrics import pairwise_distances

from .._core import (
    cosine_top_k,
    euclidean_neighbors,
    gathered_values,
    machine,
    one_thread,
    prepare_embeddings,
    row_top_k_indices,
)
from .._validation import warn_caller

#: Edge lengths beyond this many kernel widths get weight exp(-40^2 / 2) = 0 in
#: float64 anyway; clipping there keeps the square finite.
NEGLIGIBLE_RATIO = 40.0

#: Pairs closer than this fraction of their (centred) norms get their distance
#: recomputed from their differences: the fast dot-product formula ``|x|^2 + |y|^2 -
#: 2 x.y`` loses their digits (it gives duplicates distances of about 1e-8, not 0).
CLOSE_PAIR = 1e-3

#: Feature values per block when edge lengths or similarities are computed pair by
#: pair: half a CPU's share of the last-level cache (``gathered_values``), small
#: enough for the allocator to reuse rather than fault in fresh pages.
BLOCK_VALUES = gathered_values(machine())

#: Distance computations (items^2 x features) below which a list is reranked on one
#: thread: waking BLAS's and OpenMP's thread pools for a small list's k-NN search
#: costs more than the search itself, and the float32 products of
#: ``euclidean_neighbors`` gain little from more threads at that size. A count of
#: operations, fixed: it weighs the work against the pools' wake-up, not a cache.
SERIAL_WORK = 2**29


def affinity(features, *, graph="knn", n_neighbors=10, sigma="median", warn=True):
    """Gaussian affinities ``w_ij = exp(-||x_i - x_j||^2 / (2 sigma^2))``, sparse.

    Parameters
    ----------
    features : array-like of shape (n_items, n_features)
    graph : {"knn", "dense"}
        ``"dense"`` links every pair. ``"knn"`` links i and j when either is among
        the other's ``n_neighbors`` nearest (the union of both directions; an edge's
        weight depends only on its length, so both directions agree); with
        ``n_neighbors >= n_items - 1`` that is every pair, the dense graph.
    n_neighbors : int
        Neighbours per item for ``"knn"``. Duplicates of an item are at distance 0
        and come first; an item is never its own neighbour.
    sigma : float or "median"
        Kernel width, > 0. ``"median"`` takes the median length of the graph's
        edges (dense: of all pairs; knn: of the ``n_items * n_neighbors`` directed
        nearest-neighbour edges) leaving out edges of length 0, since duplicates
        carry no scale; if every edge has length 0, every weight is 1. A numeric
        sigma so small that every weight underflows to 0 leaves every item isolated:
        that graph has no edge, with a warning.
    warn : bool, default=True
        Whether to warn of a graph without edge here (the rerankers report it from
        ``fit``, where a worker process's warning would not reach the caller).

    Returns
    -------
    weights : sparse CSR matrix of shape (n_items, n_items)
        Symmetric, zero diagonal, no stored zeros (an underflowed weight is no edge);
        empty for fewer than 2 items. With ``sigma="median"`` it does not depend on
        the features' scale (to rounding; exactly for a power-of-two factor).
    """
    check_sigma(sigma)
    features = np.asarray(features, dtype=np.float64)
    n_items = len(features)
    if n_items < 2:
        return sparse.csr_matrix((n_items, n_items))
    scaled, exponent = unit_scaled(features)
    if graph == "dense" or n_neighbors >= n_items - 1:
        rows, cols, lengths = all_pairs(scaled)
    else:
        rows, cols, lengths = nearest_neighbor_edges(scaled, n_neighbors)
    weights = gaussian(lengths, exponent, sigma)
    if warn and not weights.any():
        warn_caller(
            f"sigma={sigma!r} is so small against the distances between the {n_items} "
            "samples that every affinity exp(-d^2 / (2 sigma^2)) underflows to 0: the "
            "graph has no edge and the prior no effect. Use a larger sigma or 'median'.",
            UserWarning,
        )
    matrix = sparse.csr_matrix((weights, (rows, cols)), shape=(n_items, n_items))
    return matrix.maximum(matrix.T).tocsr()  # stores no zeros


def thread_limit(n_items, n_features):
    """A context that builds a small list's graph on one BLAS/OpenMP thread.

    Below ``SERIAL_WORK`` distance computations (``n_items**2 * n_features``) the
    thread pools cost more to wake and join than they save; larger lists keep the
    threads the caller allows (``OMP_NUM_THREADS``, ``threadpoolctl``).
    """
    if n_items**2 * max(n_features, 1) >= SERIAL_WORK:
        return nullcontext()
    return one_thread()


def check_sigma(sigma):
    if isinstance(sigma, str):
        if sigma != "median":
            raise ValueError(f"sigma must be a positive float or 'median'; got {sigma!r}.")
    elif isinstance(sigma, bool) or not sigma > 0 or not np.isfinite(sigma):
        raise ValueError(f"sigma must be a positive finite float or 'median'; got {sigma!r}.")


def unit_scaled(features):
    """Centred features scaled to a largest magnitude in [0.5, 1), and the exponent
    ``e`` with ``features - mean = scaled * 2**e`` (to the centring's rounding)."""
    first = magnitude_exponent(features)
    centred = np.ldexp(features, -first)
    centred = centred - centred.mean(axis=0)
    second = magnitude_exponent(centred)
    return np.ldexp(centred, -second), first + second


def magnitude_exponent(values):
    """The power of two that brings the largest magnitude to [0.5, 1); 0 for zeros."""
    return int(np.frexp(np.abs(values).max(initial=0.0))[1])


def all_pairs(features):
    """Every pair ``i < j`` and its distance (features of magnitude below 1)."""
    rows, cols = np.triu_indices(len(features), 1)
    lengths = pairwise_distances(features)[rows, cols]
    squared_norms = np.einsum("ij,ij->i", features, features)
    close = lengths**2 < CLOSE_PAIR**2 * (squared_norms[rows] + squared_norms[cols])
    lengths[close] = edge_lengths(features, rows[close], cols[close])
    return rows, cols, lengths


def nearest_neighbor_edges(features, n_neighbors):
    """Each item's ``n_neighbors`` nearest other items (directed edges) and distances.

    An item is left out of its own neighbours (duplicates are not); ties go to the
    lower index; the lengths are those of ``edge_lengths``.
    """
    cols, lengths = euclidean_neighbors(features, n_neighbors)
    rows = np.repeat(np.arange(len(features)), n_neighbors)
    return rows, cols.ravel(), lengths.ravel()


def edge_lengths(features, rows, cols):
    """``||x_i - x_j||`` from the differences: accurate, symmetric, 0 for duplicates."""
    lengths = np.empty(len(rows))
    step = BLOCK_VALUES // features.shape[1] + 1
    for start in range(0, len(rows), step):
        block = slice(start, start + step)
        differences = features[rows[block]] - features[cols[block]]
        lengths[block] = np.sqrt(np.einsum("ij,ij->i", differences, differences))
    return lengths


def gaussian(lengths, exponent, sigma):
    """``exp(-(d / sigma)^2 / 2)`` for distances ``d = lengths * 2**exponent``."""
    if isinstance(sigma, str):
        ratio = lengths / kernel_width(lengths, sigma)
    else:
        mantissa, sigma_exponent = np.frexp(float(sigma))
        with np.errstate(over="ignore", under="ignore"):
            ratio = np.ldexp(lengths / mantissa, exponent - int(sigma_exponent))
    return np.exp(-0.5 * np.minimum(ratio, NEGLIGIBLE_RATIO) ** 2)


def kernel_width(edge_distances, sigma="median"):
    """``sigma`` itself, or the median of the positive edge lengths (1 if there is none:
    every edge then has length 0 and weight 1 whatever the width)."""
    if not isinstance(sigma, str):
        return float(sigma)
    positive = edge_distances[edge_distances > 0]
    return float(np.median(positive)) if len(positive) else 1.0


def degrees(weights):
    """``d_i = sum_j w_ij``, as a 1-D array."""
    return np.asarray(weights.sum(axis=1)).ravel()


def is_normalized(kind):
    """Whether the ``laplacian`` option ``kind`` asks for the normalised Laplacian."""
    return kind == "normalized"


def laplacian(weights, *, normalized=False):
    """``L = D - W``, or ``I - D^-1/2 W D^-1/2`` with zero rows for isolated items.

    ``r^T L r`` is ``1/2 sum_ij w_ij (r_i - r_j)^2``, or with ``normalized``
    ``1/2 sum_ij w_ij (r_i / sqrt(d_i) - r_j / sqrt(d_j))^2``. An isolated item
    (``d_i = 0``) has no term in either sum, hence a zero row and column: ``D^-1/2``
    is taken as 0 there and the identity's entry dropped.
    """
    degree = degrees(weights)
    if not normalized:
        return (sparse.diags(degree) - weights).tocsr()
    linked = degree > 0
    inv_sqrt = np.divide(1.0, np.sqrt(degree), out=np.zeros_like(degree), where=linked)
    scaled = sparse.diags(inv_sqrt) @ weights @ sparse.diags(inv_sqrt)
    return (sparse.diags(linked.astype(float)) - scaled).tocsr()


def pair_laplacian(pairs, weights, n_items):
    """Laplacian of a graph whose edges are the given pairs with the given weights."""
    high, low = pairs
    both_ways = (np.concatenate([high, low]), np.concatenate([low, high]))
    matrix = sparse.csr_matrix((np.concatenate([weights, weights]), both_ways),
                               shape=(n_items, n_items))
    return laplacian(matrix)


def quadratic_form(matrix, vector):
    return float(vector @ (matrix @ vector))


# The neighbourhood rerankers (k-reciprocal, diffusion, query expansion) compare the
# samples by the cosine of their features, and the query to the samples by the initial
# scores, its similarities to them. What they need of the similarity matrix is each row's
# nearest rows: found block by block, the matrix is never held whole.


def unit_rows(features):
    """The features as float64 unit rows (zero rows stay zero), scaled first by a power
    of two so that no square over- or underflows (the core's cosine preparation)."""
    return prepare_embeddings(np.asarray(features, dtype=np.float64), "cosine")


def most_similar(unit, n_neighbors, query=None, least=False):
    """Each node's ``n_neighbors`` most similar nodes (itself included), and each row's least
    similarity if ``least``.

    The nodes are the rows of ``unit`` (unit or zero rows), compared by their cosine
    similarity, with exactly 1 on the diagonal; with ``query`` (the query's
    similarities to the items, shape (n_items,)), the query comes first, the matrix
    of the ``n_items + 1`` nodes being ``[[1, query], [query^T, cosines]]``.

    Returns ``(neighbours, similarities, least)``: arrays of shape (n_nodes, n_neighbors)
    sorted by decreasing similarity, ties by increasing index (so a node comes first in its
    own row unless an earlier node is its duplicate), and of shape (n_nodes,) (None
    without ``least``). Memory: O(n_nodes n_neighbors) besides one block of similarities.
    """
    n_items = len(unit)
    n_nodes = n_items + (query is not None)
    n_neighbors = min(n_neighbors, n_nodes)
    neighbours, similarities, smallest = cosine_top_k(unit, min(n_neighbors, n_items),
                                                      least=least)
    if query is None:
        return neighbours, similarities, smallest
    # The query is node 0: it joins each item's row as its lowest index, first among ties.
    values = np.concatenate([query[:, None], similarities], axis=1)
    nodes = np.concatenate([np.zeros((n_items, 1), dtype=np.intp), neighbours + 1], axis=1)
    order = np.argsort(-values, axis=1, kind="stable")[:, :n_neighbors]
    first, first_values = row_top_k_indices(np.concatenate([[1.0], query])[None, :], n_neighbors)
    neighbours = np.concatenate([first, np.take_along_axis(nodes, order, axis=1)])
    similarities = np.concatenate([first_values, np.take_along_axis(values, order, axis=1)])
    if least:
        smallest = np.concatenate([[min(1.0, query.min(initial=1.0))],
                                   np.minimum(query, smallest)])
    return neighbours, similarities, smallest


def neighbor_matrix(neighbours, n_nodes, values=None):
    """Sparse ``(n_nodes, n_nodes)`` matrix with ``values`` (default 1) at ``(i, neighbours[i])``.

    ``neighbours[i]`` are distinct: the rows are built in place, their columns sorted
    (a CSR matrix in canonical form, as from coordinates, without their sort).
    """
    n_rows, k = neighbours.shape
    order = np.argsort(neighbours, axis=1)
    columns = np.take_along_axis(neighbours, order, axis=1).ravel()
    if values is None:
        data = np.ones(len(columns))
    else:
        data = np.take_along_axis(np.asarray(values), order, axis=1).ravel()
    indptr = np.minimum(np.arange(n_nodes + 1) * k, n_rows * k)
    return sparse.csr_matrix((data, columns, indptr), shape=(n_nodes, n_nodes))


def node_similarities(unit, rows, cols, query=None):
    """Entries ``(rows, cols)`` of the similarity matrix of ``most_similar``, computed
    pair by pair (O(n_pairs) memory)."""
    similarities = np.empty(len(rows))
    offset = 0 if query is None else 1
    step = BLOCK_VALUES // max(unit.shape[1], 1) + 1
    for start in range(0, len(rows), step):
        i, j = rows[start:start + step] - offset, cols[start:start + step] - offset
        values = np.einsum("ij,ij->i", unit[np.maximum(i, 0)], unit[np.maximum(j, 0)])
        if query is not None:
            values = np.where(i < 0, query[np.maximum(j, 0)], values)
            values = np.where(j < 0, query[np.maximum(i, 0)], values)
        values[i == j] = 1.0
        similarities[start:start + step] = values
    return similarities
