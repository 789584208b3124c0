"""Inverted Softmax and the Dynamic Inverted Softmax."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import StrOptions

from .._core import ColumnLogSumExp, RowTopKUnion, best_k, excess_over_mean, row_top1
from .._validation import NotBool
from . import _array_api_path as device_path
from ._base import QueryBankNormalizer
from ._bias import BiasFormMixin
from ._capabilities import Capabilities


class InvertedSoftmax(BiasFormMixin, QueryBankNormalizer):
    """Inverted Softmax (IS) querybank normalisation (Smith et al., 2017).

    A query's similarity to gallery item ``j`` is divided by how strongly the whole
    querybank is drawn to ``j``::

        eta_q(j) = exp(beta * s(q, j)) / sum_i exp(beta * s(b_i, j))

    so that hubs, items close to many queries, lose their pull. Scores are returned
    in the log domain, in similarity units: with ``c_j = logsumexp_i(beta *
    s(b_i, j)) / beta``, the bank's soft maximum similarity to ``j``, and ``c_mean`` its
    mean over the gallery::

        score(q, j) = s(q, j) - (c_j - c_mean) = log(eta_q(j)) / beta + c_mean

    an item's similarity less its excess pull. The ranking is that of ``eta``;
    the scores never overflow where the similarities are of one magnitude, and they
    keep the magnitude, hence the float32 resolution, of the similarities (scores
    near ``c_j`` or ``beta * c_j`` would round nearby items to ties).

    The fit rule (shared by every normaliser): ``fit(P)`` takes the precomputed
    bank-by-gallery similarities ``P`` (M x N); ``fit(bank, gallery=G)`` takes bank
    and gallery embeddings and computes the similarities under ``metric``; the
    second positional argument ``y`` is ignored.

    Parameters
    ----------
    beta : float, default=20.0
        Inverse temperature, > 0.
    output : {"log", "probability"}, default="log"
        ``"log"`` returns log-domain scores in similarity units (see above;
        earlier versions returned ``beta * (score - c_mean)``); ``"probability"``
        returns ``eta`` itself, computed in float64. Probabilities beyond the
        dtype's range (``beta * (s - c_j)`` above about 709 in float64, 88 in
        float32) are clipped to its largest value, with a ``RuntimeWarning``.
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
        ``c_j = logsumexp_i(beta * s(b_i, j)) / beta`` per gallery item, in
        float64 (``beta * c_j`` is the log normaliser of ``eta``). It is computed
        over a fixed tree of bank rows, so it is bitwise the same for every
        ``working_memory`` and ``n_jobs``.
    mean_soft_max_ : float
        ``c_mean``, the mean of ``bank_soft_max_``.
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
    DynamicInvertedSoftmax : Applies IS only to queries whose top hit is a hub.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import InvertedSoftmax
    >>> rng = np.random.default_rng(0)
    >>> bank_sims = rng.normal(size=(100, 5))
    >>> query_sims = rng.normal(size=(3, 5))
    >>> normalizer = InvertedSoftmax(beta=10.0).fit(bank_sims)
    >>> normalizer.transform(query_sims).shape
    (3, 5)

    Item 1 is a hub: close to both bank queries, it loses its pull on a query
    equally similar to both items:

    >>> normalizer = InvertedSoftmax(beta=10.0).fit([[0.1, 0.8], [0.2, 0.9]])
    >>> normalizer.bank_soft_max_.round(4)
    array([0.2313, 0.9313])
    >>> normalizer.transform([[0.5, 0.5]]).round(4)
    array([[0.85, 0.15]])
    """

    capabilities = Capabilities(bias_form=True, index="bias", mergeable=True, item_bias="log_sum_exp",
                                array_api=True)

    _parameter_constraints: dict = {
        **QueryBankNormalizer._parameter_constraints,
        "beta": [NotBool(Real, 0, np.inf, closed="neither")],
        "output": [StrOptions({"log", "probability"})],
    }

    def __init__(self, beta=20.0, *, output="log", metric="cosine", working_memory=None, n_jobs=None):
        super().__init__(metric=metric, working_memory=working_memory, n_jobs=n_jobs)
        self.beta = beta
        self.output = output

    def _reducers(self, n_bank, n_gallery, dtype):
        return [ColumnLogSumExp(n_gallery, self.beta)]

    def _learn(self, reducers):
        soft_max = reducers[0].result()
        if not np.isfinite(soft_max).all():
            raise ValueError(
                f"beta={self.beta!r} is too small for these similarities: the bank's soft "
                f"maxima, max + log(n_bank) / beta (up to {np.nanmax(soft_max):.3g}), overflow "
                "float64. Use a larger beta or smaller similarities."
            )
        self.bank_soft_max_ = soft_max
        self.mean_soft_max_, self._excess = excess_over_mean(soft_max)

    def _gallery_bias(self):
        return self._excess

    def _item_bias_parameters(self):
        """A new item's bias, ``logsumexp_b(beta s(b, h)) / beta - c_mean`` (the DIS's
        when the item's gate is open)."""
        return {"beta": float(self.beta), "offset": self.mean_soft_max_}

    def _device_statistics(self, xp, n_gallery, dtype, where):
        return [device_path.LogSumExp(xp, n_gallery, dtype, float(self.beta), where)]

    def _learn_device(self, xp, statistics):
        soft_max = statistics[0].result()
        if not bool(xp.all(xp.isfinite(soft_max))):
            raise ValueError(
                f"beta={self.beta!r} is too small for these similarities: the bank's "
                f"soft maxima, max + log(n_bank) / beta, overflow {soft_max.dtype}. Use a "
                "larger beta or smaller similarities."
            )
        mean = float(xp.mean(soft_max))
        if bool(xp.all(soft_max == soft_max[0])):
            mean = float(soft_max[0])  # equal soft maxima have no excess at all
        self.bank_soft_max_ = soft_max
        self.mean_soft_max_ = mean
        self._excess = soft_max - mean

    def _device_scores(self, xp, sims):
        dtype = sims.dtype
        if self.output == "probability":  # in float64 where the device has it
            wide = self.bank_soft_max_.dtype
            return xp.astype(xp.exp(self.beta * (xp.astype(sims, wide) - self.bank_soft_max_)), dtype)
        return sims - xp.astype(self._excess, dtype)

    def _score(self, sims, columns, row_state, out):
        if self.output == "probability":  # in float64, whatever beta and the dtype
            log_eta = np.subtract(sims, self.bank_soft_max_[columns], dtype=np.float64)
            log_eta *= self.beta
            out[...] = np.exp(log_eta, out=log_eta)
        else:
            np.subtract(sims, self._excess[columns].astype(sims.dtype), out=out)


