"""Hinge reranking: a sparse quadratic programme solved with OSQP."""

from numbers import Integral, Real

import numpy as np
import osqp
from scipy import sparse

from .._validation import NotBool as Interval
from ..metrics import hinge_distance
from ._base import PairwiseReranker, score_scale, trace_or_one
from ._graph import quadratic_form

#: Relative weight of the ridge that fixes the constant shift the Laplacian leaves free.
RIDGE = 1e-8
#: How far past the margin a pair may lie, in margins, for the closed form to stand.
ACTIVE_TOLERANCE = 1e-9


class HingeReranker(PairwiseReranker):
    """Bayesian reranking with the hinge ranking distance (Tian et al., 2008).

    The paper minimises ``r^T L r + c * sum_{(i, j) in S} xi_ij^2`` subject to
    ``r_i - r_j >= a - xi_ij`` for every selected pair ``(i, j)`` that the initial
    list orders ``i`` above ``j``: a transductive, graph-regularised Ranking SVM
    with squared slacks. Here the energy is normalised so that c is dimensionless
    (the same at every list size, graph density, margin and score scale)::

        E(r) = r^T L r / (tr(L) a^2)  +  c / |S| * sum_{(i, j) in S} [(a - (r_i - r_j))_+]^2 / a^2

    ``r^T L r / tr(L)`` is half the weighted mean of ``(r_i - r_j)^2`` over the graph's
    edges and the second term the mean squared slack over the pairs, both in units
    of the margin: with rank-based scores the pairs' gaps shrink as ``1/N`` and the
    number of pairs and edges grows as ``N``, which the paper's sums turn into a c
    that must shrink with N; the means do not. This is the preference-strength
    energy of :class:`PreferenceStrengthReranker` with every gap equal to the margin.
    The margin ``a`` is ``margin`` times the root mean square of the selected pairs'
    initial gaps, so the scores come out on the initial scores' scale; the ranking
    does not depend on it (``r*(a) = a r*(1)``: the QP is solved for a unit margin,
    then scaled). When no selected pair ends up beyond the margin (small c), every
    slack is active and the minimiser is that of the quadratic energy: one sparse
    solve, exact. Otherwise the QP over ``[r; xi]`` is built sparse (``P =
    blockdiag(2L, 2cI)`` up to the normalisation, ``A = [D_S  I]``) and solved with
    OSQP.

    The energy does not see a constant shift of a connected component of the graph
    joined with the pairs: each is shifted to the mean of its initial scores. A
    component without any selected pair only feels the prior and gets its initial
    scores' mean (with the normalised Laplacian, the prior's minimiser
    ``proportional to sqrt(d)`` with that mean); an isolated sample keeps its initial
    score. Every reranker here places components this way.

    Parameters
    ----------
    c : float or "auto", default="auto"
        Weight of the ranking distance against the visual-consistency prior, > 0 and
        dimensionless. Large c keeps the initial order, small c gives graph-smooth
        scores; the ranking depends on the initial scores only through their order.
        ``"auto"`` (the default) sets c per list without labels: 10 times the c
        that generalised cross-validation picks for the point-wise smoother of the
        list's initial scores over its graph (``c_`` holds each list's value): small where the
        scores differ between neighbours as noise would (averaging removes it),
        large where they already vary smoothly over the graph. The factor
        was chosen over seven reranking tasks, where the features carry relevance
        and where they do not, and checked with each task left out (see the user
        guide's :ref:`reranker-strength`).
    margin : float, default=1.0
        The hinge margin > 0, in units of the root mean square initial gap of the
        selected pairs. A unit only: it scales the scores, not their order (under
        the plain Laplacian, their spread around each component's initial mean, down
        to float64's resolution of that mean: see the user guide on tiny margins).
    graph : {"knn", "dense"}, default="knn"
        Gaussian affinities over a symmetrised k-nearest-neighbour graph, or over
        all pairs.
    n_neighbors : int, default=10
        Neighbours per sample for ``graph="knn"``.
    sigma : float or "median", default="median"
        Gaussian kernel width; ``"median"`` is the median edge length.
    laplacian : {"unnormalized", "normalized"}, default="unnormalized"
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
        (``1 - i/N``, tied scores sharing their mean position ``i``), or 1 for the
        top ``n_positive`` (those with fewer than ``n_positive`` scores strictly
        above theirs, so ties at the cut are all in) and 0 elsewhere.
    n_positive : int, default=10
        Pseudo-positives of ``initial="binary"``.
    eps_abs, eps_rel : float, default=1e-7
        OSQP's absolute (in margins) and relative tolerances, >= 0 and not both 0.
    max_iter : int, default=20000
        OSQP's iteration limit.
    random_state : int, RandomState instance or None, default=None
        Seed of the k-means of ``pairs="clustering"``: an int seeds every list's
        alike; a RandomState instance gives each list a seed drawn from it at fit,
        so that ``n_jobs`` does not change the result.
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
        OSQP iterations per list (0: no pair lies beyond the margin, and the
        minimiser is the closed form of the squared slacks, one sparse solve).
    objective_ : ndarray of shape (n_lists,)
        The normalised energy ``E(r)`` at the solution (dimensionless).
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

    auto_c_scale = 10.0

    _parameter_constraints: dict = {
        **PairwiseReranker._parameter_constraints,
        "margin": [Interval(Real, 0, None, closed="neither")],
        "eps_abs": [Interval(Real, 0, None, closed="left")],
        "eps_rel": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, c="auto", *, margin=1.0, graph="knn", n_neighbors=10, sigma="median",
                 laplacian="unnormalized", pairs="rho_adjacent", rho=5, n_top=10, n_bottom=10,
                 n_clusters=3, initial="scores", n_positive=10, eps_abs=1e-7, eps_rel=1e-7,
                 max_iter=20000, random_state=None, n_jobs=None):
        super().__init__(c, graph=graph, n_neighbors=n_neighbors, sigma=sigma, laplacian=laplacian,
                         pairs=pairs, rho=rho, n_top=n_top, n_bottom=n_bottom, n_clusters=n_clusters,
                         initial=initial, n_positive=n_positive, random_state=random_state, n_jobs=n_jobs)
        self.margin = margin
        self.eps_abs = eps_abs
        self.eps_rel = eps_rel
        self.max_iter = max_iter

    def _solve(self, weights, initial, features, random_state):
        if self.eps_abs == 0 and self.eps_rel == 0:
            raise ValueError(
                "eps_abs and eps_rel are both 0: OSQP needs a positive absolute or relative "
                "tolerance; set eps_abs > 0 or eps_rel > 0."
            )
        high, low = pairs = self._pairs(features, initial, random_state)
        prior = self._prior(weights, self._normalized())
        magnitude, _, _ = score_scale(initial)
        scaled = initial / magnitude
        parts = self._components(weights, prior, pairs)
        margins, info = self._margins(parts, prior, pairs)
        # Margin units -> the initial scores' units: a margin is the pairs' RMS initial gap.
        unit = self.margin * np.sqrt(np.mean((scaled[high] - scaled[low]) ** 2))
        scores = self._place(unit * margins, scaled, parts)
        with np.errstate(over="ignore"):
            scores = magnitude * scores
        if not np.all(np.isfinite(scores)):
            raise ValueError(
                f"margin={self.margin!r} times the range of the initial scores y exceeds "
                "float64's range; choose a smaller margin (the ranking does not depend on it)."
            )
        info["objective"] = hinge_energy(prior, margins, scaled, pairs, self.c)
        return scores, info

    def _convergence_advice(self, solver):
        if solver == "OSQP":
            return "Raise max_iter or loosen eps_abs/eps_rel."
        return super()._convergence_advice(solver)

    def _margins(self, parts, prior, pairs):
        """The minimiser in margins: closed form while every slack is positive, else OSQP.

        Where no selected pair exceeds the margin, each squared hinge equals the
        quadratic ``(1 - (r_i - r_j))^2`` and so do the gradients: the minimiser of that
        quadratic energy (one sparse solve, exact for any small c) is then the
        hinge's. Otherwise OSQP solves the QP.
        """
        high, low = pairs
        n_items = prior.shape[0]
        kappa = self.c * trace_or_one(prior) / len(high)
        pull = np.bincount(high, minlength=n_items) - np.bincount(low, minlength=n_items)
        margins, info = self._closed_form(parts, prior, pairs, np.ones(len(high)),
                                          pull.astype(float), kappa, np.zeros(n_items))
        if np.all(margins[high] - margins[low] <= 1 + ACTIVE_TOLERANCE):
            return margins, info
        return self._solve_qp(prior, pairs)

    def _solve_qp(self, prior, pairs):
        try:
            solver = osqp.OSQP()
            solver.setup(*hinge_qp(prior, pairs, self.c), verbose=False,
                         eps_abs=self.eps_abs, eps_rel=self.eps_rel, max_iter=self.max_iter,
                         polishing=False)
            result = solver.solve(raise_error=False)
        except (osqp.OSQPException, ValueError) as error:
            raise ValueError(
                f"OSQP refused the hinge QP with c={self.c!r}, eps_abs={self.eps_abs!r}, "
                f"eps_rel={self.eps_rel!r}, max_iter={self.max_iter!r}: {error}"
            ) from error
        status = str(result.info.status)
        check_status(status, self.c)
        info = {"status": status, "n_iter": int(result.info.iter), "solver": "OSQP"}
        return np.asarray(result.x[: prior.shape[0]], dtype=np.float64), info


def hinge_energy(prior, scores, initial, pairs, c):
    """``r^T L r / tr(L) + c / |S| sum [(1 - (r_i - r_j))_+]^2`` in margin units."""
    return (quadratic_form(prior, scores) / trace_or_one(prior)
            + c * hinge_distance(scores, initial, pairs, margin=1.0) / len(pairs[0]))


def hinge_qp(prior, pairs, c):
    """OSQP's ``(P, q, A, l, u)`` for the normalised hinge QP over ``x = [r; xi]``.

    Minimises ``r^T L r / tr(L) + c / |S| sum xi^2`` s.t. ``r_i - r_j + xi >= 1``,
    times the constant that brings the larger of the two blocks' diagonals to 1: the
    minimiser is the same and OSQP sees a well-scaled problem for any c.
    """
    n_items, n_pairs = prior.shape[0], len(pairs[0])
    prior_weight = 1.0 / trace_or_one(prior)
    slack_weight = c / n_pairs
    scale = 1.0 / max(prior_weight * trace_or_one(prior) / n_items, slack_weight)
    ridge = RIDGE * trace_or_one(prior) / n_items
    quadratic = sparse.block_diag([
        2 * scale * prior_weight * (prior + ridge * sparse.identity(n_items)),
        2 * min(scale * slack_weight, 1.0) * sparse.identity(n_pairs),
    ])
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
        np.ones(n_pairs),
        np.full(n_pairs, np.inf),
    )


def check_status(status, c):
    """Refuse a QP OSQP could not solve; a short stop is reported by fit (see ``BayesianReranker``)."""
    if status in ("solved", "solved inaccurate", "maximum iterations reached"):
        return
    raise ValueError(
        f"OSQP could not solve the hinge reranking QP with c={c!r}: status {status!r}. "
        "c must lie in the range where OSQP converges; see the parameter's description."
    )
