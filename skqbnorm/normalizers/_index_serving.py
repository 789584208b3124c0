"""What an index asks of a fitted normaliser: one object, :class:`IndexServing`.

:class:`~skqbnorm.index.NormalizedIndex` serves a normaliser only through the
object that :func:`index_serving` returns; so can any other engine (a vector
database, another nearest-neighbour library). The normaliser's ``capabilities``
declare how it is served (``index``: ``"bias"``, ``"rerank"`` or None) and the
adapter reaches the normaliser's private parts on the engine's behalf, so the
normaliser's own public methods stay those of a scikit-learn transformer plus
``similarities`` and ``top_k``.
"""

import numpy as np
from sklearn.utils import gen_batches
from sklearn.utils.validation import check_is_fitted

from .._core import SEARCH_PRODUCT_ROWS, query_products, row_top1


def index_serving(normalizer):
    """Return the object through which an index serves a fitted normaliser.

    Parameters
    ----------
    normalizer : QueryBankNormalizer or QueryBankGate
        A fitted querybank normaliser. A fitted :class:`~skqbnorm.QueryBankGate`
        is served by what it serves with: its normaliser when open, the raw
        similarities when closed.

    Returns
    -------
    serving : IndexServing
        The serving protocol of the normaliser that serves the queries.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import InvertedSoftmax
    >>> from skqbnorm.normalizers import index_serving
    >>> rng = np.random.default_rng(0)
    >>> bank, gallery = rng.normal(size=(50, 4)), rng.normal(size=(20, 4))
    >>> serving = index_serving(InvertedSoftmax().fit(bank, gallery=gallery))
    >>> serving.bias_form, serving.augmented_gallery().shape
    (True, (20, 5))
    """
    entry = getattr(normalizer, "_index_serving", None)
    if entry is None or isinstance(normalizer, type):
        raise TypeError(
            "index_serving takes a fitted querybank normaliser or QueryBankGate (an "
            f"instance such as InvertedSoftmax().fit(...)); got {normalizer!r}."
        )
    return entry()


def _floating(dtype, default):
    """The dtype of augmented vectors: ``default`` for None, else a floating dtype."""
    dtype = default if dtype is None else np.dtype(dtype)
    if not np.issubdtype(dtype, np.floating):
        raise ValueError(
            f"dtype must be a floating dtype (the vectors hold unit rows and biases, which "
            f"an integer dtype would truncate to zeros); got dtype={dtype}."
        )
    return dtype


