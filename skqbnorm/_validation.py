"""Argument checks shared by the whole package; every message names the parameter and its shape."""

import concurrent.futures
import math
import multiprocessing
import numbers
import os
import sys
import threading
import warnings
from contextlib import contextmanager

import joblib
import numpy as np
import sklearn
from scipy.sparse import issparse
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_array, column_or_1d

from ._core import all_finite, check_finite_block, prepare_embeddings

# Frames a warning looks past, to the caller's line: this package's own, and those of
# scikit-learn (its fit wrappers, Pipeline, GridSearchCV) and joblib (GridSearchCV's
# loop, the jobs' threads), which call into it for the user, and the standard library's
# thread pools, at the bottom of a worker thread's stack.
_LIBRARY_DIRS = tuple(
    os.path.dirname(os.path.abspath(module.__file__)) + os.sep
    for module in (sys.modules[__package__], sklearn, joblib, concurrent.futures, multiprocessing)
) + (os.path.abspath(threading.__file__),)


def warn_caller(message, category):
    """``warnings.warn``, attributed to the first caller outside skqbnorm, scikit-learn and joblib.

    A fixed ``stacklevel`` points into the library whenever the same warning is
    reached through another path (``fit_transform``, a subclass, a ``Pipeline``). A
    warning from one of the jobs' threads, whose stack never leaves the library, is
    attributed to the caller that waits on the jobs: the first frame outside the
    library of the thread that is inside skqbnorm with a caller of its own.
    """
    frame = _first_caller(sys._getframe(1))
    if frame is None:
        frame = _waiting_caller()
    if frame is None:  # nothing outside the library anywhere: say where it happened
        warnings.warn(message, category, stacklevel=2)
        return
    module_globals = frame.f_globals
    warnings.warn_explicit(
        message, category, frame.f_code.co_filename, frame.f_lineno,
        module=module_globals.get("__name__"),
        registry=module_globals.setdefault("__warningregistry__", {}),
    )


def _first_caller(frame):
    """The first frame from ``frame`` outwards that is not the library's (or None)."""
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARY_DIRS):
        frame = frame.f_back
    return frame


def _waiting_caller():
    """The caller of the thread (other than this one) that runs skqbnorm from outside it."""
    package = _LIBRARY_DIRS[0]
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        caller, inside = frame, False
        while caller is not None and caller.f_code.co_filename.startswith(_LIBRARY_DIRS):
            inside = inside or caller.f_code.co_filename.startswith(package)
            caller = caller.f_back
        if inside and caller is not None:
            return caller
    return None


def check_group_labels(groups, name="groups"):
    """``groups`` as a 1-D array of list (query) labels of one kind, without NaN.

    NumPy turns a mix of numbers and strings (or of bytes and strings) into one
    kind, so that ``1`` and ``"1"`` would name the same list: a mix is refused, as
    is NaN (never equal to itself).
    """
    with naming(name, groups):
        labels = column_or_1d(groups)
    if labels.dtype.kind in "fc":
        _refuse_nan(np.isnan(labels), name)
    elif labels.dtype.kind in "USO":  # NumPy may have read a mix of kinds as one
        values = np.asarray(groups, dtype=object).ravel()
        _refuse_nan([isinstance(value, numbers.Real) and math.isnan(value) for value in values], name)
        kinds = {}
        for value in values:
            kinds.setdefault("strings" if isinstance(value, str) else "bytes"
                             if isinstance(value, bytes) else "numbers", value)
        if len(kinds) > 1:
            (kind, example), (other, other_example) = list(kinds.items())[:2]
            raise ValueError(
                f"{name} mixes {kind} and {other}, e.g. {example!r} and {other_example!r}: "
                f"they would be compared as one kind (1 and '1' one list); use labels of one "
                "kind."
            )
    return labels


def _refuse_nan(is_nan, name):
    is_nan = np.asarray(is_nan, dtype=bool)
    if is_nan.any():
        raise ValueError(f"{name} must not hold NaN; {name}[{np.flatnonzero(is_nan)[0]}] is nan.")


