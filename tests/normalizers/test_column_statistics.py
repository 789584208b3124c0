"""NNN, DN (weighted Centering), querybank z-norm and mutual proximity, side by side.

The normalisers whose bias is a statistic of each bank column, each against a dense
reference written from SPEC's formula (tests/reference.py), on precomputed and embedding
input, chunked and not; the scikit-learn contract; bad input; finite in, finite out at
every scale."""

import itertools
import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from skqbnorm import (
    Centering,
    DualBankSinkhornNormalization,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DualSoftmax,
    MutualProximity,
    QueryBankZNorm,
    SinkhornNormalization,
)
from skqbnorm import NearestNeighborNormalization as NNN
from skqbnorm.metrics import make_retrieval_scorer, retrieval_metrics

import reference as ref
from helpers import sims_pair_with_hubs as sims_pair
from helpers import stable_ranking

CASES = {
    "NNN": (NNN(k=5, alpha=0.7), lambda q, b: ref.nnn(q, b, 5, 0.7)),
    "NNN-k1": (NNN(k=1, alpha=2.0), lambda q, b: ref.nnn(q, b, 1, 2.0)),
    "DN": (Centering(alpha=0.5), lambda q, b: ref.weighted_centering(q, b, 0.5)),
    "ZNorm": (QueryBankZNorm(), ref.querybank_z_norm),
    "MP-gaussian": (MutualProximity(), ref.mutual_proximity_gaussian),
    "MP-empiric": (MutualProximity(method="empiric"), ref.mutual_proximity_empiric),
}


NAMES = list(CASES)


FITTED_ARRAYS = ("bank_neighborhood_", "bank_mean_", "bank_std_", "sorted_bank_")


def fitted_arrays(estimator):
    return [getattr(estimator, name) for name in FITTED_ARRAYS if hasattr(estimator, name)]


def tolerance(dtype, magnitude):
    if dtype == np.float32:
        return {"rtol": 1e-4, "atol": 1e-4 * magnitude}
    return {"rtol": 1e-10, "atol": 1e-10 * magnitude}


# -- against the references --------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", NAMES)
def test_matches_reference(rng, name, dtype):
    estimator, reference = CASES[name]
    queries, bank = sims_pair(rng, dtype=dtype)
    out = clone(estimator).fit(bank).transform(queries)
    assert out.dtype == dtype
    expected = reference(queries.astype(np.float64), bank.astype(np.float64))
    assert_allclose(out, expected, **tolerance(dtype, np.abs(expected).max()))
    if dtype == np.float64 and name != "MP-empiric":  # empiric: see the next test
        assert_array_equal(stable_ranking(out), stable_ranking(expected))


# -- embedding mode, chunking, memmaps, top_k, dask ---------------------------------------------


