"""Paired comparison of two rankings of the same queries: changes, bootstrap intervals, McNemar."""

import numbers
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy.stats import binom
from sklearn.utils import gen_batches

from .._core import finite_mean, rows_per_chunk
from .._validation import check_int, check_option, check_real, check_sims, check_vector
from ._ranking import _average_precisions
from ._retrieval import TIES, _document_ties, _hits, correct_item_ranks

#: Elements of the resampled index matrix drawn and processed at a time.
RESAMPLE_BLOCK = 1 << 20


class QueryOutcomes(NamedTuple):
    """Every query's rank (0-based, under ``ties``), R@K hits and average precision."""

    ranks: np.ndarray
    hits: np.ndarray  # (n_ks, n_queries) bool
    average_precisions: np.ndarray


class Discordant(NamedTuple):
    """Queries one ranking retrieves within K and the other does not, and McNemar's p."""

    a_only: int
    b_only: int
    p_value: float


@dataclass(frozen=True, repr=False)
class PairedComparison:
    """The change ``b - a`` of retrieval metrics over the same queries.

    :func:`paired_comparison` returns it; its fields are read as attributes.

    Parameters
    ----------
    metrics : tuple of str
        ``"R@K"`` for every K, ``"MdR"``, ``"MnR"`` and ``"mAP"``, in this order.
    value_a, value_b : dict of str to float
        Every metric of ``scores_a`` and of ``scores_b``.
    change : dict of str to float
        ``value_b - value_a``.
    interval : dict of str to tuple of float, or None
        The percentile bootstrap interval ``(low, high)`` of every change; None
        without resamples.
    discordant : dict of str to Discordant
        For every ``"R@K"``: ``a_only`` and ``b_only``, the queries only ``scores_a``
        (only ``scores_b``) retrieves within K, and the exact McNemar ``p_value``.
    n_queries, n_resamples : int
        The number of queries and of bootstrap resamples.
    confidence : float
        The coverage of the intervals, in (0, 1).
    resampled_changes : ndarray of shape (n_resamples, n_metrics)
        Every resample's change of every metric (columns in ``metrics`` order).

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.metrics import paired_comparison
    >>> scores_a = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    >>> result = paired_comparison(scores_a, np.eye(3), np.arange(3), k=1, n_resamples=0)
    >>> result.value_a["R@1"], result.value_b["R@1"], result.interval
    (33.3..., 100.0, None)
    >>> result.to_rows()[0]["metric"]
    'R@1'
    """

    metrics: tuple
    value_a: dict
    value_b: dict
    change: dict
    interval: dict
    discordant: dict
    n_queries: int
    n_resamples: int
    confidence: float
    resampled_changes: np.ndarray = field(compare=False)

    def to_rows(self):
        """Give one plain dict per metric, for csv or json.

        Returns
        -------
        rows : list of dict
            Per metric: ``metric``, ``a``, ``b``, ``change``, ``low``, ``high``,
            ``a_only``, ``b_only`` and ``p_value``; None where a field does not apply.
        """
        rows = []
        for metric in self.metrics:
            low, high = self.interval[metric] if self.interval else (None, None)
            tested = self.discordant.get(metric, Discordant(None, None, None))
            rows.append({
                "metric": metric, "a": self.value_a[metric], "b": self.value_b[metric],
                "change": self.change[metric], "low": low, "high": high, **tested._asdict(),
            })
        return rows

    def to_dict(self):
        """Give the whole comparison as plain values, without the resamples.

        Returns
        -------
        comparison : dict
            ``n_queries``, ``n_resamples``, ``confidence`` and ``metrics`` (the
            :meth:`to_rows`); ``json.dumps`` takes it.
        """
        return {"n_queries": self.n_queries, "n_resamples": self.n_resamples,
                "confidence": self.confidence, "metrics": self.to_rows()}

    def __repr__(self):
        level = f"{self.confidence:.0%} percentile bootstrap interval"
        resampled = (f"{level}s of {self.n_resamples} resamples" if self.n_resamples
                     else "no resamples")
        header = (f"{'metric':<8}{'a':>9}{'b':>9}{'change':>9}{'interval':>22}"
                  f"{'a only':>8}{'b only':>8}{'McNemar p':>11}")
        lines = [f"Change b - a over {self.n_queries} queries; {resampled}", header]
        for row in self.to_rows():
            interval = "" if row["low"] is None else f"[{row['low']:+.3f}, {row['high']:+.3f}]"
            tested = "" if row["p_value"] is None else (
                f"{row['a_only']:>8}{row['b_only']:>8}{row['p_value']:>11.3g}")
            line = (f"{row['metric']:<8}{row['a']:>9.3f}{row['b']:>9.3f}"
                    f"{row['change']:>+9.3f}{interval:>22}{tested}")
            lines.append(line.rstrip())
        return "\n".join(lines)


