"""QueryBankSearchCV: a normaliser's hyperparameters chosen against the bank it will serve with."""

import inspect
import re
import time
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context, clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted

from ._validation import NotBool, check_embeddings, check_relevance, check_sims, warn_caller
from .metrics._paired import _generator, compare_outcomes, query_outcomes
from .normalizers._index_serving import index_serving
from .normalizers._querybank_gate import _Unnormalized

#: Metrics of which lower is better (ranks); the rule reads their change with its sign turned.
LOWER_IS_BETTER = ("MdR", "MnR")


class QueryBankSearchCV(MetaEstimatorMixin, BaseEstimator):
    """A normaliser whose hyperparameters are chosen on validation queries, fitted on your bank.

    scikit-learn's ``RidgeCV`` habit for the querybank normalisers. Every candidate of
    ``param_grid`` is a clone of ``estimator`` with those parameters, fitted once on the
    bank ``X`` (the bank that will be deployed), and scored by normalising the
    validation ``queries``, whose correct items ``query_gt`` are known: its change in
    ``scoring`` against the raw similarities of the same queries, with a paired
    percentile bootstrap interval. Every candidate is compared on the same resamples of
    the queries, so the comparison between candidates is paired too. The candidate
    chosen by ``rule`` (by default the largest lower end of the interval) is kept as
    ``best_estimator_``, already fitted on the bank: there is no second fit.

    ``GridSearchCV`` over a normaliser fits each candidate on the training fold's rows
    and scores the held-out rows, so the bank it tunes against is a part of the
    training queries. That is right when the deployed bank is drawn as the training
    queries are (the bank *is* the training queries); with a bank given apart from the
    queries with answers, the statistics a normaliser learns differ between the two
    banks, and so may the best setting. This estimator tunes against the bank given.

    Parameters
    ----------
    estimator : estimator
        A querybank normaliser (any of :func:`skqbnorm.catalogue.normalizers`, or a
        :class:`~skqbnorm.QueryBankGate`), unfitted; it is cloned for every candidate.
    param_grid : dict or list of dict
        The candidates, as :class:`~sklearn.model_selection.ParameterGrid` takes them:
        a dict of parameter names (as ``estimator.get_params()`` names them, e.g.
        ``"normalizer__beta"`` inside a gate) to lists of values, or a list of such
        dicts; candidates are tried, and ``cv_results_`` lists them, in the grid's order.
    scoring : str, default="R@1"
        The metric of the validation queries: ``"R@K"`` for any ``K >= 1`` (at most the
        gallery's size), ``"mAP"``, or the ranks ``"MdR"`` and ``"MnR"`` (lower is
        better: the rule then reads the change with its sign turned, so that the
        largest lower end is the upper end of a rank's interval nearest minus infinity).
    rule : {"lower_bound", "mean"}, default="lower_bound"
        ``"lower_bound"``: the candidate whose interval of improvement has the largest
        lower end, the setting whose gain is surest; ``"mean"``: the largest
        improvement itself. Ties go to the earlier candidate.
    fallback : {"raw", "best"}, default="raw"
        What :meth:`transform` and :meth:`top_k` serve when the chosen candidate's
        interval of improvement does not lie above zero (``improves_`` is False, with a
        warning): ``"raw"`` the raw similarities (through the same checks, as a closed
        :class:`~skqbnorm.QueryBankGate` serves them); ``"best"`` the chosen candidate
        all the same. ``best_estimator_`` is the chosen candidate either way.
    confidence : float, default=0.95
        Coverage of the percentile bootstrap intervals, in (0, 1).
    n_resamples : int, default=1000
        Bootstrap resamples of the validation queries, ``>= 1``.
    random_state : None, int, SeedSequence or Generator, default=None
        Seed of the resamples: with an int, every candidate's interval is that of
        ``paired_comparison(raw, scores, query_gt, random_state=random_state)``; with
        None or a Generator one seed is drawn at fit, the same for every candidate.
    refit : bool, default=True
        Whether to keep the chosen candidate as ``best_estimator_`` (it is fitted on
        the bank already; nothing is fitted again). False frees it, and
        :meth:`transform`, :meth:`top_k` and :meth:`similarities` are then unavailable.
    n_jobs : int, default=None
        Candidates fitted and scored in parallel (joblib), ``n_jobs`` at a time, each
        job with its own copy of the inputs; None means 1. The results do not depend
        on it.
    verbose : int, default=0
        1: one line before the search; 2 and above: a line per candidate as well.

    Attributes
    ----------
    cv_results_ : dict of ndarray
        One entry per candidate, as ``GridSearchCV``'s (``pandas.DataFrame`` takes it):
        ``params``, ``param_<name>`` (masked arrays, masked where a candidate does not
        set the parameter), ``mean_fit_time``, ``mean_score_time`` (transform and the
        bootstrap), ``mean_test_score`` (the candidate's ``scoring`` on the validation
        queries: R@K in percent, MdR and MnR 1-based, mAP in [0, 1]),
        ``change_test_score`` (that less the raw similarities' value),
        ``change_low_test_score`` and ``change_high_test_score`` (its interval) and
        ``rank_test_score`` (1 for the best by ``rule``; ties share the lower rank).
    best_index_ : int
        The chosen candidate's index in ``cv_results_``.
    best_params_ : dict
        Its parameters.
    best_score_ : float
        Its ``mean_test_score``.
    best_change_ : float
        Its ``change_test_score``.
    best_interval_ : tuple of float
        Its ``(change_low_test_score, change_high_test_score)``.
    raw_score_ : float
        ``scoring`` of the raw similarities of the validation queries.
    improves_ : bool
        Whether the chosen candidate's interval of improvement lies above zero (for
        MdR and MnR: its interval of change below zero).
    best_estimator_ : estimator
        The chosen candidate, fitted on ``X`` (absent when ``refit=False``).
    n_candidates_ : int
        Number of candidates.
    n_features_in_ : int
        Number of gallery items.

    See Also
    --------
    skqbnorm.compare : Every method of the catalogue on the same queries, with intervals.
    skqbnorm.metrics.paired_comparison : The change of two score matrices, with intervals.
    skqbnorm.rerankers.RerankerCV : The reranker-side analogue.

    Notes
    -----
    Choose on validation queries that are not the test queries, and report the chosen
    setting's change on the test queries, once: the best of many noisy intervals is
    biased upwards on the queries it was chosen on. Every candidate is fitted on its
    own; nothing learned from the bank is shared between candidates.

    Examples
    --------
    >>> from skqbnorm import DynamicInvertedSoftmax, QueryBankSearchCV
    >>> from skqbnorm.datasets import make_hubness_sims
    >>> sims, gt, bank = make_hubness_sims(400, 100, 500, random_state=0)
    >>> search = QueryBankSearchCV(DynamicInvertedSoftmax(),
    ...                            {"beta": [1.0, 10.0, 30.0], "k": [1, 5]},
    ...                            n_resamples=200, random_state=0)
    >>> search = search.fit(bank, queries=sims[:200], query_gt=gt[:200])
    >>> search.best_params_  # k does not matter here: the tie goes to the earlier candidate
    {'beta': 10.0, 'k': 1}
    >>> search.cv_results_["rank_test_score"].tolist()
    [5, 5, 1, 1, 3, 3]
    >>> search.raw_score_, search.best_score_, search.best_interval_, search.improves_
    (19.5, 51.5, (25.0, 38.0), True)
    >>> test_scores = search.transform(sims[200:])  # the chosen setting, fitted on bank
    >>> test_scores.shape
    (200, 100)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "transform"])],
        "param_grid": [dict, list],
        "scoring": [str],
        "rule": [StrOptions({"lower_bound", "mean"})],
        "fallback": [StrOptions({"raw", "best"})],
        "confidence": [Interval(Real, 0, 1, closed="neither")],
        "n_resamples": [NotBool(Integral, 1, None, closed="left")],
        "random_state": "no_validation",  # as paired_comparison takes it, checked in fit
        "refit": ["boolean"],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
    }

    def __init__(self, estimator, param_grid, *, scoring="R@1", rule="lower_bound",
                 fallback="raw", confidence=0.95, n_resamples=1000, random_state=None,
                 refit=True, n_jobs=None, verbose=0):
        self.estimator = estimator
        self.param_grid = param_grid
        self.scoring = scoring
        self.rule = rule
        self.fallback = fallback
        self.confidence = confidence
        self.n_resamples = n_resamples
        self.random_state = random_state
        self.refit = refit
        self.n_jobs = n_jobs
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None, *, queries, query_gt, gallery=None, gallery_bank=None,
            **fit_params):
        """Fit every candidate on the bank ``X``, score it on ``queries``, keep the best.

        Parameters
        ----------
        X : array-like of shape (n_bank, n_gallery) or (n_bank, n_dims)
            The bank to deploy, as the normaliser's fit takes it: its similarities to
            the gallery, or, with ``gallery``, its embeddings.
        y : None
            Ignored.
        queries : array-like of shape (n_queries, n_gallery) or (n_queries, n_dims)
            Validation queries in the form of ``X``: their similarities to the same
            gallery, or, with ``gallery``, their embeddings. A
            :class:`~skqbnorm.QueryBankGate` also receives them as its ``queries``.
        query_gt : array-like of shape (n_queries,) or (n_queries, n_gallery)
            Each validation query's correct gallery index, or a 0/1 relevance matrix.
        gallery : array-like of shape (n_gallery, n_dims), default=None
            Gallery embeddings, when ``X`` and ``queries`` are embeddings.
        gallery_bank : array-like, default=None
            For a dual-bank normaliser, as its fit takes it.
        **fit_params
            Further keywords of the normaliser's fit, given to every candidate
            unchanged (``querybank_to_gallery_bank`` for DBSN on similarities).

        Returns
        -------
        self : object
            The fitted search.
        """
        metric, ks, greater = _scoring(self.scoring)
        rng = _generator(self.random_state)
        seed = self.random_state if isinstance(self.random_state, Integral) else int(
            rng.integers(0, 2**63 - 1))
        candidates = _candidates(self.param_grid, self.estimator)
        queries, n_gallery = _check_queries(queries, X, gallery)
        gt = _check_query_gt(query_gt, queries.shape[0], n_gallery)
        if ks[0] > n_gallery:
            raise ValueError(
                f"scoring={self.scoring!r} needs at least {ks[0]} gallery items; the "
                f"gallery has {n_gallery} (X of shape {np.shape(X)}).")
        if gallery is not None:
            fit_params["gallery"] = gallery
        if gallery_bank is not None:
            fit_params["gallery_bank"] = gallery_bank
        if "queries" in inspect.signature(self.estimator.fit).parameters:
            fit_params["queries"] = queries
        raw = None
        if gallery is None:  # the raw similarities are the queries themselves
            raw = queries, query_outcomes(queries, gt, ks)
        if self.verbose > 0:
            print(f"[{type(self).__name__}] Fitting {len(candidates)} candidates on the bank "
                  f"of shape {np.shape(X)}, scoring {queries.shape[0]} validation queries")
        task = delayed(_evaluate)
        batch = effective_n_jobs(self.n_jobs)  # at most this many fitted candidates at once
        results = (result for start in range(0, len(candidates), batch)
                   for result in Parallel(n_jobs=self.n_jobs)(
                       task(self.estimator, params, X, y, fit_params, queries, raw, gt, ks,
                            (self.n_resamples, self.confidence, seed))
                       for params in candidates[start:start + batch]))
        rows, best, best_criterion = [], None, -np.inf
        for index, (fitted, comparison, times) in enumerate(results):
            low, high = comparison.interval[metric]
            row = {"score": comparison.value_b[metric], "raw": comparison.value_a[metric],
                   "change": comparison.change[metric], "low": low, "high": high,
                   "fit_time": times[0], "score_time": times[1]}
            row["criterion"] = _criterion(row, self.rule, greater)
            rows.append(row)
            if best is None or row["criterion"] > best_criterion:
                best, best_criterion, self.best_index_ = fitted, row["criterion"], index
            self.n_features_in_ = fitted.n_features_in_
            if self.verbose > 1:
                print(f"[{type(self).__name__}] {index + 1}/{len(candidates)} "
                      f"{candidates[index]}: {metric} {row['score']:.4g} (change "
                      f"{row['change']:+.4g} [{low:+.4g}, {high:+.4g}]); fit "
                      f"{times[0]:.2f} s, score {times[1]:.2f} s")
        self.cv_results_ = _cv_results(candidates, rows)
        chosen = rows[self.best_index_]
        self.n_candidates_ = len(candidates)
        self.best_params_ = candidates[self.best_index_]
        self.best_score_ = chosen["score"]
        self.best_change_ = chosen["change"]
        self.best_interval_ = (chosen["low"], chosen["high"])
        self.raw_score_ = chosen["raw"]
        self.improves_ = bool(_criterion(chosen, "lower_bound", greater) > 0)
        if not self.improves_:
            served = "the raw similarities" if self.fallback == "raw" else "it all the same"
            which = (f"No candidate improves {metric}" if self.rule == "lower_bound" else
                     f"The candidate chosen by rule='mean' does not improve {metric}")
            warn_caller(
                f"{which} surely: {self.best_params_} changes "
                f"it by {self.best_change_:+.4g} with a {self.confidence:.0%} interval of "
                f"[{chosen['low']:+.4g}, {chosen['high']:+.4g}] over {queries.shape[0]} "
                f"validation queries; transform serves {served} (fallback="
                f"{self.fallback!r}).", UserWarning)
        for name in ("best_estimator_", "_served"):  # from an earlier fit with refit=True
            self.__dict__.pop(name, None)
        if self.refit:
            self.best_estimator_ = best
            self._served = best if self.improves_ or self.fallback == "best" else (
                _Unnormalized.like(_served_normalizer(best)))
        return self

    def _served_estimator(self):
        check_is_fitted(self)
        return self._served

    @available_if(lambda self: _delegates(self, "transform"))
    def transform(self, X):
        """Score the queries as the chosen candidate does.

        Under ``fallback="raw"``, when ``improves_`` is False, the scores are the raw
        similarities.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_gallery)
            Query similarities to the gallery of the bank.

        Returns
        -------
        scores : ndarray of shape (n_queries, n_gallery)
            In the dtype of ``X`` (float32 stays float32).
        """
        return self._served_estimator().transform(X)

    @available_if(lambda self: _delegates(self, "top_k"))
    def top_k(self, X=None, *, queries=None, chunks=None, k=10, return_scores=True):
        """Find the ``k`` best gallery items per query, as :meth:`transform` scores them.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_gallery), default=None
            Query similarities to the gallery, as the normaliser's
            :meth:`~skqbnorm.InvertedSoftmax.top_k` takes them.
        queries : array-like of shape (n_queries, n_dims), default=None
            Query embeddings (with ``gallery=`` at fit), in place of ``X``.
        chunks : iterable of array-like, default=None
            Column chunks of the query similarities, in place of ``X``.
        k : int, default=10
            How many items per query.
        return_scores : bool, default=True
            Whether to return the scores beside the indices.

        Returns
        -------
        indices : ndarray of shape (n_queries, k)
            Gallery indices, best first. Alone when ``return_scores=False``.
        scores : ndarray of shape (n_queries, k)
            Their scores.
        """
        return self._served_estimator().top_k(X, queries=queries, chunks=chunks, k=k,
                                              return_scores=return_scores)

    @available_if(lambda self: _delegates(self, "similarities"))
    def similarities(self, queries):
        """Compute query embeddings' similarities to the fitted gallery (``gallery=`` at fit).

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_dims)
            Query embeddings.

        Returns
        -------
        sims : ndarray of shape (n_queries, n_gallery)
            Ready for :meth:`transform`.
        """
        check_is_fitted(self)
        return self.best_estimator_.similarities(queries)


def _delegates(search, name):
    """Whether ``search`` offers ``name``: refit kept the estimator, which has it."""
    if not search.refit:
        raise AttributeError(
            f"This {type(search).__name__} instance was initialized with refit=False: "
            f"{name} is available only with the chosen estimator kept (refit=True).")
    getattr(getattr(search, "best_estimator_", search.estimator), name)
    return True


def _evaluate(estimator, params, X, y, fit_params, queries, raw, gt, ks, resampling):
    """Fit one candidate on the bank and compare its scores of the queries with raw ones."""
    n_resamples, confidence, seed = resampling
    start = time.perf_counter()
    fitted = clone(estimator).set_params(**params).fit(X, y, **fit_params)
    fit_time = time.perf_counter() - start
    if raw is None:  # embeddings: the candidate's own similarities (its metric)
        sims = fitted.similarities(queries)
        raw = sims, query_outcomes(sims, gt, ks)
    outcomes = query_outcomes(fitted.transform(raw[0]), gt, ks)
    comparison = compare_outcomes(raw[1], outcomes, ks, n_resamples, confidence,
                                  np.random.default_rng(seed))
    return fitted, comparison, (fit_time, time.perf_counter() - start - fit_time)


def _criterion(row, rule, greater):
    """The number ``rule`` maximises: the improvement, or its interval's lower end."""
    if rule == "mean":
        return row["change"] if greater else -row["change"]
    return row["low"] if greater else -row["high"]


