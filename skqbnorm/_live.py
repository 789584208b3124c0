"""A querybank that follows the traffic: the queries a service answered, folded in."""

from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context, clone
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.validation import check_is_fitted

from ._core import merge_top_k, prepare_embeddings
from ._validation import NotBool, check_embeddings, check_sims


class LiveQueryBank(MetaEstimatorMixin, BaseEstimator):
    """Serve queries with a normaliser whose querybank is the queries served so far.

    Each call of :meth:`top_k` or :meth:`transform` first answers its queries with
    the bank as it stands, then appends their rows to the bank: a query is never
    normalised by itself, and the next call sees it. The service may start from a
    training bank (``fit(X)``) or from none (``fit()``), in either input form:
    query-by-gallery similarities, or embeddings with ``gallery=``. While the bank
    holds fewer than ``min_bank_rows`` rows the queries are answered raw (the
    similarities unchanged).

    The bank grows by the normaliser's ``partial_fit``, so only the normalisers
    whose bank statistic merges are accepted (``capabilities.mergeable``: IS, DIS,
    CSLS, NNN, Centering, z-norm, Gaussian mutual proximity, DSL and the dual-bank
    inverted softmaxes); the others are refused by name, as is a
    :class:`~skqbnorm.QueryBankGate`, whose ``partial_fit`` needs the queries to
    serve alongside the bank rows. After any number of
    calls, ``normalizer_`` holds the attributes of one ``fit`` on the bank rows so
    far, bitwise where that normaliser's ``partial_fit`` is.

    ``max_bank_rows=M`` bounds the bank to the last ``M`` rows, exactly: the
    wrapper keeps those rows (``M`` similarity rows, or ``M`` embeddings) and,
    whenever a call pushes rows out, fits a fresh normaliser on the window, which
    costs one ``fit`` on ``M`` rows per such call (serve in batches to share it).
    Removing rows from the merged reductions instead is not exact (the top-k sets
    of CSLS, NNN and DIS cannot give back a row once it has been merged away), and
    no decay is offered: an exponentially weighted top-k mean or activation set is
    not the statistic of any bank.

    Parameters
    ----------
    normalizer : estimator
        An unfitted querybank normaliser whose ``capabilities.mergeable`` is True,
        e.g. :class:`~skqbnorm.InvertedSoftmax` or :class:`~skqbnorm.CSLS`. It is
        cloned, never changed.
    max_bank_rows : int or None, default=None
        Keep only the last ``max_bank_rows`` bank rows (a sliding window, refitted
        when it slides); None keeps every row.
    min_bank_rows : int or None, default=None
        Answer raw until the bank holds this many rows. None: the normaliser's
        ``k`` when it has one (CSLS and NNN need ``k`` bank rows, DIS's activation
        set is empty below it), else 1.

    Attributes
    ----------
    normalizer_ : estimator or None
        The normaliser fitted on the current bank; None while the queries are
        answered raw.
    n_bank_ : int
        The rows the bank holds now (the window's, under ``max_bank_rows``).
    n_served_ : int
        The queries answered since :meth:`fit`.

    See Also
    --------
    skqbnorm.InvertedSoftmax.partial_fit : The appending fit that the bank grows by.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import CSLS, LiveQueryBank
    >>> rng = np.random.default_rng(0)
    >>> gallery = rng.normal(size=(50, 16))
    >>> live = LiveQueryBank(CSLS(k=5), max_bank_rows=100).fit(gallery=gallery)
    >>> first = live.top_k(queries=rng.normal(size=(3, 16)), k=2, return_scores=False)
    >>> live.normalizer_ is None, live.n_bank_  # 3 rows: answered raw, then kept
    (True, 3)
    >>> for _ in range(40):
    ...     found = live.top_k(queries=rng.normal(size=(4, 16)), k=2, return_scores=False)
    >>> live.n_served_, live.n_bank_  # the last 100 queries are the bank
    (163, 100)
    """

    _parameter_constraints: dict = {
        "normalizer": [HasMethods(["fit", "transform", "top_k"])],
        "max_bank_rows": [NotBool(Integral, 1, None, closed="left"), None],
        "min_bank_rows": [NotBool(Integral, 1, None, closed="left"), None],
    }

    def __init__(self, normalizer, *, max_bank_rows=None, min_bank_rows=None):
        self.normalizer = normalizer
        self.max_bank_rows = max_bank_rows
        self.min_bank_rows = min_bank_rows

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X=None, y=None, *, gallery=None, gallery_bank=None):
        """Start the service, from the training bank ``X`` or from no bank.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_gallery) or (n_rows, n_dims), default=None
            The starting bank: similarities to the gallery, or embeddings with
            ``gallery``. None starts from an empty bank. Under ``max_bank_rows``
            only its last rows are kept.
        y : None
            Ignored; present for scikit-learn's conventions.
        gallery : array-like of shape (n_gallery, n_dims), default=None
            Gallery embeddings: the bank and the served queries are then
            embeddings, searched with ``top_k(queries=...)``. None: similarities.
        gallery_bank : array-like, default=None
            The gallery bank of a dual-bank normaliser, as its ``fit`` takes it; it
            stays fixed while the querybank follows the traffic.

        Returns
        -------
        self : object
            The service, ready to answer.
        """
        check_mergeable(self.normalizer)
        if y is not None:
            raise ValueError(f"LiveQueryBank.fit takes no target; got y of shape {np.shape(y)}.")
        self._gallery = None if gallery is None else np.array(
            check_embeddings(gallery, "gallery"), copy=True)
        self._gallery_bank = None if gallery_bank is None else np.array(gallery_bank, copy=True)
        self._min_rows = self._minimum_rows()
        if self.max_bank_rows is not None and self.max_bank_rows < self._min_rows:
            raise ValueError(
                f"max_bank_rows={self.max_bank_rows} is smaller than the {self._min_rows} bank "
                "rows the normaliser needs (min_bank_rows, by default its k): the window "
                "would never be used."
            )
        self._kept = None  # the raw rows not yet fitted, or the whole window when bounded
        self._dtype = None
        self.normalizer_ = None
        self.n_bank_ = 0
        self.n_served_ = 0
        if X is not None:
            self._fold_in(self._bank_rows(X, "X"))
        return self

    def transform(self, X):
        """Normalise query similarities with the bank so far, then add them to it.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_gallery)
            Similarities of the served queries to the gallery (the similarity form;
            with ``gallery=`` at fit, use ``top_k(queries=...)``).

        Returns
        -------
        scores : ndarray of shape (n_queries, n_gallery)
            The normalised scores; the raw similarities while the bank holds fewer
            than ``min_bank_rows`` rows.
        """
        rows = self._served_rows(X, None)
        scores = rows.copy() if self.normalizer_ is None else self.normalizer_.transform(rows)
        self._served(rows)
        return scores

    def top_k(self, X=None, *, queries=None, k=10, return_scores=True):
        """Find each query's ``k`` best gallery items with the bank so far, then add them to it.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_gallery), default=None
            Similarities of the served queries to the gallery (the similarity form).
        queries : array-like of shape (n_queries, n_dims), default=None
            Embeddings of the served queries (with ``gallery=`` at fit), in place of
            ``X``.
        k : int, default=10
            How many items per query, at most the gallery size.
        return_scores : bool, default=True
            Whether to return the scores beside the indices.

        Returns
        -------
        indices : ndarray of shape (n_queries, k)
            Gallery indices, best first (ties to the lowest index). Alone when
            ``return_scores=False``.
        scores : ndarray of shape (n_queries, k)
            Their normalised scores; raw similarities while the bank holds fewer
            than ``min_bank_rows`` rows.
        """
        rows = self._served_rows(X, queries)
        if self.normalizer_ is None:
            found = raw_top_k(self._raw_similarities(rows), k, return_scores)
        elif self._gallery is None:
            found = self.normalizer_.top_k(rows, k=k, return_scores=return_scores)
        else:
            found = self.normalizer_.top_k(queries=rows, k=k, return_scores=return_scores)
        self._served(rows)
        return found

    def similarities(self, queries):
        """Compute query embeddings' raw similarities to the gallery; the bank is unchanged.

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_dims)
            Query embeddings, of the gallery's dimension.

        Returns
        -------
        sims : ndarray of shape (n_queries, n_gallery)
            Under the normaliser's ``metric``.
        """
        check_is_fitted(self)
        self._check_form(None, queries)
        if self.normalizer_ is not None:
            return self.normalizer_.similarities(queries)
        return self._raw_similarities(self._query_embeddings(queries))

    # -- the bank ------------------------------------------------------------------

    def _minimum_rows(self):
        if self.min_bank_rows is not None:
            return self.min_bank_rows
        k = getattr(self.normalizer, "k", None)
        return k if isinstance(k, Integral) and not isinstance(k, bool) and k >= 1 else 1

    def _served(self, rows):
        self.n_served_ += len(rows)
        self._fold_in(rows)

    def _fold_in(self, rows):
        """Append ``rows`` (checked, owned) to the bank and refit what depends on it."""
        if self.max_bank_rows is None:
            self._grow(rows)
        else:
            self._slide(rows)

    def _grow(self, rows):
        if self.normalizer_ is not None:
            self.normalizer_.partial_fit(rows)
        else:
            self._kept = rows if self._kept is None else np.concatenate([self._kept, rows])
            if len(self._kept) >= self._min_rows:
                self.normalizer_ = self._fitted_on(self._kept)
                self._kept = None
        self.n_bank_ += len(rows)

    def _slide(self, rows):
        window = rows if self._kept is None else np.concatenate([self._kept, rows])
        slid = len(window) > self.max_bank_rows
        if slid:
            window = window[-self.max_bank_rows :].copy()
        if len(window) >= self._min_rows:
            if slid or self.normalizer_ is None:
                self.normalizer_ = self._fitted_on(window)
            else:
                self.normalizer_.partial_fit(rows)
        self._kept, self.n_bank_ = window, len(window)

    def _fitted_on(self, rows):
        """A fresh normaliser, fitted on ``rows`` as the first of its appended parts."""
        extra = {} if self._gallery_bank is None else {"gallery_bank": self._gallery_bank}
        return clone(self.normalizer).partial_fit(rows, gallery=self._gallery, **extra)

    # -- input ---------------------------------------------------------------------

    def _bank_rows(self, X, name):
        """``X`` as bank rows: checked, of the bank's width and dtype, and a copy."""
        if self._gallery is not None:
            rows = self._query_embeddings(X, name)
        else:
            rows = check_sims(X, name)
            width = self._width()
            if width is not None and rows.shape[1] != width:
                raise ValueError(
                    f"{name} has shape {rows.shape} but the bank's similarity rows have "
                    f"{width} columns (one per gallery item)."
                )
        if self._dtype is None:
            self._dtype = rows.dtype
        elif rows.dtype != self._dtype and not np.can_cast(rows.dtype, self._dtype, "safe"):
            raise ValueError(
                f"{name} has dtype {rows.dtype} (shape {rows.shape}) but the bank's rows "
                f"are {self._dtype}: serve {self._dtype} rows, or start the bank in "
                f"{rows.dtype}."
            )
        return np.array(rows, dtype=self._dtype, copy=True)

    def _query_embeddings(self, X, name="queries"):
        rows = check_embeddings(X, name)
        if rows.shape[1] != self._gallery.shape[1]:
            raise ValueError(
                f"{name} has shape {rows.shape} but the gallery embeddings have shape "
                f"{self._gallery.shape}: their dimensions must match."
            )
        return rows

    def _width(self):
        if self.normalizer_ is not None:
            return self.normalizer_.n_features_in_
        return None if self._kept is None else self._kept.shape[1]

    def _check_form(self, X, queries):
        embedding = self._gallery is not None
        if (X is None) == (queries is None):
            raise ValueError("Pass exactly one of X (query similarities) and queries "
                             "(query embeddings).")
        if embedding and X is not None:
            raise ValueError(
                f"X of shape {np.shape(X)} given, but this LiveQueryBank was fitted with "
                f"gallery= of shape {self._gallery.shape}: its bank holds embeddings, so "
                "serve query embeddings with top_k(queries=...)."
            )
        if not embedding and queries is not None:
            raise ValueError(
                f"queries of shape {np.shape(queries)} given, but this LiveQueryBank was "
                "fitted without gallery=: its bank holds similarities, so serve query "
                "similarities (X)."
            )

    def _served_rows(self, X, queries):
        check_is_fitted(self)
        self._check_form(X, queries)
        return self._bank_rows(X if queries is None else queries,
                               "X" if queries is None else "queries")

    def _raw_similarities(self, rows):
        if self._gallery is None:
            return rows
        metric = self.normalizer.get_params().get("metric", "cosine")
        dtype = np.result_type(rows.dtype, self._gallery.dtype)
        return (prepare_embeddings(rows.astype(dtype), metric)
                @ prepare_embeddings(self._gallery.astype(dtype), metric).T)