@_document_ties
def paired_comparison(scores_a, scores_b, gt, *, k=(1, 5, 10), ties="official",
                      n_resamples=10_000, confidence=0.95, random_state=None):
    """Change of R@K, MdR, MnR and mAP from ``scores_a`` to ``scores_b`` on the same queries.

    Both score matrices rank the same gallery for the same queries (for instance raw
    similarities and their normalisation). Every change ``b - a`` comes with a paired
    percentile bootstrap interval: each resample draws queries with replacement and
    evaluates both matrices on the same draw, so the spread of the queries' difficulty,
    shared by both, cancels. Each R@K also has an exact McNemar test of the queries
    retrieved within K by one matrix only.

    Parameters
    ----------
    scores_a, scores_b : array-like of shape (n_queries, n_gallery)
        Finite scores, higher is better, of the same queries and gallery.
    gt : array-like of shape (n_queries,) or (n_queries, n_gallery)
        The correct gallery index per query, or a boolean (0/1) relevance matrix when
        a query has several correct items; R@K, MdR and MnR then take the rank of
        the best-scored correct item (as :func:`retrieval_metrics`), mAP all of them.
    k : int or sequence of int, default=(1, 5, 10)
        The cut-offs of R@K, each ``>= 1``, without repeats.
    TIES_DOC

        mAP breaks ties pessimistically whatever ``ties``, as
        :func:`average_precision` does.
    n_resamples : int, default=10_000
        Bootstrap resamples, ``>= 0``; 0 gives the changes and McNemar's tests
        without intervals.
    confidence : float, default=0.95
        Coverage of the intervals, in (0, 1): the ``50 (1 - confidence)`` and
        ``50 (1 + confidence)`` percentiles (``numpy.percentile``, linear) of the
        resampled changes.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds ``rng = numpy.random.default_rng(random_state)``; resample ``r`` takes
        the queries ``rng.integers(0, n_queries, size=n_queries)`` of the ``r``-th
        call, the rows of ``rng.integers(0, n_queries, size=(n_resamples,
        n_queries))``. A Generator given is advanced.

    Returns
    -------
    comparison : PairedComparison
        ``change``, ``interval`` and ``value_a``/``value_b`` per metric (R@K in
        percent, MdR and MnR 1-based, mAP in [0, 1]), the McNemar tests in
        ``discordant``, and ``to_rows()``/``to_dict()`` for csv and json.

    Notes
    -----
    MdR's change per resample is the difference of the two medians, not the median
    of the differences. McNemar's two-sided exact p-value is ``min(1, 2 P(X <=
    min(a_only, b_only)))`` for ``X ~ Binomial(a_only + b_only, 1/2)`` (1 without
    discordant queries), as ``scipy.stats.binomtest``. Resamples run in blocks of
    about a million drawn indices, so memory stays bounded for any ``n_resamples``.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.metrics import paired_comparison
    >>> rng = np.random.default_rng(0)
    >>> gt = np.arange(200)
    >>> before = rng.normal(size=(200, 200)) + 2.0 * np.eye(200)
    >>> after = before + 0.5 * np.eye(200)  # every correct item scores higher
    >>> result = paired_comparison(before, after, gt, n_resamples=2000, random_state=0)
    >>> result.change["R@1"] > 0 and result.interval["R@1"][0] > 0
    True
    >>> result.discordant["R@1"].a_only  # no query loses its hit
    0
    >>> print(result)
    Change b - a over 200 queries; 95% percentile bootstrap intervals of 2000 resamples
    metric          a        b   change              interval  a only  b only  McNemar p
    R@1        25.500   45.000  +19.500    [+14.500, +25.000]       0      39   3.64e-12
    R@5        52.000   68.500  +16.500    [+11.500, +22.000]       0      33   2.33e-10
    R@10       64.500   78.500  +14.000     [+9.500, +18.500]       0      28   7.45e-09
    MdR         5.000    2.000   -3.000      [-4.500, -2.000]
    MnR        17.225    9.065   -8.160      [-9.755, -6.665]
    mAP         0.381    0.556   +0.176      [+0.144, +0.211]

    Identical matrices change nothing:

    >>> same = paired_comparison(before, before, gt, n_resamples=0)
    >>> same.change["MnR"], same.discordant["R@5"].p_value, same.interval
    (0.0, 1.0, None)
    """
    ks = _check_ks(k)
    check_option(ties, "ties", TIES)
    n_resamples = check_int(n_resamples, "n_resamples", low=0)
    confidence = _check_confidence(confidence)
    rng = _generator(random_state)
    scores_a, scores_b = _check_pair(scores_a, scores_b)
    outcomes_a = query_outcomes(scores_a, gt, ks, ties)
    outcomes_b = query_outcomes(scores_b, gt, ks, ties)
    return compare_outcomes(outcomes_a, outcomes_b, ks, n_resamples, confidence, rng)