def _scoring(scoring):
    """``(metric, ks, greater_is_better)`` of a scoring name, or a ValueError naming it."""
    if scoring in ("MdR", "MnR", "mAP"):
        return scoring, (1,), scoring not in LOWER_IS_BETTER
    match = re.fullmatch(r"R@([1-9][0-9]*)", scoring)
    if match is None:
        raise ValueError(
            f"scoring must be 'R@K' for an integer K >= 1, 'mAP', 'MdR' or 'MnR'; got "
            f"scoring={scoring!r}.")
    return scoring, (int(match.group(1)),), True


def _candidates(param_grid, estimator):
    """The grid's candidates, in its order; a name ``estimator`` lacks is refused by name."""
    try:
        candidates = list(ParameterGrid(param_grid))
    except (TypeError, ValueError) as error:
        raise ValueError(f"param_grid: {error}") from error
    if not candidates:
        raise ValueError(f"param_grid holds no candidate (an empty list of values): "
                         f"param_grid={param_grid!r}.")
    known = estimator.get_params()
    for params in candidates:
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ValueError(
                f"param_grid names {unknown}, not parameters of {type(estimator).__name__}; "
                f"its parameters are {sorted(known)}.")
    return candidates


def _check_queries(queries, X, gallery):
    """Validated queries in the form of ``X``, and the gallery's size."""
    bank_shape = tuple(np.shape(X))
    if gallery is None:
        queries = check_sims(queries, "queries")
        width, what = bank_shape[-1] if bank_shape else None, "one column per gallery item"
        n_gallery = queries.shape[1]
    else:
        queries = check_embeddings(queries, "queries")
        width, what = bank_shape[-1] if bank_shape else None, "embeddings of one dimension"
        n_gallery = np.shape(gallery)[0]
    if len(bank_shape) != 2 or queries.shape[1] != width:
        raise ValueError(
            f"queries has shape {queries.shape} and X (the bank) has shape {bank_shape}: "
            f"queries must be in the form of X, {what}.")
    return queries, n_gallery


