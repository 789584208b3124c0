"""Means and moments in float64 that neither overflow nor underflow at any scale."""

import numpy as np

from ._finite import all_finite


def excess_over_mean(values):
    """``(mean, values - mean)`` of a 1-D array, the mean by ``finite_mean``.

    Equal values have no excess at all: the soft maxima of similarities far below
    ``log(M) / beta`` all round to ``log(M) / beta``, and a mean one ulp off would
    shift every score by more than the similarities themselves.
    """
    mean = float(finite_mean(values, axis=0))
    if len(values) and (values == values[0]).all():
        mean = float(values[0])
    with np.errstate(over="ignore"):  # an overflow shows in the scores, which are checked
        return mean, values - mean


def finite_mean(values, axis):
    """Mean in float64 that does not overflow for finite values near the float64 maximum."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean = values.mean(axis=axis, dtype=np.float64)
    if all_finite(mean):
        return mean
    exponent = int(values.shape[axis]).bit_length()  # 2**exponent > the count: exact scaling
    return np.ldexp(np.ldexp(values, -exponent).mean(axis=axis, dtype=np.float64), exponent)

def moments(values, axis):
    """Mean and population standard deviation over ``axis``, in float64 (see ColumnMoments).

    Two passes about the first entry, in units of a power of two per result (exact),
    set by the largest magnitude: nothing overflows or underflows at any scale, and
    a constant gives exactly its value and a standard deviation of exactly 0.
    """
    if values.dtype == np.float32:
        # float32 values, their differences and squares neither overflow nor underflow
        # in float64: the scaling, exact and so bitwise neutral, is not needed.
        exponent = 0
        scaled = values.astype(np.float64)
    else:
        largest = np.maximum(values.max(axis=axis), -values.min(axis=axis))
        # |values| < 2**exponent; a product by the power of two is exact, and far faster
        # than ldexp (the floor keeps 2**-exponent finite).
        exponent = np.maximum(np.frexp(largest)[1], -1022)
        factor = np.expand_dims(np.ldexp(1.0, -exponent), axis)
        scaled = np.multiply(values, factor, dtype=np.float64)
    first = np.take(scaled, [0], axis=axis)
    scaled -= first
    shift = scaled.sum(axis=axis, keepdims=True) / values.shape[axis]
    scaled -= shift
    np.square(scaled, out=scaled)
    std = np.sqrt(scaled.sum(axis=axis) / values.shape[axis])
    return np.ldexp((first + shift).squeeze(axis), exponent), np.ldexp(std, exponent)
