"""QueryBankGate: normalise only with a querybank that suits the queries."""

import copy
import itertools
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, TransformerMixin, _fit_context, clone
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from .._core import ProbeMatrix
from .._dask import is_dask_array
from .._validation import NotBool, float_dtype, warn_caller
from ..metrics._querybank import (
    DEPTH,
    MAX_KS,
    MAX_OUTLIER_SHARE,
    NO_NEIGHBOR_FIGURES,
    QueryBankWarning,
    RowFigures,
    _activated,
    _checked_sims,
    _gallery_bank_figures,
    querybank_diagnostics,
    report_from_rows,
    streamed_row_top1,
)
from ._base import QueryBankNormalizer
from ._bias import BiasFormMixin
from ._capabilities import Capabilities
from ._partial_fit import (
    MergeableOnly,
    PartialFitRefused,
    check_same_params,
    check_width,
    fixed_params,
    refusal,
    warn_if_fitted_by_fit,
)
from ._softmax import DynamicInvertedSoftmax


class QueryBankGate(MetaEstimatorMixin, TransformerMixin, BaseEstimator):
    """Normalise with a querybank only when it suits the queries; else keep them raw.

    At fit, the wrapped normaliser is fitted on the querybank, and
    :func:`~skqbnorm.metrics.querybank_diagnostics` compares the bank with the
    queries to serve (or a sample of them; their answers are not needed). It
    compares like with like: each query's similarity to its ``depth``-th nearest
    gallery item against each bank query's to its ``depth``-th or ``depth - 1``-th,
    whichever is nearer (a query to serve has its answer among the gallery
    items, a bank query of a training split has not), which describes the
    neighbourhood a query lands in whether or not the model finds its answer. When bank and queries are distributed differently there
    (``diagnostics_.depth_gap``: KS distance over ``max_ks`` with p < 0.01) or,
    when fitted on embeddings, when over ``max_outlier_share`` of the queries are
    farther from their nearest bank query than 95% of bank queries are from
    theirs (``diagnostics_.neighbor_gap``), the bank looks out of domain and the
    gate closes: :meth:`transform` returns the similarities unchanged, and the
    diagnostics' :class:`~skqbnorm.metrics.QueryBankWarning` says why.
    Otherwise it returns the normaliser's scores. A bank that covers little of
    the gallery (the diagnostics' other warning) does not close it. The user
    guide's :ref:`gate` section says how the defaults were chosen, over retrieval
    sets of weak and strong models.

    Because ``fit`` needs the queries to serve, scikit-learn's ``check_estimator``
    (which fits on ``X`` alone) does not apply; the wrapped normaliser passes it.
    :meth:`partial_fit` grows the bank in parts, on precomputed similarities, where
    the wrapped normaliser's ``partial_fit`` does.

    Parameters
    ----------
    normalizer : estimator, default=None
        A querybank normaliser (unfitted; it is cloned); None means
        :class:`~skqbnorm.DynamicInvertedSoftmax` at its defaults.
    depth : int, default=10
        The rank of the gallery item whose similarity is compared, at least 2
        (the gallery's last when it has fewer items).
    max_ks : float, default=0.16
        The KS distance, in (0, 1], between the bank's and the queries'
        similarities at ``depth`` above which the gate closes.
    max_outlier_share : float, default=0.85
        With embeddings, the share of queries, in (0, 1], that are
        nearest-neighbour outliers of the bank above which the gate closes.

    Attributes
    ----------
    normalizer_ : estimator
        The fitted clone of ``normalizer``.
    diagnostics_ : QueryBankDiagnostics
        The bank against the queries given to fit.
    open_ : bool
        Whether :meth:`transform` normalises (``not diagnostics_.out_of_domain``).
    n_features_in_ : int
        Number of gallery items.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import QueryBankGate
    >>> bank_sims = np.array([[0.9, 0.1, 0.2], [0.8, 0.3, 0.1]])
    >>> query_sims = np.array([[0.85, 0.5, 0.3], [0.2, 0.95, 0.1]])
    >>> gate = QueryBankGate().fit(bank_sims, queries=query_sims)
    >>> gate.open_
    True
    >>> np.allclose(gate.transform(query_sims), gate.normalizer_.transform(query_sims))
    True
    """

    _parameter_constraints: dict = {
        "normalizer": "no_validation",  # checked against the capabilities contract in fit
        "depth": [NotBool(Integral, 2, None, closed="left")],
        "max_ks": [Interval(Real, 0, 1, closed="right")],
        "max_outlier_share": [Interval(Real, 0, 1, closed="right")],
    }

    #: partial_fit needs the queries to serve (``queries=``): a wrapper that grows a
    #: bank from the rows alone (``LiveQueryBank``) cannot feed it.
    _partial_fit_needs_queries = True

    def __init__(self, normalizer=None, *, depth=DEPTH, max_ks=MAX_KS,
                 max_outlier_share=MAX_OUTLIER_SHARE):
        self.normalizer = normalizer
        self.depth = depth
        self.max_ks = max_ks
        self.max_outlier_share = max_outlier_share

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None, *, queries=None, gallery=None, gallery_bank=None,
            querybank_to_gallery_bank=None):
        """Fit the normaliser on the querybank and check the bank against the queries.

        Parameters
        ----------
        X : array-like of shape (n_bank, n_gallery) or (n_bank, n_dims)
            The querybank, as the wrapped normaliser takes it.
        y : None
            Ignored.
        queries : array-like of shape (n_queries, n_gallery) or (n_queries, n_dims)
            The queries to serve, or a sample of them, in the form of ``X``.
        gallery, gallery_bank : array-like, default=None
            As the wrapped normaliser's fit takes them.
        querybank_to_gallery_bank : array-like of shape (n_bank, n_gallery_bank), default=None
            For a normaliser whose capabilities declare this gallery-bank input
            (:class:`~skqbnorm.DualBankSinkhornNormalization` on precomputed
            similarities): the querybank's similarities to the gallery bank.

        Returns
        -------
        self : object
            The fitted gate.
        """
        if queries is None:
            raise ValueError(
                "QueryBankGate needs the queries to serve (or a sample of them) at fit, to "
                "check the querybank against them: fit(bank, queries=query_sims)."
            )
        self.__dict__.pop("_partial_state", None)  # fit starts afresh
        normalizer = self._wrapped_normalizer()
        capabilities = _capabilities_of(normalizer)
        extra = {} if gallery_bank is None else {"gallery_bank": gallery_bank}
        if querybank_to_gallery_bank is not None:
            if capabilities.gallery_bank != "querybank_to_gallery_bank":
                raise ValueError(
                    f"querybank_to_gallery_bank is for a normaliser that takes it "
                    f"(DualBankSinkhornNormalization); {type(normalizer).__name__} does not."
                )
            extra["querybank_to_gallery_bank"] = querybank_to_gallery_bank
        self.normalizer_ = clone(normalizer).fit(X, y, gallery=gallery, **extra)
        params = self.normalizer_.get_params()
        self.diagnostics_ = querybank_diagnostics(
            X, queries, gallery=gallery, depth=self.depth, max_ks=self.max_ks,
            max_outlier_share=self.max_outlier_share, metric=params.get("metric", "cosine"),
            working_memory=params.get("working_memory"),
        )
        self.open_ = not self.diagnostics_.out_of_domain
        self.n_features_in_ = self.normalizer_.n_features_in_
        return self

    @MergeableOnly
    @_fit_context(prefer_skip_nested_validation=False)
    def partial_fit(self, X, y=None, *, queries=None, gallery=None, gallery_bank=None):
        """Append rows to the querybank, and check the bank so far against the queries.

        Where the wrapped normaliser has a ``partial_fit`` (its
        ``capabilities.mergeable``; elsewhere the attribute is absent, and reading it
        raises a ``ValueError`` that says why). The rows go to the normaliser's
        ``partial_fit``; the gate keeps, per bank row, the figures its diagnostics
        read (the top-1 similarity and the similarities at ``depth`` and
        ``depth - 1``) and the bank's activation set, and computes its tests anew
        from them at each call. After any split of the bank into calls, the fitted
        attributes (``normalizer_``, ``diagnostics_``, ``open_``) equal those of one
        :meth:`fit` on the concatenated bank, bitwise.

        The bank is given as precomputed similarities to the gallery. On embeddings
        (``gallery``), the gate's nearest-neighbour test compares each bank query
        with its nearest *other* bank query, which a new row may change for any
        earlier row: it does not merge without keeping every bank embedding, so
        such a call is refused (fit the gate on the whole bank instead).

        The first call needs ``queries`` and sets the width and dtype of the bank;
        later calls must match them, and omit ``queries`` or pass the same queries.
        The parameters (the gate's and its normaliser's) may not change between
        calls. :meth:`fit` keeps nothing to append to: a ``partial_fit`` after it
        starts a new bank, with a warning. Each call issues the diagnostics'
        :class:`~skqbnorm.metrics.QueryBankWarning` as :meth:`fit` does.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_gallery)
            The next rows of the querybank: similarities to the gallery (NumPy,
            ``np.memmap`` or dask arrays).
        y : None
            Ignored.
        queries : array-like of shape (n_queries, n_gallery), default=None
            The queries to serve, or a sample of them, as similarities to the
            gallery: on the first call; later calls omit them or pass the same.
        gallery : None
            Refused: the gate grows on precomputed similarities only.
        gallery_bank : array-like of shape (n_rows_gallery_bank, n_gallery), default=None
            The next rows of the gallery bank, for a dual-bank normaliser.

        Returns
        -------
        self : object
            The gate, fitted on every row given so far.

        Examples
        --------
        >>> import numpy as np
        >>> from skqbnorm import InvertedSoftmax, QueryBankGate
        >>> rng = np.random.default_rng(0)
        >>> bank, queries = rng.normal(size=(300, 40)), rng.normal(size=(50, 40))
        >>> live = QueryBankGate(InvertedSoftmax())
        >>> for rows in np.array_split(bank, 3):
        ...     live = live.partial_fit(rows, queries=queries)
        >>> whole = QueryBankGate(InvertedSoftmax()).fit(bank, queries=queries)
        >>> live.open_, live.diagnostics_ == whole.diagnostics_
        (True, True)
        """
        if gallery is not None:
            raise PartialFitRefused(
                f"QueryBankGate does not support partial_fit on embeddings (gallery of shape "
                f"{np.shape(gallery)} given): its nearest-neighbour test compares each bank query "
                "with its nearest other bank query, which a new row may change for any earlier "
                "row, so it does not merge without keeping every bank embedding. Fit the gate on "
                "the whole querybank at once (fit(X, queries=..., gallery=...)), or grow it on "
                "the bank's similarities to the gallery (partial_fit(bank_sims, queries=query_sims))."
            )
        state = getattr(self, "_partial_state", None)
        if state is None:
            warn_if_fitted_by_fit(self, "diagnostics_")
            normalizer = self._wrapped_normalizer()
            state = _GateBank.first(self, normalizer, X, queries).appended(X)
            fitted = clone(normalizer).partial_fit(X, y, gallery_bank=gallery_bank)
        else:
            state.check_same_params(self)
            if queries is not None:
                state.check_same_queries(queries)
            # The gate's figures first: a call the normaliser refuses changes nothing.
            state = state.appended(X)
            fitted = self.normalizer_.partial_fit(X, y, gallery_bank=gallery_bank)
        self.normalizer_, self._partial_state = fitted, state
        self.diagnostics_ = state.diagnostics(self.max_ks, self.max_outlier_share)
        for message in self.diagnostics_.warnings:
            warn_caller(message, QueryBankWarning)
        self.open_ = not self.diagnostics_.out_of_domain
        self.n_features_in_ = self.normalizer_.n_features_in_
        return self

    def transform(self, X):
        """The normaliser's scores when the gate is open, else a copy of ``X``.

        Either way ``X`` is checked as the normaliser checks it, and a dask array
        stays lazy.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_gallery)
            Query similarities to the fitted gallery.

        Returns
        -------
        scores : ndarray of shape (n_queries, n_gallery)
            In the dtype of ``X`` (float32 stays float32).
        """
        return self._serving().transform(X)

    def top_k(self, X=None, *, queries=None, chunks=None, k=10, return_scores=True):
        """Find the ``k`` best gallery items per query, without the full score matrix.

        By the normaliser when the gate is open, else by the raw similarities
        (ties to the lowest gallery index), served as the normaliser's
        :meth:`~skqbnorm.InvertedSoftmax.top_k` serves it, in blocks within its
        ``working_memory``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_gallery), default=None
            Query similarities to the fitted gallery.
        queries : array-like of shape (n_queries, n_dims), default=None
            Query embeddings, when the gate was fitted with ``gallery=``.
        chunks : iterable of array-like, or callable, default=None
            Query similarities one gallery shard at a time, as the normaliser's
            ``top_k`` takes them.
        k : int, default=10
            Number of gallery items per query, at most n_gallery.
        return_scores : bool, default=True
            Whether to return the scores too.

        Returns
        -------
        indices : ndarray of shape (n_queries, k)
            Gallery indices, best first. Alone when ``return_scores=False``.
        scores : ndarray of shape (n_queries, k)
            Their scores: the normaliser's, or the raw similarities.
        """
        return self._serving().top_k(X, queries=queries, chunks=chunks, k=k,
                                     return_scores=return_scores)

    def similarities(self, queries):
        """Compute the similarities of query embeddings to the fitted gallery.

        Under the wrapped normaliser's metric.

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_dims)
            Query embeddings, when the gate was fitted with ``gallery=``.

        Returns
        -------
        sims : ndarray of shape (n_queries, n_gallery)
            Ready for :meth:`transform`.
        """
        check_is_fitted(self)
        return self.normalizer_.similarities(queries)

    def get_feature_names_out(self, input_features=None):
        """One output name per gallery item, as the wrapped normaliser names them.

        ``set_output`` names the columns of :meth:`transform` with them.

        Parameters
        ----------
        input_features : array-like of str, default=None
            The gallery items' names; None: those seen at fit, else ``x0``, ``x1``, ...

        Returns
        -------
        names : ndarray of str of shape (n_gallery,)
            The output feature names.
        """
        check_is_fitted(self)
        return self.normalizer_.get_feature_names_out(input_features)

    def _index_serving(self):
        """The index's protocol (see ``index_serving``) of what serves the queries: the
        wrapped normaliser when the gate is open, else the raw similarities."""
        return self._serving()._index_serving()

    def _partial_fit_refusal(self):
        """Why ``partial_fit`` is absent: the wrapped normaliser's own refusal, or None."""
        normalizer = self._wrapped_normalizer()
        if not isinstance(getattr(type(normalizer), "capabilities", None), Capabilities) or isinstance(
                normalizer, type):
            return f"its normalizer={normalizer!r} is not a querybank normaliser"
        reason = refusal(normalizer)
        if reason is None:
            return None
        return f"its normalizer {type(normalizer).__name__} has no partial_fit ({reason})"

    def _wrapped_normalizer(self):
        """The normaliser, unfitted, that the gate fits and serves with when open:
        ``normalizer``, or the DynamicInvertedSoftmax at its defaults for None. An
        adaptive attack (``skqbnorm.attacks.adaptive_hubs``) models it."""
        return DynamicInvertedSoftmax() if self.normalizer is None else self.normalizer

    def _serving(self):
        """The fitted normaliser when the gate is open, else raw similarities served
        through the same checks, blocks and ``top_k``."""
        check_is_fitted(self)
        return self.normalizer_ if self.open_ else _Unnormalized.like(self.normalizer_)


