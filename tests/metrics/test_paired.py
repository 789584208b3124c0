"""Paired comparison: changes, bootstrap intervals against a plain loop, exact McNemar tests."""

import json

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.stats import binomtest

from skqbnorm.metrics import (
    _paired,
    correct_item_ranks,
    mean_average_precision,
    paired_comparison,
    retrieval_metrics,
)

from helpers import N_GALLERY, N_QUERIES, pair_of_rankings

METRICS = ("R@1", "R@5", "R@10", "MdR", "MnR", "mAP")


def relevance_matrix(gt):
    return gt if gt.ndim == 2 else np.eye(N_GALLERY, dtype=bool)[gt]


def loop_metrics(scores, gt, ties):
    """R@1/5/10, MdR, MnR by ``retrieval_metrics`` and mAP by ``mean_average_precision``."""
    metrics = retrieval_metrics(scores, gt, ties=ties)
    relevant = relevance_matrix(gt)
    groups = np.repeat(np.arange(len(scores)), scores.shape[1])
    metrics["mAP"] = mean_average_precision(scores.ravel(), relevant.ravel(), groups)
    return np.array([metrics[name] for name in METRICS])


def loop_bootstrap(a, b, gt, n_resamples, seed, ties):
    """The documented draws, one resample at a time, each evaluated from the matrices."""
    rng = np.random.default_rng(seed)
    changes = []
    for _ in range(n_resamples):
        drawn = rng.integers(0, len(a), size=len(a))
        changes.append(loop_metrics(b[drawn], gt[drawn], ties)
                       - loop_metrics(a[drawn], gt[drawn], ties))
    return np.array(changes)


@pytest.mark.slow
@pytest.mark.parametrize("relevance", [False, True], ids=["one correct", "several correct"])
@pytest.mark.parametrize("ties", ["official", "pessimistic"])
def test_intervals_equal_a_plain_loop_bootstrap(relevance, ties):
    a, b, gt = pair_of_rankings(1, relevance)
    result = paired_comparison(a, b, gt, ties=ties, n_resamples=300, confidence=0.9,
                               random_state=7)
    expected = loop_bootstrap(a, b, gt, 300, 7, ties)
    assert result.metrics == METRICS
    np.testing.assert_allclose(result.resampled_changes, expected, rtol=0, atol=1e-9)
    low, high = np.percentile(expected, [5, 95], axis=0)
    for name, lo, hi in zip(METRICS, low, high):
        assert result.interval[name] == pytest.approx((lo, hi), abs=1e-9), name
    assert np.ptp(expected, axis=0).min() > 0  # every metric's interval has a width to test
    full = loop_metrics(b, gt, ties) - loop_metrics(a, gt, ties)
    assert [result.change[name] for name in METRICS] == pytest.approx(full, abs=1e-12)


def test_blocks_of_resamples_draw_what_one_block_draws(monkeypatch):
    a, b, gt = pair_of_rankings(2)
    whole = paired_comparison(a, b, gt, n_resamples=250, random_state=3)
    monkeypatch.setattr(_paired, "RESAMPLE_BLOCK", 3 * N_QUERIES)  # blocks of 3 resamples
    blocked = paired_comparison(a, b, gt, n_resamples=250, random_state=3)
    np.testing.assert_array_equal(blocked.resampled_changes, whole.resampled_changes)


@pytest.mark.parametrize("relevance", [False, True], ids=["one correct", "several correct"])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_mcnemar_p_value_equals_binomtest_on_the_discordant_queries(relevance, k):
    a, b, gt = pair_of_rankings(4, relevance)
    hits_a = correct_item_ranks(a, gt) < k if k > 1 else correct_item_ranks(a, gt) == 0
    hits_b = correct_item_ranks(b, gt) < k if k > 1 else correct_item_ranks(b, gt) == 0
    a_only, b_only = np.sum(hits_a & ~hits_b), np.sum(hits_b & ~hits_a)
    assert a_only + b_only > 0
    tested = paired_comparison(a, b, gt, k=k, n_resamples=0).discordant[f"R@{k}"]
    assert (tested.a_only, tested.b_only) == (a_only, b_only)
    expected = binomtest(b_only, a_only + b_only, 0.5).pvalue
    assert tested.p_value == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("a_only, b_only", [(0, 1), (0, 7), (3, 3), (2, 9), (30, 4), (17, 25)])
