"""Scorers for model selection: retrieval over similarity rows, MAP over reranked lists."""

from sklearn.utils.metadata_routing import MetadataRequest

from .._validation import check_option
from ._ranking import check_ap_options, mean_average_precision
from ._retrieval import TIES, retrieval_metrics

_SCORES = ("R@1", "R@5", "R@10", "R@50", "geometric_mean")


class RetrievalScorer:
    """Callable ``scorer(estimator, X, y)`` for ``GridSearchCV(..., scoring=...)``.

    ``X`` holds query-similarity rows, ``y`` the correct gallery index per row. The
    estimator is fitted on the training rows (a querybank, as in the paper's
    training-set protocol) and scored by transforming the test rows.

    Parameters
    ----------
    metric : {"R@1", "R@5", "R@10", "R@50", "geometric_mean"}
        The retrieval metric to maximise (MdR and MnR, lower-is-better, are not
        offered).
    ties : {"official", "average", "optimistic", "pessimistic"}
        The tie convention of :func:`~skqbnorm.metrics.retrieval_metrics`.
    """

    def __init__(self, metric="R@1", ties="official"):
        self.metric = check_option(metric, "metric", _SCORES)
        self.ties = check_option(ties, "ties", TIES)

    def __call__(self, estimator, X, y):
        scores = estimator.transform(X) if hasattr(estimator, "transform") else X
        return retrieval_metrics(scores, y, ties=self.ties)[self.metric]

    def __repr__(self):
        return f"make_retrieval_scorer({self.metric!r}, ties={self.ties!r})"


def make_retrieval_scorer(metric="R@1", *, ties="official"):
    """A scorer for ``GridSearchCV`` over querybank normalisers.

    Parameters
    ----------
    metric : {"R@1", "R@5", "R@10", "R@50", "geometric_mean"}, default="R@1"
        The retrieval metric to maximise (higher is better for all of them).
    ties : {"official", "average", "optimistic", "pessimistic"}, default="official"
        How tied scores count (see :func:`~skqbnorm.metrics.retrieval_metrics`).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y)``: ``estimator.transform(X)`` scored against the
        correct gallery indices ``y``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.model_selection import GridSearchCV
    >>> from skqbnorm import DynamicInvertedSoftmax
    >>> from skqbnorm.metrics import make_retrieval_scorer
    >>> rng = np.random.default_rng(0)
    >>> gt = rng.integers(0, 30, size=120)
    >>> sims = rng.normal(size=(120, 30)) + 3 * np.eye(30)[gt]
    >>> search = GridSearchCV(DynamicInvertedSoftmax(), {"beta": [1.0, 10.0]},
    ...                       scoring=make_retrieval_scorer("R@1"), cv=3)
    >>> search.fit(sims, gt).best_params_["beta"] in (1.0, 10.0)
    True

    Arguments are checked at once, not when scoring:

    >>> make_retrieval_scorer("MdR")
    Traceback (most recent call last):
    ...
    ValueError: metric must be one of ('R@1', ...); got metric='MdR'.
    """
    return RetrievalScorer(metric, ties=ties)


class MAPScorer:
    """Callable ``scorer(estimator, X, y, relevance, groups)`` for rerankers.

    Reranks the lists of the evaluated fold (``estimator.fit_predict(X, y,
    groups=groups)``, ``y`` being the initial scores) and returns their mean
    average precision against ``relevance``. It requests ``relevance`` and
    ``groups`` through scikit-learn's metadata routing, so ``GridSearchCV`` passes
    each fold's share of them.

    Parameters
    ----------
    n : int, default=None
        Cut-off depth of AP, ``n >= 1``; None evaluates whole lists.
    denominator : {"relevant", "truncated"}, default="relevant"
        AP's denominator (see :func:`~skqbnorm.metrics.average_precision`).
    """

    def __init__(self, n=None, denominator="relevant"):
        self.n = check_ap_options(n, denominator)
        self.denominator = denominator

    def __call__(self, estimator, X, y, relevance=None, groups=None):
        if relevance is None:
            raise ValueError(
                "make_map_scorer needs relevance (one 0/1 label per sample) and got none: "
                "enable scikit-learn's metadata routing (sklearn.set_config("
                "enable_metadata_routing=True)) and pass GridSearchCV.fit(X, y, "
                "groups=groups, relevance=relevance)."
            )
        scores = estimator.fit_predict(X, y, groups=groups)
        groups = [0] * len(scores) if groups is None else groups
        return mean_average_precision(scores, relevance, groups, self.n, denominator=self.denominator)

    def get_metadata_routing(self):
        request = MetadataRequest(owner=self)
        request.score.add_request(param="relevance", alias=True)
        request.score.add_request(param="groups", alias=True)
        return request

    def __repr__(self):
        return f"make_map_scorer(n={self.n!r}, denominator={self.denominator!r})"


def make_map_scorer(n=None, *, denominator="relevant"):
    """A MAP scorer for ``GridSearchCV`` over rerankers, with whole queries per fold.

    Needs scikit-learn's metadata routing
    (``sklearn.set_config(enable_metadata_routing=True)`` or the
    ``sklearn.config_context`` of the same name): ``GridSearchCV.fit(X, y,
    groups=groups, relevance=relevance)`` then hands ``groups`` to the splitter
    (use ``GroupKFold`` so that a query's list never straddles folds), to the
    reranker's ``fit`` and to this scorer, and ``relevance`` to this scorer.

    Parameters
    ----------
    n : int, default=None
        Cut-off depth of AP, ``n >= 1``; None evaluates whole lists.
    denominator : {"relevant", "truncated"}, default="relevant"
        AP's denominator.

    Returns
    -------
    scorer : MAPScorer
        A scorer for :class:`~skqbnorm.rerankers.RerankerCV` and scikit-learn's
        model selection.

    Raises
    ------
    ValueError, TypeError
        At once, for an unknown ``denominator`` or an ``n`` that is not an integer
        ``>= 1`` (bools and floats included).

    Examples
    --------
    >>> import numpy as np, sklearn
    >>> from sklearn.model_selection import GridSearchCV, GroupKFold
    >>> from skqbnorm import PointwiseReranker
    >>> from skqbnorm.metrics import make_map_scorer
    >>> rng = np.random.default_rng(0)
    >>> relevance = rng.random(120) < 0.3
    >>> features = relevance[:, None] + rng.normal(scale=0.3, size=(120, 2))
    >>> initial = relevance + rng.normal(scale=1.0, size=120)
    >>> groups = np.repeat(np.arange(4), 30)
    >>> with sklearn.config_context(enable_metadata_routing=True):
    ...     search = GridSearchCV(PointwiseReranker(), {"c": [0.01, 1.0, 100.0]},
    ...                           scoring=make_map_scorer(), cv=GroupKFold(n_splits=2))
    ...     search = search.fit(features, initial, groups=groups, relevance=relevance)
    >>> search.best_params_["c"] in (0.01, 1.0, 100.0)
    True
    """
    return MAPScorer(n, denominator=denominator)
