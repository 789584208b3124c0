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
    with pytest.raises(ValueError, match="item_bias must be one of"):
        Capabilities(bias_form=True, item_bias="softmax")
    with pytest.raises(ValueError, match="item_bias='top_k_mean' needs bias_form"):
        Capabilities(item_bias="top_k_mean")
    assert Capabilities(bias_form=True, item_bias="log_sum_exp").item_bias == "log_sum_exp"