def check_float_dtype(dtype, name="dtype"):
    """``dtype`` as a NumPy float dtype; anything else (an int dtype would round the
    similarities to zeros) is refused by name."""
    try:
        resolved = np.dtype(dtype)
    except TypeError as error:
        raise ValueError(f"{name} must be a float dtype such as np.float32; got {dtype!r}.") from error
    if resolved.kind != "f":
        raise ValueError(f"{name} must be a float dtype such as np.float32; got {resolved}.")
    return resolved


def check_int(value, name, low, high=None, where=""):
    """``value`` as an int in ``[low, high]``; bools and integral floats are refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be an integer; got {name}={value!r} of type {type(value).__name__}."
        )
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bound}{where}; got {name}={value}.")
    return int(value)


def check_real(value, name, low=None):
    """``value`` as a finite float ``>= low``; bools are refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number; got {name}={value!r} of type {type(value).__name__}."
        )
    if not np.isfinite(value) or (low is not None and value < low):
        bound = "finite" if low is None else f"finite and >= {low}"
        raise ValueError(f"{name} must be {bound}; got {name}={value}.")
    return float(value)


def check_option(value, name, options):
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {options}; got {name}={value!r}.")
    return value


def real_array(values, name):
    """``values`` as a dense array of booleans, integers or floats, or a TypeError naming it."""
    if issparse(values):
        raise TypeError(
            f"{name} must be a dense array; got a sparse matrix of shape {values.shape}."
        )
    try:
        array = np.asarray(values)
    except ValueError:  # a ragged sequence
        lengths = [len(row) if hasattr(row, "__len__") else 1 for row in values]
        raise ValueError(
            f"{name} must be a rectangular array; got a ragged sequence of {len(lengths)} "
            f"rows of lengths {min(lengths)} to {max(lengths)}, which no array shape fits."
        ) from None
    if array.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must hold real numbers; got dtype {array.dtype} (shape {array.shape})."
        )
    return array


def check_vector(values, name, dtype=np.float64):
    """A non-empty 1-D array of finite reals, cast to ``dtype``; the first bad entry is named."""
    array = real_array(values, name)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array; got shape {array.shape}.")
    array = array.astype(dtype, copy=False)
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        raise ValueError(
            f"{name} must be finite; {name}[{bad[0]}] is {array[bad[0]]} "
            f"({bad.size} non-finite of shape {array.shape})."
        )
    return array


def check_labels(values, name, length, of="scores"):
    """Booleans (or 0/1) of shape ``(length,)``: the relevance of every item."""
    labels = np.asarray(values)
    if labels.shape != (length,):
        raise ValueError(
            f"inconsistent numbers of samples: {name} has shape {labels.shape}, "
            f"{of} has shape ({length},)."
        )
    return _booleans(labels, name, name)


def check_relevance(gt, shape, name="gt", of="sims"):
    """A relevance matrix: booleans (or 0/1) of ``shape``, the shape of ``of``, with a
    relevant item in every row (query); returned as booleans."""
    shape = tuple(shape)
    if gt.shape != shape:
        raise ValueError(
            f"A relevance matrix {name} must have the shape of {of} {shape}; got {gt.shape}."
        )
    relevant = _booleans(gt, name, f"A relevance matrix {name}", f" (shape {shape})")
    missing = np.flatnonzero(~relevant.any(axis=1))
    if missing.size:
        raise ValueError(
            f"Every query needs a relevant item in {name} (shape {shape}); "
            f"rows {missing[:5]} have none ({missing.size} of {shape[0]} rows)."
        )
    return relevant


def _booleans(values, name, subject, detail=""):
    """``values`` (an array) as booleans, or an error naming its first entry not 0/1."""
    if values.dtype == bool:
        return values
    binary = values.dtype.kind in "biuf" and np.isin(values, (0, 1))
    if not np.all(binary):
        first = tuple(np.argwhere(~np.broadcast_to(binary, values.shape))[0])
        position = ", ".join(str(index) for index in first)
        raise ValueError(
            f"{subject} must hold booleans or 0/1{detail}; {name}[{position}] is {values[first]}."
        )
    return values.astype(bool)


