"""The gallery bank: samples of the gallery modality that are not in the gallery.

DBNorm (and, later, DBSN) probe the gallery with a second bank, drawn from the
gallery's own modality (e.g. training videos for a video gallery). It enters ``fit``
the same way for every normaliser that uses one, through this module alone:

- ``fit(P, gallery_bank=P_g)``: ``P_g`` (M_g x N) holds the gallery bank's
  precomputed similarities to the gallery, as ``P`` holds the querybank's;
- ``fit(bank, gallery=G, gallery_bank=H)``: ``H`` (M_g x d) holds gallery-bank
  embeddings, compared with the gallery under the normaliser's ``metric``.

DBSN also needs ``s(b, h)`` between the querybank and the gallery bank (and not
``P_g``). In embedding mode it comes from the two sets of embeddings; in precomputed
mode the caller passes it, ``fit(P, querybank_to_gallery_bank=C)`` with ``C`` (M x M_g),
rows in the querybank's order (so that ``GridSearchCV`` splits them with its folds);
``gallery_bank=P_g`` may be passed beside it, and then only its shape and its
finiteness are checked.
Such a normaliser hands :class:`GalleryBankInput` (the two precomputed matrices) to
the base class's ``fit`` as its ``gallery_bank``, and reads ``s(b, h)`` through
:meth:`GalleryBank.querybank_sims` and :meth:`GalleryBank.targets`.

A normaliser declares ``capabilities.gallery_bank`` (the precomputed input it takes)
and defines ``_learn_gallery_bank(gallery_bank)``, which receives a :class:`GalleryBank`
(or None when fit got none) after ``_learn`` (a multi-pass method receives it in
``_learn_passes``); every other normaliser refuses one.
"""

from typing import NamedTuple

import numpy as np
from sklearn.utils.validation import check_array

from .._core import (
    ProbeMatrix,
    check_finite_block,
    prepare_embeddings,
    reduce_bank,
)
from .._core._array_api import namespace, namespace_name
from .._dask import is_dask_array, reduce_dask_bank
from .._validation import check_embeddings, float_dtype, naming

#: How error messages name the querybank's precomputed similarities to the gallery bank.
CROSS_NAME = "querybank_to_gallery_bank"


def check_gallery_bank_use(normalizer, gallery_bank):
    """Refuse a gallery bank given to a normaliser that cannot use one."""
    if gallery_bank is not None and normalizer.capabilities.gallery_bank is None:
        name = type(normalizer).__name__
        raise ValueError(
            f"{name} does not use a gallery bank, but fit got gallery_bank of shape "
            f"{np.shape(gallery_bank)}: only the dual-bank normalisers (DBNorm's "
            "DualInvertedSoftmax and DualDynamicInvertedSoftmax, DBSN's "
            f"DualBankSinkhornNormalization) take one. Fit {name} without gallery_bank."
        )


def check_gallery_bank_width(normalizer, shape, expected, what):
    """Refuse a gallery bank of ``shape`` whose width is not ``expected`` (``what``: the
    "gallery items" of precomputed similarities, or the "embedding dimensions")."""
    if shape[1] != expected:
        form = "similarities to" if what == "gallery items" else "embeddings like"
        raise ValueError(
            f"gallery_bank has shape {shape}, but {type(normalizer).__name__} was "
            f"fitted on a gallery of {normalizer.n_features_in_} items: the gallery "
            f"bank must hold {form} the gallery, {expected} columns ({what})."
        )


def refuse_querybank_sims_with_embeddings(normalizer, shape):
    """``querybank_to_gallery_bank`` is for precomputed similarities only."""
    if normalizer.gallery_embeddings_ is not None:
        raise ValueError(
            f"{CROSS_NAME} (got shape {shape}) is for precomputed similarities, "
            f"but {type(normalizer).__name__} is fitted on embeddings (gallery=...), where "
            "s(b, h) is computed from the querybank and gallery_bank embeddings: pass "
            f"gallery_bank embeddings and no {CROSS_NAME}."
        )


def check_querybank_sims_columns(normalizer, shape, gallery_bank_shape):
    """One column of ``querybank_to_gallery_bank`` per row of a ``gallery_bank`` beside it."""
    if gallery_bank_shape is not None and shape[1] != gallery_bank_shape[0]:
        raise ValueError(
            f"{CROSS_NAME} has shape {shape}, but gallery_bank has shape "
            f"{gallery_bank_shape}: {type(normalizer).__name__} needs one column of "
            f"{CROSS_NAME} per gallery-bank row, {gallery_bank_shape[0]} columns."
        )


