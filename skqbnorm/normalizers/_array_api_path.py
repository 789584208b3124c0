"""The array API path of the normalisers of column statistics: fit, transform,
similarities, top_k on the namespace and device of their inputs.

With scikit-learn's ``array_api_dispatch=True`` and inputs of another namespace than
NumPy (torch, CuPy, array-api-strict), the normalisers whose ``capabilities.array_api``
is True compute here instead of on the NumPy path: the bank is read in blocks of
rows bounded by ``working_memory`` (never the whole bank-by-gallery matrix), the
column statistics are combined block by block (a log-sum-exp with a running
maximum, a running top k, running sums and moments), in float64 where the device has it and in float32 where
it has not, and the fitted statistics stay on the input's device. A normaliser
fitted here serves only inputs of the same namespace and device.

Without a ``working_memory``, the blocks take the device's own budget
(``device_working_memory``: a share of a GPU's free memory, or a larger default than
the host's for CPU-backed namespaces). Finiteness is checked on the device and read
once per call, so that blocks do not wait on the host one by one.

The machinery is shared; each normaliser with ``capabilities.array_api`` declares its
own part in its module: ``_device_statistics(xp, n_gallery, dtype, where)`` (the running
statistics below that its fit needs), ``_learn_device(xp, statistics)`` (its fitted
attributes), ``_device_scores(xp, sims)`` (the scores of whole rows) and
``_array_api_refusal()`` (``(setting, reason)`` for parameters that keep the path
closed, else None), and, where its scores take more temporaries than ``N_BUFFERS``
blocks, ``_device_buffers`` (how many blocks of query rows ``working_memory`` holds).
A dual-bank normaliser (``capabilities.gallery_bank``) also declares
``_device_gallery_bank_statistics(xp, n_gallery, dtype, where)`` and
``_learn_device_gallery_bank(xp, gallery_bank)``, which receives ``(statistics,
n_rows)`` of the gallery bank, read as the querybank is, or None without one. A
multi-pass normaliser (``capabilities.bank_passes``) declares
``_learn_device_passes(xp, statistics, bank, gallery_bank)`` in place of
``_learn_device``: it reads the checked bank again with ``_similarity_blocks``.
"""

import math
import warnings

import numpy as np
from sklearn.utils import gen_batches
from sklearn.utils.validation import check_is_fitted

from .._core import rows_per_chunk
from .._core._array_api import (
    FiniteFlag,
    check_finite,
    check_matrix,
    compat,
    device,
    device_working_memory,
    dispatch_enabled,
    max_float,
    namespace,
    namespace_name,
)
from .._core._array_api import top_k as select_top_k
from ._gallery_bank import check_gallery_bank_use, check_gallery_bank_width

#: Blocks of similarities (and their temporaries) that ``working_memory`` holds at once.
N_BUFFERS = 4


def scoring_buffers(estimator):
    """Blocks of query rows that ``working_memory`` holds at once while ``estimator``
    scores them: ``N_BUFFERS``, or its ``_device_buffers`` where its scores need more
    temporaries (the counts within sorted columns)."""
    return getattr(estimator, "_device_buffers", N_BUFFERS)


# -- which path ------------------------------------------------------------------------


def fitted_namespace(estimator):
    """The namespace of a normaliser's fitted statistics when they live on a device
    (fitted on the array API path), else None."""
    reference = _reference(estimator)
    return None if reference is None else compat().array_namespace(reference)


def _is_device_array(value):
    """An array of a namespace other than NumPy's, told without importing anything."""
    if value is None or isinstance(value, np.ndarray):
        return False
    module = type(value).__module__.split(".")[0]
    if module in ("numpy", "dask", "builtins"):
        return False
    return module in DEVICE_MODULES or hasattr(type(value), "__array_namespace__")


#: The array libraries whose arrays live on a device (or stand in for one).
DEVICE_MODULES = ("torch", "cupy", "jax", "jaxlib", "array_api_strict", "dpnp")


