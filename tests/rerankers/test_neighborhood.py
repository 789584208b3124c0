"""The neighbourhood rerankers (k-reciprocal, diffusion, alpha-QE / DBA) against dense
references written from the papers' formulas (tests/reference_rerankers.py)."""

import numpy as np
import pytest
import sklearn
from reference_rerankers import alpha_qe_dba, diffusion, k_reciprocal, node_similarities, unit
from sklearn.model_selection import GridSearchCV, GroupKFold

from skqbnorm import DiffusionReranker, KReciprocalReranker, QueryExpansionReranker
from skqbnorm.metrics import make_map_scorer, mean_average_precision
from skqbnorm.rerankers._graph import most_similar, unit_rows


def clustered_list(seed, n_items=40, n_features=5, n_clusters=4):
    """Features in clusters, a query near the first cluster, and its cosines to the items."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, n_features))
    labels = rng.integers(n_clusters, size=n_items)
    features = centres[labels] + rng.normal(scale=0.6, size=(n_items, n_features))
    query = centres[0] + rng.normal(scale=0.6, size=n_features)
    initial = unit(features) @ (query / np.linalg.norm(query))
    return features, initial, query


def same_ranking(scores, expected, tie=1e-9):
    """Every pair the reference orders (by more than ``tie``) is ordered alike; the Jaccard
    distance has exact ties (items sharing their whole encoding) that rounding may split."""
    ordered = expected[:, None] > expected[None, :] + tie
    return bool(np.all((scores[:, None] > scores[None, :])[ordered]))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k1, k2, lambda_value", [(20, 6, 0.3), (5, 1, 0.3), (7, 3, 0.0),
                                                  (3, 2, 1.0), (60, 10, 0.5)])
def test_k_reciprocal_equals_the_dense_reference(seed, k1, k2, lambda_value):
    features, initial, _ = clustered_list(seed)
    scores = KReciprocalReranker(k1, k2, lambda_value).fit_predict(features, initial)
    expected = -k_reciprocal(2 - 2 * node_similarities(features, initial), k1, k2, lambda_value)
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-8)
    assert same_ranking(scores, expected)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha, k, gamma, n_source", [
    (0.99, 10, 3.0, 10), (0.5, 3, 1.0, None), (0.9, 50, 0.0, 40), (0.0, 5, 1.0, None),
    (0.99, 5, 3.0, 1)])
def test_diffusion_equals_the_dense_reference(seed, alpha, k, gamma, n_source):
    features, initial, _ = clustered_list(seed)
    reranker = DiffusionReranker(alpha, n_neighbors=k, gamma=gamma, n_source=n_source)
    scores = reranker.fit_predict(features, initial)
    expected = diffusion(features, initial, alpha, k, gamma, n_source or len(initial))
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-8 * np.abs(expected).max())
    assert same_ranking(scores, expected)
    if alpha == 0 and n_source is None:  # the source itself: the positive initial scores,
        positive = np.maximum(initial, 0) / np.abs(initial).max()  # its zeros in initial order
        np.testing.assert_allclose(scores, positive, rtol=1e-15, atol=1e-10)
        np.testing.assert_array_equal(np.argsort(scores), np.argsort(initial))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n_items, n_source, gamma", [(12, 10, 3.0), (40, 10, 3.0),
                                                      (40, None, 0.0), (40, 1, 1.0)])
def test_diffusion_at_alpha_zero_ranks_as_the_initial_scores(seed, n_items, n_source, gamma):
    features, initial, _ = clustered_list(seed, n_items=n_items)
    scores = DiffusionReranker(0.0, n_neighbors=3, gamma=gamma, n_source=n_source).fit_predict(
        features, initial)
    assert len(np.unique(scores)) == n_items  # no tie left (the initial scores have none)
    np.testing.assert_array_equal(np.argsort(scores), np.argsort(initial))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("alpha", [0.0, 0.5, 0.99])
def test_diffusion_of_a_list_without_a_positive_score_diffuses_it_mapped_onto_0_1(seed, alpha):
    features, initial, _ = clustered_list(seed)
    negative = -1.5 - np.abs(initial)  # every score < 0: the paper's source would be empty
    scores = DiffusionReranker(alpha, n_neighbors=5).fit_predict(features, negative)
    mapped = (negative - negative.min()) / np.ptp(negative)
    expected = diffusion(features, mapped, alpha, 5, 3.0, 10)
    assert np.abs(expected).max() > 0
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-8 * np.abs(expected).max())
    assert same_ranking(scores, expected)
    # a list with one positive score keeps the paper's source (divided by the largest magnitude)
    one_positive = np.where(np.arange(len(negative)) == 3, 0.2, negative)
    np.testing.assert_allclose(
        DiffusionReranker(alpha, n_neighbors=5).fit_predict(features, one_positive),
        diffusion(features, one_positive, alpha, 5, 3.0, 10), rtol=0, atol=1e-8)


def test_diffusion_ties_keep_the_initial_order_below_the_reached_samples():
    # two far clusters; the source (n_source=2) lies in the first, so the diffusion never
    # reaches the second: the paper's scores are 0 there, tied.
    rng = np.random.default_rng(3)
    features = np.vstack([rng.normal([5.0, 0, 0], 0.3, size=(10, 3)),
                          rng.normal([0, 0, 5.0], 0.3, size=(10, 3))])
    initial = np.r_[rng.uniform(0.5, 1.0, 10), rng.uniform(-0.5, 0.4, 10)]
    scores = DiffusionReranker(0.9, n_neighbors=4, n_source=2).fit_predict(features, initial)
    expected = diffusion(features, initial, 0.9, 4, 3.0, 2)
    unreached = expected == 0
    assert unreached[10:].all() and unreached.sum() >= 10
    np.testing.assert_array_equal(np.argsort(scores[unreached]), np.argsort(initial[unreached]))
    assert scores[unreached].max() < scores[~unreached].min()
    assert np.abs(scores[unreached]).max() <= 1e-10 * np.abs(expected).max()
    np.testing.assert_array_equal(scores[~unreached], diffusion_scores_unspread(features, initial))
    # equal initial scores among the ties stay tied
    tied = initial.copy()
    tied[[12, 15]] = tied[11]
    again = DiffusionReranker(0.9, n_neighbors=4, n_source=2).fit_predict(features, tied)
    assert again[12] == again[15] == again[11]


def diffusion_scores_unspread(features, initial):
    """The reached samples' scores, which the spreading of ties must leave bitwise alone."""
    from scipy import sparse

    from skqbnorm.rerankers._diffusion import mutual_affinity, normalized_affinity
    from skqbnorm.rerankers._solvers import conjugate_gradients

    reranker = DiffusionReranker(0.9, n_neighbors=4, n_source=2)
    weights = normalized_affinity(mutual_affinity(unit_rows(features), 4, 3.0))
    raw, _ = conjugate_gradients((sparse.identity(len(initial)) - 0.9 * weights).tocsr(),
                                 reranker._source(initial), None)
    return raw[raw != 0]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha, n_query, n_database", [(3.0, 10, 10), (0.0, 5, 0), (1.0, 0, 3),
                                                        (3.0, 1, 1), (2.0, 40, 39)])
