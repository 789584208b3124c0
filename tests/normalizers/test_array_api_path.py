"""The normalisers on the array API path: scikit-learn's array API checks, equality
with the NumPy path (fitted statistics, scores, top-k rankings) on the bundled data,
closed forms, memory bounded by working_memory, and the refusals."""

import warnings
from functools import partial

import numpy as np
import pytest
import sklearn
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import check_array_api_input

from skqbnorm import (
    CSLS,
    Centering,
    DualBankSinkhornNormalization,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankZNorm,
    SinkhornNormalization,
)
from skqbnorm.catalogue import METHODS
from skqbnorm.datasets import load_wordnet_revdict
from skqbnorm.normalizers import _array_api_path

import reference as ref
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
    DualInvertedSoftmax(),
    DualDynamicInvertedSoftmax(k=2),
    SinkhornNormalization(tau=1.0, n_iter=3),
    DualBankSinkhornNormalization(tau=1.0, n_iter=3),
]


def catalogue_classes():
    return sorted({method.normalizer for method in METHODS.values() if method.normalizer},
                  key=lambda cls: cls.__name__)


def test_the_catalogue_declares_the_device_methods():
    on_device = {cls.__name__ for cls in catalogue_classes() if cls.capabilities.array_api}
    assert on_device == {"InvertedSoftmax", "DynamicInvertedSoftmax", "CSLS",
                         "NearestNeighborNormalization", "Centering", "QueryBankZNorm",
                         "MutualProximity", "DualSoftmax", "DualInvertedSoftmax",
                         "DualDynamicInvertedSoftmax", "GloballyCorrected",
                         "SinkhornNormalization", "DualBankSinkhornNormalization"}
    for cls in catalogue_classes():
        assert cls().__sklearn_tags__().array_api_support is cls.capabilities.array_api


def namespaces_of_the_checks():
    # scikit-learn's own list (numpy, array-api-strict, torch, CuPy; its devices and dtypes)
    from sklearn.utils._array_api import yield_namespace_device_dtype_combinations

    return list(yield_namespace_device_dtype_combinations())


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # SN's 3 iterations
@pytest.mark.parametrize("estimator", SUPPORTED, ids=repr)
@pytest.mark.parametrize("combination", namespaces_of_the_checks(), ids=str)
def test_check_array_api_input(estimator, combination):
    namespace, device, dtype = combination
    if namespace == "torch":
        pytest.importorskip("torch")
    # Positional: the device's keyword is device in scikit-learn 1.6, device_name later.
    check_array_api_input(type(estimator).__name__, estimator, namespace, device, dtype,
                          check_values=True)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
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
    model, indices, scores, sims = fitted_on_device(estimator, xp, device, embeddings)
    with dispatch():
        transformed = model.transform(sims)
    names = [name for name in STATISTICS if hasattr(reference, name)]
    assert_fitted_from_float32_embeddings_as_on_numpy(
        xp, device, estimator, model, reference, names, (indices, scores), transformed,
        embeddings["query"])


def fitted_on_device(estimator, xp, device, embeddings):
    """A clone of ``estimator`` fitted on the embeddings moved to the device (2 MiB
    blocks), its top 10 of the queries, and the queries' similarities."""
    on_device = {name: put(xp, device, values) for name, values in embeddings.items()}
    with dispatch():
        model = clone(estimator).set_params(working_memory=2).fit(
            on_device["bank"], gallery=on_device["gallery"])
        indices, scores = model.top_k(queries=on_device["query"], k=10)
        return model, indices, scores, model.similarities(on_device["query"])


def assert_fitted_from_float32_embeddings_as_on_numpy(xp, device, estimator, model, reference,
                                                      names, found, transformed, queries):
    """The device model's statistics ``names`` (float64), top 10 and scores as the NumPy
    reference's, within the stated tolerances."""
    for name in names:
        fitted = getattr(model, name)
        assert fitted.device == device and fitted.dtype == xp.float64
        np.testing.assert_allclose(host(fitted), getattr(reference, name), rtol=0, atol=1e-6)
    indices, scores = found
    expected_indices, expected_scores = reference.top_k(queries=queries, k=10)
    assert indices.device == device and scores.dtype == xp.float32
    assert same_top_k_share(host(indices), expected_indices) >= 0.999
    assert_scores_close(estimator, host(scores), expected_scores, np.float32)
    assert_scores_close(estimator, host(transformed), reference.transform(
        reference.similarities(queries)), np.float32)


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", SETTINGS, ids=repr)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_precomputed_similarities_equal_the_numpy_path(case, estimator, dtype, revdict):
    xp, device = namespace_and_device(case)
    embeddings, _ = revdict
    bank_sims = (embeddings["bank"][:1500] @ embeddings["gallery"][:800].T).astype(dtype)
    query_sims = (embeddings["query"][:400] @ embeddings["gallery"][:800].T).astype(dtype)
    reference = clone(estimator).fit(bank_sims)
    with dispatch():
        model = clone(estimator).set_params(working_memory=0.5).fit(put(xp, device, bank_sims))
    assert_serves_as_on_numpy(xp, device, estimator, model, reference, query_sims, ("activated_",))