def check_mergeable(normalizer):
    """Refuse, by name and with the reason, a normaliser whose bank cannot grow."""
    try:
        normalizer.partial_fit  # noqa: B018 -- reading it raises the normaliser's refusal
    except AttributeError as error:
        raise ValueError(
            f"normalizer={type(normalizer).__name__}(...) cannot follow the traffic: a live "
            f"querybank grows by partial_fit. {error}"
        ) from None
    if getattr(normalizer, "_partial_fit_needs_queries", False):
        raise ValueError(
            f"normalizer={type(normalizer).__name__}(...) cannot follow the traffic: its "
            "partial_fit needs the queries to serve, to check the bank against them, and a "
            "live querybank has no such queries apart from its bank (the queries it serves "
            "become the bank). Give LiveQueryBank the normaliser itself, and check a bank "
            "against its queries with QueryBankGate(...).fit(bank, queries=...) or "
            "skqbnorm.metrics.querybank_diagnostics."
        )


def raw_top_k(sims, k, return_scores):
    """The ``k`` largest entries of each row, ties to the lowest index, as ``top_k`` gives."""
    n_gallery = sims.shape[1]
    if isinstance(k, bool) or not (isinstance(k, Integral) and 1 <= k <= n_gallery):
        raise ValueError(
            f"k must be an integer in [1, {n_gallery}] (the gallery size); got k={k!r} "
            f"for similarities of shape {sims.shape}."
        )
    indices, scores = merge_top_k(None, sims, 0, k)
    return (indices, scores) if return_scores else indices
