"""The normalisers on the array API path: scikit-learn's array API checks, equality
with the NumPy path (fitted statistics, scores, top-k rankings) on the bundled data,
closed forms, memory bounded by working_memory, and the refusals."""

from functools import partial

import numpy as np
import pytest
import sklearn
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import check_array_api_input

from skqbnorm import (
    CSLS,
    Centering,
    DualSoftmax,
    DynamicInvertedSoftmax,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankZNorm,
)
from skqbnorm.catalogue import METHODS
from skqbnorm.datasets import load_wordnet_revdict
from skqbnorm.normalizers import _array_api_path

from array_api_cases import NAMESPACES, host, namespace_and_device, put

dispatch = partial(sklearn.config_context, array_api_dispatch=True)

#: Every setting the catalogue and the estimator checks exercise, on small matrices.
SUPPORTED = [
    InvertedSoftmax(),
    InvertedSoftmax(output="probability", beta=1.0),
    DynamicInvertedSoftmax(k=2),
    CSLS(k=1),
    NearestNeighborNormalization(k=1, alpha=0.75),
    Centering(),
    Centering(alpha=0.5),
    QueryBankZNorm(),
    MutualProximity(),
    DualSoftmax(),
    DualSoftmax(temperature=1.0),
]


def catalogue_classes():
    return sorted({method.normalizer for method in METHODS.values() if method.normalizer},
                  key=lambda cls: cls.__name__)


def test_the_catalogue_declares_the_device_methods():
    on_device = {cls.__name__ for cls in catalogue_classes() if cls.capabilities.array_api}
    assert on_device == {"InvertedSoftmax", "DynamicInvertedSoftmax", "CSLS",
                         "NearestNeighborNormalization", "Centering", "QueryBankZNorm",
                         "MutualProximity", "DualSoftmax"}
    for cls in catalogue_classes():
        assert cls().__sklearn_tags__().array_api_support is cls.capabilities.array_api


def namespaces_of_the_checks():
    # scikit-learn's own list (numpy, array-api-strict, torch, CuPy; its devices and dtypes)
    from sklearn.utils._array_api import yield_namespace_device_dtype_combinations

    return list(yield_namespace_device_dtype_combinations())


@pytest.mark.parametrize("estimator", SUPPORTED, ids=repr)
@pytest.mark.parametrize("combination", namespaces_of_the_checks(), ids=str)
def test_check_array_api_input(estimator, combination):
    namespace, device, dtype = combination
    if namespace == "torch":
        pytest.importorskip("torch")
    # Positional: the device's keyword is device in scikit-learn 1.6, device_name later.
    check_array_api_input(type(estimator).__name__, estimator, namespace, device, dtype,
                          check_values=True)


@pytest.mark.parametrize("estimator", SUPPORTED, ids=repr)
def test_check_array_api_same_namespace(estimator):
    check = getattr(estimator_checks, "check_array_api_same_namespace", None)
    if check is None:
        pytest.skip("this scikit-learn has no check_array_api_same_namespace (1.7 added it)")
    check(type(estimator).__name__, estimator, "array_api_strict")


@pytest.mark.parametrize("cls", [cls for cls in catalogue_classes()
                                 if not cls.capabilities.array_api], ids=lambda cls: cls.__name__)
def test_other_normalisers_refuse_device_arrays(cls):
    xp, device = namespace_and_device(("array_api_strict", "CPU_DEVICE"))
    bank = put(xp, device, np.random.default_rng(0).normal(size=(20, 6)))
    with dispatch(), pytest.raises(ValueError, match="array_api=False"):
        cls().fit(bank)


# -- the bundled data -------------------------------------------------------------------


@pytest.fixture(scope="module")
def revdict():
    data = load_wordnet_revdict()
    embeddings = {name: data[f"{name}_embeddings"].astype(np.float32)
                  for name in ("bank", "gallery", "query")}
    return embeddings, data.query_gt


SETTINGS = [InvertedSoftmax(), DynamicInvertedSoftmax(), CSLS(), NearestNeighborNormalization(),
            Centering(alpha=0.5), QueryBankZNorm(), MutualProximity(), DualSoftmax()]
#: Largest difference of a score from the NumPy path's, by dtype: float32 products
#: blocked otherwise round otherwise (a few ulps of similarities below 1).
SCORE_TOLERANCE = {np.float32: 2e-5, np.float64: 1e-12}
#: The scores not in similarity units (z-scores, log probabilities, DSL's weighted
#: similarities, which reach thousands) are held to the same tolerance relative to
#: their magnitude, where it is above 1.
RELATIVE_SCORES = (QueryBankZNorm, MutualProximity, DualSoftmax)
STATISTICS = ("bank_soft_max_", "bank_neighborhood_", "bank_mean_", "bank_std_")


