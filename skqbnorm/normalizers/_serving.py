"""Serving a fitted normaliser: transform, query similarities and scores of blocks.

Scores are computed a block of rows at a time (``_score_block``), which
``transform``, ``top_k`` and the index's protocol (:func:`index_serving`, in
``_index_serving``) share. The private ``_index_*`` methods here are what that
protocol asks of a normaliser; a class whose scores need whole rows refines them.
"""

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.utils import gen_batches
from sklearn.utils.validation import check_is_fitted, validate_data

from .._core import (
    all_finite,
    check_finite_block,
    gallery_item,
    largest_norm,
    prepare_embeddings,
    query_products,
    rows_per_chunk,
)
from .._dask import is_dask_array, transform_dask
from .._validation import check_embeddings, float_dtype, naming, warn_caller
from . import _array_api_path as array_api_path
from ._index_serving import IndexServing

#: Elements (float64) of the blocks that candidate similarities are computed in: 16 MiB.
BLOCK_ELEMENTS = 1 << 21


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



class ServingMixin:
    """``transform``, block scores, query embeddings and what the index's protocol asks."""

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
            Under scikit-learn's ``array_api_dispatch``, an array of the namespace
            and device of ``X`` (the normalisers whose ``capabilities.array_api``
            is True).
        """
        check_is_fitted(self)
        if array_api_path.on_device(self, X):  # array API inputs under dispatch: on their device
            return array_api_path.transform(self, X)
        if is_dask_array(X):
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(
                    f"X has shape {X.shape}, but {type(self).__name__} is expecting "
                    f"{self.n_features_in_} features as input (one per fitted gallery item)."
                )
            return transform_dask(self, X, self.capabilities.whole_rows)
        sims = self._check_query_sims(X, "transform(normaliser.similarities(queries))")
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
            return self._score_block(np.asarray(sims[rows], dtype=dtype), slice(None), None, rows, out)

        fill_blocks(out, list(gen_batches(sims.shape[0], step)), scores, self.n_jobs)

    def _score_block(self, sims, columns=slice(None), row_state=None, rows=None, out=None):
        """Normalised scores of a block of query rows over some gallery columns.

        What ``transform``, ``top_k`` and the index score with (see
        ``IndexServing.score_block``, which documents the parameters).
        """
        rows = slice(0, len(sims)) if rows is None else rows
        out = np.empty_like(sims) if out is None else out
        with np.errstate(invalid="ignore", over="ignore"):
            self._score(sims, columns, row_state, out)
        # Finite input mostly gives finite scores, so the scores, still in cache, are
        # tested first, and the input only if they fail.
        if not all_finite(out):
            check_finite_block(sims, rows, name="X", items=columns)  # a slice, or an index's candidates
            self._rescore_overflow(sims, columns, row_state, rows, out)
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
        cause = self._overflow_cause(block[bad], gallery_item(columns, bad[1]))
        if cause is not None:
            raise ValueError(
                f"{cause} ({type(self).__name__}'s scores of the finite similarities X "
                f"overflow {out.dtype}, first at {where}.)"
            )
        raise ValueError(
            f"{type(self).__name__}'s scores of the finite similarities X overflow "
            f"{out.dtype}, first at {where}: X spans [{block.min():.6g}, {block.max():.6g}], "
            "too wide a range for these scores. Rescale the similarities (and the "
            "querybank) to a smaller magnitude."
        )

    def _overflow_cause(self, similarity, item):
        """The parameter to blame when the finite ``similarity`` to gallery ``item``
        scores beyond float64, as a sentence naming it and what to do; None blames
        the data."""
        return

    def _row_state(self, sims, columns, state=None):
        """Reduction over a row's columns that the scores need (``capabilities.whole_rows``)."""
        return

    def _check_query_sims(self, X, embeddings_use):
        """Validated query similarities; ``embeddings_use`` says what to call instead
        with query embeddings, named when ``X`` has the fitted embeddings' width."""
        shape = getattr(X, "shape", None)
        if shape is not None and len(shape) == 2 and shape[1] != self.n_features_in_:
            gallery = getattr(self, "gallery_embeddings_", None)
            hint = ""
            if gallery is not None and shape[1] == gallery.shape[1]:
                hint = (f" X has the width of the fitted embeddings ({shape[1]} dimensions): "
                        f"for query embeddings, use {embeddings_use}.")
            raise ValueError(
                f"X has {shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input: the query similarities "
                f"(shape {tuple(shape)}) need one column per fitted gallery item.{hint}"
            )
        with naming("X", X):
            return validate_data(self, X, reset=False, dtype="numeric", ensure_all_finite=False)

    def similarities(self, queries):
        """Compute the similarities of query embeddings to the fitted gallery.

        Under the fitted ``metric``.

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_dims)
            Query embeddings, of the fitted dimension.

        Returns
        -------
        sims : ndarray of shape (n_queries, n_gallery)
            Ready for :meth:`transform`; under scikit-learn's ``array_api_dispatch``,
            an array of the namespace and device of ``queries``.
        """
        check_is_fitted(self)
        if array_api_path.on_device(self, queries):
            return array_api_path.similarities(self, queries)
        queries = self._prepare_queries(queries)
        gallery, gallery_norm = self._gallery_in(queries.dtype)
        # multiplied as top_k multiplies them, so that both read the same values
        return query_products(queries, gallery.T, self.metric, gallery_norm=gallery_norm)

    def _gallery_in(self, dtype):
        """The fitted gallery embeddings in ``dtype``, and their largest norm, which
        bounds every product (see ``products_stay_finite``): fit's, for its dtype."""
        gallery = self.gallery_embeddings_.astype(dtype, copy=False)
        norm = getattr(self, "_gallery_norm", None) if gallery is self.gallery_embeddings_ else None
        return gallery, largest_norm(gallery) if norm is None else norm

    def _prepare_queries(self, queries):
        """Validated query embeddings, prepared for a dot product under ``metric``: float,
        unit rows under ``metric="cosine"``; never the caller's array when anything changed."""
        check_is_fitted(self)
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


    # -- what the index's protocol (IndexServing) asks of a normaliser -------------------

    def _index_serving(self):
        """The index's protocol for this fitted normaliser (see ``index_serving``)."""
        check_is_fitted(self)
        return IndexServing(self)

    def _check_index_serving(self):
        """Raise a ValueError, naming the class, if an index cannot serve these scores.

        Refuses a class whose ``capabilities.index`` is None; a class whose
        parameters decide it (``MutualProximity(method="empiric")``) refines this.
        """
        if self.capabilities.index is None:
            raise ValueError(
                f"{type(self).__name__} is not supported by NormalizedIndex (its "
                "capabilities declare index=None): use its top_k."
            )

    def _index_neighbors(self):
        """How many raw nearest gallery items per query ``_index_row_state`` needs: 1 for
        the gate's top-1 of a gated normaliser, else 0."""
        return 1 if self.capabilities.gated else 0

    def _index_context(self):
        """What ``_index_row_state`` needs of the gallery, once per index: None unless a
        method needs it."""
        return

    def _index_row_state(self, queries, neighbors, neighbor_sims, search, context=None):
        """The row state (see ``_score_block``) of queries served by an index, from a raw
        search (see ``IndexServing.row_state``); None for scores that need none."""
        if not self.capabilities.whole_rows:
            return
        raise ValueError(
            f"{type(self).__name__} declares whole-row scores but defines no "
            "_index_row_state: NormalizedIndex cannot serve it."
        )

    def _candidate_similarities(self, queries, candidates):
        """``s(q, g)`` of each prepared query and each of its candidate items (-1: none,
        -inf), each computed alone, so that it does not depend on the other candidates."""
        gallery = self.gallery_embeddings_
        sims = np.empty(candidates.shape, dtype=queries.dtype)
        width = max(1, candidates.shape[1] * queries.shape[1])
        step = max(1, BLOCK_ELEMENTS // width)
        for rows in gen_batches(len(queries), step):
            vectors = gallery[candidates[rows]].astype(queries.dtype, copy=False)
            sims[rows] = np.einsum("qd,qcd->qc", queries[rows], vectors)
        sims[candidates < 0] = -np.inf
        return sims
