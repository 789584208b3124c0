"""partial_fit: a querybank appended in any number of calls equals one fit on all of it."""

import copy
import itertools
import numbers
import pickle
import zlib

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone

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
from skqbnorm.normalizers import QueryBankNormalizer

da = pytest.importorskip("dask.array")

MERGEABLE = [
    InvertedSoftmax(),
    DynamicInvertedSoftmax(k=2),
    CSLS(k=3),
    NearestNeighborNormalization(k=3),
    Centering(),
    QueryBankZNorm(),
    MutualProximity(),
    DualInvertedSoftmax(),
    DualDynamicInvertedSoftmax(k=2),
    DualSoftmax(),
]
REFUSING = [
    GloballyCorrected(),
    MutualProximity(method="empiric"),
    SinkhornNormalization(),
    DualBankSinkhornNormalization(),
]
N_GALLERY, N_DIMS = 40, 16


def random_cuts(rng, n_rows, max_calls=50, first=3):
    """Uneven consecutive parts of ``range(n_rows)``: 1 to ``max_calls`` of them, the
    first of at least ``first`` rows (a bank smaller than k is refused)."""
    n_calls = int(rng.integers(1, max_calls + 1))
    inner = np.sort(rng.choice(np.arange(first, n_rows), size=n_calls - 1, replace=False))
    bounds = np.concatenate([[0], inner, [n_rows]])
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds)]


def as_kind(array, kind, rng, tmp_path, name):
    """``array`` as NumPy, a read-only np.memmap on a file, or a dask array of random chunks."""
    if kind == "memmap":
        path = tmp_path / f"{name}.dat"
        mapped = np.memmap(path, dtype=array.dtype, mode="w+", shape=array.shape)
        mapped[:] = array
        mapped.flush()
        return np.memmap(path, dtype=array.dtype, mode="r", shape=array.shape)
    if kind == "dask":
        return da.from_array(array, chunks=(int(rng.integers(1, len(array) + 1)), -1))
    return array


def banks(rng, mode, dtype):
    """(querybank, gallery-bank, gallery): similarities or embeddings, with the gallery."""
    if mode == "similarities":
        # Enough rows for several tree leaves (256 rows for 40 columns).
        return (rng.normal(size=(1100, N_GALLERY)).astype(dtype),
                rng.normal(size=(700, N_GALLERY)).astype(dtype), None)
    # Enough rows for two fixed products of embedding mode (2,048 rows at this width).
    return (rng.normal(size=(2300, N_DIMS)).astype(dtype),
            rng.normal(size=(600, N_DIMS)).astype(dtype),
            rng.normal(size=(N_GALLERY, N_DIMS)).astype(dtype))


def fitted_state(estimator):
    """Every learned value (public and private): arrays, numbers, None, tuples of them."""
    def learned(value):
        if isinstance(value, (tuple, list)):
            return all(learned(item) for item in value)
        return value is None or isinstance(value, (np.ndarray, numbers.Number, np.generic))

    return {name: value for name, value in vars(estimator).items()
            if name != "_partial_streams" and name not in estimator.get_params()
            and learned(value)}


def assert_same_state(live, whole):
    live_state, whole_state = fitted_state(live), fitted_state(whole)
    assert live_state.keys() == whole_state.keys()
    for name, value in whole_state.items():
        if isinstance(value, (tuple, list)):
            for mine, theirs in zip(live_state[name], value, strict=True):
                assert_array_equal(mine, theirs, err_msg=name)
        else:
            assert_array_equal(live_state[name], value, err_msg=name, strict=True)


def uses_gallery_bank(estimator):
    return type(estimator).capabilities.gallery_bank is not None


