"""Edges of the metrics: strict arguments, tie conventions and boundaries pinned by hand."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skqbnorm.metrics import (
    average_precision,
    correct_item_ranks,
    discordant_pairs,
    hinge_distance,
    hubness,
    hubness_from_counts,
    k_occurrence,
    make_map_scorer,
    make_retrieval_scorer,
    mean_average_precision,
    ordered_pairs,
    pointwise_distance,
    preference_strength_distance,
    recall_at_k,
    retrieval_metrics,
)

TIES = ("official", "average", "optimistic", "pessimistic")
DISTANCES = (discordant_pairs, hinge_distance, preference_strength_distance, pointwise_distance)


# -- plain references ---------------------------------------------------------------------


def official_t2v_ranks(sims, gt):
    """The QB-Norm code's averaged ranks, literally: the mean position of the tied values."""
    ranks = []
    for row, target in zip(sims, gt):
        sorted_dists = sorted(-value for value in row)
        positions = [p for p, d in enumerate(sorted_dists) if d == -row[target]]
        ranks.append(sum(positions) / len(positions))
    return np.array(ranks)


def official_recalls(ranks):
    """``cols2metrics`` of the QB-Norm code (without its rounding to one decimal)."""
    return {
        "R@1": 100 * sum(rank == 0 for rank in ranks) / len(ranks),
        **{f"R@{k}": 100 * sum(rank < k for rank in ranks) / len(ranks) for k in (5, 10, 50)},
    }


def broken_tie_rank(row, relevant, correct_first):
    """Position of the first correct item once ties are broken for (or against) it."""
    items = sorted(
        range(len(row)),
        key=lambda j: (-row[j], (not relevant[j]) if correct_first else relevant[j]),
    )
    return next(p for p, j in enumerate(items) if relevant[j])


def plain_average_precision(scores, relevance, n=None, normaliser="relevant"):
    """AP over the list sorted by score, irrelevant items first among ties."""
    items = sorted(range(len(scores)), key=lambda j: (-scores[j], bool(relevance[j])))
    depth = len(items) if n is None else n
    n_relevant = sum(bool(r) for r in relevance)
    if normaliser == "truncated":
        n_relevant = min(n_relevant, depth)
    found, total = 0, 0.0
    for position, j in enumerate(items[:depth], start=1):
        if relevance[j]:
            found += 1
            total += found / position
    return total / n_relevant if n_relevant else 0.0


def tied_matrix(rng, shape, values=(0.0, 0.5, 1.0)):
    return rng.choice(np.array(values), size=shape)


# -- tie conventions ------------------------------------------------------------------------


def test_tied_ranks_written_out_by_hand():
    # Item 1 scores above; items 0, 2 and 3 tie at positions 1, 2, 3; item 4 is last.
    sims = np.array([[0.5, 0.9, 0.5, 0.5, 0.1]])
    expected = {"official": 2.0, "average": 2.0, "optimistic": 1.0, "pessimistic": 3.0}
    for ties, rank in expected.items():
        assert_array_equal(correct_item_ranks(sims, [0], ties=ties), [rank])
    # Two correct items (0 and 2) in the tie of three: the first lands at 1 or 2.
    relevant = np.array([[True, False, True, False, False]])
    expected = {"official": 2.0, "average": 2.0, "optimistic": 1.0, "pessimistic": 2.0}
    for ties, rank in expected.items():
        assert_array_equal(correct_item_ranks(sims, relevant, ties=ties), [rank])


def test_pairs_of_ties_give_half_ranks():
    sims = np.array([[0.7, 0.7, 0.1, 0.0], [0.2, 0.9, 0.9, 0.3], [0.4, 0.4, 0.4, 0.4]])
    assert_array_equal(correct_item_ranks(sims, [1, 2, 3]), [0.5, 0.5, 1.5])
    assert_array_equal(correct_item_ranks(sims, [1, 2, 3], ties="optimistic"), [0, 0, 0])
    assert_array_equal(correct_item_ranks(sims, [1, 2, 3], ties="pessimistic"), [1, 1, 3])


