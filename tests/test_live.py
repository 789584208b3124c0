"""LiveQueryBank against a normaliser fitted anew on the bank rows so far, then asked."""

import numpy as np
import pytest
from sklearn.base import clone

from skqbnorm import (
    CSLS,
    Centering,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    LiveQueryBank,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankGate,
    QueryBankZNorm,
    SinkhornNormalization,
)

MERGEABLE = [
    InvertedSoftmax(),
    DynamicInvertedSoftmax(k=3),
    CSLS(k=4),
    NearestNeighborNormalization(k=5),
    Centering(),
    QueryBankZNorm(),
    MutualProximity(method="gaussian"),
    DualSoftmax(),
]
ids = [type(normalizer).__name__ for normalizer in MERGEABLE]

N_GALLERY, N_DIMS = 40, 12
BATCHES = [1, 2, 7, 1, 13, 30, 3, 18, 5]  # uneven, through the raw start and past the window


def unit(rows):
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def raw_reference(queries, gallery, k):
    """Raw cosine top k, ties to the lowest index, computed independently."""
    sims = unit(queries) @ unit(gallery).T
    order = np.lexsort((np.broadcast_to(np.arange(sims.shape[1]), sims.shape), -sims))[:, :k]
    return order, np.take_along_axis(sims, order, axis=1)


def minimum_rows(normalizer):
    return getattr(normalizer, "k", 1)


@pytest.fixture
def stream(rng):
    gallery = rng.normal(size=(N_GALLERY, N_DIMS))
    return gallery, [rng.normal(size=(n, N_DIMS)) for n in BATCHES]


@pytest.mark.parametrize("normalizer", MERGEABLE, ids=ids)
def test_each_batch_is_answered_by_a_fit_on_the_rows_before_it(stream, normalizer):
    gallery, batches = stream
    live = LiveQueryBank(normalizer).fit(gallery=gallery)
    bank = np.empty((0, N_DIMS))
    for batch in batches:
        assert (live.normalizer_ is None) == (len(bank) < minimum_rows(normalizer))
        indices, scores = live.top_k(queries=batch, k=5)
        if len(bank) >= minimum_rows(normalizer):
            expected = clone(normalizer).fit(bank, gallery=gallery).top_k(queries=batch, k=5)
            np.testing.assert_array_equal(indices, expected[0])
            np.testing.assert_array_equal(scores, expected[1])
        else:
            expected = raw_reference(batch, gallery, 5)
            np.testing.assert_array_equal(indices, expected[0])
            np.testing.assert_allclose(scores, expected[1], rtol=1e-12)
        bank = np.concatenate([bank, batch])
        assert live.n_bank_ == len(bank)
    assert live.n_served_ == sum(BATCHES)
    fitted = clone(normalizer).fit(bank, gallery=gallery)
    for name, value in vars(fitted).items():
        if name.endswith("_") and isinstance(value, np.ndarray):
            np.testing.assert_array_equal(getattr(live.normalizer_, name), value)


