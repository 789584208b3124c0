"""RerankerCV: a reranker's strength chosen by the MAP of held-out lists, each list
reranked once per candidate."""

from numbers import Integral

import numpy as np
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, _fit_context, clone
from sklearn.model_selection import GroupKFold
from sklearn.utils._param_validation import HasMethods, StrOptions

from .._validation import NotBool as Interval
from .._validation import check_labels, warn_caller
from ..metrics import average_precisions
from ..metrics._ranking import check_ap_options
from ._base import checked_cs, on_the_host, split_lists
from ._hinge import HingeReranker


class RerankerCV(BaseEstimator):
    """A reranker whose strength is chosen by cross-validated MAP over whole lists.

    scikit-learn's ``RidgeCV`` habit for the rerankers: every list is reranked once
    per candidate value of the reranker's strength parameter, its per-list work (the
    k-NN graph, the neighbour search) done once for all of them, and each value is
    scored by the mean average precision of the held-out lists of each fold. A
    reranker reranks every list on its own, so a fold's training lists do not change
    how its test lists are reranked: ``GridSearchCV(reranker, {name: values},
    scoring=make_map_scorer(), cv=GroupKFold(...))`` reranks the training lists of
    every fold and throws them away, then the test lists; this estimator reranks each
    list once per value and gives the same ``cv_results_`` scores, so it chooses the
    same value on the same folds (the first of equally good ones), at a fraction of
    the cost. The scores at the chosen value are those of the same reranking, kept.
    Under scikit-learn's ``array_api_dispatch``, torch, CuPy or array-api-strict
    inputs are reranked on the host, and ``fit_predict`` and ``scores_`` (also
    ``best_estimator_.scores_``) return an array of their namespace and device.

    The strength parameter is the one the reranker declares in its class attribute
    ``strength_param``: ``c`` for the Bayesian and point-wise rerankers,
    ``lambda_value`` for :class:`KReciprocalReranker`, ``alpha`` for
    :class:`DiffusionReranker` and :class:`QueryExpansionReranker`. The reranker
    reranks every list at several values through its method
    ``rerank_path(X, y, groups, *, <strength_param>s=values)`` (``cs``,
    ``lambda_values``, ``alphas``), and gives its default candidates in
    ``strength_grid``.

    Parameters
    ----------
    estimator : reranker, default=None
        The reranker whose strength is chosen (its other parameters are kept); None
        means ``HingeReranker()``. It must declare ``strength_param`` and implement
        ``rerank_path`` and ``fit_predict``, as every reranker of
        :mod:`skqbnorm.rerankers` does. Its ``n_jobs`` is not used: lists run over
        this estimator's ``n_jobs``.
    cs : array-like of float, default=None
        The candidate values of the estimator's strength parameter (of c for the
        Bayesian rerankers, each > 0), in the order of ``cv_results_``: real
        numbers (booleans and strings are refused), each a valid value of that
        parameter. None means the estimator's ``strength_grid``: for the Bayesian
        rerankers (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3), for the others see
        their strength parameter.
    cv : int or cross-validation splitter, default=5
        An int is the number of folds of ``GroupKFold``; a splitter's
        ``split(X, y, groups)`` must put each list wholly in one test fold (as
        ``GroupKFold`` and ``LeaveOneGroupOut`` do): a list cut in two would be
        reranked as two lists. A splitter that yields no fold, or a fold with no
        test sample, is refused.
    n : int, default=None
        Cut-off depth of AP, ``n >= 1``; None evaluates whole lists.
    denominator : {"relevant", "truncated"}, default="relevant"
        AP's denominator (see :func:`~skqbnorm.metrics.average_precision`).
    n_jobs : int, default=None
        Lists reranked in parallel (joblib); None means 1.

    Attributes
    ----------
    best_params_ : dict
        The chosen value under its parameter's name, e.g. ``{"alpha": 0.9}``: the
        highest mean held-out MAP, the first of ties in the candidates' order.
    best_c_ : float
        The chosen value of the strength parameter, whatever its name (c for the
        Bayesian rerankers).
    best_index_ : int
        Its index among the candidates and in ``cv_results_``.
    best_score_ : float
        Its mean held-out MAP.
    best_estimator_ : reranker
        A clone of ``estimator`` with the chosen value, fitted on every list (its
        ``scores_`` and diagnostics are those of the reranking done here).
    scores_ : ndarray of shape (n_samples,)
        The reranked scores at the chosen value.
    cv_results_ : dict of ndarray
        As ``GridSearchCV``'s: ``params``, ``param_<name>`` (``param_c``,
        ``param_alpha``, ...), ``split{k}_test_score``, ``mean_test_score``,
        ``std_test_score`` and ``rank_test_score``.
    average_precisions_ : ndarray of shape (n_candidates, n_lists)
        Every list's AP at every candidate (lists in ``group_labels_``'s order).
    group_labels_ : ndarray of shape (n_lists,)
        The distinct ``groups`` values, in sorted order.
    n_splits_ : int
        Number of folds.
    n_features_in_ : int
        Number of features per sample.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.rerankers import DiffusionReranker, PointwiseReranker, RerankerCV
    >>> rng = np.random.default_rng(0)
    >>> relevance = rng.random(240) < 0.3
    >>> features = relevance[:, None] + rng.normal(scale=0.3, size=(240, 2))
    >>> initial = relevance + rng.normal(scale=1.0, size=240)
    >>> groups = np.repeat(np.arange(8), 30)
    >>> search = RerankerCV(PointwiseReranker(), cs=[0.01, 1.0, 100.0], cv=4)
    >>> scores = search.fit_predict(features, initial, groups, relevance=relevance)
    >>> search.best_c_ in (0.01, 1.0, 100.0), scores.shape
    (True, (240,))
    >>> search = RerankerCV(DiffusionReranker(n_neighbors=5), cs=[0.5, 0.9], cv=4)
    >>> search = search.fit(features, initial, groups, relevance=relevance)
    >>> search.cv_results_["params"], list(search.best_params_)
    ([{'alpha': 0.5}, {'alpha': 0.9}], ['alpha'])
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit_predict", "get_params"]), None],
        "cs": ["array-like", None],
        "cv": [Interval(Integral, 2, None, closed="left"), HasMethods(["split"])],
        "n": [Interval(Integral, 1, None, closed="left"), None],
        "denominator": [StrOptions({"relevant", "truncated"})],
        "n_jobs": [Integral, None],
    }

    def __init__(self, estimator=None, *, cs=None, cv=5, n=None, denominator="relevant",
                 n_jobs=None):
        self.estimator = estimator
        self.cs = cs
        self.cv = cv
        self.n = n
        self.denominator = denominator
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, groups, *, relevance):
        """Rerank every list at every candidate, score each by held-out MAP, keep the best.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the samples.
        y : array-like of shape (n_samples,)
            Initial scores, higher is better.
        groups : array-like of shape (n_samples,)
            The list (query) each sample belongs to; the folds split the lists.
        relevance : array-like of shape (n_samples,)
            0/1 relevance of every sample, for AP. With no relevant sample every
            AP is 0, every candidate scores alike (the first is chosen), and a
            ``UserWarning`` says so.

        Returns
        -------
        self : object
            The fitted search.
        """
        with on_the_host(X, y, groups, relevance) as (on_host, to_input):
            self._search(*on_host)
            self.scores_ = self.best_estimator_.scores_ = to_input(self.scores_)
        return self

    def _search(self, X, y, groups, relevance):
        """:meth:`fit`'s work on NumPy (host) inputs."""
        estimator = HingeReranker() if self.estimator is None else self.estimator
        name = declared_strength(estimator)
        values = checked_candidates(self.cs, estimator, name)
        check_ap_options(self.n, self.denominator)
        if groups is None:
            raise ValueError(
                "RerankerCV needs groups (the list each sample belongs to): its folds hold "
                "whole lists, and a single list leaves nothing to hold out."
            )
        X, y, self.group_labels_, lists = split_lists(X, y, groups)
        relevance = check_labels(relevance, "relevance", len(y))
        if not relevance.any():
            warn_caller(
                f"relevance has no relevant sample (all {len(relevance)} are 0): every list's "
                "AP is 0 at every candidate, so every candidate scores alike and the first "
                "is chosen.", UserWarning)
        members = np.empty(len(y), dtype=np.intp)
        members[np.concatenate(lists)] = np.repeat(np.arange(len(lists)), list(map(len, lists)))
        folds = self._folds(X, y, groups, members, len(lists))
        path = self._path(estimator, name, values, X, y, groups)
        self.average_precisions_ = np.array([
            average_precisions(fitted.scores_, relevance, members, self.n, denominator=self.denominator)
            for fitted in path
        ])
        self.cv_results_ = cv_results(name, values, self.average_precisions_, folds)
        self.best_index_ = int(self.cv_results_["rank_test_score"].argmin())
        self.best_params_ = self.cv_results_["params"][self.best_index_]
        self.best_c_ = self.best_params_[name]
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        self.n_splits_ = len(folds)
        self.best_estimator_ = path[self.best_index_]
        if "n_jobs" in estimator.get_params():
            self.best_estimator_.set_params(n_jobs=estimator.get_params()["n_jobs"])
        self.scores_ = self.best_estimator_.scores_
        self.n_features_in_ = X.shape[1]

    def _path(self, estimator, name, values, X, y, groups):
        """The estimator fitted at every value, by its ``rerank_path``, lists over ``n_jobs``."""
        reranker = clone(estimator)
        if "n_jobs" in reranker.get_params():
            reranker.set_params(n_jobs=self.n_jobs)
        return reranker.rerank_path(X, y, groups, **{f"{name}s": values})

    def fit_predict(self, X, y, groups, *, relevance):
        """Choose the strength as :meth:`fit` does and return the scores reranked at it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the samples.
        y : array-like of shape (n_samples,)
            Initial scores, higher is better.
        groups : array-like of shape (n_samples,)
            The list (query) each sample belongs to.
        relevance : array-like of shape (n_samples,)
            0/1 relevance of every sample, for AP, as in :meth:`fit`.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            Reranked scores at ``best_params_``, higher is better, comparable within
            a list; under ``array_api_dispatch``, an array of the namespace and device
            of the inputs.
        """
        return self.fit(X, y, groups, relevance=relevance).scores_

    def _folds(self, X, y, groups, members, n_lists):
        """Each fold's test lists (numbers into ``lists``); a cut list is refused by name."""
        if isinstance(self.cv, str):  # a str has a split method, so the constraint lets it by
            raise ValueError(  # noqa: TRY004 - a bad parameter value, as scikit-learn refuses them
                f"cv must be an int >= 2 or a cross-validation splitter; got cv={self.cv!r}, a string."
            )
        splitter = GroupKFold(n_splits=self.cv) if isinstance(self.cv, Integral) else self.cv
        if isinstance(self.cv, Integral) and self.cv > n_lists:
            raise ValueError(
                f"cv={self.cv} folds need at least {self.cv} lists; groups holds {n_lists}."
            )
        folds = []
        for k, (_, test) in enumerate(splitter.split(X, y, groups)):
            if len(test) == 0:
                raise ValueError(f"cv={self.cv!r} gave test fold {k} no sample: it scores nothing.")
            held = np.unique(members[test])
            if np.bincount(members[test], minlength=n_lists)[held].tolist() != \
                    np.bincount(members, minlength=n_lists)[held].tolist():
                raise ValueError(
                    f"cv={self.cv!r} cut a list in test fold {k}: a fold must hold whole lists "
                    "(one value of groups each), as GroupKFold and LeaveOneGroupOut do."
                )
            folds.append(held)
        if not folds:
            raise ValueError(
                f"cv={self.cv!r} gave no fold: its split(X, y, groups) yielded no train/test "
                f"pair for {n_lists} lists, so no candidate can be scored."
            )
        return folds

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


