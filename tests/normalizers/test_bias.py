"""Bias form: each normaliser's per-gallery bias and augmented vectors rank rows as transform."""

import numpy as np
import pytest

import skqbnorm._core._products
from skqbnorm import (
    CSLS,
    Centering,
    DualBankSinkhornNormalization,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    NearestNeighborNormalization,
    SinkhornNormalization,
    catalogue,
)
from skqbnorm.normalizers import index_serving
from skqbnorm.normalizers._bias import BiasFormMixin

from helpers import stable_ranking as ranking

N_DIMS = 8


def bias_form_normalizers():
    return [
        InvertedSoftmax(beta=10.0),
        InvertedSoftmax(beta=10.0, output="probability"),
        DynamicInvertedSoftmax(beta=10.0, k=1),
        CSLS(k=5),
        NearestNeighborNormalization(k=5, alpha=0.75),
        Centering(alpha=0.5),
        DualInvertedSoftmax(beta1=10.0, beta2=5.0),
        DualDynamicInvertedSoftmax(beta1=10.0, beta2=5.0, k=1),
        SinkhornNormalization(tau=0.1, n_iter=50),
        DualBankSinkhornNormalization(tau=0.1, n_iter=50, tol=0.1),
    ]


# (normaliser, whether it is fitted with a gallery bank)
CASES = [(n, n.capabilities.gallery_bank is not None) for n in bias_form_normalizers()]
CASES.append((DualDynamicInvertedSoftmax(beta1=10.0, beta2=5.0, k=1), False))
IDS = [f"{type(n).__name__}-{i}" for i, (n, _) in enumerate(CASES)]


def fit_kwargs(case, rng, mode, n_gallery):
    normalizer, dual = case
    width = N_DIMS if mode == "embedding" else n_gallery
    bank = rng.normal(size=(60, width))
    extra = {"gallery_bank": rng.normal(size=(50, width))} if dual else {}
    if mode == "embedding":
        extra["gallery"] = rng.normal(size=(n_gallery, N_DIMS))
    elif dual and isinstance(normalizer, DualBankSinkhornNormalization):
        extra["querybank_to_gallery_bank"] = rng.normal(size=(60, 50))
    return bank, extra


def fitted(case, mode, seed=0, n_gallery=40):
    rng = np.random.default_rng(seed)
    bank, kwargs = fit_kwargs(case, rng, mode, n_gallery)
    normalizer = case[0].fit(bank, **kwargs)
    if mode == "embedding":
        sims = normalizer.similarities(rng.normal(size=(30, N_DIMS)))
    else:
        sims = rng.normal(size=(30, n_gallery))
    return normalizer, sims


def biased(normalizer, sims):
    """``s - bias_g`` of each row's form, by hand: raw rows stay raw."""
    forms = index_serving(normalizer).row_forms(sims.argmax(axis=1))
    biases = index_serving(normalizer).gallery_biases()
    return np.where((forms >= 0)[:, None], sims - biases[np.maximum(forms, 0)], sims)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("mode", ["embedding", "precomputed"])
def test_biased_similarities_rank_as_transform(case, mode):
    normalizer, sims = fitted(case, mode)
    np.testing.assert_array_equal(ranking(biased(normalizer, sims)), ranking(normalizer.transform(sims)))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_augmented_inner_products_are_biased_similarities(case):
    normalizer, sims = fitted(case, "embedding")
    queries = np.random.default_rng(1).normal(size=(30, N_DIMS))
    sims = normalizer.similarities(queries)
    products = index_serving(normalizer).augmented_queries(queries) @ index_serving(normalizer).augmented_gallery().T
    np.testing.assert_allclose(products, biased(normalizer, sims), rtol=0, atol=1e-12)
    # A top-1 from elsewhere (a raw index search) selects the same forms.
    given = index_serving(normalizer).augmented_queries(queries, top1=sims.argmax(axis=1))
    np.testing.assert_array_equal(given, index_serving(normalizer).augmented_queries(queries))