def assert_scores_close(estimator, found, expected, dtype):
    tolerance = SCORE_TOLERANCE[dtype]
    relative = tolerance if isinstance(estimator, RELATIVE_SCORES) else 0
    np.testing.assert_allclose(found, expected, rtol=relative, atol=tolerance)


def same_top_k_share(found, expected):
    return np.mean((found == expected).all(axis=1))


@pytest.mark.slow
@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", SETTINGS, ids=repr)
def test_bundled_data_from_embeddings_equals_the_numpy_path(case, estimator, revdict):
    xp, device = namespace_and_device(case)
    embeddings, _ = revdict
    reference = clone(estimator).fit(embeddings["bank"], gallery=embeddings["gallery"])
    expected_indices, expected_scores = reference.top_k(queries=embeddings["query"], k=10)
    on_device = {name: put(xp, device, values) for name, values in embeddings.items()}
    with dispatch():
        model = clone(estimator).set_params(working_memory=2).fit(
            on_device["bank"], gallery=on_device["gallery"])
        indices, scores = model.top_k(queries=on_device["query"], k=10)
        sims = model.similarities(on_device["query"])
        transformed = model.transform(sims)
    for name in STATISTICS:
        if hasattr(reference, name):
            fitted = getattr(model, name)
            assert fitted.device == device and fitted.dtype == xp.float64
            np.testing.assert_allclose(host(fitted), getattr(reference, name), rtol=0, atol=1e-6)
    assert indices.device == device and scores.dtype == xp.float32
    assert same_top_k_share(host(indices), expected_indices) >= 0.999
    assert_scores_close(estimator, host(scores), expected_scores, np.float32)
    assert_scores_close(estimator, host(transformed), reference.transform(
        reference.similarities(embeddings["query"])), np.float32)


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", SETTINGS, ids=repr)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_precomputed_similarities_equal_the_numpy_path(case, estimator, dtype, revdict):
    xp, device = namespace_and_device(case)
    embeddings, _ = revdict
    bank_sims = (embeddings["bank"][:1500] @ embeddings["gallery"][:800].T).astype(dtype)
    query_sims = (embeddings["query"][:400] @ embeddings["gallery"][:800].T).astype(dtype)
    reference = clone(estimator).fit(bank_sims)
    expected_indices, expected_scores = reference.top_k(query_sims, k=10)
    with dispatch():
        model = clone(estimator).set_params(working_memory=0.5).fit(put(xp, device, bank_sims))
        transformed = model.transform(put(xp, device, query_sims))
        indices, scores = model.top_k(put(xp, device, query_sims), k=10)
    assert transformed.device == device and host(transformed).dtype == dtype
    assert_scores_close(estimator, host(transformed), reference.transform(query_sims), dtype)
    assert same_top_k_share(host(indices), expected_indices) >= 0.999
    assert_scores_close(estimator, host(scores), expected_scores, dtype)
    if hasattr(reference, "activated_"):
        np.testing.assert_array_equal(host(model.activated_), reference.activated_)


# -- closed forms, blocks and refusals ----------------------------------------------------


@pytest.mark.parametrize("case", NAMESPACES)
def test_soft_maxima_are_a_column_log_sum_exp_for_every_working_memory(case):
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(1)
    bank = rng.normal(size=(500, 40)) * 3
    beta = 7.0
    expected = logsumexp(beta * bank, axis=0) / beta
    for memory in (0.002, 0.05, None):  # 1, 32 and all 500 rows a block
        with dispatch():
            model = InvertedSoftmax(beta=beta, working_memory=memory).fit(put(xp, device, bank))
        np.testing.assert_allclose(host(model.bank_soft_max_), expected, rtol=1e-13)
        assert model.mean_soft_max_ == pytest.approx(expected.mean(), rel=1e-13)


@pytest.mark.parametrize("case", NAMESPACES)
def test_bank_neighbourhood_is_the_mean_of_the_k_largest(case):
    xp, device = namespace_and_device(case)
    bank = np.random.default_rng(2).normal(size=(300, 30))
    expected = np.sort(bank, axis=0)[-7:].mean(axis=0)
    with dispatch():
        model = NearestNeighborNormalization(k=7, alpha=0.5, working_memory=0.003).fit(
            put(xp, device, bank))
    np.testing.assert_allclose(host(model.bank_neighborhood_), expected, rtol=1e-13)
    np.testing.assert_allclose(host(model._bias), 0.5 * expected, rtol=1e-13)


