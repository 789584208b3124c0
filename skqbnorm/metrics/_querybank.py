"""Querybank diagnostics: does a bank cover, and resemble, the queries it will normalise?"""

import math
from dataclasses import asdict, dataclass, replace
from typing import NamedTuple

import numpy as np
from scipy.stats import ks_2samp, wasserstein_distance
from sklearn.utils.validation import check_array

from .._core import ProbeMatrix, RowTopKUnion, prepare_embeddings, reduce_bank, row_top1
from .._validation import (
    check_embeddings,
    check_int,
    check_option,
    check_real,
    float_dtype,
    naming,
    prepared_gallery,
    warn_caller,
)

# The defaults of the warnings and of QueryBankGate; the user guide's querybank page
# (the gate's section) says how they were chosen.
MIN_DIS_SHARE = 0.5
# The rank of the gallery item whose similarity the domain test compares: deep enough
# that a query's own answer (which a test query has in the gallery and a bank query has
# not) does not decide it.
DEPTH = 10
MAX_KS = 0.16
# ... and only when the KS test rejects equal distributions at this level (small banks
# or query sets differ by chance).
KS_ALPHA = 0.01
# A query is an outlier when its nearest bank query is less similar than the bank's own
# NN_QUANTILE-quantile of nearest-neighbour similarity (5% of bank queries are, by
# construction).
NN_QUANTILE = 0.05
MAX_OUTLIER_SHARE = 0.85
# Bank rows whose nearest other bank row is searched for the reference distribution.
MAX_REFERENCE_ROWS = 4096


class QueryBankWarning(UserWarning):
    """A querybank looks out of domain for the queries, or covers little of the gallery.

    :func:`querybank_diagnostics` issues it; the messages are also in the result's
    ``warnings``.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from skqbnorm.metrics import QueryBankWarning, querybank_diagnostics
    >>> bank_sims = np.array([[0.9, 0.1, 0.2], [0.8, 0.3, 0.1]])
    >>> query_sims = np.array([[0.2, 0.85, 0.3], [0.1, 0.2, 0.95]])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     report = querybank_diagnostics(bank_sims, query_sims)
    >>> any(issubclass(w.category, QueryBankWarning) for w in caught), report.dis_share
    (True, 0.0)
    """