def check_querybank_sims_rows(normalizer, shape, querybank_shape, gallery_bank_shape):
    """``querybank_to_gallery_bank`` (``shape``, None when missing) beside a gallery bank
    of ``gallery_bank_shape``: present, with one row per querybank row."""
    name = type(normalizer).__name__
    if shape is None:
        raise ValueError(
            f"{name} needs the querybank's similarities to the gallery bank, s(b, h): "
            f"fit got gallery_bank of shape {gallery_bank_shape}, but no {CROSS_NAME}. Pass "
            f"{CROSS_NAME} of shape ({querybank_shape[0]}, {gallery_bank_shape[0]}) (querybank "
            "rows by gallery-bank items)."
        )
    if shape[0] != querybank_shape[0]:
        raise ValueError(
            f"{CROSS_NAME} has shape {shape}, but the querybank X has shape "
            f"{querybank_shape}: {name} needs one row of {CROSS_NAME} per querybank "
            f"row, {querybank_shape[0]} rows."
        )


class GalleryBankInput(NamedTuple):
    """A gallery bank given in two parts, as DBSN's ``fit`` takes it.

    ``gallery_bank`` is what ``fit(gallery_bank=...)`` takes (similarities to the
    gallery, or embeddings), or None; ``querybank_sims`` the precomputed ``s(b, h)``
    (n_bank x n_gallery_bank), or None.
    """

    gallery_bank: object = None
    querybank_sims: object = None


class GalleryBank:
    """A validated gallery bank, read as row blocks of its similarities to the gallery.

    Its form follows the querybank's: precomputed similarities when the normaliser
    was fitted on precomputed similarities, embeddings when it was fitted on
    embeddings (then the similarities are computed under its ``metric``, in the
    same fixed products as the querybank's).

    Parameters
    ----------
    gallery_bank : array-like of shape (n_gallery_bank, n_gallery or n_dims), or GalleryBankInput
        The caller's gallery bank; an ``np.memmap`` is read block by block and
        never copied whole.
    normalizer : QueryBankNormalizer
        The normaliser being fitted; its gallery (``n_features_in_`` and
        ``gallery_embeddings_``) is already set, and its ``working_memory`` and
        ``n_jobs`` bound the reductions over the gallery bank.
    """

    def __init__(self, gallery_bank, normalizer):
        self.normalizer = normalizer
        if not isinstance(gallery_bank, GalleryBankInput):
            gallery_bank = GalleryBankInput(gallery_bank)
        _refuse_device_arrays(normalizer, gallery_bank)
        self.probe = None if gallery_bank.gallery_bank is None else self._probe(gallery_bank.gallery_bank)
        self.given_querybank_sims = self._check_querybank_sims(gallery_bank.querybank_sims)

    @property
    def shape(self):
        """(n_gallery_bank, n_gallery): the shape of the gallery bank's similarities."""
        return self.probe.shape

    def reduce(self, make_reducers):
        """Run ``make_reducers(n_gallery_bank, n_gallery, dtype)`` over the gallery bank.

        Same streaming core, memory budget and threads as the querybank's reductions,
        so the results are bitwise the same for every ``working_memory`` and ``n_jobs``.
        """
        n_rows, n_gallery = self.shape
        return reduce_bank(
            self.probe,
            lambda: make_reducers(n_rows, n_gallery, self.probe.dtype),
            self.normalizer.working_memory,
            self.normalizer.n_jobs,
        )

    def querybank_sims(self, querybank):
        """Row blocks of ``s(b, h)``: the querybank's rows by the gallery bank's items.

        ``querybank`` is the normaliser's probe of the querybank (a ``ProbeMatrix``);
        in embedding mode the similarities are computed from its embeddings and the
        gallery bank's, in precomputed mode they are the caller's.
        """
        if querybank.gallery_t is not None:
            return ProbeMatrix(
                querybank.bank, self._prepared(querybank).T, querybank.metric, querybank.dtype
            )
        sims = self.given_querybank_sims
        check_querybank_sims_rows(self.normalizer, None if sims is None else sims.shape,
                                  querybank.shape, None if self.probe is None else self.shape)
        if self.probe is not None:  # given beside it, unused, but not to be taken broken
            for _ in self.probe.blocks(self.normalizer.working_memory):
                pass  # each block is checked for NaN and infinity as it is read
        return sims

    def targets(self, querybank, cross):
        """Row blocks of ``[P | s(b, h)]``: the querybank against the gallery, then the
        gallery bank (``cross``, from :meth:`querybank_sims`)."""
        if querybank.gallery_t is None:
            return _JoinedSims(querybank, cross)
        gallery_t = np.concatenate([querybank.gallery_t, cross.gallery_t], axis=1)
        return ProbeMatrix(querybank.bank, gallery_t, querybank.metric, querybank.dtype)

    def _prepared(self, querybank):
        """The gallery bank's embeddings ready for a dot product, in the querybank's dtype."""
        embeddings = np.asarray(self.probe.bank, dtype=querybank.dtype)
        return prepare_embeddings(embeddings, querybank.metric)

    def _probe(self, gallery_bank):
        gallery = self.normalizer.gallery_embeddings_
        if gallery is None:
            with naming("gallery_bank", gallery_bank):
                sims = check_array(
                    gallery_bank, dtype="numeric", ensure_all_finite=False, input_name="gallery_bank"
                )
            self._check_width(sims.shape, self.normalizer.n_features_in_, "gallery items")
            return ProbeMatrix(sims, dtype=float_dtype(sims, "gallery_bank"), name="gallery_bank")
        embeddings = check_embeddings(gallery_bank, "gallery_bank")
        self._check_width(embeddings.shape, gallery.shape[1], "embedding dimensions")
        return ProbeMatrix(
            embeddings, gallery.T, self.normalizer.metric, gallery.dtype, name="gallery_bank"
        )

    def _check_width(self, shape, expected, what):
        check_gallery_bank_width(self.normalizer, shape, expected, what)

    def _check_querybank_sims(self, sims):
        """The caller's precomputed ``s(b, h)`` (precomputed mode only), validated."""
        if sims is None:
            return None
        refuse_querybank_sims_with_embeddings(self.normalizer, np.shape(sims))
        with naming(CROSS_NAME, sims):
            sims = check_array(sims, dtype="numeric", ensure_all_finite=False, input_name=CROSS_NAME)
        check_querybank_sims_columns(self.normalizer, sims.shape,
                                     None if self.probe is None else self.probe.shape)
        return _CrossSims(sims, dtype=float_dtype(sims, CROSS_NAME), name=CROSS_NAME)