def check_sims(sims, name="sims"):
    """A non-empty 2-D float32/float64 similarity matrix with finite entries (float16
    read as float32, other reals as float64)."""
    sims = real_array(sims, name)
    if sims.ndim != 2 or sims.size == 0:
        raise ValueError(
            f"{name} must be a non-empty 2-D array of shape (n_queries, n_gallery); "
            f"got shape {sims.shape}."
        )
    if sims.dtype not in FLOAT_DTYPES:
        sims = sims.astype(float_dtype(sims, name))
    check_finite_block(sims, slice(0, len(sims)), name=name)
    return sims


FLOAT_DTYPES = (np.float64, np.float32)


def float_dtype(array, name):
    """The dtype blocks of ``array`` are cast to: float32 and float64 kept, float16
    read as float32, anything else as float64.

    Only real numbers are accepted (``dtype="numeric"`` lets datetimes through).
    """
    if array.dtype.kind not in "biuf":
        raise ValueError(
            f"{name} must hold real numbers, got dtype {array.dtype} (shape {array.shape})."
        )
    if array.dtype == np.float16:
        return np.dtype(np.float32)
    return array.dtype if array.dtype in FLOAT_DTYPES else np.dtype(np.float64)


def float_dtypes(array):
    """``check_array``'s ``dtype`` for ``array``: float32 and float64 kept, float16 read
    as float32 (the list alone would widen it to float64), anything else as float64."""
    return np.float32 if getattr(array, "dtype", None) == np.float16 else FLOAT_DTYPES


def describe(array):
    """``shape (m, n), dtype d`` of an array-like, for error messages."""
    try:
        shape = np.shape(array)
    except ValueError:  # a ragged sequence
        return f"a ragged {type(array).__name__}"
    dtype = getattr(array, "dtype", None)
    return f"shape {shape}" + (f", dtype {dtype}" if dtype is not None else "")


@contextmanager
def naming(name, array):
    """Validation errors from scikit-learn, restated to name the parameter and its shape."""
    try:
        yield
    except (ValueError, TypeError) as error:
        kind = ValueError if isinstance(error, ValueError) else TypeError
        raise kind(f"{name}: {error} (got {name} of {describe(array)})") from error


def check_embeddings(X, name, dtype=FLOAT_DTYPES):
    """A validated 2-D array of finite embeddings, or an error naming ``name``.

    Finiteness is tested here, not by check_array, whose sum overflows to NaN (with a
    warning) for finite embeddings near the float maximum.
    """
    if dtype is FLOAT_DTYPES:
        dtype = float_dtypes(X)
    with naming(name, X):
        X = check_array(X, dtype=dtype, ensure_all_finite=False, input_name=name)
    if not all_finite(X):
        bad = tuple(np.argwhere(~np.isfinite(X))[0])
        raise ValueError(
            f"Input {name} contains NaN or infinity: {name} embedding {bad[0]}, "
            f"dimension {bad[1]} is {X[bad]} (embeddings of shape {X.shape})."
        )
    return X


def prepared_gallery(gallery, bank_shape, bank_dtype, metric, bank_name="querybank"):
    """Checked gallery embeddings of the bank's dimension, in their common float dtype,
    prepared for ``metric`` as a fit prepares them (unit rows for cosine)."""
    gallery = check_embeddings(gallery, "gallery")
    if len(bank_shape) != 2 or bank_shape[1] != gallery.shape[1]:
        raise ValueError(
            f"The {bank_name} and gallery embeddings must have the same dimension: "
            f"{bank_name} has shape {bank_shape}, gallery has shape {gallery.shape}."
        )
    dtype = np.result_type(bank_dtype, gallery.dtype)
    return prepare_embeddings(gallery.astype(dtype, copy=False), metric)


class NotBool(Interval):
    """An ``Interval`` that refuses bools, which Python counts as Integral and Real."""

    def is_satisfied_by(self, val):
        return not isinstance(val, bool) and super().is_satisfied_by(val)