@dataclass(frozen=True)
class QueryBankDiagnostics:
    """Figures of :func:`querybank_diagnostics`; ``str()`` prints a report.

    Shares are fractions in [0, 1]; similarity figures are in the input's units.
    The nearest-neighbour figures and the gallery-bank figures are None when
    they could not be computed (precomputed similarities; no gallery bank).
    :func:`querybank_diagnostics` makes it; its fields are read as attributes.

    Parameters
    ----------
    n_bank, n_queries, n_gallery : int
        The number of bank queries, of queries and of gallery items.
    k : int
        Each bank query activates its top ``k`` gallery items.
    gallery_coverage : float
        The share of the gallery that the bank activates.
    activation_diversity : float
        The activated items over the most the bank could activate,
        ``min(k * n_bank, n_gallery)``.
    dis_share : float
        The share of queries whose top-1 is activated: those DIS normalises.
    gallery_bank_coverage : float or None
        The share of the gallery that the gallery bank activates.
    dual_dis_share : float or None
        The share of queries whose top-1 either bank activates.
    bank_top1_median, query_top1_median : float
        The median top-1 similarity of the bank queries and of the queries.
    top1_ks, top1_ks_pvalue : float
        The two-sample Kolmogorov-Smirnov distance between those top-1
        similarities, and its p-value.
    top1_wasserstein : float
        The Wasserstein distance between those top-1 similarities.
    depth : int
        The rank at which the queries' similarities are compared.
    bank_depth : int
        The rank (``depth`` or ``depth - 1``) of the bank queries' similarities
        compared with them: the nearer in KS distance.
    bank_depth_median, query_depth_median : float
        The median similarity at those ranks, of the bank queries and of the queries.
    depth_ks, depth_ks_pvalue : float
        Their Kolmogorov-Smirnov distance and its p-value.
    query_bank_nn_median, bank_nn_median : float or None
        The median similarity of a query to its nearest bank query, and of a bank
        query to its nearest other bank query (embedding mode).
    nn_outlier_share : float or None
        The share of queries less similar to their nearest bank query than the
        bank's own 5% quantile (embedding mode).
    max_ks, max_outlier_share : float
        The thresholds of :attr:`depth_gap` and :attr:`neighbor_gap`.
    warnings : tuple of str
        The messages of the warnings, issued or not.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.metrics import querybank_diagnostics
    >>> bank_sims = np.array([[0.9, 0.1, 0.2], [0.8, 0.3, 0.1]])
    >>> query_sims = np.array([[0.2, 0.85, 0.3], [0.95, 0.1, 0.2]])
    >>> report = querybank_diagnostics(bank_sims, query_sims, warn=False)
    >>> report.n_bank, report.dis_share, report.covers_little
    (2, 0.5, False)
    """

    n_bank: int
    n_queries: int
    n_gallery: int
    k: int
    gallery_coverage: float
    activation_diversity: float
    dis_share: float
    gallery_bank_coverage: float | None
    dual_dis_share: float | None
    bank_top1_median: float
    query_top1_median: float
    top1_ks: float
    top1_ks_pvalue: float
    top1_wasserstein: float
    depth: int
    bank_depth: int
    bank_depth_median: float
    query_depth_median: float
    depth_ks: float
    depth_ks_pvalue: float
    query_bank_nn_median: float | None
    bank_nn_median: float | None
    nn_outlier_share: float | None
    max_ks: float
    max_outlier_share: float
    warnings: tuple

    @property
    def covers_little(self):
        """Whether DIS would normalise under half of the queries."""
        return self.dis_share < MIN_DIS_SHARE

    @property
    def depth_gap(self):
        """Whether the similarities at ``depth`` differ beyond ``max_ks``.

        The queries' similarities at rank ``depth`` and the bank's at rank
        ``bank_depth``, with a KS test p-value under 0.01.
        """
        return self.depth_ks > self.max_ks and self.depth_ks_pvalue < KS_ALPHA

    @property
    def neighbor_gap(self):
        """Whether over ``max_outlier_share`` of the queries are outliers of the bank.

        A query is a nearest-neighbour outlier when it is less similar to its
        nearest bank query than the bank's own 5% quantile.
        """
        return (self.nn_outlier_share is not None
                and self.nn_outlier_share > self.max_outlier_share)

    @property
    def out_of_domain(self):
        """Whether the bank looks out of domain for the queries (either gap)."""
        return self.depth_gap or self.neighbor_gap

    def to_dict(self):
        """Give the figures and verdicts as a dict, ready for json.

        Returns
        -------
        figures : dict
            Every field (``warnings`` as a list), ``covers_little`` and
            ``out_of_domain``.
        """
        figures = asdict(self)
        figures["warnings"] = list(self.warnings)
        figures.update(covers_little=self.covers_little, out_of_domain=self.out_of_domain)
        return figures

    def __str__(self):
        title = (f"Querybank diagnostics: {self.n_bank} bank queries, {self.n_queries} "
                 f"queries, {self.n_gallery} gallery items, k={self.k}")
        activated = round(self.gallery_coverage * self.n_gallery)
        coverage = (f"  gallery activated (top-{self.k} of each bank query): "
                    f"{self.gallery_coverage:.1%} ({activated} of {self.n_gallery} items; "
                    f"{self.activation_diversity:.1%} of the most possible)")
        lines = [title, coverage, f"  queries DIS would normalise: {self.dis_share:.1%}"]
        if self.gallery_bank_coverage is not None:
            lines += [
                f"  gallery activated by the gallery bank: {self.gallery_bank_coverage:.1%}",
                f"  queries dynamic DBNorm would normalise: {self.dual_dis_share:.1%}",
            ]
        lines.append(
            f"  top-1 similarity, median: bank {self.bank_top1_median:.3f}, queries "
            f"{self.query_top1_median:.3f}; KS distance {self.top1_ks:.3f} "
            f"(p={self.top1_ks_pvalue:.2g}), Wasserstein {self.top1_wasserstein:.3f}"
        )
        lines.append(
            f"  similarity of the {_ordinal(self.depth)} nearest item (the bank's "
            f"{_ordinal(self.bank_depth)}), median: bank {self.bank_depth_median:.3f}, "
            f"queries {self.query_depth_median:.3f}; KS distance {self.depth_ks:.3f} "
            f"(p={self.depth_ks_pvalue:.2g})"
        )
        if self.nn_outlier_share is not None:
            lines.append(
                f"  nearest bank query's similarity, median: queries "
                f"{self.query_bank_nn_median:.3f}, bank queries {self.bank_nn_median:.3f}; "
                f"queries beyond the bank's {NN_QUANTILE:.0%} quantile: "
                f"{self.nn_outlier_share:.1%}"
            )
        lines += [f"  warning: {message}" for message in self.warnings] or ["  no warning"]
        return "\n".join(lines)


