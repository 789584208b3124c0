"""Sinkhorn normalisation (SN): a log-domain Sinkhorn over the gallery and the querybank."""

import math
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._core import ColumnLogSumExp, all_finite, excess_over_mean
from .._core._array_api import FiniteFlag, check_finite, check_matrix, device, max_float, to_numpy
from .._validation import NotBool, warn_caller
from . import _array_api_path as device_path
from ._base import QueryBankNormalizer
from ._bias import BiasFormMixin
from ._capabilities import Capabilities
from ._gallery_bank import (
    CROSS_NAME,
    GalleryBankInput,
    check_gallery_bank_width,
    check_querybank_sims_columns,
    check_querybank_sims_rows,
    reader,
    refuse_querybank_sims_with_embeddings,
)


def offset_block(block, offsets):
    """``block + offsets`` in the block's dtype, as ``ColumnLogSumExp`` works in it.

    float32 blocks stay float32 (their exponentials are then as fast as IS's), unless
    the sum overflows float32: then it is taken in float64. The sum is C-ordered
    whatever the block's layout, so that row sums add in the same order.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        shifted = np.add(block, offsets.astype(block.dtype), order="C")
    if shifted.dtype != np.float64 and not all_finite(shifted):
        shifted = np.add(block, offsets, dtype=np.float64, order="C")
    return shifted


class OffsetColumnLogSumExp(ColumnLogSumExp):
    """``logsumexp_i(beta * (P[i, j] + offsets[i])) / beta`` for every column j.

    The row offsets are added to each block, row by row, before the block enters
    ``ColumnLogSumExp``'s fixed tree, so the result is as independent of the split
    (``working_memory``, ``n_jobs``, dask chunks) as that of ``ColumnLogSumExp``.
    """

    def __init__(self, n_columns, beta, row_offsets):
        super().__init__(n_columns, beta)
        self.row_offsets = row_offsets

    def update(self, block, rows):
        super().update(offset_block(block, self.row_offsets[rows, None]), rows)

    def _leaves(self, groups):
        # The groups are this reducer's own sums (offset_block), so they are reused in
        # place: the same operations as ColumnLogSumExp's, hence the same values.
        with np.errstate(over="ignore"):
            beta = groups.dtype.type(self.beta)
        if not np.isfinite(beta):
            return super()._leaves(groups)
        largest = groups.max(axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            groups -= largest[:, None, :]
            groups *= beta
        np.exp(groups, out=groups)
        return largest.astype(np.float64), groups.sum(axis=1, dtype=np.float64)


class RowLogSumExp:
    """``logsumexp_j(beta * (P[i, j] + offsets[j])) / beta`` for every row i.

    Every row lies whole in one block, so its value does not depend on the split.
    """

    def __init__(self, beta, column_offsets):
        self.beta = float(beta)
        self.column_offsets = column_offsets
        self.parts = []

    def update(self, block, rows):
        shifted = offset_block(block, self.column_offsets)
        with np.errstate(over="ignore"):
            beta = shifted.dtype.type(self.beta)
        if not np.isfinite(beta):  # a beta beyond float32's range works in float64
            shifted, beta = shifted.astype(np.float64), self.beta
        with np.errstate(over="ignore", invalid="ignore"):
            largest = shifted.max(axis=1)
            shifted -= largest[:, None]
            shifted *= beta  # after the subtraction, so that nothing overflows
        np.exp(shifted, out=shifted)
        with np.errstate(over="ignore"):
            soft_max = largest + np.log(shifted.sum(axis=1, dtype=np.float64)) / self.beta
        self.parts.append((rows.start, soft_max))

    def merge(self, other):
        self.parts.extend(other.parts)

    def result(self, n_rows):
        out = np.empty(n_rows)
        for start, values in self.parts:
            out[start : start + len(values)] = values
        return out


class SinkhornPotentials(NamedTuple):
    """The outcome of :func:`sinkhorn_potentials`, in similarity units.

    ``target_soft_max`` is ``c_g = tau * logsumexp_b((P[b, g] + h_b) / tau)``, so that
    ``tau * log u_g = 1 - tau * log N - c_g``; ``bank_potential`` is ``h_b = tau * log v_b``
    for the v that gave u; ``marginal_error`` and ``n_iter`` as in the estimator.
    """

    target_soft_max: np.ndarray
    bank_potential: np.ndarray
    marginal_error: float
    n_iter: int


def sinkhorn_potentials(read_bank, shape, tau, n_iter, tol, first_soft_max=None):
    """Log-domain Sinkhorn over targets x querybank, one streaming pass per half-iteration.

    The kernel is ``K[g, b] = exp((P[b, g] - 1) / tau)`` with marginals ``1 / N`` over the
    N targets (the columns of P) and ``1 / M`` over the M bank rows. In similarity units,
    ``f_g = tau * log u_g - 1`` and ``h_b = tau * log v_b``, each iteration, from ``h = 0``
    (v = 1), runs::

        f_g = -tau * log N - tau * logsumexp_b((P[b, g] + h_b) / tau)   (a column pass)
        h_b = -tau * log M - tau * logsumexp_g((P[b, g] + f_g) / tau)   (a row pass)

    The kernel's constant factor ``exp(-1 / tau)`` is thus carried by u alone, outside
    the iterations, whose potentials keep the scale of the similarities (a constant 1
    beside similarities of 1e-300 would erase them).

    After the u-update the plan ``diag(u) K diag(v)`` has exact row sums ``1 / N``; the
    row pass that follows gives its column sums, ``M * colsum_b = exp((h_b - h'_b) / tau)``
    with h' the updated potential, hence the marginal error
    ``max_b |M * colsum_b - 1|``. Iterations stop once it is at most ``tol``.

    Parameters
    ----------
    read_bank : callable
        ``read_bank(make_reducers)`` runs one pass of ``make_reducers()`` over the
        probe matrix P of shape ``shape`` (bank rows by targets) and returns the merged
        reducers. The targets are the gallery for SN; DBSN appends the gallery
        bank's columns (``s(b, h)``) and keeps the first N entries.
    shape : tuple of int
        ``(M, N)``.
    tau, n_iter, tol : float, int, float
        Temperature, largest number of iterations, tolerance on the marginal error.
    first_soft_max : ndarray of shape (N,), default=None
        The first column pass (``h = 0``: the Inverted Softmax with beta = 1 / tau), if
        already computed.

    Returns
    -------
    potentials : SinkhornPotentials
    """
    n_bank, n_targets = shape
    bank_potential = np.zeros(n_bank)  # v = 1
    soft_max = first_soft_max
    for done in range(1, n_iter + 1):
        if soft_max is None:
            soft_max = _column_pass(read_bank, n_targets, tau, bank_potential)
        target_potential = -tau * np.log(n_targets) - soft_max
        updated = -tau * np.log(n_bank) - _row_pass(read_bank, n_bank, tau, target_potential)
        with np.errstate(over="ignore", invalid="ignore"):
            error = float(np.abs(np.expm1((bank_potential - updated) / tau)).max())
        if error <= tol or done == n_iter:
            return SinkhornPotentials(soft_max, bank_potential, error, done)
        bank_potential, soft_max = updated, None


def _column_pass(read_bank, n_targets, tau, bank_potential):
    """``tau * logsumexp_b((P[b, g] + h_b) / tau)`` for every target g: one pass."""
    (column,) = read_bank(lambda: [OffsetColumnLogSumExp(n_targets, 1.0 / tau, bank_potential)])
    return _checked(column.result(), tau, "gallery")


def _row_pass(read_bank, n_bank, tau, target_potential):
    """``tau * logsumexp_g((P[b, g] + f_g) / tau)`` for every bank row b: one pass."""
    (row,) = read_bank(lambda: [RowLogSumExp(1.0 / tau, target_potential)])
    return _checked(row.result(n_bank), tau, "querybank")


def device_sinkhorn_potentials(xp, read_blocks, shape, tau, n_iter, tol, first_soft_max):
    """:func:`sinkhorn_potentials` on the array API path: the same iterations from
    ``h = 0``, each half-iteration one pass over ``read_blocks()`` (``(rows, block)``
    pairs of P's rows), in ``first_soft_max``'s dtype (float64 where the device has
    it). The marginal error, and whether each pass's soft maxima are finite, are read
    on the host once an iteration, to decide whether to stop.
    """
    n_bank, n_targets = shape
    dtype, where = first_soft_max.dtype, device(first_soft_max)
    bank_potential = xp.zeros(n_bank, dtype=dtype, device=where)  # v = 1
    soft_max = first_soft_max
    for done in range(1, n_iter + 1):
        if soft_max is None:
            soft_max = _device_column_pass(xp, read_blocks, n_targets, tau, bank_potential)
        target_potential = -tau * math.log(n_targets) - soft_max
        with np.errstate(over="ignore", invalid="ignore"):  # NumPy-backed: checked below
            row_soft_max = _device_row_pass(xp, read_blocks, tau, target_potential)
            updated = -tau * math.log(n_bank) - row_soft_max
            change = xp.max(xp.abs(xp.expm1((bank_potential - updated) / tau)))
        error, columns_finite, rows_finite = (float(value) for value in to_numpy(xp.stack([
            change, xp.astype(xp.all(xp.isfinite(soft_max)), dtype),
            xp.astype(xp.all(xp.isfinite(updated)), dtype)])))
        if not columns_finite:
            _checked(np.array([np.inf]), tau, "gallery")
        if not rows_finite:
            _checked(np.array([np.inf]), tau, "querybank")
        if error <= tol or done == n_iter:
            return SinkhornPotentials(soft_max, bank_potential, error, done)
        bank_potential, soft_max = updated, None


def _device_column_pass(xp, read_blocks, n_targets, tau, bank_potential):
    """``tau * logsumexp_b((P[b, g] + h_b) / tau)`` for every target g, on the device."""
    dtype = bank_potential.dtype
    column = device_path.LogSumExp(xp, n_targets, dtype, 1.0 / tau, device(bank_potential))
    with np.errstate(over="ignore", invalid="ignore"):  # NumPy-backed: checked by the caller
        for rows, block in read_blocks():
            column.update(xp.astype(block, dtype) + bank_potential[rows, None])
        return column.result()


def _device_row_pass(xp, read_blocks, tau, target_potential):
    """``tau * logsumexp_g((P[b, g] + f_g) / tau)`` for every bank row b, on the device."""
    beta, parts = 1.0 / tau, []
    for _, block in read_blocks():
        shifted = xp.astype(block, target_potential.dtype) + target_potential
        largest = xp.max(shifted, axis=1, keepdims=True)
        total = xp.sum(xp.exp(beta * (shifted - largest)), axis=1)
        parts.append(largest[:, 0] + xp.log(total) / beta)
    return parts[0] if len(parts) == 1 else xp.concat(parts)


def _checked(soft_max, tau, side):
    if not np.isfinite(soft_max).all():
        raise ValueError(
            f"tau={tau!r} does not suit these similarities: a Sinkhorn soft maximum over the "
            f"{side} overflows float64. Use a larger tau or smaller similarities."
        )
    return soft_max


class SinkhornNormalization(BiasFormMixin, QueryBankNormalizer):
    """Sinkhorn normalisation (SN) of query similarities over a querybank.

    The gallery (N items) and the querybank (M queries) are matched by entropic
    optimal transport: the kernel ``K[g, b] = exp((s(b, g) - 1) / tau)`` is scaled to
    the plan ``diag(u) K diag(v)`` whose rows sum to ``1 / N`` and columns to ``1 / M``
    by Sinkhorn iterations, in the log domain::

        log u = -log N - logsumexp_b(log K[:, b] + log v_b)
        log v = -log M - logsumexp_g(log K[g, :] + log u_g)

    from ``v = 1``. A hub, drawn to many bank queries, gets a small ``u_g``. Scores are a
    bias form in similarity units, the gallery mean of the bias subtracted as in
    :class:`InvertedSoftmax`::

        score(q, g) = s(q, g) + tau * log u_g - mean_g'(tau * log u_g')

    One half-step (``n_iter=1``: ``u`` from ``v = 1``) is the Inverted Softmax with
    ``beta = 1 / tau``: ``tau * log u_g = 1 - tau * log N - c_g`` with ``c_g`` IS's
    ``bank_soft_max_``, and the scores are IS's. Later iterations reweight the bank
    queries (``v``) so that each one also spreads its mass over the gallery.

    Each half-iteration is one streaming pass over the querybank similarities, so a
    fit reads the bank ``2 * n_iter_`` times (the row pass of the last iteration
    measures the convergence); memory is O(N + M). The fitted state is bitwise the
    same for every ``working_memory``, ``n_jobs`` and dask chunking.

    Yakovlev et al. (SIGIR 2023) and the DBSN paper (ACM MM 2025, repository
    ppanzx/DBSN) use tau = 0.01 and 10 iterations; the released code calls
    ``ot.sinkhorn(..., numItermax=10)``, which starts from a uniform ``u`` and updates
    ``v`` first, so its ten iterations are not exactly these ten (the same fixed point).

    The fit rule (shared by every normaliser): ``fit(P)`` takes the precomputed
    bank-by-gallery similarities ``P`` (M x N); ``fit(bank, gallery=G)`` takes bank
    and gallery embeddings and computes the similarities under ``metric``; the
    second positional argument ``y`` is ignored.

    Parameters
    ----------
    tau : float, default=0.03
        Entropic temperature, > 0, in similarity units. The defaults (tau = 0.03, at
        most 100 iterations) were chosen among the settings that converge, by
        cross-validation on the bundled data's training task, never the test
        queries (the user guide's :ref:`normalisers` page). The published setting
        is tau = 0.01 with 10 iterations.
    n_iter : int, default=100
        Largest number of Sinkhorn iterations (each a u-update and a v-update), >= 1.
        Iterations stop earlier at ``tol``: at the defaults, the bundled data's fits
        take 36 (in-domain bank) and 59 (far-domain bank) iterations.
    tol : float, default=1e-2
        Tolerance on the marginal error ``max_b |M * colsum_b - 1|`` of the plan after
        a u-update (its row sums are then exact): no bank query's mass is more than
        ``tol`` (relative) off ``1 / M``. Iterations stop once it is reached, and a
        ``ConvergenceWarning`` says when ``n_iter`` iterations did not reach it. Small
        temperatures converge slowly: on the bundled WordNet data (cosine, M = 4,000,
        N = 2,000), tau = 0.01 leaves an error of 4.2 after 10 iterations and needs
        165, tau = 0.02 needs 74, tau = 0.05 needs 14; the published setting (tau =
        0.01, 10 iterations) is thus far from the transport plan it approximates, and
        warns.
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
    gallery_log_scaling_ : ndarray of shape (n_gallery,)
        ``log u_g``, in float64.
    bank_log_scaling_ : ndarray of shape (n_bank,)
        ``log v_b`` of the plan ``diag(u) K diag(v)`` that ``u`` was computed from.
    marginal_error_ : float
        ``max_b |M * colsum_b - 1|`` of that plan (its rows sum to ``1 / N``).
    n_iter_ : int
        Number of iterations run.
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
    InvertedSoftmax : The first half-step of SN.
    DualBankSinkhornNormalization : SN with a gallery bank among the targets (DBSN).

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import SinkhornNormalization
    >>> rng = np.random.default_rng(0)
    >>> bank_sims = rng.uniform(-0.2, 0.8, size=(100, 5))
    >>> normalizer = SinkhornNormalization(tau=0.1, n_iter=50, tol=1e-6).fit(bank_sims)
    >>> normalizer.n_iter_ < 50, normalizer.marginal_error_ <= 1e-6
    (True, True)
    >>> normalizer.transform(rng.uniform(-0.2, 0.8, size=(3, 5))).shape
    (3, 5)

    Item 1 is a hub, close to both bank queries: it loses its pull on a query
    equally similar to both items.

    >>> normalizer = SinkhornNormalization(tau=0.1).fit([[0.1, 0.8], [0.2, 0.9]])
    >>> normalizer.transform([[0.5, 0.5]]).round(4)
    array([[0.85, 0.15]])
    """

    capabilities = Capabilities(bias_form=True, bank_passes=True, index="bias", array_api=True)
    _not_mergeable_because = (
        "its potentials come from Sinkhorn iterations, each a pass over the whole bank, "
        "which a merge of partial reductions does not give"
    )

    _parameter_constraints: dict = {
        **QueryBankNormalizer._parameter_constraints,
        "tau": [NotBool(Real, 0, np.inf, closed="neither")],
        "n_iter": [NotBool(Integral, 1, None, closed="left")],
        "tol": [NotBool(Real, 0, None, closed="left")],
    }

    def __init__(self, tau=0.03, n_iter=100, *, tol=1e-2, metric="cosine", working_memory=None,
                 n_jobs=None):
        super().__init__(metric=metric, working_memory=working_memory, n_jobs=n_jobs)
        self.tau = tau
        self.n_iter = n_iter
        self.tol = tol

    def _reducers(self, n_bank, n_gallery, dtype):
        return [ColumnLogSumExp(n_gallery, 1.0 / self.tau)]  # the u-update from v = 1

    def _learn_passes(self, reducers, bank, gallery_bank):
        """The Sinkhorn iterations, each half-iteration one more pass of ``bank.read``.

        fit's first pass (``reducers``) is the first u-update, IS's reduction; SN
        takes no gallery bank (``gallery_bank`` is None: fit refuses one).
        """
        first = _checked(reducers[0].result(), self.tau, "gallery")
        self._fit_sinkhorn(bank.read, bank.probe.shape, first)

    def _fit_sinkhorn(self, read_bank, shape, first_soft_max):
        """Fit the scalings of the targets (P's columns), the first n_features_in_ the gallery's.

        Returns the log scalings of the targets beyond the gallery (DBSN's gallery bank).
        """
        fit = sinkhorn_potentials(read_bank, shape, self.tau, self.n_iter, self.tol, first_soft_max)
        return self._learn_potentials(fit, shape[1], excess_over_mean)

    def _learn_potentials(self, fit, n_targets, excess_over_mean):
        """The fitted scalings from the potentials ``fit`` (a ``SinkhornFit`` of either
        path); returns the log scalings of the targets beyond the gallery."""
        n_gallery = self.n_features_in_
        with np.errstate(over="ignore"):  # / tau may overflow: attributes to inspect only
            log_scaling = (1.0 - fit.target_soft_max) / self.tau - math.log(n_targets)
            self.bank_log_scaling_ = fit.bank_potential / self.tau
        self.gallery_log_scaling_ = log_scaling[:n_gallery]
        self.marginal_error_ = fit.marginal_error
        self.n_iter_ = fit.n_iter
        # tau * log u_g less its gallery mean is -(c_g - mean c): the constant drops out.
        self._excess = excess_over_mean(fit.target_soft_max[:n_gallery])[1]
        self._warn_if_not_converged(fit.marginal_error)
        return log_scaling[n_gallery:]

    def _warn_if_not_converged(self, marginal_error):
        if marginal_error > self.tol:
            warn_caller(
                f"{type(self).__name__} did not reach tol={self.tol!r} in n_iter={self.n_iter} "
                f"iterations: the marginal error is {marginal_error:.3g}. Increase n_iter "
                "(or tau), or accept the result: the scores are those of the last iteration.",
                ConvergenceWarning,
            )

    def _gallery_bias(self):
        return self._excess

    def _score(self, sims, columns, row_state, out):
        np.subtract(sims, self._excess[columns].astype(sims.dtype), out=out)

    def _device_statistics(self, xp, n_gallery, dtype, where):
        return [device_path.LogSumExp(xp, n_gallery, dtype, 1.0 / self.tau, where)]  # u from v = 1

    def _learn_device_passes(self, xp, statistics, bank, gallery_bank):
        """The Sinkhorn iterations on the device, each half-iteration a pass over ``bank``."""
        gallery = self.gallery_embeddings_

        def read_blocks():
            return device_path._similarity_blocks(bank, gallery, self)

        shape = (bank.shape[0], self.n_features_in_)
        self._fit_device_sinkhorn(xp, read_blocks, shape, statistics[0].result())

    def _fit_device_sinkhorn(self, xp, read_blocks, shape, first_soft_max):
        """``_fit_sinkhorn`` on the device: the fitted scalings stay there."""
        if not bool(xp.all(xp.isfinite(first_soft_max))):
            _checked(np.array([np.inf]), self.tau, "gallery")
        fit = device_sinkhorn_potentials(xp, read_blocks, shape, self.tau, self.n_iter, self.tol,
                                         first_soft_max)
        return self._learn_potentials(fit, shape[1], lambda values: device_path.excess_over_mean(xp, values))

    def _device_scores(self, xp, sims):
        return sims - xp.astype(self._excess, sims.dtype)


class DualBankSinkhornNormalization(SinkhornNormalization):
    """Dual-bank Sinkhorn normalisation (DBSN): the gallery bank joins the gallery.

    As :class:`SinkhornNormalization`, with the Sinkhorn's targets extended by a
    *gallery bank* ``B_g`` (M_g samples of the gallery modality that are not in the
    gallery, e.g. training videos): the N gallery items and the M_g gallery-bank
    items share the querybank's mass, with marginals ``1 / (N + M_g)`` over the
    targets and ``1 / M`` over the M bank queries, and the kernel
    ``K[t, b] = exp((s(b, t) - 1) / tau)`` for every target t, which needs
    ``s(b, h)`` between the querybank and the gallery bank. Only the test gallery's
    scalings u are kept; scores are a bias form, as SN's::

        score(q, g) = s(q, g) + tau * log u_g - mean_g'(tau * log u_g')

    (the mean over the test gallery). A bank query that the gallery bank attracts
    spends its mass there, so it pushes the test gallery's hubs down less: the
    gallery bank lets the bank queries that are far from the test gallery drop out.

    Each half-iteration is one streaming pass over the querybank rows, reading
    ``[s(b, g) | s(b, h)]`` block by block; memory is O(N + M_g + M). The fitted
    state is bitwise the same for every ``working_memory``, ``n_jobs`` and dask
    chunking of the querybank. Without a gallery bank (as scikit-learn's checks
    and pipelines fit it) this is exactly :class:`SinkhornNormalization`.

    The fit rule: ``fit(P, querybank_to_gallery_bank=C)`` takes the precomputed
    querybank similarities to the gallery, ``P`` (M x N), and to the gallery bank,
    ``C = [s(b, h)]`` (M x M_g, rows in P's order, so that ``GridSearchCV`` splits
    them with the folds); ``gallery_bank=P_g`` (M_g x N, the gallery bank's
    similarities to the gallery, as DBNorm takes it) may be passed beside ``C``
    and is then only checked against it. ``fit(bank, gallery=G, gallery_bank=H)``
    takes querybank, gallery and gallery-bank embeddings and computes both
    similarities under ``metric``. The second positional argument ``y`` is ignored.

    Parameters
    ----------
    tau : float, default=0.03
        Entropic temperature, > 0, in similarity units (SN's default, chosen for
        both as :class:`SinkhornNormalization` describes).
    n_iter : int, default=100
        Largest number of Sinkhorn iterations (each a u-update and a v-update), >= 1.
        At the defaults, the bundled data's fits (with its 3,000-word gallery bank)
        stop at ``tol`` after 39 (in-domain bank) and 20 (far-domain bank) iterations.
    tol : float, default=1e-2
        Tolerance on the marginal error ``max_b |M * colsum_b - 1|`` of the plan
        after a u-update; a ``ConvergenceWarning`` says when ``n_iter`` iterations
        did not reach it.
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
    gallery_log_scaling_ : ndarray of shape (n_gallery,)
        ``log u_g`` of the test gallery items, in float64.
    gallery_bank_log_scaling_ : ndarray of shape (n_gallery_bank,) or None
        ``log u_h`` of the gallery-bank items; None without a gallery bank.
    bank_log_scaling_ : ndarray of shape (n_bank,)
        ``log v_b`` of the plan ``diag(u) K diag(v)`` that ``u`` was computed from.
    marginal_error_ : float
        ``max_b |M * colsum_b - 1|`` of that plan (its rows sum to ``1 / (N + M_g)``).
    n_iter_ : int
        Number of iterations run.
    n_gallery_bank_ : int
        Number of gallery-bank items seen in fit; 0 without a gallery bank.
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
    SinkhornNormalization : The querybank alone.
    DualInvertedSoftmax : DBNorm, the other dual-bank normaliser.

    Examples
    --------
    Bank query 0 prefers gallery item 1, bank query 1 item 0; bank query 1 is also
    close to a gallery-bank item, which takes some of its mass, so item 0 weighs
    less as a hub than under SN:

    >>> import numpy as np
    >>> from skqbnorm import DualBankSinkhornNormalization, SinkhornNormalization
    >>> querybank = [[0.3, 0.8], [0.7, 0.5]]
    >>> querybank_to_gallery_bank = [[0.0], [0.95]]
    >>> dual = DualBankSinkhornNormalization(tau=0.1, n_iter=100, tol=1e-8)
    >>> dual = dual.fit(querybank, querybank_to_gallery_bank=querybank_to_gallery_bank)
    >>> dual.n_gallery_bank_, dual.marginal_error_ <= 1e-8
    (1, True)
    >>> dual.transform([[0.5, 0.5]]).round(4)
    array([[0.7151, 0.2849]])
    >>> single = SinkhornNormalization(tau=0.1, n_iter=500, tol=1e-8).fit(querybank)
    >>> single.transform([[0.5, 0.5]]).round(4)
    array([[0.575, 0.425]])

    Without a gallery bank it is SN:

    >>> single = SinkhornNormalization(tau=0.1).fit(querybank)
    >>> dual = DualBankSinkhornNormalization(tau=0.1).fit(querybank)
    >>> bool(np.array_equal(dual.transform([[0.5, 0.5]]), single.transform([[0.5, 0.5]])))
    True
    """

    capabilities = Capabilities(
        bias_form=True, bank_passes=True, gallery_bank="querybank_to_gallery_bank", index="bias",
        array_api=True,
    )

    def fit(self, X, y=None, *, gallery=None, gallery_bank=None, querybank_to_gallery_bank=None):
        """Run the Sinkhorn iterations over the gallery and gallery bank, against the querybank.

        Parameters
        ----------
        X : array-like of shape (n_bank, n_gallery) or (n_bank, n_dims)
            The querybank similarities to the gallery, or its embeddings when
            ``gallery`` is given. An ``np.memmap`` or a dask array is read
            ``2 * n_iter_`` times, block by block.
        y : None or array-like of shape (n_bank,)
            Ignored; present for ``Pipeline`` and ``GridSearchCV``.
        gallery : array-like of shape (n_gallery, n_dims), default=None
            Gallery embeddings (embedding mode).
        gallery_bank : array-like of shape (n_gallery_bank, n_gallery or n_dims), default=None
            Embedding mode: the gallery-bank embeddings. Precomputed mode: the
            gallery bank's similarities to the gallery, optional beside
            ``querybank_to_gallery_bank`` (unused: DBSN needs ``s(b, h)`` only),
            whose columns must then match its rows; it is read once, for NaN and
            infinity.
        querybank_to_gallery_bank : array-like of shape (n_bank, n_gallery_bank), default=None
            Precomputed mode only: ``s(b, h)``, the querybank's similarities to
            the gallery bank, rows in ``X``'s order. An ``np.memmap`` is read block
            by block.

        Returns
        -------
        self : object
            The fitted normaliser.
        """
        if querybank_to_gallery_bank is not None:
            gallery_bank = GalleryBankInput(gallery_bank, querybank_to_gallery_bank)
        return super().fit(X, y, gallery=gallery, gallery_bank=gallery_bank)

    def fit_transform(self, X, y=None, *, gallery=None, gallery_bank=None,
                      querybank_to_gallery_bank=None):
        """Fit, then normalise the querybank's own similarity rows.

        Parameters
        ----------
        X : array-like of shape (n_bank, n_gallery) or (n_bank, n_dims)
            The querybank, as in :meth:`fit`.
        y : None or array-like of shape (n_bank,), default=None
            Ignored; present for ``Pipeline`` and ``GridSearchCV``.
        gallery : array-like of shape (n_gallery, n_dims), default=None
            Gallery embeddings, as in :meth:`fit`.
        gallery_bank : array-like, default=None
            The gallery bank, as in :meth:`fit`.
        querybank_to_gallery_bank : array-like, default=None
            The querybank's similarities to the gallery bank, as in :meth:`fit`.

        Returns
        -------
        scores : ndarray of shape (n_bank, n_gallery)
            The normalised bank similarities to the gallery.
        """
        if querybank_to_gallery_bank is not None:
            gallery_bank = GalleryBankInput(gallery_bank, querybank_to_gallery_bank)
        return super().fit_transform(X, y, gallery=gallery, gallery_bank=gallery_bank)

    def _learn_passes(self, reducers, bank, gallery_bank):
        """The Sinkhorn iterations over the gallery and, if given, the gallery bank."""
        self.gallery_bank_log_scaling_, self.n_gallery_bank_ = None, 0
        if gallery_bank is None:
            super()._learn_passes(reducers, bank, gallery_bank)
            return
        first = _checked(reducers[0].result(), self.tau, "gallery")
        cross = gallery_bank.querybank_sims(bank.probe)
        (column,) = reader(cross, self.working_memory, self.n_jobs)(
            lambda: [ColumnLogSumExp(cross.shape[1], 1.0 / self.tau)]
        )
        first = np.concatenate([first, _checked(column.result(), self.tau, "gallery bank")])
        targets = gallery_bank.targets(bank.probe, cross)
        read = reader(targets, self.working_memory, self.n_jobs)
        self.gallery_bank_log_scaling_ = self._fit_sinkhorn(read, targets.shape, first)
        self.n_gallery_bank_ = cross.shape[1]

    def _learn_device_passes(self, xp, statistics, bank, gallery_bank):
        """The Sinkhorn iterations on the device over the gallery and, if given, the gallery bank."""
        self.gallery_bank_log_scaling_, self.n_gallery_bank_ = None, 0
        if gallery_bank is None:
            super()._learn_device_passes(xp, statistics, bank, gallery_bank)
            return
        if not isinstance(gallery_bank, GalleryBankInput):
            gallery_bank = GalleryBankInput(gallery_bank)
        if self.gallery_embeddings_ is None:
            read_blocks, n_gallery_bank = self._device_joined_sims(xp, bank, gallery_bank)
        else:
            read_blocks, n_gallery_bank = self._device_target_sims(xp, bank, gallery_bank)
        shape = (bank.shape[0], self.n_features_in_ + n_gallery_bank)
        # The first u-update over every target (fit's pass covered the gallery's alone).
        no_potential = xp.zeros(shape[0], dtype=statistics[0].dtype, device=device(bank))
        first = _device_column_pass(xp, read_blocks, shape[1], self.tau, no_potential)
        self.gallery_bank_log_scaling_ = self._fit_device_sinkhorn(xp, read_blocks, shape, first)
        self.n_gallery_bank_ = n_gallery_bank

    def _device_target_sims(self, xp, bank, gallery_bank):
        """Embedding mode: ``read_blocks`` of the bank against the gallery and the gallery
        bank's embeddings (computed block by block), and the gallery bank's size."""
        where, gallery = device(bank), self.gallery_embeddings_
        embeddings = gallery_bank.gallery_bank
        if embeddings is not None:
            embeddings = device_path.checked_gallery_bank_embeddings(self, xp, embeddings, where)
        if gallery_bank.querybank_sims is not None:
            refuse_querybank_sims_with_embeddings(self, tuple(gallery_bank.querybank_sims.shape))
        targets = xp.concat([gallery, device_path._prepared(xp, embeddings, self.metric)], axis=0)

        def read_blocks():
            return device_path._similarity_blocks(bank, targets, self)

        return read_blocks, embeddings.shape[0]

    def _device_joined_sims(self, xp, bank, gallery_bank):
        """Precomputed mode: ``read_blocks`` of ``[P | s(b, h)]``, the caller's
        ``querybank_to_gallery_bank`` joined to the bank's rows block by block, checked as
        the NumPy path checks them (and a ``gallery_bank`` given beside them), and the
        gallery bank's size."""
        where = device(bank)
        beside = gallery_bank.gallery_bank
        if beside is not None:
            beside = check_matrix(xp, xp.asarray(beside, device=where), "gallery_bank")
            check_gallery_bank_width(self, tuple(beside.shape), self.n_features_in_, "gallery items")
        cross = gallery_bank.querybank_sims
        if cross is not None:
            cross = check_matrix(xp, xp.asarray(cross, device=where), CROSS_NAME)
            check_querybank_sims_columns(self, tuple(cross.shape),
                                         None if beside is None else tuple(beside.shape))
        check_querybank_sims_rows(self, None if cross is None else tuple(cross.shape),
                                  tuple(bank.shape), None if beside is None else tuple(beside.shape))
        if beside is not None:  # given beside s(b, h), unused, but not to be taken broken
            self._check_finite_blocks(
                xp, where, lambda: device_path._similarity_blocks(beside, None, self), "gallery_bank")
        dtype = max_float(xp, where)

        def read_blocks():
            for rows, block in device_path._similarity_blocks(bank, None, self, cross.shape[1]):
                yield rows, xp.concat([xp.astype(block, dtype), xp.astype(cross[rows, :], dtype)],
                                      axis=1)

        self._check_finite_blocks(
            xp, where, lambda: device_path._similarity_blocks(cross, None, self), CROSS_NAME,
            row_name="querybank", item="gallery-bank item")
        return read_blocks, cross.shape[1]

    def _check_finite_blocks(self, xp, where, read_blocks, name, **naming):
        """A bad value of ``read_blocks()``'s blocks named as the NumPy path names it, the
        answer read once."""
        finite = FiniteFlag(xp, where)
        for _, block in read_blocks():
            finite.add(block)
        if not finite:
            for rows, block in read_blocks():
                check_finite(xp, block, rows, name, **naming)

