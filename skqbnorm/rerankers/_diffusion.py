"""Diffusion on the samples' k-NN graph (Iscen et al., CVPR 2017; Zhou et al., NIPS 2003)."""

from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import _fit_context
from sklearn.exceptions import ConvergenceWarning

from .._core import row_top_k_indices
from .._validation import NotBool as Interval
from .._validation import warn_caller
from ._base import score_scale, which_lists
from ._graph import degrees, most_similar, neighbor_matrix, unit_rows
from ._neighborhood import NeighborhoodReranker
from ._solvers import TOLERANCE, conjugate_gradients


class DiffusionReranker(NeighborhoodReranker):
    """Diffusion of the initial scores over the samples' mutual k-NN graph (manifold ranking).

    The affinity of samples i and j (Iscen et al., CVPR 2017) is
    ``a_ij = max(s_ij, 0)^gamma`` when each is among the other's ``n_neighbors`` most
    similar samples, 0 otherwise (and on the diagonal), with ``s_ij`` the cosine similarity
    of their features. With ``W = D^-1/2 A D^-1/2`` (``D`` the degrees; an isolated sample
    has a zero row) the scores are the manifold ranking (Zhou et al., NIPS 2003)::

        f = (I - alpha W)^-1 y

    the fixed point of ``f = alpha W f + y``, solved by conjugate gradients (``I - alpha W``
    is symmetric positive definite for ``alpha < 1``). The source vector ``y`` holds the
    initial scores as the paper's code builds the query's: ``y_i = max(rbar_i, 0)^gamma``
    for the ``n_source`` samples of highest initial score ``rbar``, 0 for the others, with
    ``rbar`` first divided by its largest magnitude (so that scaling the initial scores
    changes nothing). An isolated sample keeps its source value. The source keeps only
    positive scores, so a list without one (all its initial scores <= 0, e.g. negative
    cosines) is first mapped onto [0, 1], ``rbar = (y - min y) / (max y - min y)``,
    rather than diffusing nothing.

    Samples the diffusion leaves tied (exactly equal scores: those it does not reach
    from the source, and at ``alpha=0`` those outside it) keep the order of their initial
    scores: each group of ties is spread below its value, by at most ``1e-10`` of the
    list's largest score and less than half the gap to the next lower score, so the
    diffusion's own order is unchanged and ``alpha=0`` ranks as the initial scores do
    (as far as float64 resolves such gaps).

    Parameters
    ----------
    alpha : float, default=0.99
        Weight of the diffusion against the source, in [0, 1): the reranking's
        strength (0 returns the source, the initial scores of its ``n_source``
        samples with its ties in the initial order: the initial ranking). It is
        the parameter :class:`~skqbnorm.rerankers.RerankerCV` tunes
        (``strength_param``), over ``strength_grid`` = (0.5, 0.7, 0.8, 0.9, 0.95,
        0.99) by default.
    n_neighbors : int, default=50
        Neighbours per sample (``k``) of the mutual k-NN graph, >= 1.
    gamma : float, default=3.0
        Power on the similarities and on the source, >= 0 (Iscen et al.'s value: 3).
    n_source : int or None, default=10
        Samples of highest initial score in the source vector, >= 1 (the query's
        nearest neighbours in the paper's code); None keeps every sample.
    n_jobs : int, default=None
        Lists reranked in parallel (joblib); None means 1.

    Attributes
    ----------
    scores_ : ndarray of shape (n_samples,)
        Diffused scores, higher is better (in units of the source, at most
        ``1 / (1 - alpha)``).
    group_labels_ : ndarray of shape (n_lists,)
        The distinct ``groups`` values, in sorted order.
    n_iter_ : ndarray of shape (n_lists,)
        Conjugate-gradient iterations per list (a ``ConvergenceWarning`` names the lists
        that stopped at ``20 * n_samples`` iterations short of the tolerance).
    n_features_in_ : int
        Number of features per sample.

    See Also
    --------
    KReciprocalReranker : The k-reciprocal re-ranking.
    RandomWalkReranker : A random walk over a Gaussian graph.

    References
    ----------
    A. Iscen, G. Tolias, Y. Avrithis, T. Furon and O. Chum, "Efficient Diffusion on Region
    Manifolds: Recovering Small Objects with Compact CNN Representations", CVPR 2017.
    D. Zhou, J. Weston, A. Gretton, O. Bousquet and B. Schoelkopf, "Ranking on Data
    Manifolds", NIPS 2003.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import DiffusionReranker
    >>> features = np.array([[1.0, 0.0], [0.9, 0.1], [0.8, 0.2], [0.0, 1.0], [0.1, 0.9]])
    >>> initial = [0.9, 0.2, 0.3, 0.5, 0.4]
    >>> np.argsort(initial)[::-1]
    array([0, 3, 4, 2, 1])
    >>> scores = DiffusionReranker(alpha=0.9, n_neighbors=2).fit_predict(features, initial)
    >>> np.argsort(-scores)  # 1 and 2, the neighbours of the top sample, rise above 3 and 4
    array([0, 1, 2, 3, 4])
    """

    strength_param = "alpha"
    strength_grid = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)

    _parameter_constraints: dict = {
        **NeighborhoodReranker._parameter_constraints,
        "alpha": [Interval(Real, 0, 1, closed="left")],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "gamma": [Interval(Real, 0, None, closed="left")],
        "n_source": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(self, alpha=0.99, *, n_neighbors=50, gamma=3.0, n_source=10, n_jobs=None):
        self.alpha = alpha
        self.n_neighbors = n_neighbors
        self.gamma = gamma
        self.n_source = n_source
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=True)
    def rerank_path(self, X, y, groups=None, *, alphas):
        """Rerank every list at every ``alpha`` of ``alphas``, each list's graph built once.

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
            The values of ``alpha``, each in [0, 1) (real numbers: booleans and
            strings are refused).

        Returns
        -------
        rerankers : list of DiffusionReranker
            For each value, in order, a clone of this reranker with that ``alpha``,
            fitted: its ``scores_`` and ``n_iter_`` are those ``fit`` gives, and it
            warns as ``fit`` does.

        Examples
        --------
        >>> import numpy as np
        >>> from skqbnorm import DiffusionReranker
        >>> rng = np.random.default_rng(0)
        >>> features, initial = rng.normal(size=(30, 3)), rng.normal(size=30)
        >>> path = DiffusionReranker(n_neighbors=5).rerank_path(features, initial,
        ...                                                     alphas=[0.5, 0.9])
        >>> [reranker.alpha for reranker in path]
        [0.5, 0.9]
        >>> fitted = DiffusionReranker(0.9, n_neighbors=5).fit(features, initial)
        >>> bool(np.all(path[1].scores_ == fitted.scores_))
        True
        """
        return self._fitted_path(X, y, groups, alphas, "alphas")

    def _rerank_path(self, features, initial, alphas):
        weights = normalized_affinity(mutual_affinity(unit_rows(features), self.n_neighbors,
                                                      self.gamma))
        identity, source = sparse.identity(len(initial)), self._source(initial)
        solves = (conjugate_gradients((identity - alpha * weights).tocsr(), source, None)
                  for alpha in alphas)
        return [(ties_in_initial_order(scores, initial), info) for scores, info in solves]

    def _report(self, infos):
        self.n_iter_ = np.array([info["n_iter"] for info in infos])
        stopped = [i for i, info in enumerate(infos) if info["status"] != "solved"]
        if stopped:
            warn_caller(
                f"Conjugate gradients stopped after {self.n_iter_[stopped].max()} iterations "
                f"without reaching a relative residual of {TOLERANCE} on "
                f"{which_lists(self.group_labels_, stopped)}: their scores may "
                f"be inaccurate. alpha={self.alpha} closer to 1 makes the system harder.",
                ConvergenceWarning,
            )

    def _source(self, initial):
        """``max(rbar, 0)^gamma`` on the ``n_source`` highest initial scores, 0 elsewhere."""
        scaled = source_scores(initial)
        source = np.zeros_like(scaled)
        n_source = len(scaled) if self.n_source is None else min(self.n_source, len(scaled))
        top = row_top_k_indices(scaled[None, :], n_source)[0][0]
        with np.errstate(under="ignore"):
            source[top] = np.maximum(scaled[top], 0.0) ** self.gamma
        return source