def assert_serves_as_on_numpy(xp, device, estimator, model, reference, query_sims, masks):
    """The device model's transform and top 10 of ``query_sims`` (NumPy) as the NumPy
    reference's, in the similarities' dtype, and its boolean fitted ``masks`` equal."""
    dtype = query_sims.dtype.type
    expected_indices, expected_scores = reference.top_k(query_sims, k=10)
    with dispatch():
        transformed = model.transform(put(xp, device, query_sims))
        indices, scores = model.top_k(put(xp, device, query_sims), k=10)
    assert transformed.device == device and host(transformed).dtype == dtype
    assert_scores_close(estimator, host(transformed), reference.transform(query_sims), dtype)
    assert same_top_k_share(host(indices), expected_indices) >= 0.999
    assert_scores_close(estimator, host(scores), expected_scores, dtype)
    for name in masks:
        if hasattr(reference, name):
            np.testing.assert_array_equal(host(getattr(model, name)), getattr(reference, name))


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


# -- DBNorm: the dual-bank inverted softmaxes and their gallery bank -----------------------

DBNORM_SETTINGS = [DualInvertedSoftmax(beta1=7.0, beta2=3.0),
                   DualDynamicInvertedSoftmax(beta1=7.0, beta2=3.0, k=2)]


def dbnorm_reference(queries, bank, gallery_bank, beta1, beta2, k=None):
    """DBNorm's scores in float64, taken literally: each factor's soft maxima less their
    gallery mean, weighted by its beta; with ``k``, a factor only where the row's top-1
    is in its bank's activation set (every row without ``k``)."""
    excess = []
    for sims, beta in ((bank, beta1), (gallery_bank, beta2)):
        soft_max = logsumexp(beta * sims, axis=0) / beta
        excess.append(beta / (beta1 + beta2) * (soft_max - soft_max.mean()))
    top1 = queries.argmax(axis=1)
    out = np.array(queries, dtype=np.float64)
    for sims, factor in zip((bank, gallery_bank), excess):
        gate = (np.ones(len(queries), bool) if k is None
                else np.isin(top1, sorted(ref.activation_set(sims, k))))
        out[gate] -= factor
    return out


def gated_banks(rng):
    """Banks whose activation sets differ, so every gate pattern occurs."""
    queries, bank, gallery_bank = (rng.normal(size=(n, 12)) for n in (200, 60, 45))
    bank[:, :6] += 3.0  # the querybank activates items 0-5 only
    gallery_bank[:, 3:9] += 3.0  # the gallery bank items 3-8 only
    return queries, bank, gallery_bank


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", DBNORM_SETTINGS, ids=repr)
def test_dbnorm_is_the_dual_formula_for_every_working_memory(case, estimator):
    xp, device = namespace_and_device(case)
    queries, bank, gallery_bank = gated_banks(np.random.default_rng(14))
    expected = dbnorm_reference(queries, bank, gallery_bank, 7.0, 3.0, getattr(estimator, "k", None))
    host_model = clone(estimator).fit(bank, gallery_bank=gallery_bank)
    for memory in (0.0005, 0.05, None):  # 1, 100 and all rows a block
        with dispatch():
            model = clone(estimator).set_params(working_memory=memory).fit(
                put(xp, device, bank), gallery_bank=put(xp, device, gallery_bank))
            scores = model.transform(put(xp, device, queries))
        assert model.n_gallery_bank_ == 45 and model.bias_.device == device
        np.testing.assert_allclose(host(scores), expected, rtol=1e-12, atol=1e-13)
        for name in ("bank_soft_max_", "gallery_bank_soft_max_", "bias_"):
            np.testing.assert_allclose(host(getattr(model, name)), getattr(host_model, name),
                                       rtol=1e-13)
        assert model.mean_bias_ == pytest.approx(host_model.mean_bias_, rel=1e-13)
        for name in ("activated_", "gallery_bank_activated_"):
            if hasattr(host_model, name):
                np.testing.assert_array_equal(host(getattr(model, name)), getattr(host_model, name))
    if hasattr(host_model, "activated_"):  # every gate pattern was exercised
        top1 = queries.argmax(axis=1)
        patterns = set(zip(host_model.activated_[top1], host_model.gallery_bank_activated_[top1]))
        assert len(patterns) == 4


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", DBNORM_SETTINGS, ids=repr)
def test_dbnorm_without_a_gallery_bank_is_the_inverted_softmax(case, estimator):
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(15)
    bank, queries = rng.normal(size=(80, 10)), rng.normal(size=(30, 10))
    single = (DynamicInvertedSoftmax(beta=7.0, k=2) if hasattr(estimator, "k")
              else InvertedSoftmax(beta=7.0))
    with dispatch():
        model = clone(estimator).fit(put(xp, device, bank))
        expected = single.fit(put(xp, device, bank)).transform(put(xp, device, queries))
        scores = model.transform(put(xp, device, queries))
    assert model.gallery_bank_soft_max_ is None and model.n_gallery_bank_ == 0
    np.testing.assert_array_equal(host(scores), host(expected))


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", [DualInvertedSoftmax(), DualDynamicInvertedSoftmax()], ids=repr)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dbnorm_precomputed_similarities_equal_the_numpy_path(case, estimator, dtype, revdict):
    xp, device = namespace_and_device(case)
    embeddings, _ = revdict
    gallery = embeddings["gallery"][:800]
    gallery_bank_embeddings = load_wordnet_revdict()["gallery_bank_embeddings"][:1200]
    bank_sims, query_sims, gallery_bank_sims = (
        (rows @ gallery.T).astype(dtype)
        for rows in (embeddings["bank"][:1500], embeddings["query"][:400], gallery_bank_embeddings))
    reference = clone(estimator).fit(bank_sims, gallery_bank=gallery_bank_sims)
    with dispatch():
        model = clone(estimator).set_params(working_memory=0.5).fit(
            put(xp, device, bank_sims), gallery_bank=put(xp, device, gallery_bank_sims))
    assert_serves_as_on_numpy(xp, device, estimator, model, reference, query_sims,
                              ("activated_", "gallery_bank_activated_"))


