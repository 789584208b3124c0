"""Finiteness: the fast test, and the errors that name the first NaN, infinity or overflow."""

import numpy as np


def all_finite(block):
    """Whether every entry is finite.

    The sum of squares (one BLAS dot product, faster than a sum) is finite unless
    an entry is NaN or infinite or the squares overflow; only then is the slower
    elementwise test needed.
    """
    if block.ndim == 2 and not block.flags.c_contiguous:
        squares = np.einsum("ij,ij->", block, block)  # vdot would copy a strided view
    else:
        squares = np.vdot(block, block)
    return bool(np.isfinite(squares) or np.isfinite(block).all())


def largest_norm(embeddings, axis=1):
    """The largest Euclidean norm of the rows (``axis=1``) or columns, in float64."""
    squares = np.einsum("ij,ij->i" if axis == 1 else "ij,ij->j", embeddings, embeddings, dtype=np.float64)
    return float(np.sqrt(squares.max(initial=0.0)))


def products_stay_finite(queries, gallery_norm, dtype):
    """Whether ``queries`` times a gallery whose norms are at most ``gallery_norm`` cannot overflow.

    By Cauchy-Schwarz ``|x.y| <= |x| |y|``, and a floating-point dot product of
    length d, summed in any order, is within ``gamma_d |x| |y|`` of it, where
    ``gamma_d = d u / (1 - d u) <= 1`` while ``d u <= 1/2`` (so every partial sum is
    at most ``2 |x| |y|`` as well). Below a quarter of the largest float, finite
    embeddings therefore give finite products, and the products need no test of
    their own: a test of the (much smaller) queries serves.
    """
    if gallery_norm is None or queries.shape[1] > 2**22:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        return all_finite(queries) and largest_norm(queries) * gallery_norm < np.finfo(dtype).max / 4


def check_finite_embeddings(embeddings, rows, name):
    """An error naming the first NaN/inf of the embeddings of the rows numbered ``rows``."""
    if all_finite(embeddings):
        return
    bad = np.argwhere(~np.isfinite(embeddings))[0]
    raise ValueError(
        f"Input {name} contains NaN or infinity: {name} embedding {rows.start + bad[0]}, "
        f"dimension {bad[1]} is {embeddings[tuple(bad)]}."
    )


def embedding_products(queries, gallery_t, rows, name, metric, first_column=0, *, gallery_norm=None, out=None):
    """``queries @ gallery_t``, or an error naming a non-finite embedding or an overflow.

    ``gallery_norm``, the largest norm of the gallery's columns, lets the queries'
    norms vouch for the products (see ``products_stay_finite``); ``out`` receives
    the products.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        sims = np.matmul(queries, gallery_t, out=out)
    if products_stay_finite(queries, gallery_norm, sims.dtype) or all_finite(sims):
        return sims
    check_finite_embeddings(queries, rows, name)  # dask banks reach here unchecked
    bad = np.argwhere(~np.isfinite(sims))[0]
    raise ValueError(
        f"The similarity of {name} row {rows.start + bad[0]} to gallery item "
        f"{first_column + bad[1]} "
        f"overflows {sims.dtype} under metric={metric!r}: the {name} and gallery embeddings "
        f"are too large (largest magnitudes {np.abs(queries).max():.3g} and "
        f"{np.abs(gallery_t).max():.3g}). Rescale them, or use metric='cosine'."
    )


def gallery_item(columns, position):
    """The gallery index of a block's column ``position``; ``columns``: a slice or an index array."""
    return (columns.start or 0) + position if isinstance(columns, slice) else int(columns[position])


def check_finite_block(block, rows, name="querybank", first_column=0, *, row_name=None,
                       item="gallery item", items=None):
    """An error naming the first NaN/inf of ``block``: its row (of ``row_name``) and ``item``.

    The block's columns are the items from ``first_column`` on, or ``items`` (a slice
    or an index array, as ``gallery_item`` reads it).
    """
    if all_finite(block):
        return
    bad = np.argwhere(~np.isfinite(block))[0]
    column = first_column + bad[1] if items is None else gallery_item(items, bad[1])
    raise ValueError(
        f"Input {name} contains NaN or infinity: the similarity of {row_name or name} row "
        f"{rows.start + bad[0]} to {item} {column} is {block[tuple(bad)]}."
    )
