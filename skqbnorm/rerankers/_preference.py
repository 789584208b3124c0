"""Preference-strength reranking: a closed form, one sparse linear solve."""

import numpy as np

from ..metrics import preference_strength_distance
from ._base import PairwiseReranker
from ._graph import pair_laplacian, quadratic_form
from ._solvers import solve_graph_system


class PreferenceStrengthReranker(PairwiseReranker):
    """Bayesian reranking with the preference-strength distance (Tian et al., 2008).

    Minimises ``r^T L r + c * sum_{(i, j) in S} (1 - (r_i - r_j) / (rbar_i - rbar_j))^2``:
    the reranked gaps should keep the initial list's order *and* the strength of
    its preferences. The minimiser solves ``2 L~ r = c~`` with
    ``L~ = L + Laplacian(c / (rbar_i - rbar_j)^2 on the pairs)`` and
    ``c~_k = 2c sum_{j : {k, j} in S} 1 / (rbar_k - rbar_j)``: one sparse symmetric
    solve (preconditioned conjugate gradients). The energy does not see a constant
    shift of a connected component; each component is shifted to the mean of its
    initial scores. Pairs whose initial scores tie carry no preference and are
    dropped.

    Parameters
    ----------
    c : float, default=1e-6
        Weight of the ranking distance against the visual-consistency prior, > 0.
        The pair weights ``c / (rbar_i - rbar_j)^2`` grow as ``c N^2`` with
        rank-based initial scores, hence the small default (tuned on lists of a
        few hundred samples); search c on a logarithmic grid.
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
        "solved", or "maximum iterations reached" (with a warning).
    n_iter_ : ndarray of shape (n_lists,)
        Conjugate-gradient iterations per list (0: lists of up to 2,000 samples
        are factorised directly).
    objective_ : ndarray of shape (n_lists,)
        The energy at the solution.
    n_features_in_ : int
        Number of features per sample.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import PreferenceStrengthReranker
    >>> features = np.array([[0.0], [0.1], [0.2], [5.0], [5.1]])
    >>> initial = np.array([5.0, 4.0, 1.0, 3.0, 2.0])  # sample 2 looks like 0 and 1
    >>> reranker = PreferenceStrengthReranker(c=0.1, n_neighbors=2, rho=4, initial="scores")
    >>> np.argsort(-reranker.fit_predict(features, initial))  # ... and moves up
    array([0, 1, 2, 3, 4])
    """

    def __init__(self, c=1e-6, *, graph="knn", n_neighbors=10, sigma="median",
                 laplacian="unnormalised", pairs="rho_adjacent", rho=5, n_top=10, n_bottom=10,
                 n_clusters=3, initial="rank", n_positive=10, random_state=None, n_jobs=None):
        super().__init__(c, graph=graph, n_neighbors=n_neighbors, sigma=sigma, laplacian=laplacian,
                         pairs=pairs, rho=rho, n_top=n_top, n_bottom=n_bottom, n_clusters=n_clusters,
                         initial=initial, n_positive=n_positive, random_state=random_state, n_jobs=n_jobs)

    def _solve(self, weights, initial, features):
        n_items = len(initial)
        high, low = pairs = self._pairs(features, initial)
        alpha = 1.0 / (initial[high] - initial[low])
        normalised = self.laplacian == "normalised"
        prior = self._prior(weights, normalised)
        system = prior + pair_laplacian(pairs, self.c * alpha**2, n_items)
        half_rhs = self.c * (np.bincount(high, alpha, n_items) - np.bincount(low, alpha, n_items))
        scores, info = solve_graph_system(
            system, half_rhs, start=initial, shift_to=None if normalised else initial
        )
        info["objective"] = quadratic_form(prior, scores) + self.c * preference_strength_distance(
            scores, initial, pairs
        )
        return scores, info
