"""RerankerCV: the c of a reranker chosen by the MAP of held-out lists, each list reranked once per c."""

from numbers import Integral

import numpy as np
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, _fit_context, clone
from sklearn.model_selection import GroupKFold
from sklearn.utils._param_validation import HasMethods, StrOptions

from .._validation import NotBool as Interval
from .._validation import check_labels
from ..metrics import average_precisions
from ..metrics._ranking import check_ap_options
from ._base import checked_cs, split_lists
from ._hinge import HingeReranker


class RerankerCV(BaseEstimator):
    """A reranker whose c is chosen by cross-validated MAP over whole lists.

    scikit-learn's ``RidgeCV`` habit for the rerankers: every list is reranked once
    per candidate c, its k-NN graph built once for all of them, and each c is
    scored by the mean average precision of the held-out lists of each fold. A
    reranker reranks every list on its own, so a fold's training lists do not
    change how its test lists are reranked: ``GridSearchCV(reranker, {"c": cs},
    scoring=make_map_scorer(), cv=GroupKFold(...))`` reranks the training lists of
    every fold and throws them away, then the test lists; this estimator reranks
    each list once per c and gives the same ``cv_results_`` scores, so it chooses
    the same c on the same folds (the first of equally good ones), at a fraction of
    the cost. The scores at the chosen c are those of the same reranking, kept.

    Parameters
    ----------
    estimator : BayesianReranker, default=None
        The reranker whose c is chosen (its other parameters are kept); None means
        ``HingeReranker()``. Its ``n_jobs`` is not used: lists run over this
        estimator's ``n_jobs``.
    cs : array-like of float, default=(0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
        The candidate values of c, each > 0, in the order of ``cv_results_``.
    cv : int or cross-validation splitter, default=5
        An int is the number of folds of ``GroupKFold``; a splitter's
        ``split(X, y, groups)`` must put each list wholly in one test fold (as
        ``GroupKFold`` and ``LeaveOneGroupOut`` do): a list cut in two would be
        reranked as two lists.
    n : int, default=None
        Cut-off depth of AP, ``n >= 1``; None evaluates whole lists.
    denominator : {"relevant", "truncated"}, default="relevant"
        AP's denominator (see :func:`~skqbnorm.metrics.average_precision`).
    n_jobs : int, default=None
        Lists reranked in parallel (joblib); None means 1.

    Attributes
    ----------
    best_c_ : float
        The chosen c: the highest mean held-out MAP, the first of ties in ``cs``'s order.
    best_index_ : int
        Its index in ``cs`` and in ``cv_results_``.
    best_score_ : float
        Its mean held-out MAP.
    best_estimator_ : BayesianReranker
        A clone of ``estimator`` with ``c=best_c_``, fitted on every list (its
        ``scores_``, ``solver_status_``, ... are those of the reranking done here).
    scores_ : ndarray of shape (n_samples,)
        The reranked scores at ``best_c_``.
    cv_results_ : dict of ndarray
        As ``GridSearchCV``'s: ``params``, ``param_c``, ``split{k}_test_score``,
        ``mean_test_score``, ``std_test_score`` and ``rank_test_score``.
    average_precisions_ : ndarray of shape (n_cs, n_lists)
        Every list's AP at every c (lists in ``group_labels_``'s order).
    group_labels_ : ndarray of shape (n_lists,)
        The distinct ``groups`` values, in sorted order.
    n_splits_ : int
        Number of folds.
    n_features_in_ : int
        Number of features per sample.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.rerankers import PointwiseReranker, RerankerCV
    >>> rng = np.random.default_rng(0)
    >>> relevance = rng.random(240) < 0.3
    >>> features = relevance[:, None] + rng.normal(scale=0.3, size=(240, 2))
    >>> initial = relevance + rng.normal(scale=1.0, size=240)
    >>> groups = np.repeat(np.arange(8), 30)
    >>> search = RerankerCV(PointwiseReranker(), cs=[0.01, 1.0, 100.0], cv=4)
    >>> scores = search.fit_predict(features, initial, groups, relevance=relevance)
    >>> search.best_c_ in (0.01, 1.0, 100.0), scores.shape
    (True, (240,))
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit_predict", "rerank_path"]), None],
        "cs": ["array-like"],
        "cv": [Interval(Integral, 2, None, closed="left"), HasMethods(["split"])],
        "n": [Interval(Integral, 1, None, closed="left"), None],
        "denominator": [StrOptions({"relevant", "truncated"})],
        "n_jobs": [Integral, None],
    }

    def __init__(self, estimator=None, *, cs=(0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0), cv=5,
                 n=None, denominator="relevant", n_jobs=None):
        self.estimator = estimator
        self.cs = cs
        self.cv = cv
        self.n = n
        self.denominator = denominator
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, groups, *, relevance):
        """Rerank every list at every c, score each c by held-out MAP, keep the best.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the samples.
        y : array-like of shape (n_samples,)
            Initial scores, higher is better.
        groups : array-like of shape (n_samples,)
            The list (query) each sample belongs to; the folds split the lists.
        relevance : array-like of shape (n_samples,)
            0/1 relevance of every sample, for AP.

        Returns
        -------
        self : object
        """
        cs = checked_cs(self.cs)
        check_ap_options(self.n, self.denominator)
        estimator = HingeReranker() if self.estimator is None else self.estimator
        if groups is None:
            raise ValueError(
                "RerankerCV needs groups (the list each sample belongs to): its folds hold "
                "whole lists, and a single list leaves nothing to hold out."
            )
        X, y, self.group_labels_, lists = split_lists(X, y, groups)
        relevance = check_labels(relevance, "relevance", len(y))
        members = np.empty(len(y), dtype=np.intp)
        members[np.concatenate(lists)] = np.repeat(np.arange(len(lists)), list(map(len, lists)))
        folds = self._folds(X, y, groups, members, len(lists))
        path = clone(estimator).set_params(n_jobs=self.n_jobs).rerank_path(X, y, groups, cs=cs)
        self.average_precisions_ = np.array([
            average_precisions(fitted.scores_, relevance, members, self.n, denominator=self.denominator)
            for fitted in path
        ])
        self.cv_results_ = cv_results(cs, self.average_precisions_, folds)
        self.best_index_ = int(self.cv_results_["rank_test_score"].argmin())
        self.best_c_ = float(cs[self.best_index_])
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        self.n_splits_ = len(folds)
        self.best_estimator_ = path[self.best_index_].set_params(n_jobs=estimator.get_params()["n_jobs"])
        self.scores_ = self.best_estimator_.scores_
        self.n_features_in_ = X.shape[1]
        return self

    def fit_predict(self, X, y, groups, *, relevance):
        """Choose c as :meth:`fit` does and return the scores reranked at it.

        Parameters
        ----------
        X, y, groups, relevance
            As in :meth:`fit`.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            Reranked scores at ``best_c_``, higher is better, comparable within a list.
        """
        return self.fit(X, y, groups, relevance=relevance).scores_

    def _folds(self, X, y, groups, members, n_lists):
        """Each fold's test lists (numbers into ``lists``); a cut list is refused by name."""
        splitter = GroupKFold(n_splits=self.cv) if isinstance(self.cv, Integral) else self.cv
        if isinstance(self.cv, Integral) and self.cv > n_lists:
            raise ValueError(
                f"cv={self.cv} folds need at least {self.cv} lists; groups holds {n_lists}."
            )
        folds = []
        for k, (_, test) in enumerate(splitter.split(X, y, groups)):
            held = np.unique(members[test])
            if np.bincount(members[test], minlength=n_lists)[held].tolist() != \
                    np.bincount(members, minlength=n_lists)[held].tolist():
                raise ValueError(
                    f"cv={self.cv!r} cut a list in test fold {k}: a fold must hold whole lists "
                    "(one value of groups each), as GroupKFold and LeaveOneGroupOut do."
                )
            folds.append(held)
        return folds

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


def cv_results(cs, aps, folds):
    """``GridSearchCV``'s ``cv_results_`` over c, from every list's AP at every c.

    A fold's score is the MAP of its test lists (the mean of their APs, as the MAP
    scorer computes it); the mean, standard deviation and rank over folds are
    computed as ``GridSearchCV`` computes them, so that the same scores give the
    same ranks and the same best index.
    """
    splits = np.array([[np.mean(row[fold]) for fold in folds] for row in aps])
    means = np.average(splits, axis=1)
    results = {
        "params": [{"c": float(c)} for c in cs],
        "param_c": np.ma.MaskedArray(cs, mask=False),
    }
    for k in range(splits.shape[1]):
        results[f"split{k}_test_score"] = splits[:, k]
    results["mean_test_score"] = means
    results["std_test_score"] = np.sqrt(np.average((splits - means[:, None]) ** 2, axis=1))
    results["rank_test_score"] = rankdata(-means, method="min").astype(np.int32)
    return results

