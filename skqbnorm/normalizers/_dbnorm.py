"""DBNorm's dual inverted softmaxes: a querybank and a gallery bank (Wang et al., 2023)."""

from numbers import Integral, Real

import numpy as np

from .._core import ColumnLogSumExp, RowTopKUnion, excess_over_mean
from .._validation import NotBool
from . import _array_api_path as device_path
from ._base import QueryBankNormalizer
from ._bias import BiasFormMixin
from ._capabilities import Capabilities
from ._softmax import DynamicInvertedSoftmax


def soft_maxima(reducer, beta, name, bank):
    """``logsumexp_i(beta * s(i, j)) / beta`` per gallery item, or an error if it overflows."""
    soft_max = reducer.result()
    if not np.isfinite(soft_max).all():
        raise ValueError(
            f"{name}={beta!r} is too small for these similarities: the {bank}'s soft "
            f"maxima, max + log(n_rows) / {name} (up to {np.nanmax(soft_max):.3g}), overflow "
            f"float64. Use a larger {name} or smaller similarities."
        )
    return soft_max


def device_soft_maxima(xp, statistic, beta, name, bank):
    """``soft_maxima`` of a ``LogSumExp`` on the array API path, in its dtype."""
    soft_max = statistic.result()
    if not bool(xp.all(xp.isfinite(soft_max))):
        raise ValueError(
            f"{name}={beta!r} is too small for these similarities: the {bank}'s soft "
            f"maxima, max + log(n_rows) / {name}, overflow {soft_max.dtype}. Use a larger "
            f"{name} or smaller similarities."
        )
    return soft_max