def test_gates_open_and_close_in_these_cases():
    """The gated cases above see raw rows and, for the dual bank, every form."""
    dis, sims = fitted(CASES[2], "embedding")
    assert set(index_serving(dis).row_forms(sims.argmax(axis=1))) == {-1, 0}
    dual, sims = fitted(CASES[7], "embedding")
    assert dual.gallery_bank_activated_ is not None
    assert set(index_serving(dual).row_forms(sims.argmax(axis=1))) == {-1, 0, 1, 2}
    assert index_serving(dual).gallery_biases().shape == (3, 40)


def test_biases_by_hand():
    rng = np.random.default_rng(3)
    bank_sims = rng.normal(size=(20, 6))
    top5 = np.sort(bank_sims, axis=0)[-5:]
    np.testing.assert_allclose(CSLS(k=5).fit(bank_sims).gallery_bias(), top5.mean(axis=0) / 2)
    nnn = NearestNeighborNormalization(k=5, alpha=0.75).fit(bank_sims)
    np.testing.assert_allclose(nnn.gallery_bias(), 0.75 * top5.mean(axis=0))
    centering = Centering(alpha=0.5).fit(bank_sims)
    np.testing.assert_allclose(centering.gallery_bias(), 0.5 * bank_sims.mean(axis=0))
    soft_max = np.log(np.exp(10.0 * bank_sims).sum(axis=0)) / 10.0
    is_bias = InvertedSoftmax(beta=10.0).fit(bank_sims).gallery_bias()
    np.testing.assert_allclose(is_bias, soft_max - soft_max.mean())
    assert is_bias.dtype == np.float64


def test_csls_scores_from_the_bias():
    """CSLS = 2 (s - bias) - r_G(q), r_G the mean of the row's k largest similarities."""
    normalizer, sims = fitted(CASES[3], "embedding")
    r_g = np.sort(sims, axis=1)[:, -5:].mean(axis=1, keepdims=True)
    expected = 2 * (sims - normalizer.gallery_bias()) - r_g
    np.testing.assert_allclose(normalizer.transform(sims), expected, atol=1e-12)


def test_augmented_vectors_hold_prepared_embeddings():
    rng = np.random.default_rng(4)
    gallery, queries = rng.normal(size=(10, 4)), rng.normal(size=(3, 4))
    normalizer = NearestNeighborNormalization(k=2).fit(rng.normal(size=(5, 4)), gallery=gallery)
    augmented = index_serving(normalizer).augmented_gallery()
    np.testing.assert_allclose(augmented[:, :4], gallery / np.linalg.norm(gallery, axis=1, keepdims=True))
    np.testing.assert_array_equal(augmented[:, 4], -normalizer.gallery_bias())
    query_vectors = index_serving(normalizer).augmented_queries(queries)
    np.testing.assert_allclose(query_vectors[:, :4], queries / np.linalg.norm(queries, axis=1, keepdims=True))
    np.testing.assert_array_equal(query_vectors[:, 4], 1.0)
    dot = Centering(metric="dot").fit(rng.normal(size=(5, 4)), gallery=gallery)
    np.testing.assert_array_equal(index_serving(dot).augmented_gallery()[:, :4], gallery)


def test_dtypes():
    rng = np.random.default_rng(5)
    gallery = rng.normal(size=(10, 4)).astype(np.float32)
    normalizer = Centering().fit(rng.normal(size=(5, 4)).astype(np.float32), gallery=gallery)
    assert index_serving(normalizer).augmented_gallery().dtype == np.float32
    assert index_serving(normalizer).augmented_gallery(dtype=np.float64).dtype == np.float64
    assert index_serving(normalizer).augmented_queries(gallery[:2]).dtype == np.float32
    assert normalizer.gallery_bias().dtype == np.float64


def test_mixin_is_on_the_bias_form_normalizers_only():
    assert all(isinstance(normalizer, BiasFormMixin) for normalizer in bias_form_normalizers())
    assert not isinstance(GloballyCorrected(), BiasFormMixin)