def querybank_diagnostics(bank, queries, *, gallery=None, gallery_bank=None, k=1,
                          depth=DEPTH, max_ks=MAX_KS, max_outlier_share=MAX_OUTLIER_SHARE,
                          metric="cosine", working_memory=None, warn=True):
    """How well a querybank covers the gallery, and how close it is to the queries.

    A querybank normaliser learns per-gallery statistics from the bank and applies
    them to new queries, so it helps when the bank resembles those queries and
    retrieves the same gallery items. This reports:

    - *coverage*: the gallery activation set of
      :class:`~skqbnorm.DynamicInvertedSoftmax` (the items some bank query ranks
      among its top ``k``), its share of the gallery, that count over the most a
      bank of this size could activate (``min(k * n_bank, n_gallery)``; low when
      bank queries pile onto a few hubs), and the share of queries DIS would
      normalise (those whose top-1 is activated); with ``gallery_bank``, the same
      for the gallery bank and the share of queries
      :class:`~skqbnorm.DualDynamicInvertedSoftmax` would normalise in at least
      one factor;
    - *domain gap*, comparing like with like: the two-sample Kolmogorov-Smirnov
      distance between the queries' similarities to their ``depth``-th nearest
      gallery item and the bank queries' to their ``depth``-th or ``depth - 1``-th,
      whichever is nearer (``bank_depth``). A query to serve has its answer among
      the gallery items; a bank query of a training split has not (one item
      fewer above its neighbourhood), one of served queries has. Their top-1
      similarities differ whenever the model is good and the bank lacks the
      answers; ten items down, both describe the neighbourhood a query lands in.
      The top-1 figures are reported beside it. In embedding mode, each query's similarity to its
      nearest bank query is compared with the bank's own nearest-neighbour
      similarities (each bank query's nearest other bank query, for up to 4,096
      evenly spaced bank queries): the share of queries less similar to the bank
      than its 5% quantile (about 5% for queries drawn like the bank).

    A :class:`QueryBankWarning` with the figures is issued when DIS would
    normalise fewer than half of the queries (the bank covers little), or when
    the KS distance at ``depth`` exceeds ``max_ks`` (with a KS test p-value under
    0.01, so that small samples do not warn by chance) or over
    ``max_outlier_share`` of the queries are nearest-neighbour outliers (the bank
    looks out of domain). The user guide's :ref:`gate` section says how the
    defaults were chosen, over retrieval sets of weak and strong models.

    Everything streams in row blocks within ``working_memory``.

    Parameters
    ----------
    bank : array-like of shape (n_bank, n_gallery) or (n_bank, n_dims)
        The querybank's similarities to the gallery or, when ``gallery`` is given,
        its embeddings (the normalisers' fit rule).
    queries : array-like of shape (n_queries, n_gallery) or (n_queries, n_dims)
        The queries to normalise, in the same form as ``bank``.
    gallery : array-like of shape (n_gallery, n_dims), default=None
        Gallery embeddings; when given, ``bank``, ``queries`` and ``gallery_bank``
        are embeddings and similarities are computed under ``metric``.
    gallery_bank : array-like of shape (n_gallery_bank, n_gallery or n_dims), default=None
        A gallery bank, as DBNorm takes it, in the form of ``bank``.
    k : int, default=1
        Each bank query activates its top ``k`` gallery items, as DIS's ``k``.
    depth : int, default=10
        The domain test compares each query's similarity to its ``depth``-th
        nearest gallery item with each bank query's to its ``depth``-th or
        ``depth - 1``-th; at least 2 (the gallery's size when it has fewer items).
    max_ks : float, default=0.16
        The KS distance at ``depth``, in (0, 1], above which the bank looks out of
        domain (:attr:`QueryBankDiagnostics.depth_gap`).
    max_outlier_share : float, default=0.85
        The share of nearest-neighbour outliers among the queries, in (0, 1], above
        which the bank looks out of domain (embedding mode only).
    metric : {"cosine", "dot"}, default="cosine"
        Similarity in embedding mode.
    working_memory : float, default=None
        Bound, in MiB, on one block; None means 16 MiB.
    warn : bool, default=True
        Whether to issue :class:`QueryBankWarning` (the messages are in the
        result's ``warnings`` either way).

    Returns
    -------
    diagnostics : QueryBankDiagnostics
        The figures; ``str()`` gives a report and ``to_dict()`` a dict.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.metrics import querybank_diagnostics
    >>> bank_sims = np.array([[0.9, 0.1, 0.2], [0.8, 0.3, 0.1]])
    >>> query_sims = np.array([[0.2, 0.85, 0.3], [0.95, 0.1, 0.2]])
    >>> report = querybank_diagnostics(bank_sims, query_sims, warn=False)
    >>> report.gallery_coverage, report.dis_share, report.top1_ks
    (0.333..., 0.5, 0.5)
    >>> print(report)
    Querybank diagnostics: 2 bank queries, 2 queries, 3 gallery items, k=1
      gallery activated (top-1 of each bank query): 33.3% (1 of 3 items; 50.0% of ...)
      queries DIS would normalise: 50.0%
      top-1 similarity, median: bank 0.850, queries 0.900; KS distance 0.500 (p=1), ...
      no warning
    >>> report.to_dict()["dis_share"]
    0.5

    On the bundled data, the far-domain bank (user-interface messages) warns:

    >>> import warnings
    >>> from skqbnorm.datasets import load_wordnet_revdict
    >>> data = load_wordnet_revdict()
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     report = querybank_diagnostics(data.far_bank_embeddings, data.query_embeddings,
    ...                                    gallery=data.gallery_embeddings)
    >>> [str(warning.message)[:30] for warning in caught]
    ['The querybank covers little of', 'The querybank looks out of dom']
    >>> report.dis_share, report.top1_ks, report.nn_outlier_share
    (0.3145, 0.6145, 0.8615)
    """
    if not isinstance(warn, (bool, np.bool_)):
        raise TypeError(f"warn must be a bool, got {warn!r}.")
    k = check_int(k, "k", 1)
    depth = check_int(depth, "depth", 2)
    max_ks, max_outlier_share = (_check_share(value, name) for value, name in (
        (max_ks, "max_ks"), (max_outlier_share, "max_outlier_share")))
    check_option(metric, "metric", ("cosine", "dot"))
    if working_memory is not None and check_real(working_memory, "working_memory") <= 0:
        raise ValueError(f"working_memory must be > 0 (MiB) or None; got {working_memory}.")
    bank, queries = _checked_pair(bank, queries, gallery)
    gallery_t = None if gallery is None else prepared_gallery(
        gallery, bank.shape, float_dtype(bank, "bank"), metric, "bank").T
    n_gallery = bank.shape[1] if gallery is None else gallery_t.shape[1]
    check_int(k, "k", 1, n_gallery, where=f" (at most the {n_gallery} gallery items)")
    bank_dtype = float_dtype(bank, "bank") if gallery is None else gallery_t.dtype
    activated = _activated(ProbeMatrix(bank, gallery_t, metric, bank_dtype, "bank"), k,
                           working_memory)
    gallery_bank_activated = None if gallery_bank is None else _activated(
        _gallery_bank_probe(gallery_bank, gallery_t, n_gallery, metric), k, working_memory)
    dtype = _dtype(bank, queries, gallery)
    depth = min(depth, n_gallery)
    bank_depths = tuple(sorted({max(depth - 1, 1), depth}))
    bank_top1, _, bank_deep = streamed_row_top1(
        ProbeMatrix(bank, gallery_t, metric, dtype, "bank"), working_memory, bank_depths)
    query_top1, query_item, query_deep = streamed_row_top1(
        ProbeMatrix(queries, gallery_t, metric, dtype, "queries"), working_memory, (depth,))
    report = report_from_rows(
        RowFigures(bank_top1, bank_deep, bank_depths, query_top1, query_item, query_deep),
        activated, n_gallery=n_gallery, k=k, depth=depth,
        gallery_bank=_gallery_bank_figures(activated, gallery_bank_activated, query_item),
        neighbors=_neighbor_figures(bank, queries, gallery, metric, dtype, working_memory),
        max_ks=max_ks, max_outlier_share=max_outlier_share)
    if warn:
        for message in report.warnings:
            warn_caller(message, QueryBankWarning)
    return report