class IntervalEnds:
    """``low`` and ``high``: the ends of a result's ``interval`` (None without resamples)."""

    @property
    def low(self):
        """The interval's lower end (None without resamples)."""
        return None if self.interval is None else self.interval[0]

    @property
    def high(self):
        """The interval's upper end (None without resamples)."""
        return None if self.interval is None else self.interval[1]


@dataclass(frozen=True, repr=False)
class PairedMeanChange(IntervalEnds):
    """The change ``mean(b) - mean(a)`` of a per-query metric, with its paired interval.

    :func:`paired_mean_change` returns it; its fields are read as attributes.

    Parameters
    ----------
    value_a, value_b : float
        The means of ``values_a`` and ``values_b``.
    change : float
        ``value_b - value_a``, computed without overflow.
    interval : tuple of float, or None
        The percentile bootstrap interval ``(low, high)`` of the change; None
        without resamples.
    n_queries, n_resamples : int
        The number of queries and of bootstrap resamples.
    confidence : float
        The coverage of the interval, in (0, 1).
    resampled_changes : ndarray of shape (n_resamples,)
        Every resample's change.

    Examples
    --------
    >>> from skqbnorm.metrics import paired_mean_change
    >>> result = paired_mean_change([0.5, 0.5, 1.0, 0.0], [0.5, 1.0, 1.0, 0.0],
    ...                             n_resamples=0)
    >>> result.change, result.low, result.to_dict()["value_b"]
    (0.125, None, 0.625)
    """

    value_a: float
    value_b: float
    change: float
    interval: tuple
    n_queries: int
    n_resamples: int
    confidence: float
    resampled_changes: np.ndarray = field(compare=False)

    def to_dict(self):
        """Give the result as plain values, without the resamples.

        Returns
        -------
        result : dict
            ``value_a``, ``value_b``, ``change``, ``low``, ``high``, ``n_queries``,
            ``n_resamples`` and ``confidence``; ``json.dumps`` takes it.
        """
        return {"value_a": self.value_a, "value_b": self.value_b, "change": self.change,
                "low": self.low, "high": self.high, "n_queries": self.n_queries,
                "n_resamples": self.n_resamples, "confidence": self.confidence}

    def __repr__(self):
        interval = ("no resamples" if self.interval is None else
                    f"[{self.low:+.4g}, {self.high:+.4g}], {self.confidence:.0%} percentile "
                    f"bootstrap interval of {self.n_resamples} resamples")
        return (f"Change b - a of the mean over {self.n_queries} queries: {self.change:+.4g} "
                f"({interval}); a {self.value_a:.4g}, b {self.value_b:.4g}")


