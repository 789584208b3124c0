"""Property tests (hypothesis) of the invariants the normalisers and rerankers promise.

Data are drawn from a handful of values (small integers divided by 3, 8 or 10), so that
exact ties are frequent, and in moderate ranges, where every invariant must hold. Each test
states the kind of bug it catches. The settings are derandomised, so CI sees the same
examples on every run.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.testing import assert_allclose, assert_array_equal

from skqbnorm import (
    CSLS,
    Centering,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    HingeReranker,
    InvertedSoftmax,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
)

from helpers import stable_ranking

pytestmark = pytest.mark.slow  # hypothesis: many draws per property, not in the quick loop

#: Shrinking a failure can take minutes; it is off unless SKQBNORM_SHRINK is set, so that
#: the file stays fast when a property fails (hypothesis then reports the first failing
#: example found rather than a minimal one).
PHASES = tuple(Phase) if os.environ.get("SKQBNORM_SHRINK") else (Phase.explicit, Phase.generate)


PROPERTY = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow],
)


FEW = settings(PROPERTY, max_examples=25)


NORMALIZERS = ["IS", "DIS", "CSLS", "GC", "CENT"]


#: The normalisers whose row ranking a per-row constant leaves alone (GC ranks a query
#: against the unshifted bank, so a row constant changes its ranks).
SHIFT_INVARIANT = ["IS", "DIS", "CSLS", "CENT"]


#: One bank row per block: the smallest working memory (MiB) there is.
TINY_MEMORY = 2.0**-20


# -- strategies ------------------------------------------------------------------------


def tied_values(draw, shape, dtype=np.float64):
    """Small integers over 3, 8 or 10: exact ties are frequent, and only /8 is exact."""
    denominator = draw(st.sampled_from([3.0, 8.0, 10.0]))
    numerators = draw(arrays(np.int64, shape, elements=st.integers(-12, 12)))
    return (numerators / denominator).astype(dtype)


def shapes(draw, max_bank=12, max_gallery=9, max_queries=6):
    return (
        draw(st.integers(1, max_bank)),
        draw(st.integers(1, max_gallery)),
        draw(st.integers(1, max_queries)),
    )


def normalizer_params(draw, name, n_bank, n_gallery):
    """Parameters of the normaliser ``name`` valid for a bank of this shape."""
    if name in ("IS", "DIS"):
        params = {"beta": draw(st.sampled_from([0.5, 2.5, 20.0, 100.0]))}
        if name == "DIS":
            params["k"] = draw(st.integers(1, n_gallery))
        return params
    if name == "CSLS":
        return {"k": draw(st.integers(1, min(n_bank, n_gallery)))}
    return {}


def make(name, **params):
    classes = {
        "IS": InvertedSoftmax,
        "DIS": DynamicInvertedSoftmax,
        "CSLS": CSLS,
        "GC": GloballyCorrected,
        "CENT": Centering,
    }
    return classes[name](**params)


def exchangeable_columns(draw, shape, dtype=np.float64):
    """A bank whose columns are permutations of one column: every bank statistic (mean,
    logsumexp, top-k mean) is mathematically the same for all items, so the scores of a
    tied query row tie exactly, and only rounding that depends on the order of the bank
    rows, i.e. on the chunking, can break the tie one way or the other."""
    n_bank, n_gallery = shape
    column = tied_values(draw, (n_bank, 1), dtype)[:, 0]
    orders = [draw(st.permutations(range(n_bank))) for _ in range(n_gallery)]
    return np.stack([column[order] for order in orders], axis=1)


def chunk_settings(draw):
    """(working_memory, n_jobs) pairs to compare with the defaults: one bank row per block,
    a drawn budget (a few rows per block) and a single block, on 1 or 2 threads."""
    budget = draw(st.integers(1, 4096)) * 2.0**-20
    threads = draw(st.sampled_from([(1, 2), (2, 1)]))
    return [(TINY_MEMORY, threads[0]), (budget, threads[1]), (None, 2)]


# -- helpers ---------------------------------------------------------------------------


def fitted_state(estimator):
    """Every public fitted attribute (name ending in ``_``), whatever the method keeps."""
    return {
        name: value
        for name, value in vars(estimator).items()
        if name.endswith("_") and not name.startswith("_")
    }


def assert_same_state(reference, other, context):
    expected, found = fitted_state(reference), fitted_state(other)
    assert expected.keys() == found.keys(), context
    for name, value in expected.items():
        if isinstance(value, np.ndarray):
            assert found[name].dtype == value.dtype, f"{name} dtype, {context}"
            assert np.array_equal(found[name], value, equal_nan=True), (
                f"{name} differs, {context}: max abs difference "
                f"{np.max(np.abs(found[name].astype(float) - value.astype(float)))}"
            )
        else:
            assert found[name] == value, f"{name} differs, {context}"


def assert_same_ranking_up_to(reference, other, atol):
    """Tie-aware: each row ordered by ``other`` must be non-increasing in ``reference``
    (within ``atol``), and the other way round. An exact comparison of argsorts would
    fail on near-ties that rounding orders differently, which neither order is wrong on."""
    for first, second in ((reference, other), (other, reference)):
        ordered = np.take_along_axis(first, stable_ranking(second), axis=1)
        rises = np.diff(ordered, axis=1)
        assert (rises <= atol).all(), f"order broken by {rises.max()} > {atol}"


# -- normalisers: per-row constants --------------------------------------------------------


@pytest.mark.parametrize("name", SHIFT_INVARIANT)
@PROPERTY
@given(data=st.data())
def test_row_constant_shifts_scores_without_changing_ranking(name, data):
    """``transform(S + c 1^T) - transform(S)`` is constant along every row.

    IS shifts by ``c`` (``beta c`` for scores in units of ``beta s``); CSLS (r_G(q) moves
    with the row), Centering and the raw rows of DIS by ``c``. DIS's gate uses the row's
    top-1, which a row constant keeps, so each DIS row keeps its kind. The shifted rows keep
    their order and ties exactly; only the scores' rounding changes, hence the tolerance.
    Catches: a multiplicative normalisation (``s / bias``), a gate on a threshold of the
    similarity value instead of the top-1 item, a CSLS whose r_G ignores the query row
    or a Centering that rescales rows.
    """
    n_bank, n_gallery, n_queries = shapes(data.draw)
    dtype = data.draw(st.sampled_from([np.float64, np.float32]))
    bank = tied_values(data.draw, (n_bank, n_gallery), dtype)
    queries = tied_values(data.draw, (n_queries, n_gallery), dtype)
    constants = data.draw(arrays(np.int64, (n_queries, 1), elements=st.integers(-30, 30)))
    # Distinct values differ by >= 1/10, far above the rounding of the sums: the shifted
    # rows keep their order and their ties exactly, and so their top-1.
    shifted = (queries + constants / 10.0).astype(dtype)
    params = normalizer_params(data.draw, name, n_bank, n_gallery)
    normalizer = make(name, **params).fit(bank)

    plain, moved = normalizer.transform(queries), normalizer.transform(shifted)

    difference = moved.astype(np.float64) - plain
    magnitude = params.get("beta", 1.0) * 32.0  # bounds |scores|: |s + c| <= 7
    atol = 64 * np.finfo(dtype).eps * magnitude
    assert_allclose(difference, np.broadcast_to(difference[:, :1], difference.shape), atol=atol)
    assert_same_ranking_up_to(plain.astype(np.float64), moved.astype(np.float64), atol)


def test_row_constant_changes_gc_ranks():
    """GC is not shift-invariant (kept out of the property above on purpose)."""
    normalizer = GloballyCorrected().fit(np.array([[0.6, 0.3], [0.6, 0.0]]))
    queries = np.array([[0.5, 0.2]])  # ranks 2 and 1 among the bank; shifted: 0 and 0
    assert_array_equal(stable_ranking(normalizer.transform(queries)), [[1, 0]])
    assert_array_equal(stable_ranking(normalizer.transform(queries + 0.5)), [[0, 1]])


# -- normalisers: DIS with every item activated -----------------------------------------


@PROPERTY
@given(data=st.data())
def test_dis_equals_is_when_every_item_is_activated(data):
    """With every gallery item in the activation set, DIS is IS, bit for bit.

    Two ways to activate everything: ``k = n_gallery``, or a bank that has, for each item,
    a row whose unique top-1 is that item (rows of ``10 * I`` beat every tied value),
    with any k. Catches: an inverted gate, a gate that indexes the mask with the wrong
    item (e.g. the row's argmin or the bank's top-1), an activation set missing items.
    """
    n_bank, n_gallery, n_queries = shapes(data.draw)
    output = data.draw(st.sampled_from(["log", "probability"]))
    beta = data.draw(st.sampled_from([0.5, 2.5, 20.0]))
    bank = tied_values(data.draw, (n_bank, n_gallery))
    queries = tied_values(data.draw, (n_queries, n_gallery))
    if data.draw(st.booleans()):
        k = n_gallery
    else:
        bank = np.vstack([bank, 10.0 * np.eye(n_gallery)])
        k = data.draw(st.integers(1, n_gallery))

    dis = DynamicInvertedSoftmax(beta=beta, k=k, output=output).fit(bank)
    inverted = InvertedSoftmax(beta=beta, output=output).fit(bank)

    assert dis.activated_.all()
    assert_array_equal(dis.transform(queries), inverted.transform(queries))


def reference_activation(bank, k):
    """Items in some bank row's top k; among tied values the lowest indices come first."""
    mask = np.zeros(bank.shape[1], dtype=bool)
    mask[np.argsort(-bank, axis=1, kind="stable")[:, :k]] = True
    return mask


