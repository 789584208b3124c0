"""Dual softmax at inference (DSL, CAMoE): similarities weighted by a softmax over queries."""

from numbers import Real

import numpy as np

from .._core import ColumnLogSumExp, all_finite
from .._validation import NotBool
from . import _array_api_path as device_path
from ._base import QueryBankNormalizer
from ._capabilities import Capabilities


class DualSoftmax(QueryBankNormalizer):
    """Dual softmax (DSL) of query similarities, over a querybank or the test queries.

    CAMoE (Cheng et al., 2021), as post-processing in CLIP4Clip and X-CLIP, weights
    each similarity by a softmax over the *queries* of its gallery column::

        S'[q, g] = S[q, g] * softmax_q(S[:, g] / T)[q]
                 = S[q, g] * exp(S[q, g] / T - logsumexp_b(P[b, g] / T))

    with the temperature ``T = 1`` at inference. :meth:`fit` learns the per-item soft
    maxima ``c_g = T * logsumexp_b(P[b, g] / T)`` over the querybank rows ``P``, and
    :meth:`transform` returns ``S * exp((S - c_g) / T)``, the exponent computed in the
    log domain. Not a bias form: the factor ``S`` stays. The formula is followed
    literally, so the sign of ``S`` matters: a negative similarity becomes more
    negative the larger its weight (the weight is highest where the query stands out),
    and ``S = 0`` scores 0 whatever its weight. Scores whose weight underflows the
    dtype (``(S - c_g) / T`` below about -745 in float64, -103 in float32) are 0;
    where the weight alone overflows, the product is taken as
    ``sign(S) exp(log|S| + (S - c_g) / T)``, finite while the score is.

    Two uses, two protocols:

    - **Transductive** (as published): ``fit_transform(S)`` on the test query-by-gallery
      matrix itself, so the softmax runs over the test queries. Every score then
      depends on the other test queries: it needs them all at once, and it exploits
      the benchmark's one-to-one pairing of queries and gallery items (a column's
      mass goes to the query most drawn to it; CAMoE issues #6 and #7). Compared with
      methods that score each query alone, this is not a fair comparison; it is fair
      only against other transductive methods, or when a batch of queries with
      (nearly) one answer each really is available at once.
    - **Querybank** (inductive): ``fit(P)`` on a querybank, e.g. training queries,
      then ``transform(S)`` on new queries: the softmax denominator runs over the bank
      instead (the query itself is not in it), each query is scored alone, and the
      comparison with the other querybank normalisers is fair.

    The fit rule (shared by every normaliser): ``fit(P)`` takes the precomputed
    bank-by-gallery similarities ``P`` (M x N); ``fit(bank, gallery=G)`` takes bank
    and gallery embeddings and computes the similarities under ``metric``; the
    second positional argument ``y`` is ignored.

    Parameters
    ----------
    temperature : float, default=0.05
        The softmax temperature ``T``, > 0, in similarity units. CAMoE uses 1 at
        inference, on its own logit scale; on cosine similarities T = 1 barely
        changes a ranking. The default was chosen by cross-validation on the
        bundled data's training task, never the test queries (the user guide's
        :ref:`normalisers` page).
    metric : {"cosine", "dot"}, default="cosine"
        Similarity used in embedding mode.
    working_memory : float, default=None
        Bound, in MiB, on the memory of one block of bank rows during fit and of
        query rows during transform; None means 16 MiB.
    n_jobs : int, default=None
        Threads over bank blocks in fit and query blocks in transform (joblib;
        None means 1, -1 all cores). Results do not depend on it.

    Attributes
    ----------
    bank_soft_max_ : ndarray of shape (n_gallery,)
        ``c_g = T * logsumexp_b(P[b, g] / T)`` per gallery item, in float64, bitwise
        the same for every ``working_memory`` and ``n_jobs``.
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
    InvertedSoftmax : ``S / T - c_g / T``, the log of the weight alone.

    Examples
    --------
    Transductive, over the test queries: each column's softmax favours the query
    most drawn to that item.

    >>> import numpy as np
    >>> from skqbnorm import DualSoftmax
    >>> sims = np.array([[0.9, 0.8], [0.7, 0.1]])
    >>> DualSoftmax(temperature=1.0).fit_transform(sims).round(4)
    array([[0.4949, 0.5346],
           [0.3151, 0.0332]])

    With a querybank, new queries are scored one at a time:

    >>> normalizer = DualSoftmax(temperature=0.5).fit(sims)
    >>> normalizer.transform([[0.8, 0.5]]).round(4)
    array([[0.3921, 0.2201]])
    """

    capabilities = Capabilities(transductive=True, index="rerank", mergeable=True,
                                array_api=True)

    _parameter_constraints: dict = {
        **QueryBankNormalizer._parameter_constraints,
        "temperature": [NotBool(Real, 0, np.inf, closed="neither")],
    }

    def __init__(self, temperature=0.05, *, metric="cosine", working_memory=None, n_jobs=None):
        super().__init__(metric=metric, working_memory=working_memory, n_jobs=n_jobs)
        self.temperature = temperature

    def _reducers(self, n_bank, n_gallery, dtype):
        return [ColumnLogSumExp(n_gallery, 1.0 / self.temperature)]

    def _learn(self, reducers):
        soft_max = reducers[0].result()
        if not np.isfinite(soft_max).all():
            raise ValueError(
                f"temperature={self.temperature!r} is too large for these similarities: the "
                f"bank's soft maxima, max + T * log(n_bank) (up to {np.nanmax(soft_max):.3g}), "
                "overflow float64. Use a smaller temperature or smaller similarities."
            )
        self.bank_soft_max_ = soft_max

    def _overflow_cause(self, similarity, item):
        """A similarity within the range of cosines of the bank's soft maximum c
        (``|s - c| <= 2``) overflows only through the temperature: exp((s - c) / T)."""
        if abs(similarity - self.bank_soft_max_[item]) <= 2:
            return (
                f"temperature={self.temperature!r} is too small for these similarities: "
                "the weights exp((s - c) / temperature) of similarities above the bank's soft "
                "maxima c overflow float64. Use a larger temperature."
            )
        return None

    def _device_statistics(self, xp, n_gallery, dtype, where):
        return [device_path.LogSumExp(xp, n_gallery, dtype, 1.0 / float(self.temperature), where)]

    def _learn_device(self, xp, statistics):
        soft_max = statistics[0].result()
        if not bool(xp.all(xp.isfinite(soft_max))):
            raise ValueError(
                f"temperature={self.temperature!r} is too large for these similarities: "
                "the bank's soft maxima, max + T * log(n_bank), overflow "
                f"{soft_max.dtype}. Use a smaller temperature or smaller similarities."
            )
        self.bank_soft_max_ = soft_max

    def _device_scores(self, xp, sims):
        """``S exp((S - c_g) / T)``; where the weight alone overflows,
        ``sign(S) exp(log|S| + (S - c_g) / T)`` (0 for ``S = 0``)."""
        dtype, wide = sims.dtype, self.bank_soft_max_.dtype
        with np.errstate(over="ignore", under="ignore"):
            narrow = (np.float32 if dtype == xp.float32 else np.float64)(self.temperature)
        if not 0 < narrow < np.inf and dtype != wide:  # T beyond float32's range
            return xp.astype(self._device_scores(xp, xp.astype(sims, wide)), dtype)
        exponent = (sims - xp.astype(self.bank_soft_max_, dtype)) / float(self.temperature)
        weight = xp.exp(exponent)
        scores = sims * weight
        if bool(xp.all(xp.isfinite(weight))):
            return scores
        with np.errstate(divide="ignore"):  # log 0 where S = 0: replaced by 0 below
            magnitude = xp.exp(xp.log(xp.abs(sims)) + exponent)
        beyond = xp.where(sims == 0, xp.zeros_like(sims), magnitude * xp.sign(sims))
        return xp.where(xp.isinf(weight), beyond, scores)

    def _score(self, sims, columns, row_state, out):
        with np.errstate(over="ignore", under="ignore"):
            temperature = sims.dtype.type(self.temperature)
        if not 0 < temperature < np.inf:  # a temperature beyond float32's range
            wide = np.empty(sims.shape)
            self._score(sims.astype(np.float64), columns, row_state, wide)
            out[...] = wide
            return
        soft_max = self.bank_soft_max_[columns].astype(sims.dtype)
        np.subtract(sims, soft_max, out=out)
        out /= temperature
        np.exp(out, out=out)
        if all_finite(out):  # the usual case: no weight beyond the dtype
            out *= sims  # a finite score that overflows is computed again in float64
            return
        weight_overflows = np.isinf(out)
        out *= sims
        rows, items = np.nonzero(weight_overflows)
        out[rows, items] = _product_beyond_the_weight(sims[rows, items], soft_max[items], temperature)


def _product_beyond_the_weight(sims, soft_max, temperature):
    """``S * exp((S - c) / T)`` where the weight alone overflows: ``sign(S) exp(log|S| + (S - c) / T)``.

    Finite when ``|S|`` is small enough, and 0 when ``S`` is 0 (``0 * inf`` would be NaN).
    """
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        exponent = (sims - soft_max) / temperature
        magnitude = np.exp(np.log(np.abs(sims)) + exponent)
    return np.where(sims == 0, 0, np.copysign(magnitude, sims))
