"""Every normaliser against the dense reference implementation of SPEC."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

from skqbnorm import CSLS, Centering, DynamicInvertedSoftmax, GloballyCorrected, InvertedSoftmax
from skqbnorm._ranks import count_greater

import reference as ref


def sims_pair(rng, n_queries=40, n_bank=60, n_gallery=25, scale=1.0, dtype=np.float64):
    bank = rng.normal(size=(n_bank, n_gallery)) * scale
    queries = rng.normal(size=(n_queries, n_gallery)) * scale
    return queries.astype(dtype), bank.astype(dtype)


def tolerance(dtype, magnitude=1.0):
    if dtype == np.float32:
        return {"rtol": 1e-4, "atol": 1e-4 * magnitude}
    return {"rtol": 1e-10, "atol": 1e-10 * magnitude}


CASES = [
    (InvertedSoftmax(beta=7.0), lambda q, b: ref.inverted_softmax(q, b, 7.0)),
    (DynamicInvertedSoftmax(beta=7.0, k=1), lambda q, b: ref.dynamic_inverted_softmax(q, b, 7.0, 1)),
    (DynamicInvertedSoftmax(beta=3.0, k=3), lambda q, b: ref.dynamic_inverted_softmax(q, b, 3.0, 3)),
    (CSLS(k=5), lambda q, b: ref.csls(q, b, 5)),
    (Centering(), ref.centering),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("estimator, reference", CASES, ids=lambda c: repr(c)[:40])
def test_matches_reference(rng, estimator, reference, dtype):
    queries, bank = sims_pair(rng, dtype=dtype)
    out = clone(estimator).fit(bank).transform(queries)
    assert out.dtype == dtype
    expected = reference(queries.astype(np.float64), bank.astype(np.float64))
    assert_allclose(out, expected, **tolerance(dtype, np.abs(expected).max()))


@pytest.mark.parametrize("estimator, reference", CASES, ids=lambda c: repr(c)[:40])
def test_memmap_and_chunking_do_not_change_results(rng, tmp_path, estimator, reference):
    queries, bank = sims_pair(rng, n_bank=333)
    path = tmp_path / "bank.npy"
    np.save(path, bank)
    bank_mm = np.load(path, mmap_mode="r")
    whole = clone(estimator).fit(bank).transform(queries)
    # A budget of ~one row per block exercises every merge across blocks.
    tiny = clone(estimator).set_params(working_memory=1e-4).fit(bank_mm).transform(queries)
    assert_allclose(tiny, whole, rtol=1e-12, atol=1e-12)


def test_inverted_softmax_probability_form(rng):
    queries, bank = sims_pair(rng)
    out = InvertedSoftmax(beta=3.0, output="probability").fit(bank).transform(queries)
    assert_allclose(out, ref.inverted_softmax_probability(queries, bank, 3.0), rtol=1e-10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_log_domain_survives_where_exp_overflows(rng, dtype):
    # CLIP-style logits (x100): beta * s reaches ~2,000, far past exp's range.
    queries, bank = sims_pair(rng, scale=100.0, dtype=dtype)
    for estimator in (InvertedSoftmax(beta=20.0), DynamicInvertedSoftmax(beta=20.0)):
        out = estimator.fit(bank).transform(queries)
        assert np.isfinite(out).all()
        expected = ref.inverted_softmax(queries.astype(np.float64), bank.astype(np.float64), 20.0)
        if isinstance(estimator, DynamicInvertedSoftmax):
            expected = ref.dynamic_inverted_softmax(queries.astype(np.float64), bank.astype(np.float64), 20.0, 1)
        assert_allclose(out, expected, **tolerance(dtype, np.abs(expected).max()))
        assert_array_equal(out.argmax(axis=1), expected.argmax(axis=1))
    with np.errstate(over="ignore", invalid="ignore"):
        literal = ref.inverted_softmax_probability(queries.astype(np.float64), bank.astype(np.float64), 20.0)
    assert not np.isfinite(literal).all()  # the literal form really does overflow here


def test_dis_leaves_rows_with_unactivated_top1_untouched(rng):
    # Gallery items 0-4 dominate every bank row, so only they are activated.
    bank = rng.uniform(0, 0.1, size=(50, 12))
    bank[:, :5] += 1.0
    queries = rng.uniform(0, 1, size=(30, 12))
    dis = DynamicInvertedSoftmax(beta=5.0, k=2).fit(bank)
    assert_array_equal(np.flatnonzero(dis.activated_), sorted(ref.activation_set(bank, 2)))
    out = dis.transform(queries)
    untouched = ~dis.activated_[queries.argmax(axis=1)]
    assert untouched.any() and (~untouched).any()
    assert_array_equal(out[untouched], queries[untouched])
    is_rows = InvertedSoftmax(beta=5.0).fit(bank).transform(queries)
    assert_allclose(out[~untouched], is_rows[~untouched])


def test_dis_equals_is_when_every_item_is_activated(rng):
    n_gallery = 15
    bank = rng.normal(size=(40, n_gallery))
    bank[np.arange(n_gallery), np.arange(n_gallery)] += 10  # each item is some row's top-1
    queries = rng.normal(size=(25, n_gallery))
    dis = DynamicInvertedSoftmax(beta=4.0).fit(bank)
    assert dis.activated_.all()
    assert_allclose(dis.transform(queries), InvertedSoftmax(beta=4.0).fit(bank).transform(queries))


def test_dis_activation_set_ties_take_lowest_index():
    bank = np.array([[1.0, 1.0, 1.0, 0.0], [0.0, 2.0, 2.0, 2.0]])
    dis = DynamicInvertedSoftmax(k=2).fit(bank)
    assert_array_equal(dis.activated_, [True, True, True, False])
    assert_array_equal(DynamicInvertedSoftmax(k=1).fit(bank).activated_, [True, True, False, False])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gc_ranking_matches_reference(rng, dtype):
    queries, bank = sims_pair(rng, n_bank=37, dtype=dtype)
    out = GloballyCorrected().fit(bank).transform(queries)
    assert out.dtype == dtype
    assert_array_equal(ref.dense_rank_rows(out), ref.gc_order_keys(queries, bank))


def test_gc_with_many_ties(rng):
    # Coarse similarities: ranks tie within rows, similarities tie with the bank.
    queries = rng.integers(0, 4, size=(30, 10)).astype(float)
    bank = rng.integers(0, 4, size=(64, 10)).astype(float)
    gc = GloballyCorrected().fit(bank)
    assert_array_equal(-np.floor(gc.transform(queries)), ref.gc_rank(queries, bank))
    assert_array_equal(ref.dense_rank_rows(gc.transform(queries)), ref.gc_order_keys(queries, bank))


@pytest.mark.parametrize("n_bank", [1, 2, 3, 8, 100])
def test_gc_bisection_for_every_bank_size(rng, n_bank):
    queries, bank = sims_pair(rng, n_bank=n_bank)
    queries[:, :3] = bank[0, :3]  # exact ties with a bank entry
    gc = GloballyCorrected().fit(bank)
    assert_array_equal(-np.floor(gc.transform(queries)), ref.gc_rank(queries, bank))


@pytest.mark.parametrize("tile_size", [1, 7, 40, 1 << 16])
@pytest.mark.parametrize("order", ["C", "F"])
def test_count_greater_any_tiling_and_layout(rng, tile_size, order):
    # GC's bisection, against a brute-force count; ties with the bank and +-inf included.
    bank = np.sort(rng.integers(0, 6, size=(33, 9)).astype(np.float32), axis=0)
    values = rng.integers(-1, 7, size=(20, 9)).astype(np.float32)
    values[0, 0], values[1, 1] = np.inf, -np.inf
    expected = (bank[None, :, :] > values[:, None, :]).sum(axis=1)
    assert_array_equal(count_greater(np.asarray(bank, order=order), values, tile_size), expected)


def test_gc_keeps_sorted_bank_column_major(rng):
    # Column-major lets every transform search the bank without copying it.
    _, bank = sims_pair(rng)
    sorted_bank = GloballyCorrected().fit(bank).sorted_bank_
    assert sorted_bank.flags.f_contiguous
    assert_array_equal(sorted_bank, np.sort(bank, axis=0))


def test_embedding_mode_equals_precomputed(rng):
    bank_emb = rng.normal(size=(80, 16))
    gallery_emb = rng.normal(size=(30, 16))
    query_emb = rng.normal(size=(10, 16))

    def unit(a):
        return a / np.linalg.norm(a, axis=1, keepdims=True)

    for metric, prepare in (("cosine", unit), ("dot", lambda a: a)):
        bank_sims = prepare(bank_emb) @ prepare(gallery_emb).T
        query_sims = prepare(query_emb) @ prepare(gallery_emb).T
        for estimator in (InvertedSoftmax(), DynamicInvertedSoftmax(k=2), CSLS(k=3), Centering(), GloballyCorrected()):
            embedded = clone(estimator).set_params(metric=metric).fit(bank_emb, gallery=gallery_emb)
            assert embedded.n_features_in_ == 30
            assert_allclose(embedded.similarities(query_emb), query_sims, rtol=1e-12, atol=1e-12)
            precomputed = clone(estimator).fit(bank_sims)
            assert_allclose(
                embedded.transform(embedded.similarities(query_emb)),
                precomputed.transform(query_sims),
                rtol=1e-10, atol=1e-10,
            )
            assert_allclose(
                embedded.fit_transform(bank_emb, gallery=gallery_emb),
                precomputed.transform(bank_sims), rtol=1e-10, atol=1e-10,
            )


def test_embedding_mode_float32(rng):
    bank_emb = rng.normal(size=(50, 8)).astype(np.float32)
    gallery_emb = rng.normal(size=(20, 8)).astype(np.float32)
    dis = DynamicInvertedSoftmax().fit(bank_emb, gallery=gallery_emb)
    sims = dis.similarities(bank_emb[:5])
    assert sims.dtype == np.float32 and dis.transform(sims).dtype == np.float32


@pytest.mark.parametrize("estimator", [e for e, _ in CASES] + [GloballyCorrected()], ids=repr)
def test_inputs_are_never_modified(rng, estimator):
    queries, bank = sims_pair(rng)
    queries_copy, bank_copy = queries.copy(), bank.copy()
    fitted = clone(estimator).fit(bank)
    fitted.transform(queries)
    fitted.fit_transform(bank)
    assert_array_equal(queries, queries_copy)
    assert_array_equal(bank, bank_copy)


@pytest.mark.parametrize("estimator", [e for e, _ in CASES] + [GloballyCorrected()], ids=repr)
def test_pickle_and_clone_round_trip(rng, estimator):
    queries, bank = sims_pair(rng)
    fitted = clone(estimator).fit(bank)
    restored = pickle.loads(pickle.dumps(fitted))
    assert_array_equal(restored.transform(queries), fitted.transform(queries))
    assert clone(fitted).get_params() == fitted.get_params()
    assert "<pre>" in fitted._repr_html_() or "sk-" in fitted._repr_html_()


def test_transform_is_row_independent(rng):
    # A query's scores never depend on which other queries share its batch.
    queries, bank = sims_pair(rng, n_queries=50)
    for estimator in (DynamicInvertedSoftmax(k=2), CSLS(k=4), GloballyCorrected()):
        fitted = estimator.fit(bank)
        full = fitted.transform(queries)
        assert_array_equal(fitted.transform(queries[17:18]), full[17:18])
        assert_array_equal(fitted.set_params(working_memory=1e-4).transform(queries), full)


def test_probability_overflow_is_not_mistaken_for_bad_input(rng):
    queries, bank = sims_pair(rng)
    normaliser = InvertedSoftmax(beta=1.0, output="probability").fit(bank)
    with pytest.warns(RuntimeWarning, match="overflow.*clipped"):
        out = normaliser.transform(queries + 1000.0)  # finite, but exp overflows
    assert (out == np.finfo(np.float64).max).all()
