"""Hinge reranking: a sparse quadratic programme solved with OSQP."""

import warnings
from numbers import Integral, Real

import numpy as np
import osqp
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval

from ..metrics import hinge_distance
from ._base import PairwiseReranker
from ._graph import quadratic_form

#: Relative weight of the ridge that fixes the constant shift the Laplacian leaves free.
RIDGE = 1e-8


class HingeReranker(PairwiseReranker):
    """Bayesian reranking with the hinge ranking distance (Tian et al., 2008).

    Minimises ``r^T L r + c * sum_{(i, j) in S} xi_ij^2`` subject to
    ``r_i - r_j >= a - xi_ij`` for every selected pair ``(i, j)`` that the initial
    list orders ``i`` above ``j``: a transductive, graph-regularised Ranking SVM
    with squared slacks. The QP over ``[r; xi]`` is built sparse
    (``P = blockdiag(2L, 2cI)``, ``A = [D_S  I]``) and solved with OSQP. The
    ranking found does not depend on the margin ``a`` (``r*(a) = a r*(1)``).

    Parameters
    ----------
    c : float, default=0.1
        Weight of the ranking distance against the visual-consistency prior, > 0.
        Large c keeps the initial order, small c gives graph-smooth scores; the
        ranking depends on the initial scores only through their order.
    margin : float, default=1.0
        The hinge margin ``a`` > 0; OSQP's absolute tolerance is scaled by it.
    graph : {"knn", "dense"}, default="knn"
        Gaussian affinities over a symmetrised k-nearest-neighbour graph, or over
        all pairs.
    n_neighbors : int, default=10
        Neighbours per sample for ``graph="knn"``.
    sigma : float or "median", default="median"
        Gaussian kernel width; ``"median"`` is the median edge length.
    laplacian : {"unnormalised", "normalised"}, default="unnormalised"
        Prior ``sum w_ij (r_i - r_j)^2 / 2`` or its degree-normalised form.
    pairs : {"rho_adjacent", "all", "top_bottom", "clustering"}, default="rho_adjacent"
        Pair selection: pairs at most ``rho`` positions apart in the initial list;
        all ordered pairs; each of the ``n_top`` first with each of the
        ``n_bottom`` last; or the largest k-means cluster (``n_clusters``) of the
        ``n_top`` first with each of the ``n_bottom`` last.
    rho : int, default=5
        Reach of ``"rho_adjacent"`` pairs (``N - 1`` gives all pairs).
    n_top, n_bottom : int, default=10
        Sizes of the top and bottom sets of ``"top_bottom"`` and ``"clustering"``.
    n_clusters : int, default=3
        Clusters of the top set for ``"clustering"``.
    initial : {"scores", "minmax", "rank", "binary"}, default="scores"
        The prior ranking: the initial scores as given, min-max scaled, by rank
        (``1 - i/N``), or 1 for the top ``n_positive`` and 0 elsewhere.
    n_positive : int, default=10
        Pseudo-positives of ``initial="binary"``.
    eps_abs, eps_rel : float, default=1e-7
        OSQP's absolute (times ``margin``) and relative tolerances.
    max_iter : int, default=20000
        OSQP's iteration limit.
    random_state : int, RandomState instance or None, default=None
        Seed of the k-means of ``pairs="clustering"``.
    n_jobs : int, default=None
        Lists reranked in parallel (joblib); None means 1.

    Attributes
    ----------
    scores_ : ndarray of shape (n_samples,)
        Reranked scores, higher is better.
    group_labels_ : ndarray of shape (n_lists,)
        The distinct ``groups`` values, in sorted order.
    solver_status_ : ndarray of shape (n_lists,)
        OSQP's status per list ("solved" when all went well).
    n_iter_ : ndarray of shape (n_lists,)
        OSQP iterations per list.
    objective_ : ndarray of shape (n_lists,)
        The energy ``r^T L r + c * sum [(a - (r_i - r_j))_+]^2`` at the solution.
    n_features_in_ : int
        Number of features per sample.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import HingeReranker
    >>> features = np.array([[0.0], [0.1], [0.2], [5.0], [5.1]])
    >>> initial = np.array([5.0, 4.0, 1.0, 3.0, 2.0])  # sample 2 looks like 0 and 1
    >>> reranker = HingeReranker(c=0.05, n_neighbors=2, rho=4)
    >>> np.argsort(-reranker.fit_predict(features, initial))  # ... and moves up
    array([0, 1, 2, 3, 4])
    >>> reranker.solver_status_
    array(['solved'], dtype='<U6')
    """

    _parameter_constraints: dict = {
        **PairwiseReranker._parameter_constraints,
        "margin": [Interval(Real, 0, None, closed="neither")],
        "eps_abs": [Interval(Real, 0, None, closed="left")],
        "eps_rel": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, c=0.1, *, margin=1.0, graph="knn", n_neighbors=10, sigma="median",
                 laplacian="unnormalised", pairs="rho_adjacent", rho=5, n_top=10, n_bottom=10,
                 n_clusters=3, initial="scores", n_positive=10, eps_abs=1e-7, eps_rel=1e-7,
                 max_iter=20000, random_state=None, n_jobs=None):
        super().__init__(c, graph=graph, n_neighbors=n_neighbors, sigma=sigma, laplacian=laplacian,
                         pairs=pairs, rho=rho, n_top=n_top, n_bottom=n_bottom, n_clusters=n_clusters,
                         initial=initial, n_positive=n_positive, random_state=random_state, n_jobs=n_jobs)
        self.margin = margin
        self.eps_abs = eps_abs
        self.eps_rel = eps_rel
        self.max_iter = max_iter

    def _solve(self, weights, initial, features):
        pairs = self._pairs(features, initial)
        prior = self._prior(weights, self.laplacian == "normalised")
        problem = hinge_qp(prior, pairs, self.c, self.margin)
        solver = osqp.OSQP()
        solver.setup(*problem, verbose=False, eps_abs=self.eps_abs * self.margin,
                     eps_rel=self.eps_rel, max_iter=self.max_iter, polishing=True)
        result = solver.solve(raise_error=False)
        status = str(result.info.status)
        check_status(status, result.info.iter, self.max_iter)
        scores = np.asarray(result.x[: len(initial)], dtype=np.float64)
        objective = quadratic_form(prior, scores) + self.c * hinge_distance(
            scores, initial, pairs, margin=self.margin
        )
        return scores, {"status": status, "n_iter": int(result.info.iter), "objective": objective}