def _reference(estimator):
    """A fitted statistic on the device, or None when the normaliser lives on the host."""
    if "n_features_in_" not in estimator.__dict__:
        return None
    return next((value for value in estimator.__dict__.values() if _is_device_array(value)), None)


def device_inputs(*arrays):
    """Whether dispatch is on and an input is an array of another namespace than NumPy."""
    return namespace(*arrays)[1]


def on_device(estimator, *arrays):
    """Whether a call takes the array API path: dispatch is on with an input of another
    namespace, or the normaliser was fitted on one (then the inputs must match it)."""
    return namespace(*arrays)[1] or _reference(estimator) is not None


def refuse_partial_fit(estimator, *arrays):
    """partial_fit keeps the NumPy path: a ValueError for inputs of another namespace."""
    if namespace(*arrays)[1]:
        raise ValueError(
            f"{type(estimator).__name__}.partial_fit takes NumPy, memmap or dask arrays; "
            "under array_api_dispatch, fit the whole querybank on its device with fit, or "
            "move the rows to the host."
        )


def _check_supported(estimator):
    if not type(estimator).capabilities.array_api:
        raise ValueError(
            f"{type(estimator).__name__} does not run on array API inputs (its "
            "capabilities declare array_api=False): pass NumPy arrays (for a torch "
            "tensor, tensor.cpu().numpy()), or use one of the normalisers that do "
            "(their capabilities.array_api is True)."
        )
    refusal = estimator._array_api_refusal()
    if refusal is not None:
        setting, reason = refusal
        raise ValueError(
            f"{type(estimator).__name__}({setting}) does not run on array API inputs: "
            f"{reason}, or pass NumPy arrays (tensor.cpu().numpy())."
        )


def _same_namespace(estimator, method, *arrays):
    """The namespace and device of the call, which must be those of the fitted statistics."""
    check_is_fitted(estimator)
    fitted = fitted_namespace(estimator)
    xp, given = namespace(*arrays)
    name = f"{type(estimator).__name__}.{method}()"
    if (fitted is None or not given or not dispatch_enabled()
            or namespace_name(fitted) != namespace_name(xp)):
        fitted_name = "numpy" if fitted is None else namespace_name(fitted)
        given_name = namespace_name(xp) if given else "numpy (or array_api_dispatch off)"
        raise ValueError(
            f"{name}: the inputs must use the same namespace and device as the fitted "
            f"statistics (fitted on {fitted_name}, given {given_name}). Fit and call it "
            "with arrays of one namespace, under sklearn.config_context(array_api_dispatch=True) "
            "for arrays other than NumPy."
        )
    where = device(_reference(estimator))
    for array in arrays:
        if array is not None and device(array) != where:
            raise ValueError(
                f"{name}: the inputs must use the same namespace and device as the fitted "
                f"statistics (on {where}); got an array on {device(array)}."
            )
    return xp, where


# -- fit -------------------------------------------------------------------------------