class RowFigures(NamedTuple):
    """What the diagnostics read of each bank row and each query, row by row.

    ``bank_top1`` and ``query_top1`` are the rows' top-1 similarities, ``query_item``
    each query's top-1 item, and ``bank_deep`` / ``query_deep`` the similarities at
    ``bank_depths`` / at ``depth`` (one column per depth). Each row's figures depend on
    that row alone, so those of a growing bank are a concatenation.
    """

    bank_top1: np.ndarray
    bank_deep: np.ndarray
    bank_depths: tuple
    query_top1: np.ndarray
    query_item: np.ndarray
    query_deep: np.ndarray


def report_from_rows(rows, activated, *, n_gallery, k, depth, gallery_bank, neighbors, max_ks,
                     max_outlier_share):
    """The :class:`QueryBankDiagnostics` of a bank from its :class:`RowFigures`, its
    activation set and the figures that read more than rows (the gallery bank's, the
    nearest-neighbour test's), with its warnings."""
    n_bank = len(rows.bank_top1)
    figures = {
        "n_bank": n_bank, "n_queries": len(rows.query_top1), "n_gallery": n_gallery, "k": k,
        "gallery_coverage": float(activated.mean()),
        "activation_diversity": float(activated.sum() / min(k * n_bank, n_gallery)),
        "dis_share": float(activated[rows.query_item].mean()),
        **gallery_bank,
        "bank_top1_median": _scale_free(np.median, rows.bank_top1),
        "query_top1_median": _scale_free(np.median, rows.query_top1),
        **_ks_figures(rows.bank_top1, rows.query_top1, "top1"),
        "top1_wasserstein": _scale_free(wasserstein_distance, rows.bank_top1, rows.query_top1,
                                        name="the Wasserstein distance of their top-1 similarities"),
        "depth": depth,
        **_depth_figures(rows.bank_deep, rows.query_deep[:, 0], rows.bank_depths),
        **neighbors,
        "max_ks": max_ks, "max_outlier_share": max_outlier_share,
    }
    report = QueryBankDiagnostics(**figures, warnings=())
    return replace(report, warnings=tuple(_warnings(report)))