def test_mcnemar_p_value_over_discordant_counts(a_only, b_only):
    hits_a = np.repeat([True, False, True, False], [a_only, b_only, 5, 6])
    hits_b = np.repeat([False, True, True, False], [a_only, b_only, 5, 6])
    tested = _paired._mcnemar(hits_a, hits_b)
    assert (tested.a_only, tested.b_only) == (a_only, b_only)
    expected = binomtest(b_only, a_only + b_only, 0.5).pvalue
    assert tested.p_value == pytest.approx(expected, rel=1e-12)


def test_identical_rankings_change_nothing():
    a, _, gt = pair_of_rankings(5, relevance=True)
    result = paired_comparison(a, a.copy(), gt, n_resamples=200, random_state=0)
    assert all(result.change[name] == 0 for name in METRICS)
    assert all(result.interval[name] == (0.0, 0.0) for name in METRICS)
    assert all(test == (0, 0, 1.0) for test in result.discordant.values())


def test_a_hand_built_case():
    a = [[3, 2, 1], [1, 3, 2], [1, 2, 3], [3, 2, 1]]
    b = [[3, 2, 1], [3, 1, 2], [2, 3, 1], [1, 3, 2]]
    gt = [0, 0, 0, 1]
    # ranks of the correct items: a 0, 2, 2, 1; b 0, 0, 1, 0
    result = paired_comparison(a, b, gt, k=(1, 2), n_resamples=0)
    assert result.value_a == pytest.approx(
        {"R@1": 25.0, "R@2": 50.0, "MdR": 2.5, "MnR": 2.25, "mAP": 13 / 24})
    assert result.value_b == pytest.approx(
        {"R@1": 75.0, "R@2": 100.0, "MdR": 1.0, "MnR": 1.25, "mAP": 21 / 24})
    assert result.change == pytest.approx(
        {"R@1": 50.0, "R@2": 50.0, "MdR": -1.5, "MnR": -1.0, "mAP": 1 / 3})
    assert result.discordant == {"R@1": (0, 2, 0.5), "R@2": (0, 2, 0.5)}  # 2 * (1/2)^2
    assert result.interval is None and result.resampled_changes.shape == (0, 5)


def test_a_hand_built_resample():
    """One resample of two queries drawn in a known order (seed 0 draws [1, 1])."""
    drawn = np.random.default_rng(0).integers(0, 2, size=2)
    assert drawn.tolist() == [1, 1]
    a, b = [[2, 1], [1, 2]], [[2, 1], [2, 1]]  # query 1 moves from rank 1 to rank 0
    result = paired_comparison(a, b, [0, 0], k=1, n_resamples=1, random_state=0)
    # the resample holds query 1 twice: R@1 0 -> 100, MdR and MnR 2 -> 1, AP 1/2 -> 1
    np.testing.assert_array_equal(result.resampled_changes, [[100.0, -1.0, -1.0, 0.5]])
    assert result.change == {"R@1": 50.0, "MdR": -0.5, "MnR": -0.5, "mAP": 0.25}


def test_tied_top_items_follow_ties_and_map_stays_pessimistic():
    a = [[1.0, 1.0, 0.0]]  # the correct item 0 ties with item 1 at the top
    b = [[1.0, 0.5, 0.0]]
    official = paired_comparison(a, b, [0], k=1, n_resamples=0)
    assert official.value_a == {"R@1": 0.0, "MdR": 1.5, "MnR": 1.5, "mAP": 0.5}
    optimistic = paired_comparison(a, b, [0], k=1, n_resamples=0, ties="optimistic")
    assert optimistic.value_a == {"R@1": 100.0, "MdR": 1.0, "MnR": 1.0, "mAP": 0.5}


