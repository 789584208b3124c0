"""Planted-hub attacks: they capture traffic on real data, deterministically, and the
adaptive attack's gradient is the derivative of its objective."""

import numpy as np
import pytest
from sklearn.base import clone

from skqbnorm.attacks import (
    _ITEM_BIAS_MODELS,
    _item_bias,
    _objective,
    _RawBias,
    adaptive_hubs,
    centroid_hubs,
    optimized_hubs,
    plant,
)
from skqbnorm.catalogue import normalizers
from skqbnorm.datasets import load_retrieval_set
from skqbnorm.normalizers import (
    CSLS,
    Capabilities,
    Centering,
    DynamicInvertedSoftmax,
    InvertedSoftmax,
    NearestNeighborNormalization,
    QueryBankGate,
)
from skqbnorm.normalizers._capabilities import ITEM_BIAS_FORMS

from helpers import HalfMax


def unit(X):
    return X / np.linalg.norm(X, axis=1, keepdims=True)


class UndeclaredHalfMax(HalfMax):
    """The same scores, with no item_bias declared."""

    capabilities = Capabilities(bias_form=True, index="bias")


@pytest.fixture(scope="module")
def wordnet():
    """The shipped reverse dictionary: the attacker's sample and the defender's bank are
    disjoint rows of its bank; the test queries are its queries."""
    data = load_retrieval_set("wordnet_revdict")
    bank = unit(data["bank_embeddings"])
    order = np.random.default_rng(0).permutation(len(bank))
    return {"gallery": unit(data["gallery_embeddings"]), "queries": unit(data["query_embeddings"]),
            "sample": bank[order[:1000]], "bank": bank[order[1000:]]}


def top1_capture(queries, gallery, hubs):
    attacked, planted = plant(gallery, hubs)
    return np.mean(np.isin((queries @ unit(attacked).T).argmax(axis=1), planted))


@pytest.mark.parametrize("attack", ["centroid", "optimized"])
def test_hubs_capture_raw_traffic_on_real_data(wordnet, attack):
    """No query's top-1 is planted before the attack; 10 hubs take a clear share of the
    held-out queries (the centroids about 30%, the optimised ones about as many)."""
    sample, gallery, queries = wordnet["sample"], wordnet["gallery"], wordnet["queries"]
    hubs = (centroid_hubs(sample, 10, random_state=0) if attack == "centroid"
            else optimized_hubs(sample, gallery, 10, n_iter=30, random_state=0))
    assert top1_capture(queries, gallery, hubs) > 0.15


def test_the_optimised_hub_beats_the_centroid_on_its_own_sample(wordnet):
    sample, gallery = wordnet["sample"], wordnet["gallery"]
    centroid = centroid_hubs(sample)
    optimised = optimized_hubs(sample, gallery, n_iter=50)
    assert top1_capture(sample, gallery, optimised) > top1_capture(sample, gallery, centroid) + 0.03