def _checked_pair(bank, queries, gallery):
    """Validated bank and queries, of matching widths (gallery size, or dimension)."""
    if gallery is None:
        checked = [_checked_sims(array, name) for array, name in ((bank, "bank"),
                                                                  (queries, "queries"))]
        width = "gallery items (columns of similarities)"
    else:
        checked = [check_embeddings(array, name, dtype="numeric")
                   for array, name in ((bank, "bank"), (queries, "queries"))]
        width = "embedding dimensions"
    if checked[0].shape[1] != checked[1].shape[1]:
        raise ValueError(
            f"bank and queries must have the same number of {width}: bank has shape "
            f"{checked[0].shape}, queries have shape {checked[1].shape}."
        )
    return checked


def _checked_sims(array, name):
    with naming(name, array):
        array = check_array(array, dtype="numeric", ensure_all_finite=False, input_name=name)
    float_dtype(array, name)
    return array


def _dtype(bank, queries, gallery):
    arrays = (bank, queries) if gallery is None else (bank, queries, np.asarray(gallery))
    return np.result_type(*(float_dtype(array, "input") for array in arrays))


def _gallery_bank_probe(gallery_bank, gallery_t, n_gallery, metric):
    """The gallery bank's similarities to the gallery, in the bank's form, checked."""
    if gallery_t is None:
        sims = _checked_sims(gallery_bank, "gallery_bank")
        width, what = n_gallery, "gallery items (columns of similarities)"
    else:
        sims = check_embeddings(gallery_bank, "gallery_bank")
        width, what = gallery_t.shape[0], "embedding dimensions"
    if sims.shape[1] != width:
        raise ValueError(
            f"gallery_bank has shape {sims.shape}, but the gallery has {n_gallery} items: "
            f"gallery_bank must have {width} {what}, as bank has."
        )
    if gallery_t is None:
        return ProbeMatrix(sims, dtype=float_dtype(sims, "gallery_bank"), name="gallery_bank")
    return ProbeMatrix(sims, gallery_t, metric, gallery_t.dtype, name="gallery_bank")


