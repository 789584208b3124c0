"""Cross-domain Similarity Local Scaling (CSLS)."""

from numbers import Integral

import numpy as np

from .._core import ColumnTopKMean, finite_mean, row_top_k
from .._core._array_api import top_k as select_top_k
from .._validation import NotBool
from . import _array_api_path as device_path
from ._base import QueryBankNormalizer
from ._bias import BiasFormMixin
from ._capabilities import Capabilities


class CSLS(BiasFormMixin, QueryBankNormalizer):
    """Cross-domain Similarity Local Scaling (Conneau et al., 2018).

    ``CSLS(q, g) = 2 s(q, g) - r_G(q) - r_B(g)``, where ``r_G(q)`` is the mean of
    the query's ``k`` largest gallery similarities and ``r_B(g)`` the mean of the
    ``k`` largest querybank similarities to ``g``. ``r_B`` is learned at fit;
    ``r_G(q)`` shifts a whole row, so it changes the values but not the ranking.

    The fit rule (shared by every normaliser): ``fit(P)`` takes the precomputed
    bank-by-gallery similarities ``P`` (M x N); ``fit(bank, gallery=G)`` takes bank
    and gallery embeddings and computes the similarities under ``metric``; the
    second positional argument ``y`` is ignored.

    Parameters
    ----------
    k : int, default=10
        Neighbourhood size; at most the bank size and at most the gallery size.
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
    bank_neighborhood_ : ndarray of shape (n_gallery,)
        ``r_B(g)``: mean of the ``k`` largest bank similarities per gallery item.
    gallery_embeddings_ : ndarray of shape (n_gallery, n_dims) or None
        The prepared gallery embeddings in embedding mode, else None.
    n_bank_ : int
        Number of querybank rows seen in fit.
    n_features_in_ : int
        Number of gallery items.
    feature_names_in_ : ndarray of shape (n_gallery,)
        Gallery names, when fitted on a DataFrame of similarities.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import CSLS
    >>> bank_sims = np.array([[0.9, 0.1], [0.7, 0.3], [0.8, 0.2]])
    >>> normalizer = CSLS(k=2).fit(bank_sims)
    >>> normalizer.bank_neighborhood_
    array([0.85, 0.25])
    >>> normalizer.transform([[0.6, 0.5]]).round(3)  # the hub (item 0) loses
    array([[-0.2,  0.2]])
    """

    capabilities = Capabilities(bias_form=True, whole_rows=True, index="bias", mergeable=True,
                                item_bias="top_k_mean", array_api=True)

    _parameter_constraints: dict = {
        **QueryBankNormalizer._parameter_constraints,
        "k": [NotBool(Integral, 1, None, closed="left")],
    }

    def __init__(self, k=10, *, metric="cosine", working_memory=None, n_jobs=None):
        super().__init__(metric=metric, working_memory=working_memory, n_jobs=n_jobs)
        self.k = k

    def _check_sizes(self, n_bank, n_gallery):
        self._check_k(n_bank, n_gallery, bank=True)  # r_B averages k bank similarities

    def _reducers(self, n_bank, n_gallery, dtype):
        return [ColumnTopKMean(self.k)]

    def _learn(self, reducers):
        self.bank_neighborhood_ = reducers[0].result()

    def _gallery_bias(self):
        # 2 s - r_G(q) - r_B(g): r_G shifts a whole row, so a row ranks as s - r_B / 2.
        return self.bank_neighborhood_ / 2

    def _item_bias_parameters(self):
        """A new item's bias, ``r_B(h) / 2``: half the mean of its k largest bank similarities."""
        return {"k": int(self.k), "scale": 0.5}

    def _row_state(self, sims, columns, state=None):
        """Each row's k largest similarities so far."""
        return row_top_k(sims, self.k, state)

    def _device_statistics(self, xp, n_gallery, dtype, where):
        return [device_path.ColumnTopKMean(xp, dtype, int(self.k))]

    def _learn_device(self, xp, statistics):
        self.bank_neighborhood_ = statistics[0].result()

    def _device_scores(self, xp, sims):
        dtype = sims.dtype
        best = select_top_k(xp, sims, int(self.k))[0]
        own = xp.astype(xp.mean(xp.astype(best, self.bank_neighborhood_.dtype), axis=1), dtype)
        return (sims - xp.astype(self.bank_neighborhood_, dtype)) + (sims - own[:, None])

    def _score(self, sims, columns, row_state, out):
        # (s - r_B) + (s - r_G): unlike 2 s, neither difference overflows for
        # similarities of a common magnitude, however large.
        dtype = sims.dtype
        top = self._row_state(sims, columns) if row_state is None else row_state
        np.subtract(sims, self.bank_neighborhood_[columns].astype(dtype), out=out)
        out += sims - finite_mean(top, axis=1).astype(dtype)[:, None]

    def _index_neighbors(self):
        """``k``: CSLS's ``r_G(q)`` is the mean of each query's raw top ``k``."""
        return self.k

    def _index_row_state(self, queries, neighbors, neighbor_sims, search, context=None):
        """Each query's raw top ``k`` similarities from the index, sorted, missing ones
        filled with the mean of those found, so that ``r_G(q)`` is their mean."""
        return np.sort(_neighborhood_of_found(neighbor_sims[:, : self.k]), axis=1)


def _neighborhood_of_found(sims):
    """Each row's raw top k for CSLS's ``r_G(q)``, where the index found fewer than k
    (-inf) the missing ones taken as the mean of those found, so that ``r_G(q)`` is
    their mean (0 in a row of none: its scores are all -inf anyway)."""
    found = np.isfinite(sims)
    if found.all():
        return sims
    count = found.sum(axis=1)
    mean = finite_mean(np.where(found, sims, 0), axis=1) * (sims.shape[1] / np.maximum(count, 1))
    return np.where(found, sims, mean.astype(sims.dtype)[:, None])
