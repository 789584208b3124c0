"""QueryBankNormaliser: the contract every querybank normaliser follows."""

from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin, _fit_context
from sklearn.utils import gen_batches
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._core import (
    PRODUCT_MEMORY,
    ProbeMatrix,
    all_finite,
    blas_share,
    check_finite_block,
    embedding_products,
    gallery_item,
    merge_top_k,
    prepare_embeddings,
    reduce_bank,
    row_top_k_indices,
    rows_per_chunk,
)
from .._dask import is_dask_array, reduce_dask_bank, transform_dask
from .._validation import (
    FLOAT_DTYPES,
    NotBool,
    check_embeddings,
    float_dtype,
    naming,
    warn_caller,
)
from ._gallery_bank import check_gallery_bank_use, fit_gallery_bank

#: Fewest whole query rows per block for which :meth:`QueryBankNormaliser.top_k` reads
#: whole rows within ``PRODUCT_MEMORY``; beyond that gallery size it streams the gallery.
MIN_WHOLE_ROWS = 8
#: Bytes of a block's rows that a search by bias ranks at a time (a part stays in the
#: cache through its few passes).
SEARCH_PART_BYTES = 4 * 2**20


def fill_blocks(out, blocks, scores, n_jobs):
    """``out[block] = scores(block)`` for every block (an index of ``out``).

    With one job each block is scored in place (``scores(block, out[block])``);
    with several, each task returns its block, so that process-based backends
    work too.
    """
    if effective_n_jobs(n_jobs) == 1:
        for block in blocks:
            scores(block, out[block])
        return
    found = Parallel(n_jobs=n_jobs, prefer="threads")(delayed(scores)(block) for block in blocks)
    for block, block_scores in zip(blocks, found):
        out[block] = block_scores


