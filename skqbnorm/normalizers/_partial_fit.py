"""``partial_fit``: a querybank appended in any number of calls, merged as one ``fit`` reads it.

The reducers of the shared fit are mergeable: their trees are keyed by absolute bank
row (see ``ColumnTree``), top-k sets and activation masks merge exactly. A growing
bank is therefore kept as the reducers of its rows so far, in whole aligned groups of
rows (the trees' leaves, or the fixed matrix products of embedding mode), and the
last rows that do not yet fill a group. Each call reduces its new groups at their
absolute row offset and merges them in; the fitted attributes are learned from a
copy of those reducers with the last rows added, exactly as the one ``fit`` on the
concatenated bank reduces its final, partial group.
"""

import copy
from contextlib import contextmanager
from functools import update_wrapper
from types import MethodType

import numpy as np

from .._core import ProbeMatrix, alignment, reduce_rows
from .._dask import is_dask_array, reduce_dask_bank
from .._validation import warn_caller

#: The parameters that may change between partial_fit calls: they change how the
#: rows are read (memory per block, threads), never the merged statistics.
FREE_PARAMS = ("working_memory", "n_jobs")


class PartialFitRefused(AttributeError, ValueError):
    """``partial_fit`` asked of a normaliser whose bank statistic does not merge.

    An ``AttributeError``, so that ``hasattr(normalizer, "partial_fit")`` is False
    (scikit-learn and meta-estimators probe for it), and a ``ValueError`` for the
    caller who calls it anyway.
    """


class MergeableOnly:
    """A method available only where the normaliser's bank statistic merges.

    Reading the attribute on an instance whose class does not declare
    ``capabilities.mergeable``, or whose parameters make the statistic unmergeable
    (``_partial_fit_refusal()`` returns a reason), raises ``PartialFitRefused``,
    which names the method, the reason and what to do.
    """

    def __init__(self, function):
        self.function = function
        update_wrapper(self, function)

    def __get__(self, instance, owner=None):
        if instance is None:
            return self.function
        reason = refusal(instance)
        if reason is not None:
            name = type(instance).__name__
            raise PartialFitRefused(
                f"{name} does not support partial_fit: {reason}. Fit {name} on the whole "
                "querybank at once (fit(X) with every bank row), or use a normaliser whose "
                "capabilities.mergeable is True."
            )
        return MethodType(self.function, instance)


def refusal(normalizer):
    """Why ``normalizer`` cannot merge its bank statistic over calls, or None.

    A wrapper without capabilities of its own (``QueryBankGate``) answers by its
    ``_partial_fit_refusal()``.
    """
    capabilities = getattr(type(normalizer), "capabilities", None)
    if capabilities is None:
        return normalizer._partial_fit_refusal()
    if not capabilities.mergeable:
        return getattr(normalizer, "_not_mergeable_because", "its bank statistic is not a mergeable reduction")
    return normalizer._partial_fit_refusal()


def fixed_params(estimator, prefix=""):
    """The parameters of ``estimator`` that fix its merged statistics (all but
    ``FREE_PARAMS``), their names under ``prefix``."""
    return {f"{prefix}{name}": value for name, value in estimator.get_params(deep=False).items()
            if name not in FREE_PARAMS}


def check_same_params(first, now, owner, holder):
    """Refuse a parameter of ``now`` that differs from the first call's (``first``).

    ``owner`` names the estimator, ``holder`` what keeps the first call's values.
    """
    for name, value in first.items():
        current = now.get(name)
        if type(current) is not type(value) or current != value:
            raise ValueError(
                f"{name}={current!r} differs from the {name}={value!r} of the first partial_fit "
                f"call: {holder} hold {name}={value!r}. Restore it, or fit a new {owner} on "
                "the whole querybank."
            )


def warn_if_fitted_by_fit(estimator, fitted_attribute):
    """Warn that a ``partial_fit`` after ``fit`` starts a new bank (``fitted_attribute``
    is set by ``fit``, and no bank is being grown)."""
    if hasattr(estimator, fitted_attribute):
        warn_caller(
            f"{type(estimator).__name__} was fitted by fit, which keeps nothing to append "
            "rows to: partial_fit starts a new querybank from these rows. To grow a bank, "
            "give it to partial_fit from its first rows on.",
            UserWarning,
        )


def check_width(owner, shape, width, what):
    """Refuse rows of ``shape`` whose width is not the first call's ``width`` (``what``
    the columns are)."""
    if shape is not None and len(shape) == 2 and shape[1] != width:
        raise ValueError(
            f"X has {shape[1]} features, but {owner} is expecting {width} features as input: "
            f"partial_fit got X of shape {tuple(shape)}, and the first call's rows had "
            f"{width} columns ({what})."
        )


@contextmanager
def unchanged_on_error(estimator):
    """Restore every attribute of ``estimator`` if the block raises: a refused call
    changes nothing. The fitted attributes are replaced by each call, never
    modified in place, so a shallow copy of them is enough."""
    saved = dict(vars(estimator))
    try:
        yield
    except BaseException:
        vars(estimator).clear()
        vars(estimator).update(saved)
        raise