def row_with_rank(n_above, n_tied, n_gallery=60):
    """A row whose item 0 has ``n_above`` items above and ties with ``n_tied - 1`` others."""
    row = np.zeros(n_gallery)
    row[: n_tied] = 1.0
    row[n_tied : n_tied + n_above] = 2.0
    return row


# (items above, items tied incl. the correct one) -> averaged rank
RANK_CASES = {
    "K - 1": lambda k: (k - 1, 1),  # averaged rank K - 1: a hit everywhere
    "K - 0.5": lambda k: (k - 1, 2),  # tie over positions K - 1 and K
    "K": lambda k: (k, 1),  # first position past the cut-off
}

# Whether the correct item counts at R@K, for each case and convention.
HITS = {
    ("K - 1", "official"): True, ("K - 1", "average"): True,
    ("K - 1", "optimistic"): True, ("K - 1", "pessimistic"): True,
    ("K - 0.5", "average"): False, ("K - 0.5", "optimistic"): True,
    ("K - 0.5", "pessimistic"): False,
    ("K", "official"): False, ("K", "average"): False,
    ("K", "optimistic"): False, ("K", "pessimistic"): False,
}


@pytest.mark.parametrize("k", [1, 5, 10, 50])
@pytest.mark.parametrize("case", list(RANK_CASES))
@pytest.mark.parametrize("ties", TIES)
def test_recall_at_the_cut_off(k, case, ties):
    n_above, n_tied = RANK_CASES[case](k)
    sims = row_with_rank(n_above, n_tied)[None, :]
    hit = HITS.get((case, ties), k > 1)  # official at K - 0.5: only for K > 1
    assert retrieval_metrics(sims, [0], ties=ties)[f"R@{k}"] == (100.0 if hit else 0.0)
    ranks = correct_item_ranks(sims, [0], ties=ties)
    assert recall_at_k(ranks, k, ties=ties) == (100.0 if hit else 0.0)


def test_recall_at_k_on_ranks_by_hand():
    ranks = [0.0, 0.5, 1.0, 4.0, 4.5, 5.0]
    assert recall_at_k(ranks, 1) == pytest.approx(100 / 6)  # official: rank 0 only
    assert recall_at_k(ranks, 1, ties="average") == pytest.approx(100 / 6)
    assert recall_at_k(ranks, 5) == pytest.approx(500 / 6)  # official: rank < 5, 4.5 included
    assert recall_at_k(ranks, 5, ties="average") == pytest.approx(400 / 6)  # rank <= 4
    assert recall_at_k(ranks, 6, ties="average") == 100.0


@pytest.mark.parametrize("n_gallery", [2, 3, 10, 100])
def test_a_constant_matrix_is_never_a_hit_at_one(n_gallery):
    sims = np.full((4, n_gallery), 0.3)
    gt = np.arange(4) % n_gallery
    for ties in ("official", "average", "pessimistic"):
        assert retrieval_metrics(sims, gt, ties=ties)["R@1"] == 0.0
    assert retrieval_metrics(sims, gt, ties="optimistic")["R@1"] == 100.0
    # The averaged rank is the middle of the row for official and average alike.
    for ties in ("official", "average"):
        assert retrieval_metrics(sims, gt, ties=ties)["MnR"] == (n_gallery + 1) / 2


def test_constant_matrix_at_larger_cut_offs():
    sims, gt = np.zeros((3, 10)), [0, 4, 9]  # averaged rank 4.5
    assert retrieval_metrics(sims, gt)["R@5"] == 100.0  # the official rule: 4.5 < 5
    assert retrieval_metrics(sims, gt, ties="average")["R@5"] == 0.0
    assert retrieval_metrics(sims, gt, ties="pessimistic")["R@5"] == 0.0
    assert retrieval_metrics(sims, gt, ties="average")["R@10"] == 100.0


