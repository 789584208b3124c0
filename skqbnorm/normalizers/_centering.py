"""Centering: the querybank's column mean as a baseline normaliser, and DN."""

from numbers import Real

import numpy as np

from .._core import ColumnMean
from .._validation import NotBool
from . import _array_api_path as device_path
from ._base import QueryBankNormalizer
from ._bias import BiasFormMixin
from ._capabilities import Capabilities


class Centering(BiasFormMixin, QueryBankNormalizer):
    """Subtract (a multiple of) the querybank's mean similarity to each gallery item.

    ``score(q, g) = s(q, g) - alpha * mean_i s(b_i, g)``. With ``alpha=1`` (the
    default) this is CENT: for inner products, centring the queries on the bank
    centroid; a baseline, which the QB-Norm paper found harmful for cross-modal
    retrieval. With ``alpha=0.5`` it is Distribution Normalization (DN, shipped
    with NNN, Chowdhury et al. 2024), which subtracts half the bank's mean embedding
    from each query embedding: for dot products, ``<q - w * mean_b b, g> = s(q, g) -
    w * mean_b s(b, g)``.

    The fit rule (shared by every normaliser): ``fit(P)`` takes the precomputed
    bank-by-gallery similarities ``P`` (M x N); ``fit(bank, gallery=G)`` takes bank
    and gallery embeddings and computes the similarities under ``metric``; the
    second positional argument ``y`` is ignored. From cosine embeddings the fit
    never forms the M x N similarities: their column mean is the gallery's product
    with the mean unit bank row, in float64.

    Parameters
    ----------
    alpha : float, default=1.0
        Multiple of the bank's mean similarity subtracted, >= 0: 1 is CENT, 0.5 DN
        (the bias weight, named as in :class:`NearestNeighborNormalization`).
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

    See Also
    --------
    NearestNeighborNormalization : Subtracts a multiple of the k nearest bank
        similarities' mean instead.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import Centering
    >>> normalizer = Centering().fit(np.array([[0.9, 0.1], [0.7, 0.3]]))
    >>> normalizer.transform([[0.8, 0.4]]).round(3)
    array([[0. , 0.2]])

    Distribution Normalization subtracts half the mean:

    >>> dn = Centering(alpha=0.5).fit(np.array([[0.9, 0.1], [0.7, 0.3]]))
    >>> dn.transform([[0.8, 0.4]]).round(3)
    array([[0.4, 0.3]])
    """

    capabilities = Capabilities(bias_form=True, index="bias", mergeable=True, array_api=True)

    _parameter_constraints: dict = {
        **QueryBankNormalizer._parameter_constraints,
        "alpha": [NotBool(Real, 0, np.inf, closed="left")],
    }

    def __init__(self, alpha=1.0, *, metric="cosine", working_memory=None, n_jobs=None):
        super().__init__(metric=metric, working_memory=working_memory, n_jobs=n_jobs)
        self.alpha = alpha

    def _reducers(self, n_bank, n_gallery, dtype):
        return [ColumnMean(n_gallery)]

    def _learn(self, reducers):
        self.bank_mean_ = reducers[0].result()
        with np.errstate(over="ignore"):  # an overflow shows in the scores, which are checked
            self._bias = self.alpha * self.bank_mean_  # the mean itself for alpha=1

    def _gallery_bias(self):
        return self._bias

    def _device_statistics(self, xp, n_gallery, dtype, where):
        return [device_path.ColumnMean(xp, n_gallery, dtype, where)]

    def _learn_device(self, xp, statistics):
        self.bank_mean_ = statistics[0].result()
        self._bias = self.alpha * self.bank_mean_

    def _device_scores(self, xp, sims):
        return sims - xp.astype(self._bias, sims.dtype)

    def _score(self, sims, columns, row_state, out):
        np.subtract(sims, self._bias[columns].astype(sims.dtype), out=out)
