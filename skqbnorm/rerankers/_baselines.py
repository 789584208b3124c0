"""Baseline rerankers: point-wise distance and random walk."""

import numpy as np
from scipy import sparse
from sklearn.utils._param_validation import StrOptions

from ..metrics import pointwise_distance
from ._base import BayesianReranker
from ._graph import degrees, laplacian, quadratic_form
from ._solvers import solve_graph_system


class PointwiseReranker(BayesianReranker):
    """Bayesian reranking with the point-wise distance ``sum (r_i - rbar_i)^2``.

    Minimises ``r^T L r + c ||r - rbar||^2``, whose minimiser solves
    ``(L + c I) r = c rbar`` (preconditioned conjugate gradients). A baseline: the point-wise distance ignores order.

    Parameters
    ----------
    c : float, default=1.0
        Weight of the distance against the visual-consistency prior, > 0.
    graph : {"knn", "dense"}, default="knn"
        Gaussian affinities over a symmetrised k-nearest-neighbour graph, or over
        all pairs.
    n_neighbors : int, default=10
        Neighbours per sample for ``graph="knn"``.
    sigma : float or "median", default="median"
        Gaussian kernel width; ``"median"`` is the median edge length.
    laplacian : {"unnormalised", "normalised"}, default="unnormalised"
        The prior's Laplacian.
    initial : {"scores", "minmax", "rank", "binary"}, default="scores"
        The prior ranking, as in :class:`HingeReranker`.
    n_positive : int, default=10
        Pseudo-positives of ``initial="binary"``.
    n_jobs : int, default=None
        Lists reranked in parallel (joblib); None means 1.

    Attributes
    ----------
    scores_ : ndarray of shape (n_samples,)
        Reranked scores, higher is better.
    group_labels_ : ndarray of shape (n_lists,)
        The distinct ``groups`` values, in sorted order.
    solver_status_, n_iter_, objective_ : ndarray of shape (n_lists,)
        Solver status, conjugate-gradient iterations (0: lists of up to 2,000
        samples are factorised directly) and the energy at the solution, per list.
    n_features_in_ : int
        Number of features per sample.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import PointwiseReranker
    >>> features = np.array([[0.0], [0.1], [0.2], [5.0], [5.1]])
    >>> initial = [5.0, 4.0, 1.0, 3.0, 2.0]
    >>> PointwiseReranker(c=1e6, n_neighbors=2).fit_predict(features, initial).round(3)
    array([5., 4., 1., 3., 2.])
    >>> np.argsort(-PointwiseReranker(c=0.1, n_neighbors=2).fit_predict(features, initial))
    array([0, 1, 2, 3, 4])
    """

    _parameter_constraints: dict = {
        **BayesianReranker._parameter_constraints,
        "laplacian": [StrOptions({"unnormalised", "normalised"})],
    }

    def __init__(self, c=1.0, *, graph="knn", n_neighbors=10, sigma="median",
                 laplacian="unnormalised", initial="scores", n_positive=10, n_jobs=None):
        super().__init__(c, graph=graph, n_neighbors=n_neighbors, sigma=sigma, initial=initial,
                         n_positive=n_positive, n_jobs=n_jobs)
        self.laplacian = laplacian

    def _solve(self, weights, initial, features):
        prior = self._prior(weights, self.laplacian == "normalised")
        system = prior + self.c * sparse.identity(len(initial))
        scores, info = solve_graph_system(system, self.c * initial, start=initial)
        info["objective"] = quadratic_form(prior, scores) + self.c * pointwise_distance(
            scores, initial, squared=True
        )
        return scores, info


class RandomWalkReranker(BayesianReranker):
    """Random-walk reranking (Hsu et al., 2007), a special case of Bayesian reranking.

    The stationary scores ``x = alpha P^T x + (1 - alpha) v`` of a walk that follows
    the affinity graph (``P = D^-1 W``) with probability ``alpha`` and jumps to the
    initial scores ``v`` otherwise. They minimise
    ``1/2 sum w_ij (x_i/d_i - x_j/d_j)^2 + c sum (x_i - v_i)^2 / d_i`` with
    ``c = (1 - alpha) / alpha``; the parameter here is that ``c``. One sparse
    symmetric solve, of ``((1 + c) D - W) y = c v`` with ``x = D y``.

    Parameters
    ----------
    c : float, default=1.0
        ``(1 - alpha) / alpha``; large ``c`` keeps the initial scores, > 0.
    graph : {"knn", "dense"}, default="knn"
        Gaussian affinities over a symmetrised k-nearest-neighbour graph, or over
        all pairs.
    n_neighbors : int, default=10
        Neighbours per sample for ``graph="knn"``.
    sigma : float or "median", default="median"
        Gaussian kernel width; ``"median"`` is the median edge length.
    initial : {"scores", "minmax", "rank", "binary"}, default="scores"
        The initial scores ``v``, as in :class:`HingeReranker`.
    n_positive : int, default=10
        Pseudo-positives of ``initial="binary"``.
    n_jobs : int, default=None
        Lists reranked in parallel (joblib); None means 1.

    Attributes
    ----------
    scores_ : ndarray of shape (n_samples,)
        Stationary scores, higher is better.
    group_labels_ : ndarray of shape (n_lists,)
        The distinct ``groups`` values, in sorted order.
    solver_status_, n_iter_, objective_ : ndarray of shape (n_lists,)
        Solver status, conjugate-gradient iterations (0: lists of up to 2,000
        samples are factorised directly) and the energy at the solution, per list.
    n_features_in_ : int
        Number of features per sample.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import RandomWalkReranker
    >>> features = np.array([[0.0], [0.1], [0.2], [5.0], [5.1]])
    >>> initial = [5.0, 4.0, 1.0, 3.0, 2.0]
    >>> scores = RandomWalkReranker(c=0.1, n_neighbors=2).fit_predict(features, initial)
    >>> np.argsort(-scores)  # the walk favours well-linked samples, like 1
    array([1, 0, 2, 3, 4])
    """

    def _solve(self, weights, initial, features):
        # With y = D^-1 x the fixed point reads ((1 + c) D - W) y = c v: symmetric and
        # positive definite. An isolated sample (d = 0) only keeps (1 - alpha) v, which
        # taking d = 1 for it reproduces.
        degree = degrees(weights)
        degree[degree == 0] = 1.0
        system = (1 + self.c) * sparse.diags(degree) - weights
        density, info = solve_graph_system(system, self.c * initial, start=initial / degree)
        scores = degree * density
        info["objective"] = random_walk_energy(weights, scores, initial, self.c)
        return scores, info


def random_walk_energy(weights, scores, initial, c):
    """``1/2 sum w_ij (x_i/d_i - x_j/d_j)^2 + c sum (x_i - v_i)^2 / d_i`` (isolated items skipped)."""
    degree = degrees(weights)
    linked = degree > 0
    per_degree = np.divide(scores, degree, out=np.zeros_like(scores), where=linked)
    fidelity = ((scores - initial)[linked] ** 2 / degree[linked]).sum()
    return quadratic_form(laplacian(weights), per_degree) + c * fidelity
