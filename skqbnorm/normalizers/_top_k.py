"""top_k: the k best gallery items per query, without the whole score matrix.

Three strategies share one contract (the result of ``transform`` and a stable sort):
blocks of whole rows, a search by bias without scores, and a running top k over
column chunks of the gallery for galleries too wide for whole rows.
"""

from numbers import Integral

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.utils import gen_batches
from sklearn.utils.validation import check_array, check_is_fitted

from .._core import (
    PRODUCT_MEMORY,
    all_finite,
    blas_share,
    check_finite_block,
    embedding_products,
    in_blas_threads,
    machine,
    merge_top_k,
    product_parts,
    product_strips,
    products_stay_finite,
    row_top_k_indices,
    rows_per_chunk,
    search_in_tiles,
    search_part_bytes,
    searches_in_parts,
)
from .._validation import float_dtype, float_dtypes, naming
from . import _array_api_path as array_api_path

#: Fewest whole query rows per block for which :meth:`TopKMixin.top_k` reads
#: whole rows within ``PRODUCT_MEMORY``; beyond that gallery size it streams the gallery.
MIN_WHOLE_ROWS = 8
#: Bytes of a block's rows that a search by bias ranks at a time, so that a part stays
#: in the cache through its few passes: a quarter of a CPU's share of the last-level
#: cache (``search_part_bytes``).
SEARCH_PART_BYTES = search_part_bytes(machine())