def test_official_convention_matches_the_released_code(rng):
    for _ in range(30):
        n_queries, n_gallery = rng.integers(1, 12), rng.integers(1, 70)
        sims = tied_matrix(rng, (n_queries, n_gallery))
        gt = rng.integers(0, n_gallery, n_queries)
        ranks = official_t2v_ranks(sims, gt)
        metrics = retrieval_metrics(sims, gt)
        for name, value in official_recalls(ranks).items():
            assert metrics[name] == pytest.approx(value)
        assert metrics["MdR"] == pytest.approx(np.median(ranks) + 1)
        assert metrics["MnR"] == pytest.approx(np.mean(ranks) + 1)
        average = retrieval_metrics(sims, gt, ties="average")
        for k in (1, 5, 10, 50):
            expected = 100 * sum(rank + 1 <= k for rank in ranks) / len(ranks)
            assert average[f"R@{k}"] == pytest.approx(expected)


def test_broken_ties_match_explicit_orderings(rng):
    for _ in range(30):
        n_queries, n_gallery = rng.integers(1, 8), rng.integers(1, 12)
        sims = tied_matrix(rng, (n_queries, n_gallery))
        relevant = rng.random((n_queries, n_gallery)) < 0.3
        relevant[np.arange(n_queries), rng.integers(0, n_gallery, n_queries)] = True
        for ties, correct_first in (("optimistic", True), ("pessimistic", False)):
            expected = [broken_tie_rank(s, r, correct_first) for s, r in zip(sims, relevant)]
            assert_array_equal(correct_item_ranks(sims, relevant, ties=ties), expected)
            gt = relevant.argmax(axis=1)
            one_hot = np.zeros_like(relevant)
            one_hot[np.arange(n_queries), gt] = True
            expected = [broken_tie_rank(s, r, correct_first) for s, r in zip(sims, one_hot)]
            assert_array_equal(correct_item_ranks(sims, gt, ties=ties), expected)


def test_float32_ranks_equal_float64_ranks_of_the_same_values(rng):
    sims = tied_matrix(rng, (20, 30)).astype(np.float32)
    gt = rng.integers(0, 30, 20)
    for ties in TIES:
        assert_array_equal(
            correct_item_ranks(sims, gt, ties=ties),
            correct_item_ranks(sims.astype(np.float64), gt, ties=ties),
        )


def test_scorer_uses_its_tie_convention():
    sims, gt = np.array([[0.7, 0.7, 0.1], [0.9, 0.2, 0.1]]), np.array([0, 0])
    assert make_retrieval_scorer("R@1")(None, sims, gt) == 50.0
    assert make_retrieval_scorer("R@1", ties="optimistic")(None, sims, gt) == 100.0


# -- ground truth ---------------------------------------------------------------------------


def test_gt_index_bounds():
    sims = np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
    assert_array_equal(correct_item_ranks(sims, [2, 2]), [0.0, 2.0])  # n_gallery - 1 is valid
    bounds = r"in \[0, 3\) for sims of shape \(2, 3\); got values in \[2, 3\]"
    with pytest.raises(ValueError, match=bounds):
        correct_item_ranks(sims, [2, 3])
    with pytest.raises(ValueError, match=r"got values in \[-1, 0\]"):
        correct_item_ranks(sims, [-1, 0])
    with pytest.raises(ValueError, match="integer gallery indices; got dtype bool"):
        correct_item_ranks(sims, [True, False])


def test_relevance_row_without_a_relevant_item_is_refused():
    sims = np.arange(12.0).reshape(4, 3)
    relevant = np.array([[1, 0, 0], [0, 0, 0], [0, 1, 1], [0, 0, 0]])
    missing = r"shape \(4, 3\)\); rows \[1 3\] have none \(2 of 4 rows\)"
    with pytest.raises(ValueError, match=missing):
        correct_item_ranks(sims, relevant)
    relevant[[1, 3], 0] = 1
    assert_array_equal(correct_item_ranks(sims, relevant), [2.0, 2.0, 0.0, 2.0])