class IndexServing:
    """The serving protocol of a fitted normaliser, for authors of indexes.

    Get one with :func:`index_serving`. An index (see
    :class:`~skqbnorm.index.NormalizedIndex`) serves a normaliser in one of two ways,
    as its ``capabilities.index`` declares:

    - ``"bias"`` (:attr:`bias_form`): each row ranks as ``s(q, g) - bias_g``, a
      maximum-inner-product search over :meth:`augmented_gallery` with
      :meth:`augmented_queries`. A gated normaliser has one bias per row form
      (:meth:`gallery_biases`), which a query takes from its raw top-1
      (:meth:`row_forms`); the raw search is the search with a zero tail.
    - ``"rerank"``: the candidates of a raw search are rescored exactly.

    Either way the index computes the scores it returns with :meth:`score_block`
    from the candidates' similarities (:meth:`candidate_similarities`) and, for
    normalisers whose scores need a whole row, the row state that
    :meth:`row_state` derives from a raw search of :meth:`n_neighbors` items.

    Parameters
    ----------
    normalizer : QueryBankNormalizer
        The fitted normaliser that serves the queries (not a gate: use
        :func:`index_serving`).

    Attributes
    ----------
    normalizer : QueryBankNormalizer
        The fitted normaliser served.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import CSLS
    >>> from skqbnorm.normalizers import index_serving
    >>> rng = np.random.default_rng(0)
    >>> bank, gallery = rng.normal(size=(50, 4)), rng.normal(size=(20, 4))
    >>> csls = CSLS(k=3).fit(bank, gallery=gallery)
    >>> serving = index_serving(csls)
    >>> queries = serving.prepare_queries(rng.normal(size=(2, 4)))
    >>> every = np.tile(np.arange(20), (2, 1))
    >>> sims = serving.candidate_similarities(queries, every)
    >>> order = np.argsort(-sims, axis=1, kind="stable")
    >>> state = serving.row_state(queries, order, np.take_along_axis(sims, order, 1), None)
    >>> scores = serving.score_block(sims, np.arange(20), state)
    >>> bool(np.allclose(scores, csls.transform(sims)))
    True
    """

    def __init__(self, normalizer):
        self.normalizer = normalizer

    @property
    def bias_form(self):
        """Whether the normaliser is served by the augmented search (``index="bias"``).

        Returns
        -------
        bias_form : bool
            True for ``capabilities.index == "bias"``; False for a reranked one.
        """
        return self.normalizer.capabilities.index == "bias"

    @property
    def gated(self):
        """Whether a query's bias depends on its raw top-1 (the DIS, the dynamic DBNorm).

        Returns
        -------
        gated : bool
            ``capabilities.gated``.
        """
        return self.normalizer.capabilities.gated

    def check(self):
        """Raise a ValueError, naming the class, if an index cannot serve these scores.

        A class whose ``capabilities.index`` is None is refused, and so is one whose
        parameters decide it (``MutualProximity(method="empiric")``).

        Returns
        -------
        self : IndexServing
            This object, when the scores can be served.
        """
        self.normalizer._check_index_serving()
        return self

    def prepare_queries(self, queries):
        """Validate query embeddings and prepare them for a dot product under ``metric``.

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_dims)
            Query embeddings, as many dimensions as the fitted gallery embeddings.

        Returns
        -------
        prepared : ndarray of shape (n_queries, n_dims)
            Float, unit rows under ``metric="cosine"``; never the caller's array
            when anything changed.
        """
        return self.normalizer._prepare_queries(queries)

    def candidate_similarities(self, queries, candidates):
        """Compute ``s(q, g)`` of each prepared query and each of its candidate items.

        Parameters
        ----------
        queries : ndarray of shape (n_queries, n_dims)
            Prepared query embeddings (:meth:`prepare_queries`).
        candidates : ndarray of int of shape (n_queries, n_candidates)
            Gallery indices per query; -1 for none.

        Returns
        -------
        sims : ndarray of shape (n_queries, n_candidates)
            In the queries' dtype; -inf where ``candidates`` is -1. Each is computed
            alone, so it does not depend on the other candidates.
        """
        return self.normalizer._candidate_similarities(queries, candidates)

    def n_neighbors(self):
        """Give how many raw nearest gallery items per query :meth:`row_state` needs.

        Returns
        -------
        n_neighbors : int
            1 for the gate of a gated normaliser and for GC's row range, CSLS's
            ``k``, else 0.
        """
        return self.normalizer._index_neighbors()

    def context(self):
        """Compute what :meth:`row_state` needs of the gallery, once per index.

        Returns
        -------
        context : object or None
            None unless a method needs it (Mutual Proximity's gallery moments).
        """
        return self.normalizer._index_context()

    def row_state(self, queries, neighbors, neighbor_sims, search, context=None):
        """Compute the per-row state of whole-row scores from a raw search.

        The state (CSLS's ``r_G(q)``, the DIS's top-1, GC's row range, Mutual
        Proximity's row moments) that :meth:`score_block` needs of each whole row.

        Parameters
        ----------
        queries : ndarray of shape (n_queries, n_dims)
            Prepared query embeddings (:meth:`prepare_queries`).
        neighbors : ndarray of shape (n_queries, n_found)
            Each query's raw nearest gallery items, best first, -1 where the index
            found fewer; ``n_found`` is at least :meth:`n_neighbors`.
        neighbor_sims : ndarray of shape (n_queries, n_found)
            Their similarities (-inf where ``neighbors`` is -1).
        search : callable
            ``search(vectors, k)``: the indices of the raw top k of other query
            vectors (GC searches ``-q`` for each row's lowest similarity).
        context : object, default=None
            :meth:`context`'s result; None computes it.

        Returns
        -------
        row_state : object or None
            None for a method whose scores need no whole-row state.
        """
        return self.normalizer._index_row_state(queries, neighbors, neighbor_sims, search, context)

    def score_block(self, sims, columns=slice(None), row_state=None, rows=None, out=None):
        """Compute the normalised scores of a block of query rows over some gallery columns.

        Parameters
        ----------
        sims : ndarray of shape (n_rows, n_columns)
            The rows' similarities to the gallery items ``columns``.
        columns : slice or ndarray of int, default=slice(None)
            The gallery items of the block's columns: a slice, or an index array
            (the candidates of a vector index).
        row_state : object, default=None
            What a whole-row method needs of each whole row (:meth:`row_state`);
            None when ``sims`` holds whole rows.
        rows : slice, default=None
            The rows' positions in the caller's queries, for error messages; None:
            ``slice(0, n_rows)``.
        out : ndarray of shape (n_rows, n_columns), default=None
            Where to write the scores.

        Returns
        -------
        scores : ndarray of shape (n_rows, n_columns)
            In the dtype of ``sims``; a NaN or infinity in ``sims`` is named in a
            ValueError, and scores that overflow are computed again in float64.
        """
        return self.normalizer._score_block(sims, columns, row_state, rows, out)

    # -- bias form ------------------------------------------------------------------

    def _bias_normalizer(self):
        normalizer = self.normalizer
        check_is_fitted(normalizer)
        if not normalizer.capabilities.bias_form:
            raise ValueError(
                f"{type(normalizer).__name__} is not a bias form (its capabilities declare "
                "bias_form=False): it has no gallery bias nor augmented vectors."
            )
        return normalizer

    def gallery_biases(self):
        """Give the bias of every row form: one row per form (a single one unless gated).

        Returns
        -------
        biases : ndarray of shape (n_forms, n_gallery)
            Float64; row ``f`` is the bias of the queries whose :meth:`row_forms`
            is ``f``.
        """
        normalizer = self._bias_normalizer()
        return np.array([bias for bias, _ in normalizer._gated_biases()], dtype=np.float64)

    def row_forms(self, top1):
        """Give which bias each query takes, from the index of its raw top-1 gallery item.

        Parameters
        ----------
        top1 : array-like of shape (n_queries,)
            Each query's raw top-1 gallery index (``argmax_g s(q, g)``, the lowest
            index among ties), e.g. from a raw inner-product search.

        Returns
        -------
        forms : ndarray of shape (n_queries,)
            The row of :meth:`gallery_biases` each query takes, or -1 for a query
            left raw (no gate open). All 0 for an ungated normaliser.
        """
        normalizer = self._bias_normalizer()
        top1 = np.asarray(top1)
        n_gallery = normalizer.n_features_in_
        if top1.ndim != 1 or not np.issubdtype(top1.dtype, np.integer):
            raise ValueError(f"top1 must be a 1-D array of gallery indices; got shape {top1.shape}, "
                             f"dtype {top1.dtype}.")
        if top1.size and not (0 <= top1.min() and top1.max() < n_gallery):
            raise ValueError(f"top1 holds gallery indices outside [0, {n_gallery}): "
                             f"[{top1.min()}, {top1.max()}].")
        return normalizer._row_forms(top1)

    def normalized_rows(self, top1):
        """Tell whether each query's row is normalised (any gate open), from its raw top-1.

        Parameters
        ----------
        top1 : array-like of shape (n_queries,)
            Each query's raw top-1 gallery index.

        Returns
        -------
        normalized : ndarray of shape (n_queries,), dtype=bool
            False for the rows a gated normaliser leaves raw; all True if ungated.
        """
        return self.row_forms(top1) >= 0

    def augmented_gallery(self, dtype=None):
        """Build the gallery vectors ``[g, -bias_g]`` for a maximum-inner-product search.

        Parameters
        ----------
        dtype : numpy floating dtype, default=None
            Of the result; None keeps the gallery embeddings' (FAISS takes float32).
            An integer dtype is refused: it would truncate the unit rows to zeros.

        Returns
        -------
        vectors : ndarray of shape (n_gallery, n_dims + n_forms)
            The prepared gallery embeddings (unit rows under cosine) and, per row
            form (one unless gated, see :meth:`gallery_biases`), the negated bias.
        """
        gallery = self._fitted_gallery()
        dtype = _floating(dtype, gallery.dtype)
        biases = self.gallery_biases()
        out = np.empty((gallery.shape[0], gallery.shape[1] + len(biases)), dtype=dtype)
        out[:, : gallery.shape[1]] = gallery
        out[:, gallery.shape[1] :] = -biases.T
        return out

    def augmented_queries(self, queries, top1=None, dtype=None):
        """Build the query vectors ``[q, 1]`` that pair with :meth:`augmented_gallery`.

        Their inner products with it are ``s(q, g) - bias_g``, each row ranked as
        the normaliser ranks it.

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_dims)
            Query embeddings, prepared under the fitted ``metric`` here.
        top1 : array-like of shape (n_queries,), default=None
            Gated normalisers only: each query's raw top-1 gallery index, which
            selects its bias (a query left raw gets a zero tail, so its inner
            products are its raw similarities). None computes it exactly from the
            query's similarities to the whole gallery; pass the top-1 of a raw
            search (queries ``[q, 0]``) to avoid that.
        dtype : numpy dtype, default=None
            Of the result; None keeps the queries'.

        Returns
        -------
        vectors : ndarray of shape (n_queries, n_dims + n_forms)
            The prepared query, then a one-hot tail selecting its row form.

        Examples
        --------
        >>> import numpy as np
        >>> from skqbnorm import DynamicInvertedSoftmax
        >>> from skqbnorm.normalizers import index_serving
        >>> rng = np.random.default_rng(0)
        >>> bank, gallery = rng.normal(size=(50, 4)), rng.normal(size=(20, 4))
        >>> queries = rng.normal(size=(3, 4))
        >>> dis = DynamicInvertedSoftmax(k=1).fit(bank, gallery=gallery)
        >>> serving = index_serving(dis)
        >>> products = serving.augmented_queries(queries) @ serving.augmented_gallery().T
        >>> bool(np.allclose(products, dis.transform(dis.similarities(queries))))
        True
        """
        normalizer = self._bias_normalizer()
        prepared = normalizer._prepare_queries(queries)
        if top1 is None:
            top1 = self._exact_top1(prepared) if self.gated else np.zeros(len(prepared), np.intp)
        elif len(top1) != len(prepared):
            raise ValueError(f"top1 has {len(top1)} entries for {len(prepared)} queries.")
        forms = self.row_forms(top1)
        dtype = _floating(dtype, prepared.dtype)
        n_dims, n_forms = prepared.shape[1], len(normalizer._gated_biases())
        out = np.zeros((len(prepared), n_dims + n_forms), dtype=dtype)
        out[:, :n_dims] = prepared
        normalized = forms >= 0
        out[np.flatnonzero(normalized), n_dims + forms[normalized]] = 1
        return out

    def _exact_top1(self, prepared):
        """Each prepared query's raw top-1 gallery index (ties: the lowest index), from
        the products that ``similarities`` multiplies: the gate then picks the row
        form that ``transform(similarities(queries))`` picks, bitwise."""
        normalizer = self.normalizer
        gallery, gallery_norm = normalizer._gallery_in(prepared.dtype)
        top1 = np.empty(len(prepared), dtype=np.intp)
        # Blocks of the most rows of a search's part bound the memory and split no part.
        for rows in gen_batches(len(prepared), SEARCH_PRODUCT_ROWS):
            products = query_products(prepared[rows], gallery.T, normalizer.metric, gallery_norm=gallery_norm)
            top1[rows] = row_top1(products)[1]
        return top1

    def _fitted_gallery(self):
        normalizer = self._bias_normalizer()
        if normalizer.gallery_embeddings_ is None:
            raise ValueError(
                f"{type(normalizer).__name__} was fitted on precomputed similarities, so it holds "
                "no gallery embeddings to augment; fit it with gallery=... (embedding mode), "
                "or build [g, -bias_g] from gallery_bias() and your own embeddings."
            )
        return normalizer.gallery_embeddings_
