"""Serve a querybank normaliser's top-k from a FAISS index (optional extra ``skqbnorm[faiss]``).

A normaliser whose capabilities declare ``index="bias"`` (IS, DIS, CSLS, NNN,
Centering, DBNorm, SN) ranks a row as ``s(q, g) - bias_g``, a maximum-inner-product
search over augmented vectors (see :class:`~skqbnorm.normalizers.BiasFormMixin`);
one that declares ``index="rerank"`` is served by reranking the candidates of a raw
search with its exact scores. The index asks each normaliser only through one
object, :func:`~skqbnorm.normalizers.index_serving`'s
:class:`~skqbnorm.normalizers.IndexServing` (the protocol for authors of other
indexes): it tests no normaliser class and calls no private method. FAISS is imported only when an index is built,
so skqbnorm does not need it otherwise.
"""

import contextlib
import copy
import re
import weakref
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils import _safe_indexing, check_array, gen_batches
from sklearn.utils._param_validation import HasMethods, StrOptions, validate_parameter_constraints
from sklearn.utils.validation import check_is_fitted

from ._core import best_k, take_rows
from ._validation import NotBool, warn_caller
from .normalizers import index_serving

__all__ = ["NormalizedIndex"]


# Elements (float64) of the blocks that exact scoring gathers: 16 MiB.
_BLOCK_ELEMENTS = 1 << 21
#: FAISS's k-means asks for at least this many training vectors per inverted list.
MIN_POINTS_PER_LIST = 39
#: Calibration queries (evenly spaced rows of those given) on which "auto" settings are chosen.
CALIBRATION_QUERIES = 256
#: The k of the recall@k that "auto" settings reach.
CALIBRATION_K = 10
#: The largest efSearch that "auto" tries: beyond it an HNSW search costs about an exact one.
MAX_EF_SEARCH = 8192
#: "auto" settings where no calibration queries are given: nprobe (capped at the lists) and efSearch.
UNCALIBRATED = {"nprobe": 128, "ef_search": 512}
#: The parameters that a search reads.
SEARCH_PARAMS = ("n_candidates", "nprobe", "ef_search", "batch_size")
#: FAISS's names of the search settings.
FAISS_NAMES = {"nprobe": "nprobe", "ef_search": "efSearch"}
#: Factory parts that crash FAISS (the process, not a Python error), and why: an HNSW
#: graph of fewer than 2 links per node, and a quantiser code of 0 bits.
CRASHING_PARTS = (
    (re.compile(r"HNSW([01])(?!\d)"), "an HNSW graph needs at least 2 links per node (HNSW2 or more)"),
    (re.compile(r"\dx0+(?!\d)"), "a quantiser's codes need at least 1 bit (e.g. PQ16x8)"),
)


def import_faiss():
    """The ``faiss`` module, or an ImportError that says how to install it."""
    try:
        import faiss
    except ImportError as error:
        raise ImportError(
            "skqbnorm.index needs FAISS, an optional dependency: install it with "
            "`pip install skqbnorm[faiss]` (or `pip install faiss-cpu`)."
        ) from error
    return faiss