def test_relevance_matrix_must_be_binary():
    sims = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"booleans or 0/1 \(shape \(2, 3\)\); gt\[1, 2\] is 2"):
        correct_item_ranks(sims, np.array([[1, 0, 0], [0, 1, 2]]))
    with pytest.raises(ValueError, match=r"gt\[0, 1\] is nan"):
        correct_item_ranks(sims, np.array([[1.0, np.nan, 0], [0, 1, 0]]))


def test_non_finite_similarities_are_named():
    sims = np.zeros((3, 4))
    sims[1, 2] = np.nan
    for function in (correct_item_ranks, retrieval_metrics):
        with pytest.raises(ValueError, match="sims row 1 to gallery item 2 is nan"):
            function(sims, [0, 0, 0])
    sims[1, 2] = -np.inf
    with pytest.raises(ValueError, match="sims row 1 to gallery item 2 is -inf"):
        k_occurrence(sims, 1)


@pytest.mark.parametrize(
    "sims, error, message",
    [
        (np.zeros(4), ValueError, r"sims must be a non-empty 2-D array .* got shape \(4,\)"),
        (np.zeros((0, 4)), ValueError, r"got shape \(0, 4\)"),
        (np.zeros((2, 2, 2)), ValueError, r"got shape \(2, 2, 2\)"),
        (np.zeros((2, 3), complex), TypeError, r"sims must hold real numbers; got dtype complex"),
        ([[0.1, 0.2], [0.3]], ValueError, "sims must be a rectangular array; .* 1 to 2"),
        ([[0.1, 0.2, 0.3], 0.3], ValueError, "ragged sequence of 2 rows of lengths 1 to 3"),
    ],
)
def test_bad_similarity_matrices_are_named(sims, error, message):
    for function in (retrieval_metrics, correct_item_ranks):
        with pytest.raises(error, match=message):
            function(sims, [0, 1])
    with pytest.raises(error, match=message):
        k_occurrence(sims, 1)


def test_sparse_and_integer_similarities():
    from scipy import sparse

    with pytest.raises(TypeError, match=r"sims must be a dense array; got a sparse matrix"):
        retrieval_metrics(sparse.eye(3, format="csr"), [0, 1, 2])
    assert retrieval_metrics(np.eye(3, dtype=np.int16), [0, 1, 2])["R@1"] == 100.0


# -- hubness --------------------------------------------------------------------------------


def plain_skewness(counts):
    mean = sum(counts) / len(counts)
    m2 = sum((c - mean) ** 2 for c in counts) / len(counts)
    m3 = sum((c - mean) ** 3 for c in counts) / len(counts)
    return m3 / m2**1.5


def test_hub_threshold_is_exactly_twice_k():
    # k = 2, four queries: N_k = 4 = 2k is a hub, N_k = 3 is not.
    assert hubness_from_counts([4, 3, 1, 0], k=2)["hub_occurrence"] == 4 / 8
    assert hubness_from_counts([3, 3, 2, 0], k=2)["hub_occurrence"] == 0.0
    assert hubness_from_counts([2, 1, 0], k=1)["hub_occurrence"] == 2 / 3


def test_hub_threshold_through_hubness():
    # Top-1 of three queries: item 0 twice (2 = 2k, a hub), item 2 once.
    sims = np.array([[0.9, 0.1, 0.0], [0.8, 0.2, 0.1], [0.1, 0.0, 0.6]])
    measures = hubness(sims, k=1)
    assert measures["hub_occurrence"] == 2 / 3
    assert measures["antihub_occurrence"] == 1 / 3
    assert measures["skewness"] == pytest.approx(plain_skewness([2, 0, 1]))


def test_constant_counts_have_zero_skewness():
    for counts in ([3, 3, 3, 3], [7] * 13, [1]):
        measures = hubness_from_counts(counts, k=1)
        assert measures["skewness"] == 0.0
        assert measures["gini"] == 0.0 and measures["robin_hood"] == 0.0
    assert hubness_from_counts([1, 1, 1, 2], k=1)["skewness"] == pytest.approx(
        plain_skewness([1, 1, 1, 2])
    )


