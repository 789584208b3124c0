"""k-reciprocal re-ranking (Zhong et al., CVPR 2017), sparse."""

from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import _fit_context

from .._validation import NotBool as Interval
from ._graph import most_similar, neighbor_matrix, node_similarities, unit_rows
from ._neighborhood import CosineQueryReranker


class KReciprocalReranker(CosineQueryReranker):
    """The k-reciprocal re-ranking of Zhong et al. (CVPR 2017), with sparse sets.

    The query joins the list's samples as one more node; the distance between two nodes
    is ``d_ij = 2 - 2 s_ij``, the squared distance of unit vectors with cosine ``s_ij``:
    the cosine similarity of the samples' features, and the initial score for the query
    and a sample. Each node's row of distances is divided by its largest entry. Then, as
    published:

    - ``N(i, k)``: the ``k + 1`` nodes nearest to i (i itself first), and its
      k-reciprocal set ``R(i, k) = {j in N(i, k) : i in N(j, k)}``;
    - ``R*(i)``: ``R(i, k1)`` joined with ``R(c, round(k1 / 2))`` for every ``c`` in it
      that shares more than two thirds of that set with ``R(i, k1)``;
    - ``V_i``: weights ``exp(-d_ij)`` on ``R*(i)``, summing to 1, averaged (local query
      expansion) over the ``k2`` nodes nearest to i when ``k2 > 1``;
    - the Jaccard distance ``J = 1 - m / (2 - m)`` with ``m = sum_l min(V_ql, V_jl)``
      between the query and each sample j, and the final distance
      ``(1 - lambda_value) J + lambda_value d_qj``; the scores are its negative.

    The published code builds dense ``(N + 1) x (N + 1)`` matrices; here the sets and
    ``V`` are sparse, the distances are found block by block and only the query's Jaccard
    row is formed: memory ``O(N k2 k1^2)`` at worst (an encoding spans its ``k2``
    neighbours' expanded sets) for N samples, time ``O(N^2 n_features)``.
    Ties between equal distances go to the lower index (the query, then the samples in
    the list's order). A node whose every distance is 0 (all its similarities 1) keeps
    distances 0 (the published code divides 0 by 0 there).

    Parameters
    ----------
    k1 : int, default=20
        Size of the k-reciprocal neighbourhoods, >= 1.
    k2 : int, default=6
        Neighbours averaged in the local query expansion, >= 1 (1: none).
    lambda_value : float, default=0.3
        Weight of the original distance against the Jaccard distance, in [0, 1]: the
        reranking's strength, in reverse (1 keeps the initial ranking, 0 ranks by the
        Jaccard distance alone). It is the parameter
        :class:`~skqbnorm.rerankers.RerankerCV` tunes (``strength_param``), over
        ``strength_grid`` = (0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1) by default.
    initial : {"cosine", "minmax"}, default="cosine"
        How the initial scores set the query's similarities: as they are
        (``"cosine"``: cosine similarities, in [-1, 1]), or mapped linearly onto [0, 1]
        within each list (``"minmax"``, for scores on another scale).
    n_jobs : int, default=None
        Lists reranked in parallel (joblib); None means 1.

    Attributes
    ----------
    scores_ : ndarray of shape (n_samples,)
        Reranked scores, the negative final distances: higher is better.
    group_labels_ : ndarray of shape (n_lists,)
        The distinct ``groups`` values, in sorted order.
    n_features_in_ : int
        Number of features per sample.

    See Also
    --------
    DiffusionReranker : Manifold ranking over the samples' k-NN graph.
    QueryExpansionReranker : Alpha-QE and database-side augmentation.

    References
    ----------
    Z. Zhong, L. Zheng, D. Cao and S. Li, "Re-ranking Person Re-identification with
    k-reciprocal Encoding", CVPR 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import KReciprocalReranker
    >>> features = np.array([[1.0, 0.0], [0.9, 0.1], [0.8, 0.2], [0.0, 1.0], [0.1, 0.9]])
    >>> initial = [0.7, 0.6, 0.75, 0.65, 0.5]  # the query's cosines to the samples
    >>> np.argsort(initial, kind="stable")[::-1]  # 3, of the other cluster, comes third
    array([2, 0, 3, 1, 4])
    >>> scores = KReciprocalReranker(k1=2, k2=2).fit_predict(features, initial)
    >>> np.argsort(-scores)  # 1, a mutual neighbour of the first two, overtakes it
    array([2, 0, 1, 3, 4])
    """

    strength_param = "lambda_value"
    strength_grid = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0)

    _parameter_constraints: dict = {
        **CosineQueryReranker._parameter_constraints,
        "k1": [Interval(Integral, 1, None, closed="left")],
        "k2": [Interval(Integral, 1, None, closed="left")],
        "lambda_value": [Interval(Real, 0, 1, closed="both")],
    }

    def __init__(self, k1=20, k2=6, lambda_value=0.3, *, initial="cosine", n_jobs=None):
        self.k1 = k1
        self.k2 = k2
        self.lambda_value = lambda_value
        self.initial = initial
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=True)
    def rerank_path(self, X, y, groups=None, *, lambda_values):
        """Rerank every list at every ``lambda_value`` of ``lambda_values``.

        The k-reciprocal sets and the Jaccard distances do not depend on
        ``lambda_value``: each list's are found once, and each value only weighs them
        against the original distances. :class:`~skqbnorm.rerankers.RerankerCV` scores
        such a path.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the samples, compared by their cosine similarity.
        y : array-like of shape (n_samples,)
            Initial scores: the query's similarities to the samples, higher is better.
        groups : array-like of shape (n_samples,), default=None
            The list each sample belongs to; None means one list.
        lambda_values : array-like of float
            The values of ``lambda_value``, each in [0, 1].

        Returns
        -------
        rerankers : list of KReciprocalReranker
            For each value, in order, a clone of this reranker with that
            ``lambda_value``, fitted: its ``scores_`` are those ``fit`` gives.

        Examples
        --------
        >>> import numpy as np
        >>> from skqbnorm import KReciprocalReranker
        >>> rng = np.random.default_rng(0)
        >>> features, initial = rng.normal(size=(30, 3)), rng.uniform(-1, 1, size=30)
        >>> path = KReciprocalReranker(k1=5, k2=2).rerank_path(features, initial,
        ...                                                     lambda_values=[0.0, 0.5])
        >>> [reranker.lambda_value for reranker in path]
        [0.0, 0.5]
        >>> fitted = KReciprocalReranker(k1=5, k2=2, lambda_value=0.5).fit(features, initial)
        >>> bool(np.all(path[1].scores_ == fitted.scores_))
        True
        """
        return self._fitted_path(X, y, groups, lambda_values, "lambda_values")

    def _rerank_path(self, features, initial, lambda_values):
        jaccard, original = k_reciprocal_parts(unit_rows(features), initial, self.k1, self.k2)
        return [(-final_distance(jaccard, original, value), {}) for value in lambda_values]