@PROPERTY
@given(data=st.data())
def test_dis_rows_follow_the_top1_gate(data):
    """Each DIS row is the IS row when the query's top-1 (first maximum) is activated, and
    the raw row otherwise; the activation set is each bank row's top k, ties to the lowest
    index. Complements the test above, where the gate cannot matter. Catches: a gate on
    the argmin or on the last of tied maxima, an activation set from the bank's columns.
    """
    n_bank, n_gallery, n_queries = shapes(data.draw)
    beta = data.draw(st.sampled_from([0.5, 2.5, 20.0]))
    k = data.draw(st.integers(1, n_gallery))
    bank = tied_values(data.draw, (n_bank, n_gallery))
    queries = tied_values(data.draw, (n_queries, n_gallery))

    dis = DynamicInvertedSoftmax(beta=beta, k=k).fit(bank)
    inverted = InvertedSoftmax(beta=beta).fit(bank).transform(queries)

    activated = reference_activation(bank, k)
    assert_array_equal(dis.activated_, activated)
    gated = activated[np.argmax(queries, axis=1)]
    assert_array_equal(dis.transform(queries), np.where(gated[:, None], inverted, queries))


# -- normalisers: chunk sizes and threads ---------------------------------------------------


def chunking_case(data, name, embedding=False):
    """A bank, queries, parameters and the (working_memory, n_jobs) settings to compare."""
    n_bank, n_gallery, n_queries = shapes(data.draw)
    dtype = data.draw(st.sampled_from([np.float64, np.float32]))
    if embedding:
        n_dims = data.draw(st.integers(1, 4))
        bank = tied_values(data.draw, (n_bank, n_dims), dtype)
        gallery = tied_values(data.draw, (n_gallery, n_dims), dtype)
        queries = tied_values(data.draw, (n_queries, n_dims), dtype)
    else:
        exchangeable = data.draw(st.booleans())
        bank = (exchangeable_columns if exchangeable else tied_values)(
            data.draw, (n_bank, n_gallery), dtype
        )
        gallery = None
        queries = tied_values(data.draw, (n_queries, n_gallery), dtype)
    params = normalizer_params(data.draw, name, n_bank, n_gallery)
    if embedding:
        params["metric"] = data.draw(st.sampled_from(["dot", "cosine"]))
    return bank, gallery, queries, params, chunk_settings(data.draw)