@pytest.mark.parametrize("estimator", MERGEABLE, ids=lambda est: repr(est))
@pytest.mark.parametrize("mode", ["similarities", "embeddings"])
@pytest.mark.parametrize("kind", ["numpy", "memmap", "dask"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("max_calls", [4, 50])
def test_partial_fit_equals_one_fit_bitwise(estimator, mode, kind, dtype, max_calls, tmp_path):
    seed = zlib.crc32(f"{estimator!r} {mode} {kind} {np.dtype(dtype).name} {max_calls}".encode())
    rng = np.random.default_rng(seed)
    bank, gallery_bank, gallery = banks(rng, mode, dtype)
    extra = {"gallery_bank": gallery_bank} if uses_gallery_bank(estimator) else {}
    whole = clone(estimator).fit(bank, gallery=gallery, **extra)

    source = as_kind(bank, kind, rng, tmp_path, "bank")
    parts = random_cuts(rng, len(bank), max_calls)  # few calls: whole leaves and products in one
    gallery_parts = random_cuts(rng, len(gallery_bank), max_calls=len(parts)) if extra else []
    live = clone(estimator)
    for call, rows in enumerate(parts):
        kwargs = {}
        if call == 0 and gallery is not None:
            kwargs["gallery"] = gallery
        elif gallery is not None and rng.random() < 0.3:
            kwargs["gallery"] = gallery  # repeated unchanged: allowed
        if call < len(gallery_parts):
            kwargs["gallery_bank"] = gallery_bank[gallery_parts[call]]
        assert live.partial_fit(source[rows], **kwargs) is live
        assert live.n_bank_ == rows.stop
    assert_same_state(live, whole)
    query_sims = rng.normal(size=(50, N_GALLERY)).astype(dtype)
    assert_array_equal(live.transform(query_sims), whole.transform(query_sims))


@pytest.mark.parametrize("estimator", MERGEABLE, ids=lambda est: repr(est))
def test_every_call_leaves_the_fit_of_the_rows_so_far(estimator):
    rng = np.random.default_rng(0)
    bank = rng.normal(size=(700, 30))
    live = clone(estimator)
    for rows in random_cuts(rng, len(bank), max_calls=6):
        live.partial_fit(bank[rows])
        assert_same_state(live, clone(estimator).fit(bank[: rows.stop]))


@pytest.mark.parametrize("estimator", MERGEABLE, ids=lambda est: repr(est))
def test_partial_fit_is_declared_by_capabilities(estimator):
    assert type(estimator).capabilities.mergeable
    assert hasattr(estimator, "partial_fit")


@pytest.mark.parametrize("estimator", REFUSING, ids=lambda est: repr(est))
def test_unmergeable_methods_refuse_by_name(estimator):
    bank = np.random.default_rng(0).normal(size=(20, 6))
    assert not hasattr(estimator, "partial_fit")
    name = type(estimator).__name__
    with pytest.raises(ValueError, match=rf"{name} does not support partial_fit: .*Fit {name} on the whole"):
        estimator.partial_fit(bank)


def test_refusal_reasons_name_the_statistic():
    with pytest.raises(ValueError, match="Sinkhorn iterations"):
        SinkhornNormalization().partial_fit(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="column sorted"):
        GloballyCorrected().partial_fit(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="method='empiric'"):
        MutualProximity(method="empiric").partial_fit(np.zeros((4, 3)))


def test_a_later_call_with_another_width_is_refused():
    rng = np.random.default_rng(1)
    live = InvertedSoftmax().partial_fit(rng.normal(size=(10, 5)))
    with pytest.raises(ValueError, match=r"X has 4 features, but InvertedSoftmax is expecting 5 .*\(3, 4\)"):
        live.partial_fit(rng.normal(size=(3, 4)))
    embedded = Centering().partial_fit(rng.normal(size=(10, 3)), gallery=rng.normal(size=(7, 3)))
    with pytest.raises(ValueError, match=r"X has 4 features, but Centering is expecting 3 .*embedding"):
        embedded.partial_fit(rng.normal(size=(3, 4)))
    with pytest.raises(ValueError, match=r"X has 4 features"):
        live.partial_fit(da.from_array(rng.normal(size=(3, 4))))


def test_a_later_call_with_another_dtype_is_refused():
    rng = np.random.default_rng(2)
    live = CSLS(k=2).partial_fit(rng.normal(size=(10, 5)).astype(np.float32))
    with pytest.raises(ValueError, match=r"X has dtype float64 \(shape \(3, 5\)\).*float32"):
        live.partial_fit(rng.normal(size=(3, 5)))
    live.partial_fit(rng.normal(size=(3, 5)).astype(np.float32))
    assert live.n_bank_ == 13


def test_a_later_call_with_another_gallery_is_refused():
    rng = np.random.default_rng(3)
    gallery = rng.normal(size=(7, 3))
    live = Centering().partial_fit(rng.normal(size=(10, 3)), gallery=gallery)
    live.partial_fit(rng.normal(size=(4, 3)), gallery=gallery.copy())
    with pytest.raises(ValueError, match=r"gallery \(shape \(7, 3\)\) is not the gallery"):
        live.partial_fit(rng.normal(size=(4, 3)), gallery=gallery + 1)
    precomputed = Centering().partial_fit(rng.normal(size=(10, 7)))
    with pytest.raises(ValueError, match="was not given on the first partial_fit call"):
        precomputed.partial_fit(rng.normal(size=(4, 3)), gallery=gallery)


def test_a_refused_call_leaves_the_bank_as_it_was():
    rng = np.random.default_rng(4)
    bank = rng.normal(size=(40, 6))
    live = InvertedSoftmax().partial_fit(bank[:30])
    broken = bank[30:].copy()
    broken[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        live.partial_fit(broken)
    live.partial_fit(bank[30:])
    assert_same_state(live, InvertedSoftmax().fit(bank))


def test_changed_parameters_are_refused():
    rng = np.random.default_rng(5)
    live = InvertedSoftmax(beta=10.0).partial_fit(rng.normal(size=(10, 5)))
    live.set_params(beta=20.0)
    with pytest.raises(ValueError, match=r"beta=20.0 differs from the beta=10.0"):
        live.partial_fit(rng.normal(size=(3, 5)))
    live.set_params(beta=10.0, working_memory=1.0)  # budgets do not change the result
    live.partial_fit(rng.normal(size=(3, 5)))


def test_fit_resets_and_a_later_partial_fit_starts_a_new_bank():
    rng = np.random.default_rng(6)
    bank = rng.normal(size=(30, 5))
    live = CSLS(k=2).partial_fit(bank[:10]).partial_fit(bank[10:])
    live.fit(bank[:12])
    assert live.n_bank_ == 12 and not hasattr(live, "_partial_streams")
    with pytest.warns(UserWarning, match="was fitted by fit.*starts a new querybank"):
        live.partial_fit(bank[:12])
    assert live.n_bank_ == 12
    assert_same_state(live, clone(live).fit(bank[:12]))


def test_k_is_checked_against_the_bank_so_far():
    with pytest.raises(ValueError, match=r"the first partial_fit call needs at least k=3 rows "
                                         r"for NearestNeighborNormalization; got X of shape \(2, 4\)"):
        NearestNeighborNormalization(k=3).partial_fit(np.zeros((2, 4)))
    live = NearestNeighborNormalization(k=3).partial_fit(np.ones((3, 4)))
    live.partial_fit(np.zeros((1, 4)))  # later calls: any size
    assert live.n_bank_ == 4


def snapshot(estimator):
    """Every attribute of ``estimator``, deep-copied."""
    return copy.deepcopy(vars(estimator))


def assert_unchanged(estimator, before):
    after = vars(estimator)
    assert after.keys() == before.keys()
    for name, value in before.items():
        if isinstance(value, np.ndarray):
            assert_array_equal(after[name], value, err_msg=name, strict=True)
        elif name != "_partial_streams":
            assert after[name] == value, name
        else:
            assert after[name] is not None


@pytest.mark.parametrize(("n_rows", "gallery_shape", "message"), [
    (5, (40, 8), "needs at least k=10 rows"),  # refused after the new gallery is read
    (50, (40, 9), "must have the same dimension"),
    (50, None, "larger than the gallery"),  # similarities to 8 items: k=10 > 8
])
def test_a_refused_first_call_leaves_a_fitted_normaliser_as_it_was(n_rows, gallery_shape, message):
    # A first partial_fit after fit, refused: the fit still serves, as before.
    rng = np.random.default_rng(4)
    bank, gallery, queries = rng.normal(size=(300, 8)), rng.normal(size=(100, 8)), rng.normal(size=(3, 8))
    fitted = CSLS(k=10).fit(bank, gallery=gallery)
    reference = CSLS(k=10).fit(bank, gallery=gallery)
    before = snapshot(fitted)
    new_gallery = None if gallery_shape is None else rng.normal(size=gallery_shape)
    with pytest.warns(UserWarning, match="was fitted by fit"), pytest.raises(ValueError, match=message):
        fitted.partial_fit(bank[:n_rows], gallery=new_gallery)
    assert_unchanged(fitted, before)
    for mine, theirs in zip(fitted.top_k(queries=queries, k=3), reference.top_k(queries=queries, k=3)):
        assert_array_equal(mine, theirs)


def test_a_refused_later_call_leaves_the_streams_as_they_were():
    rng = np.random.default_rng(5)
    bank, gallery = rng.normal(size=(60, 6)), rng.normal(size=(30, 6))
    live = DualInvertedSoftmax().partial_fit(bank[:20], gallery=gallery, gallery_bank=bank[:5])
    before = snapshot(live)
    with pytest.raises(ValueError, match="gallery_bank"):  # the querybank rows pass, the gallery bank's do not
        live.partial_fit(bank[20:], gallery_bank=rng.normal(size=(4, 7)))
    assert_unchanged(live, before)
    live.partial_fit(bank[20:], gallery_bank=bank[5:10])
    assert_same_state(live, DualInvertedSoftmax().fit(bank, gallery=gallery, gallery_bank=bank[:10]))


def test_the_new_bank_warning_points_at_the_caller():
    bank = np.random.default_rng(6).normal(size=(20, 4))
    fitted = InvertedSoftmax().fit(bank)
    with pytest.warns(UserWarning, match="was fitted by fit") as record:
        fitted.partial_fit(bank)
    assert [warning.filename for warning in record] == [__file__]


def test_the_base_docstring_documents_partial_fit():
    # The docs test lists methods by their functions; partial_fit is a descriptor.
    from test_docs import DOCSTRING_CHECKS, EXAMPLE_CHECK, docstring_errors

    name = "skqbnorm.normalizers.QueryBankNormalizer.partial_fit"
    assert not docstring_errors(name, DOCSTRING_CHECKS | {EXAMPLE_CHECK})
    assert ">>> " in QueryBankNormalizer.partial_fit.__doc__


@pytest.mark.parametrize("estimator", [CSLS(k=3), QueryBankZNorm(), DynamicInvertedSoftmax(k=2)],
                         ids=lambda est: repr(est))
def test_a_pickled_normaliser_goes_on_appending(estimator):
    rng = np.random.default_rng(7)
    bank, gallery = rng.normal(size=(2300, N_DIMS)), rng.normal(size=(N_GALLERY, N_DIMS))
    live = clone(estimator).partial_fit(bank[:2100], gallery=gallery)
    restored = pickle.loads(pickle.dumps(live)).partial_fit(bank[2100:])
    assert_same_state(restored, clone(estimator).fit(bank, gallery=gallery))