def _activated(probe, k, working_memory):
    """The activation set of DIS: the gallery items among some bank row's top ``k``."""
    n_gallery = probe.shape[1]
    return reduce_bank(probe, lambda: [RowTopKUnion(n_gallery, k)], working_memory)[0].mask


def _check_share(value, name):
    value = check_real(value, name)
    if not 0 < value <= 1:
        raise ValueError(f"{name} must be in (0, 1]; got {value!r}.")
    return float(value)


def _ks_figures(bank_values, query_values, prefix):
    test = ks_2samp(bank_values, query_values)
    return {f"{prefix}_ks": float(test.statistic), f"{prefix}_ks_pvalue": float(test.pvalue)}


def _depth_figures(bank_deep, query_deep, bank_depths):
    """The KS test of the queries' similarities at ``depth`` against the bank's column
    (of ``bank_depths``) nearest to them; ties to the shallower."""
    tests = [ks_2samp(column, query_deep) for column in bank_deep.T]
    nearest = min(range(len(tests)), key=lambda i: tests[i].statistic)
    return {"bank_depth": bank_depths[nearest],
            "bank_depth_median": _scale_free(np.median, bank_deep[:, nearest]),
            "query_depth_median": _scale_free(np.median, query_deep),
            "depth_ks": float(tests[nearest].statistic),
            "depth_ks_pvalue": float(tests[nearest].pvalue)}


def _scale_free(statistic, *samples, name=None):
    """``statistic(*samples)`` as a float, for a statistic that scales with its samples
    (a median, a quantile, a distance): computed on the samples divided by a power of two
    near their largest magnitude, exactly, so that no sum or difference of similarities
    near float64's limit overflows. A figure beyond float64 itself (only a distance can
    be) is a ValueError naming ``name``."""
    largest = max(float(np.abs(sample).max()) for sample in samples)
    scale = math.ldexp(1.0, math.frexp(largest)[1] - 1) if largest > 0 else 1.0
    figure = float(statistic(*(sample / scale for sample in samples))) * scale
    if not math.isfinite(figure):
        raise ValueError(
            f"bank and queries are too far apart for float64: {name} exceeds its largest "
            f"value ({np.finfo(np.float64).max:.3g}); rescale the similarities.")
    return figure


def _ordinal(n):
    suffix = "th" if 10 <= n % 100 < 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _gallery_bank_figures(activated, gallery_bank_activated, query_item):
    if gallery_bank_activated is None:
        return {"gallery_bank_coverage": None, "dual_dis_share": None}
    either = activated[query_item] | gallery_bank_activated[query_item]
    return {"gallery_bank_coverage": float(gallery_bank_activated.mean()),
            "dual_dis_share": float(either.mean())}


def streamed_row_top1(probe, working_memory=None, depths=None):
    """Each row's largest value and its column (the lowest among ties), streamed;
    with ``depths``, each row's ``d``-th largest value for every ``d`` of them too,
    one column each."""
    values = np.empty(probe.shape[0], dtype=probe.dtype)
    columns = np.empty(probe.shape[0], dtype=np.intp)
    if depths is not None:
        deep = np.empty((probe.shape[0], len(depths)), dtype=probe.dtype)
        at = [probe.shape[1] - depth for depth in depths]
    for rows, block in probe.blocks(working_memory, n_buffers=2):
        values[rows], columns[rows] = row_top1(block)
        if depths is not None:
            deep[rows] = np.partition(block, at, axis=1)[:, at]
    return (values, columns) if depths is None else (values, columns, deep)


