"""Centering: the querybank's column mean as a baseline normaliser."""

import numpy as np

from .._stats import ColumnMean
from ._base import QueryBankNormaliser


class Centering(QueryBankNormaliser):
    """Subtract the querybank's mean similarity to each gallery item (CENT).

    ``score(q, g) = s(q, g) - mean_i s(b_i, g)``; for inner products this is
    centring the queries on the bank centroid. A baseline: the QB-Norm paper found
    it harmful for cross-modal retrieval.

    The fit rule (shared by every normaliser): ``fit(P)`` takes the precomputed
    bank-by-gallery similarities ``P`` (M x N); ``fit(bank, gallery=G)`` takes bank
    and gallery embeddings and computes the similarities under ``metric``; the
    second positional argument ``y`` is ignored.

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
        Mean querybank similarity per gallery item, in float64.
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
    >>> from skqbnorm import Centering
    >>> normaliser = Centering().fit(np.array([[0.9, 0.1], [0.7, 0.3]]))
    >>> normaliser.transform([[0.8, 0.4]]).round(3)
    array([[0. , 0.2]])
    """

    def _reducers(self, n_bank, n_gallery, dtype):
        return [ColumnMean(n_gallery)]

    def _learn(self, reducers):
        self.bank_mean_ = reducers[0].result()

    def _score(self, sims, columns, row_state, out):
        np.subtract(sims, self.bank_mean_[columns].astype(sims.dtype), out=out)
