"""Every dataset loader and generator names its bad arguments."""

import numpy as np
import pytest

from skqbnorm.datasets import (
    load_digits_reranking,
    load_digits_retrieval,
    make_hubness_sims,
)


@pytest.mark.parametrize("call, message", [
    (lambda: load_digits_retrieval(n_gallery=0.5), r"'n_gallery' parameter of load_digits_retrieval .* \[1, 1796\]"),
    (lambda: load_digits_retrieval(n_gallery=1797), r"'n_gallery' parameter .* \[1, 1796\]. Got 1797"),
    (lambda: load_digits_retrieval(drop=1.5), r"'drop' parameter .* \[0.0, 1.0\]"),
    (lambda: load_digits_retrieval(noise=-1.0), r"'noise' parameter"),
    (lambda: load_digits_retrieval(dtype=int), r"dtype must be a float dtype such as np.float32; got int64"),
    (lambda: load_digits_reranking(n_pool=0), r"'n_pool' parameter of load_digits_reranking"),
    (lambda: load_digits_reranking(n_pool=5000), r"n_pool=5000 exceeds the 1777 digits left unlabelled"),
    (lambda: load_digits_reranking(n_labeled_per_class=175), r"'n_labeled_per_class' .* \[1, 174\]"),
    (lambda: make_hubness_sims(10, 0, 20), r"'n_gallery' parameter of make_hubness_sims"),
    (lambda: make_hubness_sims(10, 5, 20, hub_spread=-1.0), r"'hub_spread' parameter"),
    (lambda: make_hubness_sims(10, 5, 20, scale=0.0), r"'scale' parameter"),
    (lambda: make_hubness_sims(10, 5, 20, dtype=np.int32), r"dtype must be a float dtype"),
    (lambda: make_hubness_sims(True, 5, 20), r"'n_queries' parameter"),
    (lambda: make_hubness_sims(10, 5, -1), r"'n_bank' parameter"),
])
def test_bad_loader_arguments_are_named(call, message):
    # numpy or scikit-learn internals answered before (test_size, "high <= 0"), or an
    # integer dtype silently gave matrices of zeros.
    with pytest.raises(ValueError, match=message):
        call()
