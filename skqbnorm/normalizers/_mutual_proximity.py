"""Querybank z-norm and Mutual Proximity in querybank form."""

import numpy as np
from scipy.special import log_ndtr
from sklearn.utils._param_validation import StrOptions

from .._core import ColumnMoments, RowMoments
from .._core._array_api import device, max_float
from .._ranks import ColumnRanks, SortedColumns, SortedRows
from . import _array_api_path as device_path
from ._base import QueryBankNormalizer
from ._capabilities import Capabilities


def standard_scale(std):
    """The standard deviations to divide by: a zero one (a constant) is taken as 1."""
    return np.where(std > 0, std, 1.0)


def learn_bank_moments(normalizer, moments):
    """Set ``bank_mean_``, ``bank_std_`` and the scale divided by from a ColumnMoments."""
    normalizer.bank_mean_, normalizer.bank_std_ = moments.result()
    normalizer._bank_scale = standard_scale(normalizer.bank_std_)


def standardised(sims, mean, scale, dtype):
    """``(sims - mean) / scale`` in ``dtype``, halved first so that no difference overflows.

    Halving is exact for normal floats, and keeps ``s - mean`` finite for finite
    similarities near the float maximum, of either sign.
    """
    half = np.multiply(sims, 0.5, dtype=dtype)
    half -= (mean * 0.5).astype(dtype)
    with np.errstate(divide="ignore"):  # a scale below the dtype's range: checked as inf
        half /= (scale * 0.5).astype(dtype)
    return half


class QueryBankZNorm(QueryBankNormalizer):
    """Querybank z-norm: standardise each gallery item's similarities on the bank.

    ``score(q, g) = (s(q, g) - mu_g) / sigma_g``, with ``mu_g`` and ``sigma_g`` the mean
    and population standard deviation of the querybank similarities ``s(b, g)``.
    A hub, close to the whole bank, has a high ``mu_g``; unlike the bias forms
    (:class:`Centering`, NNN), ``sigma_g`` also rescales each item.

    A gallery item whose bank similarities are all equal (``sigma_g = 0``; every
    item when the bank has one row) is only centred: ``sigma_g`` is taken as 1, as
    :class:`sklearn.preprocessing.StandardScaler` does. The statistics are computed
    in float64 over a fixed tree of bank rows, exactly 0 for a constant column and
    bitwise the same for every ``working_memory``, ``n_jobs`` and dask chunking.

    The fit rule (shared by every normaliser): ``fit(P)`` takes the precomputed
    bank-by-gallery similarities ``P`` (M x N); ``fit(bank, gallery=G)`` takes bank
    and gallery embeddings and computes the similarities under ``metric``; the
    second positional argument ``y`` is ignored. From cosine embeddings of at most
    2,048 dimensions, and no more than the gallery's size, the fit never forms the
    M x N similarities: their column means and standard deviations come from the
    unit bank rows' mean and covariance, in float64.

    Parameters
    ----------
    metric : {"cosine", "dot"}, default="cosine"
        Similarity used in embedding mode.
    working_memory : float, default=None
        Bound, in MiB, on the memory of one block during fit and transform;
        None means 16 MiB.
    n_jobs : int, default=None
        Threads over bank blocks in fit and query blocks in transform (joblib;
        None means 1, -1 all cores). Results do not depend on it.

    Attributes
    ----------
    bank_mean_ : ndarray of shape (n_gallery,)
        ``mu_g``, the mean bank similarity per gallery item, in float64.
    bank_std_ : ndarray of shape (n_gallery,)
        ``sigma_g``, the population standard deviation of the bank similarities
        per gallery item, in float64 (0 for a constant column, divided by as 1).
    gallery_embeddings_ : ndarray of shape (n_gallery, n_dims) or None
        The prepared gallery embeddings in embedding mode, else None.
    n_bank_ : int
        Number of querybank rows seen in fit.
    n_features_in_ : int
        Number of gallery items.
    feature_names_in_ : ndarray of shape (n_gallery,)
        Gallery names, when fitted on a DataFrame of similarities.

    See Also
    --------
    Centering : Subtracts the bank mean only.
    MutualProximity : Combines this z-score, through the normal CDF, with the
        query's own.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import QueryBankZNorm
    >>> bank_sims = np.array([[0.9, 0.1], [0.7, 0.3]])
    >>> normalizer = QueryBankZNorm().fit(bank_sims)
    >>> normalizer.bank_mean_.round(3), normalizer.bank_std_.round(3)
    (array([0.8, 0.2]), array([0.1, 0.1]))
    >>> normalizer.transform([[0.8, 0.4]]).round(3)  # item 1 stands out from the bank
    array([[0., 2.]])
    """

    capabilities = Capabilities(index="rerank", mergeable=True, array_api=True)

    def _reducers(self, n_bank, n_gallery, dtype):
        return [ColumnMoments(n_gallery)]

    def _learn(self, reducers):
        learn_bank_moments(self, reducers[0])

    def _device_statistics(self, xp, n_gallery, dtype, where):
        return [device_path.ColumnMoments(xp, n_gallery, dtype, where)]

    def _learn_device(self, xp, statistics):
        device_path.learn_moments(self, xp, statistics[0])

    def _device_scores(self, xp, sims):
        return device_path.standardised(xp, sims, self.bank_mean_, self._bank_scale, sims.dtype)

    def _score(self, sims, columns, row_state, out):
        out[...] = standardised(
            sims, self.bank_mean_[columns], self._bank_scale[columns], sims.dtype
        )