@pytest.mark.parametrize("seed", [0, 1])
def test_one_correct_item_equals_its_relevance_matrix(seed):
    a, b, gt = pair_of_rankings(seed)
    by_index = paired_comparison(a, b, gt, n_resamples=50, random_state=1)
    by_matrix = paired_comparison(a, b, relevance_matrix(gt), n_resamples=50, random_state=1)
    np.testing.assert_allclose(by_index.resampled_changes, by_matrix.resampled_changes,
                               rtol=0, atol=1e-12)
    assert by_index.value_a == pytest.approx(by_matrix.value_a, abs=1e-12)


def test_several_correct_items_take_the_best_one_and_all_for_map():
    a = [[0.9, 0.8, 0.1, 0.5]]
    b = [[0.2, 0.8, 0.1, 0.9]]
    gt = [[0, 1, 1, 0]]  # both rank the correct items 2nd and 4th
    result = paired_comparison(a, b, gt, k=1, n_resamples=0)
    assert result.value_a == pytest.approx({"R@1": 0.0, "MdR": 2.0, "MnR": 2.0,
                                            "mAP": (1 / 2 + 2 / 4) / 2})
    assert result.value_b == pytest.approx({"R@1": 0.0, "MdR": 2.0, "MnR": 2.0,
                                            "mAP": (1 / 2 + 2 / 4) / 2})
    b = [[0.2, 0.8, 0.7, 0.1]]  # now 1st and 2nd
    result = paired_comparison(a, b, gt, k=1, n_resamples=0)
    assert result.value_b == pytest.approx({"R@1": 100.0, "MdR": 1.0, "MnR": 1.0, "mAP": 1.0})
    assert result.discordant["R@1"] == (0, 1, 1.0)


def test_same_seed_same_result_and_generators_advance():
    a, b, gt = pair_of_rankings(6)
    first = paired_comparison(a, b, gt, n_resamples=100, random_state=11)
    again = paired_comparison(a, b, gt, n_resamples=100, random_state=11)
    np.testing.assert_array_equal(first.resampled_changes, again.resampled_changes)
    rng = np.random.default_rng(11)
    assert np.array_equal(paired_comparison(a, b, gt, n_resamples=100, random_state=rng)
                          .resampled_changes, first.resampled_changes)
    other = paired_comparison(a, b, gt, n_resamples=100, random_state=rng)
    assert not np.array_equal(other.resampled_changes, first.resampled_changes)


def test_inputs_are_not_modified_and_float32_works():
    a, b, gt = pair_of_rankings(7)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    copies = a32.copy(), b32.copy(), gt.copy()
    result = paired_comparison(a32, b32, gt, n_resamples=20, random_state=0)
    for array, copy in zip((a32, b32, gt), copies):
        np.testing.assert_array_equal(array, copy)
    assert result.value_a["MnR"] == pytest.approx(retrieval_metrics(a32, gt)["MnR"])


def test_plain_rows_and_dict_for_csv_and_json():
    a, b, gt = pair_of_rankings(8)
    result = paired_comparison(a, b, gt, n_resamples=50, random_state=0)
    rows = result.to_rows()
    assert [row["metric"] for row in rows] == list(METRICS)
    assert rows[0]["change"] == result.change["R@1"]
    assert (rows[0]["low"], rows[0]["high"]) == result.interval["R@1"]
    assert rows[0]["p_value"] == result.discordant["R@1"].p_value
    assert rows[3]["a_only"] is None and rows[3]["p_value"] is None  # MdR has no test
    parsed = json.loads(json.dumps(result.to_dict()))
    assert parsed["n_queries"] == N_QUERIES and parsed["metrics"] == rows
    text = repr(result)
    assert text.startswith(f"Change b - a over {N_QUERIES} queries; 95% percentile")
    assert len(text.splitlines()) == 2 + len(METRICS)
    unresampled = paired_comparison(a, b, gt, n_resamples=0).to_rows()
    assert all(row["low"] is None and row["high"] is None for row in unresampled)


