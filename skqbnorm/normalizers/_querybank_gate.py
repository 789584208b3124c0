"""QueryBankGate: normalise only with a querybank that suits the queries."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, TransformerMixin, _fit_context, clone
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from .._validation import NotBool
from ..metrics._querybank import DEPTH, MAX_KS, MAX_OUTLIER_SHARE, querybank_diagnostics
from ._base import QueryBankNormalizer
from ._bias import BiasFormMixin
from ._capabilities import Capabilities
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
