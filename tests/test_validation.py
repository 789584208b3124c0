"""Bad input gets a clear ValueError naming the parameter and the shapes."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skqbnorm import (
    CSLS,
    Centering,
    DualInvertedSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    catalogue,
)
from skqbnorm._validation import check_embeddings, check_sims, float_dtype

from helpers import GC_BANK

ALL = [InvertedSoftmax, DynamicInvertedSoftmax, lambda: CSLS(k=2), GloballyCorrected, Centering]


@pytest.mark.parametrize("make", ALL)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_bank_and_queries(make, bad, bank):
    broken = bank.copy()
    broken[3, 4] = bad
    with pytest.raises(ValueError, match=r"querybank contains NaN or infinity.*querybank row 3 to gallery item 4"):
        make().fit(broken)
    fitted = make().fit(bank)
    with pytest.raises(ValueError, match=r"X contains NaN or infinity"):
        fitted.transform(broken)


def test_non_finite_embeddings(rng):
    bank_emb = rng.normal(size=(10, 4))
    bank_emb[0, 0] = np.nan
    with pytest.raises(ValueError, match="querybank contains NaN"):
        InvertedSoftmax().fit(bank_emb, gallery=rng.normal(size=(5, 4)))


@pytest.mark.parametrize("make", ALL)
def test_transform_columns_must_match_gallery(make, bank):
    fitted = make().fit(bank)
    with pytest.raises(ValueError, match=r"X has 5 features, but \w+ is expecting 6 features.*shape \(3, 5\)"):
        fitted.transform(np.zeros((3, 5)))


def test_embedding_dimensions_must_match(rng):
    with pytest.raises(ValueError, match=r"same dimension: querybank has shape \(10, 4\), gallery has shape \(5, 3\)"):
        InvertedSoftmax().fit(rng.normal(size=(10, 4)), gallery=rng.normal(size=(5, 3)))
    fitted = InvertedSoftmax().fit(rng.normal(size=(10, 4)), gallery=rng.normal(size=(5, 4)))
    with pytest.raises(ValueError, match=r"queries have shape \(2, 3\).*4 dimensions"):
        fitted.similarities(rng.normal(size=(2, 3)))


def test_similarities_needs_embedding_mode(bank):
    with pytest.raises(ValueError, match="fitted on precomputed similarities"):
        InvertedSoftmax().fit(bank).similarities(bank)


@pytest.mark.parametrize("make", ALL)
def test_empty_bank(make):
    with pytest.raises(ValueError, match=r"0 sample\(s\) \(shape=\(0, 6\)\)"):
        make().fit(np.zeros((0, 6)))


def test_k_larger_than_gallery_or_bank(bank):
    with pytest.raises(ValueError, match=r"k=7 is larger than the gallery.*shape \(20, 6\)"):
        DynamicInvertedSoftmax(k=7).fit(bank)
    with pytest.raises(ValueError, match=r"k=7 is larger than the gallery.*shape \(20, 6\)"):
        CSLS(k=7).fit(bank)
    with pytest.raises(ValueError, match=r"k=5 is larger than the querybank.*shape \(4, 6\)"):
        CSLS(k=5).fit(bank[:4])


@pytest.mark.parametrize("beta", [0, -1.0])
def test_beta_must_be_positive(beta, bank):
    for cls in (InvertedSoftmax, DynamicInvertedSoftmax):
        with pytest.raises(ValueError, match=r"The 'beta' parameter of \w+ must be a float in the range \(0.0, inf\)"):
            cls(beta=beta).fit(bank)


def test_other_parameters_are_validated(bank):
    with pytest.raises(ValueError, match="'k' parameter of DynamicInvertedSoftmax"):
        DynamicInvertedSoftmax(k=0).fit(bank)
    with pytest.raises(ValueError, match="'metric' parameter"):
        InvertedSoftmax(metric="euclidean").fit(bank)
    with pytest.raises(ValueError, match="'output' parameter"):
        InvertedSoftmax(output="exp").fit(bank)
    with pytest.raises(ValueError, match="'working_memory' parameter"):
        InvertedSoftmax(working_memory=0).fit(bank)


@pytest.mark.parametrize("make", ALL)
def test_wrong_dimensionality(make, bank):
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
        make().fit(bank[0])
    with pytest.raises(ValueError, match="Found array with dim 3"):
        make().fit(bank[None])
    fitted = make().fit(bank)
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
        fitted.transform(bank[0])
    with pytest.raises(ValueError, match="Found array with dim 3"):
        fitted.transform(bank[None])


def test_two_dimensional_y_is_refused_with_a_hint(rng, bank):
    with pytest.raises(ValueError, match=r"y is ignored.*shape \(5, 6\).*gallery=gallery_embeddings"):
        InvertedSoftmax().fit(bank, rng.normal(size=(5, 6)))


def test_non_numeric_data():
    with pytest.raises(ValueError, match="could not convert|dtype='numeric'|Unable to convert"):
        InvertedSoftmax().fit(np.array([["a", "b"], ["c", "d"]], dtype=object))


def test_unfitted_transform(bank):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        InvertedSoftmax().transform(bank)


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: InvertedSoftmax(beta=True), "beta"),
        (lambda: DynamicInvertedSoftmax(beta=False), "beta"),
        (lambda: DynamicInvertedSoftmax(k=True), "k"),
        (lambda: CSLS(k=True), "k"),
        (lambda: Centering(n_jobs=True), "n_jobs"),
        (lambda: GloballyCorrected(working_memory=True), "working_memory"),
    ],
)
def test_bools_are_not_numbers(make, name, bank):
    # Python counts True as an Integral and a Real; sklearn's Interval accepts it.
    message = rf"The '{name}' parameter of \w+ must be .* Got (True|False)"
    with pytest.raises(ValueError, match=message):
        make().fit(bank)


@pytest.mark.parametrize("name", ["beta", "working_memory"])
def test_infinite_parameters_are_refused(name, bank):
    with pytest.raises(ValueError, match=rf"The '{name}' parameter .* Got inf"):
        InvertedSoftmax(**{name: np.inf}).fit(bank)


@pytest.mark.parametrize("k", [True, 2.0, 0, 7])
def test_top_k_refuses_bool_float_and_out_of_range_k(k, bank):
    fitted = CSLS(k=2).fit(bank)
    with pytest.raises(ValueError, match=rf"k must be an integer in \[1, 6\].*got k={k!r}"):
        fitted.top_k(bank, k=k)
    assert fitted.top_k(bank, k=np.int64(3))[0].shape == (20, 3)


@pytest.mark.parametrize("make", [lambda: CSLS(k=2), GloballyCorrected, DynamicInvertedSoftmax])
def test_top_k_names_a_nan_in_a_later_gallery_chunk(make, rng, bank):
    # Row-wide methods read the whole row first: a NaN in the last chunk would
    # spoil the first chunk's scores.
    queries = rng.normal(size=(7, 6))
    queries[4, 5] = np.nan
    fitted = make().fit(bank)
    with pytest.raises(ValueError, match="X row 4 to gallery item 5 is nan"):
        fitted.top_k(chunks=[queries[:, :3], queries[:, 3:]], k=2)  # chunks wider than k
    with pytest.raises(ValueError, match="X row 4 to gallery item 5 is nan"):
        fitted.set_params(working_memory=7.3e-4).top_k(queries, k=2)  # chunks of 3 columns


def test_dot_products_that_overflow_name_the_metric(rng):
    bank, gallery = rng.normal(size=(10, 4)) * 1e200, rng.normal(size=(5, 4)) * 1e200
    with pytest.raises(ValueError, match=r"querybank row 0 to gallery item 0 overflows float64 "
                                         r"under metric='dot'.*use metric='cosine'"):
        Centering(metric="dot").fit(bank, gallery=gallery)
    fitted = Centering(metric="dot").fit(bank / 1e200, gallery=gallery)
    with pytest.raises(ValueError, match=r"queries row 0 to gallery item 0 overflows"):
        fitted.similarities(bank)
    gallery[:3] /= 1e200
    gallery[4] /= 1e200
    fitted = Centering(metric="dot", working_memory=1e-5).fit(bank / 1e200, gallery=gallery)
    queries = rng.normal(size=(3, 4))
    queries[2] *= 1e200  # overflows with gallery item 3 only, in the second gallery chunk
    with pytest.raises(ValueError, match=r"queries row 2 to gallery item 3 overflows"):
        fitted.top_k(queries=queries, k=2)


def test_fit_validates_parameters_through_fit_context(bank):
    # Like every sklearn estimator (sklearn.base._fit_context): validated once per fit,
    # and not at all under skip_parameter_validation.
    from sklearn import config_context

    with pytest.raises(ValueError, match="'metric' parameter"):
        InvertedSoftmax(metric="euclidean").fit(bank)
    with config_context(skip_parameter_validation=True):
        InvertedSoftmax(metric="euclidean").fit(bank)  # unused with precomputed similarities


# ----------------------------------------------------------------------- the core


def test_finite_check_accepts_values_whose_squares_overflow():
    # The fast test (a finite sum of squares) fails at 1e200; the fallback must accept.
    bank = np.full((3, 4), 1e200)
    centred = Centering().fit(bank).transform(np.full((2, 4), 1e200))
    assert_array_equal(centred, np.zeros((2, 4)))


def test_finite_check_names_the_first_bad_entry():
    bank = np.zeros((5, 4))
    bank[1, 2] = np.nan
    bank[3, 0] = np.inf
    with pytest.raises(ValueError, match=r"row 1\b.*item 2\b"):
        Centering().fit(bank)


def test_validation_errors_name_the_shape_and_dtype():
    with pytest.raises(ValueError, match=r"shape \(2, 2, 2\), dtype float64"):
        Centering().fit(np.zeros((2, 2, 2)))


def test_non_finite_embeddings_are_named_at_the_first():
    bank = np.ones((4, 3))
    bank[1, 2] = bank[3, 0] = np.nan
    with pytest.raises(ValueError, match=r"embedding 1, dimension 2 is nan"):
        Centering().fit(bank, gallery=np.ones((5, 3)))


def test_a_one_dimensional_y_is_ignored_and_a_two_dimensional_one_refused():
    # Centering by hand: each column minus its mean over the bank (1/3 for the identity).
    expected = np.eye(3) - 1 / 3
    assert_allclose(Centering().fit(np.eye(3), np.arange(3)).transform(np.eye(3)), expected)
    with pytest.raises(ValueError, match="y"):
        Centering().fit(np.eye(3), np.ones((3, 2)))


def test_non_finite_queries_are_named_by_row_and_gallery_item():
    with pytest.raises(ValueError, match=r"row 0 to gallery item 1 is nan"):
        CSLS(k=2).fit(GC_BANK).transform([[0.6, np.nan]])


def test_transform_checks_the_gallery_width_against_fit():
    model = CSLS(k=1).fit(GC_BANK)
    with pytest.raises(ValueError, match="expecting 2 features"):
        model.transform([[0.1, 0.2, 0.3]])
    assert model.n_features_in_ == 2


def test_overflowing_scores_are_named_at_the_first():
    # Centering: 1.7e308 - (-1.7e308) overflows float64 in rows 1 and 2 of item 0.
    model = Centering().fit(np.array([[-1.7e308, 0.0]]))
    queries = np.array([[1.0, 1.0], [1.7e308, 1.0], [1.7e308, 2.0]])
    with pytest.raises(ValueError, match=r"first at X row 1, gallery item 0 "):
        model.transform(queries)


@pytest.mark.parametrize("dtype, expected", [
    (np.float32, np.float32), (np.float64, np.float64), (np.int64, np.float64),
    (np.float16, np.float32),
])
def test_check_sims_keeps_float32_and_float64_and_widens_the_rest(dtype, expected):
    sims = np.array([[1, 2], [3, 4]], dtype=dtype)
    checked = check_sims(sims)
    assert checked.dtype == expected
    assert_allclose(checked, [[1.0, 2.0], [3.0, 4.0]])


# -- float16 in, float32 out ---------------------------------------------------------------
# float16 is read as float32, the narrowest dtype the normalisers compute in (scikit-learn's
# check_array would widen it to float64); the cast is exact, so float16 input scores
# exactly as the same values in float32.


def half(rng, *shape):
    return rng.normal(size=shape).astype(np.float16)


def test_float16_is_read_as_float32_by_the_checks(rng):
    values = half(rng, 4, 3)
    assert float_dtype(values, "X") == np.float32
    assert float_dtype(values.astype(np.int8), "X") == np.float64
    assert check_embeddings(values, "queries").dtype == np.float32
    assert check_embeddings(values.astype(np.float64), "queries").dtype == np.float64
    assert check_embeddings(values.tolist(), "queries").dtype == np.float64


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("cls", catalogue.normalizers(), ids=lambda c: c.__name__)
def test_float16_similarities_give_float32_scores(cls, rng):
    bank, queries = half(rng, 40, 12), half(rng, 5, 12)
    fitted = cls().fit(bank)
    exact = cls().fit(bank.astype(np.float32))
    scores = fitted.transform(queries)
    assert scores.dtype == np.float32
    assert_array_equal(scores, exact.transform(queries.astype(np.float32)))
    assert fitted.fit_transform(bank).dtype == np.float32
    indices, top = fitted.top_k(queries, k=3)
    assert top.dtype == np.float32
    assert_array_equal(indices, exact.top_k(queries.astype(np.float32), k=3)[0])
    chunks = [queries[:, :5], queries[:, 5:]]
    assert_array_equal(fitted.top_k(chunks=chunks, k=3)[1], top)


@pytest.mark.parametrize("cls", [CSLS, DualInvertedSoftmax], ids=lambda c: c.__name__)
def test_float16_embeddings_give_float32_scores(cls, rng):
    bank, gallery, queries = half(rng, 30, 6), half(rng, 12, 6), half(rng, 5, 6)
    extra = {"gallery_bank": half(rng, 20, 6)} if cls is DualInvertedSoftmax else {}
    fitted = cls().fit(bank, gallery=gallery, **extra)
    assert fitted.gallery_embeddings_.dtype == np.float32
    sims = fitted.similarities(queries)
    assert sims.dtype == np.float32 and fitted.transform(sims).dtype == np.float32
    assert fitted.top_k(queries=queries, k=3)[1].dtype == np.float32
    as32 = {key: value.astype(np.float32) for key, value in extra.items()}
    exact = cls().fit(bank.astype(np.float32), gallery=gallery.astype(np.float32), **as32)
    assert_array_equal(fitted.transform(sims), exact.transform(exact.similarities(queries.astype(np.float32))))
