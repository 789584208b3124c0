"""BayesianReranker: the shared machinery of every reranker."""

from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_consistent_length, check_X_y, column_or_1d

from ._graph import affinity, laplacian
from ._pairs import select_pairs


class BayesianReranker(BaseEstimator):
    """Base class of the rerankers; not for direct use.

    A reranker takes one or several lists, each a set of samples with features and
    initial (e.g. text-search) scores, and returns new scores ``r`` that minimise

        E(r) = prior(r) + c * Dist(r, rbar)

    where the prior makes visually similar samples score alike and ``Dist``
    keeps ``r`` faithful to the initial scores ``rbar``. Subclasses implement
    ``_solve(weights, initial, features)``, returning ``(scores, info)`` with
    ``info`` a dict of ``status``, ``n_iter`` and ``objective``.

    ``fit(X, y, groups=None)``: ``X`` holds the features (one row per sample),
    ``y`` the initial scores, ``groups`` which list (query) each sample belongs
    to; every list is reranked independently, in parallel over ``n_jobs``.
    Scores are float64 whatever the input dtype: the solvers work in double
    precision, and rounding to float32 would tie scores that they tell apart.
    """

    _parameter_constraints: dict = {
        "c": [Interval(Real, 0, None, closed="neither")],
        "graph": [StrOptions({"knn", "dense"})],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither"), StrOptions({"median"})],
        "initial": [StrOptions({"scores", "minmax", "rank", "binary"})],
        "n_positive": [Interval(Integral, 1, None, closed="left")],
        "n_jobs": [Integral, None],
    }

    # GridSearchCV and cross_validate route ``groups`` to fit when metadata routing
    # is enabled: a fold's lists must stay separate lists.
    __metadata_request__fit = {"groups": True}

    def __init__(self, c=1.0, *, graph="knn", n_neighbors=10, sigma="median", initial="scores",
                 n_positive=10, n_jobs=None):
        self.c = c
        self.graph = graph
        self.n_neighbors = n_neighbors
        self.sigma = sigma
        self.initial = initial
        self.n_positive = n_positive
        self.n_jobs = n_jobs

    def fit(self, X, y, groups=None):
        """Rerank every list and keep the scores with solver diagnostics.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the samples (e.g. visual descriptors of each result).
        y : array-like of shape (n_samples,)
            Initial scores, higher is better (e.g. text-search scores).
        groups : array-like of shape (n_samples,), default=None
            The list each sample belongs to; None means one list.

        Returns
        -------
        self : object
            Fitted reranker, with ``scores_`` and per-list diagnostics.
        """
        self._validate_params()
        X, y = check_X_y(X, y, y_numeric=True, dtype=np.float64)
        groups = np.zeros(len(y), dtype=int) if groups is None else column_or_1d(groups)
        check_consistent_length(X, y, groups)
        self.group_labels_, members = np.unique(groups, return_inverse=True)
        lists = [np.flatnonzero(members == g) for g in range(len(self.group_labels_))]
        for label, index in zip(self.group_labels_, lists):
            self._check_list(label, y[index])
        results = Parallel(n_jobs=self.n_jobs)(delayed(self._rerank)(X[i], y[i]) for i in lists)
        self.scores_ = np.empty(len(y))
        for index, (scores, _) in zip(lists, results):
            self.scores_[index] = scores
        infos = [info for _, info in results]
        self.solver_status_ = np.array([info["status"] for info in infos])
        self.n_iter_ = np.array([info["n_iter"] for info in infos])
        self.objective_ = np.array([info["objective"] for info in infos])
        self.n_features_in_ = X.shape[1]
        return self

    def fit_predict(self, X, y, groups=None):
        """Rerank and return the new scores.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the samples.
        y : array-like of shape (n_samples,)
            Initial scores, higher is better.
        groups : array-like of shape (n_samples,), default=None
            The list each sample belongs to; None means one list.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            Reranked scores, higher is better, comparable within a list.
        """
        return self.fit(X, y, groups=groups).scores_

    def _check_list(self, label, initial):
        where = "" if len(self.group_labels_) == 1 else f" in group {label.item()!r}"
        if len(initial) < 2:
            raise ValueError(f"A list needs at least 2 samples to rerank; got {len(initial)} sample(s){where}.")
        if np.ptp(initial) == 0:
            raise ValueError(
                f"The initial scores are constant (all {initial[0]}){where}, shape "
                f"{initial.shape}: they carry no order to rerank."
            )

    def _rerank(self, features, initial):
        weights = affinity(features, graph=self.graph, n_neighbors=self.n_neighbors, sigma=self.sigma)
        return self._solve(weights, self._initial_scores(initial), features)

    def _initial_scores(self, scores):
        """The prior ranking ``rbar``, by the ``initial`` strategy."""
        if self.initial == "scores":
            return scores
        if self.initial == "minmax":
            return (scores - scores.min()) / np.ptp(scores)
        order = np.argsort(-scores, kind="stable")
        position = np.empty(len(scores))
        position[order] = np.arange(len(scores))
        if self.initial == "rank":
            return 1.0 - position / len(scores)
        return (position < self.n_positive).astype(float)

    def _prior(self, weights, normalised=False):
        return laplacian(weights, normalised=normalised)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.non_deterministic = False
        return tags


class PairwiseReranker(BayesianReranker):
    """Base of the rerankers whose ranking distance runs over pairs of samples."""

    _parameter_constraints: dict = {
        **BayesianReranker._parameter_constraints,
        "laplacian": [StrOptions({"unnormalised", "normalised"})],
        "pairs": [StrOptions({"all", "rho_adjacent", "top_bottom", "clustering"})],
        "rho": [Interval(Integral, 1, None, closed="left")],
        "n_top": [Interval(Integral, 1, None, closed="left")],
        "n_bottom": [Interval(Integral, 1, None, closed="left")],
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, c, *, graph, n_neighbors, sigma, laplacian, pairs, rho, n_top, n_bottom,
                 n_clusters, initial, n_positive, random_state, n_jobs):
        super().__init__(c, graph=graph, n_neighbors=n_neighbors, sigma=sigma, initial=initial,
                         n_positive=n_positive, n_jobs=n_jobs)
        self.laplacian = laplacian
        self.pairs = pairs
        self.rho = rho
        self.n_top = n_top
        self.n_bottom = n_bottom
        self.n_clusters = n_clusters
        self.random_state = random_state

    def _pairs(self, features, initial):
        pairs = select_pairs(
            self.pairs, features, initial, rho=self.rho, n_top=self.n_top, n_bottom=self.n_bottom,
            n_clusters=self.n_clusters, random_state=self.random_state,
        )
        if len(pairs[0]) == 0:
            raise ValueError(
                f"pairs={self.pairs!r} selected no strictly ordered pair from {len(initial)} "
                "initial scores; choose another pair strategy or more distinct scores."
            )
        return pairs

