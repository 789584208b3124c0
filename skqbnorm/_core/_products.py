"""Query products as a search makes them: fixed tiles, each on one BLAS thread.

A search multiplies its queries in parts of ``search_product_rows`` rows, counted
from the first query, each part a strip of ``STRIP_COLUMNS`` gallery items at a time
(the tiles), and selects from each part once its tiles are in (``search_in_tiles``):
each thread its own parts, or, with fewer parts than threads, the tiles spread over
the threads, so that a few queries still keep every core busy. The BLAS's own threads
never wait (spinning) between a product and its selection. Each tile runs on one BLAS
thread and the tiles follow from the shapes alone, so a product rounds the same way
whatever the thread count; ``query_products`` (``similarities``) multiplies the same
tiles, so that ``transform(similarities(q))`` and ``top_k(queries=q)`` read the same
values, bitwise.
"""

from functools import partial
from itertools import pairwise

import numpy as np

from ._finite import embedding_products
from ._machine import machine, spread_bytes
from ._memory import power_of_two_rows
from ._parallel import in_blas_threads, in_product_threads, one_blas_thread

#: MiB and rows, at most, of one part's product. Fixed, not from the machine: the
#: tiles follow from the shapes alone, and which galleries a search multiplies in
#: tiles is a stated guarantee.
SEARCH_PRODUCT_MEMORY = 32
SEARCH_PRODUCT_ROWS = 256
#: The fewest rows of a part: BLAS packs the gallery for every product, once for all
#: its rows, so that parts of fewer rows pack it too often; wider galleries
#: are multiplied in blocks of many rows on the BLAS's own threads
#: (``searches_in_parts``): up to 32,768 float32 items in parts.
MIN_SEARCH_PRODUCT_ROWS = 256
#: Gallery items per tile: strips of a part's product, so that a part's product spreads
#: over the threads (a single query's too), each strip wide enough for BLAS's kernels
#: (a shape, fixed so that the tiles do not depend on the machine).
STRIP_COLUMNS = 2048
#: A search of fewer parts than threads spreads their tiles over the threads from this
#: gallery size (half the last-level cache: ``spread_bytes``), or this many
#: multiply-adds, fixed as the work that outweighs one dispatch to the threads.
SPREAD_BYTES = spread_bytes(machine())
SPREAD_PRODUCTS = 2**28


def search_product_rows(n_columns, itemsize):
    """Query rows per product of a search: a power of two, from the gallery size alone."""
    return power_of_two_rows(n_columns, itemsize, SEARCH_PRODUCT_MEMORY, SEARCH_PRODUCT_ROWS)


def searches_in_parts(n_columns, itemsize):
    """Whether searches (and ``query_products``) multiply in tiles on one BLAS thread
    each, for a gallery of ``n_columns`` items of ``itemsize`` bytes."""
    return search_product_rows(n_columns, itemsize) >= MIN_SEARCH_PRODUCT_ROWS


def product_parts(n_queries, n_columns, itemsize):
    """The parts (slices of query rows) that a search of ``n_queries`` multiplies one by one."""
    return _batches(n_queries, search_product_rows(n_columns, itemsize))


def product_strips(n_columns):
    """The strips of gallery items (slices) of every part's tiles."""
    return _batches(n_columns, STRIP_COLUMNS)


def _batches(n_items, size):
    """``list(sklearn.utils.gen_batches(n_items, size))``, without its parameter
    validation, whose cost per call is a sizeable part of a one-query search."""
    return [slice(start, min(start + size, n_items)) for start in range(0, n_items, size)]


def query_products(queries, gallery_t, metric, gallery_norm=None, name="queries"):
    """``queries @ gallery_t``, checked (see ``embedding_products``), as a search
    multiplies them: tile by tile where it does (``searches_in_parts``)."""
    dtype = np.result_type(queries, gallery_t)
    if not searches_in_parts(gallery_t.shape[1], dtype.itemsize):
        return embedding_products(queries, gallery_t, slice(0, len(queries)), name, metric,
                                  gallery_norm=gallery_norm)
    out = np.empty((len(queries), gallery_t.shape[1]), dtype=dtype)

    def multiply(rows, columns):
        embedding_products(queries[rows], gallery_t[:, columns], rows, name, metric, columns.start,
                           gallery_norm=gallery_norm, out=out[rows, columns])

    tiles = [(rows, columns) for rows in product_parts(*out.shape, out.itemsize)
             for columns in product_strips(out.shape[1])]
    in_product_threads(partial(_each, multiply), tiles)
    return out


def search_in_tiles(parts, n_columns, n_features, dtype, multiply, select):
    """``select(rows, sims, scratch, part)`` of the rows of every part, in order, once
    ``multiply(rows, columns, out)`` has written the part's tiles into its buffer.

    With at least as many parts as threads, each thread multiplies its parts tile by
    tile and selects from each in turn; with fewer (a few queries), the tiles spread
    over the threads where that is worth its dispatch (``worth_spreading``), then
    pieces of the parts' rows. Each tile runs on one BLAS thread. ``sims`` and
    ``scratch`` are the rows of the part's buffers; ``part``, its rows.
    """
    strips = product_strips(n_columns)
    most = max(rows.stop - rows.start for rows in parts)

    def buffers(n_rows):
        return [np.empty((n_rows, n_columns), dtype) for _ in range(2)]

    def search(group):
        sims, scratch = buffers(most)
        found = []
        for part in group:
            part_sims = sims[: part.stop - part.start]
            for columns in strips:
                multiply(part, columns, part_sims[:, columns])
            found.append(select(part, part_sims, scratch[: part.stop - part.start], part))
        return found

    with one_blas_thread() as n_threads:
        if len(parts) >= n_threads or not worth_spreading(parts, n_columns, n_features, dtype):
            return [found for group in in_blas_threads(search, parts, n_threads) for found in group]
        round_parts = [(part, *buffers(part.stop - part.start)) for part in parts]
        tiles = [(part, columns, sims[:, columns]) for part, sims, _ in round_parts for columns in strips]
        in_blas_threads(partial(_each, multiply), tiles, n_threads)
        pieces = [(rows, sims[rows.start - part.start : rows.stop - part.start],
                   scratch[rows.start - part.start : rows.stop - part.start], part)
                  for part, sims, scratch in round_parts
                  for rows in _pieces(part, -(-n_threads // len(parts)))]
        return [found for group in in_blas_threads(partial(_each, select), pieces, n_threads)
                for found in group]


def worth_spreading(parts, n_columns, n_features, dtype):
    """Whether a few parts' tiles are worth spreading over the threads: where the
    gallery takes ``SPREAD_BYTES`` (each product reads it all, memory-bound for a few
    rows) or the products ``SPREAD_PRODUCTS`` multiply-adds."""
    gallery_bytes = n_columns * n_features * np.dtype(dtype).itemsize
    products = sum(rows.stop - rows.start for rows in parts) * n_columns * n_features
    return gallery_bytes >= SPREAD_BYTES or products >= SPREAD_PRODUCTS


def _pieces(rows, n_pieces):
    """``rows`` (a slice) cut into at most ``n_pieces`` contiguous slices of near-equal size."""
    bounds = np.linspace(rows.start, rows.stop, min(n_pieces, rows.stop - rows.start) + 1).astype(int)
    return [slice(int(start), int(stop)) for start, stop in pairwise(bounds)]


def _each(function, group):
    return [function(*arguments) for arguments in group]