def _capabilities_of(normalizer):
    """The declared capabilities of a querybank normaliser, or a ValueError naming it."""
    capabilities = getattr(type(normalizer), "capabilities", None)
    if not isinstance(capabilities, Capabilities) or isinstance(normalizer, type):
        raise ValueError(  # noqa: TRY004 - a bad parameter value, as scikit-learn refuses them
            "QueryBankGate wraps a querybank normaliser (an instance of a class that "
            "declares its capabilities, such as DynamicInvertedSoftmax()); got "
            f"normalizer={normalizer!r}."
        )
    return capabilities


class _Unnormalized(BiasFormMixin, QueryBankNormalizer):
    """Raw similarities as scores: what a closed gate serves.

    Made from a fitted normaliser (:meth:`like`), whose gallery, sizes and block
    settings it takes; it has no statistics of its own and never reads a bank.
    """

    capabilities = Capabilities(bias_form=True, index="bias")

    @classmethod
    def like(cls, normalizer):
        params = normalizer.get_params()
        raw = cls(metric=params.get("metric", "cosine"), working_memory=params.get("working_memory"),
                  n_jobs=params.get("n_jobs"))
        for name in ("gallery_embeddings_", "n_features_in_", "n_bank_", "feature_names_in_"):
            if hasattr(normalizer, name):
                setattr(raw, name, getattr(normalizer, name))
        return raw

    def _gallery_bias(self):
        return np.zeros(self.n_features_in_)

    def _score(self, sims, columns, row_state, out):
        out[...] = sims