@pytest.mark.parametrize("change, error, message", [
    ({"scores_b": np.zeros((N_QUERIES, N_GALLERY - 1))}, ValueError,
     (r"scores_a and scores_b must score the same queries and gallery \(one shape\); got "
      r"scores_a of shape \(40, 30\) and scores_b of shape \(40, 29\)")),
    ({"scores_a": np.zeros(N_GALLERY)}, ValueError,
     r"scores_a must be a non-empty 2-D array .* got shape \(30,\)"),
    ({"scores_b": np.where(np.eye(N_QUERIES, N_GALLERY, 3) > 0, np.nan, 0.0)}, ValueError,
     r"scores_b contains NaN or infinity: the similarity of scores_b row 0 to gallery item 3"),
    ({"scores_a": np.full((N_QUERIES, N_GALLERY), "x")}, TypeError, "scores_a must hold real"),
    ({"n_resamples": -1}, ValueError, "n_resamples must be >= 0; got n_resamples=-1"),
    ({"n_resamples": 2.0}, TypeError, "n_resamples must be an integer"),
    ({"confidence": 1.0}, ValueError, r"confidence must be in \(0, 1\); got confidence=1.0"),
    ({"confidence": 0}, ValueError, r"confidence must be in \(0, 1\)"),
    ({"confidence": np.nan}, ValueError, "confidence must be finite"),
    ({"k": (1, 5, 1)}, ValueError, r"k must not repeat a cut-off; got k=\(1, 5, 1\)"),
    ({"k": 0}, ValueError, "k must be >= 1; got k=0"),
    ({"k": ()}, ValueError, "k must name at least one cut-off"),
    ({"k": 1.5}, TypeError, "k must be an int or a sequence of ints"),
    ({"ties": "fair"}, ValueError, "ties must be one of"),
    ({"random_state": "seed"}, TypeError, "random_state must be None, an int"),
    ({"gt": np.zeros(N_QUERIES + 1, dtype=int)}, ValueError,
     r"gt must hold one gallery index per query \(shape \(40,\)\)"),
])
def test_bad_arguments_name_the_parameter(change, error, message):
    a, b, gt = pair_of_rankings(9)
    arguments = {"scores_a": a, "scores_b": b, "gt": gt, "n_resamples": 10} | change
    with pytest.raises(error, match=message):
        paired_comparison(arguments.pop("scores_a"), arguments.pop("scores_b"),
                          arguments.pop("gt"), **arguments)


# -- per-query values: average_precisions and paired_mean_change -------------------------


def test_average_precisions_are_each_lists_ap_in_label_order(rng):
    from skqbnorm.metrics import average_precision, average_precisions, mean_average_precision

    groups = rng.choice(np.array(["q3", "q1", "q2"]), size=60)
    scores, relevance = np.round(rng.normal(size=60), 1), rng.random(60) < 0.4  # ties too
    expected = [average_precision(scores[groups == label], relevance[groups == label], n=7)
                for label in ("q1", "q2", "q3")]
    got = average_precisions(scores, relevance, groups, n=7)
    assert_allclose(got, expected, rtol=0, atol=0)
    assert np.isclose(got.mean(), mean_average_precision(scores, relevance, groups, n=7))


def test_paired_mean_change_equals_a_plain_bootstrap_loop(rng):
    from skqbnorm.metrics import paired_mean_change

    before, after = rng.random(37), rng.random(37)
    result = paired_mean_change(before, after, n_resamples=500, confidence=0.9,
                                random_state=3)
    draws = np.random.default_rng(3).integers(0, 37, size=(500, 37))
    resampled = [(after[draw] - before[draw]).mean() for draw in draws]
    assert result.change == pytest.approx(after.mean() - before.mean(), abs=1e-15)
    assert (result.value_a, result.value_b) == pytest.approx((before.mean(), after.mean()))
    assert_allclose([result.low, result.high], np.percentile(resampled, [5, 95]), rtol=1e-12)
    assert result.interval == (result.low, result.high)
    assert_allclose(result.resampled_changes, resampled, rtol=1e-12)
    alone = paired_mean_change(before, after, n_resamples=0)
    assert (alone.change, alone.interval, alone.low, alone.high) == (result.change, None, None,
                                                                     None)
    same = paired_mean_change(before, before, random_state=0)
    assert (same.change, same.interval) == (0.0, (0.0, 0.0))


