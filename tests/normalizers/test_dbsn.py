"""Dual-bank Sinkhorn normalisation (DBSN) against a dense Sinkhorn written from SPEC."""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from skqbnorm import DualBankSinkhornNormalization, SinkhornNormalization
from skqbnorm.datasets import load_wordnet_revdict, make_hubness_sims
from skqbnorm.metrics import make_retrieval_scorer, retrieval_metrics

from helpers import quiet
from helpers import stable_ranking as order

# Tests of values run few iterations; the warning has its own test.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


DBSN = DualBankSinkhornNormalization


# -- the dense reference (SPEC, "Sinkhorn normalisation (SN / DBSN)"), literally ----------


def dbsn_reference(bank_sims, cross_sims, tau, n_iter, tol=0.0):
    """Log-domain Sinkhorn over targets G + B_g against B_q, from v = 1.

    The targets' similarities to the bank are [s(b, g) | s(b, h)]; K[t, b] =
    exp((s(b, t) - 1) / tau), marginals 1 / (N + M_g) over targets, 1 / M over the bank.
    Returns log u (all targets), log v, the marginal error after the u-update, iterations.
    """
    targets = np.hstack([bank_sims, cross_sims])
    n_bank, n_targets = targets.shape
    log_kernel = (targets.T - 1.0) / tau  # [t, b]
    log_v = np.zeros(n_bank)
    for done in range(1, n_iter + 1):
        log_u = -np.log(n_targets) - logsumexp(log_kernel + log_v[None, :], axis=1)
        log_plan = log_u[:, None] + log_kernel + log_v[None, :]
        error = np.abs(n_bank * np.exp(logsumexp(log_plan, axis=0)) - 1.0).max()
        if error <= tol or done == n_iter:
            break  # log v stays the one that gave log u
        log_v = -np.log(n_bank) - logsumexp(log_kernel + log_u[:, None], axis=0)
    return log_u, log_v, error, done


def dbsn_scores(query_sims, bank_sims, cross_sims, tau, n_iter, tol=0.0):
    """s(q, g) + tau log u_g, less its mean over the test gallery (u of G only)."""
    log_u = dbsn_reference(bank_sims, cross_sims, tau, n_iter, tol)[0]
    bias = tau * log_u[: bank_sims.shape[1]]
    return query_sims + bias - bias.mean()


def three_sets(rng, n_queries=30, n_bank=70, n_gallery=25, n_gallery_bank=20, dtype=np.float64):
    """Query-to-gallery, bank-to-gallery and bank-to-gallery-bank similarities, with hubs."""
    spread = rng.lognormal(0.0, 0.5, size=n_gallery + n_gallery_bank) * 0.15
    bank = rng.normal(size=(n_bank, n_gallery + n_gallery_bank)) * spread + 0.3
    queries = rng.normal(size=(n_queries, n_gallery)) * spread[:n_gallery] + 0.3
    sims = queries, bank[:, :n_gallery], bank[:, n_gallery:]
    return tuple(a.astype(dtype) for a in sims)


FITTED = ("gallery_log_scaling_", "gallery_bank_log_scaling_", "bank_log_scaling_",
          "marginal_error_", "n_iter_")


# -- the formula --------------------------------------------------------------------------


