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


def embedding_products(queries, gallery_t, rows, name, metric, first_column=0):
    """``queries @ gallery_t``, or an error naming a non-finite embedding or an overflow."""
    with np.errstate(over="ignore", invalid="ignore"):
        sims = queries @ gallery_t
    if all_finite(sims):
        return sims
    if not all_finite(queries):  # dask banks reach here unchecked
        bad = np.argwhere(~np.isfinite(queries))[0]
        raise ValueError(
            f"Input {name} contains NaN or infinity: embedding {rows.start + bad[0]}, "
            f"dimension {bad[1]} is {queries[tuple(bad)]}."
        )
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
