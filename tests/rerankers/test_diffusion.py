"""The diffusion reranker (skqbnorm.rerankers._diffusion) against the dense reference
written from the paper's formulas (tests/reference_rerankers.py), and its order at the edges."""

import numpy as np
import pytest
from reference_rerankers import diffusion

from skqbnorm import DiffusionReranker
from skqbnorm.rerankers._graph import unit_rows

from helpers import clustered_list, same_ranking


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha, k, gamma, n_source", [
    (0.99, 10, 3.0, 10), (0.5, 3, 1.0, None), (0.9, 50, 0.0, 40), (0.0, 5, 1.0, None),
    (0.99, 5, 3.0, 1)])
def test_diffusion_equals_the_dense_reference(seed, alpha, k, gamma, n_source):
    features, initial, _ = clustered_list(seed)
    reranker = DiffusionReranker(alpha, n_neighbors=k, gamma=gamma, n_source=n_source)
    scores = reranker.fit_predict(features, initial)
    expected = diffusion(features, initial, alpha, k, gamma, n_source or len(initial))
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-8 * np.abs(expected).max())
    assert same_ranking(scores, expected)
    if alpha == 0 and n_source is None:  # the source itself: the positive initial scores,
        positive = np.maximum(initial, 0) / np.abs(initial).max()  # its zeros in initial order
        np.testing.assert_allclose(scores, positive, rtol=1e-15, atol=1e-10)
        np.testing.assert_array_equal(np.argsort(scores), np.argsort(initial))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n_items, n_source, gamma", [(12, 10, 3.0), (40, 10, 3.0),
                                                      (40, None, 0.0), (40, 1, 1.0)])
def test_diffusion_at_alpha_zero_ranks_as_the_initial_scores(seed, n_items, n_source, gamma):
    features, initial, _ = clustered_list(seed, n_items=n_items)
    scores = DiffusionReranker(0.0, n_neighbors=3, gamma=gamma, n_source=n_source).fit_predict(
        features, initial)
    assert len(np.unique(scores)) == n_items  # no tie left (the initial scores have none)
    np.testing.assert_array_equal(np.argsort(scores), np.argsort(initial))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("alpha", [0.0, 0.5, 0.99])
def test_diffusion_of_a_list_without_a_positive_score_diffuses_it_mapped_onto_0_1(seed, alpha):
    features, initial, _ = clustered_list(seed)
    negative = -1.5 - np.abs(initial)  # every score < 0: the paper's source would be empty
    scores = DiffusionReranker(alpha, n_neighbors=5).fit_predict(features, negative)
    mapped = (negative - negative.min()) / np.ptp(negative)
    expected = diffusion(features, mapped, alpha, 5, 3.0, 10)
    assert np.abs(expected).max() > 0
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-8 * np.abs(expected).max())
    assert same_ranking(scores, expected)
    # a list with one positive score keeps the paper's source (divided by the largest magnitude)
    one_positive = np.where(np.arange(len(negative)) == 3, 0.2, negative)
    np.testing.assert_allclose(
        DiffusionReranker(alpha, n_neighbors=5).fit_predict(features, one_positive),
        diffusion(features, one_positive, alpha, 5, 3.0, 10), rtol=0, atol=1e-8)


def test_diffusion_ties_keep_the_initial_order_below_the_reached_samples():
    # two far clusters; the source (n_source=2) lies in the first, so the diffusion never
    # reaches the second: the paper's scores are 0 there, tied.
    rng = np.random.default_rng(3)
    features = np.vstack([rng.normal([5.0, 0, 0], 0.3, size=(10, 3)),
                          rng.normal([0, 0, 5.0], 0.3, size=(10, 3))])
    initial = np.r_[rng.uniform(0.5, 1.0, 10), rng.uniform(-0.5, 0.4, 10)]
    scores = DiffusionReranker(0.9, n_neighbors=4, n_source=2).fit_predict(features, initial)
    expected = diffusion(features, initial, 0.9, 4, 3.0, 2)
    unreached = expected == 0
    assert unreached[10:].all() and unreached.sum() >= 10
    np.testing.assert_array_equal(np.argsort(scores[unreached]), np.argsort(initial[unreached]))
    assert scores[unreached].max() < scores[~unreached].min()
    assert np.abs(scores[unreached]).max() <= 1e-10 * np.abs(expected).max()
    np.testing.assert_array_equal(scores[~unreached], diffusion_scores_unspread(features, initial))
    # equal initial scores among the ties stay tied
    tied = initial.copy()
    tied[[12, 15]] = tied[11]
    again = DiffusionReranker(0.9, n_neighbors=4, n_source=2).fit_predict(features, tied)
    assert again[12] == again[15] == again[11]


def diffusion_scores_unspread(features, initial):
    """The reached samples' scores, which the spreading of ties must leave bitwise alone."""
    from scipy import sparse

    from skqbnorm.rerankers._diffusion import mutual_affinity, normalized_affinity
    from skqbnorm.rerankers._solvers import conjugate_gradients

    reranker = DiffusionReranker(0.9, n_neighbors=4, n_source=2)
    weights = normalized_affinity(mutual_affinity(unit_rows(features), 4, 3.0))
    raw, _ = conjugate_gradients((sparse.identity(len(initial)) - 0.9 * weights).tocsr(),
                                 reranker._source(initial), None)
    return raw[raw != 0]


def test_diffusion_does_not_see_the_initial_scores_scale():
    features, initial, _ = clustered_list(1)
    reranker = DiffusionReranker(n_neighbors=8)
    np.testing.assert_allclose(reranker.fit_predict(features, 1e300 * initial),
                               reranker.fit_predict(features, initial), rtol=1e-12)


def test_diffusion_warns_of_lists_whose_solve_stopped_short(monkeypatch):
    from sklearn.exceptions import ConvergenceWarning

    from skqbnorm.rerankers import _diffusion

    features, initial, _ = clustered_list(0)
    reranker = DiffusionReranker(n_neighbors=5)
    reranker.fit(features, initial)
    assert reranker.n_iter_.shape == (1,) and reranker.n_iter_[0] > 0

    def stopped_short(system, rhs, start):
        return rhs, {"status": "maximum iterations reached", "n_iter": 800,
                     "solver": "conjugate gradients"}

    monkeypatch.setattr(_diffusion, "conjugate_gradients", stopped_short)
    groups = np.repeat([0, 1], 20)
    with pytest.warns(ConvergenceWarning, match=r"after 800 iterations .* 2 of 2 lists"):
        reranker.fit(features, initial, groups=groups)