class QueryBankNormaliser(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Base class of the querybank normalisers; not for direct use.

    Subclasses define ``_reducers(n_bank, n_gallery, dtype)``, which returns the
    streaming reductions fit needs, ``_learn(reducers)``, which stores their results
    as fitted attributes, and ``_score(sims, columns, row_state, out)``, which
    writes the normalised scores of a block of query rows restricted to the gallery
    ``columns`` (a slice, or an index array: the candidates of a vector index)
    into ``out``. Methods whose scores depend on a whole row (the top-1 of DIS, the
    neighbourhood of CSLS, the range of GC) also define
    ``_row_state(sims, columns, state)``, a reduction over a row's column chunks,
    so that :meth:`top_k` can stream the gallery; ``_score`` receives that state
    for a column chunk, and None for whole rows, whose state it takes itself. A non-finite similarity must
    leave a non-finite score (transform checks the scores, and the input only
    when they fail). Finite scores that overflow are computed again in float64, and
    refused with a ValueError if they still do (see ``_rescore_overflow``).

    Guarantees: finite input gives finite fitted state and finite scores, or a
    ValueError naming the parameter and the value range (probabilities beyond the
    dtype's range are clipped with a warning). The fitted state, hence every score,
    is bitwise the same for every ``working_memory``, ``n_jobs`` and dask chunking:
    sums and soft maxima are combined over a fixed binary tree of aligned groups of
    bank rows (``skqbnorm._core.ColumnTree``). Blocks therefore hold at least one
    such group (at most 16 MiB of float64), and in embedding mode the similarities
    are computed in fixed products of up to 2,048 bank rows (whose rounding is then
    BLAS's, which may depend on the number of BLAS threads each job gets).

    The fit rule, shared by every normaliser:

    - ``fit(P)``: ``P`` (M x N) is the precomputed bank-by-gallery similarity matrix;
    - ``fit(bank, gallery=G)``: ``bank`` (M x d) and ``G`` (N x d) are embeddings and
      the similarities are computed under ``metric``, block by block;
    - ``gallery_bank=`` (dual-bank normalisers only, see ``_gallery_bank.py``): a
      second bank, from the gallery modality, in the querybank's form; every other
      normaliser refuses it;
    - ``y``, the second positional argument, is ignored as in every scikit-learn
      transformer (``Pipeline`` and ``GridSearchCV`` pass a 1-D target there); a 2-D
      ``y`` is refused, because it is almost surely a gallery meant for ``gallery=``.
    """

    _parameter_constraints: dict = {
        "metric": [StrOptions({"cosine", "dot"})],
        "working_memory": [NotBool(Real, 0, np.inf, closed="neither"), None],
        "n_jobs": [NotBool(Integral, None, None, closed="neither"), None],
    }

    def __init__(self, *, metric="cosine", working_memory=None, n_jobs=None):
        self.metric = metric
        self.working_memory = working_memory
        self.n_jobs = n_jobs

    # -- fit -----------------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, *, gallery=None, gallery_bank=None):
        """Learn per-gallery statistics from a querybank.

        Parameters
        ----------
        X : array-like of shape (n_bank, n_gallery) or (n_bank, n_dims)
            The querybank: its precomputed similarities to the gallery (rows are
            bank queries, columns gallery items; an ``np.memmap`` is read block by
            block), or, when ``gallery`` is given, the bank's embeddings.
        y : None or array-like of shape (n_bank,)
            Ignored; present for ``Pipeline`` and ``GridSearchCV``.
        gallery : array-like of shape (n_gallery, n_dims), default=None
            Gallery embeddings. When given, ``X`` holds bank embeddings and the
            similarities are computed under ``metric``, in matrix products of up
            to 2,048 bank rows of up to 256 MiB each, beyond ``working_memory``
            (smaller products run far below BLAS speed); two may be alive at
            once, the next being computed while the last block is still held.
        gallery_bank : array-like of shape (n_gallery_bank, n_gallery or n_dims), default=None
            Samples of the gallery modality that are not in the gallery, for the
            dual-bank normalisers (others refuse it): their similarities to the
            gallery, or, when ``gallery`` is given, their embeddings.

        Returns
        -------
        self : object
            The fitted normaliser.
        """
        self._check_target(y)
        check_gallery_bank_use(self, gallery_bank)
        if is_dask_array(X):
            reducers, n_bank = self._reduce_dask(X, gallery)
        else:
            probe = self._probe(X, gallery)
            n_bank, n_gallery = probe.shape
            self._check_sizes(n_bank, n_gallery)
            reducers = reduce_bank(
                probe, lambda: self._reducers(n_bank, n_gallery, probe.dtype), self.working_memory, self.n_jobs
            )
        self._learn(reducers)
        fit_gallery_bank(self, gallery_bank)
        self.n_bank_ = n_bank
        return self

    def fit_transform(self, X, y=None, *, gallery=None, gallery_bank=None):
        """Fit to the querybank, then normalise the bank's own similarity rows.

        Parameters
        ----------
        X, y, gallery, gallery_bank
            As in :meth:`fit`.

        Returns
        -------
        scores : ndarray of shape (n_bank, n_gallery)
            The normalised bank similarities.
        """
        self.fit(X, y, gallery=gallery, gallery_bank=gallery_bank)
        return self.transform(X if gallery is None else self.similarities(X))

    def _check_target(self, y):
        if y is not None and np.asarray(y).ndim > 1:
            raise ValueError(
                f"y is ignored and must be None or 1-D, got an array of shape {np.asarray(y).shape}. "
                "To fit on embeddings, pass the gallery embeddings as the keyword "
                "argument: fit(bank_embeddings, gallery=gallery_embeddings)."
            )

    def _probe(self, X, gallery):
        # dtype="numeric" keeps an integer memmap as it is: blocks are cast one at a
        # time (ProbeMatrix.block), never the whole array.
        if gallery is None:
            with naming("X (the querybank)", X):
                bank = validate_data(self, X, dtype="numeric", ensure_all_finite=False)
            self.gallery_embeddings_ = None
            return ProbeMatrix(bank, dtype=float_dtype(bank, "X (the querybank)"))
        bank = check_embeddings(X, "querybank", dtype="numeric")
        gallery = self._set_gallery(gallery, bank.shape, float_dtype(bank, "querybank"))
        return ProbeMatrix(bank, gallery.T, self.metric, gallery.dtype)

    def _set_gallery(self, gallery, bank_shape, bank_dtype):
        """Validate and keep the gallery embeddings; the gallery size is n_features_in_."""
        gallery = check_embeddings(gallery, "gallery")
        if len(bank_shape) != 2 or bank_shape[1] != gallery.shape[1]:
            raise ValueError(
                "The querybank and gallery embeddings must have the same dimension: "
                f"querybank has shape {bank_shape}, gallery has shape {gallery.shape}."
            )
        dtype = np.result_type(bank_dtype, gallery.dtype)
        prepared = prepare_embeddings(gallery.astype(dtype, copy=False), self.metric)
        # The fitted gallery is the normaliser's own, whatever later becomes of the caller's.
        self.gallery_embeddings_ = prepared.copy() if np.may_share_memory(prepared, gallery) else prepared
        self._set_n_gallery(gallery.shape[0])
        return self.gallery_embeddings_

    def _set_n_gallery(self, n_gallery):
        """The gallery size is n_features_in_; columns carry no names outside validate_data."""
        self.n_features_in_ = n_gallery
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _reduce_dask(self, bank, gallery):
        """Fit statistics of a dask querybank, computed blockwise."""
        if bank.ndim != 2:
            raise ValueError(f"Expected a 2D dask array, got {bank.ndim}D with shape {bank.shape}.")
        dtype = np.float32 if bank.dtype == np.float32 else np.float64
        if gallery is None:
            self.gallery_embeddings_, gallery_t = None, None
            self._set_n_gallery(bank.shape[1])
        else:  # the rows meet the gallery in their common dtype, as a NumPy bank's do
            gallery_t = self._set_gallery(gallery, bank.shape, dtype).T
            dtype = gallery_t.dtype
        n_bank, n_gallery = bank.shape[0], self.n_features_in_
        if n_bank == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape={bank.shape}) while a minimum of 1 is required.")
        self._check_sizes(n_bank, n_gallery)
        reducers = reduce_dask_bank(
            bank, gallery_t, self.metric, lambda: self._reducers(n_bank, n_gallery, dtype), self.working_memory
        )
        return reducers, n_bank

    def _check_sizes(self, n_bank, n_gallery):
        """Hook for subclasses whose parameters bound the bank or gallery size."""

    def _check_k(self, n_bank, n_gallery, *, gallery=True, bank=False):
        """``k`` may not exceed the gallery (``gallery``) nor the querybank (``bank``)."""
        shape = f"the querybank similarities have shape ({n_bank}, {n_gallery})"
        if gallery and self.k > n_gallery:
            raise ValueError(
                f"k={self.k} is larger than the gallery: {shape}, so k must be at "
                f"most {n_gallery} (n_features = {n_gallery})."
            )
        if bank and self.k > n_bank:
            raise ValueError(
                f"k={self.k} is larger than the querybank: {shape}, so k must be at "
                f"most {n_bank} (n_samples = {n_bank})."
            )

    # -- transform -----------------------------------------------------------------

    def transform(self, X):
        """Normalise query-by-gallery similarities.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_gallery)
            Similarities of new queries to the fitted gallery, one row per query.
            In embedding mode, :meth:`similarities` computes them.

        Returns
        -------
        scores : ndarray of shape (n_queries, n_gallery)
            Normalised scores, higher is better, in the dtype of ``X`` (float32
            stays float32). Only each row's ranking is meaningful across methods.
        """
        check_is_fitted(self)
        if is_dask_array(X):
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(
                    f"X has shape {X.shape}, but {type(self).__name__} is expecting "
                    f"{self.n_features_in_} features as input (one per fitted gallery item)."
                )
            return transform_dask(self, X, self._needs_whole_rows())
        sims = self._check_query_sims(X)
        dtype = float_dtype(sims, "X")  # an integer memmap is cast a block at a time
        out = np.empty(sims.shape, dtype=dtype)
        self._transform_into(sims, dtype, out)
        return out

    def _transform_into(self, sims, dtype, out):
        """Scores of ``sims`` into ``out``, in blocks of whole rows.

        ``working_memory`` holds 16 blocks at once (input, scores, temporaries).
        """
        step = rows_per_chunk(sims.shape[1], dtype.itemsize, self.working_memory, 16)

        def scores(rows, out=None):
            return self._checked_scores(np.asarray(sims[rows], dtype=dtype), slice(None), None, rows, out)

        fill_blocks(out, list(gen_batches(sims.shape[0], step)), scores, self.n_jobs)

    def _checked_scores(self, block, columns, row_state, rows, out=None):
        """``_score`` of a block of query ``rows``, or an error naming its first NaN/inf."""
        out = np.empty_like(block) if out is None else out
        with np.errstate(invalid="ignore", over="ignore"):
            self._score(block, columns, row_state, out)
        # Finite input mostly gives finite scores, so the scores, still in cache, are
        # tested first, and the input only if they fail.
        if not all_finite(out):
            check_finite_block(block, rows, name="X", items=columns)  # a slice, or an index's candidates
            self._rescore_overflow(block, columns, row_state, rows, out)
        return out

    def _rescore_overflow(self, block, columns, row_state, rows, out):
        """Scores of finite similarities that overflowed: redone in float64, else refused.

        Probabilities (``output="probability"``) that exceed the dtype's range are
        clipped to its largest value, with a warning; any other score beyond it is
        an error.
        """
        if out.dtype != np.float64:
            wide = np.empty(out.shape)
            with np.errstate(invalid="ignore", over="ignore"):
                self._score(block.astype(np.float64), columns, row_state, wide)
                out[...] = wide
            if all_finite(out):
                return
        bad = tuple(np.argwhere(~np.isfinite(out))[0])
        where = (
            f"X row {rows.start + bad[0]}, gallery item {gallery_item(columns, bad[1])} "
            f"(similarity {block[bad]:.6g})"
        )
        if getattr(self, "output", "log") == "probability":
            largest = np.finfo(out.dtype).max
            # One text for every block (no row named), so that the warnings filter
            # shows it once per call site, not once per block.
            warn_caller(
                f"output='probability' overflows {out.dtype} for some scores of X (their "
                f"similarities far above the bank's): those probabilities are clipped to "
                f"{largest:.6g}, so they tie. Use output='log' (the same ranking, without "
                "overflow) to rank.",
                RuntimeWarning,
            )
            np.minimum(out, largest, out=out)
            return
        raise ValueError(
            f"{type(self).__name__}'s scores of the finite similarities X overflow "
            f"{out.dtype}, first at {where}: X spans [{block.min():.6g}, {block.max():.6g}], "
            "too wide a range for these scores. Rescale the similarities (and the "
            "querybank) to a smaller magnitude."
        )

    def _row_state(self, sims, columns, state=None):
        """Reduction over a row's columns that the scores need; none by default."""
        return

    def _needs_whole_rows(self):
        return type(self)._row_state is not QueryBankNormaliser._row_state

    def top_k(self, X=None, *, queries=None, chunks=None, k=10, return_scores=True):
        """The k best gallery items per query, streaming the gallery in column chunks.

        Never materialises the n_queries x n_gallery score matrix: query rows are
        taken in blocks of whole rows, each block scored once and cut to its top k
        without sorting whole rows. Blocks of ``X`` fit ``working_memory``; in
        embedding mode, one matrix product per block of up to 256 MiB. When fewer
        than 8 whole rows fit (a gallery of millions), or when ``chunks`` are
        given, the gallery is streamed in column chunks within ``working_memory``
        with a running top k, and methods whose scores need a whole row (DIS, CSLS,
        GC) read each row twice. With ``n_jobs``, blocks of whole rows are searched
        in parallel threads, each with its share of the BLAS threads. The result
        equals ``transform`` followed by a stable sort of each row: ties go to the
        lowest gallery index.

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
            (not gated per query) ranks each row by ``s - gallery_bias()``, on the
            product overwritten in place in embedding mode, and skips whatever
            does not change a row's ranking (CSLS's per-query ``r_G(q)`` and own
            top k, IS's exponential for probabilities): the same ranking in exact
            arithmetic, while scores within rounding of each other (in float32,
            a few rows in a thousand at k = 700) may swap.

        Pass exactly one of ``X``, ``queries`` and ``chunks``.

        Returns
        -------
        indices : ndarray of shape (n_queries, k)
            Gallery indices, best first. Alone when ``return_scores=False``.
        scores : ndarray of shape (n_queries, k)
            Their normalised scores, in the input's float dtype (the first chunk's).
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
        n_gallery = self.n_features_in_
        if chunks is not None:
            return self._running_top_k(self._given_column_blocks(chunks), k, first_row=0)
        read, n_queries, dtype = self._query_source(X, queries)
        indices = np.empty((n_queries, k), dtype=np.intp)
        scores = np.empty((n_queries, k), dtype=dtype)
        # Products of many query rows make the most of BLAS; given similarities
        # are read within working_memory.
        budget = PRODUCT_MEMORY if X is None else self.working_memory
        whole_rows = min(n_queries, rows_per_chunk(n_gallery, np.dtype(dtype).itemsize, budget, 3))
        if whole_rows >= MIN_WHOLE_ROWS:
            # One read (or matrix product) per block of whole rows: scores need no second pass.
            batches = list(gen_batches(n_queries, whole_rows))

            by_bias = not return_scores and self._ranks_by_bias()

            def search(rows):
                if not by_bias:
                    sims = read(rows, slice(None))
                else:
                    # A product is ours to overwrite, and the finite test of the ranking
                    # covers it; given similarities are neither.
                    owned = X is None
                    sims = read(rows, slice(None), checked=not owned)
                    found = self._search_by_bias(sims, rows, k, in_place=owned)
                    if found is not None:
                        return found
                    if owned:  # overwritten: the product again, checked
                        sims = read(rows, slice(None))
                return row_top_k_indices(self._checked_scores(sims, slice(0, n_gallery), None, rows), k)

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
        """Whether every row ranks as ``s - bias``: a search without scores needs no more
        (not a per-row term as CSLS's, nor IS's exponential for probabilities)."""
        return hasattr(self, "_gallery_bias") and not self._is_gated()

    def _search_by_bias(self, sims, rows, k, in_place):
        """Top k of each row by ``s - bias``, a few rows at a time, or None on overflow.

        Each part stays in cache from its subtraction through its tests and search:
        the product block itself is tall, for BLAS, and far larger than the cache.
        """
        bias = self._gallery_bias().astype(sims.dtype)
        step = max(1, SEARCH_PART_BYTES // (sims.shape[1] * sims.itemsize))
        found = []
        for part in gen_batches(len(sims), step):
            part_rows = slice(rows.start + part.start, rows.start + part.stop)
            ranked = self._bias_ranked(sims[part], bias, part_rows, in_place)
            if ranked is None:
                return None
            found.append(row_top_k_indices(ranked, k))
        return tuple(np.concatenate(arrays) for arrays in zip(*found))

    @staticmethod
    def _bias_ranked(sims, bias, rows, in_place):
        """``sims - bias``, or None where it overflows (then scores rank).

        ``in_place`` overwrites ``sims``, which must then be finite (a checked
        product); otherwise a NaN or an infinity in ``sims`` is named.
        """
        with np.errstate(over="ignore", invalid="ignore"):
            ranked = np.subtract(sims, bias, out=sims if in_place else None)
        if all_finite(ranked):  # then so is sims
            return ranked
        if not in_place:
            check_finite_block(sims, rows, name="X")
        return None

    def _running_top_k(self, column_blocks, k, first_row):
        """Top k of the rows that ``column_blocks()`` yields as (columns, block) pairs."""
        state, best = None, None
        if self._needs_whole_rows():
            for columns, block in column_blocks():
                # A NaN in a later chunk would spoil every chunk's scores: name it here.
                rows = slice(first_row, first_row + len(block))
                check_finite_block(block, rows, name="X", first_column=columns.start)
                state = self._row_state(block, columns, state)
        for columns, block in column_blocks():
            rows = slice(first_row, first_row + len(block))
            best = merge_top_k(best, self._checked_scores(block, columns, state, rows), columns.start, k)
        return best

    def _given_column_blocks(self, chunks):
        """``column_blocks`` for :meth:`_running_top_k` over the caller's gallery shards."""
        if self._needs_whole_rows() and not callable(chunks) and iter(chunks) is chunks:
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
                        dtype=FLOAT_DTYPES,
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
        """A reader ``read(rows, columns, checked=...)`` of query similarity blocks, n_queries, dtype.

        Given similarities are read as they are (their checks come later); products
        are tested for overflow unless ``checked=False``.
        """
        if X is not None:
            sims = self._check_query_sims(X)
            dtype = float_dtype(sims, "X")  # an integer memmap is cast a block at a time

            def read(rows, columns, checked=False):
                return np.asarray(sims[rows, columns], dtype=dtype)

            return read, sims.shape[0], dtype
        prepared = self._check_queries(queries)
        gallery = self.gallery_embeddings_.astype(prepared.dtype, copy=False)

        def product(rows, columns, checked=True):
            """The products; unless ``checked``, not yet tested for overflow."""
            if not checked:
                with np.errstate(over="ignore", invalid="ignore"):
                    return prepared[rows] @ gallery[columns].T
            return embedding_products(
                prepared[rows], gallery[columns].T, rows, "queries", self.metric, columns.start
            )

        return product, prepared.shape[0], prepared.dtype

    def _check_query_sims(self, X):
        shape = getattr(X, "shape", None)
        if shape is not None and len(shape) == 2 and shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input: the query similarities "
                f"(shape {tuple(shape)}) need one column per fitted gallery item."
            )
        with naming("X", X):
            return validate_data(self, X, reset=False, dtype="numeric", ensure_all_finite=False)

    def similarities(self, queries):
        """Similarities of query embeddings to the fitted gallery, under ``metric``.

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_dims)
            Query embeddings, of the fitted dimension.

        Returns
        -------
        sims : ndarray of shape (n_queries, n_gallery)
            Ready for :meth:`transform`.
        """
        check_is_fitted(self)
        queries = self._check_queries(queries)
        gallery_t = self.gallery_embeddings_.T.astype(queries.dtype, copy=False)
        rows = slice(0, len(queries))
        return embedding_products(queries, gallery_t, rows, "queries", self.metric)

    def _check_queries(self, queries):
        """Validated query embeddings, prepared for a dot product under ``metric``."""
        if self.gallery_embeddings_ is None:
            raise ValueError(
                f"{type(self).__name__} was fitted on precomputed similarities, so it "
                "holds no gallery embeddings; fit it with gallery=... to use query embeddings."
            )
        queries = check_embeddings(queries, "queries")
        if queries.shape[1] != self.gallery_embeddings_.shape[1]:
            raise ValueError(
                f"queries have shape {queries.shape} but the fitted gallery embeddings "
                f"have {self.gallery_embeddings_.shape[1]} dimensions."
            )
        return prepare_embeddings(queries, self.metric)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