class DynamicInvertedSoftmax(InvertedSoftmax):
    """Dynamic Inverted Softmax (DIS), the QB-Norm paper's normaliser.

    At fit, the *gallery activation set* collects every gallery item that some
    querybank query retrieves among its top ``k`` — the suspected hubs. At
    transform, a query whose top-1 gallery item is in that set gets the Inverted
    Softmax row; every other query keeps its raw similarities. DIS equals IS when
    the bank activates every item, and "does no harm" when the bank covers the
    gallery poorly.

    Normalised rows hold Inverted Softmax scores in similarity units (see
    :class:`InvertedSoftmax`), so they stay comparable in scale with the rows
    left raw.

    The fit rule (shared by every normaliser): ``fit(P)`` takes the precomputed
    bank-by-gallery similarities ``P`` (M x N); ``fit(bank, gallery=G)`` takes bank
    and gallery embeddings and computes the similarities under ``metric``; the
    second positional argument ``y`` is ignored.

    Parameters
    ----------
    beta : float, default=20.0
        Inverse temperature of the Inverted Softmax, > 0.
    k : int, default=1
        Each bank query adds its top ``k`` gallery items to the activation set;
        1 <= k <= n_gallery. The gate itself always uses the query's top 1.
    output : {"log", "probability"}, default="log"
        Form of the normalised rows (see :class:`InvertedSoftmax`); rows left
        raw keep their similarities either way.
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
    bank_soft_max_ : ndarray of shape (n_gallery,)
        ``c_j = logsumexp_i(beta * s(b_i, j)) / beta`` per gallery item, in
        float64 (see :class:`InvertedSoftmax`).
    mean_soft_max_ : float
        ``c_mean``, the mean of ``bank_soft_max_``.
    activated_ : ndarray of shape (n_gallery,), dtype=bool
        The gallery activation set as a mask. Among tied scores, the lowest
        gallery indices are taken first.
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
    InvertedSoftmax : Normalises every query.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import DynamicInvertedSoftmax
    >>> bank_sims = np.array([[0.9, 0.1, 0.2], [0.8, 0.3, 0.1]])
    >>> normalizer = DynamicInvertedSoftmax(beta=20.0, k=1).fit(bank_sims)
    >>> normalizer.activated_
    array([ True, False, False])
    >>> normalizer.transform([[0.2, 0.5, 0.3]])  # top-1 not a hub: left raw
    array([[0.2, 0.5, 0.3]])
    """

    capabilities = Capabilities(bias_form=True, whole_rows=True, gated=True, index="bias", mergeable=True,
                                item_bias="log_sum_exp", array_api=True)

    _parameter_constraints: dict = {
        **InvertedSoftmax._parameter_constraints,
        "k": [NotBool(Integral, 1, None, closed="left")],
    }

    def __init__(self, beta=20.0, k=1, *, output="log", metric="cosine", working_memory=None,
                 n_jobs=None):
        super().__init__(beta, output=output, metric=metric, working_memory=working_memory, n_jobs=n_jobs)
        self.k = k

    def _check_sizes(self, n_bank, n_gallery):
        self._check_k(n_bank, n_gallery)

    def _reducers(self, n_bank, n_gallery, dtype):
        return [*super()._reducers(n_bank, n_gallery, dtype), RowTopKUnion(n_gallery, self.k)]

    def _learn(self, reducers):
        super()._learn(reducers)
        self.activated_ = reducers[1].mask

    def _gated_biases(self):
        return [(self._excess, self.activated_)]  # rows whose top-1 is activated

    def _row_state(self, sims, columns, state=None):
        """Each row's top-1 so far: (value, gallery index); ties keep the lowest index."""
        return row_top1(sims, columns.start or 0, state)

    def _index_row_state(self, queries, neighbors, neighbor_sims, search, context=None):
        """Each query's raw top-1 (value, gallery index), read from the index's raw search."""
        top1, top_value = (best[:, 0] for best in best_k(neighbors, neighbor_sims, 1))
        return top_value, top1

    def _device_statistics(self, xp, n_gallery, dtype, where):
        return [*super()._device_statistics(xp, n_gallery, dtype, where),
                device_path.RowTopKUnion(xp, n_gallery, int(self.k), where)]

    def _learn_device(self, xp, statistics):
        super()._learn_device(xp, statistics)
        self.activated_ = statistics[1].mask

    def _device_scores(self, xp, sims):
        scores = super()._device_scores(xp, sims)
        gate_open = xp.take(self.activated_, xp.argmax(sims, axis=1))
        return xp.where(gate_open[:, None], scores, sims)

    def _score(self, sims, columns, row_state, out):
        # Normalise every row, then restore those left raw. With whole rows the
        # top-1 search comes second, so that it reads rows already in cache.
        super()._score(sims, columns, row_state, out)
        top1 = sims.argmax(axis=1) if row_state is None else row_state[1]
        raw = ~self.activated_[top1]
        if raw.any():
            out[raw] = sims[raw]