@pytest.mark.parametrize("metric", ["cosine", "dot"])
@pytest.mark.parametrize("name", NAMES)
def test_embedding_mode_equals_precomputed_and_reference(rng, name, metric):
    estimator, reference = CASES[name]
    bank_emb, gallery_emb, query_emb = (rng.normal(size=(n, 16)) for n in (80, 30, 10))

    def prepare(a):
        return a / np.linalg.norm(a, axis=1, keepdims=True) if metric == "cosine" else a

    bank_sims, query_sims = (prepare(a) @ prepare(gallery_emb).T for a in (bank_emb, query_emb))
    embedded = clone(estimator).set_params(metric=metric).fit(bank_emb, gallery=gallery_emb)
    scores = embedded.transform(embedded.similarities(query_emb))
    expected = reference(query_sims, bank_sims)
    assert_allclose(scores, expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())
    assert_allclose(
        embedded.fit_transform(bank_emb, gallery=gallery_emb),
        reference(bank_sims, bank_sims), rtol=1e-10, atol=1e-10 * np.abs(expected).max(),
    )
    chunked = clone(embedded).set_params(working_memory=1e-4, n_jobs=2)
    chunked.fit(bank_emb, gallery=gallery_emb)
    for got, want in zip(fitted_arrays(chunked), fitted_arrays(embedded), strict=True):
        assert_array_equal(got, want)
    assert_array_equal(chunked.transform(chunked.similarities(query_emb)), scores)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_bitwise_the_same_for_every_split_layout_and_memmap(rng, tmp_path, leaves, name):
    estimator, reference = CASES[name]
    bank = np.round(rng.normal(size=(333, 40)), 2)  # ties, and a partial last leaf
    bank[:, :3] += 1.0
    queries = np.round(rng.normal(size=(50, 40)), 2)
    path = tmp_path / "bank.npy"
    np.save(path, bank)
    expected = clone(estimator).fit(bank)
    scores = expected.transform(queries)
    assert_allclose(scores, reference(queries, bank), rtol=1e-10, atol=1e-10)
    banks = {
        "memmap": lambda: np.load(path, mmap_mode="r"),
        "Fortran": lambda: np.asfortranarray(bank),
        "strided": lambda: np.repeat(bank, 2, axis=1)[:, ::2],
    }
    for layout, (working_memory, n_jobs) in itertools.product(banks, [(1e-4, 1), (1e-4, 2), (None, 2)]):
        fitted = clone(estimator).set_params(working_memory=working_memory, n_jobs=n_jobs)
        fitted.fit(banks[layout]())
        for got, want in zip(fitted_arrays(fitted), fitted_arrays(expected), strict=True):
            assert_array_equal(got, want, err_msg=layout)
        assert_array_equal(fitted.transform(queries), scores, err_msg=layout)
        assert_array_equal(fitted.transform(np.asfortranarray(queries)), scores, err_msg=layout)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_top_k_is_transform_then_stable_sort(rng, name):
    # 600 gallery items: the rows' moments (MP) span several 256-column leaves,
    # which the chunks cut anywhere.
    estimator = CASES[name][0]
    queries, bank = sims_pair(rng, n_queries=30, n_bank=50, n_gallery=600)
    queries = np.round(queries, 1)  # ties, which go to the lowest index
    fitted = clone(estimator).fit(bank)
    scores = fitted.transform(queries)
    order = stable_ranking(scores)[:, :7]
    expected = order, np.take_along_axis(scores, order, axis=1)
    cuts = [(0, 100), (100, 100), (100, 300), (300, 555), (555, 600)]  # an empty one too
    shards = [queries[:, start:stop] for start, stop in cuts]
    for found in (
        fitted.top_k(queries, k=7),
        fitted.set_params(working_memory=1e-3).top_k(queries, k=7),  # chunks of ~40 columns
        fitted.top_k(chunks=shards, k=7),
        fitted.top_k(chunks=lambda: iter(shards), k=7),
    ):
        assert_array_equal(found[0], expected[0])
        assert_array_equal(found[1], expected[1])