def test_the_declared_bias_form_is_the_mixin_and_these_cases():
    """Every catalogue class that declares the bias form is tested here, and has the mixin."""
    assert {type(n) for n in bias_form_normalizers()} == set(catalogue.normalizers(bias_form=True))
    for cls in catalogue.normalizers():
        assert issubclass(cls, BiasFormMixin) == cls.capabilities.bias_form, cls.__name__


def test_errors():
    rng = np.random.default_rng(6)
    unfitted = DynamicInvertedSoftmax()
    with pytest.raises(Exception, match="not fitted"):
        unfitted.gallery_bias()
    precomputed = DynamicInvertedSoftmax(k=1).fit(rng.normal(size=(8, 5)))
    assert precomputed.gallery_bias().shape == (5,)
    with pytest.raises(ValueError, match="precomputed similarities"):
        index_serving(precomputed).augmented_gallery()
    with pytest.raises(ValueError, match="precomputed similarities"):
        index_serving(precomputed).augmented_queries(rng.normal(size=(2, 3)))
    with pytest.raises(ValueError, match=r"outside \[0, 5\)"):
        index_serving(precomputed).row_forms(np.array([0, 5]))
    with pytest.raises(ValueError, match="1-D array of gallery indices"):
        index_serving(precomputed).row_forms(np.array([0.5]))
    embedded = Centering().fit(rng.normal(size=(8, 3)), gallery=rng.normal(size=(5, 3)))
    with pytest.raises(ValueError, match="3 dimensions"):
        index_serving(embedded).augmented_queries(rng.normal(size=(2, 4)))
    with pytest.raises(ValueError, match="top1 has 1 entries for 2 queries"):
        index_serving(embedded).augmented_queries(rng.normal(size=(2, 3)), top1=[0])


def test_the_gate_reads_the_products_that_similarities_multiplies(monkeypatch):
    # The gated form comes from each query's raw top-1, which must be that of
    # similarities(queries): the same parts (of 4 rows here, the last of 1), and an
    # overflowing product named as similarities names it, not ranked as an infinity.
    monkeypatch.setattr(skqbnorm._core._products, "SEARCH_PRODUCT_ROWS", 4)
    monkeypatch.setattr(skqbnorm._core._products, "MIN_SEARCH_PRODUCT_ROWS", 4)
    rng = np.random.default_rng(8)
    bank, gallery, queries = (rng.normal(size=(n, N_DIMS)).astype(np.float32) for n in (40, 300, 9))
    for metric in ("cosine", "dot"):
        dis = DynamicInvertedSoftmax(beta=10.0, k=1, metric=metric).fit(bank, gallery=gallery)
        forms = index_serving(dis).row_forms(np.argmax(dis.similarities(queries), axis=1))
        tail = index_serving(dis).augmented_queries(queries)[:, N_DIMS:]
        np.testing.assert_array_equal(np.where(tail.any(axis=1), tail.argmax(axis=1), -1), forms)
    huge = np.full((5, N_DIMS), 1e38, dtype=np.float32) * np.sign(gallery[:1])
    with pytest.raises(ValueError, match=r"overflows float32 under metric='dot'"):
        dis.similarities(huge)
    with pytest.raises(ValueError, match=r"overflows float32 under metric='dot'"):
        index_serving(dis).augmented_queries(huge)


def test_caller_arrays_untouched():
    rng = np.random.default_rng(7)
    gallery, queries = rng.normal(size=(10, 4)), rng.normal(size=(3, 4))
    gallery_copy, queries_copy = gallery.copy(), queries.copy()
    normalizer = Centering().fit(rng.normal(size=(5, 4)), gallery=gallery)
    index_serving(normalizer).augmented_queries(queries)
    index_serving(normalizer).augmented_gallery()[:] = 0
    np.testing.assert_array_equal(queries, queries_copy)
    np.testing.assert_array_equal(gallery, gallery_copy)
    assert np.abs(normalizer.gallery_embeddings_).sum() > 0
