"""Nearest Neighbor Normalization: its equivalence with CSLS at alpha = 1/2, its bounds and
its grid search."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.model_selection import GridSearchCV

from skqbnorm import (
    CSLS,
)
from skqbnorm import NearestNeighborNormalization as NNN
from skqbnorm.metrics import make_retrieval_scorer

from helpers import sims_pair_with_hubs as sims_pair
from helpers import stable_ranking

# -- the stated equivalences ---------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 4, 60])
def test_nnn_with_half_alpha_ranks_as_csls(rng, k):
    queries, bank = sims_pair(rng, n_gallery=80)  # k=60: the bank, not the gallery, bounds k
    nnn = NNN(k=k, alpha=0.5).fit(bank).transform(queries)
    csls = CSLS(k=k).fit(bank).transform(queries)
    assert_array_equal(stable_ranking(nnn), stable_ranking(csls))
    # CSLS = 2 NNN - r_G(q): the difference is a per-row constant
    difference = 2 * nnn - csls
    assert_allclose(difference, difference[:, :1].repeat(80, axis=1), atol=1e-12)
    assert_array_equal(
        NNN(k=k).fit(bank).bank_neighborhood_, CSLS(k=k).fit(bank).bank_neighborhood_
    )


def test_nnn_ranking_differs_from_csls_for_other_alphas(rng):
    queries, bank = sims_pair(rng, n_gallery=80)
    csls = stable_ranking(CSLS(k=4).fit(bank).transform(queries))
    assert (stable_ranking(NNN(k=4, alpha=1.5).fit(bank).transform(queries)) != csls).any()
    assert_array_equal(NNN(k=4, alpha=0.0).fit(bank).transform(queries), queries)


def test_an_overflowing_bias_is_refused_not_returned(rng):
    bank = rng.uniform(1.0, 1.5, size=(30, 4)) * 1e308
    fitted = NNN(k=3, alpha=2.0).fit(bank)  # alpha * r_k overflows
    with pytest.raises(ValueError, match=r"NearestNeighborNormalization's scores .* overflow"):
        fitted.transform(bank[:2])


@pytest.mark.slow
def test_grid_search_picks_a_normalizing_nnn(hubness_sims):
    sims, gt = hubness_sims
    search = GridSearchCV(
        NNN(), {"k": [8, 64], "alpha": [0.0, 0.5, 1.0]}, scoring=make_retrieval_scorer("R@1"), cv=3
    ).fit(sims, gt)
    alphas = np.array(search.cv_results_["param_alpha"], dtype=float)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_["alpha"] > 0
    assert scores[alphas > 0].max() > scores[alphas == 0].max() + 3  # R@1 in percent


def test_k_larger_than_the_bank_but_not_the_gallery(rng, bank):
    message = r"k=21 is larger than the querybank.*shape \(20, 6\).*at most 20"
    with pytest.raises(ValueError, match=message):
        NNN(k=21).fit(bank)
    with pytest.raises(ValueError, match=r"k=32 is larger than the querybank.*shape \(20, 6\)"):
        NNN().fit(bank)  # the default k
    assert NNN(k=20).fit(bank).bank_neighborhood_.shape == (6,)  # k > n_gallery is fine
    da = pytest.importorskip("dask.array")
    with pytest.raises(ValueError, match=r"k=21 is larger than the querybank"):
        NNN(k=21).fit(da.from_array(bank))
