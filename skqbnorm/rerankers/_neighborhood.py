"""The shared machinery of the neighbourhood rerankers (k-reciprocal, diffusion, query
expansion): unlike the Bayesian rerankers, which smooth the initial scores over a
Gaussian graph, these compare the samples by the cosine of their features and take the
initial scores as the query's similarities to them."""

from numbers import Integral

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, _fit_context, clone
from sklearn.utils._param_validation import StrOptions

from ._base import checked_cs, fitted_path, on_the_host, split_lists

#: Initial scores this far beyond [-1, 1] are rounding (e.g. float32 cosines of 1 + 1e-7),
#: clipped; further, ``initial="cosine"`` refuses them.
COSINE_SLACK = 1e-6


class NeighborhoodReranker(BaseEstimator):
    """Base class of the neighbourhood rerankers; not for direct use.

    ``fit(X, y, groups=None)`` reranks every list (the rows of one value of
    ``groups``) independently, in parallel over ``n_jobs``. A subclass names the
    parameter :class:`~skqbnorm.rerankers.RerankerCV` tunes in ``strength_param``,
    its default candidates in ``strength_grid``, and implements
    ``_rerank_path(features, initial, values)``: the list reranked at each value of
    that parameter, ``[(scores, info)]`` (scores float64, higher is better; info a
    dict of diagnostics, which ``_report(infos)`` receives in the caller's thread: a
    worker process's warnings would not reach the caller), its per-list work done
    once for every value. Under scikit-learn's ``array_api_dispatch``, torch, CuPy or
    array-api-strict inputs are reranked on the host, and ``fit_predict`` and
    ``scores_`` return an array of their namespace and device.
    """

    #: The parameter :class:`~skqbnorm.rerankers.RerankerCV` tunes, and its default candidates.
    strength_param = None
    strength_grid = ()

    _parameter_constraints: dict = {"n_jobs": [Integral, None]}

    # GridSearchCV and cross_validate route ``groups`` to fit when metadata routing
    # is enabled: a fold's lists must stay separate lists.
    __metadata_request__fit = {"groups": True}

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, groups=None):
        """Rerank every list and keep the scores.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the samples, compared by their cosine similarity.
        y : array-like of shape (n_samples,)
            Initial scores: the query's similarities to the samples, higher is better.
        groups : array-like of shape (n_samples,), default=None
            The list each sample belongs to; None means one list.

        Returns
        -------
        self : object
            Fitted reranker, with ``scores_``.
        """
        with on_the_host(X, y, groups) as (on_host, to_input):
            X, y, self.group_labels_, lists = split_lists(*on_host)  # the Bayesian refusals
            (results,) = self._path(X, y, lists, [getattr(self, self.strength_param)])
            self._record(results, lists, X.shape)
            self.scores_ = to_input(self.scores_)
        return self

    def _fitted_path(self, X, y, groups, values, keyword):
        """``rerank_path``'s work: a fitted clone per value of the strength parameter
        (``values``, passed as ``keyword``), each list's shared work done once."""
        return fitted_path(self, X, y, groups, self._checked_values(values, keyword))

    def _checked_values(self, values, keyword):
        """``values`` as a list of Python numbers, each valid for the strength parameter."""
        checked = checked_cs(values, keyword, of=self.strength_param, positive=False)
        for value in checked:
            try:
                clone(self).set_params(**{self.strength_param: float(value)})._validate_params()
            except ValueError as error:
                raise ValueError(f"{keyword}={values!r} holds {float(value)!r}: {error}") from None
        return checked.tolist()

    def _path(self, X, y, lists, values):
        """For each of ``values``, every list's ``(scores, info)``: the lists in parallel."""
        y = self._query_similarities(y, lists)
        paths = Parallel(n_jobs=self.n_jobs)(
            delayed(self._rerank_path)(X[index], y[index], values) for index in lists
        )
        return [[path[k] for path in paths] for k in range(len(values))]

    def _record(self, results, lists, shape):
        """Keep each list's ``(scores, info)`` as the fitted attributes, and report."""
        self.scores_ = np.empty(shape[0])
        for index, (scores, _) in zip(lists, results):
            self.scores_[index] = scores
        self.n_features_in_ = shape[1]
        self._report([info for _, info in results])
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_predict(self, X, y, groups=None):
        """Rerank and return the new scores.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the samples, compared by their cosine similarity.
        y : array-like of shape (n_samples,)
            Initial scores: the query's similarities to the samples, higher is better.
        groups : array-like of shape (n_samples,), default=None
            The list each sample belongs to; None means one list.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            Reranked scores, higher is better, comparable within a list; under
            ``array_api_dispatch``, an array of the namespace and device of the inputs.
        """
        return self.fit(X, y, groups=groups).scores_

    def _report(self, infos):
        """Keep or report the lists' diagnostics (here: none)."""

    def _query_similarities(self, y, lists):
        """The initial scores as the subclass takes them (here: unchanged); ``lists``:
        the rows of each list."""
        return y

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.non_deterministic = False
        return tags


class CosineQueryReranker(NeighborhoodReranker):
    """Base of the neighbourhood rerankers that set the initial scores beside the
    features' cosines, so need them on the cosine scale (``initial``)."""

    _parameter_constraints: dict = {
        **NeighborhoodReranker._parameter_constraints,
        "initial": [StrOptions({"cosine", "minmax"})],
    }

    def _query_similarities(self, y, lists):
        """``y`` itself (``"cosine"``: in [-1, 1] to rounding), or each list's ``y``
        mapped linearly onto [0, 1] (``"minmax"``)."""
        if self.initial == "minmax":
            out = np.empty_like(y)
            for index in lists:
                scaled = y[index] / np.abs(y[index]).max()  # max - min may exceed float64
                out[index] = (scaled - scaled.min()) / np.ptp(scaled)
            return out
        low, high = y.min(), y.max()
        if low < -1 - COSINE_SLACK or high > 1 + COSINE_SLACK:
            raise ValueError(
                f"With initial='cosine', the initial scores y are the query's cosine "
                f"similarities to the samples, in [-1, 1]; got y of shape {y.shape} in "
                f"[{low}, {high}]. Pass initial='minmax' for scores on another scale."
            )
        return np.clip(y, -1.0, 1.0)