def test_hubness_measures_written_out():
    measures = hubness_from_counts([4, 2, 0, 0], k=1)
    assert measures["robin_hood"] == pytest.approx(0.5 * (2.5 + 0.5 + 1.5 + 1.5) / 6)
    pairs = sum(abs(a - b) for a in (4, 2, 0, 0) for b in (4, 2, 0, 0))
    assert measures["gini"] == pytest.approx(pairs / (2 * 4**2 * 1.5))
    assert measures["skewness"] == pytest.approx(plain_skewness([4, 2, 0, 0]))


def test_huge_counts_stay_finite():
    measures = hubness_from_counts([1e300, 0.0, 0.0, 3e300], k=1)
    assert all(np.isfinite(value) for value in measures.values())
    assert measures["skewness"] == pytest.approx(plain_skewness([1.0, 0.0, 0.0, 3.0]))


@pytest.mark.parametrize(
    "counts, message",
    [
        ([0, 0, 0], r"all zero \(shape \(3,\)\)"),
        ([2, -1, 0], r"counts\[1\] is -1.0"),
        ([2, 1.5, 0], r"counts\[1\] is 1.5"),
        ([2, np.nan], r"counts must be finite; counts\[1\] is nan"),
        ([[1, 2]], r"1-D array; got shape \(1, 2\)"),
        ([], r"got shape \(0,\)"),
    ],
)
def test_bad_counts_are_refused(counts, message):
    with pytest.raises(ValueError, match=message):
        hubness_from_counts(counts, k=1)


def test_default_neighbourhood_is_ten(rng):
    sims = tied_matrix(rng, (15, 12))
    assert_array_equal(k_occurrence(sims), k_occurrence(sims, 10))
    assert hubness(sims) == hubness(sims, 10)
    assert k_occurrence(sims).sum() == 15 * 10


@pytest.mark.parametrize("function", [hubness, k_occurrence])
def test_hubness_k_must_be_an_integer(function):
    sims = np.eye(4)
    for k in (2.5, True, 2.0, "2"):
        with pytest.raises(TypeError, match=rf"k must be an integer; got k={k!r}"):
            function(sims, k=k)
    for k in (0, 5):
        message = rf"k must be in \[1, 4\] for sims of shape \(4, 4\); got k={k}"
        with pytest.raises(ValueError, match=message):
            function(sims, k=k)
    function(sims, k=np.int64(2))
    function(sims, k=4)  # k = n_gallery is the largest valid k
    with pytest.raises(TypeError, match="k must be an integer"):
        hubness_from_counts([1, 1], k=1.0)
    with pytest.raises(ValueError, match="k must be >= 1"):
        hubness_from_counts([1, 1], k=0)


# -- average precision ----------------------------------------------------------------------

SCORES = [6, 5, 4, 3, 2, 1]


@pytest.mark.parametrize(
    "relevance, n, relevant_ap, truncated_ap",
    [
        ([0, 1, 0, 1, 0, 0], 3, (1 / 2) / 2, (1 / 2) / 2),  # R = 2 < n: the two agree
        ([1, 0, 0, 1, 1, 0], 3, 1 / 3, 1 / 3),  # R = n = 3
        ([0, 1, 1, 1, 0, 1], 2, (1 / 2) / 4, (1 / 2) / 2),  # R = 4 > n = 2
        ([0, 1, 1, 1, 0, 1], None, (1 / 2 + 2 / 3 + 3 / 4 + 4 / 6) / 4, None),
    ],
)
def test_ap_normalisers_by_hand(relevance, n, relevant_ap, truncated_ap):
    truncated_ap = relevant_ap if truncated_ap is None else truncated_ap
    assert average_precision(SCORES, relevance, n) == pytest.approx(relevant_ap)
    got = average_precision(SCORES, relevance, n, normaliser="truncated")
    assert got == pytest.approx(truncated_ap)