@pytest.mark.parametrize("name", NORMALIZERS)
@pytest.mark.parametrize("embedding", [False, True], ids=["precomputed", "embeddings"])
@FEW
@given(data=st.data())
def test_fitted_state_does_not_depend_on_chunks_or_jobs(name, embedding, data):
    """Fitting with one bank row per block, a few rows, one block, on 1 or 2 threads gives
    the same fitted state, bit for bit (README: results do not depend on n_jobs or
    working_memory). Catches: accumulations whose rounding depends on the split (a float
    sum of block sums, a logsumexp rescaled at every new block maximum), merges of
    partial results in the wrong order, ties in the activation set or in top-k columns
    resolved by block, an embedding product whose rounding depends on the block shape.
    """
    bank, gallery, _, params, chunkings = chunking_case(data, name, embedding)
    reference = make(name, **params).fit(bank, gallery=gallery)
    for memory, n_jobs in chunkings:
        other = make(name, working_memory=memory, n_jobs=n_jobs, **params).fit(bank, gallery=gallery)
        assert_same_state(reference, other, f"working_memory={memory}, n_jobs={n_jobs}")


def test_embedding_products_do_not_depend_on_the_bank_split():
    """A case the property above found: float32 embeddings, the bank split over two
    threads, one row per product; the 1-row and 2-row products round differently."""
    bank = (np.array([[5, 8, 9, 8], [8, 4, 8, -7]]) / 3).astype(np.float32)
    gallery = (np.array([[-8, 10, 10, 4], [10, 11, 10, 10]]) / 8).astype(np.float32)
    reference = CSLS(k=1, metric="dot").fit(bank, gallery=gallery)
    for memory, n_jobs in [(TINY_MEMORY, 1), (TINY_MEMORY, 2), (None, 2)]:
        other = CSLS(k=1, metric="dot", working_memory=memory, n_jobs=n_jobs)
        other.fit(bank, gallery=gallery)
        assert_same_state(reference, other, f"working_memory={memory}, n_jobs={n_jobs}")


