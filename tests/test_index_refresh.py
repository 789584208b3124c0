"""NormalizedIndex.partial_fit and refresh: the refreshed index answers as one rebuilt.

The reference is an index built anew (``fit()``) on the grown normaliser; a ``"Flat"``
index is also checked against the normaliser's exact ``top_k``.
"""

import contextlib
import pickle
import warnings

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from skqbnorm import (
    CSLS,
    Centering,
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
from skqbnorm.index import NormalizedIndex

N_DIMS, N_GALLERY, K = 8, 1200, 5
# Small lists and nprobe, so that an IVF search visits a fraction of the lists.
FACTORIES = {"Flat": {}, "IVF16,Flat": {"nprobe": 3}, "HNSW16": {"ef_search": 16}}
MERGEABLE = [
    InvertedSoftmax(beta=10.0),
    DynamicInvertedSoftmax(beta=10.0, k=1),
    CSLS(k=3),
    NearestNeighborNormalization(k=3, alpha=0.75),
    Centering(alpha=0.5),
    DualInvertedSoftmax(beta1=10.0, beta2=5.0),
    DualDynamicInvertedSoftmax(beta1=10.0, beta2=5.0, k=1),
    QueryBankZNorm(),
    MutualProximity(),
    DualSoftmax(),
]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return {
        "bank": rng.normal(size=(300, N_DIMS)),
        "gallery": rng.normal(size=(N_GALLERY, N_DIMS)),
        "gallery_bank": rng.normal(size=(240, N_DIMS)),
        "queries": rng.normal(size=(40, N_DIMS)),
    }


@contextlib.contextmanager
def one_thread():
    """FAISS builds an HNSW graph in parallel, in an order that threads may change."""
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(threads)


def dual(normalizer):
    return normalizer.capabilities.gallery_bank is not None


def rows(data, normalizer, part):
    """The querybank (and gallery-bank) rows of ``part``: the first third, or the rest."""
    cut = {"bank": len(data["bank"]) // 3, "gallery_bank": len(data["gallery_bank"]) // 3}
    take = {name: data[name][:at] if part == 0 else data[name][at:] for name, at in cut.items()}
    return take["bank"], {"gallery_bank": take["gallery_bank"]} if dual(normalizer) else {}


def grown(normalizer, data):
    """The normaliser fitted by partial_fit on the first third of the bank, then on the rest."""
    first, extra = rows(data, normalizer, 0)
    normalizer = clone(normalizer).partial_fit(first, gallery=data["gallery"], **extra)
    rest, extra = rows(data, normalizer, 1)
    return normalizer.partial_fit(rest, **extra)


def assert_same_answers(index, rebuilt, queries, factory):
    indices, scores = index.search(queries, k=K)
    expected_indices, expected_scores = rebuilt.search(queries, k=K)
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_array_equal(scores, expected_scores)


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("normalizer", MERGEABLE, ids=lambda n: type(n).__name__)
def test_partial_fit_answers_as_the_index_rebuilt_on_the_grown_normalizer(normalizer, factory, data):
    settings = FACTORIES[factory]
    with one_thread():
        index = NormalizedIndex(normalizer, factory, n_candidates=50, **settings)
        first, extra = rows(data, normalizer, 0)
        index.partial_fit(first, gallery=data["gallery"], **extra)
        before = index.index_
        stale = index.search(data["queries"], k=K)
        rest, extra = rows(data, normalizer, 1)
        index.partial_fit(rest, **extra)
        rebuilt = NormalizedIndex(grown(normalizer, data), factory, n_candidates=50, **settings).fit()
    assert index.normalizer_.n_bank_ == len(data["bank"])
    assert_same_answers(index, rebuilt, data["queries"], factory)
    # The bank changed the scores: the test would catch an index left stale.
    assert not np.array_equal(stale[1], index.search(data["queries"], k=K)[1])
    assert (index.index_ is before) == index.refresh_in_place_


@pytest.mark.parametrize(
    ("factory", "normalizer", "in_place"),
    [
        ("Flat", InvertedSoftmax(), True),
        ("IVF16,Flat", DynamicInvertedSoftmax(k=1), True),
        ("HNSW16", CSLS(k=3), False),
        ("IVF16,SQ8", InvertedSoftmax(), False),
        ("HNSW16", QueryBankZNorm(), True),
    ],
)
def test_the_index_says_when_a_refresh_rebuilds(factory, normalizer, in_place, data):
    normalizer = grown(normalizer, data)
    index = NormalizedIndex(normalizer, factory).fit()
    assert index.refresh_in_place_ is in_place


def test_flat_refresh_rewrites_the_stored_biases_bitwise(data):
    """The stored float32 vectors after the refresh are a fresh build's, byte for byte,
    and the answers are the grown normaliser's exact top k."""
    normalizer = InvertedSoftmax(beta=10.0).partial_fit(data["bank"][:50], gallery=data["gallery"])
    index = NormalizedIndex(normalizer, "Flat").fit()
    normalizer.partial_fit(data["bank"][50:])
    index.refresh()
    rebuilt = NormalizedIndex(normalizer, "Flat").fit()
    stored = faiss.vector_to_array(index.index_.codes)
    assert stored.tobytes() == faiss.vector_to_array(rebuilt.index_.codes).tobytes()
    assert stored.view(np.float32)[N_DIMS :: N_DIMS + 1].tolist() == (
        (-normalizer.gallery_bias()).astype(np.float32).tolist()
    )
    indices, scores = index.search(data["queries"], k=K)
    exact_indices, exact_scores = normalizer.top_k(queries=data["queries"], k=K)
    np.testing.assert_array_equal(indices, exact_indices)
    np.testing.assert_allclose(scores, exact_scores, rtol=1e-12)


def inverted_lists(index):
    """Each IVF list's item ids."""
    ivf = faiss.extract_index_ivf(index)
    lists = ivf.invlists
    return [faiss.rev_swig_ptr(lists.get_ids(i), lists.list_size(i)).tolist() if lists.list_size(i) else []
            for i in range(ivf.nlist)]


def test_ivf_lists_hold_the_items_by_their_embeddings_alone(data):
    """Two banks of very different biases give the same lists: those of the raw vectors."""
    gallery = data["gallery"]
    small = InvertedSoftmax(beta=1.0).fit(data["bank"][:10], gallery=gallery)
    large = InvertedSoftmax(beta=30.0).fit(data["bank"], gallery=gallery)
    lists = [inverted_lists(NormalizedIndex(n, "IVF16,Flat").fit().index_) for n in (small, large)]
    assert lists[0] == lists[1]
    raw = faiss.index_factory(N_DIMS, "IVF16,Flat", faiss.METRIC_INNER_PRODUCT)
    unit = (gallery / np.linalg.norm(gallery, axis=1, keepdims=True)).astype(np.float32)
    raw.train(unit)
    raw.add(unit)
    assert lists[0] == inverted_lists(raw)


def test_refresh_takes_the_grown_normalizer_without_copying_the_gallery(data):
    normalizer = CSLS(k=3).partial_fit(data["bank"][:100], gallery=data["gallery"])
    index = NormalizedIndex(normalizer, "IVF16,Flat", nprobe=3).fit()
    gallery, before = index.normalizer_.gallery_embeddings_, index.index_
    normalizer.partial_fit(data["bank"][100:])
    assert index.normalizer_.n_bank_ == 100  # the index's own copy, until refreshed
    assert index.refresh() is index
    assert index.normalizer_ is not normalizer and index.normalizer_.n_bank_ == len(data["bank"])
    assert index.normalizer_.gallery_embeddings_ is gallery and index.index_ is before
    rebuilt = NormalizedIndex(normalizer, "IVF16,Flat", nprobe=3).fit()
    assert_same_answers(index, rebuilt, data["queries"], "IVF16,Flat")


def test_refresh_on_a_new_gallery_rebuilds(data):
    normalizer = NearestNeighborNormalization(k=3).fit(data["bank"], gallery=data["gallery"])
    index = NormalizedIndex(normalizer, "Flat").fit()
    before = index.index_
    normalizer.fit(data["bank"], gallery=data["gallery"][:500])
    index.refresh()
    assert index.index_ is not before and index.n_gallery_ == 500
    assert_same_answers(index, NormalizedIndex(normalizer, "Flat").fit(), data["queries"], "Flat")


def test_refresh_and_partial_fit_refusals(data):
    with pytest.raises(NotFittedError):
        NormalizedIndex(InvertedSoftmax()).refresh()
    for normalizer in (GloballyCorrected(), SinkhornNormalization()):
        with pytest.raises(ValueError, match=f"{type(normalizer).__name__} does not support partial_fit"):
            NormalizedIndex(normalizer).partial_fit(data["bank"], gallery=data["gallery"])
    index = NormalizedIndex(InvertedSoftmax()).partial_fit(data["bank"][:50], gallery=data["gallery"])
    with pytest.raises(ValueError, match="X has 3 features"):
        index.partial_fit(data["bank"][50:, :3])
    assert index.normalizer_.n_bank_ == 50


@pytest.mark.parametrize("build", ["fit(X)", "partial_fit"])
def test_refresh_refuses_an_index_that_fitted_its_own_normalizer(build, data):
    index = NormalizedIndex(InvertedSoftmax())
    if build == "fit(X)":
        index.fit(data["bank"], gallery=data["gallery"])
    else:
        index.partial_fit(data["bank"], gallery=data["gallery"])
    with pytest.raises(ValueError, match=r"refresh\(\) is for an index built by fit\(\) from a "
                                         r"fitted normalizer.*Grow its bank with partial_fit"):
        index.refresh()


def test_an_index_of_a_fitted_normalizer_pickles_its_gallery_once(data):
    normalizer = InvertedSoftmax().partial_fit(data["bank"][:100], gallery=data["gallery"])
    index = NormalizedIndex(normalizer, "Flat").fit()
    own = NormalizedIndex(InvertedSoftmax(), "Flat").fit(data["bank"][:100], gallery=data["gallery"])
    # fit() also pickles its parameter, the caller's normaliser: its bank statistics
    # (one float per gallery item), not a second gallery.
    extra = len(pickle.dumps(index)) - len(pickle.dumps(own))
    assert extra < data["gallery"].nbytes / 2
    restored = pickle.loads(pickle.dumps(index))
    assert restored.normalizer_.gallery_embeddings_ is restored.normalizer.gallery_embeddings_
    restored.normalizer.partial_fit(data["bank"][100:])
    restored.refresh()
    normalizer.partial_fit(data["bank"][100:])
    assert_same_answers(restored, NormalizedIndex(normalizer, "Flat").fit(), data["queries"], "Flat")


@pytest.mark.parametrize("factory", ["IVF16,Flat", "HNSW16"])
def test_auto_settings_are_chosen_again_for_the_grown_bank(factory, data):
    """After a refresh or a partial_fit, the "auto" settings are those of an index built
    anew on the grown normaliser with the same calibration queries."""
    normalizer = InvertedSoftmax(beta=30.0).partial_fit(data["bank"][:20], gallery=data["gallery"])
    index = NormalizedIndex(normalizer, factory, target_recall=0.9).fit(calibration_queries=data["queries"])
    grown_by_hand = NormalizedIndex(InvertedSoftmax(beta=30.0), factory, target_recall=0.9)
    grown_by_hand.partial_fit(data["bank"][:20], gallery=data["gallery"])
    normalizer.partial_fit(data["bank"][20:])
    grown_by_hand.partial_fit(data["bank"][20:])
    index.refresh()
    rebuilt = NormalizedIndex(normalizer, factory, target_recall=0.9).fit(calibration_queries=data["queries"])
    from_first_rows = NormalizedIndex(normalizer, factory, target_recall=0.9).fit(
        calibration_queries=data["bank"][:20])
    settings = ("nprobe_", "ef_search_", "calibration_recall_")
    assert [getattr(index, name) for name in settings] == [getattr(rebuilt, name) for name in settings]
    assert [getattr(grown_by_hand, name) for name in settings] == [
        getattr(from_first_rows, name) for name in settings]


@pytest.mark.parametrize("factory", ["IVF16,Flat", "HNSW16"])
def test_calibration_queries_given_to_partial_fit_or_refresh_choose_from_then_on(factory, data):
    """Each choice equals that of an index built anew on the same normaliser with the
    same calibration queries; queries given once are kept by the later calls."""
    settings = ("nprobe_", "ef_search_", "calibration_recall_")

    def rebuilt(normalizer, queries):
        index = NormalizedIndex(normalizer, factory, target_recall=0.9)
        return [getattr(index.fit(calibration_queries=queries), name) for name in settings]

    held_out, other = data["queries"][:20], data["queries"][20:]
    grown_index = NormalizedIndex(InvertedSoftmax(beta=30.0), factory, target_recall=0.9)
    grown_index.partial_fit(data["bank"][:20], gallery=data["gallery"], calibration_queries=held_out)
    assert [getattr(grown_index, name) for name in settings] == rebuilt(grown_index.normalizer_, held_out)
    grown_index.partial_fit(data["bank"][20:100])  # keeps held_out
    assert [getattr(grown_index, name) for name in settings] == rebuilt(grown_index.normalizer_, held_out)
    grown_index.partial_fit(data["bank"][100:], calibration_queries=other)
    assert [getattr(grown_index, name) for name in settings] == rebuilt(grown_index.normalizer_, other)

    normalizer = InvertedSoftmax(beta=30.0).partial_fit(data["bank"][:20], gallery=data["gallery"])
    with pytest.warns(UserWarning, match="no calibration queries. Pass calibration_queries= to fit, "
                                         "partial_fit or refresh"):
        index = NormalizedIndex(normalizer, factory, target_recall=0.9).fit()
    normalizer.partial_fit(data["bank"][20:])
    index.refresh(calibration_queries=held_out)
    assert [getattr(index, name) for name in settings] == rebuilt(normalizer, held_out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        index.refresh()  # keeps held_out: no warning
    assert [getattr(index, name) for name in settings] == rebuilt(normalizer, held_out)


def test_bad_calibration_queries_change_nothing_in_partial_fit_or_refresh(data):
    index = NormalizedIndex(InvertedSoftmax(), "IVF16,Flat").partial_fit(
        data["bank"][:50], gallery=data["gallery"], calibration_queries=data["queries"])
    chosen = index.nprobe_
    with pytest.raises(ValueError, match=r"calibration_queries must have shape \(n_queries, 8\)"):
        index.partial_fit(data["bank"][50:], calibration_queries=data["queries"][:, :3])
    assert index.normalizer_.n_bank_ == 50 and index.nprobe_ == chosen
    normalizer = InvertedSoftmax().partial_fit(data["bank"][:50], gallery=data["gallery"])
    index = NormalizedIndex(normalizer, "IVF16,Flat").fit(calibration_queries=data["queries"])
    with pytest.raises(ValueError, match=r"calibration_queries \(or X\) has no rows"):
        index.refresh(calibration_queries=data["queries"][:0])
    with pytest.raises(ValueError, match=r"calibration_queries must have shape \(n_queries, 8\)"):
        NormalizedIndex(InvertedSoftmax(), "Flat").partial_fit(
            data["bank"][:50], gallery=data["gallery"], calibration_queries=data["queries"][:, :3])