class _GateBank:
    """What the gate's diagnostics read of a growing bank of similarities.

    Per bank row: its top-1 similarity and its similarities at the compared depths
    (``depth - 1`` and ``depth``), appended call by call; the bank's activation set
    (the union of the rows' top-1 items); and the same figures of the queries,
    computed once. The diagnostics' tests are recomputed from these at each call,
    as ``querybank_diagnostics`` computes them from the whole bank.
    """

    def __init__(self, params, queries, *, n_gallery, bank_dtype, dtype, depth, metric,
                 working_memory):
        self.params, self.n_gallery, self.depth = params, n_gallery, depth
        self.bank_dtype, self.dtype = bank_dtype, dtype
        self.metric, self.working_memory = metric, working_memory
        self.bank_depths = tuple(sorted({max(depth - 1, 1), depth}))
        self.query_top1, self.query_item, self.query_deep = self._query_figures(queries)
        self.bank_top1 = np.empty(0, dtype=dtype)
        self.bank_deep = np.empty((0, len(self.bank_depths)), dtype=dtype)
        self.activated = np.zeros(n_gallery, dtype=bool)

    @classmethod
    def first(cls, gate, normalizer, X, queries):
        """The empty bank of a first call: its queries, width and dtypes, from ``X``."""
        if queries is None:
            raise ValueError(
                "QueryBankGate needs the queries to serve (or a sample of them) at its first "
                "partial_fit call, to check the querybank against them: "
                "partial_fit(bank_rows, queries=query_sims)."
            )
        _capabilities_of(normalizer)
        queries = _checked_sims(queries, "queries")
        width = _width_of(X)
        if width != queries.shape[1]:
            raise ValueError(
                f"bank and queries must have the same number of gallery items (columns of "
                f"similarities): X has shape {tuple(np.shape(X))}, queries have shape "
                f"{queries.shape}."
            )
        bank_dtype = float_dtype(X if is_dask_array(X) else np.asarray(X[:0]), "X (the querybank)")
        params = normalizer.get_params()
        return cls(
            _params_of(gate), queries, n_gallery=width, bank_dtype=bank_dtype,
            dtype=np.result_type(bank_dtype, float_dtype(queries, "queries")),
            depth=min(gate.depth, width), metric=params.get("metric", "cosine"),
            working_memory=params.get("working_memory"),
        )

    def appended(self, X):
        """A new bank holding this one's figures, then those of the rows ``X``."""
        _width_of(X)
        check_width("QueryBankGate", X.shape if is_dask_array(X) else np.shape(X), self.n_gallery,
                    "gallery items")
        grown = copy.copy(self)
        top1, deep, activated = [self.bank_top1], [self.bank_deep], self.activated.copy()
        for block in _numpy_blocks(X):
            values, _, at_depths = streamed_row_top1(
                ProbeMatrix(block, None, self.metric, self.dtype, "querybank"),
                self.working_memory, self.bank_depths)
            top1.append(values)
            deep.append(at_depths)
            activated |= _activated(ProbeMatrix(block, None, self.metric, self.bank_dtype, "querybank"),
                                    1, self.working_memory)
        grown.bank_top1, grown.bank_deep = np.concatenate(top1), np.concatenate(deep)
        grown.activated = activated
        return grown

    def diagnostics(self, max_ks, max_outlier_share):
        """The diagnostics of the bank so far, as ``querybank_diagnostics`` reports them."""
        rows = RowFigures(self.bank_top1, self.bank_deep, self.bank_depths, self.query_top1,
                          self.query_item, self.query_deep)
        no_gallery_bank = _gallery_bank_figures(self.activated, None, self.query_item)
        return report_from_rows(rows, self.activated, n_gallery=self.n_gallery, k=1,
                                depth=self.depth, gallery_bank=no_gallery_bank,
                                neighbors=NO_NEIGHBOR_FIGURES, max_ks=max_ks,
                                max_outlier_share=max_outlier_share)

    def check_same_params(self, gate):
        check_same_params(self.params, _params_of(gate), "QueryBankGate", "the gate's figures")

    def check_same_queries(self, queries):
        queries = _checked_sims(queries, "queries")
        same = queries.shape == (len(self.query_top1), self.n_gallery) and all(
            np.array_equal(mine, theirs, equal_nan=True)
            for mine, theirs in zip(self._query_figures(queries),
                                    (self.query_top1, self.query_item, self.query_deep)))
        if not same:
            raise ValueError(
                f"queries (shape {queries.shape}) are not the queries of the first partial_fit "
                f"call ({len(self.query_top1)} queries to {self.n_gallery} gallery items): the "
                "gate checks a growing bank against one set of queries. Omit queries on later "
                "calls, or fit a new QueryBankGate."
            )

    def _query_figures(self, queries):
        probe = ProbeMatrix(queries, None, self.metric, self.dtype, "queries")
        return streamed_row_top1(probe, self.working_memory, (self.depth,))


def _params_of(gate):
    """The parameters that fix a gate's merged figures: its own and its normaliser's."""
    normalizer = gate._wrapped_normalizer()
    params = {name: getattr(gate, name) for name in ("depth", "max_ks", "max_outlier_share")}
    params["normalizer"] = type(normalizer)
    params.update(fixed_params(normalizer, prefix="normalizer__"))
    return params


def _width_of(X):
    shape = X.shape if is_dask_array(X) else np.shape(X)
    if len(shape) != 2:
        raise ValueError(
            f"X (the querybank) must be a 2D array of similarities to the gallery; got shape "
            f"{tuple(shape)}."
        )
    return shape[1]


def _numpy_blocks(X):
    """The rows of ``X`` as checked NumPy arrays: a dask array one row chunk at a time."""
    if not is_dask_array(X):
        yield _checked_sims(X, "X (the querybank)")
        return
    bounds = np.cumsum((0, *X.chunks[0]))
    for start, stop in itertools.pairwise(bounds):
        if stop > start:
            yield _checked_sims(X[start:stop].compute(), "X (the querybank)")