@pytest.mark.parametrize("tau, n_iter", [(0.01, 10), (0.02, 1), (0.05, 3), (0.2, 8)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matches_dense_reference(rng, tau, n_iter, dtype):
    queries, bank, cross = three_sets(rng, dtype=dtype)
    fitted = quiet(DBSN(tau=tau, n_iter=n_iter)).fit(bank, querybank_to_gallery_bank=cross)
    out = fitted.transform(queries)
    assert out.dtype == dtype
    q64, b64, c64 = (a.astype(np.float64) for a in (queries, bank, cross))
    log_u, log_v, error, done = dbsn_reference(b64, c64, tau, n_iter)
    expected = dbsn_scores(q64, b64, c64, tau, n_iter)
    assert done == n_iter and fitted.n_iter_ == n_iter and fitted.n_gallery_bank_ == 20
    if dtype == np.float64:
        assert_allclose(out, expected, rtol=1e-10, atol=1e-10)
        assert_array_equal(order(out), order(expected))
        assert_allclose(fitted.gallery_log_scaling_, log_u[:25], rtol=1e-10, atol=1e-10)
        assert_allclose(fitted.gallery_bank_log_scaling_, log_u[25:], rtol=1e-10, atol=1e-10)
        assert_allclose(fitted.bank_log_scaling_, log_v, rtol=1e-10, atol=1e-10)
        assert_allclose(fitted.marginal_error_, error, rtol=1e-9, atol=1e-12)
    else:
        assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    # the gallery bank matters: SN on the querybank alone ranks differently
    single = quiet(SinkhornNormalization(tau=tau, n_iter=n_iter)).fit(bank).transform(queries)
    if n_iter > 1:
        assert (order(single) != order(out)).any()


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_embedding_mode_matches_reference(rng, metric):
    bank_emb, gallery_emb, gallery_bank_emb, query_emb = (
        rng.normal(size=(n, 12)) * 0.3 for n in (90, 30, 40, 15))
    bank_emb[:, 0] += 0.5  # a common direction for hubs

    def prepare(a):
        return a / np.linalg.norm(a, axis=1, keepdims=True) if metric == "cosine" else a

    bank_sims, query_sims = (prepare(a) @ prepare(gallery_emb).T for a in (bank_emb, query_emb))
    cross_sims = prepare(bank_emb) @ prepare(gallery_bank_emb).T
    fitted = quiet(DBSN(tau=0.02, n_iter=10, metric=metric)).fit(
        bank_emb, gallery=gallery_emb, gallery_bank=gallery_bank_emb)
    expected = dbsn_scores(query_sims, bank_sims, cross_sims, 0.02, 10)
    out = fitted.transform(fitted.similarities(query_emb))
    assert_allclose(out, expected, rtol=1e-10, atol=1e-10)
    assert_array_equal(order(out), order(expected))
    precomputed = quiet(DBSN(tau=0.02, n_iter=10)).fit(
        bank_sims, querybank_to_gallery_bank=cross_sims)
    assert_allclose(out, precomputed.transform(query_sims), rtol=1e-10, atol=1e-10)
    assert_allclose(
        fitted.fit_transform(bank_emb, gallery=gallery_emb, gallery_bank=gallery_bank_emb),
        dbsn_scores(bank_sims, bank_sims, cross_sims, 0.02, 10), rtol=1e-10, atol=1e-10,
    )


def test_float32_embeddings_stay_float32(rng):
    bank, gallery, gallery_bank, queries = (
        rng.normal(size=(n, 8)).astype(np.float32) for n in (60, 30, 50, 10))
    fitted = quiet(DBSN(tau=0.05, n_iter=10)).fit(
        bank, gallery=gallery, gallery_bank=gallery_bank.astype(np.float64))
    sims = fitted.similarities(queries)
    out = fitted.transform(sims)
    assert sims.dtype == out.dtype == fitted.gallery_embeddings_.dtype == np.float32
    wide = quiet(DBSN(tau=0.05, n_iter=10)).fit(
        bank.astype(float), gallery=gallery.astype(float), gallery_bank=gallery_bank)
    assert_allclose(out, wide.transform(sims.astype(float)), rtol=1e-5, atol=1e-5)


def test_hand_computed_half_step():
    # One bank query, tau = 1, one gallery item and one gallery-bank item: from v = 1,
    # u_t = 1 / (2 K[t, 0]), so log u_g = -log 2 - (s(b, g) - 1), and the plan after the
    # u-update puts 1/2 on each target: the bank query's mass is exactly 1 (error 0).
    fitted = DBSN(tau=1.0, n_iter=1).fit([[0.25]], querybank_to_gallery_bank=[[0.75]])
    assert_allclose(fitted.gallery_log_scaling_, [-np.log(2) + 0.75], rtol=1e-14)
    assert_allclose(fitted.gallery_bank_log_scaling_, [-np.log(2) + 0.25], rtol=1e-14)
    assert_allclose(fitted.bank_log_scaling_, [0.0])
    assert fitted.marginal_error_ < 1e-15


# -- equivalences -------------------------------------------------------------------------


def test_without_gallery_bank_is_sinkhorn_normalization(rng):
    queries, bank, _ = three_sets(rng)
    dual = quiet(DBSN(tau=0.02, n_iter=5)).fit(bank)
    single = quiet(SinkhornNormalization(tau=0.02, n_iter=5)).fit(bank)
    assert_array_equal(dual.transform(queries), single.transform(queries))
    for name in ("gallery_log_scaling_", "bank_log_scaling_", "marginal_error_", "n_iter_"):
        assert_array_equal(getattr(dual, name), getattr(single, name))
    assert dual.gallery_bank_log_scaling_ is None and dual.n_gallery_bank_ == 0


@pytest.mark.parametrize("n_iter", [1, 4, 20])
def test_the_gallery_as_its_own_gallery_bank_is_sinkhorn_normalization(rng, n_iter):
    # Every target twice: by symmetry u halves and v is SN's at every iteration.
    queries, bank, _ = three_sets(rng)
    dual = quiet(DBSN(tau=0.05, n_iter=n_iter)).fit(bank, querybank_to_gallery_bank=bank)
    single = quiet(SinkhornNormalization(tau=0.05, n_iter=n_iter)).fit(bank)
    assert_allclose(dual.transform(queries), single.transform(queries), rtol=1e-12, atol=1e-12)
    assert_allclose(dual.gallery_log_scaling_, single.gallery_log_scaling_ - np.log(2), rtol=1e-12)
    assert_allclose(dual.gallery_bank_log_scaling_, dual.gallery_log_scaling_, rtol=1e-12)
    assert_allclose(dual.bank_log_scaling_, single.bank_log_scaling_, rtol=1e-9, atol=1e-12)
    assert_allclose(dual.marginal_error_, single.marginal_error_, rtol=1e-9, atol=1e-14)


def test_a_far_gallery_bank_is_not_negligible(rng):
    # Sinkhorn rescales every target row to its marginal, so moving the gallery bank
    # away (s(b, h) - 5) changes nothing: its items still take 1 / (N + M_g) of the mass.
    queries, bank, cross = three_sets(rng)
    near = quiet(DBSN(tau=0.05, n_iter=10)).fit(bank, querybank_to_gallery_bank=cross)
    far = quiet(DBSN(tau=0.05, n_iter=10)).fit(bank, querybank_to_gallery_bank=cross - 5.0)
    assert_allclose(far.transform(queries), near.transform(queries), rtol=1e-9, atol=1e-9)
    assert_allclose(far.gallery_bank_log_scaling_, near.gallery_bank_log_scaling_ + 5 / 0.05)


@pytest.mark.slow
def test_a_small_gallery_bank_share_approaches_sinkhorn_normalization(rng):
    # The gallery bank's share of the targets' mass, M_g / (N + M_g), bounds its effect.
    queries, bank, cross = three_sets(rng, n_gallery=400, n_gallery_bank=40)
    single = quiet(SinkhornNormalization(tau=0.05, n_iter=10)).fit(bank).transform(queries)
    gaps = [
        np.abs(quiet(DBSN(tau=0.05, n_iter=10)).fit(bank, querybank_to_gallery_bank=cross[:, :m])
               .transform(queries) - single).max()
        for m in (40, 4, 1)
    ]
    assert gaps[0] > gaps[1] > gaps[2] > 0


# -- convergence --------------------------------------------------------------------------


def test_converged_plan_has_both_marginals(rng):
    queries, bank, cross = three_sets(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = DBSN(tau=0.1, n_iter=500, tol=1e-9).fit(bank, querybank_to_gallery_bank=cross)
    assert 1 < fitted.n_iter_ < 500 and fitted.marginal_error_ <= 1e-9
    log_u = np.concatenate([fitted.gallery_log_scaling_, fitted.gallery_bank_log_scaling_])
    log_plan = (np.hstack([bank, cross]).T - 1.0) / 0.1 + log_u[:, None] + fitted.bank_log_scaling_
    assert_allclose(np.exp(logsumexp(log_plan, axis=1)) * 45, 1.0, rtol=1e-10)
    assert_allclose(np.exp(logsumexp(log_plan, axis=0)) * 70, 1.0, atol=1e-9)
    assert_allclose(fitted.transform(queries), dbsn_scores(queries, bank, cross, 0.1, 500, 1e-9),
                    rtol=1e-10, atol=1e-10)


def test_warns_when_tol_is_not_reached(rng):
    _, bank, cross = three_sets(rng)
    match = r"DualBankSinkhornNormalization did not reach tol=0.01 in n_iter=2 .*error is"
    with pytest.warns(ConvergenceWarning, match=match) as record:
        fitted = DBSN(tau=0.01, n_iter=2).fit(bank, querybank_to_gallery_bank=cross)
    assert record[0].filename == __file__  # the warning points at the caller's fit
    assert fitted.n_iter_ == 2 and fitted.marginal_error_ > 0.01
    with pytest.warns(ConvergenceWarning) as record:
        DBSN(tau=0.01, n_iter=2).fit(bank)
    assert record[0].filename == __file__


def fit_inputs(rng, tmp_path, embedded):
    """(queries, fit arguments, dense bank, dense cross): memmaps or embeddings."""
    if embedded:
        bank, gallery, gallery_bank = (rng.normal(size=(n, 8)) for n in (333, 25, 31))
        probe = quiet(DBSN()).fit(bank, gallery=gallery)
        queries = probe.similarities(rng.normal(size=(30, 8)))
        def unit(a):
            return a / np.linalg.norm(a, axis=1, keepdims=True)

        cross = unit(bank) @ unit(gallery_bank).T
        args = (bank,), {"gallery": gallery, "gallery_bank": gallery_bank}
        return queries, args, probe.similarities(bank), cross
    queries, bank, cross = three_sets(rng, n_bank=333, n_gallery_bank=31)
    bank, cross = np.round(bank, 3), np.round(cross, 3)  # ties: split-dependent rounding shows
    for name, array in (("bank", bank), ("cross", cross)):
        np.save(tmp_path / f"{name}.npy", array)
    maps = [np.load(tmp_path / f"{name}.npy", mmap_mode="r") for name in ("bank", "cross")]
    return queries, ((maps[0],), {"querybank_to_gallery_bank": maps[1]}), bank, cross


@pytest.mark.slow
@pytest.mark.parametrize("embedded", [False, True])
def test_bitwise_the_same_for_every_split(rng, tmp_path, leaves, embedded):
    queries, (args, kwargs), bank, cross = fit_inputs(rng, tmp_path, embedded)
    expected = quiet(DBSN(tau=0.02, n_iter=4)).fit(*args, **kwargs)
    scores, top = expected.transform(queries), expected.top_k(queries, k=5)
    for working_memory in (1e-4, None):
        for n_jobs in (1, 2):
            fitted = clone(expected).set_params(working_memory=working_memory, n_jobs=n_jobs)
            fitted.fit(*args, **kwargs)
            for name in FITTED:
                assert_array_equal(getattr(fitted, name), getattr(expected, name))
            assert_array_equal(fitted.transform(queries), scores)
            for got, want in zip(fitted.top_k(queries, k=5), top):
                assert_array_equal(got, want)
    reference = dbsn_scores(queries, bank, cross, 0.02, 4)
    assert_allclose(scores, reference, rtol=1e-10, atol=1e-10)
    assert_array_equal(order(scores), order(reference))


@pytest.mark.parametrize("embedded", [False, True])
def test_dask_querybank_equals_numpy(rng, embedded):
    da = pytest.importorskip("dask.array")
    if embedded:
        bank, gallery, gallery_bank = (rng.normal(size=(n, 8)) for n in (300, 25, 31))
        kwargs = {"gallery": gallery, "gallery_bank": gallery_bank}
        queries = quiet(DBSN()).fit(bank, gallery=gallery).similarities(rng.normal(size=(9, 8)))
    else:
        queries, bank, cross = three_sets(rng, n_bank=300)
        kwargs = {"querybank_to_gallery_bank": cross}
    expected = quiet(DBSN(tau=0.02, n_iter=3)).fit(bank, **kwargs)
    fitted = clone(expected).fit(da.from_array(bank, chunks=(70, 5)), **kwargs)
    for name in FITTED:
        assert_array_equal(getattr(fitted, name), getattr(expected, name))
    assert_array_equal(fitted.transform(queries), expected.transform(queries))


def test_top_k_and_bias_form(rng):
    queries, bank, cross = three_sets(rng)
    queries[:, 5] = queries[:, 6]  # tied raw similarities
    fitted = quiet(DBSN(tau=0.02, n_iter=5)).fit(bank, querybank_to_gallery_bank=cross)
    scores = fitted.transform(queries)
    indices, top = fitted.top_k(queries, k=7)
    assert_array_equal(indices, order(scores)[:, :7])
    assert_array_equal(top, np.take_along_axis(scores, indices, axis=1))
    # a row ranks as s(q, g) - bias_g, the bias of the test gallery items only
    bias = fitted.gallery_bias()
    assert bias.shape == (25,)
    assert_allclose(scores, queries - bias, rtol=1e-12, atol=1e-12)
    tau_log_u = 0.02 * fitted.gallery_log_scaling_
    assert_allclose(bias, -(tau_log_u - tau_log_u.mean()), rtol=1e-10, atol=1e-12)


# -- numerics and input -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_finite_on_logit_scale_similarities(rng, dtype):
    # CLIP-style logits (x100) with tau = 0.01: (s - 1) / tau reaches 1e4, far past exp's range.
    queries, bank, cross = (100 * a for a in three_sets(rng, dtype=dtype))
    fitted = quiet(DBSN(tau=0.01, n_iter=10)).fit(bank, querybank_to_gallery_bank=cross)
    out = fitted.transform(queries)
    assert out.dtype == dtype and np.isfinite(out).all()
    for name in FITTED:
        assert np.isfinite(getattr(fitted, name)).all()
    expected = dbsn_scores(*(a.astype(float) for a in (queries, bank, cross)), 0.01, 10)
    tolerance = 1e-8 if dtype == np.float64 else 1e-2
    assert_allclose(out, expected, rtol=tolerance, atol=tolerance)


def test_mixed_dtypes_keep_the_query_dtype(rng):
    queries, bank, cross = three_sets(rng)
    fitted = quiet(DBSN(tau=0.05, n_iter=3)).fit(
        bank.astype(np.float32), querybank_to_gallery_bank=cross)
    assert fitted.transform(queries.astype(np.float32)).dtype == np.float32
    expected = dbsn_scores(queries, bank.astype(np.float32).astype(float), cross, 0.05, 3)
    assert_allclose(fitted.transform(queries), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "params, name",
    [({"tau": 0.0}, "tau"), ({"tau": -1.0}, "tau"), ({"n_iter": 0}, "n_iter"),
     ({"n_iter": True}, "n_iter"), ({"tol": -1e-3}, "tol")],
)
def test_bad_parameters_are_named(rng, params, name):
    _, bank, cross = three_sets(rng)
    with pytest.raises(ValueError, match=rf"'{name}' parameter of DualBankSinkhornNormalization"):
        DBSN(**params).fit(bank, querybank_to_gallery_bank=cross)


def test_bad_gallery_bank_inputs_are_named_with_their_shapes(rng):
    _, bank, cross = three_sets(rng)  # (70, 25) and (70, 20)
    gallery_bank = rng.normal(size=(20, 25))
    with pytest.raises(ValueError, match=r"no querybank_to_gallery_bank\. Pass "
                                         r"querybank_to_gallery_bank of shape \(70, 20\)"):
        DBSN().fit(bank, gallery_bank=gallery_bank)
    with pytest.raises(ValueError, match=r"querybank_to_gallery_bank has shape \(69, 20\), but "
                                         r"the querybank X has shape \(70, 25\)"):
        DBSN().fit(bank, querybank_to_gallery_bank=cross[:-1])
    with pytest.raises(ValueError, match=r"querybank_to_gallery_bank has shape \(70, 19\), but "
                                         r"gallery_bank has shape \(20, 25\)"):
        DBSN().fit(bank, gallery_bank=gallery_bank, querybank_to_gallery_bank=cross[:, :-1])
    with pytest.raises(ValueError, match=r"gallery_bank has shape \(20, 24\), but .* 25 items"):
        DBSN().fit(bank, gallery_bank=gallery_bank[:, :-1], querybank_to_gallery_bank=cross)
    with pytest.raises(ValueError, match=r"querybank_to_gallery_bank: .*0 feature\(s\).*shape \(70, 0\)"):
        DBSN().fit(bank, querybank_to_gallery_bank=cross[:, :0])
    with pytest.raises(ValueError, match=r"querybank_to_gallery_bank: Expected 2D array, got 1D"):
        DBSN().fit(bank, querybank_to_gallery_bank=cross[:, 0])
    bad = cross.copy()
    bad[44, 3] = np.nan
    with pytest.raises(ValueError, match=r"querybank_to_gallery_bank contains NaN or infinity: "
                                         r"the similarity of querybank row 44 to gallery-bank item 3"):
        DBSN(working_memory=1e-3).fit(bank, querybank_to_gallery_bank=bad)
    broken = gallery_bank.copy()  # unused beside s(b, h), yet not taken broken
    broken[7, 11] = np.inf
    with pytest.raises(ValueError, match=r"gallery_bank contains NaN or infinity: the similarity "
                                         r"of gallery_bank row 7 to gallery item 11 is inf"):
        DBSN(working_memory=1e-3).fit(bank, gallery_bank=broken, querybank_to_gallery_bank=cross)


def test_bad_gallery_bank_embeddings_are_named(rng):
    bank, gallery, gallery_bank = (rng.normal(size=(n, 8)) for n in (40, 25, 20))
    with pytest.raises(ValueError, match=r"querybank_to_gallery_bank \(got shape \(40, 20\)\) is "
                                         r"for precomputed similarities"):
        DBSN().fit(bank, gallery=gallery, gallery_bank=gallery_bank,
                   querybank_to_gallery_bank=np.zeros((40, 20)))
    with pytest.raises(ValueError, match=r"gallery_bank has shape \(20, 7\).*8 columns"):
        DBSN().fit(bank, gallery=gallery, gallery_bank=gallery_bank[:, :7])
    with pytest.raises(ValueError, match=r"gallery_bank: .*0 sample\(s\)"):
        DBSN().fit(bank, gallery=gallery, gallery_bank=gallery_bank[:0])
    with pytest.raises(TypeError, match="querybank_to_gallery_bank"):  # SN takes no gallery bank
        SinkhornNormalization().fit(bank, gallery=gallery, querybank_to_gallery_bank=bank)


def test_fit_keeps_no_reference_to_the_banks_and_never_modifies_them(rng):
    queries, bank, cross = three_sets(rng)
    copies = queries.copy(), bank.copy(), cross.copy()
    fitted = quiet(DBSN(tau=0.05, n_iter=3)).fit(bank, querybank_to_gallery_bank=cross)
    assert not hasattr(fitted, "_bank_passes")
    restored = pickle.loads(pickle.dumps(fitted))
    assert_array_equal(restored.transform(queries), fitted.transform(queries))
    out = fitted.fit_transform(bank, querybank_to_gallery_bank=cross)
    assert_allclose(out, dbsn_scores(bank, bank, cross, 0.05, 3), rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="gallery-bank item"):
        fitted.fit(bank, querybank_to_gallery_bank=np.full_like(cross, np.inf))
    assert not hasattr(fitted, "_bank_passes")
    for array, copy in zip((queries, bank, cross), copies):
        assert_array_equal(array, copy)


# -- scikit-learn -------------------------------------------------------------------------


def test_grid_search_over_tau_and_n_iter_splits_the_gallery_bank_rows():
    sims, gt, _ = make_hubness_sims(300, 80, 0, random_state=0)
    # s(b, h): the gallery bank's items resemble gallery items 0-29 (hubs among them).
    cross = sims[:, :30] + np.random.default_rng(0).normal(scale=0.02, size=(300, 30))
    grid = {"tau": [0.01, 0.05], "n_iter": [1, 10]}
    folds = KFold(3)
    search = GridSearchCV(DBSN(), grid, scoring=make_retrieval_scorer("R@1"), cv=folds)
    search.fit(sims, gt, querybank_to_gallery_bank=cross)
    assert len(search.cv_results_["params"]) == 4
    assert search.best_estimator_.n_gallery_bank_ == 30
    assert search.best_score_ > retrieval_metrics(sims, gt)["R@1"]
    # a recorded score is the R@1 of the held-out rows, fitted on the other folds' rows
    train, test = next(folds.split(sims))
    for params, score in zip(search.cv_results_["params"], search.cv_results_["split0_test_score"]):
        fitted = DBSN(**params).fit(sims[train], querybank_to_gallery_bank=cross[train])
        assert score == retrieval_metrics(fitted.transform(sims[test]), gt[test])["R@1"]


@pytest.mark.slow
@pytest.mark.parametrize("bank", ["bank_embeddings", "far_bank_embeddings"])
def test_the_defaults_converge_on_the_bundled_data(bank):
    # SN's defaults, chosen among the settings whose fits (SN's and DBSN's) all reach tol
    # within 3/4 of n_iter; the demo fits DBSN with the bundled 3,000-word gallery bank.
    data = load_wordnet_revdict()
    embeddings = getattr(data, bank)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fitted = DBSN().fit(embeddings @ data.gallery_embeddings.T,
                            querybank_to_gallery_bank=embeddings @ data.gallery_bank_embeddings.T)
    assert fitted.n_gallery_bank_ == len(data.gallery_bank_embeddings)
    assert fitted.marginal_error_ <= fitted.tol
    assert fitted.n_iter_ <= 0.75 * fitted.n_iter