@pytest.mark.parametrize("name", NAMES)
def test_top_k_with_query_embeddings(rng, name):
    bank, gallery, queries = (rng.normal(size=(n, 6)) for n in (40, 300, 9))
    fitted = clone(CASES[name][0]).set_params(working_memory=1e-3).fit(bank, gallery=gallery)
    scores = fitted.transform(fitted.similarities(queries))
    indices, top = fitted.top_k(queries=queries, k=5)
    assert_array_equal(indices, stable_ranking(scores)[:, :5])
    assert_allclose(top, np.take_along_axis(scores, indices, axis=1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_dask_fit_and_transform(rng, name):
    da = pytest.importorskip("dask.array")
    import dask

    estimator = CASES[name][0]
    queries, bank = sims_pair(rng, n_bank=301)
    reference = clone(estimator).fit(bank)
    with dask.config.set(scheduler="synchronous"):
        fitted = clone(estimator).fit(da.from_array(bank, chunks=(33, 25)))
        lazy = fitted.transform(da.from_array(queries, chunks=(16, 10)))
        assert isinstance(lazy, da.Array)
        out = lazy.compute()
    for got, want in zip(fitted_arrays(fitted), fitted_arrays(reference), strict=True):
        assert_array_equal(got, want)
    assert_array_equal(out, reference.transform(queries))


# -- finite in, finite out -------------------------------------------------------------------


@pytest.mark.parametrize("scale", [2.0**-1000, 1e-300, 1e-30, 1e30, 1e300])
@pytest.mark.parametrize("name", NAMES)
def test_scores_scale_with_the_similarities(rng, name, scale):
    # NNN and DN are scale-equivariant; z-norm and MP scale-invariant.
    estimator = CASES[name][0]
    queries, bank = sims_pair(rng, n_queries=30, n_bank=80, n_gallery=12)
    fitted = clone(estimator).fit(bank * scale)
    out = fitted.transform(queries * scale)
    indices, scores = fitted.top_k(queries * scale, k=5)
    for array in (out, scores, *fitted_arrays(fitted)):
        assert np.isfinite(array).all()
    unscaled = clone(estimator).fit(bank)
    unit = scale if name in ("NNN", "NNN-k1", "DN") else 1.0
    assert_allclose(out / unit, unscaled.transform(queries), rtol=1e-9, atol=1e-12)
    assert_array_equal(indices, unscaled.top_k(queries, k=5)[0])


@pytest.mark.parametrize("name", ["NNN", "DN", "ZNorm", "MP-gaussian", "MP-empiric"])
def test_similarities_near_the_float64_maximum(rng, name):
    # z-norm and MP: s - mu spans twice the float64 maximum, and the squares overflow;
    # computed as halves, in scaled units, nothing does. NNN and DN: the sums overflow.
    estimator, reference = CASES[name]
    low = 0.2 if name in ("NNN", "DN") else -1.5  # scores within the float64 range
    bank, queries = (rng.uniform(low, 1.7, size=(n, 8)) for n in (90, 20))
    fitted = clone(estimator).fit(bank * 1e308)
    out = fitted.transform(queries * 1e308)
    assert np.isfinite(out).all()
    expected = reference(queries, bank)
    unit = 1e308 if name in ("NNN", "DN") else 1.0
    assert_allclose(out / unit, expected, rtol=1e-9, atol=1e-12)


def test_float32_near_the_float32_maximum(rng):
    bank = rng.uniform(-3e38, 3e38, size=(50, 10)).astype(np.float32)
    queries = rng.uniform(-3e38, 3e38, size=(20, 10)).astype(np.float32)
    for estimator in (QueryBankZNorm(), MutualProximity()):
        out = estimator.fit(bank).transform(queries)
        assert out.dtype == np.float32 and np.isfinite(out).all()
        expected = CASES["ZNorm" if isinstance(estimator, QueryBankZNorm) else "MP-gaussian"][1](
            queries.astype(float), bank.astype(float)
        )
        assert_allclose(out, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_constant_columns_rows_and_a_one_row_bank(rng):
    bank = rng.normal(size=(30, 6))
    bank[:, 2] = 0.25
    queries = rng.normal(size=(5, 6))
    queries[0] = 0.5  # a constant row
    for name in ("ZNorm", "MP-gaussian", "MP-empiric"):
        estimator, reference = CASES[name]
        out = clone(estimator).fit(bank).transform(queries)
        assert np.isfinite(out).all()
        assert_allclose(out, reference(queries, bank), rtol=1e-10, atol=1e-12)
    z = QueryBankZNorm().fit(bank)
    assert z.bank_std_[2] == 0.0 and z.bank_mean_[2] == 0.25
    assert_allclose(z.transform(queries)[:, 2], queries[:, 2] - 0.25, rtol=1e-15)
    # One bank row: every sigma is 0, and z-norm is centring.
    one = QueryBankZNorm().fit(bank[:1])
    assert_array_equal(one.bank_std_, 0.0)
    assert_array_equal(one.transform(queries), Centering().fit(bank[:1]).transform(queries))


@pytest.mark.slow
@pytest.mark.parametrize(
    "estimator, grid",
    [
        (NNN(), {"k": [1, 16, 128], "alpha": [0.0, 0.5, 0.75, 1.0]}),
        (Centering(), {"alpha": [0.0, 0.5, 1.0]}),
        (MutualProximity(), {"method": ["gaussian", "empiric"]}),
    ],
    ids=["NNN", "DN", "MP"],
)
def test_grid_search_over_the_hyperparameters(hubness_sims, estimator, grid):
    from sklearn.model_selection import KFold

    sims, gt = hubness_sims
    search = GridSearchCV(estimator, grid, scoring=make_retrieval_scorer("R@1"), cv=3).fit(sims, gt)
    n_candidates = np.prod([len(values) for values in grid.values()])
    assert len(search.cv_results_["params"]) == n_candidates
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_ == search.cv_results_["params"][int(np.argmax(scores))]
    # Each recorded score is R@1 on a held-out fold, the normaliser fitted on the rest.
    train, test = next(KFold(3).split(sims))
    for index in (0, n_candidates - 1):
        params = search.cv_results_["params"][index]
        fitted = clone(estimator).set_params(**params).fit(sims[train])
        expected = retrieval_metrics(fitted.transform(sims[test]), gt[test])["R@1"]
        assert np.isclose(search.cv_results_["split0_test_score"][index], expected)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ZNorm", "MP-gaussian", "MP-empiric"])
def test_held_out_folds_gain_on_planted_hubs(hubness_sims, name):
    # Hubs here are items of large spread, which z-scores and MP divide out.
    from sklearn.model_selection import cross_val_score

    sims, gt = hubness_sims
    scorer = make_retrieval_scorer("R@1")
    scores = cross_val_score(clone(CASES[name][0]), sims, gt, scoring=scorer, cv=3)
    assert scores.mean() > retrieval_metrics(sims, gt)["R@1"] + 3


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: NNN(k=True), "k"),
        (lambda: NNN(k=1, alpha=True), "alpha"),
        (lambda: Centering(alpha=False), "alpha"),
    ],
)
def test_bools_are_not_numbers(make, name, bank):
    message = rf"The '{name}' parameter of \w+ must be .* Got (True|False)"
    with pytest.raises(ValueError, match=message):
        make().fit(bank)


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: NNN(k=0), "k"),
        (lambda: NNN(k=2.0), "k"),
        (lambda: NNN(k=1, alpha=-0.1), "alpha"),
        (lambda: NNN(k=1, alpha=np.inf), "alpha"),
        (lambda: Centering(alpha=-1.0), "alpha"),
        (lambda: Centering(alpha=np.nan), "alpha"),
        (lambda: MutualProximity(method="exact"), "method"),
    ],
)
def test_parameters_are_validated(make, name, bank):
    with pytest.raises(ValueError, match=rf"The '{name}' parameter of \w+ must be"):
        make().fit(bank)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_bank_and_queries(name, bad, bank):
    estimator = clone(CASES[name][0]).set_params(**({"k": 2} if "NNN" in name else {}))
    broken = bank.copy()
    broken[3, 4] = bad
    message = r"querybank contains NaN or infinity.*querybank row 3 to gallery item 4"
    with pytest.raises(ValueError, match=message):
        clone(estimator).fit(broken)
    fitted = clone(estimator).fit(bank)
    with pytest.raises(ValueError, match=r"X contains NaN or infinity.*X row 3 to gallery item 4"):
        fitted.transform(broken)
    with pytest.raises(ValueError, match=r"X row 3 to gallery item 4"):
        fitted.top_k(chunks=[broken[:, :2], broken[:, 2:]], k=2)