@pytest.mark.parametrize("normalizer", [InvertedSoftmax(), CSLS(k=4), DynamicInvertedSoftmax(k=2)],
                         ids=["IS", "CSLS", "DIS"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("start_rows", [0, 9])
def test_similarity_form_from_a_training_bank_or_none(rng, normalizer, dtype, start_rows):
    start = rng.normal(size=(start_rows, N_GALLERY)).astype(dtype)
    batches = [rng.normal(size=(n, N_GALLERY)).astype(dtype) for n in BATCHES]
    live = LiveQueryBank(normalizer).fit(start if start_rows else None)
    bank = start
    for batch in batches:
        scores = live.transform(batch)
        if len(bank) < minimum_rows(normalizer):
            np.testing.assert_array_equal(scores, batch)  # answered raw
            assert scores is not batch
        else:
            np.testing.assert_array_equal(scores, clone(normalizer).fit(bank).transform(batch))
        assert scores.dtype == dtype
        bank = np.concatenate([bank, batch])
    assert live.n_bank_ == len(bank)


@pytest.mark.parametrize("normalizer", [InvertedSoftmax(), CSLS(k=4), DynamicInvertedSoftmax(k=3),
                                        QueryBankZNorm()], ids=["IS", "CSLS", "DIS", "z-norm"])
@pytest.mark.parametrize("start_rows", [0, 50])
def test_the_window_is_a_refit_on_the_last_rows(stream, rng, normalizer, start_rows):
    gallery, batches = stream
    window = 20
    start = rng.normal(size=(start_rows, N_DIMS))
    live = LiveQueryBank(normalizer, max_bank_rows=window)
    live.fit(start if start_rows else None, gallery=gallery)
    bank = start
    for batch in batches:
        last = bank[-window:]
        assert live.n_bank_ == len(last)
        indices, scores = live.top_k(queries=batch, k=3)
        if len(last) >= minimum_rows(normalizer):
            expected = clone(normalizer).fit(last, gallery=gallery).top_k(queries=batch, k=3)
            np.testing.assert_array_equal(indices, expected[0])
            np.testing.assert_array_equal(scores, expected[1])
        else:
            np.testing.assert_array_equal(indices, raw_reference(batch, gallery, 3)[0])
        bank = np.concatenate([bank, batch])


def test_a_dual_bank_normaliser_keeps_its_gallery_bank(stream, rng):
    gallery, batches = stream
    gallery_bank = rng.normal(size=(15, N_DIMS))
    live = LiveQueryBank(DualInvertedSoftmax()).fit(gallery=gallery, gallery_bank=gallery_bank)
    bank = np.empty((0, N_DIMS))
    for batch in batches:
        indices = live.top_k(queries=batch, k=2, return_scores=False)
        if len(bank):
            reference = DualInvertedSoftmax().fit(bank, gallery=gallery, gallery_bank=gallery_bank)
            np.testing.assert_array_equal(indices, reference.top_k(queries=batch, k=2,
                                                                   return_scores=False))
        bank = np.concatenate([bank, batch])


def test_raw_until_min_bank_rows_and_the_default_is_k(stream):
    gallery, batches = stream
    assert LiveQueryBank(CSLS(k=4)).fit(gallery=gallery)._min_rows == 4
    live = LiveQueryBank(InvertedSoftmax(), min_bank_rows=10).fit(gallery=gallery)
    for batch in batches[:4]:  # 1 + 2 + 7 rows: the bank reaches 10 only after them
        live.top_k(queries=batch, k=2)
        assert (live.normalizer_ is None) == (live.n_bank_ < 10)
    assert live.normalizer_ is not None


def test_similarities_leave_the_bank_unchanged(stream):
    gallery, batches = stream
    live = LiveQueryBank(InvertedSoftmax()).fit(gallery=gallery)
    raw = live.similarities(batches[2])
    np.testing.assert_allclose(raw, unit(batches[2]) @ unit(gallery).T, rtol=1e-12)
    assert live.n_bank_ == 0
    live.top_k(queries=batches[2])
    fitted = live.similarities(batches[3])
    np.testing.assert_array_equal(fitted, live.normalizer_.similarities(batches[3]))
    assert live.n_bank_ == len(batches[2])


def test_the_callers_arrays_are_not_changed(stream):
    gallery, batches = stream
    copies = [gallery.copy(), *(batch.copy() for batch in batches)]
    live = LiveQueryBank(CSLS(k=2), max_bank_rows=10).fit(gallery=gallery)
    for batch in batches:
        live.top_k(queries=batch, k=2)
    gallery *= 0  # the service holds its own gallery
    for original, now in zip(copies[1:], batches):
        np.testing.assert_array_equal(original, now)
    assert np.all(np.isfinite(live.top_k(queries=copies[1], k=2)[1]))


@pytest.mark.parametrize("normalizer", [GloballyCorrected(), SinkhornNormalization(),
                                        MutualProximity(method="empiric")],
                         ids=["GC", "Sinkhorn", "empiric MP"])
def test_a_bank_that_cannot_grow_is_refused_by_name(normalizer):
    name = type(normalizer).__name__
    with pytest.raises(ValueError, match=rf"normalizer={name}\(\.\.\.\) cannot follow the traffic"):
        LiveQueryBank(normalizer).fit()


@pytest.mark.parametrize("form", ["similarities", "embeddings"])
def test_a_gate_is_refused_at_fit_with_the_reason(form, rng):
    # Accepted, it would fail at the bank's first growth, queries later.
    gallery = rng.normal(size=(30, 8))
    start = {"X": rng.normal(size=(40, 30))} if form == "similarities" else {"gallery": gallery}
    with pytest.raises(ValueError, match=r"normalizer=QueryBankGate\(\.\.\.\) cannot follow the "
                                         r"traffic: its partial_fit needs the queries to serve.*"
                                         r"Give LiveQueryBank the normaliser itself"):
        LiveQueryBank(QueryBankGate(CSLS(k=3)), min_bank_rows=50).fit(**start)


def test_bad_input_names_the_parameter_and_the_shapes(stream, rng):
    gallery, batches = stream
    embedded = LiveQueryBank(InvertedSoftmax()).fit(gallery=gallery)
    with pytest.raises(ValueError, match=r"queries has shape \(2, 5\).*\(40, 12\)"):
        embedded.top_k(queries=rng.normal(size=(2, 5)))
    with pytest.raises(ValueError, match=r"X of shape \(2, 40\) given.*gallery= of shape \(40, 12\)"):
        embedded.top_k(rng.normal(size=(2, N_GALLERY)))
    with pytest.raises(ValueError, match="exactly one of X"):
        embedded.top_k()
    with pytest.raises(ValueError, match=r"X of shape \(2, 40\) given"):
        embedded.transform(rng.normal(size=(2, N_GALLERY)))
    similar = LiveQueryBank(InvertedSoftmax()).fit(rng.normal(size=(5, N_GALLERY)).astype(np.float32))
    with pytest.raises(ValueError, match=r"X has shape \(2, 7\).*40 columns"):
        similar.transform(rng.normal(size=(2, 7)).astype(np.float32))
    with pytest.raises(ValueError, match=r"queries of shape \(2, 12\) given.*without gallery="):
        similar.top_k(queries=rng.normal(size=(2, N_DIMS)))
    with pytest.raises(ValueError, match=r"X has dtype float64 \(shape \(2, 40\)\).*float32"):
        similar.transform(rng.normal(size=(2, N_GALLERY)))
    with pytest.raises(ValueError, match=r"k must be an integer in \[1, 40\]"):
        LiveQueryBank(CSLS()).fit(gallery=gallery).top_k(queries=batches[0], k=41)
    with pytest.raises(ValueError, match="max_bank_rows=5 is smaller than the 10 bank rows"):
        LiveQueryBank(CSLS(k=10), max_bank_rows=5).fit(gallery=gallery)
    with pytest.raises(ValueError, match="max_bank_rows"):
        LiveQueryBank(InvertedSoftmax(), max_bank_rows=0).fit(gallery=gallery)
    with pytest.raises(ValueError, match="min_bank_rows"):
        LiveQueryBank(InvertedSoftmax(), min_bank_rows=True).fit(gallery=gallery)


def test_a_float32_service_takes_no_float64_rows_but_a_float64_one_takes_float32(stream):
    gallery, batches = stream
    live = LiveQueryBank(InvertedSoftmax()).fit(batches[4], gallery=gallery)
    live.top_k(queries=batches[5].astype(np.float32))
    reference = InvertedSoftmax().fit(
        np.concatenate([batches[4], batches[5].astype(np.float32).astype(np.float64)]), gallery=gallery)
    np.testing.assert_array_equal(live.normalizer_.bank_soft_max_, reference.bank_soft_max_)
