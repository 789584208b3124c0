"""Scorers for model selection over query-similarity rows."""

from ._retrieval import retrieval_metrics

_SCORES = ("R@1", "R@5", "R@10", "R@50", "geometric_mean")


class RetrievalScorer:
    """Callable ``scorer(estimator, X, y)`` for ``GridSearchCV(..., scoring=...)``.

    ``X`` holds query-similarity rows, ``y`` the correct gallery index per row. The
    estimator is fitted on the training rows (a querybank, as in the paper's
    training-set protocol) and scored by transforming the test rows.

    Parameters
    ----------
    metric : {"R@1", "R@5", "R@10", "R@50", "geometric_mean"}
        The retrieval metric to maximise.
    """

    def __init__(self, metric="R@1"):
        if metric not in _SCORES:
            raise ValueError(f"metric must be one of {_SCORES}; got {metric!r}.")
        self.metric = metric

    def __call__(self, estimator, X, y):
        scores = estimator.transform(X) if hasattr(estimator, "transform") else X
        return retrieval_metrics(scores, y)[self.metric]

    def __repr__(self):
        return f"make_retrieval_scorer({self.metric!r})"


def make_retrieval_scorer(metric="R@1"):
    """A scorer for ``GridSearchCV`` over querybank normalisers.

    Parameters
    ----------
    metric : {"R@1", "R@5", "R@10", "R@50", "geometric_mean"}, default="R@1"
        The retrieval metric to maximise (higher is better for all of them).

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
    """
    return RetrievalScorer(metric)