def fit(estimator, X, y, gallery, gallery_bank):
    """Fit ``estimator`` on the device of ``X`` (and ``gallery``): its statistics stay there."""
    _check_supported(estimator)
    if y is not None and (y.ndim if hasattr(y, "ndim") else np.ndim(y)) > 1:
        estimator._check_target(np.empty(tuple(y.shape)))  # the NumPy path's error
    check_gallery_bank_use(estimator, gallery_bank)
    xp, _ = namespace(X, gallery)
    estimator.__dict__.pop("_partial_streams", None)
    estimator.__dict__.pop("_gallery_norm", None)
    bank = check_matrix(xp, X, "X (the querybank)")
    where = device(bank)
    if gallery is None:
        estimator.gallery_embeddings_ = None
        n_gallery = bank.shape[1]
    else:
        gallery = xp.asarray(gallery, device=where)  # a NumPy gallery follows the bank
        gallery = _prepared(xp, check_matrix(xp, gallery, "gallery"), estimator.metric)
        if gallery.shape[1] != bank.shape[1]:
            raise ValueError(
                f"The querybank embeddings (shape {tuple(bank.shape)}) and gallery "
                f"(shape {tuple(gallery.shape)}) must have the same number of dimensions."
            )
        dtype = xp.result_type(bank.dtype, gallery.dtype)
        gallery = xp.astype(gallery, dtype)
        bank = xp.astype(bank, dtype)
        estimator.gallery_embeddings_ = gallery
        n_gallery = gallery.shape[0]
    n_bank = bank.shape[0]
    estimator._set_n_gallery(n_gallery)
    estimator._check_sizes(n_bank, n_gallery)
    statistics = estimator._device_statistics(xp, n_gallery, max_float(xp, where), where)
    _stream(xp, where, bank, gallery, estimator, statistics, "querybank")
    if estimator.capabilities.bank_passes:
        estimator._learn_device_passes(xp, statistics, bank, gallery_bank)
        estimator.n_bank_ = n_bank
        return estimator
    estimator._learn_device(xp, statistics)
    if estimator.capabilities.gallery_bank is not None:
        estimator._learn_device_gallery_bank(xp, _gallery_bank_statistics(estimator, xp, gallery_bank,
                                                                          where))
    estimator.n_bank_ = n_bank
    return estimator


def _gallery_bank_statistics(estimator, xp, gallery_bank, where):
    """``(statistics, n_rows)`` of a dual-bank normaliser's gallery bank, read in blocks
    of its rows as the querybank is (``_device_gallery_bank_statistics``), or None."""
    if gallery_bank is None:
        return None
    gallery = estimator.gallery_embeddings_
    if gallery is None:
        rows = check_matrix(xp, xp.asarray(gallery_bank, device=where), "gallery_bank")
        check_gallery_bank_width(estimator, tuple(rows.shape), estimator.n_features_in_,
                                 "gallery items")
    else:
        rows = checked_gallery_bank_embeddings(estimator, xp, gallery_bank, where)
    n_gallery = estimator.n_features_in_
    statistics = estimator._device_gallery_bank_statistics(xp, n_gallery, max_float(xp, where), where)
    _stream(xp, where, rows, gallery, estimator, statistics, "gallery_bank")
    return statistics, rows.shape[0]


def checked_gallery_bank_embeddings(estimator, xp, embeddings, where):
    """A dual-bank normaliser's gallery-bank embeddings on ``where``, checked as the NumPy
    path checks them (a finite matrix of the gallery's width), in the gallery's dtype."""
    gallery = estimator.gallery_embeddings_
    rows = check_matrix(xp, xp.asarray(embeddings, device=where), "gallery_bank")
    check_finite_embeddings(xp, rows, "gallery_bank")
    check_gallery_bank_width(estimator, tuple(rows.shape), gallery.shape[1], "embedding dimensions")
    return xp.astype(rows, gallery.dtype)


def _stream(xp, where, bank, gallery, estimator, statistics, name):
    """Update ``statistics`` with the blocks of ``bank``'s similarities, then name a
    NaN or an infinity among them (the ValueError of the NumPy path for ``name``)."""
    finite = FiniteFlag(xp, where)
    with np.errstate(over="ignore", invalid="ignore"):  # NumPy-backed: non-finite named below
        for _, block in _similarity_blocks(bank, gallery, estimator):
            finite.add(block)
            for statistic in statistics:
                statistic.update(block)
    if not finite:
        for rows, block in _similarity_blocks(bank, gallery, estimator):
            check_finite(xp, block, rows, name)


def check_finite_embeddings(xp, embeddings, name):
    """The NumPy path's ValueError for a NaN or an infinity among ``embeddings``, which
    go to the host only when they hold one."""
    if not bool(xp.all(xp.isfinite(embeddings))):
        from .._core._array_api import to_numpy
        from .._validation import check_embeddings

        check_embeddings(to_numpy(embeddings), name)


