"""Sinkhorn normalisation against a dense log-domain Sinkhorn written from SPEC."""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from skqbnorm import InvertedSoftmax, SinkhornNormalization
from skqbnorm.datasets import load_wordnet_revdict, make_hubness_sims
from skqbnorm.metrics import make_retrieval_scorer, retrieval_metrics
from skqbnorm.normalizers._sinkhorn import RowLogSumExp

from helpers import quiet
from helpers import stable_ranking as order

# Tests of values run few iterations; the warning has its own test.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


# -- the dense reference (SPEC, "Sinkhorn normalisation"), literally --------------------


def sinkhorn_reference(bank_sims, tau, n_iter, tol=0.0):
    """Log-domain Sinkhorn over gallery x bank from v = 1: (log u, log v, error, iterations).

    K[g, b] = exp((s(b, g) - 1) / tau), marginals 1/N (gallery) and 1/M (bank). The error
    is that of the plan diag(u) K diag(v) just after the u-update: max_b |M colsum_b - 1|.
    """
    n_bank, n_gallery = bank_sims.shape
    log_kernel = (bank_sims.T - 1.0) / tau  # [g, b]
    log_v = np.zeros(n_bank)
    for done in range(1, n_iter + 1):
        log_u = -np.log(n_gallery) - logsumexp(log_kernel + log_v[None, :], axis=1)
        log_plan = log_u[:, None] + log_kernel + log_v[None, :]
        assert_allclose(np.exp(logsumexp(log_plan, axis=1)), 1.0 / n_gallery, rtol=1e-9)
        error = np.abs(n_bank * np.exp(logsumexp(log_plan, axis=0)) - 1.0).max()
        if error <= tol or done == n_iter:
            break  # log v stays the one that gave log u
        log_v = -np.log(n_bank) - logsumexp(log_kernel + log_u[:, None], axis=0)
    return log_u, log_v, error, done


def sinkhorn_scores(query_sims, bank_sims, tau, n_iter, tol=0.0):
    bias = tau * sinkhorn_reference(bank_sims, tau, n_iter, tol)[0]
    return query_sims + bias - bias.mean()


def sims_pair(rng, n_queries=30, n_bank=70, n_gallery=25, scale=1.0, dtype=np.float64):
    """Cosine-like similarities with a few hubs."""
    spread = rng.lognormal(0.0, 0.5, size=n_gallery) * 0.15
    bank = rng.normal(size=(n_bank, n_gallery)) * spread + 0.3
    queries = rng.normal(size=(n_queries, n_gallery)) * spread + 0.3
    return (queries * scale).astype(dtype), (bank * scale).astype(dtype)


# -- the formula --------------------------------------------------------------------------