def test_a_single_centroid_is_the_normalised_mean():
    sample = np.array([[3.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    expected = unit(unit(sample).mean(axis=0, keepdims=True))
    np.testing.assert_allclose(centroid_hubs(sample), expected)


def test_several_centroids_are_unit_cluster_means():
    rng = np.random.default_rng(1)
    centres = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    sample = np.repeat(centres, 20, axis=0) + 0.01 * rng.normal(size=(60, 3))
    hubs = centroid_hubs(sample, 3, random_state=0)
    np.testing.assert_allclose(np.sort(np.abs(hubs).argmax(axis=1)), [0, 1, 2])
    np.testing.assert_allclose(np.abs(hubs).max(axis=1), 1.0, atol=1e-3)


@pytest.mark.parametrize("attack", ["centroid", "optimized", "adaptive"])
def test_attacks_are_deterministic_given_random_state(attack):
    rng = np.random.default_rng(2)
    sample, gallery, bank = rng.normal(size=(60, 8)), rng.normal(size=(40, 8)), rng.normal(
        size=(50, 8))
    sample_before = sample.copy()

    def run(seed):
        if attack == "centroid":
            return centroid_hubs(sample, 4, random_state=seed)
        if attack == "optimized":
            return optimized_hubs(sample, gallery, 4, n_iter=10, random_state=seed)
        return adaptive_hubs(sample, gallery, CSLS(k=5), bank, 4, n_iter=10, random_state=seed)

    np.testing.assert_array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))  # the seed reaches the k-means
    np.testing.assert_array_equal(sample, sample_before)  # the caller's array is untouched


def reference_bias(normalizer, bank, gallery, hub):
    """The hub's bias computed as the normaliser computes a real item's: fitted with the
    hub appended to the gallery, the bias it gives that item."""
    fitted = clone(normalizer).fit(bank, gallery=np.vstack([gallery, hub]))
    return fitted.gallery_bias()[-1], fitted


@pytest.mark.parametrize("normalizer", [InvertedSoftmax(beta=10.0), DynamicInvertedSoftmax(k=2),
                                        CSLS(k=5), NearestNeighborNormalization(k=4, alpha=0.75),
                                        HalfMax()])
def test_the_hub_bias_is_the_normalisers(normalizer):
    """The closed-form bias of a hub equals the bias the fitted normaliser gives it once
    planted (IS up to the shift of c_mean, which is the same for every item; the DIS's
    is the bias of its normalised rows; the plug-in's from its own reduction)."""
    rng = np.random.default_rng(3)
    gallery, bank, hub = unit(rng.normal(size=(30, 6))), unit(rng.normal(size=(40, 6))), unit(
        rng.normal(size=(1, 6)))
    expected, refit = reference_bias(normalizer, bank, gallery, hub)
    bias, _ = _item_bias(refit, bank)(hub)
    np.testing.assert_allclose(bias[0], expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("normalizer", [InvertedSoftmax(beta=15.0), CSLS(k=5),
                                        NearestNeighborNormalization(k=3, alpha=0.5), HalfMax(),
                                        None])
def test_the_objective_gradient_matches_finite_differences(normalizer):
    rng = np.random.default_rng(4)
    queries, bank = unit(rng.normal(size=(25, 5))), unit(rng.normal(size=(30, 5)))
    hubs = rng.normal(size=(2, 5))  # off the sphere: the gradient is the free one
    labels = rng.integers(0, 2, size=25)
    margins = rng.uniform(-0.5, 0.5, size=25)
    hub_bias = _RawBias() if normalizer is None else _item_bias(
        normalizer.fit(bank, gallery=unit(rng.normal(size=(10, 5)))), bank)
    _, gradient = _objective(hubs, queries, labels, margins, hub_bias, 0.3)
    numeric = np.zeros_like(hubs)
    eps = 1e-6
    for index in np.ndindex(*hubs.shape):
        up, down = hubs.copy(), hubs.copy()
        up[index] += eps
        down[index] -= eps
        hub = index[0]
        numeric[index] = (_objective(up, queries, labels, margins, hub_bias, 0.3)[0][hub]
                          - _objective(down, queries, labels, margins, hub_bias, 0.3)[0][hub]) / (
            2 * eps)
    np.testing.assert_allclose(gradient, numeric, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("normalizer", [InvertedSoftmax(), DynamicInvertedSoftmax(), CSLS(),
                                        NearestNeighborNormalization()])
def test_the_adaptive_hub_beats_the_optimised_one_under_its_normaliser(wordnet, normalizer):
    """On the attacker's own sample and bank, the normalised objective it climbs is
    higher than the raw attack's."""
    sample, gallery, bank = wordnet["sample"][:300], wordnet["gallery"], wordnet["bank"][:1000]
    fitted = normalizer.fit(bank, gallery=gallery)
    model = _item_bias(fitted, bank)
    margins = (sample @ gallery.T - fitted.gallery_bias()).max(axis=1)
    labels = np.zeros(len(sample), dtype=np.intp)

    def objective(hubs):
        return _objective(hubs, sample, labels, margins, model, 0.03)[0][0]

    adaptive = adaptive_hubs(sample, gallery, normalizer, bank, n_iter=30)
    raw = optimized_hubs(sample, gallery, n_iter=30)
    assert objective(adaptive) > objective(raw)


def test_a_gate_is_attacked_through_its_normaliser():
    rng = np.random.default_rng(5)
    sample, gallery, bank = (rng.normal(size=(n, 6)) for n in (20, 15, 25))
    gated = adaptive_hubs(sample, gallery, QueryBankGate(CSLS(k=3)), bank, n_iter=5)
    np.testing.assert_array_equal(gated, adaptive_hubs(sample, gallery, CSLS(k=3), bank,
                                                       n_iter=5))


def test_a_default_gate_is_attacked_as_the_dynamic_inverted_softmax():
    rng = np.random.default_rng(7)
    sample, gallery, bank = (rng.normal(size=(n, 6)) for n in (20, 15, 25))
    np.testing.assert_array_equal(
        adaptive_hubs(sample, gallery, QueryBankGate(), bank, n_iter=5),
        adaptive_hubs(sample, gallery, DynamicInvertedSoftmax(), bank, n_iter=5))


def test_a_plug_in_is_attacked_by_its_declared_form():
    """A class unknown to the attacks module, declaring a top-1 bias scaled by 1/2, is
    attacked as NNN with k = 1 and alpha = 1/2, whose bias is the same."""
    rng = np.random.default_rng(8)
    sample, gallery, bank = (rng.normal(size=(n, 6)) for n in (30, 15, 25))
    np.testing.assert_allclose(
        adaptive_hubs(sample, gallery, HalfMax(), bank, 3, n_iter=10, random_state=0),
        adaptive_hubs(sample, gallery, NearestNeighborNormalization(k=1, alpha=0.5), bank, 3,
                      n_iter=10, random_state=0), rtol=1e-12, atol=1e-12)


def test_every_declarable_item_bias_form_is_modelled():
    assert set(_ITEM_BIAS_MODELS) == set(ITEM_BIAS_FORMS) - {None}


@pytest.mark.parametrize("cls", normalizers())
def test_every_catalogue_normalizer_is_modelled_or_refused_by_its_declaration(cls):
    rng = np.random.default_rng(9)
    sample, gallery, bank = (rng.normal(size=(n, 4)) for n in (20, 40, 50))  # the default ks fit
    for normalizer in (cls(), QueryBankGate(cls())):
        if cls.capabilities.item_bias is None:
            with pytest.raises(ValueError, match=f"{cls.__name__}.*declare no item_bias"):
                adaptive_hubs(sample, gallery, normalizer, bank, n_iter=2)
        else:
            hubs = adaptive_hubs(sample, gallery, normalizer, bank, n_iter=2)
            np.testing.assert_allclose(np.linalg.norm(hubs, axis=1), 1.0)


def test_plant_appends_and_names_the_planted_indices():
    gallery, hubs = np.arange(6.0).reshape(3, 2), np.ones((2, 2))
    attacked, planted = plant(gallery, hubs)
    np.testing.assert_array_equal(attacked, np.vstack([gallery, hubs]))
    np.testing.assert_array_equal(planted, [3, 4])
    np.testing.assert_array_equal(gallery, np.arange(6.0).reshape(3, 2))


@pytest.mark.parametrize("call, match", [
    (lambda s, g, b: centroid_hubs(s, 0), r"n_hubs must be in \[1, 20\].*shape \(20, 4\)"),
    (lambda s, g, b: centroid_hubs(s, 21), "n_hubs"),
    (lambda s, g, b: optimized_hubs(s, g[:, :3]), r"gallery .*dimension 4.*\(10, 3\)"),
    (lambda s, g, b: optimized_hubs(s, g, step=0.0), "step must be > 0"),
    (lambda s, g, b: optimized_hubs(s, g, temperature=-1.0), "temperature must be > 0"),
    (lambda s, g, b: adaptive_hubs(s, g, Centering(), b), "normalizer=Centering"),
    (lambda s, g, b: adaptive_hubs(s, g, CSLS(metric="dot"), b), "normalizer=CSLS"),
    (lambda s, g, b: adaptive_hubs(s, g, UndeclaredHalfMax(), b),
     "UndeclaredHalfMax.*declare no item_bias"),
    (lambda s, g, b: adaptive_hubs(s, g, QueryBankGate(Centering()), b),
     "normalizer=QueryBankGate.*Centering declare no item_bias"),
    (lambda s, g, b: adaptive_hubs(s, g, CSLS, b), "normalizer must be an instance"),
    (lambda s, g, b: adaptive_hubs(s, g, CSLS(), b[:, :2]), r"bank .*\(12, 2\)"),
    (lambda s, g, b: plant(g, s[:, :3]), r"hubs .*\(20, 3\).*\(10, 4\)"),
    (lambda s, g, b: centroid_hubs(np.zeros((3, 4))), "attacker_queries has a zero row"),
])
def test_bad_input_names_the_parameter(call, match):
    rng = np.random.default_rng(6)
    sample, gallery, bank = (rng.normal(size=(n, 4)) for n in (20, 10, 12))
    with pytest.raises(ValueError, match=match):
        call(sample, gallery, bank)