def _similarity_blocks(bank, gallery, estimator, n_joined=0):
    """``(rows, similarities)`` of blocks of bank rows, within ``working_memory``; the
    blocks leave room for ``n_joined`` more columns that the caller joins to them."""
    xp = compat().array_namespace(bank)
    n_gallery = bank.shape[1] if gallery is None else gallery.shape[0]
    itemsize = 8 if max_float(xp, device(bank)) == xp.float64 else 4
    budget = device_working_memory(xp, device(bank), estimator.working_memory)
    step = rows_per_chunk(n_gallery + n_joined, itemsize, budget, N_BUFFERS)
    for rows in gen_batches(bank.shape[0], step):
        if gallery is None:
            yield rows, bank[rows, :]
        else:
            yield rows, _prepared(xp, bank[rows, :], estimator.metric) @ gallery.T


def _prepared(xp, embeddings, metric):
    """Unit rows under ``metric="cosine"`` (zero rows stay zero), as on the NumPy path."""
    if metric != "cosine":
        return embeddings
    norms = xp.linalg.vector_norm(embeddings, axis=1, keepdims=True)
    return embeddings / xp.where(norms > 0, norms, xp.ones_like(norms))


class LogSumExp:
    """Per column, ``logsumexp_i(beta * s_i) / beta``, with a running maximum."""

    def __init__(self, xp, n_gallery, dtype, beta, where):
        self.xp, self.dtype, self.beta = xp, dtype, beta
        self.largest = xp.full(n_gallery, -xp.inf, dtype=dtype, device=where)
        self.total = xp.zeros(n_gallery, dtype=dtype, device=where)

    def update(self, block):
        xp = self.xp
        block = xp.astype(block, self.dtype)
        largest = xp.maximum(self.largest, xp.max(block, axis=0))
        self.total = (self.total * xp.exp(self.beta * (self.largest - largest))
                      + xp.sum(xp.exp(self.beta * (block - largest)), axis=0))
        self.largest = largest

    def result(self):
        return self.largest + self.xp.log(self.total) / self.beta


class ColumnMean:
    """Per column, the mean of the bank's similarities, by a running sum."""

    def __init__(self, xp, n_gallery, dtype, where):
        self.xp, self.dtype, self.count = xp, dtype, 0
        self.total = xp.zeros(n_gallery, dtype=dtype, device=where)

    def update(self, block):
        self.total = self.total + self.xp.sum(self.xp.astype(block, self.dtype), axis=0)
        self.count += block.shape[0]

    def result(self):
        return self.total / self.count


class ColumnMoments:
    """Per column, the mean and population standard deviation of the bank's
    similarities: each block's own, combined as Chan, Golub and LeVeque combine them."""

    def __init__(self, xp, n_gallery, dtype, where):
        self.xp, self.dtype, self.count = xp, dtype, 0
        self.mean = xp.zeros(n_gallery, dtype=dtype, device=where)
        self.squares = xp.zeros(n_gallery, dtype=dtype, device=where)

    def update(self, block):
        xp = self.xp
        block = xp.astype(block, self.dtype)
        count = block.shape[0]
        mean = xp.mean(block, axis=0)
        squares = xp.sum((block - mean) ** 2, axis=0)
        total = self.count + count
        delta = mean - self.mean
        self.mean = self.mean + delta * (count / total)
        self.squares = self.squares + squares + delta**2 * (self.count * count / total)
        self.count = total

    def result(self):
        return self.mean, self.xp.sqrt(self.squares / self.count)


class ColumnTopKMean:
    """Per column, the mean of its ``k`` largest entries, by a running top k."""

    def __init__(self, xp, dtype, k):
        self.xp, self.dtype, self.k, self.best = xp, dtype, k, None

    def update(self, block):
        xp = self.xp
        block = xp.astype(block, self.dtype)
        values = block if self.best is None else xp.concat([self.best, block], axis=0)
        self.best = select_top_k(xp, values, min(self.k, values.shape[0]), axis=0)[0]

    def result(self):
        return self.xp.mean(self.best, axis=0)


