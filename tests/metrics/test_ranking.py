"""Average precision and the ranking distances, including the paper's toy example."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skqbnorm.metrics import (
    average_precision,
    discordant_pairs,
    hinge_distance,
    make_map_scorer,
    mean_average_precision,
    ordered_pairs,
    pointwise_distance,
    preference_strength_distance,
)

R0 = [1.0, 0.9, 0.8, 0.7, 0.6]


R1 = [0.6, 0.7, 0.8, 0.9, 1.0]


R2 = [1.5, 0.7, 0.8, 0.9, 1.0]


R3 = [0.5, 0.4, 0.3, 0.2, 0.1]


def test_paper_toy_example():
    distances = [round(pointwise_distance(r, R0), 2) for r in (R1, R2, R3)]
    assert distances == [0.63, 0.70, 1.12]
    assert [discordant_pairs(r, R0) for r in (R1, R2, R3)] == [10, 6, 0]
    # The pair-wise distances see what the point-wise one misses: r3 keeps the order.
    assert hinge_distance(R3, R0) == 0.0 < hinge_distance(R2, R0) < hinge_distance(R1, R0)
    assert preference_strength_distance(R3, R0) == pytest.approx(0.0, abs=1e-20)  # same gaps


def test_hinge_and_preference_by_hand():
    initial = [3.0, 2.0, 1.0]
    scores = [1.0, 2.0, 0.0]  # pairs (0,1) reversed by 1; (0,2), (1,2) kept by 1 and 2
    assert hinge_distance(scores, initial) == 1.0
    assert hinge_distance(scores, initial, margin=1.5) == 2.5**2 + 0.5**2 + 0.0
    # gaps ratio: (0,1): -1/1, (0,2): 1/2, (1,2): 2/1
    assert_allclose(preference_strength_distance(scores, initial), 4 + 0.25 + 1)


def test_average_precision_by_hand():
    assert_allclose(average_precision([4, 3, 2, 1], [0, 1, 0, 1]), (1 / 2 + 2 / 4) / 2)
    assert_allclose(average_precision([4, 3, 2, 1], [0, 1, 0, 1], n=2), (1 / 2) / 2)
    assert_allclose(average_precision([4, 3, 2, 1], [0, 1, 0, 1], n=2, denominator="truncated"), (1 / 2) / 2)
    assert_allclose(average_precision([4, 3, 2, 1], [1, 0, 0, 1], n=1, denominator="truncated"), 1.0)
    assert average_precision([1, 2], [0, 0]) == 0.0


def test_average_precision_matches_sklearn_without_ties(rng):
    from sklearn.metrics import average_precision_score

    for _ in range(20):
        scores, relevance = rng.normal(size=50), rng.random(50) < 0.3
        if relevance.any():
            assert_allclose(average_precision(scores, relevance), average_precision_score(relevance, scores))


def test_ties_never_flatter():
    # A constant list: the relevant item is placed after the irrelevant ones.
    assert_allclose(average_precision([1, 1, 1, 1], [1, 0, 0, 0]), 1 / 4)


def test_mean_average_precision_over_groups():
    scores = [3, 2, 1, 3, 2, 1]
    relevance = [1, 0, 0, 0, 0, 1]
    assert_allclose(mean_average_precision(scores, relevance, [7, 7, 7, 9, 9, 9]), (1 + 1 / 3) / 2)


def test_ranking_metric_errors():
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        average_precision([1, 2, 3], [1, 0])
    with pytest.raises(ValueError, match="denominator must be"):
        average_precision([1, 2], [1, 0], denominator="all")
    with pytest.raises(ValueError, match=r"n must be >= 1; got n=0"):
        average_precision([1, 2], [1, 0], n=0)


DISTANCES = (discordant_pairs, hinge_distance, preference_strength_distance, pointwise_distance)


def plain_average_precision(scores, relevance, n=None, denominator="relevant"):
    """AP over the list sorted by score, irrelevant items first among ties."""
    items = sorted(range(len(scores)), key=lambda j: (-scores[j], bool(relevance[j])))
    depth = len(items) if n is None else n
    n_relevant = sum(bool(r) for r in relevance)
    if denominator == "truncated":
        n_relevant = min(n_relevant, depth)
    found, total = 0, 0.0
    for position, j in enumerate(items[:depth], start=1):
        if relevance[j]:
            found += 1
            total += found / position
    return total / n_relevant if n_relevant else 0.0


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
def test_ap_denominators_by_hand(relevance, n, relevant_ap, truncated_ap):
    truncated_ap = relevant_ap if truncated_ap is None else truncated_ap
    assert average_precision(SCORES, relevance, n) == pytest.approx(relevant_ap)
    got = average_precision(SCORES, relevance, n, denominator="truncated")
    assert got == pytest.approx(truncated_ap)


def test_ap_depth_beyond_the_list_is_the_whole_list():
    relevance = [0, 1, 1, 0, 0, 1]
    whole = average_precision(SCORES, relevance)
    assert average_precision(SCORES, relevance, n=6) == whole
    assert average_precision(SCORES, relevance, n=50, denominator="truncated") == whole


def test_ap_matches_a_plain_loop_with_ties(rng):
    for _ in range(40):
        size = rng.integers(1, 15)
        scores = rng.integers(0, 4, size).astype(float)
        relevance = rng.random(size) < 0.4
        for n in (None, 1, 2, 5):
            for denominator in ("relevant", "truncated"):
                assert_allclose(
                    average_precision(scores, relevance, n, denominator=denominator),
                    plain_average_precision(scores, relevance, n, denominator),
                )


def test_map_over_interleaved_groups_matches_per_query_loops(rng):
    for _ in range(20):
        size = rng.integers(1, 40)
        scores = rng.integers(0, 4, size).astype(float)
        relevance = rng.random(size) < 0.4
        groups = rng.choice(np.array(["b", "a", "c", "d"]), size)  # items of a query scattered
        for n in (None, 1, 3):
            for denominator in ("relevant", "truncated"):
                expected = np.mean([
                    plain_average_precision(
                        list(scores[groups == g]), list(relevance[groups == g]), n, denominator
                    )
                    for g in np.unique(groups)
                ])
                got = mean_average_precision(scores, relevance, groups, n, denominator=denominator)
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
    with pytest.raises(ValueError, match=r"denominator must be one of \('relevant', 'truncated'\)"):
        mean_average_precision([3, 2, 1], [1, 0, 1], [0, 0, 0], denominator="x")


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


# ---------------------------------------------------------------- ranking distances


@pytest.mark.parametrize(
    "pairs", [([1, -1], [0, 2]), ([0, 1], [2, -1]), ([0, 3], [1, 2]), ([0, 1], [3, 2])]
)
def test_pairs_outside_the_list_are_refused(pairs):
    # Each side mixes a valid index with -1 or n_items (3): the first and the last bad
    # value of a side, just outside [0, n_items).
    with pytest.raises(ValueError, match=r"pairs\[[01]\]"):
        hinge_distance([1.0, 2.0, 3.0], [3.0, 2.0, 1.0], pairs=pairs)
    with pytest.raises(ValueError, match=r"pairs\[[01]\]"):
        preference_strength_distance([1.0, 2.0, 3.0], [3.0, 2.0, 1.0], pairs=pairs)


def test_pairs_at_the_ends_of_the_list_are_accepted():
    # Items 0 and 2 (the first and last index) are valid: gap 2 - 0 reversed by 2.
    assert hinge_distance([0.0, 5.0, 2.0], [3.0, 2.0, 1.0], pairs=([0], [2])) == 4.0


def test_pointwise_distance_near_the_float64_limits():
    # Squares of 1e308 overflow and those of 5e-324 (the smallest subnormal) underflow:
    # the power-of-two scaling must keep both exact.
    assert pointwise_distance([1e308, 0.0], [0.0, 0.0]) == 1e308
    assert pointwise_distance([0.0, 0.0], [0.0, -1e308]) == 1e308
    assert pointwise_distance([5e-324, 0.0], [0.0, 0.0]) == 5e-324
    assert pointwise_distance([3e-300, 0.0], [0.0, 4e-300]) == pytest.approx(5e-300)
    assert hinge_distance([0.0, 1e-155], [2.0, 1.0]) == pytest.approx(1e-310)


def test_bad_relevance_labels_are_named_at_the_first():
    with pytest.raises(ValueError, match=r"relevance\[1\] is 2"):
        average_precision([3.0, 2.0, 1.0], [0, 2, 5])


# ------------------------------------------------------------------ small API edges


def test_hinge_distance_overflow_names_the_margin_only_when_there_is_one():
    # The reversed gap 2e308 squared exceeds float64: with margin 0 the distance
    # depends on the scores alone, with margin 1 on the margin too.
    with pytest.raises(ValueError, match="of scores and initial_scores exceeds"):
        hinge_distance([-1e308, 1e308], [2.0, 1.0], margin=0.0)
    with pytest.raises(ValueError, match="of scores and margin=1 exceeds"):
        hinge_distance([-1e308, 1e308], [2.0, 1.0], margin=1.0)