class TopKMixin:
    """``top_k`` of a querybank normaliser; its scores come from ``_score_block``."""

    def top_k(self, X=None, *, queries=None, chunks=None, k=10, return_scores=True):
        """Find the k best gallery items per query, streaming the gallery in column chunks.

        Pass exactly one of ``X``, ``queries`` and ``chunks``. Never materialises
        the n_queries x n_gallery score matrix: query rows are taken in blocks of
        whole rows, each block scored once and cut to its top k without sorting
        whole rows. Blocks of ``X`` fit ``working_memory``, and are
        cut to their top k in as many threads as the BLAS may use
        (``threadpoolctl`` limits both); with ``n_jobs``, blocks are searched in
        parallel jobs, each with its share of the BLAS threads. In embedding
        mode, the queries are multiplied in parts of up to 256 rows (32 MiB), each
        part in strips of 2,048 gallery items on one BLAS thread, over as many
        threads as the BLAS may use, one job per thread already, so that ``n_jobs``
        does not change it (the user guide's page on scale says what ``n_jobs``
        means throughout the package): each thread multiplies
        its parts and cuts each to its top k, or, with fewer parts than threads,
        the strips spread over the threads; :meth:`similarities` multiplies the
        same tiles. Galleries too wide for parts of 256 rows (over 32,768 float32
        items) take one product per block of up to 256 MiB instead. When fewer
        than 8 whole rows fit (a gallery of millions), or when ``chunks`` are
        given, the gallery is streamed in column chunks within ``working_memory``
        with a running top k, and methods whose scores need a whole row (DIS, CSLS,
        GC) read each row twice. The result equals ``transform`` followed by a
        stable sort of each row: ties go to the lowest gallery index.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_gallery), default=None
            Query similarities, e.g. an ``np.memmap`` too large for memory: it is
            read one block at a time.
        queries : array-like of shape (n_queries, n_dims), default=None
            Query embeddings (embedding mode): similarities to each gallery chunk
            are computed under the fitted metric.
        chunks : iterable of array-like of shape (n_queries, width), or callable, default=None
            Query similarities as they arrive, one gallery shard at a time: column
            blocks, in gallery order, whose widths add up to n_gallery. DIS, CSLS
            and GC read them twice, so for these pass a sequence or a function
            that returns a fresh iterable, not a one-shot iterator.
        k : int, default=10
            Number of gallery items per query, at most n_gallery.
        return_scores : bool, default=True
            Whether to return the scores too. Without them, a bias-form method
            ranks each row by ``s - bias`` (``gallery_bias()``; for a gated one,
            the bias of the form its raw top-1 selects), on the product
            overwritten in place in embedding mode, and skips whatever does not
            change a row's ranking (CSLS's per-query ``r_G(q)`` and own top k,
            the softmaxes' exponentials): the same ranking in exact
            arithmetic, while scores within rounding of each other may swap.

        Returns
        -------
        indices : ndarray of shape (n_queries, k)
            Gallery indices, best first. Alone when ``return_scores=False``.
        scores : ndarray of shape (n_queries, k)
            Their normalised scores, in the input's float dtype (the first chunk's).
            Under scikit-learn's ``array_api_dispatch``, both are arrays of the
            namespace and device of ``X`` or ``queries`` (the normalisers whose
            ``capabilities.array_api`` is True; ``chunks`` stay on the host).
        """
        check_is_fitted(self)
        n_gallery = self.n_features_in_
        if isinstance(k, bool) or not (isinstance(k, Integral) and 1 <= k <= n_gallery):
            raise ValueError(
                f"k must be an integer in [1, {n_gallery}] (the fitted gallery size), "
                f"not a bool or a float; got k={k!r}."
            )
        k = int(k)
        if sum(source is not None for source in (X, queries, chunks)) != 1:
            raise ValueError(
                "Pass exactly one of X (query similarities), queries (query embeddings) "
                "and chunks (query similarities by gallery shard)."
            )
        if not isinstance(return_scores, bool | np.bool_):
            raise TypeError(f"return_scores must be True or False; got {return_scores!r}.")
        found = self._top_k(X, queries, chunks, k, return_scores)
        return found if return_scores else found[0]

    def _top_k(self, X, queries, chunks, k, return_scores):
        if array_api_path.on_device(self, X, queries):  # array API inputs under dispatch
            return array_api_path.top_k(self, X, queries, chunks, k, return_scores)
        n_gallery = self.n_features_in_
        if chunks is not None:
            return self._running_top_k(self._given_column_blocks(chunks), k, first_row=0)
        read, n_queries, dtype, vouched = self._query_source(X, queries)
        indices = np.empty((n_queries, k), dtype=np.intp)
        scores = np.empty((n_queries, k), dtype=dtype)
        by_bias = not return_scores and self._ranks_by_bias()
        itemsize = np.dtype(dtype).itemsize
        if X is None and searches_in_parts(n_gallery, itemsize):
            return self._search_products(read, n_queries, dtype, vouched, k, by_bias)
        # Products of many query rows make the most of BLAS; given similarities
        # are read within working_memory.
        budget = PRODUCT_MEMORY if X is None else self.working_memory
        whole_rows = min(n_queries, rows_per_chunk(n_gallery, itemsize, budget, 3))
        if whole_rows >= MIN_WHOLE_ROWS:
            # One read (or matrix product) per block of whole rows: scores need no second pass.
            batches = list(gen_batches(n_queries, whole_rows))

            def search(rows):
                if not by_bias:
                    sims = read(rows, slice(0, n_gallery))
                else:
                    # A product is ours to overwrite, and the finite test of the ranking
                    # covers it; given similarities are neither.
                    owned = X is None
                    sims = read(rows, slice(0, n_gallery), checked=not owned)
                    found = self._search_by_bias(sims, rows, k, in_place=owned, finite=vouched(rows))
                    if found is not None:
                        return found
                    if owned:  # overwritten: the product again, checked
                        sims = read(rows, slice(0, n_gallery))
                return self._search_by_scores(sims, rows, k)

            n_parts = min(effective_n_jobs(self.n_jobs), len(batches))
            with blas_share(n_parts):
                found = Parallel(n_jobs=n_parts, prefer="threads")(map(delayed(search), batches))
            for rows, (block_indices, block_scores) in zip(batches, found):
                indices[rows], scores[rows] = block_indices, block_scores
            return indices, scores
        budget = rows_per_chunk(1, np.dtype(dtype).itemsize, self.working_memory, 4)  # elements
        row_step = min(n_queries, 1024)
        column_step = max(k, budget // row_step)
        for rows in gen_batches(n_queries, row_step):

            def column_blocks(rows=rows):
                return ((columns, read(rows, columns)) for columns in gen_batches(n_gallery, column_step))

            indices[rows], scores[rows] = self._running_top_k(column_blocks, k, first_row=rows.start)
        return indices, scores

    def _ranks_by_bias(self):
        """Whether every row ranks as ``s - bias`` (the bias of its row form, when gated):
        a search without scores needs no more (not a per-row term as CSLS's, nor IS's
        exponential for probabilities)."""
        return self.capabilities.bias_form

    def _search_products(self, product, n_queries, dtype, vouched, k, by_bias):
        """Top k of each query row from its embeddings: the parts of the rows
        (``product_parts``) multiplied tile by tile, then searched, over the threads
        (``search_in_tiles``)."""
        n_gallery = self.n_features_in_
        every = slice(0, n_gallery)
        parts = product_parts(n_queries, n_gallery, np.dtype(dtype).itemsize)
        rank = self._bias_ranker(dtype) if by_bias else None

        def multiply(rows, columns, out, checked=rank is None):
            # A product to be ranked by bias is ours to overwrite, and the finite test
            # of the ranking covers it: it is tested only if the ranking overflows.
            product(rows, columns, checked=checked, out=out)

        def search(rows, sims, scratch, part):
            if rank is not None:
                ranked = rank(sims, rows, in_place=True, finite=vouched(rows))
                if ranked is not None:
                    return row_top_k_indices(ranked, k)
                # Overwritten: the part's tiles again, as they were multiplied, checked.
                products = np.empty((part.stop - part.start, n_gallery), dtype)
                for columns in product_strips(n_gallery):
                    multiply(part, columns, products[:, columns], checked=True)
                sims = products[rows.start - part.start : rows.stop - part.start]
            return row_top_k_indices(self._score_block(sims, every, None, rows, out=scratch), k)

        return _joined([search_in_tiles(parts, n_gallery, self.gallery_embeddings_.shape[1], dtype, multiply,
                                         search)])

    def _search_by_scores(self, sims, rows, k):
        """Top k of each row by its scores, a few rows at a time (see ``_search_in_parts``)."""

        def scored(part, part_rows, out):
            return self._score_block(part, slice(0, sims.shape[1]), None, part_rows, out=out)

        return self._search_in_parts(sims, rows, k, scored)

    def _search_by_bias(self, sims, rows, k, in_place, finite=False):
        """Top k of each row by ``s - bias``, a few rows at a time, or None on overflow
        (see ``_bias_ranker``)."""
        rank = self._bias_ranker(sims.dtype)

        def ranked(part, part_rows, out):
            return rank(part, part_rows, in_place, finite)

        return self._search_in_parts(sims, rows, k, ranked)

    def _bias_ranker(self, dtype):
        """``rank(sims, rows, in_place, finite=False)``: ``sims - bias``, or None on overflow.

        A gated row takes the bias of its form, which follows its raw top-1 (the
        lowest index among ties). ``finite``: the products are known to lie below a
        quarter of the largest float (see ``products_stay_finite``), so that with a
        bias below another quarter ``s - bias`` needs no test.
        """
        if self.capabilities.gated:
            # One bias per row form, then zeros for the rows that no gate admits (form -1).
            forms = [bias for bias, _ in self._gated_biases()]
            biases = np.vstack([*forms, np.zeros(self.n_features_in_)]).astype(dtype)
        else:
            biases = self._gallery_bias().astype(dtype)
        small = bool(np.abs(biases).max(initial=0) < np.finfo(dtype).max / 4)

        def rank(sims, rows, in_place, finite=False):
            bias = biases[self._row_forms(sims.argmax(axis=1))] if biases.ndim == 2 else biases
            return self._bias_ranked(sims, bias, rows, in_place, finite and small)

        return rank

    @staticmethod
    def _search_in_parts(sims, rows, k, rank):
        """Each row's top k by ``rank(part, part_rows, out)`` (None: an overflow, and
        then None), a few rows at a time, in as many threads as the BLAS.

        Each part stays in cache from its ranking through its tests and search: the
        product block itself is tall, for BLAS, and far larger than the cache.
        ``out``: a buffer of the part's shape, one per thread.
        """
        step = _part_rows(sims)

        def search(parts):
            buffer = np.empty((min(step, len(sims)), sims.shape[1]), dtype=sims.dtype)
            found = []
            for part in parts:
                part_rows = slice(rows.start + part.start, rows.start + part.stop)
                ranked = rank(sims[part], part_rows, buffer[: part.stop - part.start])
                if ranked is None:
                    return None
                found.append(row_top_k_indices(ranked, k))
            return found

        found = in_blas_threads(search, list(gen_batches(len(sims), step)))
        return None if any(group is None for group in found) else _joined(found)

    @staticmethod
    def _bias_ranked(sims, bias, rows, in_place, finite=False):
        """``sims - bias``, or None where it overflows (then scores rank).

        ``in_place`` overwrites ``sims``, which must then be finite (a checked
        product); otherwise a NaN or an infinity in ``sims`` is named. ``finite``:
        the result is known to be finite, and is not tested.
        """
        with np.errstate(over="ignore", invalid="ignore"):
            ranked = np.subtract(sims, bias, out=sims if in_place else None)
        if finite or all_finite(ranked):  # then so is sims
            return ranked
        if not in_place:
            check_finite_block(sims, rows, name="X")
        return None

    def _running_top_k(self, column_blocks, k, first_row):
        """Top k of the rows that ``column_blocks()`` yields as (columns, block) pairs."""
        state, best = None, None
        if self.capabilities.whole_rows:
            for columns, block in column_blocks():
                # A NaN in a later chunk would spoil every chunk's scores: name it here.
                rows = slice(first_row, first_row + len(block))
                check_finite_block(block, rows, name="X", first_column=columns.start)
                state = self._row_state(block, columns, state)
        for columns, block in column_blocks():
            rows = slice(first_row, first_row + len(block))
            best = merge_top_k(best, self._score_block(block, columns, state, rows), columns.start, k)
        return best

    def _given_column_blocks(self, chunks):
        """``column_blocks`` for :meth:`_running_top_k` over the caller's gallery shards."""
        if self.capabilities.whole_rows and not callable(chunks) and iter(chunks) is chunks:
            raise ValueError(
                f"{type(self).__name__}.top_k reads chunks twice (its scores need whole rows), "
                "but chunks is a one-shot iterator: pass a list of the chunks or a function "
                "that returns a fresh iterable of them."
            )
        n_gallery = self.n_features_in_

        def column_blocks():
            start, first = 0, None
            for position, chunk in enumerate(chunks() if callable(chunks) else chunks):
                with naming(f"chunks[{position}]", chunk):
                    chunk = check_array(
                        chunk,
                        dtype=float_dtypes(chunk),
                        ensure_all_finite=False,
                        ensure_min_features=0,
                        input_name="chunks",
                    )
                if first is None:
                    first = chunk
                if chunk.shape[0] != first.shape[0] or start + chunk.shape[1] > n_gallery:
                    raise ValueError(
                        f"chunks must be column blocks of the (n_queries, {n_gallery}) query "
                        f"similarities: chunk {position} has shape {chunk.shape} after "
                        f"{start} gallery columns, and the first chunk has {first.shape[0]} rows."
                    )
                if chunk.shape[1]:
                    yield slice(start, start + chunk.shape[1]), chunk.astype(first.dtype, copy=False)
                start += chunk.shape[1]
            if start != n_gallery:
                raise ValueError(
                    f"chunks cover {start} gallery columns, but {type(self).__name__} was "
                    f"fitted on a gallery of {n_gallery}."
                )

        return column_blocks

    def _query_source(self, X, queries):
        """A reader ``read(rows, columns, checked=...)`` of query similarity blocks, n_queries,
        dtype, and ``vouched(rows)``: whether the rows' products are known to be finite.

        Given similarities are read as they are (their checks come later); products
        are tested for overflow unless ``checked=False``.
        """
        if X is not None:
            sims = self._check_query_sims(X, "top_k(queries=...)")
            dtype = float_dtype(sims, "X")  # an integer memmap is cast a block at a time

            def read(rows, columns, checked=False):
                return np.asarray(sims[rows, columns], dtype=dtype)

            return read, sims.shape[0], dtype, lambda rows: False
        prepared = self._prepare_queries(queries)
        gallery, gallery_norm = self._gallery_in(prepared.dtype)

        def product(rows, columns, checked=True, out=None):
            """The products (into ``out``); unless ``checked``, not yet tested for overflow."""
            if not checked:
                with np.errstate(over="ignore", invalid="ignore"):
                    return np.matmul(prepared[rows], gallery[columns].T, out=out)
            return embedding_products(
                prepared[rows], gallery[columns].T, rows, "queries", self.metric, columns.start,
                gallery_norm=gallery_norm, out=out,
            )

        def vouched(rows):
            """Whether the norms vouch for every product of the rows (finite, below max / 4)."""
            return products_stay_finite(prepared[rows], gallery_norm, prepared.dtype)

        return product, prepared.shape[0], prepared.dtype, vouched


def _part_rows(sims):
    """Rows of ``sims`` in one part of a search (``SEARCH_PART_BYTES``, at least one row)."""
    return max(1, SEARCH_PART_BYTES // (sims.shape[1] * sims.itemsize))


def _joined(found):
    """The (indices, values) of every part, in order, from the groups' lists of parts."""
    parts = [part for group in found for part in group]
    return tuple(np.concatenate(arrays) for arrays in zip(*parts))