def test_blocks_of_bank_rows_stay_within_working_memory():
    xp, device = namespace_and_device(("array_api_strict", "CPU_DEVICE"))
    bank = put(xp, device, np.ones((1000, 100)))
    model = InvertedSoftmax(working_memory=0.1)
    budget = 0.1 * 2**20
    blocks = list(_array_api_path._similarity_blocks(bank, None, model))
    assert len(blocks) > 1
    for _, block in blocks:
        assert block.shape[0] * block.shape[1] * 8 * _array_api_path.N_BUFFERS <= budget
    gallery = put(xp, device, np.ones((100, 16)))
    embeddings = put(xp, device, np.ones((1000, 16)))
    for _, block in _array_api_path._similarity_blocks(embeddings, gallery, model):
        assert block.shape[0] * 100 * 8 * _array_api_path.N_BUFFERS <= budget


def test_mismatched_namespaces_and_partial_fit_are_refused():
    xp, device = namespace_and_device(("array_api_strict", "device1"))
    bank = np.random.default_rng(3).normal(size=(30, 8))
    with dispatch():
        model = CSLS(k=2).fit(put(xp, device, bank))
        with pytest.raises(ValueError, match=r"CSLS.top_k\(\): the inputs must use the same"):
            model.top_k(bank[:3], k=2)
        with pytest.raises(ValueError, match="on array_api_strict.Device"):
            model.transform(put(xp, xp.Device("CPU_DEVICE"), bank[:3]))
        with pytest.raises(ValueError, match="partial_fit takes NumPy"):
            CSLS(k=2).partial_fit(put(xp, device, bank))
        with pytest.raises(ValueError, match="X has 5 features"):
            model.transform(put(xp, device, bank[:3, :5]))
        with pytest.raises(ValueError, match="X row 1 to gallery item 0 is nan"):
            bad = bank[:3].copy()
            bad[1, 0] = np.nan
            model.transform(put(xp, device, bad))
    with pytest.raises(ValueError, match="same namespace"):
        model.transform(bank[:3])  # fitted on a device, called without dispatch
    numpy_model = CSLS(k=2).fit(bank)
    with dispatch(), pytest.raises(ValueError, match="fitted on numpy"):
        numpy_model.transform(put(xp, device, bank[:3]))
    torch = pytest.importorskip("torch")
    with dispatch(), pytest.raises(ValueError, match="fitted on array_api_strict, given torch"):
        model.transform(torch.asarray(bank[:3]))


def test_a_numpy_gallery_follows_the_device_bank():
    xp, device = namespace_and_device(("array_api_strict", "device1"))
    rng = np.random.default_rng(5)
    bank, gallery = rng.normal(size=(50, 8)), rng.normal(size=(12, 8))
    with dispatch():
        model = NearestNeighborNormalization(k=3).fit(put(xp, device, bank), gallery=gallery)
    assert model.gallery_embeddings_.device == device
    reference = NearestNeighborNormalization(k=3).fit(bank, gallery=gallery)
    np.testing.assert_allclose(host(model.bank_neighborhood_), reference.bank_neighborhood_,
                               rtol=1e-12)


@pytest.mark.torch
def test_without_dispatch_torch_tensors_take_the_numpy_path():
    torch = pytest.importorskip("torch")
    bank = np.random.default_rng(4).normal(size=(40, 9))
    model = InvertedSoftmax().fit(torch.asarray(bank))
    assert isinstance(model.bank_soft_max_, np.ndarray)
    np.testing.assert_array_equal(model.bank_soft_max_, InvertedSoftmax().fit(bank).bank_soft_max_)
    assert isinstance(model.transform(torch.asarray(bank[:4])), np.ndarray)


def test_probabilities_that_overflow_are_clipped_with_a_warning():
    xp, device = namespace_and_device(("array_api_strict", "CPU_DEVICE"))
    bank = np.zeros((5, 3))
    with dispatch():
        model = InvertedSoftmax(beta=100.0, output="probability").fit(put(xp, device, bank))
        with pytest.warns(RuntimeWarning, match="clipped"):
            scores = model.transform(put(xp, device, np.array([[10.0, 0.0, 0.0]])))
    assert host(scores)[0, 0] == np.finfo(np.float64).max