class MutualProximity(QueryBankNormalizer):
    """Mutual Proximity in querybank form (after Schnitzer et al., 2012).

    A similarity counts as high when it is high both for the gallery item, among
    the querybank's similarities to it, and for the query, among its own
    similarities to the gallery. The score is the log of the product of the two
    probabilities, so the hub, high for every query, loses::

        score(q, g) = log P_g(s(q, g)) + log P_q(s(q, g))

    ``method="gaussian"`` models both as normal distributions, with ``mu_g``,
    ``sigma_g`` the mean and population standard deviation of the bank's
    similarities to ``g`` (see :class:`QueryBankZNorm`) and ``mu_q``, ``sigma_q``
    those of the query's row::

        score(q, g) = log Phi((s - mu_g) / sigma_g) + log Phi((s - mu_q) / sigma_q)

    computed with :func:`scipy.special.log_ndtr`, finite far into the tails (a zero
    ``sigma``, a constant column or row, is taken as 1). ``method="empiric"`` uses
    the empirical distributions, as mid-distribution functions: ties count half,
    and ``s(q, g)`` itself is one of the tied values (it is in the row, and it is
    added to the bank), so neither fraction is ever 0::

        P_g(s) = (#{b : s(b, g) < s} + (#{b : s(b, g) = s} + 1) / 2) / (M + 1)
        P_q(s) = (#{j : s(q, j) < s} + #{j : s(q, j) = s} / 2) / N

    The empiric method keeps every gallery column of the probe matrix sorted, as
    :class:`GloballyCorrected` does (O(M N) memory, and its table of value buckets
    from the first transform), and counts in it and in the sorted row by a table
    look-up and a short bisection: O(N log N) per query, for sorting the row. Its
    :meth:`top_k` holds each query's sorted row (O(N) per query, for blocks of up
    to 1,024 queries); the Gaussian method needs O(1) per query (the row's moments,
    streamed over a fixed tree of columns, so that ``top_k`` and ``transform``
    agree exactly).

    Under scikit-learn's ``array_api_dispatch``, both methods fit and serve
    torch, CuPy and array-api-strict inputs on their device. The empiric one
    keeps its sorted columns there and counts by bisection (no table;
    ``torch.searchsorted`` on torch): the same counts, ties included, as on the
    NumPy path, and the scores to the rounding of the device's ``log``.

    The fit rule (shared by every normaliser): ``fit(P)`` takes the precomputed
    bank-by-gallery similarities ``P`` (M x N); ``fit(bank, gallery=G)`` takes bank
    and gallery embeddings and computes the similarities under ``metric``; the
    second positional argument ``y`` is ignored. With ``method="gaussian"``, from
    cosine embeddings of at most 2,048 dimensions, and no more than the gallery's
    size, the fit never forms the M x N similarities: their column moments come
    from the unit bank rows' mean and covariance, in float64.

    Parameters
    ----------
    method : {"gaussian", "empiric"}, default="gaussian"
        Normal models of the two distributions, or their empirical distributions.
    metric : {"cosine", "dot"}, default="cosine"
        Similarity used in embedding mode.
    working_memory : float, default=None
        Bound, in MiB, on the memory of one block during fit and transform;
        None means 16 MiB.
    n_jobs : int, default=None
        Threads over bank blocks in fit, over strips of gallery columns for the
        empiric method's sort, and over query blocks in transform (joblib; None
        means 1, -1 all cores). Results do not depend on it.

    Attributes
    ----------
    bank_mean_ : ndarray of shape (n_gallery,)
        ``mu_g`` in float64 (``method="gaussian"`` only).
    bank_std_ : ndarray of shape (n_gallery,)
        ``sigma_g`` in float64 (``method="gaussian"`` only; 0 for a constant column,
        divided by as 1).
    sorted_bank_ : ndarray of shape (n_bank, n_gallery)
        The probe matrix with each column sorted ascending (``method="empiric"``
        only; an array of the inputs' namespace and device when fitted on one).
    gallery_embeddings_ : ndarray of shape (n_gallery, n_dims) or None
        The prepared gallery embeddings in embedding mode, else None.
    n_bank_ : int
        Number of querybank rows seen in fit.
    n_features_in_ : int
        Number of gallery items.
    feature_names_in_ : ndarray of shape (n_gallery,)
        Gallery names, when fitted on a DataFrame of similarities.

    See Also
    --------
    QueryBankZNorm : The bank's z-score alone.
    GloballyCorrected : Ranks the query among the bank for each item, as the
        empiric bank term does.

    References
    ----------
    D. Schnitzer, A. Flexer, M. Schedl, G. Widmer, "Local and Global Scaling
    Reduce Hubs in Space", JMLR 13, 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import MutualProximity
    >>> bank_sims = np.array([[0.9, 0.1, 0.2], [0.7, 0.3, 0.2], [0.8, 0.2, 0.5]])
    >>> query_sims = np.array([[0.8, 0.3, 0.1]])
    >>> MutualProximity().fit(bank_sims).transform(query_sims).round(3)
    array([[-0.784, -1.119, -4.413]])

    The empiric form: item 1's similarity 0.3 ties the bank's highest, and is the
    row's second highest of three:

    >>> empiric = MutualProximity(method="empiric").fit(bank_sims)
    >>> np.exp(empiric.transform(query_sims)).round(4)  # P_g * P_q
    array([[0.4167, 0.375 , 0.0208]])
    """

    capabilities = Capabilities(whole_rows=True, index="rerank", mergeable=True,
                                array_api=True)

    _parameter_constraints: dict = {
        **QueryBankNormalizer._parameter_constraints,
        "method": [StrOptions({"gaussian", "empiric"})],
    }

    def __init__(self, method="gaussian", *, metric="cosine", working_memory=None, n_jobs=None):
        super().__init__(metric=metric, working_memory=working_memory, n_jobs=n_jobs)
        self.method = method

    def _reducers(self, n_bank, n_gallery, dtype):
        return [ColumnMoments(n_gallery) if self.method == "gaussian" else SortedColumns(self.n_jobs)]

    def _partial_fit_refusal(self):
        if self.method == "empiric":
            return ("method='empiric' ranks similarities within every bank column sorted whole, "
                    "which partial_fit would have to keep and re-sort (method='gaussian' merges)")
        return None

    def _learn(self, reducers):
        for name in ("bank_mean_", "bank_std_", "_bank_scale", "sorted_bank_", "_bank_ranks"):
            self.__dict__.pop(name, None)  # a refit with the other method must not keep them
        if self.method == "gaussian":
            learn_bank_moments(self, reducers[0])
        else:
            self.sorted_bank_ = reducers[0].result()
            self._bank_ranks = ColumnRanks(self.sorted_bank_)

    def _row_state(self, sims, columns, state=None):
        """The row's moments (Gaussian) or its sorted values (empiric), chunk by chunk."""
        if state is None:
            state = RowMoments() if self.method == "gaussian" else SortedRows()
        return state.update(sims)

    def _check_index_serving(self):
        """Raise a ValueError unless the Gaussian form is asked for: the empiric one ranks
        within the query's whole row, which an index does not give."""
        super()._check_index_serving()
        if self.method != "gaussian":
            raise ValueError(
                "MutualProximity(method='empiric') ranks each similarity within the "
                "query's whole row, which an index does not give: use method='gaussian', "
                "or normaliser.top_k."
            )

    def _index_context(self):
        """The gallery's mean and (population) covariance, once per index: each row's
        moments follow exactly."""
        gallery = self.gallery_embeddings_
        return gallery.mean(axis=0, dtype=np.float64), np.cov(gallery, rowvar=False, bias=True)

    def _index_row_state(self, queries, neighbors, neighbor_sims, search, context=None):
        """Each row's moments ``q . mean`` and ``sqrt(q' cov q)`` from ``_index_context``,
        exact: no search needed."""
        mean, covariance = self._index_context() if context is None else context
        variance = np.einsum("qd,de,qe->q", queries, covariance, queries)
        mean = np.einsum("qd,d->q", queries, mean)  # einsum: the same for every batch
        return RowMoments.given(mean, np.sqrt(np.maximum(variance, 0)))

    @property
    def _device_buffers(self):
        """Blocks of query rows that working_memory holds on a device: more for the
        temporaries of the empiric method's counts."""
        return device_path.N_BUFFERS if self.method == "gaussian" else 8

    def _device_statistics(self, xp, n_gallery, dtype, where):
        if self.method == "gaussian":
            return [device_path.ColumnMoments(xp, n_gallery, dtype, where)]
        return [device_path.SortedColumns(xp)]

    def _learn_device(self, xp, statistics):
        if self.method == "gaussian":
            device_path.learn_moments(self, xp, statistics[0])
            return
        for name in ("bank_mean_", "bank_std_", "_bank_scale", "_bank_ranks"):
            self.__dict__.pop(name, None)  # a refit with the other method must not keep them
        self.sorted_bank_ = statistics[0].result()

    def _device_scores(self, xp, sims):
        if self.method == "gaussian":
            return self._gaussian_device_scores(xp, sims)
        return self._empiric_device_scores(xp, sims)

    def _gaussian_device_scores(self, xp, sims):
        """``log Phi(z_bank) + log Phi(z_row)``, with the row's own moments."""
        wide = self.bank_mean_.dtype
        rows = xp.astype(sims, wide)
        row_mean = xp.mean(rows, axis=1, keepdims=True)
        row_std = xp.sqrt(xp.mean((rows - row_mean) ** 2, axis=1, keepdims=True))
        row_scale = xp.where(row_std > 0, row_std, xp.ones_like(row_std))
        bank_z = device_path.standardised(xp, sims, self.bank_mean_, self._bank_scale, wide)
        row_z = device_path.standardised(xp, sims, row_mean, row_scale, wide)
        return xp.astype(device_path.log_ndtr(xp, bank_z) + device_path.log_ndtr(xp, row_z),
                         sims.dtype)

    def _empiric_device_scores(self, xp, sims):
        """``log(P_g P_q)`` of whole rows from the exact counts, as on the NumPy path."""
        n_bank, n_gallery = self.sorted_bank_.shape
        bank = self.sorted_bank_
        # (2 c_g + 1) (2 c_q), c the midpoint counts: an exact integer, so equal
        # products tie exactly.
        bank_twice = (device_path.count_in_columns(xp, bank, sims, "left")
                      + device_path.count_in_columns(xp, bank, sims, "right") + 1)
        row = xp.sort(sims, axis=1)
        row_twice = (device_path.count_in_rows(xp, row, sims, "left")
                     + device_path.count_in_rows(xp, row, sims, "right"))
        product = bank_twice * row_twice
        product = xp.where(product > 0, product, xp.ones_like(product))  # 0 only where a NaN is
        wide = max_float(xp, device(sims))
        log_p = xp.log(xp.astype(product, wide)) - float(np.log(4.0 * (n_bank + 1) * n_gallery))
        # A NaN or inf similarity must leave a non-finite score, for transform to name it.
        return xp.astype(log_p + xp.astype(sims - sims, wide), sims.dtype)

    def _score(self, sims, columns, row_state, out):
        row = (self._row_state(sims, columns) if row_state is None else row_state).result()
        if self.method == "gaussian":
            out[...] = self._gaussian(sims, columns, *row)
        else:
            out[...] = self._empiric(sims, columns, row)

    def _gaussian(self, sims, columns, row_mean, row_std):
        bank_z = standardised(sims, self.bank_mean_[columns], self._bank_scale[columns], np.float64)
        row_z = standardised(sims, row_mean[:, None], standard_scale(row_std)[:, None], np.float64)
        log_p = log_ndtr(bank_z, out=bank_z)
        log_p += log_ndtr(row_z, out=row_z)
        return log_p

    def _empiric(self, sims, columns, sorted_rows):
        n_bank, n_gallery = self.sorted_bank_.shape[0], sorted_rows.shape[1]
        # P_g * P_q = (2 c_g + 1) (2 c_q) / (4 (M + 1) N), c the midpoint counts: the
        # numerator is an integer, exact in float64, so equal products tie exactly.
        product = self._bank_ranks.count_below_midpoint(sims, columns)
        product *= 2
        product += 1
        product *= 2 * ColumnRanks(sorted_rows.T).count_below_midpoint(sims.T).T
        with np.errstate(divide="ignore"):  # a zero count only where a NaN is
            log_p = np.log(product, out=product)
        log_p -= np.log(4.0 * (n_bank + 1) * n_gallery)
        # The counts are finite for any input: a NaN or inf similarity must leave a
        # non-finite score, for transform's check to name it.
        log_p += sims - sims
        return log_p