def _check_query_gt(query_gt, n_queries, n_gallery):
    """``query_gt`` as gallery indices or a relevance matrix for the validation queries."""
    gt = np.asarray(query_gt)
    if gt.ndim == 2:
        return check_relevance(gt, (n_queries, n_gallery), name="query_gt",
                               of="the queries' similarities")
    if gt.ndim != 1 or len(gt) != n_queries:
        raise ValueError(
            f"query_gt must hold one gallery index per query (shape ({n_queries},)) or a "
            f"relevance matrix of shape ({n_queries}, {n_gallery}); got shape {gt.shape}.")
    if not np.issubdtype(gt.dtype, np.integer):
        raise ValueError(f"query_gt must hold integer gallery indices; got dtype {gt.dtype}.")
    if gt.min() < 0 or gt.max() >= n_gallery:
        raise ValueError(
            f"query_gt must hold gallery indices in [0, {n_gallery}); got values in "
            f"[{gt.min()}, {gt.max()}].")
    return gt


def _cv_results(candidates, rows):
    """``GridSearchCV``-like ``cv_results_`` of every candidate's row."""
    results = {"params": candidates}
    names = sorted({name for params in candidates for name in params})
    for name in names:
        values = np.ma.MaskedArray(np.empty(len(candidates), dtype=object), mask=True)
        for index, params in enumerate(candidates):
            if name in params:
                values[index] = params[name]
        results[f"param_{name}"] = values
    column = {key: np.array([row[key] for row in rows], dtype=float) for key in rows[0]}
    results.update({
        "mean_fit_time": column["fit_time"], "mean_score_time": column["score_time"],
        "mean_test_score": column["score"], "change_test_score": column["change"],
        "change_low_test_score": column["low"], "change_high_test_score": column["high"],
        "rank_test_score": rankdata(-column["criterion"], method="min").astype(np.int32),
    })
    return results


def _served_normalizer(estimator):
    """The fitted normaliser that serves ``estimator``'s queries: a gate's, else itself."""
    return index_serving(estimator).normalizer if hasattr(estimator, "_index_serving") else estimator
