"""Finite in, finite out; float32 resolution; results bitwise independent of the split;
integer memmaps cast block by block; the normalisers at the float limits."""

import tracemalloc

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import logsumexp
from sklearn.base import clone

import skqbnorm.normalizers._top_k
from skqbnorm import (
    CSLS,
    Centering,
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

import reference as ref

NORMALIZERS = [
    InvertedSoftmax(beta=20.0),
    DynamicInvertedSoftmax(beta=20.0, k=2),
    CSLS(k=3),
    GloballyCorrected(),
    Centering(),
]


FITTED_ARRAYS = (
    "bank_soft_max_", "activated_", "bank_neighborhood_", "sorted_bank_", "bank_mean_"
)


def fitted_arrays(estimator):
    return [getattr(estimator, name) for name in FITTED_ARRAYS if hasattr(estimator, name)]


def assert_all_finite(*arrays):
    for array in arrays:
        assert np.isfinite(array).all()


@pytest.mark.parametrize("scale", [2.0**-1000, 1e-300, 1e-30, 1e30, 1e300])
@pytest.mark.parametrize("estimator", NORMALIZERS, ids=repr)
def test_scores_scale_with_the_similarities(rng, estimator, scale):
    # Every normaliser is scale-equivariant: scores of c * s are c times those of s,
    # with beta / c for IS and DIS. No intermediate may overflow or underflow to zero.
    queries, bank = rng.normal(size=(30, 12)), rng.normal(size=(80, 12))
    bank[:, :3] += 1.0
    # GC's scores are ranks, so scale-invariant.
    fitted = clone(estimator).fit(bank * scale)
    unscaled = clone(estimator)
    if "beta" in estimator.get_params():
        unscaled.set_params(beta=estimator.beta * scale)
    unscaled.fit(bank)
    out = fitted.transform(queries * scale)
    indices, scores = fitted.top_k(queries * scale, k=5)
    assert_all_finite(out, scores, *fitted_arrays(fitted))
    unit = 1.0 if isinstance(estimator, GloballyCorrected) else scale
    assert_allclose(out / unit, unscaled.transform(queries), rtol=1e-9, atol=1e-12)
    assert_array_equal(indices, unscaled.top_k(queries, k=5)[0])


@pytest.mark.parametrize("make", [InvertedSoftmax, DynamicInvertedSoftmax])
def test_softmax_fitted_on_values_near_the_float64_maximum(rng, make):
    # beta * s overflows: the soft maximum of far-apart similarities is their maximum.
    bank = rng.uniform(0.5, 1.5, size=(40, 8)) * 1e308
    queries = rng.uniform(0.5, 1.5, size=(10, 8)) * 1e308
    fitted = make(beta=20.0, **({"k": 8} if make is DynamicInvertedSoftmax else {})).fit(bank)
    largest = bank.max(axis=0)
    assert_array_equal(fitted.bank_soft_max_, largest)
    expected = queries - (largest - (largest / 16).mean() * 16)
    assert_allclose(fitted.transform(queries), expected, rtol=1e-15)


def test_csls_on_float32_values_near_the_float32_maximum(rng):
    # 2 s overflows float32; the scores, 2 s - r_G - r_B, do not
    bank = rng.uniform(2e38, 3e38, size=(50, 10)).astype(np.float32)
    queries = rng.uniform(2e38, 3e38, size=(20, 10)).astype(np.float32)
    fitted = CSLS(k=4).fit(bank)
    out = fitted.transform(queries)
    assert out.dtype == np.float32
    expected = ref.csls(queries.astype(float), bank.astype(float), 4)
    assert_allclose(out, expected, rtol=1e-5, atol=1e32)
    assert_all_finite(fitted.top_k(queries, k=3)[1])


def test_inverted_softmax_with_a_beta_beyond_float32(rng):
    bank = rng.normal(size=(60, 9)).astype(np.float32)
    queries = rng.normal(size=(15, 9)).astype(np.float32)
    out = InvertedSoftmax(beta=1e40).fit(bank).transform(queries)
    # beta -> inf: the soft maximum is the maximum
    expected = queries - (bank.max(axis=0) - bank.max(axis=0).astype(float).mean())
    assert out.dtype == np.float32
    assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("scale", [1e200, 1e-170])
def test_cosine_embeddings_of_any_scale(rng, scale):
    bank, gallery, queries = (rng.normal(size=(n, 6)) for n in (40, 25, 9))
    for estimator in NORMALIZERS:
        expected = clone(estimator).fit(bank, gallery=gallery)
        fitted = clone(estimator).fit(bank * scale, gallery=gallery * scale)
        sims = fitted.similarities(queries * scale)
        assert_allclose(sims, expected.similarities(queries), rtol=1e-12, atol=1e-15)
        assert_allclose(fitted.transform(sims), expected.transform(sims), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("metric", ["cosine", "dot"])
@pytest.mark.parametrize("estimator", NORMALIZERS, ids=repr)
def test_embeddings_in_any_layout_give_the_same_bits(rng, estimator, metric):
    # Cosine rows are normalised C-ordered: a Fortran gallery's norms summed in another
    # order, and every fitted statistic and score moved by ulps (GC's ranks by more).
    bank, gallery, queries = rng.normal(size=(333, 24)), rng.normal(size=(40, 24)), rng.normal(size=(30, 24))
    expected = clone(estimator).set_params(metric=metric).fit(bank, gallery=gallery)
    fortran = clone(estimator).set_params(metric=metric).fit(np.asfortranarray(bank),
                                                                gallery=np.asfortranarray(gallery))
    for name in FITTED_ARRAYS + ("gallery_embeddings_",):
        if hasattr(expected, name):
            assert_array_equal(getattr(fortran, name), getattr(expected, name), err_msg=name)
    sims = expected.similarities(queries)
    assert_array_equal(fortran.similarities(np.asfortranarray(queries)), sims)
    assert_array_equal(fortran.transform(sims), expected.transform(sims))


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_the_fitted_gallery_is_the_normalizers_own(rng, metric):
    bank, gallery, queries = rng.normal(size=(50, 6)), rng.normal(size=(20, 6)), rng.normal(size=(5, 6))
    normalizer = InvertedSoftmax(metric=metric).fit(bank, gallery=gallery)
    sims = normalizer.similarities(queries)
    gallery[:] = 0.0  # the caller reuses its array
    assert_array_equal(normalizer.similarities(queries), sims)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("scale", [1e-32, 1e-300])
@pytest.mark.parametrize("make", [lambda: InvertedSoftmax(beta=20.0), lambda: DualInvertedSoftmax(),
                                  lambda: SinkhornNormalization(n_iter=3)],
                         ids=["IS", "DBNorm", "SN"])
def test_similarities_far_below_the_soft_maxima_keep_their_order(rng, make, scale):
    # Every soft maximum rounds to log(M) / beta: no excess is left, and the scores are
    # the similarities themselves (a mean one ulp off outweighed them, tying whole rows).
    bank, queries = rng.normal(size=(50, 30)) * scale, rng.normal(size=(5, 30)) * scale
    out = make().fit(bank).transform(queries)
    assert_array_equal(np.argsort(-out, axis=1), np.argsort(-queries, axis=1))


def test_float32_embeddings_near_the_float32_maximum(rng):
    # sklearn's finiteness check sums the embeddings: +inf + -inf = NaN, with a warning.
    bank, gallery, queries = (rng.normal(size=(n, 5)) for n in (30, 12, 6))
    for estimator in NORMALIZERS:
        huge = [(a / np.abs(a).max() * 3e38).astype(np.float32) for a in (bank, gallery, queries)]
        fitted = clone(estimator).fit(huge[0], gallery=huge[1])
        expected = clone(estimator).fit(bank.astype(np.float32), gallery=gallery.astype(np.float32))
        sims = fitted.similarities(huge[2])
        assert_allclose(sims, expected.similarities(queries.astype(np.float32)), atol=1e-6)
        assert_all_finite(fitted.transform(sims), *fitted_arrays(fitted))


def test_non_finite_embeddings_are_named(rng):
    fitted = Centering().fit(rng.normal(size=(10, 4)), gallery=rng.normal(size=(5, 4)))
    for name, call in [
        ("gallery", lambda bad: Centering().fit(rng.normal(size=(10, 4)), gallery=bad)),
        ("queries", fitted.similarities),
        ("querybank", lambda bad: Centering().fit(bad, gallery=rng.normal(size=(5, 4)))),
    ]:
        bad = rng.normal(size=(5, 4)) * 1e300
        bad[3, 2] = np.inf
        with pytest.raises(ValueError, match=rf"{name} embedding 3, dimension 2 is inf"):
            call(bad)


def test_gc_on_similarities_spanning_the_float64_range(rng):
    queries, bank = (rng.uniform(-1.5, 1.5, size=(n, 7)) * 1e308 for n in (20, 30))
    out = GloballyCorrected().fit(bank).transform(queries)
    assert_all_finite(out)
    assert_array_equal(ref.dense_rank_rows(out), ref.gc_order_keys(queries, bank))


def test_centering_mean_near_the_float64_maximum(rng):
    bank = rng.uniform(1.0, 1.7, size=(300, 5)) * 1e308  # the column sums overflow
    fitted = Centering().fit(bank)
    assert_allclose(fitted.bank_mean_, (bank / 1024).mean(axis=0) * 1024, rtol=1e-14)


def test_scores_beyond_the_float64_range_are_refused(rng):
    bank = -rng.uniform(1.0, 1.5, size=(30, 4)) * 1e308
    fitted = Centering().fit(bank)
    message = r"overflow float64, first at X row 0, gallery item 0.*X spans"
    with pytest.raises(ValueError, match=message):
        fitted.transform(rng.uniform(1.0, 1.5, size=(3, 4)) * 1e308)  # s - mean ~ 2.5e308


def test_a_beta_too_small_for_the_similarities_is_refused(rng):
    with pytest.raises(ValueError, match=r"beta=1e-320 is too small .* overflow float64"):
        InvertedSoftmax(beta=1e-320).fit(rng.normal(size=(20, 3)))  # log(20) / beta = inf


def test_probabilities_beyond_float32_are_clipped_with_a_warning(rng):
    bank = rng.normal(size=(40, 5)).astype(np.float32)
    normalizer = InvertedSoftmax(beta=100.0, output="probability").fit(bank)
    with pytest.warns(RuntimeWarning, match="output='probability' overflows float32.*clipped"):
        out = normalizer.transform(bank.max(axis=0, keepdims=True) + np.float32(2))  # exp(200)
    assert (out == np.finfo(np.float32).max).all()
    float64 = normalizer.transform(bank[:5].astype(float))
    expected = ref.inverted_softmax_probability(bank[:5].astype(float), bank.astype(float), 100.0)
    assert_allclose(float64, expected, rtol=1e-12)


def spurious_tie_share(scores, exact):
    """Share of rows with two scores tied in ``scores`` but distinct in ``exact``."""
    order = np.argsort(-scores, axis=1, kind="stable")
    tied = np.diff(np.take_along_axis(scores, order, axis=1), axis=1) == 0
    distinct = np.diff(np.take_along_axis(exact, order, axis=1), axis=1) != 0
    return (tied & distinct).any(axis=1).mean()


@pytest.mark.slow
@pytest.mark.parametrize("make", [InvertedSoftmax, DynamicInvertedSoftmax])
def test_float32_scores_keep_the_similarities_resolution(rng, make):
    # Cosine similarities of 2,000 items, as in the bundled data. Scores near beta * c_j
    # (or c_j) round many nearby similarities to one float32 value.
    def unit(a):
        return a / np.linalg.norm(a, axis=1, keepdims=True)

    offset = unit(rng.normal(size=(1, 32)))
    gallery, bank, queries = (unit(rng.normal(size=(n, 32)) + offset) for n in (2000, 1000, 300))
    bank_sims, sims = ((a @ gallery.T).astype(np.float32) for a in (bank, queries))
    scores = make(beta=20.0).fit(bank_sims).transform(sims)
    exact = make(beta=20.0).fit(bank_sims.astype(float)).transform(sims.astype(float))
    best_float32 = spurious_tie_share(exact.astype(np.float32), exact)
    former = np.float32(20) * sims - logsumexp(20.0 * bank_sims, axis=0).astype(np.float32)
    assert spurious_tie_share(former, exact) > 0.12  # the log-domain form in beta units
    assert spurious_tie_share(scores, exact) <= best_float32 + 0.03
    assert best_float32 < 0.08


@pytest.mark.slow
@pytest.mark.parametrize("estimator", NORMALIZERS, ids=repr)
def test_tied_similarities_rank_alike_for_every_split(rng, leaves, estimator):
    # Similarities rounded to 3 decimals tie exactly; any split-dependent rounding
    # of the fitted state would reorder them.
    bank = np.round(rng.normal(size=(300, 50)), 3)
    bank[:, :4] += 1.0
    queries = np.round(rng.normal(size=(300, 50)), 3)
    expected = clone(estimator).fit(bank)
    scores = expected.transform(queries)
    top = expected.top_k(queries, k=10)
    for working_memory in (1e-4, None):
        for n_jobs in (1, 2):
            fitted = clone(estimator).set_params(working_memory=working_memory, n_jobs=n_jobs)
            fitted.fit(bank)
            for got, want in zip(fitted_arrays(fitted), fitted_arrays(expected)):
                assert_array_equal(got, want)
            assert_array_equal(fitted.transform(queries), scores)
            for got, want in zip(fitted.top_k(queries, k=10), top):
                assert_array_equal(got, want)


@pytest.fixture
def int16_memmap(rng, tmp_path):
    values = rng.integers(-3000, 3000, size=(6000, 1500), dtype=np.int16)
    path = tmp_path / "sims.npy"
    np.save(path, values)
    return np.load(path, mmap_mode="r"), values.astype(np.float64)


def peak_allocation(function):
    tracemalloc.start()
    try:
        result = function()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
@pytest.mark.parametrize(
    "estimator", [Centering(), DynamicInvertedSoftmax(beta=0.01, k=2)], ids=repr
)
def test_an_integer_memmap_is_cast_block_by_block(int16_memmap, estimator):
    memmap, as_float = int16_memmap
    float_bytes = as_float.nbytes  # 72 MB: what casting the whole array would take
    estimator = clone(estimator).set_params(working_memory=2)
    fitted, peak = peak_allocation(lambda: estimator.fit(memmap))
    assert peak < float_bytes / 4  # 13 MB for DIS: blocks, and their exponentials
    expected = clone(estimator).fit(as_float)
    for got, want in zip(fitted_arrays(fitted), fitted_arrays(expected)):
        assert_array_equal(got, want)
    queries, queries_float = memmap[:1000], as_float[:1000]  # still a memmap
    (indices, scores), peak = peak_allocation(lambda: fitted.top_k(queries, k=5))
    assert peak < queries_float.nbytes / 3 and scores.dtype == np.float64
    assert_array_equal(indices, expected.top_k(queries_float, k=5)[0])
    out, peak = peak_allocation(lambda: fitted.transform(queries))
    assert peak < queries_float.nbytes * 1.25  # the float64 output, not a float64 copy on top
    assert_array_equal(out, expected.transform(queries_float))


def test_gc_with_a_constant_query_row_and_a_constant_bank_column(rng):
    bank = rng.normal(size=(20, 5))
    bank[:, 2] = 0.25  # a constant column: every bank query ties there
    queries = rng.normal(size=(6, 5))
    queries[0] = 0.25  # a constant row: nothing to break ties with
    queries[1, 2] = 0.25
    fitted = GloballyCorrected().fit(bank)
    out = fitted.transform(queries)
    assert_array_equal(out[0], -ref.gc_rank(queries, bank)[0])  # no tie-break term
    assert ref.gc_rank(queries, bank)[1, 2] == 0  # equal to the whole column: none above
    assert_array_equal(-np.floor(out), ref.gc_rank(queries, bank))
    assert_array_equal(ref.dense_rank_rows(out), ref.gc_order_keys(queries, bank))
    assert fitted.transform(np.full((1, 5), 0.2))[0, 2] == -20.0  # all 20 above, no tie-break


READ_ONLY_CASES = [
    InvertedSoftmax(beta=5.0),
    DynamicInvertedSoftmax(beta=5.0, k=2),
    CSLS(k=3),
    GloballyCorrected(),
    Centering(),
    NearestNeighborNormalization(k=2),
    QueryBankZNorm(),
    MutualProximity(),
    MutualProximity(method="empiric"),
    SinkhornNormalization(),
    DualSoftmax(),
]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # Sinkhorn's
@pytest.mark.parametrize("estimator", READ_ONLY_CASES, ids=repr)
@pytest.mark.parametrize("working_memory", [1e-4, None])
@pytest.mark.parametrize("n_queries", [1, 40])
def test_transform_and_top_k_never_write_into_x(rng, estimator, working_memory, n_queries):
    # Blocks of one row or one column are views that a careless "contiguous copy"
    # would hand back unchanged; a read-only X makes any write into it an error.
    bank = rng.normal(size=(60, 30))
    queries = rng.normal(size=(n_queries, 30))
    frozen = queries.copy()
    frozen.flags.writeable = False
    fitted = clone(estimator).set_params(working_memory=working_memory).fit(bank)
    assert_array_equal(fitted.transform(frozen), fitted.transform(queries.copy()))
    for got, want in zip(fitted.top_k(frozen, k=5), fitted.top_k(queries.copy(), k=5)):
        assert_array_equal(got, want)
    assert_array_equal(frozen, queries)


def test_a_search_by_bias_names_an_overflowing_product(rng):
    # The bias-ranked search subtracts in place from an unchecked product; an
    # overflowing product must still be named, as the scored search names it.
    bank = rng.normal(size=(20, 8)).astype(np.float32)
    gallery = rng.normal(size=(30, 8)).astype(np.float32)
    fitted = CSLS(k=3, metric="dot").fit(bank, gallery=gallery)
    queries = np.full((4, 8), 1e38, dtype=np.float32) * np.sign(gallery[:1])
    for return_scores in (False, True):
        with pytest.raises(ValueError, match=r"overflows float32 under metric='dot'"):
            fitted.top_k(queries=queries, k=5, return_scores=return_scores)


def test_products_vouched_for_by_the_norms_still_test_a_large_bias(rng):
    # Products below a quarter of float32's largest (the norms vouch for them), but a
    # bias of -3e38: s - bias overflows, and the search must see it, not rank infinities.
    big = np.float32(np.sqrt(8e37))
    gallery = (np.eye(4, dtype=np.float32)[[0] * 5] + rng.normal(scale=1e-3, size=(5, 4))).astype(np.float32)
    gallery *= big
    fitted = NearestNeighborNormalization(k=2, alpha=3.75, metric="dot").fit(-gallery[:3], gallery=gallery)
    assert fitted.gallery_bias().min() < -2.9e38
    with pytest.raises(ValueError, match=r"scores of the finite similarities X overflow float32"):
        fitted.top_k(queries=gallery[[0, 1] * 5], k=3, return_scores=False)  # whole rows


@pytest.mark.parametrize("part_bytes", [1, None], ids=["a row a part", "one part"])
def test_a_search_by_bias_that_overflows_falls_back_to_the_scores(monkeypatch, part_bytes):
    # Finite products, but s - bias overflows float32: the search falls back to the
    # scores, from the product as it was (not the block overwritten in place), and
    # names the overflow exactly as the scored search does.
    bank = np.full((6, 2), -3e38, dtype=np.float32)  # bias r_B / 2 = -1.5e38
    gallery = np.array([[1.0, 0.0]] * 4, dtype=np.float32)
    fitted = CSLS(k=3, metric="dot").fit(bank, gallery=gallery)
    assert fitted._ranks_by_bias()
    # 10 rows: whole-row blocks; the overflow from the sixth on, after parts done in place
    queries = np.array([[1.0, 0.0]] * 5 + [[2e38, 0.0]] * 5, dtype=np.float32)
    if part_bytes is not None:
        monkeypatch.setattr(skqbnorm.normalizers._top_k, "SEARCH_PART_BYTES", part_bytes)
    messages = []
    for return_scores in (False, True):
        with pytest.raises(ValueError, match=r"scores of the finite similarities X overflow") as error:
            fitted.top_k(queries=queries, k=2, return_scores=return_scores)
        messages.append(str(error.value))
    assert messages[0] == messages[1]