class RowTopKUnion:
    """The gallery items some bank row has among its top ``k`` (ties: see ``top_k``)."""

    def __init__(self, xp, n_gallery, k, where):
        self.xp, self.k = xp, k
        self.items = xp.arange(n_gallery, device=where)
        self.mask = xp.zeros(n_gallery, dtype=xp.bool, device=where)

    def update(self, block):
        xp = self.xp
        _, best = select_top_k(xp, block, self.k)
        for rank in range(self.k):  # no scatter in the standard: one rank at a time
            self.mask = self.mask | xp.any(best[:, rank:rank + 1] == self.items, axis=0)


def excess_over_mean(xp, values):
    """``(mean, values - mean)`` of a 1-D array of ``xp``, as the NumPy path's: the mean
    in the widest float the device has, scaled by a power of two (exact) where the plain
    sum overflows; equal values have no excess at all."""
    wide = xp.astype(values, max_float(xp, device(values)), copy=False)
    with np.errstate(over="ignore", invalid="ignore"):  # NumPy-backed: rescaled below
        mean = float(xp.mean(wide))
    if not math.isfinite(mean) and bool(xp.all(xp.isfinite(values))):
        scale = 2.0 ** int(values.shape[0]).bit_length()  # above the count: no overflow
        mean = float(xp.mean(wide / scale)) * scale
    if bool(xp.all(values == values[0])):
        mean = float(values[0])
    with np.errstate(over="ignore"):  # NumPy-backed namespaces: an overflow shows in the scores
        return mean, values - mean


def learn_moments(estimator, xp, moments):
    """The bank's column mean and standard deviation (``ColumnMoments``) as the fitted
    statistics of a normaliser that standardises by them, with a scale that is never 0."""
    for name in ("sorted_bank_", "_bank_ranks"):  # an empiric MP's, refitted
        estimator.__dict__.pop(name, None)
    estimator.bank_mean_, estimator.bank_std_ = moments.result()
    std = estimator.bank_std_
    estimator._bank_scale = xp.where(std > 0, std, xp.ones_like(std))


# -- serving ---------------------------------------------------------------------------


def transform(estimator, X):
    """Normalised scores of the query similarities ``X``, on their device, in their dtype."""
    xp, where = _same_namespace(estimator, "transform", X)
    sims = _query_sims(estimator, xp, X)
    budget = device_working_memory(xp, where, estimator.working_memory)
    batches = list(gen_batches(sims.shape[0], rows_per_chunk(sims.shape[1], 8, budget,
                                                             scoring_buffers(estimator))))
    finite = FiniteFlag(xp, where)
    blocks = [_unchecked_scores(estimator, xp, sims[rows, :], finite) for rows in batches]
    if not finite:  # name a bad similarity, or clip or refuse the scores that overflow
        blocks = [score_block(estimator, xp, sims[rows, :], rows) for rows in batches]
    return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)


def similarities(estimator, queries):
    """Similarities of query embeddings to the fitted gallery, on their device."""
    xp, _ = _same_namespace(estimator, "similarities", queries)
    return _prepared(xp, _query_embeddings(estimator, xp, queries), estimator.metric) @ (
        estimator.gallery_embeddings_.T)


