"""Guards for edge cases the mutation run found untested (issue 9), with hand-worked values."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning, DataConversionWarning
from sklearn.utils import get_tags

from skqbnorm import (
    DualInvertedSoftmax,
    DualSoftmax,
    HingeReranker,
    PointwiseReranker,
    SinkhornNormalisation,
)
from skqbnorm._validation import check_sims
from skqbnorm.rerankers._base import score_scale, trace_or_one


def test_dual_softmax_refuses_a_bank_overflowing_in_one_column_only():
    # column 0's soft maximum, 1.7e308 + 1e308 * log(2), overflows float64; column 1's does not
    bank = np.array([[1.7e308, 0.0], [1.7e308, 0.0]])
    with pytest.raises(ValueError, match=r"temperature=1e\+308 is too large.*overflow float64"):
        DualSoftmax(temperature=1e308).fit(bank)


def test_dual_softmax_temperature_beyond_float32_in_float32():
    # T = 4e38 is inf in float32, but the soft maxima 0 + T * log(2) = 2.77e38 are not:
    # the weights are exp((s - T log 2) / T) = exp(-log 2) = 1/2, the scores s / 2.
    bank = np.zeros((2, 2), dtype=np.float32)
    out = DualSoftmax(temperature=4e38).fit(bank).transform(np.array([[1.0, 2.0]], np.float32))
    assert out.dtype == np.float32
    assert_allclose(out, [[0.5, 1.0]], rtol=1e-6)


def test_nan_in_a_later_gallery_bank_block_is_named_by_its_row():
    rng = np.random.default_rng(0)
    gallery_bank = rng.normal(size=(400, 25))
    gallery_bank[390, 3] = np.nan
    normaliser = DualInvertedSoftmax(working_memory=1e-4, n_jobs=1)
    with pytest.raises(ValueError, match=r"gallery_bank row 390 to gallery item 3 is nan"):
        normaliser.fit(rng.normal(size=(60, 25)), gallery_bank=gallery_bank)


def test_gallery_bank_width_message_names_its_form():
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError, match=r"must hold similarities to the gallery, 25 columns"):
        DualInvertedSoftmax().fit(rng.normal(size=(30, 25)), gallery_bank=np.zeros((9, 24)))
    with pytest.raises(ValueError, match=r"must hold embeddings like the gallery, 8 columns"):
        DualInvertedSoftmax().fit(
            rng.normal(size=(30, 8)), gallery=rng.normal(size=(25, 8)), gallery_bank=np.zeros((9, 7))
        )


@pytest.mark.parametrize("dtype, expected", [
    (np.float32, np.float32), (np.float64, np.float64), (np.int64, np.float64),
    (np.float16, np.float64),
])
def test_check_sims_keeps_float32_and_float64_and_widens_the_rest(dtype, expected):
    sims = np.array([[1, 2], [3, 4]], dtype=dtype)
    checked = check_sims(sims)
    assert checked.dtype == expected
    assert_allclose(checked, [[1.0, 2.0], [3.0, 4.0]])


def test_dbnorm_refuses_a_querybank_overflowing_in_one_column_only():
    # column 0's soft maximum, 1.7e308 + log(2) / 1e-308, overflows float64; column 1's does not
    bank = np.array([[1.7e308, 0.0], [1.7e308, 0.0]])
    with pytest.raises(ValueError, match=r"beta1=1e-308 is too small.*overflow float64"):
        DualInvertedSoftmax(beta1=1e-308).fit(bank)


def test_sinkhorn_refuses_a_bank_overflowing_in_one_column_only():
    bank = np.array([[1.7e308, 0.0], [1.7e308, 0.0]])
    with pytest.raises(ValueError, match=r"tau=1e\+308 .*soft maximum over the gallery overflows"):
        SinkhornNormalisation(tau=1e308).fit(bank)


def test_sinkhorn_stops_at_an_exact_marginal_error_of_tol():
    # A constant 2 x 2 bank at tau = 1: c_g = log 2, f_g = -2 log 2, the row pass gives -log 2,
    # so h' = -log 2 + log 2 = 0 = h exactly: error 0 <= tol = 0 after one iteration, no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = SinkhornNormalisation(tau=1.0, tol=0.0, n_iter=5).fit(np.zeros((2, 2)))
    assert fitted.n_iter_ == 1 and fitted.marginal_error_ == 0.0


def test_sinkhorn_tau_beyond_float32_on_a_float32_bank():
    # 1 / tau = 1e39 is inf in float32: the passes must work in float64, not multiply 0 by inf.
    # As tau -> 0 each soft maximum is the column's max (1 in both columns), so the excess is 0.
    bank = np.array([[0, 1], [1, 0], [0.5, 0.2]], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted = SinkhornNormalisation(tau=1e-39, tol=0.0, n_iter=3).fit(bank)
    assert fitted.n_iter_ >= 2  # the later column pass (with bank offsets) ran
    assert np.isfinite(fitted.gallery_log_scaling_).all()
    assert_allclose(fitted.transform(bank), bank)


def test_sinkhorn_float32_offsets_overflowing_float32_are_added_in_float64():
    # The row pass adds f_g ~ -3e38 to the row of -3e38s: -6e38 overflows float32 only.
    bank = np.array([[3e38, 3e38], [-3e38, -3e38]], dtype=np.float32)
    # The updated potential h'_1 = -log 2 - (-6e38 + log 2) is finite, so the marginal error,
    # |expm1((0 - h'_1) / tau)| = 1 (row 0's, in float32 rounding, is 3): not converged, but
    # no overflow refusal.
    with pytest.warns(ConvergenceWarning):
        fitted = SinkhornNormalisation(tau=1.0, n_iter=1).fit(bank)
    assert 1.0 <= fitted.marginal_error_ < np.inf


@pytest.mark.parametrize("param", ["n_neighbors", "n_positive"])
def test_reranker_counts_must_be_at_least_one(param):
    X, y = np.random.default_rng(2).normal(size=(6, 3)), np.arange(6.0)
    with pytest.raises(ValueError, match=rf"'{param}' parameter .* range \[1, inf\)\. Got 0"):
        PointwiseReranker(**{param: 0}).fit(X, y)


def test_reranker_accepts_one_positive_and_records_the_feature_count():
    X, y = np.random.default_rng(3).normal(size=(6, 3)), np.arange(6.0)
    fitted = PointwiseReranker(initial="binary", n_positive=1).fit(X, y)
    assert fitted.n_features_in_ == 3
    assert fitted.scores_.shape == (6,) and np.isfinite(fitted.scores_).all()


def test_reranker_requests_groups_for_fit():
    assert PointwiseReranker().get_metadata_routing().fit.requests["groups"] is True


def test_a_single_short_list_is_not_named_as_a_group():
    with pytest.raises(ValueError, match=r"got 1 sample\(s\) \(rows of X"):
        PointwiseReranker().fit(np.zeros((1, 3)), np.ones(1))


@pytest.mark.parametrize("scores, expected", [
    ([-1.0, 0.0, 1.0], [0.0, 0.5, 1.0]),
    ([4.0, -1e308, 1e308], [0.5, 0.0, 1.0]),  # max - min overflows float64 unscaled
])
def test_minmax_initial_scores(scores, expected):
    initial = PointwiseReranker(initial="minmax")._initial_scores(np.array(scores))
    assert_allclose(initial, expected)


def test_reranker_tags():
    tags = get_tags(PointwiseReranker())
    assert tags.target_tags.required is True and tags.non_deterministic is False


def test_normalised_null_vector_is_one_on_isolated_items():
    weights = np.array([[0.0, 4.0, 0.0], [4.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # degrees 4, 4, 0
    assert_allclose(PointwiseReranker._null(weights, True), [2.0, 2.0, 1.0])
    assert_allclose(PointwiseReranker._null(weights, False), [1.0, 1.0, 1.0])


def test_rank_initial_scores():
    # positions of [3, 1, 2] from the top: 0, 2, 1; the prior is 1 - position / n
    initial = PointwiseReranker(initial="rank")._initial_scores(np.array([3.0, 1.0, 2.0]))
    assert_allclose(initial, [1.0, 1.0 / 3.0, 2.0 / 3.0])


@pytest.mark.parametrize("param", ["rho", "n_top", "n_bottom", "n_clusters"])
def test_pairwise_counts_must_be_at_least_one(param):
    X, y = np.random.default_rng(4).normal(size=(6, 3)), np.arange(6.0)
    with pytest.raises(ValueError, match=rf"'{param}' parameter .* range \[1, inf\)\. Got 0"):
        HingeReranker(**{param: 0}).fit(X, y)


def test_pairwise_binary_prior_without_pairs_names_n_positive():
    X, y = np.random.default_rng(5).normal(size=(6, 3)), np.arange(6.0)
    with pytest.raises(ValueError, match=r"initial='binary' with n_positive=6\)"):
        HingeReranker(initial="binary", n_positive=6).fit(X, y)


def test_reranker_warns_on_a_column_vector_y():
    X, y = np.random.default_rng(6).normal(size=(6, 3)), np.arange(6.0)
    with pytest.warns(DataConversionWarning):
        fitted = PointwiseReranker().fit(X, y[:, None])
    assert fitted.scores_.shape == (6,)


def test_score_scale_divides_by_the_largest_magnitude():
    magnitude, mean, std = score_scale(np.array([3.0, -6.0]))  # t = [0.5, -1]
    assert (magnitude, mean, std) == (6.0, -0.25, 0.75)
    assert score_scale(np.zeros(3)) == (1.0, 0.0, 0.0)


def test_trace_or_one():
    assert trace_or_one(np.diag([1.0, 2.0])) == 3.0
    assert trace_or_one(np.zeros((2, 2))) == 1.0


def test_pairwise_accepts_a_single_cluster():
    X, y = np.random.default_rng(4).normal(size=(8, 3)), np.arange(8.0)
    fitted = HingeReranker(pairs="clustering", n_clusters=1).fit(X, y)
    assert np.isfinite(fitted.scores_).all()
