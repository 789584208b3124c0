"""Query products as a search makes them: fixed parts of rows, each on one BLAS thread.

A search multiplies its queries in parts of ``search_product_rows`` rows, counted
from the first query, and selects from each part in the thread that multiplied it,
while the part is in cache: no BLAS thread waits (spinning) between a product and
its selection. Each product runs on one BLAS thread, so it rounds the same way
whatever the thread count; ``query_products`` (``similarities``) multiplies the same
parts, so that ``transform(similarities(q))`` and ``top_k(queries=q)`` read the same
values, bitwise.
"""

import numpy as np
from sklearn.utils import gen_batches

from ._finite import embedding_products
from ._memory import power_of_two_rows
from ._parallel import in_product_threads

#: MiB and rows, at most, of one part's product.
SEARCH_PRODUCT_MEMORY = 32
SEARCH_PRODUCT_ROWS = 256
#: The fewest rows of a part: BLAS packs the whole gallery for every product, which
#: costs as much as a few rows of it; wider galleries are multiplied in blocks of
#: many rows on the BLAS's own threads (``searches_in_parts``).
MIN_SEARCH_PRODUCT_ROWS = 64


def search_product_rows(n_columns, itemsize):
    """Query rows per product of a search: a power of two, from the gallery size alone."""
    return power_of_two_rows(n_columns, itemsize, SEARCH_PRODUCT_MEMORY, SEARCH_PRODUCT_ROWS)


def searches_in_parts(n_columns, itemsize):
    """Whether searches (and ``query_products``) multiply in parts on one BLAS thread
    each, for a gallery of ``n_columns`` items of ``itemsize`` bytes."""
    return search_product_rows(n_columns, itemsize) >= MIN_SEARCH_PRODUCT_ROWS


def product_parts(n_queries, n_columns, itemsize):
    """The parts (slices of query rows) that a search of ``n_queries`` multiplies one by one."""
    return list(gen_batches(n_queries, search_product_rows(n_columns, itemsize)))


def query_products(queries, gallery_t, metric, gallery_norm=None, name="queries"):
    """``queries @ gallery_t``, checked (see ``embedding_products``), as a search
    multiplies them: part by part where it does (``searches_in_parts``)."""
    dtype = np.result_type(queries, gallery_t)
    if not searches_in_parts(gallery_t.shape[1], dtype.itemsize):
        return embedding_products(queries, gallery_t, slice(0, len(queries)), name, metric,
                                  gallery_norm=gallery_norm)
    out = np.empty((len(queries), gallery_t.shape[1]), dtype=dtype)

    def multiply(group):
        for part in group:
            embedding_products(queries[part], gallery_t, part, name, metric,
                               gallery_norm=gallery_norm, out=out[part])

    in_product_threads(multiply, product_parts(*out.shape, out.itemsize))
    return out