def top_k(estimator, X, queries, chunks, k, return_scores):
    """``(indices, scores)`` of each query's ``k`` best gallery items, on the device:
    blocks of query rows within ``working_memory``, each scored and cut to its top k."""
    if chunks is not None:
        raise ValueError(
            f"{type(estimator).__name__}.top_k(chunks=...) reads NumPy chunks on the host; "
            "on the array API path pass X (query similarities) or queries (embeddings)."
        )
    xp, where = _same_namespace(estimator, "top_k", X if queries is None else queries)
    if X is not None:
        sims = _query_sims(estimator, xp, X)

        def read(rows):
            return sims[rows, :]

        n_queries = sims.shape[0]
    else:
        prepared = _prepared(xp, _query_embeddings(estimator, xp, queries), estimator.metric)
        gallery_t = xp.astype(estimator.gallery_embeddings_, prepared.dtype).T

        def read(rows):
            return prepared[rows, :] @ gallery_t

        n_queries = prepared.shape[0]
    budget = device_working_memory(xp, where, estimator.working_memory)
    batches = list(gen_batches(n_queries, rows_per_chunk(estimator.n_features_in_, 8, budget,
                                                         scoring_buffers(estimator))))
    finite = FiniteFlag(xp, where)
    found = [select_top_k(xp, _unchecked_scores(estimator, xp, read(rows), finite), k)
             for rows in batches]
    if not finite:  # name a bad similarity, or clip or refuse the scores that overflow
        found = [select_top_k(xp, score_block(estimator, xp, read(rows), rows), k)
                 for rows in batches]
    return (xp.concat([indices for _, indices in found], axis=0),
            xp.concat([best for best, _ in found], axis=0))


def _query_sims(estimator, xp, X):
    sims = check_matrix(xp, X, "X")
    if sims.shape[1] != estimator.n_features_in_:
        raise ValueError(
            f"X has {sims.shape[1]} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input: the query similarities "
            f"(shape {tuple(sims.shape)}) need one column per fitted gallery item."
        )
    return sims


def _query_embeddings(estimator, xp, queries):
    gallery = estimator.gallery_embeddings_
    if gallery is None:
        raise ValueError(
            f"{type(estimator).__name__} was fitted on precomputed similarities, so it "
            "holds no gallery embeddings; fit it with gallery=... to use query embeddings."
        )
    queries = check_matrix(xp, queries, "queries")
    if queries.shape[1] != gallery.shape[1]:
        raise ValueError(
            f"queries have shape {tuple(queries.shape)} but the fitted gallery embeddings "
            f"have {gallery.shape[1]} dimensions."
        )
    return xp.astype(queries, xp.result_type(queries.dtype, gallery.dtype))


def _unchecked_scores(estimator, xp, sims, finite):
    """The scores of a block of whole query rows, their finiteness added to ``finite``."""
    with np.errstate(over="ignore", invalid="ignore"):  # NumPy-backed namespaces
        scores = estimator._device_scores(xp, sims)
    finite.add(scores)
    return scores


def score_block(estimator, xp, sims, rows):
    """The normalised scores of a block of whole query rows, in its dtype, checked:
    a bad similarity named, probabilities that overflow clipped, other overflow refused."""
    with np.errstate(over="ignore", invalid="ignore"):  # NumPy-backed namespaces: checked below
        scores = estimator._device_scores(xp, sims)
    if not bool(xp.all(xp.isfinite(scores))):
        check_finite(xp, sims, rows, "X")  # a NaN or an infinity of X is named
        if getattr(estimator, "output", "log") == "probability":
            largest = xp.finfo(scores.dtype).max
            warnings.warn(
                f"output='probability' overflows {scores.dtype} for some scores of X (their "
                f"similarities far above the bank's): those probabilities are clipped to "
                f"{largest:.6g}, so they tie. Use output='log' (the same ranking, without "
                "overflow) to rank.",
                RuntimeWarning,
                stacklevel=4,
            )
            return xp.where(xp.isfinite(scores), scores, xp.full_like(scores, largest))
        raise ValueError(
            f"{type(estimator).__name__}'s scores of the finite similarities X overflow "
            f"{scores.dtype} in rows {rows.start} to {rows.stop - 1}: too wide a range for "
            "these scores. Rescale the similarities (and the querybank) to a smaller magnitude."
        )
    return scores