def test_ap_depth_beyond_the_list_is_the_whole_list():
    relevance = [0, 1, 1, 0, 0, 1]
    whole = average_precision(SCORES, relevance)
    assert average_precision(SCORES, relevance, n=6) == whole
    assert average_precision(SCORES, relevance, n=50, normaliser="truncated") == whole


def test_ap_matches_a_plain_loop_with_ties(rng):
    for _ in range(40):
        size = rng.integers(1, 15)
        scores = rng.integers(0, 4, size).astype(float)
        relevance = rng.random(size) < 0.4
        for n in (None, 1, 2, 5):
            for normaliser in ("relevant", "truncated"):
                assert_allclose(
                    average_precision(scores, relevance, n, normaliser=normaliser),
                    plain_average_precision(scores, relevance, n, normaliser),
                )


def test_map_over_interleaved_groups_matches_per_query_loops(rng):
    for _ in range(20):
        size = rng.integers(1, 40)
        scores = rng.integers(0, 4, size).astype(float)
        relevance = rng.random(size) < 0.4
        groups = rng.choice(np.array(["b", "a", "c", "d"]), size)  # items of a query scattered
        for n in (None, 1, 3):
            for normaliser in ("relevant", "truncated"):
                expected = np.mean([
                    plain_average_precision(
                        list(scores[groups == g]), list(relevance[groups == g]), n, normaliser
                    )
                    for g in np.unique(groups)
                ])
                got = mean_average_precision(scores, relevance, groups, n, normaliser=normaliser)
                assert_allclose(got, expected)


def test_map_by_hand():
    scores = [1, 3, 2, 3, 2, 1, 9]
    relevance = [0, 1, 0, 0, 0, 1, 0]
    groups = [5, 5, 5, 2, 2, 2, 7]  # AP 1, AP 1/3 and a query without relevant items
    assert mean_average_precision(scores, relevance, groups) == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert mean_average_precision(scores, relevance, groups, n=2) == pytest.approx(1 / 3)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_ap_refuses_non_finite_scores(bad):
    with pytest.raises(ValueError, match=rf"scores must be finite; scores\[1\] is {bad}"):
        average_precision([3, bad, 1], [1, 0, 0])
    with pytest.raises(ValueError, match=rf"scores\[1\] is {bad}"):
        mean_average_precision([3, bad, 1], [1, 0, 0], [0, 0, 0])


@pytest.mark.parametrize("n", [2.7, 2.0, True, np.True_, "2"])
def test_ap_depth_must_be_an_integer(n):
    with pytest.raises(TypeError, match=r"n must be an integer; got n="):
        average_precision([3, 2, 1], [1, 0, 1], n=n)
    with pytest.raises(TypeError, match=r"n must be an integer; got n="):
        mean_average_precision([3, 2, 1], [1, 0, 1], [0, 0, 0], n=n)
    with pytest.raises(TypeError, match=r"n must be an integer; got n="):
        make_map_scorer(n=n)


def test_ap_argument_errors():
    assert average_precision([3, 2, 1], [1, 0, 1], n=np.int64(1)) == 0.5
    with pytest.raises(ValueError, match=r"n must be >= 1; got n=-1"):
        average_precision([3, 2, 1], [1, 0, 1], n=-1)
    with pytest.raises(ValueError, match=r"booleans or 0/1; relevance\[1\] is 2"):
        average_precision([3, 2, 1], [1, 2, 0])
    with pytest.raises(ValueError, match=r"relevance\[0\] is nan"):
        average_precision([3, 2, 1], [np.nan, 1, 0])
    with pytest.raises(ValueError, match=r"relevance has shape \(2,\), scores has shape \(3,\)"):
        average_precision([3, 2, 1], [1, 0])
    with pytest.raises(ValueError, match=r"scores must be a non-empty 1-D array; got shape \(3, 1"):
        average_precision([[3], [2], [1]], [1, 0, 0])
    with pytest.raises(ValueError, match=r"got shape \(0,\)"):
        average_precision([], [])
    with pytest.raises(TypeError, match="scores must hold real numbers"):
        average_precision(["a", "b"], [1, 0])
    with pytest.raises(ValueError, match=r"groups has shape \(2,\), scores has shape \(3,\)"):
        mean_average_precision([3, 2, 1], [1, 0, 1], [0, 0])
    with pytest.raises(ValueError, match=r"groups must not hold NaN; groups\[2\] is nan"):
        mean_average_precision([3, 2, 1], [1, 0, 1], [0.0, 1.0, np.nan])
    with pytest.raises(ValueError, match=r"normaliser must be one of \('relevant', 'truncated'\)"):
        mean_average_precision([3, 2, 1], [1, 0, 1], [0, 0, 0], normaliser="x")