@pytest.mark.slow
@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", [DualInvertedSoftmax(), DualDynamicInvertedSoftmax()], ids=repr)
def test_dbnorm_bundled_data_from_embeddings_equals_the_numpy_path(case, estimator, revdict):
    xp, device = namespace_and_device(case)
    embeddings, _ = revdict
    gallery_bank = load_wordnet_revdict()["gallery_bank_embeddings"].astype(np.float32)
    reference = clone(estimator).fit(embeddings["bank"], gallery=embeddings["gallery"],
                                     gallery_bank=gallery_bank)
    on_device = {name: put(xp, device, values) for name, values in embeddings.items()}
    with dispatch():
        model = clone(estimator).set_params(working_memory=2).fit(
            on_device["bank"], gallery=on_device["gallery"],
            gallery_bank=put(xp, device, gallery_bank))
        indices, scores = model.top_k(queries=on_device["query"], k=10)
        transformed = model.transform(model.similarities(on_device["query"]))
    assert_fitted_from_float32_embeddings_as_on_numpy(
        xp, device, estimator, model, reference, ("bank_soft_max_", "gallery_bank_soft_max_", "bias_"),
        (indices, scores), transformed, embeddings["query"])


@pytest.mark.parametrize("case", NAMESPACES)
def test_a_bad_value_in_the_gallery_banks_last_block_raises_the_numpy_paths_error(case):
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(16)
    bank, gallery_bank = rng.normal(size=(100, 50)), rng.normal(size=(1000, 50))
    gallery_bank[998, 37] = np.nan  # in the last of 167 blocks
    model = DualDynamicInvertedSoftmax(k=2, working_memory=MANY_BLOCKS)
    expected = numpy_error(lambda: clone(model).fit(bank, gallery_bank=gallery_bank))
    assert "gallery_bank row 998 to gallery item 37 is nan" in expected
    with dispatch(), pytest.raises(ValueError) as raised:
        clone(model).fit(put(xp, device, bank), gallery_bank=put(xp, device, gallery_bank))
    assert str(raised.value) == expected


def test_a_gallery_bank_of_another_width_or_a_bad_embedding_raises_the_numpy_paths_error():
    xp, device = namespace_and_device(("array_api_strict", "device1"))
    rng = np.random.default_rng(17)
    bank, gallery, wrong = rng.normal(size=(30, 8)), rng.normal(size=(12, 8)), rng.normal(size=(9, 7))
    bad = rng.normal(size=(9, 8))
    bad[5, 1] = np.inf
    for gallery_bank, fit_args in ((wrong, {}), (wrong, {"gallery": gallery}),
                                   (bad, {"gallery": gallery})):
        model = DualInvertedSoftmax()
        expected = numpy_error(partial(clone(model).fit, bank, gallery_bank=gallery_bank, **fit_args))
        on_device = {name: put(xp, device, value) for name, value in fit_args.items()}
        with dispatch(), pytest.raises(ValueError) as raised:
            clone(model).fit(put(xp, device, bank), gallery_bank=put(xp, device, gallery_bank), **on_device)
        assert str(raised.value) == expected


