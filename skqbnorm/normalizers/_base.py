"""QueryBankNormalizer: the contract every querybank normaliser follows."""

from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import validate_data

from .._core import ProbeMatrix, largest_norm
from .._dask import is_dask_array
from .._validation import (
    NotBool,
    check_embeddings,
    float_dtype,
    naming,
    prepared_gallery,
)
from . import _array_api_path as array_api_path
from ._capabilities import Capabilities
from ._gallery_bank import GalleryBank, check_gallery_bank_use, reader
from ._partial_fit import (
    BankStream,
    MergeableOnly,
    ReducedBank,
    check_same_params,
    check_width,
    fixed_params,
    unchanged_on_error,
    warn_if_fitted_by_fit,
)
from ._serving import ServingMixin
from ._top_k import TopKMixin


class BankTooSmall(ValueError):
    """A querybank with fewer rows than the normaliser's ``k`` needs."""


class BankPasses(NamedTuple):
    """The querybank as a multi-pass method (``capabilities.bank_passes``) reads it.

    A normaliser class that declares ``bank_passes`` receives one in its
    ``_learn_passes(reducers, bank, gallery_bank)``; users never build one.

    Parameters
    ----------
    probe : ProbeMatrix
        The bank's rows (NumPy, memmap or dask rows, or embeddings against the
        gallery), as fit reads them.
    read : callable
        ``read(make_reducers)`` runs one more pass of fresh reducers over the bank,
        on the same streaming code as fit's first pass, and returns them.

    Examples
    --------
    >>> from skqbnorm.normalizers import BankPasses
    >>> BankPasses._fields
    ('probe', 'read')
    """

    probe: ProbeMatrix
    read: object


