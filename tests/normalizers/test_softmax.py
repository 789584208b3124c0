"""Inverted Softmax and Dynamic Inverted Softmax: the probability and log forms, the
activation gate, and their boundaries pinned by hand."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skqbnorm import DynamicInvertedSoftmax, InvertedSoftmax

import reference as ref
from helpers import GC_BANK, sims_pair, tolerance


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


def test_embedding_mode_float32(rng):
    bank_emb = rng.normal(size=(50, 8)).astype(np.float32)
    gallery_emb = rng.normal(size=(20, 8)).astype(np.float32)
    dis = DynamicInvertedSoftmax().fit(bank_emb, gallery=gallery_emb)
    sims = dis.similarities(bank_emb[:5])
    assert sims.dtype == np.float32 and dis.transform(sims).dtype == np.float32


def test_probability_overflow_is_not_mistaken_for_bad_input(rng):
    queries, bank = sims_pair(rng)
    normalizer = InvertedSoftmax(beta=1.0, output="probability").fit(bank)
    with pytest.warns(RuntimeWarning, match="overflow.*clipped"):
        out = normalizer.transform(queries + 1000.0)  # finite, but exp overflows
    assert (out == np.finfo(np.float64).max).all()


def test_dynamic_inverted_softmax_accepts_k_equal_to_the_gallery_size():
    scores = DynamicInvertedSoftmax(k=2, beta=1.0).fit(GC_BANK).transform([[0.6, 0.4]])
    assert np.isfinite(scores).all()
    with pytest.raises(ValueError, match="larger than the gallery"):
        DynamicInvertedSoftmax(k=3, beta=1.0).fit(GC_BANK)


def test_inverted_softmax_refuses_soft_maxima_beyond_float64():
    # max + log(2) / beta: 1.7e308 + 6.9e307 overflows in the first column only.
    bank = np.array([[1.7e308, 0.1], [1.7e308, 0.2]])
    with pytest.raises(ValueError, match="beta"):
        InvertedSoftmax(beta=1e-308).fit(bank)