def hinge_qp(prior, pairs, c, margin):
    """OSQP's ``(P, q, A, l, u)`` for the hinge reranking QP over ``x = [r; xi]``."""
    n_items, n_pairs = prior.shape[0], len(pairs[0])
    ridge = RIDGE * max(prior.diagonal().mean(), 1.0)
    quadratic = sparse.block_diag(
        [2 * (prior + ridge * sparse.identity(n_items)), 2 * c * sparse.identity(n_pairs)]
    )
    rows = np.arange(n_pairs)
    differences = sparse.csr_matrix(
        (np.r_[np.ones(n_pairs), -np.ones(n_pairs)], (np.r_[rows, rows], np.r_[pairs[0], pairs[1]])),
        shape=(n_pairs, n_items),
    )
    constraints = sparse.hstack([differences, sparse.identity(n_pairs)])
    return (
        sparse.triu(quadratic, format="csc"),
        np.zeros(n_items + n_pairs),
        sparse.csc_matrix(constraints),
        np.full(n_pairs, float(margin)),
        np.full(n_pairs, np.inf),
    )


def check_status(status, n_iter, max_iter):
    if status == "solved":
        return
    if status in ("solved inaccurate", "maximum iterations reached"):
        warnings.warn(
            f"OSQP stopped with status {status!r} after {n_iter} iterations (max_iter="
            f"{max_iter}); the scores may be inaccurate. Raise max_iter or loosen eps_abs/eps_rel.",
            ConvergenceWarning,
            stacklevel=2,
        )
        return
    raise RuntimeError(f"OSQP could not solve the hinge reranking QP: status {status!r}.")