@pytest.mark.parametrize("name", NAMES)
def test_inputs_pickle_and_row_independence(rng, name):
    queries, bank = sims_pair(rng)
    copies = queries.copy(), bank.copy()
    fitted = clone(CASES[name][0]).fit(bank)
    full = fitted.transform(queries)
    fitted.fit_transform(bank)
    assert_array_equal(queries, copies[0])
    assert_array_equal(bank, copies[1])
    restored = pickle.loads(pickle.dumps(fitted))
    assert_array_equal(restored.transform(queries), full)
    assert_array_equal(fitted.transform(queries[17:18]), full[17:18])
    assert_array_equal(fitted.set_params(working_memory=1e-4).transform(queries), full)


# -- the bank's memory layout ------------------------------------------------------------

LAYOUT_CASES = {
    "SN": (SinkhornNormalization(tau=0.05, n_iter=5, tol=0.0), None),
    "DBSN": (DualBankSinkhornNormalization(tau=0.05, n_iter=5, tol=0.0), None),
    "DBSN-gallery-bank": (DualBankSinkhornNormalization(tau=0.05, n_iter=5, tol=0.0),
                          "querybank_to_gallery_bank"),
    "DSL": (DualSoftmax(temperature=0.1), None),
    "DBNorm": (DualInvertedSoftmax(beta1=3.0, beta2=4.0), "gallery_bank"),
    "DBNorm-dynamic": (DualDynamicInvertedSoftmax(beta1=3.0, beta2=4.0, k=2), "gallery_bank"),
}


LAYOUTS = {
    "Fortran": np.asfortranarray,
    "strided": lambda array: np.repeat(array, 2, axis=1)[:, ::2],
    "reversed twice": lambda array: array[::-1, ::-1][::-1, ::-1],
}


def every_fitted_array(estimator):
    return {name: value for name, value in vars(estimator).items()
            if name.endswith("_") and isinstance(value, np.ndarray)}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # tol=0: every iteration
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", LAYOUT_CASES)
def test_bank_layout_does_not_change_a_bit(rng, name, layout):
    # Row passes (Sinkhorn's v-update) sum along rows: a Fortran block must be summed
    # in the same order as a C block.
    estimator, side_name = LAYOUT_CASES[name]
    queries, bank = sims_pair(rng, n_bank=90, n_gallery=300)
    side = rng.normal(size=(90 if side_name == "querybank_to_gallery_bank" else 70, 300 if
                            side_name == "gallery_bank" else 40)) * 0.5
    expected = clone(estimator).fit(bank, **({side_name: side} if side_name else {}))
    arranged = LAYOUTS[layout]
    fitted = clone(estimator).fit(arranged(bank), **({side_name: arranged(side)} if side_name else {}))
    want = every_fitted_array(expected)
    assert want
    for attribute, value in every_fitted_array(fitted).items():
        assert_array_equal(value, want[attribute], err_msg=attribute)
    assert_array_equal(fitted.transform(arranged(queries)), expected.transform(queries))