@pytest.mark.parametrize("name", NORMALIZERS)
@FEW
@given(data=st.data())
def test_rankings_do_not_depend_on_chunks_or_jobs(name, data):
    """The rankings of transform (stable argsort: tied scores keep gallery order) are the
    same whatever working_memory and n_jobs, in fit and in transform, ties included: what
    the user sees of the state test above (issue 9: tied similarities that Centering
    ranked differently across chunkings). Also catches transform blocks written to the
    wrong rows or computed from another block's state.
    """
    bank, _, queries, params, chunkings = chunking_case(data, name)
    expected = make(name, **params).fit(bank).transform(queries)
    for memory, n_jobs in chunkings:
        normalizer = make(name, working_memory=memory, n_jobs=n_jobs, **params).fit(bank)
        found = normalizer.transform(queries)
        context = f"working_memory={memory}, n_jobs={n_jobs}"
        assert_array_equal(stable_ranking(found), stable_ranking(expected), err_msg=context)


# -- normalisers: top_k ---------------------------------------------------------------


def column_splits(draw, n_gallery):
    """Gallery shards: widths adding up to n_gallery (empty shards included)."""
    cuts = sorted(draw(st.lists(st.integers(0, n_gallery), max_size=4)))
    return list(zip([0, *cuts], [*cuts, n_gallery]))


def expected_top_k(scores, k):
    order = stable_ranking(scores)[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)


@pytest.mark.parametrize("name", NORMALIZERS)
@pytest.mark.parametrize("source", ["X", "chunks", "queries"])
@PROPERTY
@given(data=st.data())
def test_top_k_is_transform_then_stable_sort(name, source, data):
    """``top_k`` returns the first k of each row of ``transform`` under a stable sort:
    scores and indices, ties to the lowest gallery index, whatever the column chunking
    (``working_memory`` down to k columns per chunk, or the caller's shards).
    In embedding mode the reference is ``transform(similarities(queries))`` with the dot
    metric on values k/8, whose products are exact: any reordering of the sums gives the
    same bits, so an exact comparison is fair. Catches: merges that prefer the later
    chunk on ties, row state (DIS top-1, CSLS neighbourhood, GC range) taken per chunk
    instead of per row, column offsets lost between chunks, an off-by-one k.
    """
    n_bank, n_gallery, n_queries = shapes(data.draw)
    dtype = data.draw(st.sampled_from([np.float64, np.float32]))
    params = normalizer_params(data.draw, name, n_bank, n_gallery)
    memory = data.draw(st.sampled_from([TINY_MEMORY, 64 * 2.0**-20, None]))
    normalizer = make(name, working_memory=memory, **params)
    k = data.draw(st.integers(1, n_gallery))
    if source == "queries":
        n_dims = data.draw(st.integers(1, 4))
        bank = (data.draw(arrays(np.int64, (n_bank, n_dims), elements=st.integers(-8, 8))) / 8)
        gallery = data.draw(arrays(np.int64, (n_gallery, n_dims), elements=st.integers(-8, 8))) / 8
        queries = data.draw(arrays(np.int64, (n_queries, n_dims), elements=st.integers(-8, 8))) / 8
        normalizer.set_params(metric="dot").fit(bank.astype(dtype), gallery=gallery.astype(dtype))
        queries = queries.astype(dtype)
        sims = normalizer.similarities(queries)
        indices, scores = normalizer.top_k(queries=queries, k=k)
    else:
        normalizer.fit(tied_values(data.draw, (n_bank, n_gallery), dtype))
        sims = tied_values(data.draw, (n_queries, n_gallery), dtype)
        if source == "X":
            indices, scores = normalizer.top_k(sims, k=k)
        else:
            shards = [sims[:, start:stop] for start, stop in column_splits(data.draw, n_gallery)]
            indices, scores = normalizer.top_k(chunks=shards, k=k)

    expected_indices, expected_scores = expected_top_k(normalizer.transform(sims), k)
    assert scores.dtype == expected_scores.dtype
    assert_array_equal(indices, expected_indices)
    assert_array_equal(scores, expected_scores)


# -- rerankers ------------------------------------------------------------------------

RERANKERS = {
    "hinge": HingeReranker,
    "preference": PreferenceStrengthReranker,
    "pointwise": PointwiseReranker,
    "random_walk": RandomWalkReranker,
}


