"""Globally-Corrected retrieval (GC)."""

import numpy as np
from sklearn.utils import gen_batches

from .._core import all_finite, check_finite_block, rows_per_chunk
from .._ranks import ColumnRanks, SortedColumns
from . import _array_api_path as device_path
from ._base import QueryBankNormalizer
from ._capabilities import Capabilities
from ._serving import fill_blocks


class GloballyCorrected(QueryBankNormalizer):
    """Globally-Corrected retrieval (Dinu et al., 2015).

    For each gallery item ``g``, the new query is ranked among the querybank by
    similarity to ``g``: ``Rank_g(q) = #{b : s(b, g) > s(q, g)}``. Items are
    retrieved by increasing rank, and ``s(q, g)`` breaks ties. The score returned is
    ``-Rank_g(q) + u``, with ``u`` in ``[0, 0.5]`` the row's similarity min-max
    scaled, so that higher is better and the ranking is that order (to the
    precision of the score: see Notes).

    Fit keeps every gallery column of the probe matrix sorted (O(M N) memory, the
    one normaliser whose state grows with the bank). The first transform adds a
    table of value buckets per column (``M / 2`` 16-bit entries, a quarter of the
    float32 columns' memory), so that each rank is a table look-up and a bisection
    of a few entries, exact: O(N) per query, O(N log M) at worst (long runs of
    tied bank similarities).

    Under scikit-learn's ``array_api_dispatch``, torch, CuPy and array-api-strict
    inputs are fitted and served on their device: the sorted columns stay there,
    in the similarities' dtype, and each rank is a bisection of the column (no
    table; ``torch.searchsorted`` on torch), O(N log M) per query, with the same
    counts, ties included, hence the same scores as on the NumPy path.

    The fit rule (shared by every normaliser): ``fit(P)`` takes the precomputed
    bank-by-gallery similarities ``P`` (M x N); ``fit(bank, gallery=G)`` takes bank
    and gallery embeddings and computes the similarities under ``metric``; the
    second positional argument ``y`` is ignored.

    Parameters
    ----------
    metric : {"cosine", "dot"}, default="cosine"
        Similarity used in embedding mode.
    working_memory : float, default=None
        Bound, in MiB, on the memory of one block during fit and transform;
        None means 16 MiB.
    n_jobs : int, default=None
        Threads over bank blocks in fit, over strips of gallery columns for the
        sort, and over query blocks in transform (joblib; None means 1, -1 all
        cores). Results do not depend on it.

    Attributes
    ----------
    sorted_bank_ : ndarray of shape (n_bank, n_gallery)
        The probe matrix with each column sorted ascending (an array of the
        inputs' namespace and device when fitted on one).
    gallery_embeddings_ : ndarray of shape (n_gallery, n_dims) or None
        The prepared gallery embeddings in embedding mode, else None.
    n_bank_ : int
        Number of querybank rows seen in fit.
    n_features_in_ : int
        Number of gallery items.
    feature_names_in_ : ndarray of shape (n_gallery,)
        Gallery names, when fitted on a DataFrame of similarities.

    Notes
    -----
    Tie-breaks by similarity among items of equal rank are resolved to the precision
    of the combined score: two similarities closer than about ``rank * eps`` of the
    row's range (``eps`` 1.2e-7 in float32, 2.2e-16 in float64) tie, and the lower
    gallery index goes first. With float32 input and banks of many thousands of
    queries that is about ``rank * 1e-7``: pass float64 to resolve them further.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import GloballyCorrected
    >>> bank_sims = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]])
    >>> normalizer = GloballyCorrected().fit(bank_sims)
    >>> # two bank queries beat 0.75 on item 0, one beats 0.25 on item 1
    >>> normalizer.transform([[0.75, 0.25]])
    array([[-1.5, -1. ]])
    """

    capabilities = Capabilities(whole_rows=True, index="rerank", array_api=True)
    _not_mergeable_because = (
        "its bank statistic is every column sorted (the ranks of a similarity within its "
        "gallery item's bank column), which partial_fit would have to keep whole and re-sort"
    )
    #: Blocks of query rows that working_memory holds on a device: the counts' temporaries.
    _device_buffers = 5

    def _transform_into(self, sims, dtype, out):
        """Scores in blocks as tall as ``working_memory`` allows for 256 columns.

        The sorted bank columns are then read from memory once per block, not once
        per few hundred queries.
        """
        height = rows_per_chunk(min(sims.shape[1], 256), dtype.itemsize, self.working_memory, 1)
        for rows in gen_batches(sims.shape[0], height):
            self._transform_rows(sims, rows, dtype, out)

    def _transform_rows(self, sims, rows, dtype, out):
        """A block of rows, in column strips within ``working_memory``, after a first
        pass for the rows' extremes."""
        width = rows_per_chunk(rows.stop - rows.start, dtype.itemsize, self.working_memory, 1)
        strips = list(gen_batches(sims.shape[1], width))

        def strip(columns):
            return np.asarray(sims[rows, columns], dtype=dtype)

        extremes = None
        for columns in strips:
            extremes = self._row_state(strip(columns), columns, extremes)
        # A row's extremes are finite exactly when all its similarities are, and the
        # scores of finite similarities are finite: no test of the scores is needed.
        if not all_finite(np.hstack(extremes)):
            for columns in strips:
                check_finite_block(strip(columns), rows, name="X", first_column=columns.start)

        def scores(index, out=None):
            _, columns = index  # (rows, columns) of out
            values = strip(columns)
            out = np.empty_like(values) if out is None else out
            self._score(values, columns, extremes, out)
            return out

        fill_blocks(out, [(rows, columns) for columns in strips], scores, self.n_jobs)

    def _reducers(self, n_bank, n_gallery, dtype):
        return [SortedColumns(self.n_jobs)]

    def _learn(self, reducers):
        self.sorted_bank_ = reducers[0].result()
        self._bank_ranks = ColumnRanks(self.sorted_bank_)

    def _device_statistics(self, xp, n_gallery, dtype, where):
        return [device_path.SortedColumns(xp)]

    def _learn_device(self, xp, statistics):
        self.__dict__.pop("_bank_ranks", None)  # a NumPy fit's table
        self.sorted_bank_ = statistics[0].result()

    def _device_scores(self, xp, sims):
        """``-Rank_g(q) + u`` of whole rows, in the NumPy path's operations and order."""
        low = xp.min(sims, axis=1, keepdims=True)
        high = xp.max(sims, axis=1, keepdims=True)
        half_spread = high * 0.5 - low * 0.5
        divisor = xp.where(half_spread > 0, half_spread, xp.full_like(half_spread, xp.inf))
        at_most = device_path.count_in_columns(xp, self.sorted_bank_, sims, "right")
        ranks = xp.astype(self.sorted_bank_.shape[0] - at_most, sims.dtype)
        return (sims * 0.25 - low * 0.25) / divisor - ranks

    def _row_state(self, sims, columns, state=None):
        """Each row's smallest and largest similarity so far."""
        low, high = sims.min(axis=1, keepdims=True), sims.max(axis=1, keepdims=True)
        if state is None:
            return low, high
        return np.minimum(low, state[0]), np.maximum(high, state[1])

    def _score(self, sims, columns, row_state, out):
        low, high = self._row_state(sims, columns) if row_state is None else row_state
        # u = (s - low) / (high - low) / 2, in quarters and halves (exact): finite for
        # finite similarities of any range; a constant row has no tie to break.
        quarter_low = low * 0.25
        half_spread = high * 0.5 - low * 0.5
        divisor = np.where(half_spread > 0, half_spread, np.inf)
        columns = np.arange(self.n_features_in_)[columns]
        # Tile by tile, each tile's values column by column, so that the ranks and
        # the scores stay in cache and each column's lookups come together.
        for tile in self._bank_ranks.tiles(*sims.shape):
            scores = np.array(sims[:, tile].T, order="C")  # a copy, even of one row
            ranks = self._bank_ranks.count_greater_by_column(scores, columns[tile], scores.dtype)
            scores *= 0.25
            scores -= quarter_low.T
            scores /= divisor.T
            scores -= ranks
            out[:, tile] = scores.T

    def _index_neighbors(self):
        """1: GC's row range takes the highest similarity from the raw search."""
        return 1

    def _index_row_state(self, queries, neighbors, neighbor_sims, search, context=None):
        """Each row's range ``(low, high)`` as the index finds it: ``high`` from the raw
        search, ``low`` from a search of ``-q`` (the lowest similarity)."""
        lowest = self._candidate_similarities(queries, search(-queries, 1))
        return _row_range_of_found(lowest[:, 0], neighbor_sims)


def _row_range_of_found(lowest, sims):
    """GC's row range ``(low, high)``, each of shape (n, 1), from the search of ``-q``
    (``lowest``) and the raw results (``sims``), -inf where the index found nothing:
    the lowest of what was found, and 0 for a row of nothing (its scores are all -inf)."""
    with np.errstate(invalid="ignore"):
        found = np.isfinite(sims)
        high = np.where(found, sims, -np.inf).max(axis=1)
        low = np.minimum(np.where(np.isfinite(lowest), lowest, np.inf),
                         np.where(found, sims, np.inf).min(axis=1))
    empty = ~found.any(axis=1)
    high[empty] = low[empty] = 0
    return low[:, None], high[:, None]

