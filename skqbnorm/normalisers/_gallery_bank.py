"""The gallery bank: samples of the gallery modality that are not in the gallery.

DBNorm (and, later, DBSN) probe the gallery with a second bank, drawn from the
gallery's own modality (e.g. training videos for a video gallery). It enters ``fit``
the same way for every normaliser that uses one, through this module alone:

- ``fit(P, gallery_bank=P_g)``: ``P_g`` (M_g x N) holds the gallery bank's
  precomputed similarities to the gallery, as ``P`` holds the querybank's;
- ``fit(bank, gallery=G, gallery_bank=H)``: ``H`` (M_g x d) holds gallery-bank
  embeddings, compared with the gallery under the normaliser's ``metric``.

A normaliser declares ``_uses_gallery_bank = True`` and defines
``_learn_gallery_bank(gallery_bank)``, which receives a :class:`GalleryBank` (or None
when fit got none) after ``_learn``; every other normaliser refuses one.

Room for DBSN, which also needs ``s(b, h)`` between the querybank and the gallery
bank: in embedding mode both sets of embeddings are at hand (the querybank's would be
passed to :class:`GalleryBank` beside the normaliser); in precomputed mode that
matrix (M x M_g) must come from the caller, e.g. as a second keyword of ``fit``
handed to :class:`GalleryBank`, which would then offer a second ``reduce`` over it.
"""

import numpy as np
from sklearn.utils.validation import check_array

from .._stats import (
    ProbeMatrix,
    reduce_bank,
)
from .._validation import check_embeddings, float_dtype, naming


def check_gallery_bank_use(normaliser, gallery_bank):
    """Refuse a gallery bank given to a normaliser that cannot use one."""
    if gallery_bank is not None and not getattr(normaliser, "_uses_gallery_bank", False):
        name = type(normaliser).__name__
        raise ValueError(
            f"{name} does not use a gallery bank, but fit got gallery_bank of shape "
            f"{np.shape(gallery_bank)}: only the dual-bank normalisers (e.g. DBNorm's "
            f"DualInvertedSoftmax) take one. Fit {name} without gallery_bank."
        )


def fit_gallery_bank(normaliser, gallery_bank):
    """Hand the validated gallery bank (or None) to a normaliser that uses one."""
    if getattr(normaliser, "_uses_gallery_bank", False):
        bank = None if gallery_bank is None else GalleryBank(gallery_bank, normaliser)
        normaliser._learn_gallery_bank(bank)


class GalleryBank:
    """A validated gallery bank, read as row blocks of its similarities to the gallery.

    Its form follows the querybank's: precomputed similarities when the normaliser
    was fitted on precomputed similarities, embeddings when it was fitted on
    embeddings (then the similarities are computed under its ``metric``, in the
    same fixed products as the querybank's).

    Parameters
    ----------
    gallery_bank : array-like of shape (n_gallery_bank, n_gallery) or (n_gallery_bank, n_dims)
        The caller's gallery bank; an ``np.memmap`` is read block by block and
        never copied whole.
    normaliser : QueryBankNormaliser
        The normaliser being fitted; its gallery (``n_features_in_`` and
        ``gallery_embeddings_``) is already set, and its ``working_memory`` and
        ``n_jobs`` bound the reductions over the gallery bank.
    """

    def __init__(self, gallery_bank, normaliser):
        self.normaliser = normaliser
        self.probe = self._probe(gallery_bank)

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
            self.normaliser.working_memory,
            self.normaliser.n_jobs,
        )

    def _probe(self, gallery_bank):
        gallery = self.normaliser.gallery_embeddings_
        if gallery is None:
            with naming("gallery_bank", gallery_bank):
                sims = check_array(
                    gallery_bank, dtype="numeric", ensure_all_finite=False, input_name="gallery_bank"
                )
            self._check_width(sims.shape, self.normaliser.n_features_in_, "gallery items")
            return ProbeMatrix(sims, dtype=float_dtype(sims, "gallery_bank"), name="gallery_bank")
        embeddings = check_embeddings(gallery_bank, "gallery_bank")
        self._check_width(embeddings.shape, gallery.shape[1], "embedding dimensions")
        return ProbeMatrix(
            embeddings, gallery.T, self.normaliser.metric, gallery.dtype, name="gallery_bank"
        )

    def _check_width(self, shape, expected, what):
        if shape[1] != expected:
            form = "similarities to" if what == "gallery items" else "embeddings like"
            raise ValueError(
                f"gallery_bank has shape {shape}, but {type(self.normaliser).__name__} was "
                f"fitted on a gallery of {self.normaliser.n_features_in_} items: the gallery "
                f"bank must hold {form} the gallery, {expected} columns ({what})."
            )