def paired_mean_change(values_a, values_b, *, n_resamples=10_000, confidence=0.95,
                       random_state=None):
    """Change of a per-query metric's mean from ``a`` to ``b``, with its paired interval.

    For per-query values that :func:`paired_comparison` does not compute from
    similarities: the average precision of each reranked list
    (:func:`~skqbnorm.metrics.average_precisions`), or any metric of the same queries
    under two methods. The interval is a paired percentile bootstrap: the queries
    are resampled with replacement, the same draw for ``a`` and ``b``, as
    :func:`paired_comparison` draws them (``numpy.random.default_rng(random_state)``,
    ``integers(0, n_queries, size=(n_resamples, n_queries))``, row by row).

    Parameters
    ----------
    values_a, values_b : array-like of shape (n_queries,)
        Finite per-query values of the same queries, in the same order; each
        query's difference ``values_b - values_a`` must be within float64's range.
    n_resamples : int, default=10_000
        Bootstrap resamples, >= 0; 0 gives the change alone. With the same
        ``n_resamples`` and ``random_state``, the draws are ``paired_comparison``'s.
    confidence : float, default=0.95
        Coverage of the percentile interval, in (0, 1).
    random_state : None, int, SeedSequence or Generator, default=None
        Seed of the resamples.

    Returns
    -------
    result : PairedMeanChange
        ``change`` (``mean(values_b) - mean(values_a)``, without overflow),
        ``interval`` (``low``, ``high``; None when ``n_resamples=0``), the two
        means ``value_a`` and ``value_b``, and ``to_dict()`` for json.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.metrics import paired_mean_change
    >>> before, after = np.array([0.2, 0.5, 0.4, 0.9]), np.array([0.4, 0.5, 0.6, 0.9])
    >>> result = paired_mean_change(before, after, n_resamples=2000, random_state=0)
    >>> round(result.change, 3), result.low >= 0.0, result.high <= 0.2
    (0.1, True, True)
    >>> result
    Change b - a of the mean over 4 queries: +0.1 ([+0, +0.2], 95% percentile bootstrap interval of 2000 resamples); a 0.5, b 0.6
    """
    values_a, values_b = check_vector(values_a, "values_a"), check_vector(values_b, "values_b")
    if values_a.shape != values_b.shape:
        raise ValueError(
            f"values_a and values_b must hold the same queries: values_a has shape "
            f"{values_a.shape}, values_b has shape {values_b.shape}."
        )
    n_resamples = check_int(n_resamples, "n_resamples", low=0)
    confidence = _check_confidence(confidence)
    rng = _generator(random_state)
    half_difference = values_b * 0.5 - values_a * 0.5  # exact halving; never overflows
    _check_differences(half_difference, values_a, values_b)
    change = 2 * float(finite_mean(half_difference, axis=0))
    value_a, value_b = (float(finite_mean(values, axis=0)) for values in (values_a, values_b))
    n_queries = len(half_difference)
    # each resample's mean as a sum of shares, which cannot overflow
    changes = resampled_means(half_difference, n_resamples, rng)
    largest = np.finfo(np.float64).max
    with np.errstate(over="ignore"):  # a mean within range, rounded just past it: the largest
        np.clip(2 * changes, -largest, largest, out=changes)
    interval = None
    if n_resamples:
        low, high = percentile_interval(changes, confidence)
        interval = (float(low), float(high))
    return PairedMeanChange(value_a, value_b, change, interval, n_queries, n_resamples,
                            confidence, changes)


