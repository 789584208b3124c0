"""Retrieval metrics (ranks, recall@k, the tie conventions) against plain references and
values pinned by hand; strict arguments and boundaries."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse

from skqbnorm.metrics import (
    average_precision,
    correct_item_ranks,
    hinge_distance,
    hubness,
    k_occurrence,
    preference_strength_distance,
    recall_at_k,
    retrieval_metrics,
)

import reference as ref
from helpers import tied_matrix


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 8), st.integers(1, 9)), elements=st.sampled_from([0.0, 0.5, 1.0, 2.0])),
    st.data(),
)
def test_ranks_average_ties(sims, data):
    gt = np.array([data.draw(st.integers(0, sims.shape[1] - 1)) for _ in range(len(sims))])
    assert_allclose(correct_item_ranks(sims, gt), ref.correct_ranks(sims, gt))


def test_constant_matrix_scores_like_chance():
    metrics = retrieval_metrics(np.zeros((10, 100)), np.arange(10))
    assert metrics["R@1"] == metrics["R@5"] == metrics["R@10"] == 0.0
    assert metrics["MdR"] == metrics["MnR"] == 50.5


def test_recalls_and_ranks_by_hand():
    sims = np.array([[0.9, 0.1, 0.0], [0.1, 0.9, 0.5], [0.3, 0.2, 0.1], [0.2, 0.2, 0.9]])
    gt = np.array([0, 2, 2, 1])  # ranks 0, 1, 2, 1.5
    metrics = retrieval_metrics(sims, gt)
    assert metrics["R@1"] == 25.0 and metrics["R@5"] == 100.0
    assert metrics["MdR"] == 2.25 and metrics["MnR"] == 2.125
    assert_allclose(metrics["geometric_mean"], (25.0 * 100 * 100) ** (1 / 3))


def test_relevance_matrix_takes_the_best_correct_item(rng):
    sims = rng.normal(size=(30, 20))
    relevant = rng.random((30, 20)) < 0.2
    relevant[np.arange(30), rng.integers(0, 20, 30)] = True
    per_item = np.array([[ref.correct_ranks(sims[[q]], [j])[0] for j in range(20)] for q in range(30)])
    expected = np.where(relevant, per_item, np.inf).min(axis=1)
    assert_allclose(correct_item_ranks(sims, relevant), expected)


def test_metric_input_errors():
    with pytest.raises(ValueError, match=r"gt must hold gallery indices in \[0, 3\).*got values in \[0, 3\]"):
        retrieval_metrics(np.zeros((2, 3)), [0, 3])
    with pytest.raises(ValueError, match=r"one gallery index per query \(shape \(2,\)\)"):
        retrieval_metrics(np.zeros((2, 3)), [0, 1, 2])
    with pytest.raises(ValueError, match="rows \\[1\\] have none"):
        retrieval_metrics(np.zeros((2, 3)), np.array([[1, 0, 0], [0, 0, 0]], dtype=bool))
    with pytest.raises(ValueError, match="integer gallery indices"):
        retrieval_metrics(np.zeros((2, 3)), [0.5, 1.0])


TIES = ("official", "average", "optimistic", "pessimistic")


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

    with pytest.raises(TypeError, match=r"sims must be a dense array; got a sparse matrix"):
        retrieval_metrics(sparse.eye(3, format="csr"), [0, 1, 2])
    assert retrieval_metrics(np.eye(3, dtype=np.int16), [0, 1, 2])["R@1"] == 100.0


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


def test_recall_at_k_refuses_k_zero():
    with pytest.raises(ValueError, match="k must be >= 1"):
        recall_at_k([0.0, 1.0], 0)


def test_bad_relevance_matrix_entries_are_named_at_the_first():
    sims = [[0.9, 0.5, 0.1], [0.8, 0.1, 0.7]]
    with pytest.raises(ValueError, match=r"gt\[0, 1\] is 2"):
        correct_item_ranks(sims, [[1, 2, 0], [3, 1, 0]])
