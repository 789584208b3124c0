"""The capabilities a normaliser declares (skqbnorm.normalizers._capabilities): values no
index or catalogue could act on are refused."""

import pytest

from skqbnorm.normalizers import Capabilities


def test_capabilities_refuse_contradictions():
    with pytest.raises(ValueError, match="bias_form"):
        Capabilities(gated=True)
    with pytest.raises(ValueError, match="index"):
        Capabilities(index="flat")
    with pytest.raises(ValueError, match="gallery_bank"):
        Capabilities(gallery_bank="bank")