class BankStream:
    """The rows of one bank that ``partial_fit`` has read so far.

    ``reducers`` hold the first ``n_reduced`` rows, a multiple of ``align``;
    ``pending`` the rows after them (fewer than ``align``, already in ``dtype``).
    ``factory`` names the normaliser's method that makes fresh reducers.

    Parameters
    ----------
    factory : str
        ``"_reducers"`` or ``"_gallery_bank_reducers"``.
    dtype : numpy dtype
        The dtype of the similarity blocks (the fitted gallery's in embedding mode).
    input_dtype : numpy dtype
        The float dtype the first call's rows are read as; later calls must match it.
    n_columns : int
        The width of the rows (gallery items, or embedding dimensions).
    name : str
        What error messages call the rows.
    """

    def __init__(self, factory, dtype, input_dtype, n_columns, name):
        self.factory, self.dtype, self.input_dtype, self.name = factory, np.dtype(dtype), input_dtype, name
        self.reducers, self.n_reduced, self.align = None, 0, None
        self.pending = np.empty((0, n_columns), dtype=self.dtype)

    @property
    def n_rows(self):
        return self.n_reduced + len(self.pending)

    def appended(self, normalizer, rows):
        """A new stream holding this one's rows, then ``rows`` (this one is unchanged)."""
        stream = shared_gallery_copy(self, normalizer)
        if stream.align is None:
            stream.align = normalizer_alignment(normalizer, stream, rows)
        stream._append(normalizer, rows)
        return stream

    def _append(self, normalizer, rows):
        if len(self.pending):
            head = self._as_array(rows[: self.align - len(self.pending)])
            rows = rows[len(head) :]
            self.pending = np.concatenate([self.pending, head])
            if len(self.pending) < self.align:
                return
            self._merge(reduce_at(normalizer, self, self.pending, self.n_reduced))
            self.pending = self.pending[:0]
        whole = len(rows) - len(rows) % self.align
        if whole:
            self._merge(reduce_at(normalizer, self, rows[:whole], self.n_reduced))
        self.pending = self._as_array(rows[whole:])

    def _merge(self, reducers):
        if self.reducers is None:
            self.reducers = reducers
        else:
            for reducer, other in zip(self.reducers, reducers):
                reducer.merge(other)

    def _as_array(self, rows):
        return np.array(rows, dtype=self.dtype, copy=True).reshape(-1, self.pending.shape[1])

    def learned_reducers(self, normalizer):
        """The reducers of every row so far, the pending rows reduced at their offset."""
        reducers = shared_gallery_copy(self.reducers, normalizer)
        if len(self.pending):
            last = reduce_at(normalizer, self, self.pending, self.n_reduced, count=False)
            if reducers is None:
                return last
            for reducer, other in zip(reducers, last):
                reducer.merge(other)
        return reducers


def shared_gallery_copy(value, normalizer):
    """A deep copy of ``value`` whose arrays on the fitted gallery's memory (the
    gallery that bank-row reducers hold) stay shared: a gallery may be large."""
    gallery = normalizer.gallery_embeddings_
    memo = {}
    if gallery is not None:
        for reducer in getattr(value, "reducers", value) or ():
            for array in vars(reducer).values():
                if isinstance(array, np.ndarray) and np.may_share_memory(array, gallery):
                    memo[id(array)] = array
    return copy.deepcopy(value, memo)


def gallery_t_of(normalizer):
    gallery = normalizer.gallery_embeddings_
    return None if gallery is None else gallery.T


def make_reducers(normalizer, stream):
    n_gallery = normalizer.n_features_in_
    return lambda: getattr(normalizer, stream.factory)(stream.n_rows, n_gallery, stream.dtype)


def normalizer_alignment(normalizer, stream, rows):
    """Rows per group that the calls' reductions keep whole: one ``fit``'s alignment,
    which depends on the gallery and the dtype alone."""
    probe = ProbeMatrix(rows[:1], gallery_t_of(normalizer), normalizer.metric, stream.dtype)
    return probe.alignment(alignment(make_reducers(normalizer, stream)()))


def reduce_at(normalizer, stream, rows, first_row, count=True):
    """Fresh reducers over ``rows``, numbered from ``first_row``; counts them into
    ``stream.n_reduced`` unless ``count`` is False."""
    make = make_reducers(normalizer, stream)
    gallery_t = gallery_t_of(normalizer)
    if is_dask_array(rows):
        reducers = reduce_dask_bank(rows, gallery_t, normalizer.metric, make,
                                    normalizer.working_memory, first_row=first_row)
    else:
        probe = ProbeMatrix(rows, gallery_t, normalizer.metric, stream.dtype, stream.name)
        reducers = reduce_rows(probe, make(), first_row, normalizer.working_memory)
    if count:
        stream.n_reduced += len(rows)
    return reducers


class ReducedBank:
    """A gallery bank that ``partial_fit`` has already reduced, as ``_learn_gallery_bank``
    reads a ``GalleryBank``: ``reduce`` hands back the merged reducers."""

    def __init__(self, normalizer, stream):
        self.normalizer, self.stream = normalizer, stream

    @property
    def shape(self):
        return self.stream.n_rows, self.normalizer.n_features_in_

    def reduce(self, make_reducers):
        return self.stream.learned_reducers(self.normalizer)