def test_query_expansion_equals_explicit_vectors(seed, alpha, n_query, n_database):
    features, initial, query = clustered_list(seed)
    reranker = QueryExpansionReranker(alpha, n_query=n_query, n_database=n_database)
    scores = reranker.fit_predict(features, initial)
    expected = alpha_qe_dba(features, query, alpha, n_query, n_database)
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-8)
    assert same_ranking(scores, expected)


def test_query_expansion_without_steps_keeps_the_initial_scores():
    features, initial, _ = clustered_list(0)
    scores = QueryExpansionReranker(n_query=0, n_database=0).fit_predict(features, initial)
    np.testing.assert_array_equal(scores, initial)


def test_most_similar_orders_by_similarity_then_index():
    rng = np.random.default_rng(1)
    features = rng.integers(0, 3, size=(30, 2)).astype(float)  # many exact ties
    query = rng.uniform(-1, 1, size=30)
    neighbours, similarities, least = most_similar(unit_rows(features), 7, query=query, least=True)
    full = node_similarities(features, query)
    order = np.argsort(-full, axis=1, kind="stable")[:, :7]
    np.testing.assert_array_equal(neighbours, order)
    np.testing.assert_allclose(similarities, np.take_along_axis(full, order, axis=1), atol=1e-12)
    np.testing.assert_allclose(least, full.min(axis=1), atol=1e-12)


RERANKERS = [KReciprocalReranker(k1=6, k2=3), DiffusionReranker(n_neighbors=5),
             QueryExpansionReranker(n_query=3, n_database=3)]


@pytest.mark.parametrize("reranker", RERANKERS, ids=lambda r: type(r).__name__)
def test_lists_are_reranked_independently_whatever_n_jobs(reranker):
    lists = [clustered_list(seed, n_items=20 + 5 * seed) for seed in range(3)]
    features = np.vstack([f for f, _, _ in lists])
    initial = np.concatenate([i for _, i, _ in lists])
    groups = np.repeat(["b", "a", "c"], [len(i) for _, i, _ in lists])
    one = reranker.set_params(n_jobs=1).fit_predict(features, initial, groups=groups)
    two = reranker.set_params(n_jobs=2).fit_predict(features, initial, groups=groups)
    np.testing.assert_array_equal(one, two)
    for label in "abc":
        index = groups == label
        np.testing.assert_allclose(one[index], reranker.fit_predict(features[index], initial[index]),
                                   rtol=0, atol=1e-12)


