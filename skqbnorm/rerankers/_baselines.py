"""Baseline rerankers: point-wise distance and random walk."""

import numpy as np
from sklearn.utils._param_validation import StrOptions

from ._base import BayesianReranker, score_scale, trace_or_one
from ._graph import degrees, is_normalized, laplacian, quadratic_form
from ._solvers import solve_anchored


class PointwiseReranker(BayesianReranker):
    """Bayesian reranking with the point-wise distance ``sum (r_i - rbar_i)^2``.

    The paper's energy ``E(r) = r^T L r + c ||r - rbar||^2`` is normalised so that c is
    dimensionless (the same at every list size, graph density and score scale)::

        E(r) = r^T L r / tr(L)  +  c / N * ||r - rbar||^2

    ``r^T L r / tr(L)`` is half the weighted mean of ``(r_i - r_j)^2`` over the graph's
    edges and ``||r - rbar||^2 / N`` the mean squared change: both are intensive and
    scale as the scores squared. (``objective_`` reports E divided by the initial
    scores' variance.) The minimiser solves ``(L / dbar + c I) r = c rbar`` with the
    mean degree ``dbar = tr(L) / N``: the paper's form with c times dbar. Summing
    these equations over a connected component of the graph shows that each
    component keeps the mean of its initial scores (the ``sqrt(d)``-weighted mean
    under the normalised Laplacian), whatever c. A baseline: the point-wise distance
    ignores order.

    Parameters
    ----------
    c : float or "auto", default="auto"
        Weight of the distance against the visual-consistency prior, > 0 and
        dimensionless: large c keeps the initial scores, small c gives graph-smooth
        scores (each component at its mean).
        ``"auto"`` (the default) sets c per list without labels: 0.3 times the c
        that generalised cross-validation picks for the point-wise smoother of the
        list's prior ranking (``initial``) over its graph (``c_`` holds each list's value): small where the
        scores differ between neighbours as noise would (averaging removes it),
        large where they already vary smoothly over the graph. The factor
        was chosen over seven reranking tasks, where the features carry relevance
        and where they do not, and checked with each task left out (see the user
        guide's :ref:`reranker-strength`).
    graph : {"knn", "dense"}, default="knn"
        Gaussian affinities over a symmetrised k-nearest-neighbour graph, or over
        all pairs.
    n_neighbors : int, default=10
        Neighbours per sample for ``graph="knn"``.
    sigma : float or "median", default="median"
        Gaussian kernel width; ``"median"`` is the median edge length.
    laplacian : {"unnormalized", "normalized"}, default="unnormalized"
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
        Solver status, conjugate-gradient iterations (0: factorised, where that
        costs less) and the energy at the solution, per list.
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

    auto_c_scale = 0.3

    _parameter_constraints: dict = {
        **BayesianReranker._parameter_constraints,
        "laplacian": [StrOptions({"unnormalized", "normalized"})],
    }

    def __init__(self, c="auto", *, graph="knn", n_neighbors=10, sigma="median",
                 laplacian="unnormalized", initial="scores", n_positive=10, n_jobs=None):
        super().__init__(c, graph=graph, n_neighbors=n_neighbors, sigma=sigma, initial=initial,
                         n_positive=n_positive, n_jobs=n_jobs)
        self.laplacian = laplacian

    def _normalized(self):
        return is_normalized(self.laplacian)

    def _solve(self, weights, initial, features, random_state):
        normalized = self._normalized()
        prior = self._prior(weights, normalized)
        magnitude, _, spread = score_scale(initial)
        target = initial / magnitude
        mean_degree = trace_or_one(prior) / len(target)
        scores, info = solve_anchored(prior / mean_degree, np.ones(len(target)), target, self.c,
                                      null=self._null(weights, normalized))
        info["objective"] = pointwise_energy(prior, scores, target, self.c) / (spread or 1.0) ** 2
        return magnitude * scores, info


def pointwise_energy(prior, scores, initial, c):
    """``r^T L r / tr(L) + c / N ||r - rbar||^2``."""
    return (quadratic_form(prior, scores) / trace_or_one(prior)
            + c * np.mean((scores - initial) ** 2))


class RandomWalkReranker(BayesianReranker):
    """Random-walk reranking (Hsu et al., 2007), a special case of Bayesian reranking.

    The stationary scores ``x = alpha P^T x + (1 - alpha) v`` of a walk that follows
    the affinity graph (``P = D^-1 W``) with probability ``alpha`` and jumps to the
    initial scores ``v`` otherwise. They minimise
    ``1/2 sum w_ij (x_i/d_i - x_j/d_j)^2 + c sum (x_i - v_i)^2 / d_i`` with
    ``c = (1 - alpha) / alpha``; the parameter here is that ``c``. One sparse
    symmetric solve, of ``((1 + c) D - W) y = c v`` with ``x = D y``.

    This c is already dimensionless: with ``x`` of the initial scores' scale, both
    terms scale as ``sum_i x_i^2 / d_i`` (k-NN graph: ``N x^2 / (k w)``; dense
    graph: ``x^2 / w``), so their ratio does not change with the list size, the
    graph's density or the scores' scale. ``objective_`` reports the energy
    normalised accordingly, divided by ``sum_i 1 / d_i`` and by the initial scores'
    variance. Summing the fixed-point equations over a connected component shows that
    each component keeps the sum of its initial scores (an isolated sample keeps its
    own), whatever c; a very small c gives ``x`` proportional to the degrees within
    each component (the walk's stationary distribution).

    Parameters
    ----------
    c : float or "auto", default=3.0
        ``(1 - alpha) / alpha``; large ``c`` keeps the initial scores, > 0.
        ``"auto"`` sets c per list without labels: 30 times the c
        that generalised cross-validation picks for the point-wise smoother of the
        list's prior ranking (``initial``) over its graph (``c_`` holds each list's value): small where the
        scores differ between neighbours as noise would (averaging removes it),
        large where they already vary smoothly over the graph. The default and the
        factor were chosen over seven reranking tasks, where the features carry
        relevance and where they do not (see the user guide's :ref:`reranker-strength`).
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
        Solver status, conjugate-gradient iterations (0: factorised, where that
        costs less) and the energy at the solution, per list.
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

    auto_c_scale = 30.0

    def __init__(self, c=3.0, *, graph="knn", n_neighbors=10, sigma="median", initial="scores",
                 n_positive=10, n_jobs=None):
        super().__init__(c, graph=graph, n_neighbors=n_neighbors, sigma=sigma, initial=initial,
                         n_positive=n_positive, n_jobs=n_jobs)

    def _solve(self, weights, initial, features, random_state):
        # With y = D^-1 x the fixed point reads (L + c D) y = c v: the minimiser of
        # y^T L y + c sum_i d_i (y_i - v_i / d_i)^2. An isolated sample (d = 0) only
        # keeps (1 - alpha) v, which taking d = 1 for it reproduces.
        magnitude, _, spread = score_scale(initial)
        target = initial / magnitude
        degree = degrees(weights)
        degree[degree == 0] = 1.0
        density, info = solve_anchored(laplacian(weights), degree, target / degree, self.c,
                                       null=np.ones(len(target)))
        scores = degree * density
        info["objective"] = random_walk_energy(weights, scores, target, self.c) / (spread or 1.0) ** 2
        return magnitude * scores, info


def random_walk_energy(weights, scores, initial, c):
    """``[1/2 sum w_ij (x_i/d_i - x_j/d_j)^2 + c sum (x_i - v_i)^2 / d_i] / sum 1/d_i``.

    Isolated items are skipped.
    """
    degree = degrees(weights)
    linked = degree > 0
    per_degree = np.divide(scores, degree, out=np.zeros_like(scores), where=linked)
    fidelity = ((scores - initial)[linked] ** 2 / degree[linked]).sum()
    normalizer = (1 / degree[linked]).sum() if linked.any() else 1.0
    return (quadratic_form(laplacian(weights), per_degree) + c * fidelity) / normalizer