# -- the normalisers of column moments and soft maxima, against closed forms ---------------


@pytest.mark.parametrize("case", NAMESPACES)
def test_bank_moments_are_the_columns_mean_and_population_std(case):
    xp, device = namespace_and_device(case)
    bank = np.random.default_rng(6).normal(loc=3.0, size=(400, 25))
    bank[:, 3] = 0.25  # a constant column: std 0, divided by as 1
    for memory in (0.002, 0.05, None):  # 1, 26 and all 400 rows a block
        with dispatch():
            model = QueryBankZNorm(working_memory=memory).fit(put(xp, device, bank))
            centering = Centering(alpha=0.5, working_memory=memory).fit(put(xp, device, bank))
        np.testing.assert_allclose(host(model.bank_mean_), bank.mean(axis=0), rtol=1e-13)
        np.testing.assert_allclose(host(model.bank_std_), bank.std(axis=0), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(host(centering.gallery_bias()), 0.5 * bank.mean(axis=0),
                                   rtol=1e-13)
    assert host(model._bank_scale)[3] == 1.0


@pytest.mark.parametrize("case", NAMESPACES)
def test_gaussian_mutual_proximity_is_the_sum_of_two_log_normal_cdfs(case):
    from scipy.special import log_ndtr
    from scipy.stats import norm

    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(7)
    bank, queries = rng.normal(size=(200, 30)), rng.normal(size=(6, 30)) * 4
    with dispatch():
        model = MutualProximity(working_memory=0.01).fit(put(xp, device, bank))
        scores = model.transform(put(xp, device, queries))
    bank_z = (queries - bank.mean(axis=0)) / bank.std(axis=0)
    row_z = (queries - queries.mean(axis=1, keepdims=True)) / queries.std(axis=1, keepdims=True)
    expected = log_ndtr(bank_z) + log_ndtr(row_z)
    np.testing.assert_allclose(host(scores), expected, rtol=1e-10)
    assert np.all(np.isfinite(host(scores)))  # far in the tails too (z of about -10)
    assert bank_z.min() < -8 and norm.logcdf(bank_z.min()) == pytest.approx(log_ndtr(bank_z.min()))


@pytest.mark.parametrize("case", NAMESPACES)
def test_dual_softmax_weights_by_the_columns_soft_maxima(case):
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(8)
    bank, queries = rng.normal(size=(300, 20)), rng.normal(size=(5, 20))
    temperature = 0.5
    soft_max = temperature * logsumexp(bank / temperature, axis=0)
    with dispatch():
        model = DualSoftmax(temperature=temperature, working_memory=0.01).fit(put(xp, device, bank))
        scores = model.transform(put(xp, device, queries))
    np.testing.assert_allclose(host(model.bank_soft_max_), soft_max, rtol=1e-13)
    np.testing.assert_allclose(host(scores), queries * np.exp((queries - soft_max) / temperature),
                               rtol=1e-12)


@pytest.mark.parametrize("case", NAMESPACES)
def test_dual_softmax_weights_that_overflow_keep_the_finite_products(case):
    xp, device = namespace_and_device(case)
    bank = -np.ones((4, 3))  # soft maxima near -1: tiny similarities weigh exp(about 999)
    queries = np.array([[0.0, 1e-300, -1e-300]])
    temperature = 1e-3
    with dispatch():
        scores = DualSoftmax(temperature=temperature).fit(put(xp, device, bank)).transform(
            put(xp, device, queries))
    soft_max = temperature * logsumexp(bank / temperature, axis=0)
    magnitude = np.exp(np.log(1e-300) + (1e-300 - soft_max[1]) / temperature)
    np.testing.assert_allclose(host(scores), [[0.0, magnitude, -magnitude]], rtol=1e-12)
    np.testing.assert_allclose(host(scores), DualSoftmax(temperature=temperature).fit(
        bank).transform(queries), rtol=1e-12)


def test_empiric_mutual_proximity_is_refused():
    xp, device = namespace_and_device(("array_api_strict", "CPU_DEVICE"))
    bank = put(xp, device, np.random.default_rng(9).normal(size=(20, 6)))
    with dispatch(), pytest.raises(ValueError, match="method='empiric'"):
        MutualProximity(method="empiric").fit(bank)


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", [InvertedSoftmax(beta=5.0), DynamicInvertedSoftmax(k=3),
                                       CSLS(k=3), NearestNeighborNormalization(k=3),
                                       Centering(alpha=0.5)], ids=repr)
