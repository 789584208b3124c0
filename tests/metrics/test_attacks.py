"""hub_capture, planted_recall_change and hub_outliers against hand references."""

import numpy as np
import pytest

from skqbnorm.metrics import hub_capture, hub_outliers, paired_mean_change, planted_recall_change


def reference_capture(scores, planted, k):
    """A query is captured when fewer than k real items score strictly above its best
    planted item (ties go to the planted item): one query at a time."""
    scores = np.asarray(scores, dtype=float)
    real = np.setdiff1d(np.arange(scores.shape[1]), planted)
    captured = []
    for row in scores:
        best_planted = row[planted].max()
        ahead = np.sum(row[real] > best_planted)
        others_planted = np.sum(row[planted] > best_planted)  # none: it is their maximum
        captured.append(ahead + others_planted < k)
    return np.array(captured)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_capture_matches_a_query_by_query_reference(k):
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 6, size=(200, 9)).astype(float)  # many ties
    planted = np.array([2, 7])
    result = hub_capture(scores, planted, k=k, n_resamples=0)
    expected = reference_capture(scores, planted, k)
    np.testing.assert_array_equal(result.captured, expected)
    assert result.capture == pytest.approx(expected.mean())


def test_capture_by_hand():
    scores = [[0.9, 0.1, 0.5], [0.2, 0.8, 0.8], [0.3, 0.2, 0.1]]
    assert hub_capture(scores, [2], n_resamples=0).captured.tolist() == [False, True, False]
    assert hub_capture(scores, [1, 2], n_resamples=0).capture == pytest.approx(1 / 3)


def test_capture_interval_is_the_bootstrap_of_the_mean():
    """The same draws as paired_mean_change of the captured indicator against zeros."""
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(300, 20))
    scores[:90, 19] = 10.0  # the planted item tops 90 queries
    result = hub_capture(scores, [19], n_resamples=500, random_state=2)
    reference = paired_mean_change(np.zeros(300), result.captured.astype(float),
                                   n_resamples=500, random_state=2)
    assert result.capture == pytest.approx(np.mean(scores.argmax(axis=1) == 19))
    np.testing.assert_allclose(result.interval, reference.interval)
    assert result.low < result.capture < result.high


def test_recall_change_counts_the_queries_a_hub_takes():
    rng = np.random.default_rng(3)
    clean = rng.normal(size=(100, 30))
    gt = clean.argmax(axis=1)  # R@1 is 100% before the attack
    hub = np.where(np.arange(100) < 40, 100.0, -100.0)[:, None]  # takes 40 queries
    result = planted_recall_change(clean, np.hstack([clean, hub]), gt, n_resamples=200,
                                   random_state=0)
    assert (result.value_a, result.value_b, result.change) == (100.0, 60.0, -40.0)
    assert result.high <= 0


def test_outliers_find_a_planted_hub():
    """A planted item near the bank's centroid is reached by far more bank queries
    than any real item, and is the one flagged."""
    rng = np.random.default_rng(4)
    bank = rng.normal(size=(400, 16)) + 0.6
    gallery = rng.normal(size=(200, 16))
    hub = bank.mean(axis=0, keepdims=True)
    unit = (lambda X: X / np.linalg.norm(X, axis=1, keepdims=True))
    attacked = unit(np.vstack([gallery, hub]))
    report = hub_outliers(unit(bank) @ attacked.T, k=5)
    assert report.flagged[0] == 200
    assert report.scores[200] > 3.5 and report.counts[200] > 100


def test_outlier_scores_by_hand():
    counts_wanted = np.array([0, 1, 1, 2, 2, 2, 3, 9])
    bank_sims = np.zeros((counts_wanted.sum(), len(counts_wanted)))
    owner = np.repeat(np.arange(len(counts_wanted)), counts_wanted)
    bank_sims[np.arange(len(owner)), owner] = 1.0  # each bank query's top-1 is its owner
    report = hub_outliers(bank_sims, k=1, threshold=3.0)
    np.testing.assert_array_equal(report.counts, counts_wanted)
    # median 2, absolute deviations 2 1 1 0 0 0 1 7: MAD 1
    assert report.median == 2.0 and report.spread == pytest.approx(1.4826)
    np.testing.assert_allclose(report.scores, (counts_wanted - 2) / 1.4826)
    np.testing.assert_array_equal(report.flagged, [7])


def test_outliers_fall_back_to_the_mean_deviation_when_the_mad_is_zero():
    counts_wanted = np.array([0, 0, 0, 0, 0, 0, 8])
    bank_sims = np.zeros((8, 7))
    bank_sims[:, 6] = 1.0
    report = hub_outliers(bank_sims, k=1)
    assert report.spread == pytest.approx(1.2533 * 8 / 7)
    np.testing.assert_array_equal(report.counts, counts_wanted)
    np.testing.assert_array_equal(report.flagged, [6])
    assert np.all(report.scores[:6] == 0)


@pytest.mark.parametrize("call, match", [
    (lambda s: hub_capture(s, [5]), r"planted must index the gallery, in \[0, 5\)"),
    (lambda s: hub_capture(s, [1, 1]), "planted must not repeat"),
    (lambda s: hub_capture(s, []), "planted must be a non-empty"),
    (lambda s: hub_capture(s, [0], k=6), r"k must be in \[1, 5\] for scores of shape \(4, 5\)"),
    (lambda s: hub_capture(s, [0], confidence=1.0), "confidence"),
    (lambda s: planted_recall_change(s, s[:, :3], [0, 1, 2, 3]),
     r"attacked_scores .*\(4, 5\).*\(4, 3\)"),
    (lambda s: planted_recall_change(s, s, [0, 1]), r"gt .*\(4,\); got shape \(2,\)"),
    (lambda s: planted_recall_change(s[:, :3], s, [0, 1, 2, 3]), r"gt must index real items"),
    (lambda s: hub_outliers(s, k=0), "k must be in"),
    (lambda s: hub_outliers(s, k=2, threshold=-1.0), "threshold"),
])
def test_bad_input_names_the_parameter(call, match):
    scores = np.random.default_rng(5).normal(size=(4, 5))
    with pytest.raises(ValueError, match=match):
        call(scores)