@pytest.mark.parametrize("tau, n_iter", [(0.01, 10), (0.01, 1), (0.05, 3), (0.2, 25)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matches_dense_reference(rng, tau, n_iter, dtype):
    queries, bank = sims_pair(rng, dtype=dtype)
    fitted = quiet(SinkhornNormalization(tau=tau, n_iter=n_iter)).fit(bank)
    out = fitted.transform(queries)
    assert out.dtype == dtype
    q64, b64 = queries.astype(np.float64), bank.astype(np.float64)
    log_u, log_v, error, done = sinkhorn_reference(b64, tau, n_iter)
    expected = sinkhorn_scores(q64, b64, tau, n_iter)
    assert done == n_iter
    if dtype == np.float64:
        assert fitted.n_iter_ == n_iter
        assert_allclose(out, expected, rtol=1e-10, atol=1e-10)
        assert_array_equal(order(out), order(expected))
        assert_allclose(fitted.gallery_log_scaling_, log_u, rtol=1e-10, atol=1e-10)
        assert_allclose(fitted.bank_log_scaling_, log_v, rtol=1e-10, atol=1e-10)
        assert_allclose(fitted.marginal_error_, error, rtol=1e-9, atol=1e-12)
    else:
        assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_embedding_mode_matches_reference(rng, metric):
    # Dot products of embeddings of norm ~1, and a common direction for hubs.
    bank_emb, gallery_emb, query_emb = (rng.normal(size=(n, 12)) * 0.3 for n in (90, 30, 15))
    bank_emb[:, 0] += 0.5

    def prepare(a):
        return a / np.linalg.norm(a, axis=1, keepdims=True) if metric == "cosine" else a

    bank_sims = prepare(bank_emb) @ prepare(gallery_emb).T
    query_sims = prepare(query_emb) @ prepare(gallery_emb).T
    fitted = quiet(SinkhornNormalization(tau=0.02, n_iter=10, metric=metric)).fit(
        bank_emb, gallery=gallery_emb)
    precomputed = quiet(SinkhornNormalization(tau=0.02, n_iter=10)).fit(bank_sims)
    expected = sinkhorn_scores(query_sims, bank_sims, 0.02, 10)
    out = fitted.transform(fitted.similarities(query_emb))
    assert_allclose(out, expected, rtol=1e-10, atol=1e-10)
    assert_array_equal(order(out), order(expected))
    assert_allclose(out, precomputed.transform(query_sims), rtol=1e-10, atol=1e-10)
    assert_allclose(
        fitted.fit_transform(bank_emb, gallery=gallery_emb),
        sinkhorn_scores(bank_sims, bank_sims, 0.02, 10), rtol=1e-10, atol=1e-10,
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tau", [0.01, 0.05])
def test_one_half_step_is_the_inverted_softmax(rng, dtype, tau):
    # From v = 1, log u_g = -log N - logsumexp_b((s(b, g) - 1) / tau): IS with beta = 1 / tau.
    queries, bank = sims_pair(rng, dtype=dtype)
    half_step = quiet(SinkhornNormalization(tau=tau, n_iter=1)).fit(bank)
    inverted = InvertedSoftmax(beta=1.0 / tau).fit(bank)
    assert_array_equal(half_step.transform(queries), inverted.transform(queries))
    # the biases agree up to a constant: tau log u_g + c_g = 1 - tau log N
    constant = tau * half_step.gallery_log_scaling_ + inverted.bank_soft_max_
    assert_allclose(constant, 1.0 - tau * np.log(bank.shape[1]), rtol=1e-12)
    # and a second iteration really changes the ranking
    two = quiet(SinkhornNormalization(tau=tau, n_iter=2)).fit(bank)
    assert (order(two.transform(queries)) != order(inverted.transform(queries))).any()


def test_hand_computed_two_by_two():
    # Two bank queries, two items, tau = 1: K = exp(P^T - 1). From v = 1, u is IS's;
    # the row pass then gives v, and the marginal error of the plan after the u-update.
    bank = np.array([[0.0, 1.0], [1.0, 1.0]])
    fitted = SinkhornNormalization(tau=1.0, n_iter=1).fit(bank)
    kernel = np.exp(bank.T - 1.0)  # [[e^-1, 1], [1, 1]]
    u = 0.5 / kernel.sum(axis=1)  # [0.5 / (1 + 1/e), 0.25]
    assert_allclose(np.exp(fitted.gallery_log_scaling_), [0.5 / (1 + np.exp(-1)), 0.25])
    assert_allclose(fitted.bank_log_scaling_, [0.0, 0.0])
    columns = u @ kernel  # the plan's column sums, v = 1
    assert_allclose(fitted.marginal_error_, np.abs(2 * columns - 1).max(), rtol=1e-14)
    assert_allclose(fitted.transform([[0.5, 0.5]]), 0.5 + np.log(u) - np.log(u).mean()[None, None])


# -- convergence --------------------------------------------------------------------------


def test_converged_plan_has_both_marginals(rng):
    queries, bank = sims_pair(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = SinkhornNormalization(tau=0.1, n_iter=500, tol=1e-9).fit(bank)
    assert 1 < fitted.n_iter_ < 500 and fitted.marginal_error_ <= 1e-9
    log_u, log_v, error, done = sinkhorn_reference(bank, 0.1, 500, tol=1e-9)
    assert done == fitted.n_iter_ and error <= 1e-9
    assert_allclose(fitted.gallery_log_scaling_, log_u, rtol=1e-10)
    assert_allclose(fitted.bank_log_scaling_, log_v, rtol=1e-10, atol=1e-10)
    log_plan = (bank.T - 1.0) / 0.1 + fitted.gallery_log_scaling_[:, None] + fitted.bank_log_scaling_
    assert_allclose(np.exp(logsumexp(log_plan, axis=1)) * bank.shape[1], 1.0, rtol=1e-10)
    assert_allclose(np.exp(logsumexp(log_plan, axis=0)) * bank.shape[0], 1.0, atol=1e-9)
    # at the fixed point, more iterations change nothing
    longer = SinkhornNormalization(tau=0.1, n_iter=1000, tol=1e-12).fit(bank)
    assert_allclose(longer.transform(queries), fitted.transform(queries), atol=1e-9)


def test_warns_when_tol_is_not_reached(rng):
    _, bank = sims_pair(rng)
    with pytest.warns(ConvergenceWarning, match=r"did not reach tol=0.01 in n_iter=2 .*error is"):
        fitted = SinkhornNormalization(tau=0.01, n_iter=2).fit(bank)
    assert fitted.n_iter_ == 2 and fitted.marginal_error_ > 0.01
    errors = [quiet(SinkhornNormalization(tau=0.05, n_iter=n)).fit(bank).marginal_error_
              for n in (1, 5, 25)]
    assert errors[0] > errors[1] > errors[2]


FITTED = ("gallery_log_scaling_", "bank_log_scaling_", "marginal_error_", "n_iter_")


@pytest.mark.slow
@pytest.mark.parametrize("embedded", [False, True])
def test_bitwise_the_same_for_every_split(rng, tmp_path, leaves, embedded):
    queries, bank = sims_pair(rng, n_bank=333)
    bank = np.round(bank, 3)  # ties: any split-dependent rounding would reorder them
    if embedded:
        bank, gallery = rng.normal(size=(333, 8)), rng.normal(size=(25, 8))
        queries = quiet(SinkhornNormalization()).fit(bank, gallery=gallery).similarities(
            rng.normal(size=(30, 8)))
    else:
        gallery = None
        np.save(tmp_path / "bank.npy", bank)
        bank = np.load(tmp_path / "bank.npy", mmap_mode="r")
    expected = quiet(SinkhornNormalization(tau=0.02, n_iter=4)).fit(bank, gallery=gallery)
    scores, top = expected.transform(queries), expected.top_k(queries, k=5)
    for working_memory in (1e-4, None):
        for n_jobs in (1, 2):
            fitted = clone(expected).set_params(working_memory=working_memory, n_jobs=n_jobs)
            fitted.fit(bank, gallery=gallery)
            for name in FITTED:
                assert_array_equal(getattr(fitted, name), getattr(expected, name))
            assert_array_equal(fitted.transform(queries), scores)
            for got, want in zip(fitted.top_k(queries, k=5), top):
                assert_array_equal(got, want)
    reference = sinkhorn_scores(queries, np.asarray(bank) if gallery is None
                                else expected.similarities(bank), 0.02, 4)
    assert_allclose(scores, reference, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_pass_of_wide_rows_is_the_same_in_any_block(rng, dtype):
    # Rows wider than numpy's 8,192-element buffers: each row's sum must not depend on
    # which rows share its block.
    block = rng.normal(size=(12, 9000)).astype(dtype)
    offsets = rng.normal(size=9000)
    whole = RowLogSumExp(50.0, offsets)
    whole.update(block, slice(0, 12))
    parts = RowLogSumExp(50.0, offsets)
    for start in (0, 5, 7):
        stop = {0: 5, 5: 7, 7: 12}[start]
        parts.update(block[start:stop], slice(start, stop))
    assert_array_equal(parts.result(12), whole.result(12))
    expected = logsumexp(50.0 * (block.astype(float) + offsets), axis=1) / 50.0
    assert_allclose(whole.result(12), expected, rtol=1e-6 if dtype == np.float32 else 1e-13)


def test_dask_bank_equals_numpy(rng):
    da = pytest.importorskip("dask.array")
    queries, bank = sims_pair(rng, n_bank=300)
    expected = quiet(SinkhornNormalization(tau=0.02, n_iter=3)).fit(bank)
    fitted = clone(expected).fit(da.from_array(bank, chunks=(70, 10)))
    for name in FITTED:
        assert_array_equal(getattr(fitted, name), getattr(expected, name))
    assert_array_equal(fitted.transform(da.from_array(queries)).compute(), expected.transform(queries))


def test_top_k_equals_transform_then_stable_sort(rng):
    queries, bank = sims_pair(rng)
    queries[:, 5] = queries[:, 6]  # tied raw similarities
    fitted = quiet(SinkhornNormalization(tau=0.02)).fit(bank)
    scores = fitted.transform(queries)
    indices, top = fitted.top_k(queries, k=7)
    assert_array_equal(indices, order(scores)[:, :7])
    assert_array_equal(top, np.take_along_axis(scores, indices, axis=1))


# -- numerics and input -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_finite_on_logit_scale_similarities(rng, dtype):
    # CLIP-style logits (x100) with tau = 0.01: (s - 1) / tau reaches 1e4, far past exp's range.
    queries, bank = sims_pair(rng, scale=100.0, dtype=dtype)
    fitted = quiet(SinkhornNormalization(tau=0.01, n_iter=10)).fit(bank)
    out = fitted.transform(queries)
    assert out.dtype == dtype and np.isfinite(out).all()
    for name in FITTED:
        assert np.isfinite(getattr(fitted, name)).all()
    expected = sinkhorn_scores(queries.astype(float), bank.astype(float), 0.01, 10)
    tolerance = 1e-8 if dtype == np.float64 else 1e-2
    assert_allclose(out, expected, rtol=tolerance, atol=tolerance)
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.exp((bank.astype(float) - 1) / 0.01)).all()  # the literal kernel


@pytest.mark.parametrize("scale", [1e-300, 1e-30, 1e30, 1e300])
def test_scores_scale_with_the_similarities(rng, scale):
    # Scores of c * s with tau * c are c times those of s with tau: the kernel's constant
    # exp(-1 / tau) must not enter the iterations, where it would erase tiny similarities.
    queries, bank = sims_pair(rng)
    expected = quiet(SinkhornNormalization(tau=0.02, n_iter=5)).fit(bank)
    fitted = quiet(SinkhornNormalization(tau=0.02 * scale, n_iter=5)).fit(bank * scale)
    out = fitted.transform(queries * scale)
    assert np.isfinite(out).all() and np.isfinite(fitted.bank_log_scaling_).all()
    assert_allclose(out / scale, expected.transform(queries), rtol=1e-9, atol=1e-12)
    assert_allclose(fitted.bank_log_scaling_, expected.bank_log_scaling_, rtol=1e-9, atol=1e-9)
    assert_allclose(fitted.marginal_error_, expected.marginal_error_, rtol=1e-6)
    assert fitted.n_iter_ == expected.n_iter_


@pytest.mark.parametrize(
    "params, name",
    [
        ({"tau": 0.0}, "tau"), ({"tau": -0.1}, "tau"), ({"tau": np.nan}, "tau"),
        ({"tau": True}, "tau"), ({"tau": np.inf}, "tau"),
        ({"n_iter": 0}, "n_iter"), ({"n_iter": 2.5}, "n_iter"), ({"n_iter": True}, "n_iter"),
        ({"tol": -1e-3}, "tol"), ({"tol": np.nan}, "tol"), ({"tol": False}, "tol"),
    ],
)
def test_bad_parameters_are_named(rng, params, name):
    _, bank = sims_pair(rng)
    with pytest.raises(ValueError, match=rf"'{name}' parameter of SinkhornNormalization"):
        SinkhornNormalization(**params).fit(bank)


def test_a_gallery_bank_is_refused(rng):
    _, bank = sims_pair(rng)
    with pytest.raises(ValueError, match=r"SinkhornNormalization does not use a gallery bank"):
        SinkhornNormalization().fit(bank, gallery_bank=bank[:5])


def test_non_finite_bank_is_named(rng):
    _, bank = sims_pair(rng)
    bank[4, 7] = np.nan
    with pytest.raises(ValueError, match=r"querybank row 4 to gallery item 7 is nan"):
        SinkhornNormalization().fit(bank)


def test_fit_keeps_no_reference_to_the_bank(rng):
    queries, bank = sims_pair(rng)
    fitted = quiet(SinkhornNormalization()).fit(bank)
    assert not hasattr(fitted, "_bank_passes")
    restored = pickle.loads(pickle.dumps(fitted))
    assert_array_equal(restored.transform(queries), fitted.transform(queries))
    bank[0, 0] = np.inf
    with pytest.raises(ValueError, match="inf"):
        fitted.fit(bank)
    assert not hasattr(fitted, "_bank_passes")
    pickle.dumps(fitted)


def test_inputs_are_never_modified(rng):
    queries, bank = sims_pair(rng)
    copies = queries.copy(), bank.copy()
    fitted = quiet(SinkhornNormalization()).fit(bank)
    fitted.transform(queries)
    fitted.fit_transform(bank)
    assert_array_equal(queries, copies[0])
    assert_array_equal(bank, copies[1])


# -- scikit-learn -------------------------------------------------------------------------


@pytest.mark.slow
def test_grid_search_over_tau_and_n_iter():
    sims, gt, _ = make_hubness_sims(900, 150, 0, random_state=0)
    grid = {"tau": [0.003, 0.01, 0.03], "n_iter": [1, 10]}
    folds = KFold(3)
    search = GridSearchCV(
        SinkhornNormalization(), grid, scoring=make_retrieval_scorer("R@1"), cv=folds
    ).fit(sims, gt)
    assert len(search.cv_results_["params"]) == 6
    assert search.best_params_["tau"] in grid["tau"]
    assert search.best_score_ > retrieval_metrics(sims, gt)["R@1"]
    # a recorded score is the R@1 of the held-out rows, normalised with the other folds
    first = search.cv_results_["params"][0]
    train, test = next(folds.split(sims))
    scores = SinkhornNormalization(**first).fit(sims[train]).transform(sims[test])
    assert np.isclose(search.cv_results_["split0_test_score"][0],
                      retrieval_metrics(scores, gt[test])["R@1"])


def test_sinkhorn_refuses_a_bank_overflowing_in_one_column_only():
    bank = np.array([[1.7e308, 0.0], [1.7e308, 0.0]])
    with pytest.raises(ValueError, match=r"tau=1e\+308 .*soft maximum over the gallery overflows"):
        SinkhornNormalization(tau=1e308).fit(bank)


def test_sinkhorn_stops_at_an_exact_marginal_error_of_tol():
    # A constant 2 x 2 bank at tau = 1: c_g = log 2, f_g = -2 log 2, the row pass gives -log 2,
    # so h' = -log 2 + log 2 = 0 = h exactly: error 0 <= tol = 0 after one iteration, no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = SinkhornNormalization(tau=1.0, tol=0.0, n_iter=5).fit(np.zeros((2, 2)))
    assert fitted.n_iter_ == 1 and fitted.marginal_error_ == 0.0


def test_sinkhorn_tau_beyond_float32_on_a_float32_bank():
    # 1 / tau = 1e39 is inf in float32: the passes must work in float64, not multiply 0 by inf.
    # As tau -> 0 each soft maximum is the column's max (1 in both columns), so the excess is 0.
    bank = np.array([[0, 1], [1, 0], [0.5, 0.2]], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted = SinkhornNormalization(tau=1e-39, tol=0.0, n_iter=3).fit(bank)
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
        fitted = SinkhornNormalization(tau=1.0, n_iter=1).fit(bank)
    assert 1.0 <= fitted.marginal_error_ < np.inf


@pytest.mark.slow
@pytest.mark.parametrize("bank", ["bank_embeddings", "far_bank_embeddings"])
def test_the_defaults_converge_on_the_bundled_data(bank):
    # scripts/sinkhorn_defaults_study.py chose them among the settings whose fits all reach
    # tol within 3/4 of n_iter; the demo fits these two banks (float32), silently.
    data = load_wordnet_revdict()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fitted = SinkhornNormalization().fit(getattr(data, bank) @ data.gallery_embeddings.T)
    assert fitted.marginal_error_ <= fitted.tol
    assert fitted.n_iter_ <= 0.75 * fitted.n_iter