@pytest.mark.parametrize("reranker", RERANKERS, ids=lambda r: type(r).__name__)
def test_float32_inputs_and_caller_arrays(reranker):
    features, initial, _ = clustered_list(2)
    features32, initial32 = features.astype(np.float32), initial.astype(np.float32)
    kept = features32.copy(), initial32.copy()
    scores = reranker.fit_predict(features32, initial32)
    np.testing.assert_array_equal(features32, kept[0])
    np.testing.assert_array_equal(initial32, kept[1])
    assert scores.dtype == np.float64 and np.all(np.isfinite(scores))
    expected = reranker.fit_predict(features32.astype(np.float64), initial32.astype(np.float64))
    np.testing.assert_array_equal(scores, expected)


@pytest.mark.parametrize("cls", [KReciprocalReranker, QueryExpansionReranker])
def test_cosine_initial_scores_must_be_cosines(cls):
    features, initial, _ = clustered_list(3)
    with pytest.raises(ValueError, match=r"initial='cosine'.*y of shape \(40,\).*'minmax'"):
        cls().fit_predict(features, 3 * initial)
    # minmax takes any scale: the scores of 3 y + 1 are those of y mapped onto [0, 1].
    mapped = (initial - initial.min()) / np.ptp(initial)
    np.testing.assert_allclose(cls(initial="minmax").fit_predict(features, 3 * initial + 1),
                               cls().fit_predict(features, mapped), rtol=0, atol=1e-12)


def test_diffusion_does_not_see_the_initial_scores_scale():
    features, initial, _ = clustered_list(1)
    reranker = DiffusionReranker(n_neighbors=8)
    np.testing.assert_allclose(reranker.fit_predict(features, 1e300 * initial),
                               reranker.fit_predict(features, initial), rtol=1e-12)


@pytest.mark.parametrize("reranker, grid", [
    (KReciprocalReranker(), {"k1": [3, 10], "lambda_value": [0.3, 1.0]}),
    (DiffusionReranker(), {"alpha": [0.0, 0.9], "n_neighbors": [5, 15]}),
    (QueryExpansionReranker(), {"n_query": [0, 5], "n_database": [0, 5]}),
], ids=lambda p: type(p).__name__ if not isinstance(p, dict) else "")
def test_grid_search_with_whole_queries_per_fold(reranker, grid):
    rng = np.random.default_rng(0)
    n_queries, n_items = 8, 50
    groups = np.repeat(np.arange(n_queries), n_items)
    relevance = rng.random(n_queries * n_items) < 0.3
    # Relevant items share a direction; the initial cosines are noisy.
    features = relevance[:, None] * np.array([2.0, 0, 0]) + rng.normal(scale=0.7, size=(len(groups), 3))
    initial = np.clip(0.3 * relevance + rng.normal(scale=0.3, size=len(groups)), -1, 1)
    with sklearn.config_context(enable_metadata_routing=True):
        search = GridSearchCV(reranker, grid, scoring=make_map_scorer(),
                              cv=GroupKFold(n_splits=4)).fit(features, initial, groups=groups,
                                                             relevance=relevance)
    assert len(search.cv_results_["params"]) == 4
    # Every candidate's fold score is the MAP of that fold's reranked queries.
    test = next(GroupKFold(n_splits=4).split(features, initial, groups))[1]
    first = search.cv_results_["params"][0]
    expected = mean_average_precision(
        type(reranker)(**first).fit_predict(features[test], initial[test], groups=groups[test]),
        relevance[test], groups[test],
    )
    assert np.isclose(search.cv_results_["split0_test_score"][0], expected)
    # Reranking by the features' clusters beats the noisy initial order.
    assert search.best_score_ > mean_average_precision(initial, relevance, groups) + 0.05


@pytest.mark.slow
def test_kreciprocal_benchmark_script_runs_without_the_published_function():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[2] / "benchmarks" / "bench_kreciprocal.py"
    result = subprocess.run(
        [sys.executable, str(script), "--n-items", "300", "--n-features", "8", "--published",
         str(Path(__file__).parent / "no_such_file.py"), "--published-sizes"],
        capture_output=True, text=True, timeout=300, check=False, cwd=script.parent,
    )
    assert result.returncode == 0, result.stderr
    assert "skqbnorm (sparse)" in result.stdout and "published re_ranking: not given" in result.stdout


