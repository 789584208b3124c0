"""QueryBankNormaliser: the contract every querybank normaliser follows."""

from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils import gen_batches
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._stats import ProbeMatrix, check_finite_block, prepare_embeddings, reduce_bank, rows_per_chunk

FLOAT_DTYPES = (np.float64, np.float32)


class QueryBankNormaliser(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Base class of the querybank normalisers; not for direct use.

    Subclasses define ``_reducers(n_bank, n_gallery, dtype)``, which returns the
    streaming reductions fit needs, ``_learn(reducers)``, which stores their results
    as fitted attributes, and ``_normalise(sims, out)``, which writes the normalised
    scores of a block of query similarity rows into ``out``. A non-finite
    similarity must leave a non-finite score (transform checks the scores, and the
    input only when they fail).

    The fit rule, shared by every normaliser:

    - ``fit(P)``: ``P`` (M x N) is the precomputed bank-by-gallery similarity matrix;
    - ``fit(bank, gallery=G)``: ``bank`` (M x d) and ``G`` (N x d) are embeddings and
      the similarities are computed under ``metric``, block by block;
    - ``y``, the second positional argument, is ignored as in every scikit-learn
      transformer (``Pipeline`` and ``GridSearchCV`` pass a 1-D target there); a 2-D
      ``y`` is refused, because it is almost surely a gallery meant for ``gallery=``.
    """

    _parameter_constraints: dict = {
        "metric": [StrOptions({"cosine", "dot"})],
        "working_memory": [Interval(Real, 0, None, closed="neither"), None],
    }

    def __init__(self, *, metric="cosine", working_memory=None):
        self.metric = metric
        self.working_memory = working_memory

    # -- fit -----------------------------------------------------------------------

    def fit(self, X, y=None, *, gallery=None):
        """Learn per-gallery statistics from a querybank.

        Parameters
        ----------
        X : array-like of shape (n_bank, n_gallery) or (n_bank, n_dims)
            The querybank: its precomputed similarities to the gallery (rows are
            bank queries, columns gallery items; an ``np.memmap`` is read block by
            block), or, when ``gallery`` is given, the bank's embeddings.
        y : None or array-like of shape (n_bank,)
            Ignored; present for ``Pipeline`` and ``GridSearchCV``.
        gallery : array-like of shape (n_gallery, n_dims), default=None
            Gallery embeddings. When given, ``X`` holds bank embeddings and the
            similarities are computed under ``metric``.

        Returns
        -------
        self : object
            The fitted normaliser.
        """
        self._validate_params()
        self._check_target(y)
        probe = self._probe(X, gallery)
        n_bank, n_gallery = probe.shape
        self._check_sizes(n_bank, n_gallery)
        reducers = self._reducers(n_bank, n_gallery, probe.dtype)
        reduce_bank(probe, reducers, self.working_memory)
        self._learn(reducers)
        self.n_bank_ = n_bank
        return self

    def fit_transform(self, X, y=None, *, gallery=None):
        """Fit to the querybank, then normalise the bank's own similarity rows.

        Parameters
        ----------
        X, y, gallery
            As in :meth:`fit`.

        Returns
        -------
        scores : ndarray of shape (n_bank, n_gallery)
            The normalised bank similarities.
        """
        self.fit(X, y, gallery=gallery)
        return self.transform(X if gallery is None else self.similarities(X))

    def _check_target(self, y):
        if y is not None and np.asarray(y).ndim > 1:
            raise ValueError(
                f"y is ignored and must be None or 1-D, got an array of shape {np.asarray(y).shape}. "
                "To fit on embeddings, pass the gallery embeddings as the keyword "
                "argument: fit(bank_embeddings, gallery=gallery_embeddings)."
            )

    def _probe(self, X, gallery):
        if gallery is None:
            bank = validate_data(
                self, X, dtype=FLOAT_DTYPES, ensure_all_finite=False
            )
            self.gallery_embeddings_ = None
            return ProbeMatrix(bank, dtype=bank.dtype)
        bank = check_array(X, dtype=FLOAT_DTYPES, input_name="querybank")
        gallery = check_array(gallery, dtype=FLOAT_DTYPES, input_name="gallery")
        if bank.shape[1] != gallery.shape[1]:
            raise ValueError(
                "The querybank and gallery embeddings must have the same dimension: "
                f"querybank has shape {bank.shape}, gallery has shape {gallery.shape}."
            )
        dtype = np.result_type(bank, gallery)
        self.gallery_embeddings_ = prepare_embeddings(gallery.astype(dtype, copy=False), self.metric)
        self.n_features_in_ = gallery.shape[0]
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return ProbeMatrix(bank, self.gallery_embeddings_.T, self.metric, dtype)

    def _check_sizes(self, n_bank, n_gallery):
        """Hook for subclasses whose parameters bound the bank or gallery size."""

    # -- transform -----------------------------------------------------------------

    def transform(self, X):
        """Normalise query-by-gallery similarities.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_gallery)
            Similarities of new queries to the fitted gallery, one row per query.
            In embedding mode, :meth:`similarities` computes them.

        Returns
        -------
        scores : ndarray of shape (n_queries, n_gallery)
            Normalised scores, higher is better, in the dtype of ``X`` (float32
            stays float32). Only each row's ranking is meaningful across methods.
        """
        check_is_fitted(self)
        sims = self._check_query_sims(X)
        out = np.empty_like(sims)
        step = rows_per_chunk(sims.shape[1], sims.dtype.itemsize, self.working_memory, 16)
        for rows in gen_batches(sims.shape[0], step):
            # Finite input gives finite scores (bar an overflowing probability), so the
            # scores, still in cache, are tested first and the input only if they fail.
            with np.errstate(invalid="ignore"):
                self._normalise(sims[rows], out[rows])
            if not np.isfinite(out[rows].sum()):
                check_finite_block(sims[rows], rows, name="X")
        return out

    def _check_query_sims(self, X):
        shape = getattr(X, "shape", None)
        if shape is not None and len(shape) == 2 and shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input: the query similarities "
                f"(shape {tuple(shape)}) need one column per fitted gallery item."
            )
        return validate_data(self, X, reset=False, dtype=FLOAT_DTYPES, ensure_all_finite=False)

    def similarities(self, queries):
        """Similarities of query embeddings to the fitted gallery, under ``metric``.

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_dims)
            Query embeddings, of the fitted dimension.

        Returns
        -------
        sims : ndarray of shape (n_queries, n_gallery)
            Ready for :meth:`transform`.
        """
        check_is_fitted(self)
        if self.gallery_embeddings_ is None:
            raise ValueError(
                f"{type(self).__name__} was fitted on precomputed similarities, so it "
                "holds no gallery embeddings; fit it with gallery=... to use similarities()."
            )
        queries = check_array(queries, dtype=FLOAT_DTYPES, input_name="queries")
        if queries.shape[1] != self.gallery_embeddings_.shape[1]:
            raise ValueError(
                f"queries have shape {queries.shape} but the fitted gallery embeddings "
                f"have {self.gallery_embeddings_.shape[1]} dimensions."
            )
        queries = prepare_embeddings(queries, self.metric)
        return queries @ self.gallery_embeddings_.T.astype(queries.dtype, copy=False)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