def test_gallery_bias_stays_on_the_fitted_device(case, estimator):
    xp, device = namespace_and_device(case)
    bank = np.random.default_rng(10).normal(size=(60, 12))
    expected = clone(estimator).fit(bank).gallery_bias()
    with dispatch():
        model = clone(estimator).fit(put(xp, device, bank))
        bias = model.gallery_bias()
    assert type(bias) is type(put(xp, device, bank)) and bias.device == device
    assert bias.dtype == xp.float64
    np.testing.assert_allclose(host(bias), expected, rtol=1e-12, atol=1e-15)
    bias[0] = 1e9  # a copy: the fitted statistics do not change
    np.testing.assert_allclose(host(model.gallery_bias()), expected, rtol=1e-12, atol=1e-15)


# -- device-sized blocks and one finiteness check a call -------------------------------

#: A bank of many blocks under ``working_memory=0.01``: 6 rows of 50 float64 columns
#: (and their temporaries) a block.
MANY_BLOCKS = 0.01


def numpy_error(call):
    """The message of the ValueError that ``call`` raises on the NumPy path."""
    with pytest.raises(ValueError) as raised:
        call()
    return str(raised.value)


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", [InvertedSoftmax(), CSLS(k=3), Centering(),
                                       MutualProximity(), DualSoftmax()], ids=repr)
def test_a_bad_value_in_the_last_block_raises_the_numpy_paths_error(case, estimator):
    xp, device = namespace_and_device(case)
    bank = np.random.default_rng(11).normal(size=(1000, 50))
    bank[998, 37] = np.inf  # in the last of 167 blocks (rows 996 to 999)
    model = clone(estimator).set_params(working_memory=MANY_BLOCKS)
    blocks = list(_array_api_path._similarity_blocks(put(xp, device, bank), None, model))
    assert len(blocks) == 167 and blocks[-1][0] == slice(996, 1000)
    expected = numpy_error(lambda: clone(model).fit(bank))
    assert "row 998 to gallery item 37 is inf" in expected
    with dispatch(), pytest.raises(ValueError) as raised:
        clone(model).fit(put(xp, device, bank))
    assert str(raised.value) == expected


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("method", ["transform", "top_k"])
def test_a_bad_query_similarity_in_the_last_block_raises_the_numpy_paths_error(case, method):
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(12)
    bank, sims = rng.normal(size=(100, 50)), rng.normal(size=(1000, 50))
    sims[999, 4] = np.nan
    host_model = CSLS(k=3, working_memory=MANY_BLOCKS).fit(bank)
    with dispatch():
        model = clone(host_model).fit(put(xp, device, bank))

    def call(fitted, X):
        return fitted.transform(X) if method == "transform" else fitted.top_k(X, k=3)

    expected = numpy_error(lambda: call(host_model, sims))
    assert "X row 999 to gallery item 4 is nan" in expected
    with dispatch(), pytest.raises(ValueError) as raised:
        call(model, put(xp, device, sims))
    assert str(raised.value) == expected


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", SETTINGS, ids=repr)
def test_results_agree_across_budgets_and_the_device_default(case, estimator):
    """One block (the device default here), 6 rows a block, and 1: the same scores to
    float64 rounding, and the same top 10."""
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(13)
    bank, sims = rng.normal(size=(400, 50)), rng.normal(size=(60, 50))
    found = {}
    for memory in (None, MANY_BLOCKS, 1e-5):
        with dispatch():
            model = clone(estimator).set_params(working_memory=memory).fit(put(xp, device, bank))
            found[memory] = (host(model.transform(put(xp, device, sims))),
                             host(model.top_k(put(xp, device, sims), k=10, return_scores=False)))
    scores, best = found[None]
    for other_scores, other_best in (found[MANY_BLOCKS], found[1e-5]):
        assert_scores_close(estimator, other_scores, scores, np.float64)
        np.testing.assert_array_equal(other_best, best)


def test_without_working_memory_the_blocks_take_the_device_budget():
    xp, device = namespace_and_device(("array_api_strict", "device1"))
    bank = put(xp, device, np.ones((2000, 10_000)))
    blocks = list(_array_api_path._similarity_blocks(bank, None, InvertedSoftmax()))
    expected_rows = 256 * 2**20 // (10_000 * 8 * _array_api_path.N_BUFFERS)  # 838
    assert [block.shape[0] for _, block in blocks] == [838, 838, 2000 - 2 * 838]
    assert expected_rows == 838