def test_diffusion_warns_of_lists_whose_solve_stopped_short(monkeypatch):
    from sklearn.exceptions import ConvergenceWarning

    from skqbnorm.rerankers import _diffusion

    features, initial, _ = clustered_list(0)
    reranker = DiffusionReranker(n_neighbors=5)
    reranker.fit(features, initial)
    assert reranker.n_iter_.shape == (1,) and reranker.n_iter_[0] > 0

    def stopped_short(system, rhs, start):
        return rhs, {"status": "maximum iterations reached", "n_iter": 800,
                     "solver": "conjugate gradients"}

    monkeypatch.setattr(_diffusion, "conjugate_gradients", stopped_short)
    groups = np.repeat([0, 1], 20)
    with pytest.warns(ConvergenceWarning, match=r"after 800 iterations .* 2 of 2 lists"):
        reranker.fit(features, initial, groups=groups)


def two_lists():
    """Two clustered lists, their query vectors and their groups."""
    lists = [clustered_list(seed, n_items=30 + 5 * seed) for seed in (5, 6)]
    features = np.vstack([f for f, _, _ in lists])
    initial = np.concatenate([i for _, i, _ in lists])
    groups = np.repeat([1, 0], [len(i) for _, i, _ in lists])
    return lists, features, initial, groups


@pytest.mark.parametrize(("reranker", "keyword", "values", "reference"), [
    (KReciprocalReranker(k1=7, k2=3), "lambda_values", [0.0, 0.3, 1.0],
     lambda f, i, q, v: -k_reciprocal(2 - 2 * node_similarities(f, i), 7, 3, v)),
    (DiffusionReranker(n_neighbors=6, n_source=None), "alphas", [0.0, 0.5, 0.99],
     lambda f, i, q, v: diffusion(f, i, v, 6, 3.0, len(i))),
    (QueryExpansionReranker(n_query=4, n_database=3), "alphas", [0.0, 1.0, 3.0],
     lambda f, i, q, v: alpha_qe_dba(f, q, v, 4, 3)),
], ids=["KReciprocalReranker", "DiffusionReranker", "QueryExpansionReranker"])
def test_rerank_path_is_the_reference_at_every_value(reranker, keyword, values, reference):
    lists, features, initial, groups = two_lists()
    path = reranker.rerank_path(features, initial, groups, **{keyword: values})
    name = type(reranker).strength_param
    assert [fitted.get_params()[name] for fitted in path] == values
    for value, fitted in zip(values, path):
        for label, (f, i, q) in zip([1, 0], lists):
            expected = reference(f, i, q, value)
            np.testing.assert_allclose(fitted.scores_[groups == label], expected, rtol=0,
                                       atol=1e-8 * max(1.0, np.abs(expected).max()))
        # what fit gives at that value, bitwise
        plain = type(reranker)(**{**reranker.get_params(), name: value})
        np.testing.assert_array_equal(fitted.scores_, plain.fit_predict(features, initial, groups))
        np.testing.assert_array_equal(fitted.group_labels_, [0, 1])
    assert reranker.get_params()[name] == type(reranker)().get_params()[name]  # left unchanged


@pytest.mark.parametrize(("reranker", "keyword", "values", "message"), [
    (KReciprocalReranker(), "lambda_values", [0.5, 2.0],
     r"lambda_values=\[0.5, 2.0\] holds 2.0: The 'lambda_value' parameter of KReciprocalReranker"),
    (DiffusionReranker(), "alphas", [], (r"alphas must be a non-empty 1-D sequence of finite "
                                         r"values of alpha; got alphas=\[\]")),
    (QueryExpansionReranker(), "alphas", [1.0, np.nan], r"got alphas=\[1.0, nan\]"),
])
def test_rerank_path_refuses_bad_values_by_name(reranker, keyword, values, message):
    features, initial, _ = clustered_list(0)
    with pytest.raises(ValueError, match=message):
        reranker.rerank_path(features, initial, **{keyword: values})


@pytest.mark.parametrize("reranker", RERANKERS, ids=lambda r: type(r).__name__)
def test_grid_search_without_routing_says_what_to_enable(reranker):
    # Without metadata routing GridSearchCV hands relevance to fit, which ignores it: the
    # MAP scorer then says what to enable (fit raised a TypeError naming the base class).
    _, features, initial, groups = two_lists()
    relevance = initial > np.median(initial)
    search = GridSearchCV(reranker, {"n_jobs": [None, 1]}, scoring=make_map_scorer(),
                          cv=GroupKFold(n_splits=2), error_score="raise")
    with pytest.raises(ValueError, match=r"needs relevance .*enable_metadata_routing=True"):
        search.fit(features, initial, groups=groups, relevance=relevance)
    fitted = reranker.fit(features, initial, groups, relevance=relevance)  # accepted, ignored
    np.testing.assert_array_equal(fitted.scores_, reranker.fit_predict(features, initial, groups))
