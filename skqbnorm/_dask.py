"""Dask arrays in and out: blockwise fit statistics and lazy transforms.

Dask is an optional dependency (``pip install skqbnorm[dask]``): nothing here
imports it unless a dask array is passed.
"""

import numpy as np

from ._core import ProbeMatrix, alignment, reduce_rows


def is_dask_array(array):
    return type(array).__module__.split(".")[0] == "dask" and hasattr(array, "to_delayed")


def as_float(array):
    """A dask array of a float dtype (float32 kept, anything else as float64).

    Callers have checked that it is 2-D and has the fitted number of columns.
    """
    if not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"Expected a numeric dask array, got dtype {array.dtype}.")
    return array if array.dtype in (np.float32, np.float64) else array.astype(np.float64)


def reduce_dask_bank(bank, gallery_t, metric, make_reducers, working_memory, first_row=0):
    """Fit reductions over a dask bank: one task per block of rows, merged as a tree.

    The bank is rechunked to whole rows (a row's top-k needs every gallery item)
    and to whole leaves of the reduction trees (see ``ColumnTree``), so each task
    holds one row block; the partial reducers, made here so that every task's
    agree, are merged pairwise. ``first_row`` numbers the bank's first row (a
    multiple of the alignment: ``partial_fit`` appends rows to a bank).
    """
    import dask

    bank = as_float(bank)
    # Bank rows meet the gallery in their common dtype (the gallery's, promoted at fit),
    # as a NumPy bank's do.
    dtype = bank.dtype if gallery_t is None else gallery_t.dtype
    align = ProbeMatrix(bank, gallery_t, metric, dtype).alignment(alignment(make_reducers()))
    bank = bank.rechunk({0: -(-bank.chunks[0][0] // align) * align, 1: -1})
    offsets = first_row + np.cumsum((0,) + bank.chunks[0][:-1])
    parts = [
        dask.delayed(_reduce_block)(
            block, gallery_t, metric, dtype, make_reducers(), int(offset), working_memory
        )
        for block, offset in zip(bank.to_delayed().ravel(), offsets)
    ]
    while len(parts) > 1:
        parts = [dask.delayed(_merge)(*parts[i : i + 2]) for i in range(0, len(parts), 2)]
    return parts[0].compute()


def _reduce_block(block, gallery_t, metric, dtype, reducers, first_row, working_memory):
    probe = ProbeMatrix(block, gallery_t, metric, dtype)
    return reduce_rows(probe, reducers, first_row, working_memory)


def _merge(reducers, others=None):
    if others is not None:
        for reducer, other in zip(reducers, others):
            reducer.merge(other)
    return reducers


def transform_dask(normalizer, sims, needs_whole_rows):
    """A lazy transform of a dask array, chunked like its input."""
    sims = as_float(sims)
    whole = sims.rechunk({1: -1}) if needs_whole_rows and sims.numblocks[1] > 1 else sims
    scores = whole.map_blocks(_score_block, normalizer, dtype=sims.dtype)
    return scores.rechunk(sims.chunks) if whole is not sims else scores


def _score_block(block, normalizer, block_info=None):
    rows, columns = (slice(*location) for location in block_info[0]["array-location"])
    # Blocks hold whole rows wherever the method needs them (see transform_dask).
    return normalizer._score_block(block, columns, None, rows)