@pytest.mark.parametrize("arguments, message", [
    ({"values_b": np.ones(4)}, r"values_a has shape \(3,\), values_b has shape \(4,\)"),
    ({"values_b": [1.0, np.nan, 0.0]}, r"values_b must be finite; values_b\[1\] is nan"),
    ({"n_resamples": -1}, r"n_resamples must be >= 0"),
    ({"confidence": 1.0}, r"confidence must be in \(0, 1\)"),
])
def test_paired_mean_change_names_bad_arguments(arguments, message):
    from skqbnorm.metrics import paired_mean_change

    call = {"values_a": [0.1, 0.2, 0.3], "values_b": [0.2, 0.2, 0.2], **arguments}
    with pytest.raises(ValueError, match=message):
        paired_mean_change(call.pop("values_a"), call.pop("values_b"), **call)


def test_paired_mean_change_draws_as_paired_comparison_and_never_overflows(rng):
    from skqbnorm.metrics import paired_mean_change
    from skqbnorm.metrics._paired import query_outcomes

    a, b, gt = pair_of_rankings(40)
    comparison = paired_comparison(a, b, gt, random_state=5)  # 10,000 resamples by default
    per_query = [query_outcomes(scores, gt, (1,)).average_precisions for scores in (a, b)]
    result = paired_mean_change(*per_query, random_state=5)
    assert result.change == pytest.approx(comparison.change["mAP"], abs=1e-15)
    assert_allclose(result.interval, comparison.interval["mAP"], rtol=1e-12)
    # Differences of 1.6e308 each: representable, but their sums are not.
    huge = paired_mean_change(np.full(4, -8e307), np.full(4, 8e307), random_state=0)
    assert_allclose((huge.change, *huge.interval), (1.6e308, 1.6e308, 1.6e308), rtol=1e-12)
    assert (huge.value_a, huge.value_b) == pytest.approx((-8e307, 8e307), rel=1e-12)


@pytest.mark.parametrize("values_a, values_b", [
    (np.full(4, -1.7e308), np.full(4, 1.7e308)),  # every difference beyond float64
    ([1e308, 1e308, -1e308], [-1e308, 1e308, 1e308]),  # the change is 0, the interval not
])
def test_paired_mean_change_refuses_differences_beyond_float64(values_a, values_b):
    """Finite values whose differences are not: once inf, now an error naming both."""
    from skqbnorm.metrics import paired_mean_change

    with pytest.raises(ValueError, match=r"values_b - values_a must be within float64's range"
                                         r".* rescale values_a and values_b"):
        paired_mean_change(values_a, values_b, random_state=0)
    largest = np.finfo(np.float64).max
    edge = paired_mean_change([-largest / 2] * 3, [largest / 2] * 3, random_state=0)
    assert edge.change == largest and np.isfinite(edge.interval).all()


def test_paired_mean_change_is_a_result_not_a_tuple():
    from skqbnorm.metrics import PairedMeanChange, paired_mean_change

    result = paired_mean_change([0.1, 0.5, 0.2], [0.3, 0.4, 0.6], n_resamples=50, random_state=1)
    assert isinstance(result, PairedMeanChange)
    with pytest.raises(TypeError):
        iter(result)
    assert (result.low, result.high) == result.interval
    assert result.to_dict()["high"] == result.high and result.to_dict()["n_queries"] == 3
    assert repr(result).startswith("Change b - a of the mean over 3 queries: +0.1667 ([")