class DualInvertedSoftmax(BiasFormMixin, QueryBankNormalizer):
    """Dual Inverted Softmax: DBNorm with a querybank and a gallery bank (Wang et al., 2023).

    DBNorm ("Balance Act", EMNLP 2023) probes the gallery with two banks: the
    querybank ``B_q`` (query modality) and a *gallery bank* ``B_g``, samples of the
    gallery modality that are not in the gallery (e.g. training videos). A hub is
    close to both, so each bank's Inverted Softmax divides it down, and the scores
    are their product::

        eta(q, j) = exp(beta1 s(q, j)) / sum_{b in B_q} exp(beta1 s(b, j))
                  * exp(beta2 s(q, j)) / sum_{h in B_g} exp(beta2 s(h, j))

    computed in the log domain, ``(beta1 + beta2) s(q, j) - beta1 c1_j - beta2 c2_j``
    with the soft maxima ``c1_j = logsumexp_b(beta1 s(b, j)) / beta1`` and ``c2_j =
    logsumexp_h(beta2 s(h, j)) / beta2``, and returned in similarity units, as
    :class:`~skqbnorm.InvertedSoftmax` does: divided by ``beta1 + beta2``, less the
    gallery mean of the bias::

        score(q, j) = s(q, j) - (bias_j - mean_j bias_j),
        bias_j = (beta1 c1_j + beta2 c2_j) / (beta1 + beta2)

    so ``score = log(eta) / (beta1 + beta2) + mean_j bias_j``: the ranking is that
    of ``eta``, and the scores keep the magnitude, hence the float32 resolution, of
    the similarities. A row ranks as ``s(q, j) - bias_j``, a per-gallery bias that
    an inner-product index can serve.

    The released code (``DBNorm/dbnorm.py``) passes the gallery-bank matrix where
    the test similarities belong, in both factors; this class implements the
    formula above.

    Without a gallery bank, the second factor is absent and this is exactly
    :class:`~skqbnorm.InvertedSoftmax` with ``beta = beta1`` (so scikit-learn's
    checks and pipelines that pass no gallery bank get a sound normaliser).

    The fit rule (shared by every normaliser): ``fit(P, gallery_bank=P_g)`` takes
    the precomputed querybank and gallery-bank similarities to the gallery, ``P``
    (M x N) and ``P_g`` (M_g x N); ``fit(bank, gallery=G, gallery_bank=H)`` takes
    querybank, gallery and gallery-bank embeddings and computes the similarities
    under ``metric``; the second positional argument ``y`` is ignored.
    ``GridSearchCV`` passes ``gallery_bank`` through to ``fit``
    (``search.fit(P, y, gallery_bank=P_g)``), but, like any fit parameter, splits
    it along with the folds if it has as many rows as ``P``.

    Parameters
    ----------
    beta1 : float, default=20.0
        Inverse temperature of the querybank factor, > 0: it multiplies the
        similarities, as :class:`~skqbnorm.InvertedSoftmax`'s ``beta`` does.
        The defaults (``beta1 = 20``, ``beta2 = 1``) were chosen by
        cross-validation on the bundled data's training task, never the test
        queries (the user guide's :ref:`normalisers` page); the released code's
        (``beta1 = 1 / 1.99``, ``beta2 = 3``) were tuned on its own similarity
        matrices. For another similarity scale (logits x 100, say) choose both with
        ``GridSearchCV``.
    beta2 : float, default=1.0
        Inverse temperature of the gallery-bank factor, > 0; unused without a
        gallery bank.
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
        ``c1_j``, the querybank's soft maximum similarity to each gallery item.
    gallery_bank_soft_max_ : ndarray of shape (n_gallery,) or None
        ``c2_j``, the gallery bank's; None when fitted without a gallery bank.
    bias_ : ndarray of shape (n_gallery,)
        ``bias_j = (beta1 c1_j + beta2 c2_j) / (beta1 + beta2)`` (``c1_j`` alone
        without a gallery bank), in float64; a row ranks as ``s(q, j) - bias_j``.
    mean_bias_ : float
        The gallery mean of ``bias_``, subtracted from it in the scores.
    n_gallery_bank_ : int
        Number of gallery-bank rows seen in fit; 0 without a gallery bank.
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
    DualDynamicInvertedSoftmax : Applies each factor only to queries whose top hit
        that bank activates.
    InvertedSoftmax : The querybank factor alone.

    Examples
    --------
    Item 0 is close to every gallery-bank sample (a hub of the gallery modality),
    which the querybank alone does not see:

    >>> import numpy as np
    >>> from skqbnorm import DualInvertedSoftmax
    >>> querybank = [[0.5, 0.5], [0.4, 0.6]]
    >>> gallery_bank = [[0.9, 0.2], [0.8, 0.1]]
    >>> normalizer = DualInvertedSoftmax(beta1=10.0, beta2=10.0)
    >>> normalizer.fit(querybank, gallery_bank=gallery_bank).bias_.round(4)
    array([0.7313, 0.4313])
    >>> normalizer.transform([[0.6, 0.5]]).round(4)
    array([[0.45, 0.65]])

    Without a gallery bank it is the Inverted Softmax with ``beta = beta1``:

    >>> from skqbnorm import InvertedSoftmax
    >>> query_sims = [[0.6, 0.5]]
    >>> dual = DualInvertedSoftmax(beta1=10.0).fit(querybank).transform(query_sims)
    >>> single = InvertedSoftmax(beta=10.0).fit(querybank).transform(query_sims)
    >>> bool(np.array_equal(dual, single))
    True
    """

    capabilities = Capabilities(bias_form=True, gallery_bank="gallery_bank", index="bias", mergeable=True,
                                array_api=True)

    _parameter_constraints: dict = {
        **QueryBankNormalizer._parameter_constraints,
        "beta1": [NotBool(Real, 0, np.inf, closed="neither")],
        "beta2": [NotBool(Real, 0, np.inf, closed="neither")],
    }

    def __init__(self, beta1=20.0, beta2=1.0, *, metric="cosine", working_memory=None,
                 n_jobs=None):
        super().__init__(metric=metric, working_memory=working_memory, n_jobs=n_jobs)
        self.beta1 = beta1
        self.beta2 = beta2

    def _reducers(self, n_bank, n_gallery, dtype):
        return [ColumnLogSumExp(n_gallery, self.beta1)]

    def _gallery_bank_reducers(self, n_rows, n_gallery, dtype):
        return [ColumnLogSumExp(n_gallery, self.beta2)]

    def _learn(self, reducers):
        self.bank_soft_max_ = soft_maxima(reducers[0], self.beta1, "beta1", "querybank")

    def _learn_gallery_bank(self, gallery_bank):
        """The gallery bank's soft maxima (if any), then the bias of each factor."""
        self.gallery_bank_soft_max_, self.n_gallery_bank_ = None, 0
        if gallery_bank is not None:
            reducers = gallery_bank.reduce(self._gallery_bank_reducers)
            self._learn_gallery_bank_reducers(reducers)
            self.gallery_bank_soft_max_ = soft_maxima(reducers[0], self.beta2, "beta2", "gallery bank")
            self.n_gallery_bank_ = gallery_bank.shape[0]
        self._learn_biases(excess_over_mean)

    def _learn_biases(self, excess_of):
        """``bias_`` and the excess of each combination of factors, from the soft maxima;
        ``excess_of(values)`` gives ``(mean, values - mean)`` in the soft maxima's namespace."""
        query_weight, gallery_weight = 1.0, 0.0
        gallery = self.gallery_bank_soft_max_
        if gallery is not None:
            query_weight = 1.0 / (1.0 + self.beta2 / self.beta1)  # beta1 / (beta1 + beta2)
            gallery_weight = 1.0 / (1.0 + self.beta1 / self.beta2)
        with np.errstate(over="ignore"):  # an overflow shows in the scores, which are checked
            self.bias_ = query_weight * self.bank_soft_max_
            self._query_excess = query_weight * excess_of(self.bank_soft_max_)[1]
            self._gallery_excess = None
            if gallery is not None:
                self.bias_ = self.bias_ + gallery_weight * gallery
                self._gallery_excess = gallery_weight * excess_of(gallery)[1]
            self.mean_bias_, self._excess = excess_of(self.bias_)

    def _learn_gallery_bank_reducers(self, reducers):
        """Hook for the statistics a subclass takes from the gallery bank beside ``c2``."""

    def _gallery_bias(self):
        return self._excess

    def _device_statistics(self, xp, n_gallery, dtype, where):
        return [device_path.LogSumExp(xp, n_gallery, dtype, float(self.beta1), where)]

    def _device_gallery_bank_statistics(self, xp, n_gallery, dtype, where):
        return [device_path.LogSumExp(xp, n_gallery, dtype, float(self.beta2), where)]

    def _learn_device(self, xp, statistics):
        self.bank_soft_max_ = device_soft_maxima(xp, statistics[0], self.beta1, "beta1", "querybank")

    def _learn_device_gallery_bank(self, xp, gallery_bank):
        """The gallery bank's soft maxima on the device (if any), then the biases."""
        self.gallery_bank_soft_max_, self.n_gallery_bank_ = None, 0
        if gallery_bank is not None:
            statistics, n_rows = gallery_bank
            self._learn_gallery_bank_reducers(statistics)
            self.gallery_bank_soft_max_ = device_soft_maxima(xp, statistics[0], self.beta2, "beta2",
                                                             "gallery bank")
            self.n_gallery_bank_ = n_rows
        self._learn_biases(lambda values: device_path.excess_over_mean(xp, values))

    def _device_scores(self, xp, sims):
        return sims - xp.astype(self._excess, sims.dtype)

    def _score(self, sims, columns, row_state, out):
        np.subtract(sims, self._excess[columns].astype(sims.dtype), out=out)