# -- ranking distances ----------------------------------------------------------------------


@pytest.mark.parametrize("distance", DISTANCES)
def test_distances_refuse_mismatched_lengths(distance):
    for scores, initial in (([1.0, 2.0, 3.0], [1.0, 2.0]), ([1.0, 2.0], [1.0, 2.0, 3.0])):
        shapes = (
            rf"scores of shape \({len(scores)},\) and initial_scores of shape \({len(initial)},\)"
        )
        with pytest.raises(ValueError, match=shapes):
            distance(scores, initial)


@pytest.mark.parametrize("distance", DISTANCES)
def test_distances_refuse_bad_arrays(distance):
    with pytest.raises(ValueError, match=r"scores must be a non-empty 1-D array; got shape \(2, 2"):
        distance(np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"must be finite; initial_scores\[1\] is nan"):
        distance([1.0, 2.0], [1.0, np.nan])
    with pytest.raises(ValueError, match=r"scores must be finite; scores\[0\] is inf"):
        distance([np.inf, 2.0], [1.0, 0.0])


@pytest.mark.parametrize("distance", [hinge_distance, preference_strength_distance])
def test_pairs_are_checked(distance):
    scores, initial = [1.0, 2.0, 0.0], [3.0, 2.0, 1.0]
    with pytest.raises(ValueError, match=r"pairs\[1\] must hold item indices in \[0, 3\)"):
        distance(scores, initial, pairs=([0], [3]))
    with pytest.raises(ValueError, match=r"got shapes \(2,\) and \(1,\)"):
        distance(scores, initial, pairs=([0, 1], [2]))
    with pytest.raises(TypeError, match=r"pairs\[0\] must hold integer item indices"):
        distance(scores, initial, pairs=([0.0], [1]))
    with pytest.raises(TypeError, match="pairs must be a tuple"):
        distance(scores, initial, pairs=5)
    assert distance(scores, initial, pairs=([], [])) == 0.0


def test_distance_scalar_arguments():
    for margin in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="margin must be finite and >= 0.0"):
            hinge_distance([1.0, 0.0], [1.0, 0.0], margin=margin)
    with pytest.raises(TypeError, match="margin must be a real number"):
        hinge_distance([1.0, 0.0], [1.0, 0.0], margin=True)
    with pytest.raises(TypeError, match="squared must be a bool"):
        pointwise_distance([1.0, 0.0], [1.0, 0.0], squared="yes")
    with pytest.raises(ValueError, match=r"initial_scores\[0\] is nan"):
        ordered_pairs([np.nan, 1.0])


def test_distances_by_hand():
    assert pointwise_distance([3.0, 0.0], [0.0, 4.0]) == 5.0
    assert pointwise_distance([3.0, 0.0], [0.0, 4.0], squared=True) == 25.0
    assert discordant_pairs([1.0, 1.0, 0.0], [3.0, 2.0, 1.0]) == 1  # a tie counts as discordant
    assert hinge_distance([1.0, 2.0, 0.0], [3.0, 2.0, 1.0], pairs=([1], [2]), margin=3.0) == 1.0
    # A tied initial pair carries no preference and is skipped.
    assert preference_strength_distance([0.0, 1.0, 0.0], [2.0, 1.0, 1.0]) == 1.0 + 4.0
    assert preference_strength_distance([0.0, 1.0, 0.0], [2.0, 1.0, 1.0], pairs=([1], [2])) == 0.0


