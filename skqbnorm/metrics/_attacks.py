"""Planted hubs: the traffic they capture, the recall the real items lose, and a detector."""

from dataclasses import dataclass, field

import numpy as np

from .._validation import check_int, check_real, check_sims
from ._hubness import k_occurrence
from ._paired import (
    IntervalEnds,
    _check_confidence,
    _generator,
    paired_mean_change,
    percentile_interval,
    resampled_means,
)
from ._retrieval import _hits, correct_item_ranks

#: Scales a median absolute deviation (or a mean one) to a normal standard deviation.
MAD_SCALE, MEAN_AD_SCALE = 1.4826, 1.2533


@dataclass(frozen=True, repr=False)
class HubCapture(IntervalEnds):
    """The share of queries whose top-k holds a planted item, with its interval.

    :func:`hub_capture` returns it; its fields are read as attributes.

    Parameters
    ----------
    capture : float
        The share, in [0, 1].
    interval : tuple of float, or None
        Its percentile bootstrap interval ``(low, high)``; None without resamples.
    captured : ndarray of shape (n_queries,), dtype=bool
        Whether each query's top-k holds a planted item.
    k, n_queries, n_resamples : int
        The cut-off, the number of queries and of bootstrap resamples.
    confidence : float
        The coverage of the interval, in (0, 1).
    resampled : ndarray of shape (n_resamples,)
        Every resample's share.

    Examples
    --------
    >>> from skqbnorm.metrics import hub_capture
    >>> result = hub_capture([[0.1, 0.9], [0.8, 0.2]], planted=[1], n_resamples=0)
    >>> result.capture, result.interval, result.to_dict()["n_queries"]
    (0.5, None, 2)
    """

    capture: float
    interval: tuple
    captured: np.ndarray = field(compare=False)
    k: int
    n_queries: int
    n_resamples: int
    confidence: float
    resampled: np.ndarray = field(compare=False)

    def to_dict(self):
        """The result as plain values, without the per-query arrays.

        Returns
        -------
        values : dict
            ``capture``, ``low``, ``high``, ``k``, ``n_queries``, ``n_resamples`` and
            ``confidence``: ``json.dumps`` takes it.
        """
        return {"capture": self.capture, "low": self.low, "high": self.high, "k": self.k,
                "n_queries": self.n_queries, "n_resamples": self.n_resamples,
                "confidence": self.confidence}

    def __repr__(self):
        interval = ("no resamples" if self.interval is None else
                    f"[{self.low:.4g}, {self.high:.4g}], {self.confidence:.0%} percentile "
                    f"bootstrap interval of {self.n_resamples} resamples")
        return (f"Hub capture@{self.k} over {self.n_queries} queries: {self.capture:.4g} "
                f"({interval})")


def hub_capture(scores, planted, k=1, *, n_resamples=10_000, confidence=0.95,
                random_state=None):
    """Share of queries whose top ``k`` holds a planted gallery item.

    The traffic that items planted in a gallery (see :mod:`skqbnorm.attacks`)
    capture: a query counts when some planted item scores at least its ``k``-th
    largest score (a tie with a real item counts for the planted one, the
    attacker's side). The interval is a percentile bootstrap over the queries,
    drawn as :func:`paired_mean_change` draws them.

    Parameters
    ----------
    scores : array-like of shape (n_queries, n_gallery)
        Finite scores, higher is better, over the attacked gallery (raw
        similarities or a normaliser's).
    planted : array-like of int, shape (n_planted,)
        The planted items' column indices, without repeats (as
        :func:`skqbnorm.attacks.plant` returns them).
    k : int, default=1
        The cut-off, in ``[1, n_gallery]``.
    n_resamples : int, default=10_000
        Bootstrap resamples, ``>= 0``; 0 gives the share alone.
    confidence : float, default=0.95
        Coverage of the interval, in (0, 1).
    random_state : None, int, SeedSequence or Generator, default=None
        Seed of the resamples.

    Returns
    -------
    result : HubCapture
        ``capture``, ``interval`` (``low``, ``high``), the per-query ``captured``
        and ``to_dict()``.

    See Also
    --------
    planted_recall_change : The R@K the real items lose to the planted ones.

    Examples
    --------
    >>> from skqbnorm.metrics import hub_capture
    >>> scores = [[0.9, 0.1, 0.5], [0.2, 0.8, 0.7], [0.3, 0.2, 0.1]]
    >>> result = hub_capture(scores, planted=[2], k=1, n_resamples=0)
    >>> result.capture, result.captured
    (0.0, array([False, False, False]))
    >>> hub_capture(scores, planted=[2], k=2, n_resamples=0).capture
    0.6666666666666666
    """
    scores = check_sims(scores, "scores")
    n_queries, n_gallery = scores.shape
    planted = _check_planted(planted, n_gallery)
    k = check_int(k, "k", low=1, high=n_gallery, where=f" for scores of shape {scores.shape}")
    n_resamples = check_int(n_resamples, "n_resamples", low=0)
    confidence = _check_confidence(confidence)
    rng = _generator(random_state)
    kth = np.partition(scores, n_gallery - k, axis=1)[:, n_gallery - k]
    captured = (scores[:, planted] >= kth[:, None]).any(axis=1)
    resampled = resampled_means(captured.astype(float), n_resamples, rng)
    interval = None
    if n_resamples:
        low, high = percentile_interval(resampled, confidence)
        interval = (float(low), float(high))
    return HubCapture(float(captured.mean()), interval, captured, k, n_queries, n_resamples,
                      confidence, resampled)


