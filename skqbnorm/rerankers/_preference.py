"""Preference-strength reranking: a closed form, one sparse linear solve."""

import numpy as np

from ..metrics import preference_strength_distance
from ._base import PairwiseReranker, score_scale, trace_or_one
from ._graph import quadratic_form


class PreferenceStrengthReranker(PairwiseReranker):
    """Bayesian reranking with the preference-strength distance (Tian et al., 2008).

    The paper minimises ``r^T L r + c * sum_{(i, j) in S} (1 - (r_i - r_j) / (rbar_i -
    rbar_j))^2``: the reranked gaps should keep the initial list's order *and* the
    strength of its preferences. Its c grows as ``N^2`` with rank-based scores (the
    gaps shrink as ``1/N``, so each ratio's sensitivity grows as ``N``). Here the
    energy is normalised so that c is dimensionless (the same at every list size,
    graph density and score scale)::

        E(r) = r^T L r / (tr(L) s^2)  +  c g^2 / (|S| s^2) * sum_{(i, j) in S} (1 - (r_i - r_j) / (rbar_i - rbar_j))^2

    with ``s^2`` the variance of the initial scores and ``g^2`` the mean squared
    initial gap of the selected pairs. Written as ``(g / gap_ij)^2 (gap_ij - (r_i -
    r_j))^2``, the distance is the mean squared change of the pairs' gaps weighted by
    their normalised preference strengths ``alpha_ij^2 = (g / gap_ij)^2`` (scale-free,
    mean about 1), and ``r^T L r / tr(L)`` is half the weighted mean of ``(r_i -
    r_j)^2`` over the graph's edges: both are intensive, in the scores' units squared.
    The minimiser solves ``(L + kappa L~) r = kappa (A alpha)`` with ``L~`` the
    Laplacian of the pairs weighted by ``1 / gap_ij^2``, ``(A alpha)_k = sum_{j :
    (k, j) in S} 1/gap_kj - sum_{j : (j, k) in S} 1/gap_jk`` and ``kappa = c g^2
    tr(L) / |S|``: one sparse symmetric solve (preconditioned conjugate gradients, or
    a factorisation where that costs less), computed on the standardised scores so that any finite
    scale works. The offsets between visual components that only the pairs link
    are solved separately, so a tiny c keeps them.

    The energy does not see a constant shift of a connected component of the graph
    joined with the pairs: each is shifted to the mean of its initial scores; a
    component without any selected pair gets its initial scores' mean (the
    normalised Laplacian's minimiser ``proportional to sqrt(d)`` with that mean), as
    in every reranker here. Pairs whose initial scores tie carry no preference and
    are dropped; a gap below 1e-150 standard deviations is refused.

    Parameters
    ----------
    c : float or "auto", default="auto"
        Weight of the ranking distance against the visual-consistency prior, > 0 and
        dimensionless. With ``pairs="all"`` the far pairs' large gaps set ``g``, so the
        near pairs weigh far more: search lower (digits: c = 1e-4).
        ``"auto"`` (the default) sets c per list without labels: 10 times the c
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
        Prior ``sum w_ij (r_i - r_j)^2 / 2`` or its degree-normalised form.
    pairs : {"rho_adjacent", "all", "top_bottom", "clustering"}, default="rho_adjacent"
        Pair selection, as in :class:`HingeReranker`.
    rho : int, default=5
        Reach of ``"rho_adjacent"`` pairs.
    n_top, n_bottom : int, default=10
        Sizes of the top and bottom sets of ``"top_bottom"`` and ``"clustering"``.
    n_clusters : int, default=3
        Clusters of the top set for ``"clustering"``.
    initial : {"rank", "scores", "minmax", "binary"}, default="rank"
        The prior ranking, as in :class:`HingeReranker`. Rank-based scores
        (``1 - i/N``) give every adjacent pair the same preference strength;
        raw scores with near-ties give those pairs overwhelming weights.
    n_positive : int, default=10
        Pseudo-positives of ``initial="binary"``.
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
        "solved", or "maximum iterations reached" (with a warning).
    n_iter_ : ndarray of shape (n_lists,)
        Conjugate-gradient iterations per list (0: factorised, which small lists
        and systems the iterations would not solve at less cost are).
    objective_ : ndarray of shape (n_lists,)
        The normalised energy ``E(r)`` at the solution (dimensionless).
    n_features_in_ : int
        Number of features per sample.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import PreferenceStrengthReranker
    >>> features = np.array([[0.0], [0.1], [0.2], [5.0], [5.1]])
    >>> initial = np.array([5.0, 4.0, 1.0, 3.0, 2.0])  # sample 2 looks like 0 and 1
    >>> reranker = PreferenceStrengthReranker(c=0.03, n_neighbors=2, rho=4, initial="scores")
    >>> np.argsort(-reranker.fit_predict(features, initial))  # ... and moves up
    array([0, 1, 2, 3, 4])
    """

    auto_c_scale = 10.0

    def __init__(self, c="auto", *, graph="knn", n_neighbors=10, sigma="median",
                 laplacian="unnormalized", pairs="rho_adjacent", rho=5, n_top=10, n_bottom=10,
                 n_clusters=3, initial="rank", n_positive=10, random_state=None, n_jobs=None):
        super().__init__(c, graph=graph, n_neighbors=n_neighbors, sigma=sigma, laplacian=laplacian,
                         pairs=pairs, rho=rho, n_top=n_top, n_bottom=n_bottom, n_clusters=n_clusters,
                         initial=initial, n_positive=n_positive, random_state=random_state, n_jobs=n_jobs)

    def _solve(self, weights, initial, features, random_state):
        n_items = len(initial)
        high, low = pairs = self._pairs(features, initial, random_state)
        normalized = self.laplacian == "normalized"
        scaled, standard, to_scores = standardise(initial, centre=not normalized)
        with np.errstate(divide="ignore", over="ignore"):  # gaps from before any centring
            alpha = scaled.std() / (scaled[high] - scaled[low])
            strength = alpha**2
        if not np.all(np.isfinite(strength)):
            raise ValueError(
                f"A selected pair's initial scores y differ by {1 / np.abs(alpha).max():.3g} times "
                "their standard deviation: its preference strength 1/gap^2 exceeds float64's "
                "range. Gaps must be at least 1e-150 times the standard deviation; use "
                "initial='rank' for scores with near-ties."
            )
        prior = self._prior(weights, normalized)
        pull = np.bincount(high, alpha, n_items) - np.bincount(low, alpha, n_items)
        # 2 (L / tr(L) + c g^2/|S| L_pairs) r = 2 c g^2/|S| pull, times tr(L):
        # (L + kappa L_pairs) r = kappa pull with kappa = c g^2 tr(L) / |S|.
        kappa = self.c * np.mean(1 / strength) * trace_or_one(prior) / len(high)
        parts = self._components(weights, prior, pairs)
        scores, info = self._closed_form(parts, prior, pairs, strength, pull, kappa, standard)
        scores = self._place(scores, standard, parts)
        info["objective"] = preference_strength_energy(prior, scores, standard, pairs, self.c)
        return to_scores(scores), info


def standardise(initial, *, centre):
    """The scores over their largest magnitude, in units of their standard deviation
    (centred if asked), and the way back."""
    magnitude, mean, spread = score_scale(initial)
    shift = mean if centre else 0.0
    scaled = initial / magnitude
    return scaled, (scaled - shift) / spread, lambda scores: magnitude * (shift + spread * scores)


def preference_strength_energy(prior, scores, initial, pairs, c):
    """``r^T L r / tr(L) + c g^2 / |S| sum (1 - (r_i - r_j) / (rbar_i - rbar_j))^2`` (sd units).

    ``g^2`` is the mean squared initial gap of the selected pairs.
    """
    gap = initial[pairs[0]] - initial[pairs[1]]
    return (quadratic_form(prior, scores) / trace_or_one(prior)
            + c * np.mean(gap**2) * preference_strength_distance(scores, initial, pairs) / len(gap))