def test_a_numpy_gallery_bank_follows_the_device_bank_and_not_the_other_way():
    xp, device = namespace_and_device(("array_api_strict", "device1"))
    rng = np.random.default_rng(18)
    bank, gallery, gallery_bank = (rng.normal(size=(n, 8)) for n in (50, 12, 40))
    reference = DualInvertedSoftmax(beta1=5.0, beta2=2.0).fit(bank, gallery=gallery,
                                                              gallery_bank=gallery_bank)
    with dispatch():
        model = DualInvertedSoftmax(beta1=5.0, beta2=2.0).fit(
            put(xp, device, bank), gallery=put(xp, device, gallery), gallery_bank=gallery_bank)
        assert model.gallery_bank_soft_max_.device == device
        np.testing.assert_allclose(host(model.bias_), reference.bias_, rtol=1e-12)
        with pytest.raises(ValueError, match="gallery bank of array_api_strict beside a NumPy"):
            DualInvertedSoftmax().fit(bank, gallery_bank=put(xp, device, gallery_bank))


# -- GC and the empiric MP: ranks within the bank's sorted columns --------------------------

RANKED = [GloballyCorrected(), MutualProximity(method="empiric")]


@pytest.mark.parametrize("estimator", RANKED, ids=repr)
@pytest.mark.parametrize("combination", namespaces_of_the_checks(), ids=str)
def test_check_array_api_input_of_the_ranked_methods(estimator, combination):
    test_check_array_api_input(estimator, combination)


def searchsorted_by_row(sorted_rows, values, side):
    """NumPy's searchsorted, one row at a time, in float64 (exact for both dtypes)."""
    return np.stack([np.searchsorted(row, value, side=side) for row, value in
                     zip(sorted_rows.astype(np.float64), values.astype(np.float64))])


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("length", [1, 2, 3, 7, 16, 100])
@pytest.mark.parametrize("dtypes", [(np.float64, np.float64), (np.float32, np.float32),
                                    (np.float32, np.float64), (np.float64, np.float32)],
                         ids=lambda dtypes: "-".join(np.dtype(d).name for d in dtypes))
def test_counts_in_sorted_rows_are_searchsorted_row_by_row(case, side, length, dtypes):
    xp, device = namespace_and_device(case)
    rows_dtype, values_dtype = dtypes
    rng = np.random.default_rng(20)
    sorted_rows = np.sort(rng.integers(0, 4, size=(5, length)) * 0.3 + 0.1, axis=1).astype(rows_dtype)
    tied = sorted_rows.astype(values_dtype)  # exact ties, and a float64 step either side
    values = np.hstack([tied, np.nextafter(tied, -np.inf), np.nextafter(tied, np.inf),
                        np.full((5, 2), [-1.0, 2.0]), rng.uniform(0, 1.2, size=(5, 9))])
    values = values.astype(values_dtype)
    sorted_rows_on_device, values_on_device = put(xp, device, sorted_rows), put(xp, device, values)
    counts = _array_api_path.count_in_rows(_array_api_path.compat().array_namespace(values_on_device),
                                           sorted_rows_on_device, values_on_device, side)
    assert counts.device == device
    np.testing.assert_array_equal(host(counts), searchsorted_by_row(sorted_rows, values, side))


def assert_ranked_scores_equal(estimator, found, expected):
    """GC's scores to the bit; the empiric MP's to the rounding of the device's log."""
    if isinstance(estimator, GloballyCorrected):
        np.testing.assert_array_equal(found, expected)
    else:
        np.testing.assert_allclose(found, expected, rtol=4 * np.finfo(expected.dtype).eps, atol=0)


def assert_same_top_k(xp, indices, scores, expected_indices, expected_scores, transformed):
    """The NumPy path's top k: its scores, and its items, except that among exact ties
    torch follows torch.topk's order (every item then scores what it should)."""
    np.testing.assert_array_equal(scores, expected_scores)
    if _array_api_path.namespace_name(xp) == "torch":
        np.testing.assert_array_equal(np.take_along_axis(transformed, indices, axis=1), scores)
    else:
        np.testing.assert_array_equal(indices, expected_indices)


def columns_together(sorted_bank):
    """Whether each column's values lie together in memory, so that the counts read
    the bank where it is, without a copy."""
    if hasattr(sorted_bank, "is_contiguous"):  # torch
        return sorted_bank.T.is_contiguous()
    return sorted_bank._array.flags.f_contiguous  # array-api-strict's NumPy array


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", RANKED, ids=repr)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tied", [False, True], ids=["continuous", "tied"])
def test_ranked_methods_equal_the_numpy_path(case, estimator, dtype, tied):
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(21)
    if tied:  # coarse values: ties within rows, and with the bank
        bank, queries = (rng.integers(0, 5, size=(n, 40)) * 0.1 for n in (300, 50))
    else:
        bank, queries = rng.normal(size=(300, 40)), rng.normal(size=(50, 40))
    bank, queries = bank.astype(dtype), queries.astype(dtype)
    reference = clone(estimator).fit(bank)
    expected = reference.transform(queries)
    expected_indices, expected_scores = reference.top_k(queries, k=10)
    with dispatch():
        # 40 bank rows a block, and two blocks of queries
        model = clone(estimator).set_params(working_memory=0.05).fit(put(xp, device, bank))
        transformed = model.transform(put(xp, device, queries))
        indices, scores = model.top_k(put(xp, device, queries), k=10)
    assert model.sorted_bank_.device == device and host(model.sorted_bank_).dtype == dtype
    np.testing.assert_array_equal(host(model.sorted_bank_), reference.sorted_bank_)
    assert columns_together(model.sorted_bank_)
    assert transformed.device == device and host(transformed).dtype == dtype
    assert_ranked_scores_equal(estimator, host(transformed), expected)
    np.testing.assert_array_equal(ref.dense_rank_rows(host(transformed)),
                                  ref.dense_rank_rows(expected))
    assert indices.device == device and host(scores).dtype == dtype
    assert_same_top_k(xp, host(indices), host(scores), expected_indices, expected_scores,
                      host(transformed))