def planted_recall_change(clean_scores, attacked_scores, gt, k=1, *, ties="official",
                          n_resamples=10_000, confidence=0.95, random_state=None):
    """The change of R@K (in percent) from the clean gallery to the attacked one.

    The queries' correct items are real ones, at the same indices in both
    galleries (planted items are appended after them), so the change is the recall
    that the planted items take from the real ones: 0 or negative. It is a
    :func:`paired_mean_change` of each query's hit (100 or 0), with its paired
    interval.

    Parameters
    ----------
    clean_scores : array-like of shape (n_queries, n_gallery)
        Scores over the gallery before the attack.
    attacked_scores : array-like of shape (n_queries, n_gallery + n_planted)
        Scores of the same queries over the attacked gallery, its first
        ``n_gallery`` columns the same real items.
    gt : array-like of int, shape (n_queries,)
        Each query's correct gallery index, below ``n_gallery``.
    k : int, default=1
        The cut-off of R@K, ``>= 1``.
    ties : {"official", "optimistic", "pessimistic"}, default="official"
        How ties with the correct item rank, as :func:`correct_item_ranks`.
    n_resamples : int, default=10_000
        Bootstrap resamples, ``>= 0``; 0 gives the change alone.
    confidence : float, default=0.95
        Coverage of the interval, in (0, 1).
    random_state : None, int, SeedSequence or Generator, default=None
        Seed of the resamples, drawn as :func:`paired_mean_change` draws them.

    Returns
    -------
    result : PairedMeanChange
        ``value_a`` the clean R@K, ``value_b`` the attacked one, ``change`` and
        its ``interval``.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.metrics import planted_recall_change
    >>> clean = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> attacked = np.array([[0.9, 0.1, 0.95], [0.2, 0.8, 0.5]])  # a hub takes query 0
    >>> result = planted_recall_change(clean, attacked, gt=[0, 1], n_resamples=0)
    >>> result.value_a, result.value_b, result.change
    (100.0, 50.0, -50.0)
    """
    clean, attacked = check_sims(clean_scores, "clean_scores"), check_sims(
        attacked_scores, "attacked_scores")
    if attacked.shape[0] != clean.shape[0] or attacked.shape[1] < clean.shape[1]:
        raise ValueError(
            "attacked_scores must hold clean_scores' queries and at least its gallery "
            f"columns; got clean_scores of shape {clean.shape} and attacked_scores of shape "
            f"{attacked.shape}."
        )
    k = check_int(k, "k", low=1)
    gt = np.asarray(gt)
    if gt.shape != (clean.shape[0],) or not np.issubdtype(gt.dtype, np.integer):
        raise ValueError(f"gt must hold one integer gallery index per query, shape "
                         f"({clean.shape[0]},); got shape {gt.shape}, dtype {gt.dtype}.")
    if gt.size and not (gt.min() >= 0 and gt.max() < clean.shape[1]):
        raise ValueError(f"gt must index real items, in [0, {clean.shape[1]}) for "
                         f"clean_scores of shape {clean.shape}; got [{gt.min()}, {gt.max()}].")
    hits = [100.0 * _hits(correct_item_ranks(scores, gt, ties=ties), k, ties)
            for scores in (clean, attacked)]
    return paired_mean_change(*hits, n_resamples=n_resamples, confidence=confidence,
                              random_state=random_state)