def nearest_bank_similarity(bank, others=None, *, metric="cosine", working_memory=None):
    """Similarity of each of ``others`` to its nearest bank embedding.

    Without ``others``: of each of up to 4,096 evenly spaced bank embeddings to
    its nearest *other* bank embedding (the bank's own distribution).
    """
    dtype = np.result_type(bank.dtype, np.float32 if others is None else others.dtype)
    bank_t = prepare_embeddings(np.asarray(bank, dtype=dtype), metric).T
    if others is not None:
        probe = ProbeMatrix(others, bank_t, metric, dtype, "queries")
        return streamed_row_top1(probe, working_memory)[0]
    chosen = np.unique(np.linspace(0, len(bank) - 1, min(len(bank), MAX_REFERENCE_ROWS)).astype(int))
    nearest = np.empty(len(chosen), dtype=dtype)
    for rows, block in ProbeMatrix(bank[chosen], bank_t, metric, dtype, "bank").blocks(
            working_memory, n_buffers=2):
        block[np.arange(len(block)), chosen[rows]] = -np.inf  # not its own neighbour
        nearest[rows] = block.max(axis=1)
    return nearest


#: The nearest-neighbour figures of a bank given as similarities (no embeddings to compare).
NO_NEIGHBOR_FIGURES = {"query_bank_nn_median": None, "bank_nn_median": None, "nn_outlier_share": None}


def _neighbor_figures(bank, queries, gallery, metric, dtype, working_memory):
    if gallery is None or len(bank) < 2:
        return dict(NO_NEIGHBOR_FIGURES)
    bank, queries = bank.astype(dtype, copy=False), queries.astype(dtype, copy=False)
    reference = nearest_bank_similarity(bank, metric=metric, working_memory=working_memory)
    nearest = nearest_bank_similarity(bank, queries, metric=metric, working_memory=working_memory)
    floor = _scale_free(lambda values: np.quantile(values, NN_QUANTILE), reference)
    return {"query_bank_nn_median": _scale_free(np.median, nearest),
            "bank_nn_median": _scale_free(np.median, reference),
            "nn_outlier_share": float((nearest < floor).mean())}


def _warnings(report):
    messages = []
    if report.covers_little:
        messages.append(
            f"The querybank covers little of what these queries retrieve: DIS would "
            f"normalise {report.dis_share:.1%} of them (under {MIN_DIS_SHARE:.0%}); the "
            f"bank activates {report.gallery_coverage:.1%} of the gallery "
            f"({round(report.gallery_coverage * report.n_gallery)} of {report.n_gallery} "
            f"items; its {report.n_bank} queries could activate up to "
            f"{min(report.k * report.n_bank, report.n_gallery)}). Normalisers fitted on it "
            f"change few rankings or, like IS, penalise only the items it retrieves; use a "
            f"larger bank of queries like these."
        )
    gaps = []
    if report.depth_gap:
        gaps.append(f"the KS distance between the queries' similarities to their "
                    f"{_ordinal(report.depth)} nearest gallery item and the bank's to their "
                    f"{_ordinal(report.bank_depth)} is "
                    f"{report.depth_ks:.3f} (over {report.max_ks}, "
                    f"p={report.depth_ks_pvalue:.2g}; medians {report.bank_depth_median:.3f} "
                    f"and {report.query_depth_median:.3f})")
    if report.neighbor_gap:
        gaps.append(f"{report.nn_outlier_share:.1%} of the queries are less similar to their "
                    f"nearest bank query than {1 - NN_QUANTILE:.0%} of bank queries are to "
                    f"theirs (over {report.max_outlier_share:.0%})")
    if gaps:
        messages.append(
            "The querybank looks out of domain for these queries: " + "; ".join(gaps)
            + ". Normalisers fitted on it may lower R@1; build the bank from queries "
            "like these (e.g. a training split)."
        )
    return messages
