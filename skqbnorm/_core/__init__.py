"""The streaming core: what every layer above reads the bank and the queries with.

Small modules by responsibility, lowest first; none imports anything of skqbnorm
outside this package:

- ``_machine``: the machine's caches and CPUs, and the block sizes that follow;
- ``_memory``: memory budgets and the fixed sizes of matrix products;
- ``_finite``: the fast finiteness test and the errors naming a NaN, an infinity or
  an overflow;
- ``_moments``: means and moments that neither overflow nor underflow;
- ``_probe``: ``ProbeMatrix``, row blocks of the bank-by-gallery similarities;
- ``_products``: query products as a search makes them (tiles on one BLAS thread each);
- ``_trees``: column reductions over a fixed tree of bank rows (soft maxima, means,
  moments), bitwise the same for every split, and ``RowMoments``;
- ``_column_top_k``: the mean of every column's k largest entries;
- ``_top_k``: each row's top 1 and top k (selection, the activation set, merging);
- ``_knn``: exact nearest rows (Euclidean, cosine) from float32 products;
- ``_parallel``: ``reduce_bank``, the driver that runs the reducers in jobs.
"""

from ._column_top_k import ColumnTopKMean, GroupedColumnTopKMean
from ._finite import (
    all_finite,
    check_finite_block,
    embedding_products,
    gallery_item,
    largest_norm,
    products_stay_finite,
)
from ._knn import cosine_top_k, euclidean_neighbors
from ._machine import gathered_values, machine, search_part_bytes, spread_bytes
from ._memory import DEFAULT_WORKING_MEMORY, MIN_PRODUCT_ROWS, PRODUCT_MEMORY, rows_per_chunk
from ._moments import excess_over_mean, finite_mean, moments
from ._parallel import (
    alignment,
    blas_share,
    blas_threads,
    in_blas_threads,
    in_product_threads,
    one_blas_thread,
    one_thread,
    reduce_bank,
    reduce_rows,
    thread_controller,
)
from ._probe import ProbeMatrix, prepare_embeddings
from ._products import (
    SEARCH_PRODUCT_ROWS,
    product_parts,
    product_strips,
    query_products,
    search_in_tiles,
    search_product_rows,
    searches_in_parts,
)
from ._top_k import (
    RowTopKUnion,
    best_k,
    merge_top_k,
    row_top1,
    row_top_k,
    row_top_k_indices,
    take_rows,
    top_k_mask,
)
from ._trees import (
    ColumnLogSumExp,
    ColumnMean,
    ColumnMoments,
    ColumnTree,
    RowMoments,
    leaf_rows,
)

__all__ = [
    "DEFAULT_WORKING_MEMORY",
    "MIN_PRODUCT_ROWS",
    "PRODUCT_MEMORY",
    "SEARCH_PRODUCT_ROWS",
    "ColumnLogSumExp",
    "ColumnMean",
    "ColumnMoments",
    "ColumnTopKMean",
    "ColumnTree",
    "GroupedColumnTopKMean",
    "ProbeMatrix",
    "RowMoments",
    "RowTopKUnion",
    "alignment",
    "all_finite",
    "best_k",
    "blas_share",
    "blas_threads",
    "check_finite_block",
    "cosine_top_k",
    "embedding_products",
    "euclidean_neighbors",
    "excess_over_mean",
    "finite_mean",
    "gallery_item",
    "gathered_values",
    "in_blas_threads",
    "in_product_threads",
    "largest_norm",
    "leaf_rows",
    "machine",
    "merge_top_k",
    "moments",
    "one_blas_thread",
    "one_thread",
    "prepare_embeddings",
    "product_parts",
    "product_strips",
    "products_stay_finite",
    "query_products",
    "reduce_bank",
    "reduce_rows",
    "row_top1",
    "row_top_k",
    "row_top_k_indices",
    "rows_per_chunk",
    "search_in_tiles",
    "search_part_bytes",
    "search_product_rows",
    "searches_in_parts",
    "spread_bytes",
    "take_rows",
    "thread_controller",
    "top_k_mask",
]