def standardised(xp, sims, mean, scale, dtype):
    """``(sims - mean) / scale`` in ``dtype``, halved first so that no difference overflows."""
    return ((xp.astype(sims, dtype) * 0.5 - xp.astype(mean * 0.5, dtype))
            / xp.astype(scale * 0.5, dtype))


def log_ndtr(xp, z):
    """``log Phi(z)``, the log of the standard normal CDF, finite far into both tails.

    The standard has no error function: ``torch.special.log_ndtr`` on torch,
    ``cupyx.scipy.special.log_ndtr`` on CuPy, and on the others SciPy's, on the host.
    """
    if namespace_name(xp) == "torch":
        import torch

        return torch.special.log_ndtr(z)
    if namespace_name(xp) == "cupy":
        from cupyx.scipy.special import log_ndtr as cupy_log_ndtr

        return cupy_log_ndtr(z)
    from scipy.special import log_ndtr as scipy_log_ndtr

    from .._core._array_api import to_numpy

    return xp.asarray(scipy_log_ndtr(to_numpy(z)), device=device(z))


# -- ranks within the sorted bank columns (GC, the empiric MP) ---------------------------


class SortedColumns:
    """The bank's similarities with every column sorted ascending, kept whole: the
    statistic of the normalisers that rank a similarity within its gallery item's bank
    column (O(M N), in the similarities' dtype). Each column's values lie together in
    memory, as on the NumPy path: ``result()`` is the transpose of its sorted rows."""

    def __init__(self, xp):
        self.xp, self.blocks = xp, []

    def update(self, block):
        self.blocks.append(block)

    def result(self):
        xp = self.xp
        bank = xp.concat(self.blocks, axis=0)
        self.blocks = []
        n_rows, n_columns = bank.shape
        # The transpose in row-major order (reshape copies it so on every namespace):
        # the counts then read each column's values together, and never copy them.
        columns = xp.reshape(xp.reshape(bank.T, (-1,)), (n_columns, n_rows))
        del bank
        return xp.sort(columns, axis=1).T


def count_in_columns(xp, sorted_columns, values, side):
    """Per column ``j``, how many of ``sorted_columns[:, j]`` are below ``values[q, j]``
    (``side="left"``) or at most it (``"right"``), compared exactly in the wider dtype."""
    return count_in_rows(xp, sorted_columns.T, values.T, side).T


def count_in_rows(xp, sorted_rows, values, side):
    """``searchsorted(sorted_rows[r, :], values[r, :], side)`` for every row ``r`` at once.

    The standard's ``searchsorted`` takes one sorted row: ``torch.searchsorted`` on
    torch (rows of one dtype), else a bisection of every value together, a gather
    of each row's probes a step.
    """
    if namespace_name(xp) == "torch" and sorted_rows.dtype == values.dtype:
        import torch

        return torch.searchsorted(sorted_rows.contiguous(), values.contiguous(), side=side)
    dtype = xp.result_type(sorted_rows.dtype, values.dtype)
    values = xp.astype(values, dtype, copy=False)
    n_rows, length = sorted_rows.shape
    flat = xp.reshape(sorted_rows, (-1,))
    row_start = xp.reshape(xp.arange(n_rows, dtype=xp.int64, device=device(values)) * length,
                           (n_rows, 1))
    below = xp.less if side == "left" else xp.less_equal
    position = xp.zeros(values.shape, dtype=xp.int64, device=device(values))

    def holds(offset):  # 1 where sorted_rows[r, position + offset] is below the value
        probed = xp.take(flat, xp.reshape(row_start + (position + offset), (-1,)))
        probed = xp.astype(xp.reshape(probed, values.shape), dtype, copy=False)
        return xp.astype(below(probed, values), xp.int64)

    span = length  # the count lies in [position, position + span]; each probe halves it
    while span > 1:
        half = span // 2
        position = position + holds(half) * half
        span -= half
    return position + holds(0)