def _check_differences(half_difference, values_a, values_b):
    """Refuse per-query differences beyond float64's range: their mean is not representable."""
    limit = np.finfo(np.float64).max / 2
    beyond = np.flatnonzero(np.abs(half_difference) > limit)
    if beyond.size:
        query = beyond[0]
        raise ValueError(
            f"values_b - values_a must be within float64's range for every query; query "
            f"{query} has values_a={values_a[query]:g} and values_b={values_b[query]:g} "
            f"({beyond.size} such queries): rescale values_a and values_b."
        )


def metric_names(ks):
    return tuple(f"R@{k}" for k in ks) + ("MdR", "MnR", "mAP")


def query_outcomes(scores, gt, ks, ties="official"):
    """The :class:`QueryOutcomes` of a checked score matrix."""
    ranks = correct_item_ranks(scores, gt, ties=ties)
    hits = np.array([_hits(ranks, k, ties) for k in ks]).reshape(len(ks), len(ranks))
    return QueryOutcomes(ranks, hits, _query_average_precisions(scores, gt, ranks, ties))


def _query_average_precisions(scores, gt, ranks, ties):
    """Every query's AP, tied items ordered pessimistically (as ``average_precision``)."""
    gt = np.asarray(gt)
    if gt.ndim == 1:  # one relevant item: AP is the reciprocal of its 1-based position
        worst = ranks if ties == "pessimistic" else correct_item_ranks(
            scores, gt, ties="pessimistic")
        return 1.0 / (worst + 1.0)
    n_queries, n_gallery = scores.shape
    relevant = gt.astype(bool)
    aps = np.empty(n_queries)
    step = rows_per_chunk(n_gallery, 8, n_buffers=12)
    for rows in gen_batches(n_queries, step):
        n_rows = rows.stop - rows.start
        query = np.repeat(np.arange(n_rows), n_gallery)
        aps[rows] = _average_precisions(scores[rows].ravel(), relevant[rows].ravel(), query,
                                        n_rows, None, "relevant")
    return aps


def compare_outcomes(a, b, ks, n_resamples, confidence, rng):
    """The :class:`PairedComparison` of the :class:`QueryOutcomes` of the same queries.

    ``rng`` (a numpy Generator) draws the resamples; it is not used when ``n_resamples`` is 0.
    """
    metrics = metric_names(ks)
    value_a, value_b = _metric_values(a, metrics), _metric_values(b, metrics)
    resampled = _resampled_changes(a, b, n_resamples, rng)
    interval = None
    if n_resamples:
        low, high = percentile_interval(resampled, confidence)
        interval = {m: (float(lo), float(hi)) for m, lo, hi in zip(metrics, low, high)}
    return PairedComparison(
        metrics=metrics, value_a=value_a, value_b=value_b,
        change={m: value_b[m] - value_a[m] for m in metrics}, interval=interval,
        discordant={m: _mcnemar(hits_a, hits_b) for m, hits_a, hits_b in zip(
            metrics, a.hits, b.hits)},
        n_queries=len(a.ranks), n_resamples=n_resamples, confidence=confidence,
        resampled_changes=resampled,
    )


def _metric_values(outcomes, metrics):
    recalls = 100.0 * outcomes.hits.mean(axis=1)
    return dict(zip(metrics, [*map(float, recalls), float(np.median(outcomes.ranks)) + 1,
                              float(np.mean(outcomes.ranks)) + 1,
                              float(np.mean(outcomes.average_precisions))]))


def _mcnemar(hits_a, hits_b):
    a_only = int(np.count_nonzero(hits_a & ~hits_b))
    b_only = int(np.count_nonzero(hits_b & ~hits_a))
    p_value = min(1.0, 2.0 * float(binom.cdf(min(a_only, b_only), a_only + b_only, 0.5)))
    return Discordant(a_only, b_only, p_value)