class NormalizedIndex(BaseEstimator):
    """Top-k retrieval under a querybank normaliser, served by a FAISS index.

    A bias-form normaliser (:class:`~skqbnorm.InvertedSoftmax`, :class:`~skqbnorm.CSLS`,
    :class:`~skqbnorm.NearestNeighborNormalization`, :class:`~skqbnorm.Centering`,
    :class:`~skqbnorm.DualInvertedSoftmax`, :class:`~skqbnorm.SinkhornNormalization`
    and the gated :class:`~skqbnorm.DynamicInvertedSoftmax` and
    :class:`~skqbnorm.DualDynamicInvertedSoftmax`) ranks a row as ``s(q, g) - bias_g``
    = ``<[q, 1], [g, -bias_g]>``: the index holds the augmented gallery
    (:meth:`~skqbnorm.normalizers.IndexServing.augmented_gallery`) and answers a maximum-inner-product search.
    The gated normalisers take two stages: a raw search (queries ``[q, 0]``) for each
    query's top-1, which opens or closes its gates, then the augmented search for the
    queries that a gate normalises. :class:`~skqbnorm.CSLS` also searches the raw top
    ``k`` of each query, for the per-query term ``r_G(q)`` of its scores.

    Any other normaliser (:class:`~skqbnorm.GloballyCorrected`,
    :class:`~skqbnorm.QueryBankZNorm`, :class:`~skqbnorm.MutualProximity` with
    ``method="gaussian"``, :class:`~skqbnorm.DualSoftmax`) is served by reranking the
    ``n_candidates`` best items of a raw search by its exact scores. The per-row
    statistics these scores need come from the index too: GC's row range from raw
    searches with ``q`` and ``-q``, Mutual Proximity's row mean and spread from the
    gallery's mean and covariance (exact). ``MutualProximity(method="empiric")``
    needs the rank of each similarity within the query's whole row, which no index
    gives: it is refused (use ``top_k``).

    The returned scores are the normaliser's own, computed exactly (in the queries'
    dtype) for the items the index finds; the index only chooses the candidates.
    The per-row statistics above come from the raw search, so with an approximate
    index they are approximate too: the gate's top-1, CSLS's ``r_G(q)`` (a per-row
    shift, which leaves the ranking alone) and GC's row range (its tie-break). Where a
    raw search comes back short (an IVF index with a small ``nprobe``), they come from
    the items it found (``r_G(q)`` is their mean), and a query whose raw search finds
    nothing is left raw by a gate. With a
    ``"Flat"`` index the results are ``normalizer.top_k(queries=...)``'s, ties and
    float32 rounding of the index aside.

    An approximate index (IVF, HNSW) finds the items near a query. A normaliser
    lifts the items that are near no query (those of low hubness), so its top k may
    hold items whose raw similarity to the query is low, which such an index misses:
    at the same settings, its recall over a normalised gallery can be far below its
    recall over the raw one. So ``nprobe`` and ``ef_search`` default to ``"auto"``:
    :meth:`fit` measures the index's recall@10 against the exact
    ``normalizer_.top_k`` on calibration queries (``calibration_queries``, else the
    querybank ``X`` when given) and keeps the smallest setting, doubling from 1 (IVF)
    or 16 (HNSW), that reaches ``target_recall`` (or what the largest reaches, where
    that is less). It warns where only a search of every inverted list reaches it (an
    exact ``"Flat"`` index then answers as well), where HNSW does not reach it at
    ``efSearch=8192``, where a reranked normaliser's ``n_candidates`` caps the recall,
    and where no calibration queries were given (it then uses ``nprobe=128`` and
    ``ef_search=512``, unmeasured).
    Check the recall on your queries with :meth:`recall`; the user guide's
    :ref:`index-recall` section gives measured figures.

    When the normaliser's querybank grows (its ``partial_fit``), :meth:`partial_fit`
    or :meth:`refresh` update what depends on the bank, without re-adding the
    gallery where ``refresh_in_place_`` says so, and the index answers as one built
    anew on the grown normaliser. So that the lists of an ``"IVF...,Flat"`` index do
    not depend on the bank, its coarse quantiser is trained on the gallery vectors
    with their bias coordinates set to zero: the items fall in the lists of their
    embeddings, and the stored vectors keep their biases.

    Parameters
    ----------
    normalizer : QueryBankNormalizer or QueryBankGate
        A normaliser fitted in embedding mode (``fit(bank, gallery=G)``), of which
        :meth:`fit`, given no data, keeps a copy (a later refit of ``normalizer``
        leaves the index as it was built); otherwise a clone of it is fitted. A
        fitted :class:`~skqbnorm.QueryBankGate` is served by what it serves with:
        its normaliser when open, the raw similarities when closed.
    factory : str, default="Flat"
        FAISS ``index_factory`` string, built with the inner-product metric:
        ``"Flat"`` (exact), ``"IVF1024,Flat"``, ``"HNSW32"``... The augmented vectors
        of a bias form have ``n_dims + 1`` dimensions (``+ 3`` for the dynamic DBNorm
        with a gallery bank), so a product quantiser needs a rotation to a size it
        divides, e.g. ``"OPQ16_64,IVF4096,PQ16"`` for 64-dimensional embeddings.
    n_candidates : int, default=100
        Raw-search candidates per query reranked for a normaliser that is not a
        bias form (at least ``k`` are used); unused otherwise.
    nprobe : int or "auto", default="auto"
        Inverted lists visited per query by an IVF index (capped at their
        number); unused by others. ``"auto"`` chooses it at :meth:`fit` by
        ``target_recall``.
    ef_search : int or "auto", default="auto"
        Candidate-list size of an HNSW search (``efSearch``: of the index's graph,
        or of an IVF index's HNSW coarse quantiser); unused by others. ``"auto"``
        chooses it at :meth:`fit` by ``target_recall``, after ``nprobe``.
    target_recall : float in (0, 1], default=0.98
        The recall@10 against exact search, on the calibration queries, that the
        ``"auto"`` settings reach.
    train_size : int, default=None
        Gallery items, evenly spaced, on which a trainable index (IVF, PQ) is
        trained; None trains on all of them (FAISS then samples at most 256 per
        inverted list). FAISS asks for at least 39 per list.
    batch_size : int, default=1024
        Queries searched together.

    Attributes
    ----------
    normalizer_ : QueryBankNormalizer
        The fitted normaliser whose scores are served: the index's own copy.
    index_ : faiss.Index
        The FAISS index over the (augmented) gallery.
    bias_form_ : bool
        Whether the normaliser is served by the augmented search (else by reranking).
    refresh_in_place_ : bool
        Whether :meth:`refresh` and :meth:`partial_fit` update the index in place
        when the normaliser's bank grows: True for a reranked normaliser (nothing
        in the vector index depends on the bank) and for a bias form over a
        ``"Flat"`` or ``"IVF...,Flat"`` index (the stored bias coordinates are
        rewritten); False where the vector index must be rebuilt (an HNSW graph,
        PQ or SQ codes, a transform).
    n_gallery_ : int
        Number of gallery items indexed.
    n_dims_ : int
        Dimension of the query embeddings.
    nprobe_ : int or None
        The ``nprobe`` chosen (or given) at fit; None where the index has no
        inverted lists. An integer ``nprobe`` set later by ``set_params`` takes
        effect at the next search, without a refit; ``"auto"`` then uses this one.
    ef_search_ : int or None
        The ``efSearch`` chosen (or given) at fit; None where the index has no
        HNSW graph. A later ``ef_search`` takes effect as ``nprobe`` does.
    calibration_recall_ : float or None
        The recall@10 of the index at ``nprobe_`` and ``ef_search_`` on the
        calibration queries; None where nothing was calibrated (an exact index,
        integer settings, or no calibration queries).

    See Also
    --------
    skqbnorm.normalizers.index_serving : The serving protocol this index uses, and
        the augmented vectors, for any inner-product engine.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import NearestNeighborNormalization
    >>> from skqbnorm.index import NormalizedIndex
    >>> rng = np.random.default_rng(0)
    >>> bank, gallery = rng.normal(size=(200, 16)), rng.normal(size=(1000, 16))
    >>> queries = rng.normal(size=(5, 16))
    >>> normalizer = NearestNeighborNormalization(k=8).fit(bank, gallery=gallery)
    >>> index = NormalizedIndex(normalizer, "Flat").fit()
    >>> indices, scores = index.search(queries, k=3)
    >>> exact_indices, exact_scores = normalizer.top_k(queries=queries, k=3)
    >>> bool((indices == exact_indices).all()), bool(np.allclose(scores, exact_scores))
    (True, True)
    """

    _parameter_constraints: dict = {
        "normalizer": [HasMethods(["fit", "transform", "top_k"])],
        "factory": [str],
        "n_candidates": [NotBool(Integral, 1, None, closed="left")],
        "nprobe": [NotBool(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "ef_search": [NotBool(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "target_recall": [NotBool(Real, 0, 1, closed="right")],
        "train_size": [NotBool(Integral, 1, None, closed="left"), None],
        "batch_size": [NotBool(Integral, 1, None, closed="left")],
    }

    def __init__(self, normalizer, factory="Flat", *, n_candidates=100, nprobe="auto",
                 ef_search="auto", target_recall=0.98, train_size=None, batch_size=1024):
        self.normalizer = normalizer
        self.factory = factory
        self.n_candidates = n_candidates
        self.nprobe = nprobe
        self.ef_search = ef_search
        self.target_recall = target_recall
        self.train_size = train_size
        self.batch_size = batch_size

    def fit(self, X=None, y=None, *, gallery=None, gallery_bank=None, calibration_queries=None):
        """Build the index over the normaliser's gallery, and choose its ``"auto"`` settings.

        Parameters
        ----------
        X : array-like of shape (n_bank, n_dims), default=None
            None uses ``normalizer`` as fitted; otherwise the querybank embeddings,
            on which a clone of ``normalizer`` is fitted with ``gallery``.
        y : None
            Ignored.
        gallery : array-like of shape (n_gallery, n_dims), default=None
            Gallery embeddings, with ``X``.
        gallery_bank : array-like of shape (n_gallery_bank, n_dims), default=None
            Gallery-bank embeddings for the dual-bank normalisers, with ``X``.
        calibration_queries : array-like of shape (n_queries, n_dims), default=None
            Queries like those the index will serve (at most 256 evenly spaced rows
            are used), on which the ``"auto"`` settings are chosen; None uses ``X``.
            The bank's own rows are scored otherwise than new queries by some
            normalisers (a bank query opens every gate of a dynamic one), which
            tends to choose larger settings: pass held-out queries where you have them.

        Returns
        -------
        self : object
            The fitted index.
        """
        self._validate_params()
        queries = calibration_sample(X if calibration_queries is None else calibration_queries)
        self._build(self._fitted_serving(X, y, gallery, gallery_bank).check(), queries)
        return self

    def partial_fit(self, X, y=None, *, gallery=None, gallery_bank=None, calibration_queries=None):
        """Append rows to the normaliser's querybank and refresh the index.

        The first call on an unfitted index fits a clone of ``normalizer`` by its
        ``partial_fit`` (with ``gallery``) and builds the index; a later call appends
        the rows to the index's own normaliser (``normalizer_.partial_fit``) and
        updates only what depends on the bank, as :meth:`refresh` does. The index
        then answers as one built anew on the grown normaliser. Its ``"auto"``
        settings are chosen again after each call, on the latest
        ``calibration_queries`` given (else the first call's rows). Only the normalisers
        whose ``capabilities.mergeable`` is True grow this way; a normaliser fitted
        by ``fit`` (as :meth:`fit` given ``X`` fits one) starts a new bank at its
        first ``partial_fit``, with a warning. A :class:`~skqbnorm.QueryBankGate`
        never grows this way: its ``partial_fit`` takes the bank's similarities to
        the gallery, not embeddings, so the call is refused; build the index with
        :meth:`fit` on the whole querybank instead.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_dims)
            The next querybank embeddings.
        y : None
            Ignored.
        gallery : array-like of shape (n_gallery, n_dims), default=None
            Gallery embeddings, on the first call; later calls omit it or pass the
            same gallery.
        gallery_bank : array-like of shape (n_rows_gallery_bank, n_dims), default=None
            The next gallery-bank embeddings, for the dual-bank normalisers.
        calibration_queries : array-like of shape (n_queries, n_dims), default=None
            Queries like those the index will serve, on which the ``"auto"`` settings
            are chosen from now on, as in :meth:`fit`; None keeps the earlier ones
            (on the first call: ``X``).

        Returns
        -------
        self : object
            The index, serving the normaliser fitted on every row so far.

        Examples
        --------
        >>> import numpy as np
        >>> from skqbnorm import InvertedSoftmax
        >>> from skqbnorm.index import NormalizedIndex
        >>> rng = np.random.default_rng(0)
        >>> bank, gallery = rng.normal(size=(300, 16)), rng.normal(size=(1000, 16))
        >>> index = NormalizedIndex(InvertedSoftmax(), "Flat")
        >>> for rows in np.array_split(bank, 3):
        ...     index = index.partial_fit(rows, gallery=gallery)
        >>> index.normalizer_.n_bank_, index.refresh_in_place_
        (300, True)
        >>> rebuilt = NormalizedIndex(InvertedSoftmax(), "Flat").fit(bank, gallery=gallery)
        >>> queries = rng.normal(size=(5, 16))
        >>> [bool(np.array_equal(a, b)) for a, b in zip(index.search(queries, k=3),
        ...                                             rebuilt.search(queries, k=3))]
        [True, True]
        """
        if not hasattr(self, "index_"):
            self._validate_params()
            queries = calibration_sample(X if calibration_queries is None else calibration_queries)
            normalizer = clone(self.normalizer).partial_fit(X, y, gallery=gallery, gallery_bank=gallery_bank)
            self._source_gallery, self._serves_fitted_normalizer = None, False
            self._build(self._checked_serving(index_serving(normalizer)).check(), queries)
            return self
        queries = self._checked_calibration(calibration_queries)
        self.normalizer_.partial_fit(X, y, gallery=gallery, gallery_bank=gallery_bank)
        self._calibration_queries = queries
        self._refresh(index_serving(self.normalizer_))
        return self

    def _checked_calibration(self, calibration_queries):
        """The calibration sample of ``calibration_queries`` for this fitted index, or
        the one it holds where they are None."""
        if calibration_queries is None:
            return self._calibration_queries
        queries = calibration_sample(calibration_queries)
        check_calibration_width(queries, self.n_dims_)
        return queries

    def refresh(self, *, calibration_queries=None):
        """Serve ``normalizer`` again after its querybank grew, updating only what depends on the bank.

        For an index built by ``fit()`` from a fitted ``normalizer``, after that
        normaliser learned more bank rows (its ``partial_fit``, or a refit on the
        same gallery): the index takes a new copy of it and answers as one built
        anew on it. What is updated depends on how the normaliser is served:

        - reranked (not a bias form): nothing in the vector index depends on the
          bank; the exact rescoring reads the new copy.
        - a bias form over a ``"Flat"`` or ``"IVF...,Flat"`` index: the bias
          coordinates of the stored vectors are rewritten in place, no vector is
          re-added and nothing retrained. An IVF index assigns the items to its
          lists by their embeddings alone (its coarse quantiser is trained with
          the bias coordinates set to zero), so the lists do not change.
        - a bias form over any other index (HNSW, whose graph links the augmented
          vectors; PQ or SQ codes, which encode them): the vector index is rebuilt.

        ``refresh_in_place_`` says which applies; a new gallery, or a change
        between a bias form and a reranked normaliser (a gate that opened or
        closed), rebuilds it too. The ``"auto"`` search settings are chosen again.
        The gallery array must not have been modified in place since the index was
        built. An index that fitted its own normaliser (``fit(X, ...)`` or
        :meth:`partial_fit`) is refused with a ``ValueError``: grow it with
        :meth:`partial_fit`.

        Parameters
        ----------
        calibration_queries : array-like of shape (n_queries, n_dims), default=None
            Queries like those the index will serve, on which the ``"auto"`` settings
            are chosen from now on, as in :meth:`fit`; None keeps the earlier ones
            (those of :meth:`fit`).

        Returns
        -------
        self : object
            The refreshed index.

        Examples
        --------
        >>> import numpy as np
        >>> from skqbnorm import CSLS
        >>> from skqbnorm.index import NormalizedIndex
        >>> rng = np.random.default_rng(0)
        >>> bank, gallery = rng.normal(size=(400, 16)), rng.normal(size=(1000, 16))
        >>> csls = CSLS(k=3).partial_fit(bank[:200], gallery=gallery)
        >>> index = NormalizedIndex(csls, "IVF8,Flat", nprobe=2).fit()
        >>> csls = csls.partial_fit(bank[200:])  # the bank grows: 400 rows
        >>> index = index.refresh()
        >>> rebuilt = NormalizedIndex(csls, "IVF8,Flat", nprobe=2).fit()
        >>> queries = rng.normal(size=(5, 16))
        >>> bool(np.array_equal(index.search(queries, k=3)[0], rebuilt.search(queries, k=3)[0]))
        True
        """
        check_is_fitted(self)
        if not self._serves_fitted_normalizer:
            raise ValueError(
                "refresh() is for an index built by fit() from a fitted normalizer: this "
                "index fitted its own normaliser (fit(X, ...) or partial_fit), which refresh() "
                "does not read. Grow its bank with partial_fit(X), or build the index with "
                "fit() from the normaliser you grow."
            )
        check_is_fitted(self.normalizer)
        queries = self._checked_calibration(calibration_queries)
        serving = self._own_copy(index_serving(self.normalizer))
        self._calibration_queries = queries
        self._refresh(serving)
        return self

    def _build(self, serving, calibration_queries):
        """Build the vector index over ``serving``'s gallery, and serve it at settings
        chosen on ``calibration_queries`` (a ``calibration_sample``, or None)."""
        check_calibration_width(calibration_queries, serving.normalizer.gallery_embeddings_.shape[1])
        self._calibration_queries = calibration_queries
        faiss = import_faiss()
        normalizer = serving.normalizer
        self.bias_form_ = serving.bias_form
        gallery = normalizer.gallery_embeddings_
        if self.bias_form_:
            vectors = serving.augmented_gallery(dtype=np.float32)
        else:
            vectors = np.ascontiguousarray(gallery, dtype=np.float32)
        check_factory(self.factory)
        try:
            index = faiss.index_factory(vectors.shape[1], self.factory, faiss.METRIC_INNER_PRODUCT)
        except (RuntimeError, MemoryError) as error:
            raise ValueError(
                f"factory={self.factory!r} is not a FAISS index_factory string for "
                f"{vectors.shape[1]}-dimensional vectors: {last_line(error)}"
            ) from error
        rewritable = bias_storage(faiss, index) is not None
        self._ladders = search_ladders(index)
        if not index.is_trained:
            step = 1 if self.train_size is None else -(-len(vectors) // self.train_size)
            training = np.array(vectors[::step])
            if rewritable and self.bias_form_:
                # Lists chosen by the embeddings alone stay those of any bank.
                training[:, gallery.shape[1] :] = 0
            try:
                index.train(training)
            except (RuntimeError, MemoryError) as error:
                raise ValueError(self._training_error(len(vectors), len(training), error)) from error
        with faiss_errors(self.factory, f"add the {len(vectors)} gallery vectors"):
            index.add(vectors)
        self.index_, self.refresh_in_place_ = index, rewritable or not self.bias_form_
        self.n_gallery_, self.n_dims_ = gallery.shape
        self._serve(serving)

    def _serve(self, serving):
        """Serve ``serving``'s normaliser, at search settings chosen for it."""
        self.normalizer_, self._serving, self._context = serving.normalizer, serving, serving.context()
        self._choose_search_settings()

    def _choose_search_settings(self):
        """Set ``nprobe_`` and ``ef_search_``: given, or the first of their doubling
        ladders whose recall on the calibration queries reaches ``target_recall``."""
        ladders = self._ladders
        for name, ladder in ladders.items():
            value = UNCALIBRATED[name] if getattr(self, name) == "auto" else getattr(self, name)
            setattr(self, f"{name}_", None if ladder is None else capped(name, value, ladder))
        auto = [name for name in ladders if ladders[name] and getattr(self, name) == "auto"]
        self.calibration_recall_ = None
        if auto and self._calibration_queries is None:
            warn_caller(
                f"NormalizedIndex chose {self._settings_text(auto)} "
                "without measuring recall: no calibration queries. Pass calibration_queries= "
                "to fit, partial_fit or refresh (a few hundred queries like those to serve), "
                "or set the value, and check it with index.recall(queries).", UserWarning)
        elif auto:
            self._calibrate(auto)
        self._set_search_parameters()

    def _calibrate(self, auto):
        """Climb each ``"auto"`` setting's ladder to the first value whose recall reaches
        ``target_recall``, or what the ladder's top reaches where that is less."""
        queries = self._calibration_queries
        k = min(CALIBRATION_K, self.n_gallery_)
        exact = self.normalizer_.top_k(queries=queries, k=k)[0]

        def recall_at(name, value):
            setattr(self, f"{name}_", value)
            return float(np.mean(shared_per_row(self.search(queries, k)[0], exact, self.n_gallery_))) / k

        for name in auto:
            setattr(self, f"{name}_", self._ladders[name][-1])
        for name in auto:
            ladder = self._ladders[name]
            ceiling = recall_at(name, ladder[-1])
            goal = min(self.target_recall, ceiling)
            for value in ladder:
                recall = ceiling if value == ladder[-1] else recall_at(name, value)
                if recall >= goal:
                    break
            setattr(self, f"{name}_", value)
        self.calibration_recall_ = recall
        self._warn_about_calibration(auto, recall)

    def _warn_about_calibration(self, auto, recall):
        """Warn where the target was missed, or met only by an exhaustive IVF search."""
        if recall < self.target_recall and not self.bias_form_:
            warn_caller(
                f"NormalizedIndex({self.factory!r}) reaches at most recall@10 {recall:.3f} on "
                f"the calibration queries, below target_recall={self.target_recall}: "
                f"{type(self.normalizer_).__name__} is served by reranking the "
                f"n_candidates={self.n_candidates} best raw items, which hold less of its "
                "top 10. Raise n_candidates, or serve with normalizer.top_k(queries=...).",
                UserWarning)
        elif recall < self.target_recall:
            warn_caller(
                f"NormalizedIndex({self.factory!r}) reaches recall@10 {recall:.3f} on the "
                f"calibration queries at {self._settings_text(auto)}, below "
                f"target_recall={self.target_recall}: serve with factory='Flat' or the "
                "exact normalizer.top_k(queries=...), or lower target_recall.", UserWarning)
        elif "nprobe" in auto and self.nprobe_ == self._ladders["nprobe"][-1] > 1:
            warn_caller(
                f"NormalizedIndex({self.factory!r}) reaches target_recall={self.target_recall} "
                f"only at nprobe={self.nprobe_}, every inverted list: it searches the whole "
                "gallery, as an exact factory='Flat' index does at lower cost.", UserWarning)

    def _settings_text(self, names):
        return ", ".join(f"{name}={getattr(self, name + '_')}" for name in names)

    def _refresh(self, serving):
        """Serve ``serving``'s normaliser, rewriting the stored biases or rebuilding."""
        serving.check()
        biases = serving.gallery_biases() if serving.bias_form else None
        unchanged = (
            serving.normalizer.gallery_embeddings_ is self.normalizer_.gallery_embeddings_
            and serving.bias_form == self.bias_form_
            and (biases is None or len(biases) == self._n_forms())
        )
        if not (unchanged and self.refresh_in_place_):
            self._build(serving, self._calibration_queries)
            return
        if biases is not None:
            write_biases(import_faiss(), self.index_, biases, self.n_dims_)
        self._serve(serving)

    def _own_copy(self, serving):
        """A deep copy of ``serving``, sharing the indexed gallery's array when it holds
        the same embeddings (a gallery may be large)."""
        memo = {}
        new = serving.normalizer.gallery_embeddings_
        indexed = self.normalizer_.gallery_embeddings_
        source = None if self._source_gallery is None else self._source_gallery()
        if (new is not None and new.shape == indexed.shape and new.dtype == indexed.dtype
                and (new is source or np.array_equal(new, indexed))):
            memo[id(new)] = indexed
        copied = copy.deepcopy(serving, memo)
        self._source_gallery = _weak(new)
        return self._checked_serving(copied)

    def _training_error(self, n_gallery, n_training, error):
        """What to say when FAISS cannot train ``factory`` on ``n_training`` vectors."""
        fits = max(1, n_training // MIN_POINTS_PER_LIST)
        fits = 1 << (fits.bit_length() - 1)  # a power of two, at most n_training / 39
        suggestion = re.sub(r"IVF\d+", f"IVF{fits}", self.factory)
        if suggestion == self.factory:
            suggestion = "Flat"
        return (
            f"FAISS cannot train factory={self.factory!r} on {n_training} vectors of the "
            f"{n_gallery}-item gallery (train_size={self.train_size!r}): "
            f"{last_line(error)} An IVF index needs at least "
            f"{MIN_POINTS_PER_LIST} training vectors per inverted list (a product "
            f"quantiser 256 per code book): with {n_training}, use e.g. "
            f"factory={suggestion!r}."
        )

    def _fitted_serving(self, X, y, gallery, gallery_bank):
        """The serving protocol of the fitted normaliser that the index serves."""
        if X is None:
            if gallery is not None or gallery_bank is not None:
                raise ValueError("gallery and gallery_bank need X, the querybank embeddings.")
            check_is_fitted(self.normalizer)
            # The index's own copy: a refit of the caller's normaliser leaves it alone.
            serving = index_serving(self.normalizer)
            gallery = serving.normalizer.gallery_embeddings_
            # Only whether the caller's gallery is still this array: the index
            # does not keep a replaced gallery alive.
            self._source_gallery = _weak(gallery)
            self._serves_fitted_normalizer = True
            # The gallery array is shared, not copied (it may be large, and a refit
            # replaces it rather than writing into it): one copy in memory and in a pickle.
            serving = copy.deepcopy(serving, {id(gallery): gallery})
        else:
            self._source_gallery, self._serves_fitted_normalizer = None, False
            serving = index_serving(clone(self.normalizer).fit(X, y, gallery=gallery, gallery_bank=gallery_bank))
        return self._checked_serving(serving)

    def __getstate__(self):
        state = super().__getstate__()
        return {**state, "_source_gallery": None} if "_source_gallery" in state else state

    @staticmethod
    def _checked_serving(serving):
        """``serving``, if its normaliser holds gallery embeddings to index."""
        normalizer = serving.normalizer
        if normalizer.gallery_embeddings_ is None:
            raise ValueError(
                f"{type(normalizer).__name__} was fitted on precomputed similarities, so it "
                "holds no gallery embeddings to index; fit it with gallery=... (embedding mode)."
            )
        return serving

    def _validate_search_params(self):
        """Validate the parameters a search reads, which ``set_params`` may change after
        fit (they take effect without a refit): only these, as a search is a hot path."""
        validate_parameter_constraints(
            {name: self._parameter_constraints[name] for name in SEARCH_PARAMS},
            {name: getattr(self, name) for name in SEARCH_PARAMS}, caller_name=type(self).__name__)

    def _set_search_parameters(self):
        """nprobe (IVF, capped at the number of lists) and efSearch (HNSW), where they
        apply: an integer parameter, else the one chosen at fit."""
        space = import_faiss().ParameterSpace()
        for name, ladder in self._ladders.items():
            if ladder is not None:
                value = getattr(self, f"{name}_") if getattr(self, name) == "auto" else getattr(self, name)
                space.set_index_parameter(self.index_, FAISS_NAMES[name], capped(name, value, ladder))

    # -- search ----------------------------------------------------------------------

    def search(self, queries, k=10):
        """The k best gallery items per query, with the normaliser's scores.

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_dims)
            Query embeddings, prepared under the normaliser's ``metric``.
        k : int, default=10
            Number of gallery items per query, at most n_gallery.

        Returns
        -------
        indices : ndarray of shape (n_queries, k)
            Gallery indices, best first; -1 where the index found fewer than k
            items (an IVF index with a small ``nprobe``).
        scores : ndarray of shape (n_queries, k)
            Their normalised scores, computed exactly, in the queries' float
            dtype; -inf where the index is -1.
        """
        check_is_fitted(self)
        if isinstance(k, bool) or not (isinstance(k, Integral) and 1 <= k <= self.n_gallery_):
            raise ValueError(
                f"k must be an integer in [1, {self.n_gallery_}] (the indexed gallery size); "
                f"got k={k!r}."
            )
        prepared = self._serving.prepare_queries(queries)
        self._validate_search_params()
        self._set_search_parameters()
        indices = np.empty((len(prepared), k), dtype=np.intp)
        scores = np.empty((len(prepared), k), dtype=prepared.dtype)
        for rows in gen_batches(len(prepared), self.batch_size):
            indices[rows], scores[rows] = self._search_batch(prepared[rows], int(k), rows)
        return indices, scores

    def recall(self, queries, k=10, *, per_query=False):
        """Recall@k of :meth:`search` against the normaliser's exact top k.

        Searches ``queries`` with the index and with ``normalizer_.top_k(queries=...,
        k=k)``, the exact search, and counts, per query, the share of the exact top k
        that the index returns. Run it on a sample of queries (a few hundred are
        enough) to check an index's settings on your data before serving: an
        approximate index (IVF, HNSW) may find less over a normalised gallery than
        over the raw one at the same settings (:ref:`index-recall`). Tied scores
        at the k-th place may make a ``"Flat"`` index differ from the exact top k.

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_dims)
            Query embeddings, as for :meth:`search`.
        k : int, default=10
            Number of gallery items per query, at most n_gallery.
        per_query : bool, default=False
            Whether to return each query's recall rather than their mean.

        Returns
        -------
        recall : float or ndarray of shape (n_queries,)
            The mean over queries of ``|search top k & exact top k| / k``, in
            [0, 1]; with ``per_query=True``, each query's (float64).

        Examples
        --------
        >>> import numpy as np
        >>> from skqbnorm import CSLS
        >>> from skqbnorm.index import NormalizedIndex
        >>> rng = np.random.default_rng(0)
        >>> bank, gallery = rng.normal(size=(200, 16)), rng.normal(size=(2000, 16))
        >>> csls = CSLS(k=3).fit(bank, gallery=gallery)
        >>> NormalizedIndex(csls, "Flat").fit().recall(rng.normal(size=(50, 16)), k=10)
        1.0
        """
        found, _ = self.search(queries, k)
        exact = self.normalizer_.top_k(queries=queries, k=k)[0]
        recalls = shared_per_row(found, exact, self.n_gallery_) / k
        return recalls if per_query else float(recalls.mean())

    def _search_batch(self, queries, k, rows):
        serving = self._serving
        gated = self.bias_form_ and serving.gated
        raw_k = self._raw_search_size(k)
        raw = self._index_search(queries, np.zeros(self._n_forms()), raw_k) if raw_k else None
        sims = None if raw is None else serving.candidate_similarities(queries, raw)
        row_state = None
        if raw is not None:
            row_state = serving.row_state(queries, raw, sims, self._raw_search, self._context)
        if not self.bias_form_:
            candidates = raw  # sims: the candidates' similarities
        elif gated:
            top1 = best_k(raw, sims, 1)[0][:, 0]
            forms = np.full(len(top1), -1, dtype=np.intp)  # no raw result: no top-1, left raw
            forms[top1 >= 0] = serving.row_forms(top1[top1 >= 0])
            candidates = raw[:, :k].copy()
            normalized = np.flatnonzero(forms >= 0)
            tails = np.eye(self._n_forms())[forms[normalized]]
            candidates[normalized] = self._index_search(queries[normalized], tails, k)
            sims = None
        else:
            candidates, sims = self._index_search(queries, np.ones(1), k), None
        scores = self._exact_scores(queries, candidates, row_state, rows, sims)
        return best_k(candidates, scores, k)

    def _n_forms(self):
        return len(self._serving.gallery_biases()) if self.bias_form_ else 0

    def _raw_search_size(self, k):
        """Items of the raw search: the gate's top-1 and the rows left raw (k), what the
        row state needs (CSLS's r_G, GC's range), or the candidates to rerank."""
        serving = self._serving
        if not self.bias_form_:
            return min(max(k, self.n_candidates, serving.n_neighbors()), self.n_gallery_)
        if serving.gated:
            return max(k, serving.n_neighbors())
        return serving.n_neighbors()

    def _raw_search(self, vectors, k):
        """The index's raw top k of query-space ``vectors`` (the ``search`` of the serving protocol's ``row_state``)."""
        return self._index_search(vectors, np.zeros(self._n_forms()), k)

    def _index_search(self, queries, tails, k):
        """The index's top k of ``[q, tail]`` (``tails``: one row, or one per query)."""
        vectors = np.empty((len(queries), queries.shape[1] + self._n_forms()), dtype=np.float32)
        vectors[:, : queries.shape[1]] = queries
        vectors[:, queries.shape[1] :] = tails
        with faiss_errors(self.factory, f"search {len(vectors)} queries"):
            found = self.index_.search(vectors, k)[1]
        return found.astype(np.intp, copy=False)

    def _exact_scores(self, queries, candidates, row_state, rows, sims=None):
        """The normaliser's scores of each query's candidates, from blocks of their union.

        The normaliser scores blocks of query rows by gallery columns, so each chunk of
        rows is scored over the union of its candidates, then gathered. The block holds
        the candidates' similarities, each computed alone (so that it does not depend on
        the chunks), and zeros elsewhere: the row state carries what the scores need of
        the whole row. ``sims`` are the candidates' similarities, if known.
        """
        normalizer, serving = self.normalizer_, self._serving
        if sims is None:
            sims = serving.candidate_similarities(queries, candidates)
        found = candidates >= 0
        per_column = getattr(normalizer, "sorted_bank_", np.empty((1, 0))).shape[0]
        width = candidates.shape[1]
        step = max(1, min(int(np.sqrt(_BLOCK_ELEMENTS / width)), _BLOCK_ELEMENTS // (width * per_column)))
        scores = np.empty(candidates.shape, dtype=queries.dtype)
        for chunk in gen_batches(len(queries), step):
            union, position = np.unique(np.maximum(candidates[chunk], 0), return_inverse=True)
            position = position.reshape(-1, width)
            block = np.zeros((len(position), len(union)), dtype=queries.dtype)
            row, column = np.nonzero(found[chunk])
            block[row, position[row, column]] = sims[chunk][row, column]
            block_rows = slice(rows.start + chunk.start, rows.start + chunk.stop)
            block = serving.score_block(block, union, take_rows(row_state, chunk), block_rows)
            scores[chunk] = np.take_along_axis(block, position, axis=1)
        scores[~found] = -np.inf
        return scores


def calibration_sample(queries):
    """At most ``CALIBRATION_QUERIES`` evenly spaced rows of ``queries`` (a copy), or None."""
    if queries is None:
        return None
    n_rows = len(queries)
    if n_rows == 0:
        raise ValueError("calibration_queries (or X) has no rows: give at least one query.")
    rows = np.unique(np.linspace(0, n_rows - 1, min(n_rows, CALIBRATION_QUERIES)).astype(np.intp))
    return check_array(_safe_indexing(queries, rows), dtype=(np.float64, np.float32),
                       input_name="calibration_queries", copy=True)


def search_ladders(index):
    """The values ``"auto"`` tries, per parameter that applies to ``index``, else None:
    nprobe doubling from 1 to the number of lists, efSearch from 16 to ``MAX_EF_SEARCH``."""
    faiss = import_faiss()
    ivf = faiss.try_extract_index_ivf(index)
    ladders = {"nprobe": None, "ef_search": None}
    if ivf is not None:
        ladders["nprobe"] = [1 << i for i in range((ivf.nlist - 1).bit_length())] + [ivf.nlist]
    try:
        faiss.ParameterSpace().set_index_parameter(index, "efSearch", 16)
    except RuntimeError:  # no HNSW graph
        return ladders
    ladders["ef_search"] = [16 << i for i in range((MAX_EF_SEARCH // 16).bit_length())]
    return ladders


def check_calibration_width(queries, n_dims):
    """Refuse calibration queries whose width is not the gallery embeddings'."""
    if queries is not None and queries.shape[1] != n_dims:
        raise ValueError(
            f"calibration_queries must have shape (n_queries, {n_dims}), the gallery's "
            f"embedding width; got shape {queries.shape}.")


def capped(name, value, ladder):
    """``value`` as the index takes it: ``nprobe`` at most the number of lists (the ladder's top)."""
    return min(value, ladder[-1]) if name == "nprobe" else value


def _weak(array):
    """A weak reference to ``array``, or None."""
    return None if array is None else weakref.ref(array)


def bias_storage(faiss, index):
    """Where ``index`` stores its vectors as plain float32 rows that can be rewritten:
    ``"flat"`` (one array), ``"lists"`` (IVF inverted lists), or None (graphs, codes)."""
    if type(index) is faiss.IndexFlat or type(index) is faiss.IndexFlatIP:
        return "flat"
    return "lists" if type(index) is faiss.IndexIVFFlat else None


def write_biases(faiss, index, biases, n_dims):
    """Rewrite the bias coordinates ``-biases`` (shape (n_forms, n_items)) of the vectors
    stored in ``index``, in place: the float32 values ``augmented_gallery`` gives."""
    tails = np.asarray(-biases.T, dtype=np.float32)
    width = index.d
    if bias_storage(faiss, index) == "flat":
        stored = faiss.rev_swig_ptr(index.get_xb(), index.ntotal * width).reshape(-1, width)
        stored[:, n_dims:] = tails
        return
    lists = index.invlists
    for number in range(index.nlist):  # each list holds its own array of codes
        size = lists.list_size(number)
        if size:
            codes = faiss.rev_swig_ptr(lists.get_codes(number), size * index.code_size)
            ids = faiss.rev_swig_ptr(lists.get_ids(number), size)
            codes.view(np.float32).reshape(size, width)[:, n_dims:] = tails[ids]


def shared_per_row(found, exact, n_items):
    """Per row, how many of ``exact``'s items ``found`` holds.

    Items are distinct gallery indices in ``[0, n_items)`` within a row; ``-1`` slots
    (nothing there) in either array match nothing.
    """
    rows = np.arange(len(exact))[:, None] * n_items
    found_keys = np.where(found >= 0, found + rows, -1)
    exact_keys = np.where(exact >= 0, exact + rows, -2)
    return np.isin(found_keys, exact_keys).sum(axis=1)


def check_factory(factory):
    """Refuse the factory strings that would crash FAISS rather than raise."""
    for pattern, reason in CRASHING_PARTS:
        part = pattern.search(factory)
        if part:
            raise ValueError(f"factory={factory!r} cannot be built: {reason}; got {part.group(0)!r}.")


def last_line(error):
    """What an exception says, without FAISS's C++ signature and source location."""
    lines = str(error).strip().splitlines()
    if not lines:
        return type(error).__name__
    located = re.search(r" at \S+:\d+: (.+)$", lines[-1])
    return located.group(1) if located else lines[-1]


@contextlib.contextmanager
def faiss_errors(factory, action):
    """FAISS's RuntimeError (or MemoryError) while doing ``action``, as a ValueError naming
    the factory."""
    try:
        yield
    except (RuntimeError, MemoryError) as error:
        raise ValueError(
            f"FAISS could not {action} with factory={factory!r}: {last_line(error)}"
        ) from error