@pytest.mark.parametrize("case", NAMESPACES)
def test_ranks_against_a_float32_bank_are_exact_on_the_device(case):
    # float64 queries one step from a float32 bank value do not tie with it
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(22)
    bank = rng.normal(size=(40, 6)).astype(np.float32)
    queries = np.repeat(bank[:3].astype(np.float64), 3, axis=0)
    queries[1::3] = np.nextafter(queries[1::3], -np.inf)
    queries[2::3] = np.nextafter(queries[2::3], np.inf)
    with dispatch():
        gc = GloballyCorrected().fit(put(xp, device, bank)).transform(put(xp, device, queries))
        mp = MutualProximity(method="empiric").fit(put(xp, device, bank)).transform(
            put(xp, device, queries))
    np.testing.assert_array_equal(-np.floor(host(gc)), ref.gc_rank(queries, bank.astype(np.float64)))
    expected = ref.mutual_proximity_empiric(queries, bank.astype(np.float64))
    np.testing.assert_allclose(host(mp), expected, rtol=1e-12, atol=1e-12)
    assert (host(mp)[0::3] < host(mp)[2::3]).all() and (host(mp)[1::3] < host(mp)[0::3]).all()


@pytest.mark.parametrize("case", NAMESPACES)
def test_ranked_methods_by_hand_on_the_device(case):
    xp, device = namespace_and_device(case)
    gc_bank = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]])
    queries = np.array([[0.75, 0.25], [0.5, 0.5], [1e308, -1e308]])
    with dispatch():
        gc = GloballyCorrected().fit(put(xp, device, gc_bank)).transform(put(xp, device, queries))
        mp = MutualProximity(method="empiric").fit(put(xp, device, np.zeros((1, 4)))).transform(
            put(xp, device, np.array([[0.3, 0.1, 0.3, 0.5]])))
    # ranks 2 and 1, u = 0.5 and 0; a constant row has nothing to break; spread beyond float64
    np.testing.assert_array_equal(host(gc), [[-1.5, -1.0], [-3.0, 0.0], [0.5, -3.0]])
    # P_g = 1.5 / 2 everywhere; P_q: 0.1 -> 0.5/4, 0.3 -> 2/4, 0.5 -> 3.5/4
    np.testing.assert_allclose(np.exp(host(mp)), [0.75 * np.array([2, 0.5, 2, 3.5]) / 4],
                               rtol=1e-15)


@pytest.mark.parametrize("estimator", RANKED, ids=repr)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ranked_scores_stay_within_working_memory(estimator, dtype):
    # array-api-strict computes with NumPy, whose allocations tracemalloc sees
    import tracemalloc

    xp, device = namespace_and_device(("array_api_strict", "CPU_DEVICE"))
    rng = np.random.default_rng(27)
    bank = put(xp, device, rng.normal(size=(2000, 1000)).astype(np.float32))
    queries = put(xp, device, rng.normal(size=(1000, 1000)).astype(dtype))
    memory = 4  # MiB: blocks of 104 query rows (GC) or 65 (the empiric MP)
    with dispatch():
        model = clone(estimator).set_params(working_memory=memory).fit(bank)
        tracemalloc.start()
        try:
            model.top_k(queries, k=10)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak <= memory * 2**20


def test_ranked_methods_keep_to_the_2023_12_standard():
    # scikit-learn 1.6 asks array-api-strict for 2023.12: no take_along_axis, no
    # count_nonzero, no Python scalars in where
    xp, device = namespace_and_device(("array_api_strict", "device1"))
    rng = np.random.default_rng(23)
    bank, gallery, queries = (rng.normal(size=(n, 8)) for n in (60, 20, 7))
    for estimator in RANKED:
        reference = clone(estimator).fit(bank, gallery=gallery)
        with xp.ArrayAPIStrictFlags(api_version="2023.12"), dispatch():
            model = clone(estimator).fit(put(xp, device, bank), gallery=put(xp, device, gallery))
            sims = model.similarities(put(xp, device, queries))
            transformed = model.transform(sims)
            indices = model.top_k(queries=put(xp, device, queries), k=5, return_scores=False)
        np.testing.assert_allclose(host(transformed), reference.transform(
            reference.similarities(queries)), rtol=1e-12)
        np.testing.assert_array_equal(host(indices), reference.top_k(queries=queries, k=5)[0])