def _resampled_changes(a, b, n_resamples, rng):
    """Every resample's change of every metric, in :func:`metric_names` order.

    The metrics that are means (R@K, MnR, mAP) change by the mean of the drawn
    queries' differences, each summed within its resample so that the sums do not
    depend on how many resamples a block holds. MdR's medians come from sorting the
    drawn ranks, doubled to integers (ranks are multiples of 1/2): integers sort
    faster than floats.
    """
    n_queries, n_recalls = len(a.ranks), len(a.hits)
    differences = [*(100.0 * (b.hits.astype(float) - a.hits)), b.ranks - a.ranks,
                   b.average_precisions - a.average_precisions]
    keys_a, keys_b = _doubled(a.ranks), _doubled(b.ranks)
    changes = np.empty((n_resamples, n_recalls + 3))
    means = [*range(n_recalls), n_recalls + 1, n_recalls + 2]  # the columns of all but MdR
    for resamples, drawn in _draws(n_queries, n_resamples, rng):
        for column, difference in zip(means, differences):
            changes[resamples, column] = np.take(difference, drawn).sum(axis=1) / n_queries
        changes[resamples, n_recalls] = (_medians(keys_b, drawn) - _medians(keys_a, drawn)) / 2
    return changes


def resampled_means(values, n_resamples, rng):
    """The mean of ``values`` in each of ``n_resamples`` bootstrap resamples of the
    queries (drawn by :func:`_draws`), each summed from ``values / n_queries``."""
    share = values / len(values)
    means = np.empty(n_resamples)
    for resamples, drawn in _draws(len(values), n_resamples, rng):
        means[resamples] = np.take(share, drawn).sum(axis=1)
    return means


def percentile_interval(resampled, confidence):
    """``(low, high)``: the percentile interval of resampled statistics, along axis 0."""
    return np.percentile(resampled, (50 * (1 - confidence), 50 * (1 + confidence)), axis=0)


def _draws(n_queries, n_resamples, rng):
    """``(resamples, drawn)`` blocks of about ``RESAMPLE_BLOCK`` indices: row ``r`` of
    ``drawn`` holds the queries of resample ``resamples.start + r``."""
    step = max(1, RESAMPLE_BLOCK // n_queries)
    for first in range(0, n_resamples, step):
        resamples = slice(first, min(first + step, n_resamples))
        yield resamples, rng.integers(0, n_queries, size=(resamples.stop - first, n_queries))


def _doubled(ranks):
    dtype = np.int32 if 2 * ranks.max() < np.iinfo(np.int32).max else np.int64
    return np.rint(2 * ranks).astype(dtype)


def _medians(keys, drawn):
    ordered = np.sort(np.take(keys, drawn), axis=1)
    n_drawn = ordered.shape[1]
    return (ordered[:, (n_drawn - 1) // 2] + ordered[:, n_drawn // 2].astype(float)) / 2


def _check_ks(k):
    ks = (k,) if isinstance(k, numbers.Integral) and not isinstance(k, bool) else k
    try:
        ks = tuple(ks)
    except TypeError:
        raise TypeError(f"k must be an int or a sequence of ints; got k={k!r}.") from None
    if not ks:
        raise ValueError("k must name at least one cut-off; got k=().")
    ks = tuple(check_int(value, "k", low=1) for value in ks)
    if len(set(ks)) != len(ks):
        raise ValueError(f"k must not repeat a cut-off; got k={ks}.")
    return ks


def _check_confidence(confidence):
    confidence = check_real(confidence, "confidence")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got confidence={confidence}.")
    return confidence


def _generator(random_state):
    try:
        return np.random.default_rng(random_state)
    except (TypeError, ValueError):
        raise TypeError(
            "random_state must be None, an int, a numpy SeedSequence or Generator; got "
            f"random_state={random_state!r} of type {type(random_state).__name__}."
        ) from None


def _check_pair(scores_a, scores_b):
    scores_a, scores_b = check_sims(scores_a, "scores_a"), check_sims(scores_b, "scores_b")
    if scores_a.shape != scores_b.shape:
        raise ValueError(
            "scores_a and scores_b must score the same queries and gallery (one shape); "
            f"got scores_a of shape {scores_a.shape} and scores_b of shape {scores_b.shape}."
        )
    return scores_a, scores_b