class DualDynamicInvertedSoftmax(DualInvertedSoftmax):
    """Dual Dynamic Inverted Softmax: DBNorm gated per bank, as the DIS gates IS.

    Each bank has an *activation set*, the gallery items some of its rows retrieve
    among their top ``k`` (the querybank's, as in
    :class:`~skqbnorm.DynamicInvertedSoftmax`, and the gallery bank's). A factor of
    :class:`DualInvertedSoftmax` applies to a query only when the query's top-1
    gallery item is in that bank's activation set; a factor that does not apply
    keeps the raw similarity, ``exp(beta s(q, j))`` without its bank's
    denominator. In similarity units, with ``w1 = beta1 / (beta1 + beta2)``,
    ``w2 = beta2 / (beta1 + beta2)`` and ``c_mean`` a gallery mean::

        both gates open:    s - (bias_j - mean bias)          (the dual IS row)
        querybank only:     s - w1 (c1_j - c1_mean)
        gallery bank only:  s - w2 (c2_j - c2_mean)
        neither:            s                                 (the raw row)

    The released code (``qb_norm`` in ``DBNorm/dbnorm.py``) multiplies a closed
    factor's raw similarity ``s`` itself, not ``exp(beta s)``, into the product;
    that mixes units (a similarity times a probability) and, with both gates
    closed, ranks by ``s**2``, which reverses negative similarities. The log-domain
    form above keeps each row a ranking by ``s`` less a per-gallery bias, and rows
    left raw exactly raw, as in the DIS.

    Without a gallery bank this is exactly :class:`~skqbnorm.DynamicInvertedSoftmax`
    with ``beta = beta1``; when both banks activate every item it is
    :class:`DualInvertedSoftmax`.

    The fit rule is :class:`DualInvertedSoftmax`'s (``gallery_bank=`` beside the
    querybank, in the same form).

    Parameters
    ----------
    beta1 : float, default=20.0
        Inverse temperature of the querybank factor, > 0 (see
        :class:`DualInvertedSoftmax` for the defaults).
    beta2 : float, default=1.0
        Inverse temperature of the gallery-bank factor, > 0.
    k : int, default=1
        Each bank row adds its top ``k`` gallery items to its bank's activation
        set; 1 <= k <= n_gallery. The gates always use the query's top 1.
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
        ``c1_j``, the querybank's soft maximum similarity to each gallery item.
    gallery_bank_soft_max_ : ndarray of shape (n_gallery,) or None
        ``c2_j``, the gallery bank's; None when fitted without a gallery bank.
    bias_ : ndarray of shape (n_gallery,)
        The bias of rows whose gates are both open (see
        :class:`DualInvertedSoftmax`).
    mean_bias_ : float
        The gallery mean of ``bias_``.
    activated_ : ndarray of shape (n_gallery,), dtype=bool
        The querybank's activation set as a mask; among tied scores, the lowest
        gallery indices are taken first.
    gallery_bank_activated_ : ndarray of shape (n_gallery,), dtype=bool, or None
        The gallery bank's; None when fitted without a gallery bank.
    n_gallery_bank_ : int
        Number of gallery-bank rows seen in fit; 0 without a gallery bank.
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
    DualInvertedSoftmax : Applies both factors to every query.
    DynamicInvertedSoftmax : The querybank factor alone, gated.

    Examples
    --------
    The querybank activates item 1, the gallery bank item 0:

    >>> from skqbnorm import DualDynamicInvertedSoftmax
    >>> querybank = [[0.4, 0.6], [0.5, 0.7]]
    >>> gallery_bank = [[0.9, 0.2], [0.8, 0.1]]
    >>> normalizer = DualDynamicInvertedSoftmax(beta1=10.0, beta2=10.0, k=1)
    >>> normalizer = normalizer.fit(querybank, gallery_bank=gallery_bank)
    >>> normalizer.activated_, normalizer.gallery_bank_activated_
    (array([False,  True]), array([ True, False]))

    A query whose top-1 is item 0 gets only the gallery-bank factor:

    >>> normalizer.transform([[0.6, 0.5]]).round(4)
    array([[0.425, 0.675]])
    """

    capabilities = Capabilities(
        bias_form=True, whole_rows=True, gated=True, gallery_bank="gallery_bank", index="bias",
        mergeable=True, array_api=True,
    )

    _parameter_constraints: dict = {
        **DualInvertedSoftmax._parameter_constraints,
        "k": [NotBool(Integral, 1, None, closed="left")],
    }

    def __init__(self, beta1=20.0, beta2=1.0, k=1, *, metric="cosine", working_memory=None,
                 n_jobs=None):
        super().__init__(beta1, beta2, metric=metric, working_memory=working_memory, n_jobs=n_jobs)
        self.k = k

    # The gate's running top-1 over a row's column chunks is the DIS's.
    _row_state = DynamicInvertedSoftmax._row_state
    _index_row_state = DynamicInvertedSoftmax._index_row_state

    def _check_sizes(self, n_bank, n_gallery):
        self._check_k(n_bank, n_gallery)

    def _reducers(self, n_bank, n_gallery, dtype):
        return [*super()._reducers(n_bank, n_gallery, dtype), RowTopKUnion(n_gallery, self.k)]

    def _gallery_bank_reducers(self, n_rows, n_gallery, dtype):
        return [*super()._gallery_bank_reducers(n_rows, n_gallery, dtype), RowTopKUnion(n_gallery, self.k)]

    def _learn(self, reducers):
        super()._learn(reducers)
        self.activated_ = reducers[1].mask
        self.gallery_bank_activated_ = None

    def _learn_gallery_bank_reducers(self, reducers):
        self.gallery_bank_activated_ = reducers[1].mask

    def _device_statistics(self, xp, n_gallery, dtype, where):
        return [*super()._device_statistics(xp, n_gallery, dtype, where),
                device_path.RowTopKUnion(xp, n_gallery, int(self.k), where)]

    def _device_gallery_bank_statistics(self, xp, n_gallery, dtype, where):
        return [*super()._device_gallery_bank_statistics(xp, n_gallery, dtype, where),
                device_path.RowTopKUnion(xp, n_gallery, int(self.k), where)]

    def _learn_device(self, xp, statistics):
        super()._learn_device(xp, statistics)
        self.activated_ = statistics[1].mask
        self.gallery_bank_activated_ = None

    def _device_scores(self, xp, sims):
        """Each row in the form its top-1's open gates select (see ``_score``)."""
        top1 = xp.argmax(sims, axis=1)
        query_open = xp.take(self.activated_, top1)
        gallery_open = (xp.zeros_like(query_open) if self.gallery_bank_activated_ is None
                        else xp.take(self.gallery_bank_activated_, top1))
        forms = (
            (query_open & gallery_open, self._excess),
            (query_open & ~gallery_open, self._query_excess),
            (gallery_open & ~query_open, self._gallery_excess),
        )
        scores = sims  # rows whose gates are both closed stay raw
        for rows, excess in forms:  # three row forms, each a whole block
            if excess is not None:
                scores = xp.where(rows[:, None], sims - xp.astype(excess, sims.dtype), scores)
        return scores

    def _gated_biases(self):
        """The bias of each combination of open gates (see ``_score``), gated by the top-1."""
        query, gallery = self.activated_, self.gallery_bank_activated_
        if gallery is None:
            return [(self._query_excess, query)]
        return [
            (self._excess, query & gallery),
            (self._query_excess, query & ~gallery),
            (self._gallery_excess, gallery & ~query),
        ]

    def _score(self, sims, columns, row_state, out):
        # Every row as the dual IS, then the rows with a closed gate restored.
        super()._score(sims, columns, row_state, out)
        top1 = sims.argmax(axis=1) if row_state is None else row_state[1]
        query_open = self.activated_[top1]
        gallery_open = (
            np.zeros_like(query_open) if self.gallery_bank_activated_ is None
            else self.gallery_bank_activated_[top1]
        )
        one_factor = (
            (query_open & ~gallery_open, self._query_excess),
            (gallery_open & ~query_open, self._gallery_excess),
        )
        for rows, excess in one_factor:
            if rows.any():
                out[rows] = sims[rows] - excess[columns].astype(sims.dtype)
        raw = ~(query_open | gallery_open)
        if raw.any():
            out[raw] = sims[raw]