@pytest.mark.slow
@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", RANKED, ids=repr)
def test_ranked_methods_from_embeddings_on_the_bundled_data(case, estimator, revdict):
    """The top 10 of the NumPy path; the scores, the NumPy path's of the device's own
    similarities: a float32 product that rounds otherwise (by up to 3.6e-7 here) moves
    a similarity past a bank value, and its rank by one, for about 0.1% of the entries."""
    xp, device = namespace_and_device(case)
    embeddings, _ = revdict
    expected_indices, _ = clone(estimator).fit(
        embeddings["bank"], gallery=embeddings["gallery"]).top_k(queries=embeddings["query"], k=10)
    model, indices, scores, sims = fitted_on_device(estimator, xp, device, embeddings)
    with dispatch():
        transformed = model.transform(sims)
        indices_of_sims, scores_of_sims = model.top_k(sims, k=10)
    assert model.sorted_bank_.device == device and model.sorted_bank_.dtype == xp.float32
    assert indices.device == device and scores.dtype == xp.float32
    assert same_top_k_share(host(indices), expected_indices) >= 0.999
    # the same multiset per column as the device's bank similarities
    own = clone(estimator).fit(host(model.sorted_bank_))
    own_indices, own_scores = own.top_k(host(sims), k=10)
    assert_ranked_scores_equal(estimator, host(transformed), own.transform(host(sims)))
    assert_same_top_k(xp, host(indices_of_sims), host(scores_of_sims), own_indices, own_scores,
                      host(transformed))


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", RANKED, ids=repr)
def test_a_bad_value_raises_the_numpy_paths_error_for_the_ranked_methods(case, estimator):
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(24)
    bank, sims = rng.normal(size=(1000, 50)), rng.normal(size=(300, 50))
    bad_bank, bad_sims = bank.copy(), sims.copy()
    bad_bank[998, 37], bad_sims[299, 4] = np.inf, np.nan
    model = clone(estimator).set_params(working_memory=MANY_BLOCKS)
    expected = numpy_error(lambda: clone(model).fit(bad_bank))
    with dispatch(), pytest.raises(ValueError) as raised:
        clone(model).fit(put(xp, device, bad_bank))
    assert str(raised.value) == expected
    expected = numpy_error(lambda: clone(model).fit(bank).transform(bad_sims))
    assert "X row 299 to gallery item 4 is nan" in expected
    with dispatch():
        fitted = clone(model).fit(put(xp, device, bank))
        with pytest.raises(ValueError) as raised:
            fitted.transform(put(xp, device, bad_sims))
    assert str(raised.value) == expected


def test_a_refit_keeps_nothing_of_the_other_method_or_path():
    xp, device = namespace_and_device(("array_api_strict", "device1"))
    bank = np.random.default_rng(25).normal(size=(30, 6))
    model = MutualProximity(method="empiric")
    with dispatch():
        model.fit(put(xp, device, bank))
        assert not hasattr(model, "bank_mean_")
        model.set_params(method="gaussian").fit(put(xp, device, bank))
        assert not hasattr(model, "sorted_bank_") and model.bank_mean_.device == device
        model.set_params(method="empiric").fit(put(xp, device, bank))
        assert not hasattr(model, "bank_mean_") and not hasattr(model, "_bank_scale")
    gc = GloballyCorrected().fit(bank)
    with dispatch():
        gc.fit(put(xp, device, bank))
    assert not hasattr(gc, "_bank_ranks")
    np.testing.assert_array_equal(gc.fit(bank).transform(bank[:3]),
                                  GloballyCorrected().fit(bank).transform(bank[:3]))


@pytest.mark.torch
@pytest.mark.parametrize("estimator", RANKED, ids=repr)
def test_without_dispatch_the_ranked_methods_take_the_numpy_path(estimator):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(26)
    bank, queries = rng.normal(size=(40, 9)), rng.normal(size=(5, 9))
    model = clone(estimator).fit(torch.asarray(bank))
    assert isinstance(model.sorted_bank_, np.ndarray)
    scores = model.transform(torch.asarray(queries))
    assert isinstance(scores, np.ndarray)
    np.testing.assert_array_equal(scores, clone(estimator).fit(bank).transform(queries))


# -- SN and DBSN: the Sinkhorn iterations, each half a pass over the bank's blocks ---------


def sinkhorn_reference(bank_sims, cross_sims, tau, n_iter, tol):
    """Dense log-domain Sinkhorn over the targets ``[P | s(b, h)]`` from v = 1, taken
    literally: ``(tau * log u - mean over the gallery, log v, error, iterations)``."""
    targets = bank_sims if cross_sims is None else np.hstack([bank_sims, cross_sims])
    n_bank, n_targets = targets.shape
    log_kernel = (targets.T - 1.0) / tau
    log_v = np.zeros(n_bank)
    for done in range(1, n_iter + 1):
        log_u = -np.log(n_targets) - logsumexp(log_kernel + log_v[None, :], axis=1)
        updated = -np.log(n_bank) - logsumexp(log_kernel.T + log_u[None, :], axis=1)
        error = np.abs(np.exp(log_v - updated) - 1).max()
        if error <= tol or done == n_iter:
            bias = -tau * log_u[: bank_sims.shape[1]]
            return bias - bias.mean(), log_v, error, done
        log_v = updated