@dataclass(frozen=True, repr=False)
class HubOutliers:
    """Gallery items whose k-occurrence over a querybank is a robust outlier.

    :func:`hub_outliers` returns it; its fields are read as attributes.

    Parameters
    ----------
    flagged : ndarray of shape (n_flagged,)
        The flagged gallery indices, highest score first.
    scores : ndarray of shape (n_gallery,)
        Every item's robust z-score ``(N_k - median) / spread``.
    counts : ndarray of shape (n_gallery,)
        Every item's k-occurrence ``N_k`` over the bank.
    median, spread : float
        The median of the counts and their robust spread (the scaled median
        absolute deviation, or the scaled mean one where the former is 0).
    k : int
        The neighbourhood size of the k-occurrence.
    threshold : float
        The z-score above which an item is flagged.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.metrics import hub_outliers
    >>> bank_sims = np.eye(6)[[0, 1, 2, 3, 4] + [5] * 10]  # item 5 tops 10 of 15 rows
    >>> report = hub_outliers(bank_sims, k=1)
    >>> report.flagged, report.counts
    (array([5]), array([ 1,  1,  1,  1,  1, 10]))
    """

    flagged: np.ndarray
    scores: np.ndarray = field(compare=False)
    counts: np.ndarray = field(compare=False)
    median: float
    spread: float
    k: int
    threshold: float

    def __repr__(self):
        shown = ", ".join(map(str, self.flagged[:10])) + (", ..." if len(self.flagged) > 10
                                                          else "")
        return (f"{len(self.flagged)} of {len(self.counts)} gallery items with a bank "
                f"{self.k}-occurrence z-score above {self.threshold:g} (median {self.median:g},"
                f" spread {self.spread:.4g}): [{shown}]")


def hub_outliers(bank_sims, *, k=10, threshold=3.5):
    """Flag gallery items that a querybank's queries reach far more often than the rest.

    An item planted to capture traffic sits where queries are dense, so the bank's
    queries (of the same distribution) reach it too: its k-occurrence over the
    bank, ``N_k``, is an outlier of the gallery's. The score is a robust z-score,
    ``(N_k - median(N_k)) / (1.4826 MAD)`` (with MAD 0, as when most items are
    never reached, ``1.2533`` times the mean absolute deviation instead); an item
    is flagged when it exceeds ``threshold``. Natural hubs are flagged too: review
    the flagged items rather than drop them.

    Parameters
    ----------
    bank_sims : array-like of shape (n_bank, n_gallery)
        The querybank's similarities to the gallery (as a normaliser's fit reads
        them).
    k : int, default=10
        Neighbourhood size of the k-occurrence, in ``[1, n_gallery]``.
    threshold : float, default=3.5
        The z-score above which an item is flagged, ``>= 0``.

    Returns
    -------
    report : HubOutliers
        ``flagged`` (indices, highest score first), every item's ``scores`` and
        ``counts``, and the ``median`` and ``spread`` they were scored against.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.metrics import hub_outliers
    >>> rng = np.random.default_rng(0)
    >>> bank_sims = rng.normal(size=(500, 100))
    >>> bank_sims[:, 7] += 2.0  # an item every query comes close to
    >>> hub_outliers(bank_sims, k=5).flagged
    array([7])
    """
    bank_sims = check_sims(bank_sims, "bank_sims")
    k = check_int(k, "k", low=1, high=bank_sims.shape[1],
                  where=f" for bank_sims of shape {bank_sims.shape}")
    threshold = check_real(threshold, "threshold", low=0.0)
    counts = k_occurrence(bank_sims, k=k)
    median = float(np.median(counts))
    deviation = np.abs(counts - median)
    spread = MAD_SCALE * float(np.median(deviation)) or MEAN_AD_SCALE * float(deviation.mean())
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = np.where(deviation > 0, (counts - median) / spread, 0.0)
    flagged = np.flatnonzero(scores > threshold)
    flagged = flagged[np.argsort(-scores[flagged], kind="stable")]
    return HubOutliers(flagged, scores, counts, median, spread, k, threshold)


def _check_planted(planted, n_gallery):
    planted = np.asarray(planted)
    if (planted.ndim != 1 or planted.size == 0
            or not np.issubdtype(planted.dtype, np.integer)):
        raise ValueError(f"planted must be a non-empty 1-D array of gallery indices; got "
                         f"shape {planted.shape}, dtype {planted.dtype}.")
    if planted.min() < 0 or planted.max() >= n_gallery:
        raise ValueError(f"planted must index the gallery, in [0, {n_gallery}); got "
                         f"[{planted.min()}, {planted.max()}].")
    if len(np.unique(planted)) != len(planted):
        raise ValueError(f"planted must not repeat an index; got {len(planted)} indices, "
                         f"{len(np.unique(planted))} distinct.")
    return planted