def mutual_affinity(unit, n_neighbors, gamma):
    """``max(s_ij, 0)^gamma`` between mutual k-NN (``n_neighbors + 1`` most similar, itself
    included), zero diagonal, sparse and symmetric."""
    neighbours, similarities, _ = most_similar(unit, n_neighbors + 1)
    n_items = len(unit)
    forward = neighbor_matrix(neighbours, n_items, np.maximum(similarities, 0.0) ** gamma)
    mutual = forward.multiply(neighbor_matrix(neighbours, n_items).T).tocsr()
    mutual = mutual - sparse.diags(mutual.diagonal())
    mutual.eliminate_zeros()
    return mutual


def normalized_affinity(affinity):
    """``D^-1/2 A D^-1/2``, 0 on the rows and columns of isolated items."""
    degree = degrees(affinity)
    inv_sqrt = np.divide(1.0, np.sqrt(degree), out=np.zeros_like(degree), where=degree > 0)
    return (sparse.diags(inv_sqrt) @ affinity @ sparse.diags(inv_sqrt)).tocsr()


#: The most a group of tied scores is spread, relative to the list's largest score.
TIE_SPREAD = 1e-10


def source_scores(initial):
    """``rbar``: the initial scores over their largest magnitude, or, for a list with no
    positive score (whose source would be empty), mapped onto [0, 1] by min-max."""
    highest = initial.max()
    if highest > 0:
        return initial / score_scale(initial)[0]
    lowest = initial.min()
    return (initial - lowest) / (highest - lowest)  # no overflow: both are <= 0


def ties_in_initial_order(scores, initial):
    """``scores`` with each group of equal values spread below its value in the order of
    ``initial`` (equal initial scores stay tied): by less than half the gap to the next
    lower value and at most :data:`TIE_SPREAD` of the largest magnitude."""
    order = np.lexsort((initial, scores))
    ranked, by_initial = scores[order], initial[order]
    new_value = np.r_[True, ranked[1:] != ranked[:-1]]
    new_pair = new_value | np.r_[True, by_initial[1:] != by_initial[:-1]]
    pair_rank = np.cumsum(new_pair) - 1
    within = pair_rank - np.maximum.accumulate(np.where(new_value, pair_rank, 0))
    starts = np.flatnonzero(new_value)
    size = np.maximum.reduceat(within, starts) + 1
    values = ranked[starts]
    room = np.minimum(np.r_[np.inf, np.diff(values) / 2],
                      TIE_SPREAD * (np.abs(values).max() or 1.0))
    group = np.cumsum(new_value) - 1
    spread = np.empty_like(scores)
    spread[order] = ranked - room[group] * (size[group] - 1 - within) / size[group]
    return spread