class QueryBankNormalizer(ServingMixin, TopKMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Base class of the querybank normalisers; not for direct use.

    Subclasses define ``_reducers(n_bank, n_gallery, dtype)``, which returns the
    streaming reductions fit needs, ``_learn(reducers)``, which stores their results
    as fitted attributes, and ``_score(sims, columns, row_state, out)``, which
    writes the normalised scores of a block of query rows restricted to the gallery
    ``columns`` (a slice, or an index array: the candidates of a vector index)
    into ``out``. Each class declares what it is in ``capabilities`` (a
    :class:`~skqbnorm.normalizers.Capabilities`), which fit, ``top_k``, the index, the
    gate and the catalogue read; nothing is detected by override. Methods whose scores
    depend on a whole row (the top-1 of DIS, the neighbourhood of CSLS, the range of
    GC) declare ``whole_rows`` and define ``_row_state(sims, columns, state)``, a
    reduction over a row's column chunks, so that :meth:`top_k` can stream the
    gallery; ``_score`` receives that state for a column chunk, and None for whole
    rows, whose state it takes itself. Methods that read the bank several times
    declare ``bank_passes`` and define ``_learn_passes(reducers, bank, gallery_bank)``
    (``bank``: a :class:`BankPasses`) instead of ``_learn``; dual-bank methods declare
    ``gallery_bank`` and define ``_learn_gallery_bank(gallery_bank)``. The serving
    protocol that :class:`~skqbnorm.index.NormalizedIndex` uses is one object,
    :func:`~skqbnorm.normalizers.index_serving`'s
    :class:`~skqbnorm.normalizers.IndexServing`, which reaches the private
    ``_index_*`` methods on the index's behalf. A non-finite similarity must
    leave a non-finite score (transform checks the scores, and the input only
    when they fail). Finite scores that overflow are computed again in float64, and
    refused with a ValueError if they still do (see ``_rescore_overflow``).

    Guarantees: finite input gives finite fitted state and finite scores, or a
    ValueError naming the parameter and the value range (probabilities beyond the
    dtype's range are clipped with a warning). The fitted state, hence every score,
    is bitwise the same for every ``working_memory``, ``n_jobs`` and dask chunking:
    sums and soft maxima are combined over a fixed binary tree of aligned groups of
    bank rows (``skqbnorm._core.ColumnTree``). Blocks therefore hold at least one
    such group (at most 16 MiB of float64), and in embedding mode the similarities
    are computed in fixed products of up to 2,048 bank rows (whose rounding is then
    BLAS's, which may depend on the number of BLAS threads each job gets).

    The fit rule, shared by every normaliser:

    - ``fit(P)``: ``P`` (M x N) is the precomputed bank-by-gallery similarity matrix;
    - ``fit(bank, gallery=G)``: ``bank`` (M x d) and ``G`` (N x d) are embeddings and
      the similarities are computed under ``metric``, block by block;
    - ``gallery_bank=`` (dual-bank normalisers only, such as
      :class:`~skqbnorm.DualInvertedSoftmax`): a
      second bank, from the gallery modality, in the querybank's form; every other
      normaliser refuses it;
    - ``y``, the second positional argument, is ignored as in every scikit-learn
      transformer (``Pipeline`` and ``GridSearchCV`` pass a 1-D target there); a 2-D
      ``y`` is refused, because it is almost surely a gallery meant for ``gallery=``.

    Parameters
    ----------
    metric : {"cosine", "dot"}, default="cosine"
        Similarity of embeddings, when fit is given a ``gallery``.
    working_memory : float, default=None
        Bound, in MiB, on one block of similarities; None means 16 MiB.
    n_jobs : int, default=None
        Number of parallel jobs over blocks (None means 1, -1 all cores). Results
        do not depend on it.

    Examples
    --------
    >>> from skqbnorm import InvertedSoftmax
    >>> from skqbnorm.normalizers import QueryBankNormalizer
    >>> issubclass(InvertedSoftmax, QueryBankNormalizer)
    True
    >>> InvertedSoftmax.capabilities.bias_form
    True
    """

    #: What the method is (see :class:`~skqbnorm.normalizers.Capabilities`).
    capabilities = Capabilities()

    _parameter_constraints: dict = {
        "metric": [StrOptions({"cosine", "dot"})],
        "working_memory": [NotBool(Real, 0, np.inf, closed="neither"), None],
        "n_jobs": [NotBool(Integral, None, None, closed="neither"), None],
    }

    def __init__(self, *, metric="cosine", working_memory=None, n_jobs=None):
        self.metric = metric
        self.working_memory = working_memory
        self.n_jobs = n_jobs

    # scikit-learn's set_output wraps only the transform a TransformerMixin subclass
    # defines itself, not one it inherits from a plain mixin: named here, it returns
    # the configured container (columns: get_feature_names_out, one per gallery item).
    transform = ServingMixin.transform

    # -- fit -----------------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, *, gallery=None, gallery_bank=None):
        """Learn per-gallery statistics from a querybank.

        Parameters
        ----------
        X : array-like of shape (n_bank, n_gallery) or (n_bank, n_dims)
            The querybank: its precomputed similarities to the gallery (rows are
            bank queries, columns gallery items; an ``np.memmap`` is read block by
            block), or, when ``gallery`` is given, the bank's embeddings. Under
            scikit-learn's ``array_api_dispatch``, torch, CuPy or array-api-strict
            arrays are read on their device, where the fitted statistics then stay
            (the normalisers whose ``capabilities.array_api`` is True; the others
            refuse them).
        y : None or array-like of shape (n_bank,)
            Ignored; present for ``Pipeline`` and ``GridSearchCV``.
        gallery : array-like of shape (n_gallery, n_dims), default=None
            Gallery embeddings. When given, ``X`` holds bank embeddings and the
            similarities are computed under ``metric``, in matrix products of up
            to 2,048 bank rows of up to 256 MiB each, beyond ``working_memory``
            (smaller products run far below BLAS speed), written into one
            buffer where the statistics keep no block (all but GC's and the
            empiric MP's sorted columns).
        gallery_bank : array-like of shape (n_gallery_bank, n_gallery or n_dims), default=None
            Samples of the gallery modality that are not in the gallery, for the
            dual-bank normalisers (others refuse it): their similarities to the
            gallery, or, when ``gallery`` is given, their embeddings.

        Returns
        -------
        self : object
            The fitted normaliser.
        """
        if array_api_path.device_inputs(X, gallery):  # array API inputs under dispatch: on their device
            return array_api_path.fit(self, X, y, gallery, gallery_bank)
        self._check_target(y)
        check_gallery_bank_use(self, gallery_bank)
        self.__dict__.pop("_partial_streams", None)  # fit starts afresh
        probe = self._probe(X, gallery)
        n_bank, n_gallery = probe.shape
        self._check_sizes(n_bank, n_gallery)
        # One reader for every bank (NumPy, memmap, dask, embeddings): the same
        # streaming core and fixed trees, hence the same numbers, however it is split.
        read = reader(probe, self.working_memory, self.n_jobs)
        reducers = read(lambda: self._reducers(n_bank, n_gallery, probe.dtype))
        bank_of_gallery = None if gallery_bank is None else GalleryBank(gallery_bank, self)
        if self.capabilities.bank_passes:
            self._learn_passes(reducers, BankPasses(probe, read), bank_of_gallery)
        else:
            self._learn(reducers)
            if self.capabilities.gallery_bank is not None:
                self._learn_gallery_bank(bank_of_gallery)
        self.n_bank_ = n_bank
        return self

    @MergeableOnly
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None, *, gallery=None, gallery_bank=None):
        """Append rows to the querybank and learn its statistics so far.

        For the normalisers whose ``capabilities.mergeable`` is True (on the others the
        attribute is absent: reading it raises a ``ValueError`` that says why). Rows
        appended in any number of calls, of any sizes (but the first call of a
        normaliser whose ``k`` counts bank rows, CSLS or NNN, needs at least ``k`` rows,
        as its ``fit`` does), give the fitted attributes of one :meth:`fit` on the
        concatenated bank: bitwise for the soft maxima, means, moments, top-k means and
        activation sets, whose reductions are keyed by absolute bank row. The first call
        sets the form of the bank (precomputed similarities, or embeddings with
        ``gallery``), its width and its dtype; later calls must match them, and take the
        gallery from the first call (``gallery`` may be omitted, or repeated unchanged).
        The parameters may not change between calls. :meth:`fit` starts afresh and keeps
        nothing to append to: a ``partial_fit`` after it starts a new bank (with a
        warning). A refused call changes nothing: the normaliser keeps the bank and the
        fitted attributes it had. Between calls the normaliser keeps the merged
        reductions (the size of its fitted statistics) and fewer than one group of bank
        rows (a reduction tree's leaf, or in embedding mode one fixed matrix product);
        each call reads its rows in one job (a dask array's by dask's tasks).

        Parameters
        ----------
        X : array-like of shape (n_rows, n_gallery) or (n_rows, n_dims)
            The next rows of the querybank, in the first call's form: similarities
            to the gallery, or embeddings (NumPy, ``np.memmap`` or dask arrays).
        y : None or array-like of shape (n_rows,)
            Ignored; present for scikit-learn's conventions.
        gallery : array-like of shape (n_gallery, n_dims), default=None
            Gallery embeddings, on the first call of embedding mode; later calls
            omit it or pass the same gallery.
        gallery_bank : array-like of shape (n_rows_gallery_bank, n_gallery or n_dims), default=None
            The next rows of the gallery bank, for the dual-bank normalisers, in
            the querybank's form.

        Returns
        -------
        self : object
            The normaliser, fitted on every row given so far.

        Examples
        --------
        >>> import numpy as np
        >>> from skqbnorm import InvertedSoftmax
        >>> bank = np.random.default_rng(0).normal(size=(300, 40))
        >>> live = InvertedSoftmax()
        >>> for rows in np.array_split(bank, 3):
        ...     live = live.partial_fit(rows)
        >>> live.n_bank_
        300
        >>> bool(np.array_equal(live.bank_soft_max_, InvertedSoftmax().fit(bank).bank_soft_max_))
        True
        """
        array_api_path.refuse_partial_fit(self, X, gallery, gallery_bank)
        self._check_target(y)
        check_gallery_bank_use(self, gallery_bank)
        with unchanged_on_error(self):
            self._append_rows(X, gallery, gallery_bank)
        return self

    def _append_rows(self, X, gallery, gallery_bank):
        """partial_fit's work: append the rows and learn the fitted attributes anew."""
        streams = getattr(self, "_partial_streams", None)
        if streams is None:
            warn_if_fitted_by_fit(self, "n_bank_")
            streams, rows = self._first_streams(X, gallery)
        else:
            check_same_params(streams["params"], fixed_params(self), type(self).__name__,
                              "the merged statistics")
            self._check_same_gallery(gallery)
            rows = self._partial_rows(X, streams["querybank"])
        self._check_bank_size(streams["querybank"].n_rows + len(rows), rows.shape)
        updated = {**streams, "querybank": streams["querybank"].appended(self, rows)}
        if gallery_bank is not None:
            updated["gallery_bank"] = self._appended_gallery_bank(gallery_bank, streams.get("gallery_bank"))
        self._learn_streams(updated)
        self._partial_streams = updated

    def _first_streams(self, X, gallery):
        """The empty streams of a first partial_fit call (the gallery set from it), and its rows."""
        rows = self._probe(X, gallery).bank
        stream = BankStream("_reducers", self._probe_dtype(rows), self._input_dtype(rows),
                            rows.shape[1], "querybank")
        return {"querybank": stream, "params": fixed_params(self)}, rows

    def _check_bank_size(self, n_bank, shape):
        """``_check_sizes`` for partial_fit: a bank too small for ``k`` is the first call's."""
        try:
            self._check_sizes(n_bank, self.n_features_in_)
        except BankTooSmall:
            raise ValueError(
                f"the first partial_fit call needs at least k={self.k} rows for "
                f"{type(self).__name__}; got X of shape {tuple(shape)}. Give the first call "
                f"at least {self.k} rows (later calls may be of any size), or lower k."
            ) from None

    def _probe_dtype(self, rows):
        """The dtype of the similarity blocks of ``rows``, as ``_probe`` sets it."""
        if self.gallery_embeddings_ is not None:
            return self.gallery_embeddings_.dtype
        return self._input_dtype(rows)

    @staticmethod
    def _input_dtype(rows, name="X (the querybank)"):
        if is_dask_array(rows):
            return np.dtype(np.float32 if rows.dtype == np.float32 else np.float64)
        return float_dtype(rows, name)

    def _check_same_gallery(self, gallery):
        if gallery is None:
            return
        fitted = self.gallery_embeddings_
        if fitted is None:
            raise ValueError(
                f"gallery (shape {np.shape(gallery)}) was not given on the first partial_fit "
                f"call: {type(self).__name__} holds precomputed similarities to "
                f"{self.n_features_in_} gallery items. Pass the next rows of similarities "
                "without gallery."
            )
        prepared = prepared_gallery(gallery, (1, fitted.shape[1]), fitted.dtype, self.metric)
        if prepared.shape != fitted.shape or not np.array_equal(prepared, fitted):
            raise ValueError(
                f"gallery (shape {np.shape(gallery)}) is not the gallery of the first "
                f"partial_fit call (shape {fitted.shape}): a querybank is merged against "
                "one gallery. Omit gallery on later calls, or fit afresh on the new gallery."
            )

    def _partial_rows(self, X, stream):
        """The rows of a partial_fit call, checked against the first call's width and dtype."""
        embeddings = self.gallery_embeddings_ is not None
        width = self.gallery_embeddings_.shape[1] if embeddings else self.n_features_in_
        shape = getattr(X, "shape", None) if is_dask_array(X) else np.shape(X)
        check_width(type(self).__name__, shape, width,
                    "embedding dimensions" if embeddings else "gallery items")
        if is_dask_array(X):
            if X.ndim != 2:
                raise ValueError(f"Expected a 2D dask array, got {X.ndim}D with shape {X.shape}.")
            rows = X
        elif embeddings:
            rows = check_embeddings(X, "querybank", dtype="numeric")
        else:
            with naming("X (the querybank)", X):
                rows = validate_data(self, X, reset=False, dtype="numeric", ensure_all_finite=False)
        dtype = self._input_dtype(rows)
        if dtype != stream.input_dtype:
            raise ValueError(
                f"X has dtype {rows.dtype} (shape {rows.shape}), read as {dtype}, but the first "
                f"partial_fit call's rows were read as {stream.input_dtype}: the merged "
                f"statistics are in that dtype. Cast X to {stream.input_dtype}."
            )
        return rows

    def _appended_gallery_bank(self, gallery_bank, stream):
        """The gallery-bank stream with the rows of ``gallery_bank`` appended."""
        probe = GalleryBank(gallery_bank, self).probe
        if stream is None:
            input_dtype = self._input_dtype(probe.bank, "gallery_bank")
            stream = BankStream("_gallery_bank_reducers", probe.dtype, input_dtype, probe.bank.shape[1],
                                "gallery_bank")
        elif self._input_dtype(probe.bank, "gallery_bank") != stream.input_dtype:
            raise ValueError(
                f"gallery_bank has dtype {probe.bank.dtype} (shape {probe.bank.shape}), but the "
                f"first gallery bank's rows were read as {stream.input_dtype}. Cast gallery_bank "
                f"to {stream.input_dtype}."
            )
        return stream.appended(self, probe.bank)

    def _learn_streams(self, streams):
        """The fitted attributes of the rows of every stream, as one fit learns them."""
        self._learn(streams["querybank"].learned_reducers(self))
        if self.capabilities.gallery_bank is not None:
            gallery_bank = streams.get("gallery_bank")
            self._learn_gallery_bank(None if gallery_bank is None else ReducedBank(self, gallery_bank))
        self.n_bank_ = streams["querybank"].n_rows

    def _partial_fit_refusal(self):
        """Why these parameters make the bank statistic unmergeable, or None (subclasses)."""

    def _array_api_refusal(self):
        """Why these parameters keep the array API path closed, or None (subclasses)."""

    def fit_transform(self, X, y=None, *, gallery=None, gallery_bank=None):
        """Fit to the querybank, then normalise the bank's own similarity rows.

        Parameters
        ----------
        X : array-like of shape (n_bank, n_gallery) or (n_bank, n_dims)
            The querybank, as in :meth:`fit`.
        y : None or array-like of shape (n_bank,), default=None
            Ignored; present for ``Pipeline`` and ``GridSearchCV``.
        gallery : array-like of shape (n_gallery, n_dims), default=None
            Gallery embeddings, as in :meth:`fit`.
        gallery_bank : array-like, default=None
            A gallery bank, for the dual-bank normalisers, as in :meth:`fit`.

        Returns
        -------
        scores : ndarray of shape (n_bank, n_gallery)
            The normalised bank similarities.
        """
        self.fit(X, y, gallery=gallery, gallery_bank=gallery_bank)
        return self.transform(X if gallery is None else self.similarities(X))

    def _check_target(self, y):
        if y is not None and np.asarray(y).ndim > 1:
            raise ValueError(
                f"y is ignored and must be None or 1-D, got an array of shape {np.asarray(y).shape}. "
                "To fit on embeddings, pass the gallery embeddings as the keyword "
                "argument: fit(bank_embeddings, gallery=gallery_embeddings)."
            )

    def _probe(self, X, gallery):
        """The querybank as a ProbeMatrix; sets the gallery (``n_features_in_``, and
        ``gallery_embeddings_`` in embedding mode)."""
        if is_dask_array(X):
            return self._dask_probe(X, gallery)
        # dtype="numeric" keeps an integer memmap as it is: blocks are cast one at a
        # time (ProbeMatrix.block), never the whole array.
        if gallery is None:
            with naming("X (the querybank)", X):
                bank = validate_data(self, X, dtype="numeric", ensure_all_finite=False)
            self.gallery_embeddings_ = None
            return ProbeMatrix(bank, dtype=float_dtype(bank, "X (the querybank)"))
        bank = check_embeddings(X, "querybank", dtype="numeric")
        gallery = self._set_gallery(gallery, bank.shape, float_dtype(bank, "querybank"))
        return ProbeMatrix(bank, gallery.T, self.metric, gallery.dtype)

    def _dask_probe(self, bank, gallery):
        """A dask querybank, read blockwise by dask tasks (see ``_gallery_bank.reader``)."""
        if bank.ndim != 2:
            raise ValueError(f"Expected a 2D dask array, got {bank.ndim}D with shape {bank.shape}.")
        dtype = np.float32 if bank.dtype == np.float32 else np.float64
        if bank.shape[0] == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape={bank.shape}) while a minimum of 1 is required.")
        if gallery is None:
            self.gallery_embeddings_ = None
            self._set_n_gallery(bank.shape[1])
            return ProbeMatrix(bank, dtype=dtype)
        # the rows meet the gallery in their common dtype, as a NumPy bank's do
        gallery_t = self._set_gallery(gallery, bank.shape, dtype).T
        return ProbeMatrix(bank, gallery_t, self.metric, gallery_t.dtype)

    def _set_gallery(self, gallery, bank_shape, bank_dtype):
        """Validate and keep the gallery embeddings; the gallery size is n_features_in_."""
        prepared = prepared_gallery(gallery, bank_shape, bank_dtype, self.metric)
        # The fitted gallery is the normaliser's own, whatever later becomes of the caller's.
        self.gallery_embeddings_ = prepared.copy() if np.may_share_memory(prepared, gallery) else prepared
        self._gallery_norm = largest_norm(self.gallery_embeddings_)  # for top_k's overflow test
        self._set_n_gallery(len(prepared))
        return self.gallery_embeddings_

    def _set_n_gallery(self, n_gallery):
        """The gallery size is n_features_in_; columns carry no names outside validate_data."""
        self.n_features_in_ = n_gallery
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _check_sizes(self, n_bank, n_gallery):
        """Hook for subclasses whose parameters bound the bank or gallery size."""

    def _check_k(self, n_bank, n_gallery, *, gallery=True, bank=False):
        """``k`` may not exceed the gallery (``gallery``) nor the querybank (``bank``)."""
        shape = f"the querybank similarities have shape ({n_bank}, {n_gallery})"
        if gallery and self.k > n_gallery:
            raise ValueError(
                f"k={self.k} is larger than the gallery: {shape}, so k must be at "
                f"most {n_gallery} (n_features = {n_gallery})."
            )
        if bank and self.k > n_bank:
            raise BankTooSmall(
                f"k={self.k} is larger than the querybank: {shape}, so k must be at "
                f"most {n_bank} (n_samples = {n_bank})."
            )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.array_api_support = self.capabilities.array_api
        return tags