def declared_strength(estimator):
    """The name of the parameter ``estimator`` declares for RerankerCV to tune; a
    ValueError names its class and what it lacks."""
    name = getattr(estimator, "strength_param", None)
    lacks = []
    if not isinstance(name, str) or name not in estimator.get_params(deep=False):
        lacks.append("declares no strength_param (a class attribute naming the parameter "
                     f"to tune, one of its parameters; got {name!r})")
    if not callable(getattr(estimator, "rerank_path", None)):
        lacks.append("has no rerank_path(X, y, groups, *, <strength_param>s=values) method")
    if lacks:
        raise ValueError(
            f"RerankerCV cannot tune {type(estimator).__name__}: it {' and '.join(lacks)}. "
            "Every reranker of skqbnorm.rerankers declares both; for another parameter "
            "use GridSearchCV with make_map_scorer()."
        )
    return name


def checked_candidates(cs, estimator, name):
    """``cs`` (None: the estimator's ``strength_grid``) as a list of floats, each a
    valid value of the parameter ``name`` of ``estimator``."""
    values = estimator.strength_grid if cs is None else cs
    try:
        checked = checked_cs(values, "cs", of=name, positive=False)
    except ValueError:
        checked = None
    refused = ""
    if checked is not None:
        refused = next(filter(None, (invalid_value(estimator, name, value) for value in checked)), "")
        if not refused:
            return checked.tolist()
    raise ValueError(
        f"cs must be a non-empty 1-D sequence of real numbers (not booleans or strings), "
        f"finite values of {name}, each valid for {type(estimator).__name__}; got "
        f"cs={values!r}.{refused}"
    )


