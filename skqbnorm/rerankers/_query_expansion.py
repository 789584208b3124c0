"""alpha-weighted query expansion and database-side augmentation (Radenovic et al., 2018)."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context

from .._core import row_top_k_indices
from .._validation import NotBool as Interval
from ._graph import most_similar, neighbor_matrix, unit_rows
from ._neighborhood import CosineQueryReranker


class QueryExpansionReranker(CosineQueryReranker):
    """Alpha-QE and DBA (Radenovic, Tolias and Chum, TPAMI 2018), from similarities.

    Database-side augmentation (DBA) replaces each sample's unit feature vector ``x_j``
    by the normalised weighted sum of itself and its ``n_database`` most similar samples,
    ``x'_j ~ sum_l max(x_j . x_l, 0)^alpha x_l`` (itself with weight 1). alpha-weighted
    query expansion (alpha-QE) then replaces the unit query ``q`` by
    ``q' ~ q + sum_i max(q . x'_i, 0)^alpha x'_i`` over the ``n_query`` samples most
    similar to it, and the scores are the cosines ``q' . x'_j``.

    The query's features are not needed: everything follows from the initial scores,
    read as the query's cosines ``q . x_j`` (so ``q . x'_j`` and ``q . q' `` are sums of
    them), and the samples' features. ``alpha=0`` gives plain average query expansion;
    ``n_query=0`` or ``n_database=0`` leaves out that step. Ties among equal similarities
    go to the lower index.

    Parameters
    ----------
    alpha : float, default=3.0
        Power of the similarity weights, >= 0: the expansion's strength, in reverse
        (the weights, cosines below 1, shrink as alpha grows, and the query and the
        samples move less; 0 averages the neighbours with equal weights). It is the
        parameter :class:`~skqbnorm.rerankers.RerankerCV` tunes (``strength_param``),
        over ``strength_grid`` = (0, 0.5, 1, 2, 3, 5, 10) by default.
    n_query : int, default=10
        Samples added to the query (alpha-QE), >= 0.
    n_database : int, default=10
        Neighbours added to each sample (DBA), >= 0.
    initial : {"cosine", "minmax"}, default="cosine"
        How the initial scores set the query's cosines: as they are (``"cosine"``, in
        [-1, 1]) or mapped linearly onto [0, 1] within each list (``"minmax"``).
    n_jobs : int, default=None
        Lists reranked in parallel (joblib); None means 1.

    Attributes
    ----------
    scores_ : ndarray of shape (n_samples,)
        The expanded query's cosines to the augmented samples, higher is better.
    group_labels_ : ndarray of shape (n_lists,)
        The distinct ``groups`` values, in sorted order.
    n_features_in_ : int
        Number of features per sample.

    See Also
    --------
    KReciprocalReranker : The k-reciprocal re-ranking.
    DiffusionReranker : Manifold ranking over the samples' k-NN graph.

    References
    ----------
    F. Radenovic, G. Tolias and O. Chum, "Fine-tuning CNN Image Retrieval with No Human
    Annotation", IEEE TPAMI 41(7), 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import QueryExpansionReranker
    >>> features = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.8, 0.6]])
    >>> query = np.array([0.96, 0.28])  # a unit vector, known here only to check the result
    >>> initial = features @ query  # the query's cosines to the samples
    >>> reranker = QueryExpansionReranker(alpha=1.0, n_query=1, n_database=0)
    >>> scores = reranker.fit_predict(features, initial)
    >>> expanded = query + initial[0] * features[0]  # q + (q . x_0)^alpha x_0, x_0 the top
    >>> np.allclose(scores, features @ expanded / np.linalg.norm(expanded))
    True
    """

    strength_param = "alpha"
    strength_grid = (0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)

    _parameter_constraints: dict = {
        **CosineQueryReranker._parameter_constraints,
        "alpha": [Interval(Real, 0, None, closed="left")],
        "n_query": [Interval(Integral, 0, None, closed="left")],
        "n_database": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(self, alpha=3.0, *, n_query=10, n_database=10, initial="cosine", n_jobs=None):
        self.alpha = alpha
        self.n_query = n_query
        self.n_database = n_database
        self.initial = initial
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=True)
    def rerank_path(self, X, y, groups=None, *, alphas):
        """Rerank every list at every ``alpha`` of ``alphas``, each list's neighbours found once.

        :class:`~skqbnorm.rerankers.RerankerCV` scores such a path.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the samples, compared by their cosine similarity.
        y : array-like of shape (n_samples,)
            Initial scores: the query's similarities to the samples, higher is better.
        groups : array-like of shape (n_samples,), default=None
            The list each sample belongs to; None means one list.
        alphas : array-like of float
            The values of ``alpha``, each >= 0.

        Returns
        -------
        rerankers : list of QueryExpansionReranker
            For each value, in order, a clone of this reranker with that ``alpha``,
            fitted: its ``scores_`` are those ``fit`` gives.

        Examples
        --------
        >>> import numpy as np
        >>> from skqbnorm import QueryExpansionReranker
        >>> rng = np.random.default_rng(0)
        >>> features, initial = rng.normal(size=(30, 3)), rng.uniform(-1, 1, size=30)
        >>> path = QueryExpansionReranker(n_query=3, n_database=3).rerank_path(
        ...     features, initial, alphas=[0.0, 3.0])
        >>> [reranker.alpha for reranker in path]
        [0.0, 3.0]
        >>> fitted = QueryExpansionReranker(3.0, n_query=3, n_database=3).fit(features, initial)
        >>> bool(np.all(path[1].scores_ == fitted.scores_))
        True
        """
        return self._fitted_path(X, y, groups, alphas, "alphas")

    def _rerank_path(self, features, initial, alphas):
        unit = unit_rows(features)
        neighbours = most_similar(unit, self.n_database + 1)[:2] if self.n_database > 0 else None
        return [(self._expanded_scores(unit, initial, neighbours, alpha), {}) for alpha in alphas]

    def _expanded_scores(self, unit, initial, neighbours, alpha):
        """One list's scores at ``alpha``; ``neighbours``: DBA's ``(indices, similarities)``."""
        if neighbours is not None:
            unit, initial = augmented(unit, initial, *neighbours, alpha)
        if self.n_query == 0:
            return initial
        top, values = row_top_k_indices(initial[None, :], min(self.n_query, len(initial)))
        weights = np.maximum(values[0], 0.0) ** alpha
        added = weights @ unit[top[0]]  # sum_i w_i x'_i
        norm = np.sqrt(1.0 + 2.0 * weights @ values[0] + added @ added)  # |q'|, q . q = 1
        return (initial + unit @ added) / norm


def augmented(unit, query, neighbours, similarities, alpha):
    """DBA: the augmented unit rows ``x'_j`` and the query's cosines ``q . x'_j`` to them,
    from each sample's most similar samples (``neighbours``, itself included) and their
    cosines ``similarities``."""
    n_items = len(unit)
    weights = neighbor_matrix(neighbours, n_items, np.maximum(similarities, 0.0) ** alpha)
    summed = weights @ unit
    norms = np.sqrt(np.einsum("ij,ij->i", summed, summed))
    inverse = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return inverse[:, None] * summed, inverse * (weights @ query)