def test_distances_stay_finite_at_the_float64_limits():
    assert pointwise_distance([1e200, 0.0], [0.0, 1e200]) == pytest.approx(np.sqrt(2) * 1e200)
    assert pointwise_distance([1e-200, 0.0], [0.0, 1e-200]) == pytest.approx(np.sqrt(2) * 1e-200)
    assert pointwise_distance([1e308, 0.0], [0.0, 1e308]) == pytest.approx(np.sqrt(2) * 1e308)
    assert pointwise_distance([5e-324, 0.0], [0.0, 5e-324]) == 5e-324  # rounds to the smallest
    assert preference_strength_distance([5e307, -5e307], [1e308, -1e308]) == pytest.approx(0.25)
    assert hinge_distance([-1e150, 1e150], [1.0, 0.0]) == pytest.approx(4e300)
    with pytest.raises(ValueError, match="scores and margin=1e[+]300 exceeds the float64 range"):
        hinge_distance([0.0, 1.0], [1.0, 0.0], margin=1e300)
    for overflowing in (
        lambda: pointwise_distance([1e300, 0.0], [0.0, 1e300], squared=True),
        lambda: hinge_distance([-1e200, 1e200], [1.0, 0.0]),
        lambda: preference_strength_distance([1.0, 0.0], [1e-200, 0.0]),
    ):
        with pytest.raises(ValueError, match="of scores and .* exceeds the float64 range"):
            overflowing()


# -- scorers and conventions ---------------------------------------------------------------


def test_scorer_arguments_are_checked_at_construction():
    normalisers = r"normaliser must be one of \('relevant', 'truncated'\); got normaliser='x'"
    with pytest.raises(ValueError, match=normalisers):
        make_map_scorer(normaliser="x")
    with pytest.raises(ValueError, match="n must be >= 1; got n=0"):
        make_map_scorer(n=0)
    with pytest.raises(ValueError, match="metric must be one of .*got metric='MdR'"):
        make_retrieval_scorer("MdR")
    with pytest.raises(ValueError, match="ties must be one of .*got ties='random'"):
        make_retrieval_scorer("R@1", ties="random")


def test_tie_and_k_arguments_are_checked():
    sims = np.zeros((2, 3))
    for function in (correct_item_ranks, retrieval_metrics):
        with pytest.raises(ValueError, match=r"ties must be one of \('official', 'average'"):
            function(sims, [0, 1], ties="mean")
    with pytest.raises(TypeError, match="k must be an integer; got k=True"):
        recall_at_k([0.0, 1.0], True)
    with pytest.raises(TypeError, match="k must be an integer; got k=1.0"):
        recall_at_k([0.0, 1.0], 1.0)
    with pytest.raises(ValueError, match=r"ranks must be non-negative; ranks\[1\] is -1.0"):
        recall_at_k([0.0, -1.0], 1)
    with pytest.raises(ValueError, match=r"ranks\[0\] is nan"):
        recall_at_k([np.nan], 1)


def test_inputs_are_not_modified(rng):
    sims = tied_matrix(rng, (5, 6))
    gt, scores, relevance = np.arange(5), rng.normal(size=6), np.array([1, 0, 1, 0, 0, 1])
    copies = [array.copy() for array in (sims, gt, scores, relevance)]
    retrieval_metrics(sims, gt, ties="pessimistic")
    hubness(sims, k=2)
    average_precision(scores, relevance, 3)
    hinge_distance(scores, scores[::-1], margin=1.0)
    preference_strength_distance(scores, scores[::-1])
    for array, copy in zip((sims, gt, scores, relevance), copies):
        assert_array_equal(array, copy)