def _refuse_device_arrays(normalizer, gallery_bank):
    """Under ``array_api_dispatch``, a gallery bank of another namespace than NumPy beside
    a NumPy querybank (which keeps the host) is refused: the banks must share a namespace."""
    xp, on_device = namespace(*gallery_bank)
    if on_device:
        raise ValueError(
            f"{type(normalizer).__name__} got a gallery bank of {namespace_name(xp)} "
            "beside a NumPy querybank X: under array_api_dispatch, pass the querybank, the "
            "gallery and the gallery bank as arrays of one namespace and device (or all as "
            "NumPy arrays)."
        )


class _CrossSims(ProbeMatrix):
    """The caller's ``s(b, h)``, whose non-finite entries are named as such."""

    def rows(self, rows):
        return _CrossSims(self.bank[rows], dtype=self.dtype, name=self.name)

    def check(self, block, rows):
        check_finite_block(block, rows, self.name, row_name="querybank", item="gallery-bank item")


class _JoinedSims(ProbeMatrix):
    """Row blocks of ``[left | right]``, two precomputed matrices over the same rows."""

    def __init__(self, left, right):
        dtype = np.result_type(left.dtype, right.dtype)
        super().__init__(left.bank, dtype=dtype, name=left.name)
        self.left, self.right = left, right

    @property
    def shape(self):
        return self.left.shape[0], self.left.shape[1] + self.right.shape[1]

    def rows(self, rows):
        return _JoinedSims(self.left.rows(rows), self.right.rows(rows))

    def block(self, rows, first_row=0):
        blocks = [self.left.block(rows, first_row), self.right.block(rows, first_row)]
        return np.concatenate(blocks, axis=1, dtype=self.dtype)

    def entries(self, rows, columns):
        rows, columns = np.broadcast_arrays(rows, columns)
        n_left = self.left.shape[1]
        on_left = columns < n_left
        values = np.empty(rows.shape, dtype=self.dtype)
        values[on_left] = self.left.entries(rows[on_left], columns[on_left])
        values[~on_left] = self.right.entries(rows[~on_left], columns[~on_left] - n_left)
        return values

    def check(self, block, rows):
        """Each side named in its own terms, the right one (``s(b, h)``) first."""
        n_left = self.left.shape[1]
        self.right.check(block[:, n_left:], rows)
        self.left.check(block[:, :n_left], rows)


def reader(probe, working_memory=None, n_jobs=None):
    """``read(make_reducers)``: one pass of fresh reducers over the rows of ``probe``.

    A querybank given as a dask array is read by dask tasks (joined, for
    :meth:`GalleryBank.targets`, with the caller's ``s(b, h)``), any other probe
    by ``reduce_bank``.
    """
    bank = probe.bank
    if isinstance(probe, _JoinedSims) and is_dask_array(bank):
        import dask.array as da

        bank = da.concatenate([bank, da.from_array(probe.right.bank)], axis=1)
    if is_dask_array(bank):
        return lambda make: reduce_dask_bank(bank, probe.gallery_t, probe.metric, make, working_memory)
    return lambda make: reduce_bank(probe, make, working_memory, n_jobs)
