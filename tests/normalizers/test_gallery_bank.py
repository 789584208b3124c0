"""The gallery bank collaborator: where a bad gallery bank is named and how."""

import numpy as np
import pytest

from skqbnorm import (
    DualInvertedSoftmax,
)


def test_nan_in_a_later_gallery_bank_block_is_named_by_its_row():
    rng = np.random.default_rng(0)
    gallery_bank = rng.normal(size=(400, 25))
    gallery_bank[390, 3] = np.nan
    normalizer = DualInvertedSoftmax(working_memory=1e-4, n_jobs=1)
    with pytest.raises(ValueError, match=r"gallery_bank row 390 to gallery item 3 is nan"):
        normalizer.fit(rng.normal(size=(60, 25)), gallery_bank=gallery_bank)


def test_gallery_bank_width_message_names_its_form():
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError, match=r"must hold similarities to the gallery, 25 columns"):
        DualInvertedSoftmax().fit(rng.normal(size=(30, 25)), gallery_bank=np.zeros((9, 24)))
    with pytest.raises(ValueError, match=r"must hold embeddings like the gallery, 8 columns"):
        DualInvertedSoftmax().fit(
            rng.normal(size=(30, 8)), gallery=rng.normal(size=(25, 8)), gallery_bank=np.zeros((9, 7))
        )