def invalid_value(estimator, name, value):
    """Why ``value`` is not a valid ``name`` of ``estimator`` (its own parameter check), or ""."""
    candidate = clone(estimator).set_params(**{name: float(value)})
    try:
        getattr(candidate, "_validate_params", lambda: None)()
    except ValueError as error:
        return f" {error}"
    return ""


def cv_results(name, values, aps, folds):
    """``GridSearchCV``'s ``cv_results_`` over the parameter ``name``, from every list's
    AP at each of ``values``.

    A fold's score is the MAP of its test lists (the mean of their APs, as the MAP
    scorer computes it); the mean, standard deviation and rank over folds are
    computed as ``GridSearchCV`` computes them, so that the same scores give the
    same ranks and the same best index.
    """
    splits = np.array([[np.mean(row[fold]) for fold in folds] for row in aps])
    means = np.average(splits, axis=1)
    results = {
        "params": [{name: float(value)} for value in values],
        f"param_{name}": np.ma.MaskedArray(np.asarray(values, dtype=float), mask=False),
    }
    for k in range(splits.shape[1]):
        results[f"split{k}_test_score"] = splits[:, k]
    results["mean_test_score"] = means
    results["std_test_score"] = np.sqrt(np.average((splits - means[:, None]) ** 2, axis=1))
    results["rank_test_score"] = rankdata(-means, method="min").astype(np.int32)
    return results