#: Exact in binary floating point: distances scale exactly (when they do not overflow or
#: underflow), so a scale-free graph is the same graph, nearest-neighbour ties included.
BINARY_FACTORS = [2.0**-600, 2.0**-40, 0.5, 2.0**40, 2.0**600]


#: Inexact: every feature is rounded, so equidistant neighbours may swap in a k-NN graph,
#: a legitimate tie-break; these factors are tried on the dense graph, which is continuous.
DECIMAL_FACTORS = [1e-200, 1e-100, 3.0, 1e100, 1e200]


def reranker_case(data):
    n_items = data.draw(st.integers(4, 10))
    n_dims = data.draw(st.integers(1, 3))
    features = data.draw(arrays(np.int64, (n_items, n_dims), elements=st.integers(-16, 16))) / 4.0
    c = data.draw(st.sampled_from([0.1, 1.0, 10.0]))
    return n_items, features, c


def rerank(name, features, initial_scores, c, graph, **params):
    reranker = RERANKERS[name](c=c, graph=graph, n_neighbors=3, sigma="median", **params)
    return reranker.fit_predict(features, initial_scores)


@pytest.mark.parametrize("name", list(RERANKERS))
@PROPERTY
@given(data=st.data())
def test_rerankers_ignore_the_scale_of_the_features(name, data):
    """With ``sigma="median"`` the Gaussian weights depend on distance ratios only, so
    multiplying the features by any positive factor, 2**+-600 and 1e+-200 included, leaves
    the graph, and so the scores, unchanged. Scores are compared within a tolerance (the
    solvers' and the rounding of the scaled features), which also makes the ranking
    comparison tie-aware: equal scores may come out in either order.
    Catches: squared distances that overflow or underflow (NaN or all-equal weights), a
    kernel width that is not the median edge length, a fixed sigma, a fallback width
    (zero median) that is not scale-free.
    """
    n_items, features, c = reranker_case(data)
    graph = data.draw(st.sampled_from(["knn", "dense"]))
    factors = BINARY_FACTORS + (DECIMAL_FACTORS if graph == "dense" else [])
    factor = data.draw(st.sampled_from(factors))
    initial = np.array(data.draw(st.permutations(range(n_items))), dtype=np.float64)
    params = {"initial": "rank"}
    expected = rerank(name, features, initial, c, graph, **params)
    found = rerank(name, features * factor, initial, c, graph, **params)

    tolerance = (1e-4 if name == "hinge" else 1e-8) * max(1.0, np.abs(expected).max())
    assert np.isfinite(found).all(), f"factor {factor!r} gives {found}"
    assert_allclose(found, expected, rtol=0, atol=tolerance, err_msg=f"factor {factor!r}")
    assert_same_ranking_up_to(expected[None], found[None], tolerance)


MONOTONE_MAPS = {
    "exp": np.exp,
    "affine": lambda x: 3 * x + 7,
    "cube": lambda x: x**3,
    "arctan": np.arctan,
    "tiny": lambda x: 1e-300 * x,
    "offset": lambda x: x + 1e6,
}


@pytest.mark.parametrize("name", list(RERANKERS))
@PROPERTY
@given(data=st.data())
def test_rank_initial_scores_ignore_monotone_maps(name, data):
    """With ``initial="rank"`` only the order of the initial scores matters (SPEC: rank-based
    rbar_i = 1 - i/N), so a strictly increasing map of them gives the same scores, bit for
    bit. The scores are multiples of 1/2 in [-3, 3]: ties are frequent and every map keeps
    them tied and keeps distinct values distinct. Catches: raw scores leaking into the
    pairs, their weights (preference strength's 1/(rbar_i - rbar_j)), the shift of a
    component or the solver's start, and ties ranked by value instead of by index.
    """
    n_items, features, c = reranker_case(data)
    graph = data.draw(st.sampled_from(["knn", "dense"]))
    initial = data.draw(arrays(np.int64, n_items, elements=st.integers(-6, 6))) / 2.0
    if np.ptp(initial) == 0:
        initial[0] += 1.0  # constant scores carry no order and are refused
    monotone = MONOTONE_MAPS[data.draw(st.sampled_from(sorted(MONOTONE_MAPS)))]
    mapped = monotone(initial)
    assert_array_equal(np.argsort(mapped, kind="stable"), np.argsort(initial, kind="stable"))
    assert np.array_equal(np.diff(np.sort(mapped)) > 0, np.diff(np.sort(initial)) > 0)

    expected = rerank(name, features, initial, c, graph, initial="rank")
    found = rerank(name, features, mapped, c, graph, initial="rank")

    assert_array_equal(found, expected)