SINKHORN_SETTINGS = [SinkhornNormalization(tau=0.1, n_iter=60, tol=1e-6),
                     DualBankSinkhornNormalization(tau=0.1, n_iter=60, tol=1e-6)]


def sinkhorn_banks(rng):
    bank = rng.uniform(-0.2, 0.8, size=(120, 15))
    bank[:, :3] += 0.3  # hubs
    return bank, rng.uniform(-0.2, 0.8, size=(120, 9)), rng.uniform(-0.2, 0.8, size=(25, 15))


def sinkhorn_fit_args(estimator, xp, device, bank, cross):
    if isinstance(estimator, DualBankSinkhornNormalization):
        return {"querybank_to_gallery_bank": put(xp, device, cross)}
    return {}


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", SINKHORN_SETTINGS, ids=repr)
def test_sinkhorn_is_the_dense_iteration_for_every_working_memory(case, estimator):
    xp, device = namespace_and_device(case)
    bank, cross, queries = sinkhorn_banks(np.random.default_rng(19))
    dual = isinstance(estimator, DualBankSinkhornNormalization)
    excess, log_v, error, n_iter = sinkhorn_reference(bank, cross if dual else None, 0.1, 60, 1e-6)
    assert 1 < n_iter < 60
    for memory in (0.0005, 0.05, None):  # 2, 200 and all rows a block
        with dispatch():
            model = clone(estimator).set_params(working_memory=memory).fit(
                put(xp, device, bank), **sinkhorn_fit_args(estimator, xp, device, bank, cross))
            scores = model.transform(put(xp, device, queries))
        assert model.n_iter_ == n_iter and model.marginal_error_ == pytest.approx(error, rel=1e-8)
        assert model.gallery_log_scaling_.device == device
        assert model.gallery_log_scaling_.dtype == xp.float64
        np.testing.assert_allclose(host(model.bank_log_scaling_), log_v, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(host(scores), queries - excess, rtol=1e-12, atol=1e-12)
        if dual:
            assert model.n_gallery_bank_ == 9
            assert host(model.gallery_bank_log_scaling_).shape == (9,)


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("estimator", [SinkhornNormalization(tau=0.1, tol=1e-4),
                                       DualBankSinkhornNormalization(tau=0.1, tol=1e-4)], ids=repr)
def test_sinkhorn_from_embeddings_equals_the_numpy_path(case, estimator):
    """float32 products, whose rounding the paths share only to a few ulps: a tolerance
    far above it, so that both stop at the same iteration."""
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(20)
    bank, gallery, gallery_bank, queries = (rng.normal(size=(n, 16)).astype(np.float32)
                                            for n in (300, 80, 40, 50))
    extra = {"gallery_bank": gallery_bank} if isinstance(estimator, DualBankSinkhornNormalization) else {}
    reference = clone(estimator).fit(bank, gallery=gallery, **extra)
    expected_indices, expected_scores = reference.top_k(queries=queries, k=10)
    with dispatch():
        model = clone(estimator).set_params(working_memory=0.05).fit(
            put(xp, device, bank), gallery=put(xp, device, gallery),
            **{name: put(xp, device, value) for name, value in extra.items()})
        indices, scores = model.top_k(queries=put(xp, device, queries), k=10)
        transformed = model.transform(model.similarities(put(xp, device, queries)))
    assert model.n_iter_ == reference.n_iter_
    for name in ("gallery_log_scaling_", "bank_log_scaling_", "gallery_bank_log_scaling_"):
        if getattr(reference, name, None) is not None:
            np.testing.assert_allclose(host(getattr(model, name)), getattr(reference, name),
                                       rtol=0, atol=2e-5)
    assert indices.device == device and scores.dtype == xp.float32
    assert same_top_k_share(host(indices), expected_indices) >= 0.999
    assert_scores_close(estimator, host(scores), expected_scores, np.float32)
    assert_scores_close(estimator, host(transformed), reference.transform(
        reference.similarities(queries)), np.float32)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # DBSN: 100 iterations
@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sinkhorn_precomputed_similarities_equal_the_numpy_path(case, dtype, revdict):
    xp, device = namespace_and_device(case)
    embeddings, _ = revdict
    gallery = embeddings["gallery"][:800]
    gallery_bank = load_wordnet_revdict()["gallery_bank_embeddings"][:600]
    bank = embeddings["bank"][:1500]
    bank_sims, query_sims = ((rows @ gallery.T).astype(dtype) for rows in (bank, embeddings["query"][:400]))
    cross = (bank @ gallery_bank.T).astype(dtype)
    for estimator, extra in ((SinkhornNormalization(), {}),
                             (DualBankSinkhornNormalization(), {"querybank_to_gallery_bank": cross})):
        reference = clone(estimator).fit(bank_sims, **extra)
        expected_indices, expected_scores = reference.top_k(query_sims, k=10)
        with dispatch():
            model = clone(estimator).set_params(working_memory=0.5).fit(
                put(xp, device, bank_sims), **{name: put(xp, device, value) for name, value in extra.items()})
            transformed = model.transform(put(xp, device, query_sims))
            indices, scores = model.top_k(put(xp, device, query_sims), k=10)
        assert model.n_iter_ == reference.n_iter_
        assert transformed.device == device and host(transformed).dtype == dtype
        assert_scores_close(estimator, host(transformed), reference.transform(query_sims), dtype)
        assert same_top_k_share(host(indices), expected_indices) >= 0.999
        assert_scores_close(estimator, host(scores), expected_scores, dtype)


@pytest.mark.parametrize("case", NAMESPACES)
def test_sinkhorn_refuses_as_the_numpy_path_does(case):
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(21)
    bank, cross, beside = rng.normal(size=(100, 20)), rng.normal(size=(100, 1000)), rng.normal(size=(1000, 20))
    bad_cross, bad_beside = cross.copy(), beside.copy()
    bad_cross[97, 998] = np.inf
    bad_beside[998, 3] = np.nan
    model = DualBankSinkhornNormalization(n_iter=2, working_memory=MANY_BLOCKS)
    cases = [
        {"querybank_to_gallery_bank": bad_cross},
        {"querybank_to_gallery_bank": cross, "gallery_bank": bad_beside},
        {"querybank_to_gallery_bank": cross[:50]},
        {"querybank_to_gallery_bank": cross, "gallery_bank": beside[:7]},
        {"gallery_bank": beside},
        {"gallery_bank": beside[:, :5], "querybank_to_gallery_bank": cross},
    ]
    for fit_args in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            expected = numpy_error(partial(clone(model).fit, bank, **fit_args))
            with dispatch(), pytest.raises(ValueError) as raised:
                clone(model).fit(put(xp, device, bank),
                                 **{name: put(xp, device, value) for name, value in fit_args.items()})
        assert str(raised.value) == expected
    gallery, embeddings = rng.normal(size=(20, 8)), rng.normal(size=(100, 8))
    bad_embeddings = rng.normal(size=(30, 8))
    bad_embeddings[4, 2] = np.nan
    for fit_args in ({"gallery_bank": bad_embeddings}, {"gallery_bank": bad_embeddings[:, :5]},
                     {"gallery_bank": bad_embeddings, "querybank_to_gallery_bank": cross}):
        expected = numpy_error(partial(clone(model).fit, embeddings, gallery=gallery, **fit_args))
        with dispatch(), pytest.raises(ValueError) as raised:
            clone(model).fit(put(xp, device, embeddings), gallery=put(xp, device, gallery),
                             **{name: put(xp, device, value) for name, value in fit_args.items()})
        assert str(raised.value) == expected


@pytest.mark.parametrize("case", NAMESPACES)
def test_sinkhorn_that_does_not_converge_warns_as_the_numpy_path(case):
    xp, device = namespace_and_device(case)
    bank = np.random.default_rng(22).uniform(-0.2, 0.8, size=(200, 30))
    with pytest.warns(ConvergenceWarning, match="did not reach tol") as expected:
        reference = SinkhornNormalization(tau=0.01, n_iter=3).fit(bank)
    with dispatch(), pytest.warns(ConvergenceWarning) as found:
        model = SinkhornNormalization(tau=0.01, n_iter=3).fit(put(xp, device, bank))
    assert model.n_iter_ == 3 and model.marginal_error_ == pytest.approx(reference.marginal_error_,
                                                                          rel=1e-9)
    assert str(found[0].message) == str(expected[0].message)
    assert found[0].filename == expected[0].filename == __file__


@pytest.mark.parametrize("case", NAMESPACES)
def test_a_mean_bias_near_the_float64_maximum_is_the_numpy_paths(case):
    """The soft maxima sum past the float64 maximum: the mean is taken scaled, as on NumPy."""
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(0)
    bank, queries = (1e307 * (1 + 0.1 * rng.random(size=shape)) for shape in ((30, 25), (3, 25)))
    reference = DualInvertedSoftmax(beta1=1.0).fit(bank)
    with dispatch():
        model = DualInvertedSoftmax(beta1=1.0).fit(put(xp, device, bank))
        scores = model.transform(put(xp, device, queries))
    if model.mean_bias_ != reference.mean_bias_:
        assert model.mean_bias_ == pytest.approx(reference.mean_bias_, rel=1e-12)
    np.testing.assert_allclose(host(scores), reference.transform(queries), rtol=1e-12)