def final_distance(jaccard, original, lambda_value):
    """``(1 - lambda_value) J + lambda_value d``: the Jaccard and original distances weighed."""
    return (1.0 - lambda_value) * jaccard + lambda_value * original


def k_reciprocal_parts(unit, query, k1, k2):
    """The query's Jaccard distances and normalised original distances to the items."""
    n_nodes = len(unit) + 1
    half = int(np.around(k1 / 2.0))
    neighbours, _, least = most_similar(unit, max(k1 + 1, k2), query=query, least=True)
    largest = 2.0 - 2.0 * least  # each row's largest distance

    def normalized_distances(rows, cols):
        distances = 2.0 - 2.0 * node_similarities(unit, rows, cols, query=query)
        return np.divide(distances, largest[rows], out=np.zeros_like(distances),
                         where=largest[rows] > 0)

    reciprocal = reciprocal_sets(neighbours[:, :k1 + 1], n_nodes)
    half_sets = reciprocal_sets(neighbours[:, :half + 1], n_nodes)
    # |R(i, k1) & R(c, k1/2)| for every c in R(i, k1); c is taken when it exceeds 2/3 of
    # |R(c, k1/2)| (the published comparison, in floating point). R is symmetric.
    shared = reciprocal.multiply(reciprocal @ half_sets).tocoo()
    sizes = np.diff(half_sets.indptr)
    taken = shared.data > 2.0 / 3 * sizes[shared.col]
    chosen = sparse.csr_matrix((np.ones(taken.sum()), (shared.row[taken], shared.col[taken])),
                               shape=(n_nodes, n_nodes))
    expanded = (reciprocal + chosen @ half_sets).tocoo()
    weights = np.exp(-normalized_distances(expanded.row, expanded.col))
    totals = np.bincount(expanded.row, weights, minlength=n_nodes)
    encoding = sparse.csr_matrix((weights / totals[expanded.row], (expanded.row, expanded.col)),
                                 shape=(n_nodes, n_nodes))
    if k2 != 1:
        nearest = neighbor_matrix(neighbours[:, :k2], n_nodes)
        encoding = sparse.diags(1.0 / np.diff(nearest.indptr)) @ nearest @ encoding
    # The query's Jaccard row: sum_l min(V_ql, V_jl) over the query's support l (summed
    # in increasing l for every j).
    encoding = encoding.tocsr()
    query_row = encoding[0].toarray().ravel()
    supported = query_row[encoding.indices] != 0
    rows = np.repeat(np.arange(n_nodes), np.diff(encoding.indptr))[supported]
    support = encoding.indices[supported]
    order = np.lexsort((support, rows))
    overlap = np.bincount(rows[order], np.minimum(encoding.data[supported][order],
                                                  query_row[support[order]]),
                          minlength=n_nodes)
    jaccard = 1.0 - overlap / (2.0 - overlap)
    items = np.arange(1, n_nodes)
    original = normalized_distances(np.zeros(len(items), dtype=np.intp), items)
    return jaccard[1:], original


def reciprocal_sets(neighbours, n_nodes):
    """Sparse 0/1 matrix of ``j in N(i)`` and ``i in N(j)``, ``N(i)`` the row ``neighbours[i]``,
    of the smallest integer type that counts a row's entries (products of such matrices
    run about twice as fast as in float64)."""
    ones = np.ones(neighbours.shape, dtype=np.min_scalar_type(neighbours.shape[1]))
    forward = neighbor_matrix(neighbours, n_nodes, ones)
    return forward.multiply(forward.T).tocsr()
