"""QueryBankSearchCV: every candidate fitted on the bank given, chosen by its paired interval."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from skqbnorm import (
    CSLS,
    DynamicInvertedSoftmax,
    InvertedSoftmax,
    NearestNeighborNormalization,
    QueryBankGate,
    QueryBankSearchCV,
    compare,
)
from skqbnorm.catalogue import normalizers
from skqbnorm.datasets import load_wordnet_revdict, make_hubness_sims
from skqbnorm.metrics import paired_comparison

from helpers import strong_model_task, unit_rows


@pytest.fixture(scope="module")
def hub_task():
    """A bank, validation queries and test queries over one gallery with hubs."""
    sims, gt, bank = make_hubness_sims(600, 120, 500, random_state=3)
    return bank, sims[:300], gt[:300], sims[300:], gt[300:]


def first_best(values):
    """The index of the largest value, the earliest of equal ones (written out as a loop)."""
    best = 0
    for index, value in enumerate(values):
        if value > values[best]:
            best = index
    return best


@pytest.mark.slow
def test_the_choice_is_that_of_a_loop_over_compare(hub_task):
    """The 34-setting loop a user wrote by hand: compare per setting, best lower end."""
    bank, queries, gt, _, _ = hub_task
    grid = [{"beta": beta, "k": k} for beta in (1.0, 3.0, 10.0, 20.0, 30.0, 60.0)
            for k in (1, 3, 10)]
    lows, changes = [], []
    for params in grid:
        table = compare(queries, gt, bank_sims=bank, methods="dis", params=params,
                        n_resamples=300, random_state=0, as_frame=False)
        lows.append(table["R@1 change low"][1])
        changes.append(table["R@1 change"][1])
    search = QueryBankSearchCV(DynamicInvertedSoftmax(), {"beta": [1.0, 3.0, 10.0, 20.0, 30.0,
                                                                   60.0], "k": [1, 3, 10]},
                               n_resamples=300, random_state=0).fit(
        bank, queries=queries, query_gt=gt)
    assert search.cv_results_["params"] == grid
    np.testing.assert_allclose(search.cv_results_["change_low_test_score"], lows, rtol=1e-10)
    np.testing.assert_allclose(search.cv_results_["change_test_score"], changes, rtol=1e-10)
    assert search.best_index_ == first_best(lows)
    assert search.best_params_ == grid[first_best(lows)]
    assert search.cv_results_["rank_test_score"][search.best_index_] == 1


@pytest.mark.parametrize(("scoring", "sign", "end"), [("R@5", 1, 0), ("MnR", -1, 1),
                                                      ("mAP", 1, 0)])
def test_the_choice_is_that_of_a_loop_over_paired_comparison(hub_task, scoring, sign, end):
    """For a rank (lower is better) the rule reads the interval's upper end, turned."""
    bank, queries, gt, _, _ = hub_task
    ks = [1, 5, 10, 20]
    criteria, scores = [], []
    for k in ks:
        scored = CSLS(k=k).fit(bank).transform(queries)
        result = paired_comparison(queries, scored, gt, n_resamples=200, random_state=7)
        criteria.append(sign * result.interval[scoring][end])
        scores.append(result.value_b[scoring])
    search = QueryBankSearchCV(CSLS(), {"k": ks}, scoring=scoring, n_resamples=200,
                               random_state=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # CSLS does not improve MnR here
        search.fit(bank, queries=queries, query_gt=gt)
    assert search.best_index_ == first_best(criteria)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], scores, rtol=1e-12)
    assert search.best_score_ == pytest.approx(scores[first_best(criteria)])


@pytest.mark.slow
def test_the_choice_on_the_bundled_wordnet_data_is_that_of_a_loop():
    """The in-domain bank, the first half of the test queries as validation queries."""
    data = load_wordnet_revdict()
    validation = slice(0, 1000)
    gallery = data.gallery_embeddings
    query_sims, bank_sims = data.query_embeddings[validation] @ gallery.T, (
        data.bank_embeddings @ gallery.T)
    gt = data.query_gt[validation]
    # ParameterGrid's order: the names sorted, the last one varying fastest
    grid = [{"alpha": alpha, "k": k} for alpha in (0.5, 1.0) for k in (4, 16, 64)]
    lows = []
    for params in grid:
        scored = NearestNeighborNormalization(**params).fit(bank_sims).transform(query_sims)
        lows.append(paired_comparison(query_sims, scored, gt, n_resamples=300,
                                      random_state=0).interval["R@1"][0])
    search = QueryBankSearchCV(NearestNeighborNormalization(),
                               {"k": [4, 16, 64], "alpha": [0.5, 1.0]}, n_resamples=300,
                               random_state=0)
    search.fit(bank_sims, queries=query_sims, query_gt=gt)
    np.testing.assert_allclose(search.cv_results_["change_low_test_score"], lows, rtol=1e-12)
    assert search.best_index_ == first_best(lows)
    assert search.improves_
    # the same search on the embeddings: the same choice, the same scores
    embedded = clone(search).fit(data.bank_embeddings, queries=data.query_embeddings[validation],
                                 query_gt=gt, gallery=gallery)
    assert embedded.best_params_ == search.best_params_
    np.testing.assert_allclose(embedded.cv_results_["mean_test_score"],
                               search.cv_results_["mean_test_score"], atol=0.2)


class Boosted(TransformerMixin, BaseEstimator):
    """Scores: the similarities plus the boost ``option`` names (a test double)."""

    BOOSTS = {}

    def __init__(self, option="none"):
        self.option = option

    def fit(self, X, y=None):
        self.n_features_in_ = np.shape(X)[1]
        return self

    def transform(self, X):
        check_is_fitted(self)
        return X + self.BOOSTS[self.option]


def disagreeing_task():
    """100 queries, raw R@1 50%: "sure" gains 10 queries and loses none; "bold" gains
    30 and loses 18 (a larger mean change, +12, with a much wider interval)."""
    n = 100
    gt = np.arange(n) % 10
    raw = np.zeros((n, 10))
    hit = np.arange(n) < 50
    raw[np.arange(n), gt] = np.where(hit, 1.0, 0.5)
    raw[np.arange(n), (gt + 1) % 10] = np.where(hit, 0.5, 1.0)
    lift = np.zeros_like(raw)
    lift[np.arange(n), gt] = 1.0
    sure = np.where((np.arange(n) >= 50) & (np.arange(n) < 60), 1, 0)[:, None] * lift
    bold = np.where(np.arange(n) >= 70, 1, 0)[:, None] * lift - np.where(
        np.arange(n) < 18, 1, 0)[:, None] * lift
    Boosted.BOOSTS.update(none=0.0, sure=sure, bold=bold)
    return raw, gt


@pytest.mark.parametrize("rule", ["lower_bound", "mean"])
@pytest.mark.filterwarnings("ignore:The candidate chosen by rule='mean' does not improve")
def test_the_rules_disagree_and_each_picks_what_it_says(rule):
    raw, gt = disagreeing_task()
    options = ["bold", "sure"]
    results = [paired_comparison(raw, Boosted(option).fit(raw).transform(raw), gt,
                                 n_resamples=500, random_state=0) for option in options]
    assert results[0].change["R@1"] == pytest.approx(12.0)
    assert results[1].change["R@1"] == pytest.approx(10.0)
    assert results[0].interval["R@1"][0] < results[1].interval["R@1"][0]  # they disagree
    search = QueryBankSearchCV(Boosted(), {"option": options}, rule=rule, n_resamples=500,
                               random_state=0).fit(raw, queries=raw, query_gt=gt)
    expected = "bold" if rule == "mean" else "sure"
    assert search.best_params_ == {"option": expected}
    assert search.cv_results_["rank_test_score"].tolist() == (
        [1, 2] if rule == "mean" else [2, 1])


def test_the_bank_is_the_one_given(hub_task):
    """best_estimator_ is the candidate fitted on X, the bank given, not on the queries."""
    bank, queries, gt, test, _ = hub_task
    search = QueryBankSearchCV(InvertedSoftmax(), {"beta": [3.0, 10.0, 30.0]}, n_resamples=100,
                               random_state=0).fit(bank, queries=queries, query_gt=gt)
    by_hand = InvertedSoftmax(**search.best_params_).fit(bank)
    np.testing.assert_array_equal(search.transform(test), by_hand.transform(test))
    on_queries = InvertedSoftmax(**search.best_params_).fit(queries)
    assert not np.array_equal(search.transform(test), on_queries.transform(test))
    assert search.best_estimator_.n_bank_ == len(bank)
    np.testing.assert_array_equal(search.top_k(test, k=3)[0], by_hand.top_k(test, k=3)[0])


def test_each_candidate_is_fitted_once(hub_task, monkeypatch):
    bank, queries, gt, _, _ = hub_task
    fits = []
    original = InvertedSoftmax.fit

    def counted(self, X, *args, **kwargs):
        fits.append(self.beta)
        return original(self, X, *args, **kwargs)

    monkeypatch.setattr(InvertedSoftmax, "fit", counted)
    QueryBankSearchCV(InvertedSoftmax(), {"beta": [3.0, 10.0, 30.0]}, n_resamples=50).fit(
        bank, queries=queries, query_gt=gt)
    assert fits == [3.0, 10.0, 30.0]


def inputs_of(cls, dtype):
    """A normaliser of ``cls`` and what its fit takes, as similarities and as embeddings."""
    bank, queries, gallery = strong_model_task(n_gallery=40, n_dims=16, seed=1)
    gallery_bank = unit_rows(np.random.default_rng(2).normal(size=(30, 16)))
    bank, queries, gallery, gallery_bank = (a.astype(dtype) for a in (bank, queries, gallery,
                                                                       gallery_bank))
    sims = {"X": unit_rows(bank) @ gallery.T, "queries": unit_rows(queries) @ gallery.T}
    embedded = {"X": bank, "queries": queries, "gallery": gallery}
    needs = cls.capabilities.gallery_bank
    if needs == "gallery_bank":
        sims["gallery_bank"] = gallery_bank @ gallery.T
        embedded["gallery_bank"] = gallery_bank
    elif needs == "querybank_to_gallery_bank":
        sims["querybank_to_gallery_bank"] = unit_rows(bank) @ gallery_bank.T
        embedded["gallery_bank"] = gallery_bank
    return sims, embedded, np.arange(40)


@pytest.mark.parametrize("cls", normalizers(), ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("form", ["similarities", "embeddings"])
def test_every_registered_normalizer(cls, form):
    """On similarities and on embeddings; float32 stays float32; best_estimator_ is the
    candidate fitted on the bank, as by hand."""
    sims, embedded, gt = inputs_of(cls, np.float32)
    given = dict(sims if form == "similarities" else embedded)
    X, queries = given.pop("X"), given.pop("queries")
    search = QueryBankSearchCV(cls(), {"working_memory": [None, 64]}, n_resamples=50,
                               fallback="best", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence, and no sure gain on 40 queries
        search.fit(X, queries=queries, query_gt=gt, **given)
        by_hand = cls(**search.best_params_).fit(X, **given)
    query_sims = sims["queries"] if form == "similarities" else search.similarities(queries)
    assert query_sims.dtype == np.float32
    scores = search.transform(query_sims)
    assert scores.dtype == np.float32
    np.testing.assert_array_equal(scores, by_hand.transform(query_sims))
    assert search.n_features_in_ == 40
    # the bank's statistics do not depend on working_memory: both candidates score alike
    results = search.cv_results_
    assert results["mean_test_score"][0] == results["mean_test_score"][1]
    assert search.best_index_ == 0


@pytest.mark.parametrize("form", ["similarities", "embeddings"])
def test_a_gate_gets_the_validation_queries(form):
    sims, embedded, gt = inputs_of(DynamicInvertedSoftmax, np.float64)
    given = dict(sims if form == "similarities" else embedded)
    X, queries = given.pop("X"), given.pop("queries")
    search = QueryBankSearchCV(QueryBankGate(DynamicInvertedSoftmax()),
                               {"normalizer__beta": [5.0, 20.0]}, n_resamples=50,
                               fallback="best", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X, queries=queries, query_gt=gt, **given)
    by_hand = QueryBankGate(DynamicInvertedSoftmax(beta=search.best_params_["normalizer__beta"]))
    by_hand.fit(X, queries=queries, **given)
    query_sims = sims["queries"] if form == "similarities" else search.similarities(queries)
    np.testing.assert_array_equal(search.transform(query_sims), by_hand.transform(query_sims))
    assert search.best_estimator_.open_ == by_hand.open_


def test_no_sure_gain_warns_and_serves_raw_under_fallback_raw():
    raw, gt = disagreeing_task()
    for fallback in ("raw", "best"):
        search = QueryBankSearchCV(Boosted(), {"option": ["bold"]}, n_resamples=500,
                                   fallback=fallback, random_state=0)
        with pytest.warns(UserWarning, match=r"No candidate improves R@1 surely: \{'option': 'bold'\}.*"
                                             r"\[-1, \+25.52\].*fallback="):
            search.fit(raw, queries=raw, query_gt=gt)
        assert not search.improves_
        assert search.best_change_ == pytest.approx(12.0)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            clone(search).fit(raw, queries=raw, query_gt=gt)
        assert [w.filename for w in record] == [__file__]  # the caller's line
        served = search.transform(raw)
        if fallback == "raw":
            np.testing.assert_array_equal(served, raw)
        else:
            np.testing.assert_array_equal(served, raw + Boosted.BOOSTS["bold"])
        np.testing.assert_array_equal(search.best_estimator_.transform(raw),
                                      raw + Boosted.BOOSTS["bold"])


def test_fallback_raw_serves_raw_similarities_of_embeddings_too():
    """A normaliser on embeddings, left raw: top_k ranks by the raw similarities."""
    bank, queries, gallery = strong_model_task(n_gallery=30, n_dims=8, seed=4)
    search = QueryBankSearchCV(InvertedSoftmax(), {"beta": [20.0]}, n_resamples=100,
                               random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search.fit(bank, queries=queries, query_gt=np.arange(30), gallery=gallery)
    assert not search.improves_
    sims = search.similarities(queries)
    np.testing.assert_array_equal(search.transform(sims), sims)
    np.testing.assert_array_equal(search.top_k(queries=queries, k=1, return_scores=False)[:, 0],
                                  np.argmax(sims, axis=1))


def test_identical_candidates_share_the_resamples_whatever_the_seed(hub_task):
    """With random_state=None (a seed drawn at fit) two identical candidates have the same
    interval: every candidate is compared on the same resamples."""
    bank, queries, gt, _, _ = hub_task
    for random_state in (None, np.random.default_rng(5)):
        search = QueryBankSearchCV(InvertedSoftmax(), {"beta": [10.0, 10.0, 20.0]},
                                   n_resamples=100, random_state=random_state).fit(
            bank, queries=queries, query_gt=gt)
        low = search.cv_results_["change_low_test_score"]
        assert low[0] == low[1]
        assert search.best_index_ in (0, 2)


def test_results_of_a_list_of_grids(hub_task):
    bank, queries, gt, _, _ = hub_task
    grid = [{"beta": [10.0, 20.0]}, {"k": [3], "beta": [20.0]}]
    search = QueryBankSearchCV(DynamicInvertedSoftmax(), grid, n_resamples=50,
                               random_state=0).fit(bank, queries=queries, query_gt=gt)
    results = search.cv_results_
    assert results["params"] == [{"beta": 10.0}, {"beta": 20.0}, {"beta": 20.0, "k": 3}]
    assert results["param_k"].mask.tolist() == [True, True, False]
    assert results["param_beta"].tolist() == [10.0, 20.0, 20.0]
    assert search.n_candidates_ == 3
    for key in ("mean_fit_time", "mean_score_time", "mean_test_score", "change_test_score",
                "change_low_test_score", "change_high_test_score", "rank_test_score"):
        assert results[key].shape == (3,)
    assert np.all(results["change_low_test_score"] <= results["change_test_score"])
    assert np.all(results["change_test_score"] <= results["change_high_test_score"])


def test_verbose_prints_a_line_per_candidate(hub_task, capsys):
    bank, queries, gt, _, _ = hub_task
    QueryBankSearchCV(InvertedSoftmax(), {"beta": [10.0, 20.0]}, n_resamples=20,
                      verbose=2).fit(bank, queries=queries, query_gt=gt)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[QueryBankSearchCV] Fitting 2 candidates on the bank of "
                               "shape (500, 120), scoring 300 validation queries")
    assert lines[1].startswith("[QueryBankSearchCV] 1/2 {'beta': 10.0}: R@1")
    assert len(lines) == 3


@pytest.mark.slow
def test_parallel_candidates_give_the_same_results(hub_task):
    bank, queries, gt, _, _ = hub_task
    searches = [QueryBankSearchCV(CSLS(), {"k": [1, 5, 10]}, n_resamples=100, random_state=0,
                                  n_jobs=n_jobs).fit(bank, queries=queries, query_gt=gt)
                for n_jobs in (None, 2)]
    for key in ("mean_test_score", "change_low_test_score", "rank_test_score"):
        np.testing.assert_array_equal(searches[0].cv_results_[key], searches[1].cv_results_[key])


def test_clone_get_params_and_pickle(hub_task):
    bank, queries, gt, test, _ = hub_task
    search = QueryBankSearchCV(CSLS(), {"k": [5, 10]}, scoring="R@5", n_resamples=50,
                               random_state=0)
    params = search.get_params()
    assert params["scoring"] == "R@5" and params["estimator__k"] == 10
    twin = clone(search)
    assert twin.get_params()["param_grid"] == {"k": [5, 10]}
    search.fit(bank, queries=queries, query_gt=gt)
    assert not hasattr(twin, "best_estimator_")
    restored = pickle.loads(pickle.dumps(search))
    np.testing.assert_array_equal(restored.transform(test), search.transform(test))
    assert restored.best_params_ == search.best_params_


def test_refit_false_keeps_no_estimator(hub_task):
    bank, queries, gt, test, _ = hub_task
    search = QueryBankSearchCV(CSLS(), {"k": [5, 10]}, n_resamples=20, refit=False)
    assert not hasattr(search, "transform")
    search.set_params(refit=True).fit(bank, queries=queries, query_gt=gt)
    search.set_params(refit=False).fit(bank, queries=queries, query_gt=gt)
    assert not hasattr(search, "best_estimator_")
    assert search.best_params_ in ({"k": 5}, {"k": 10})
    with pytest.raises(AttributeError, match="no attribute 'transform'") as raised:
        search.transform(test)
    assert "refit=False" in str(raised.value.__cause__)


@pytest.mark.parametrize(("change", "message"), [
    ({"queries": np.zeros((5, 7))}, (r"queries has shape \(5, 7\) and X \(the bank\) has "
                                    r"shape \(500, 120\)")),
    ({"query_gt": np.arange(7)}, (r"query_gt must hold one gallery index per query "
                                 r"\(shape \(300,\)\).*got shape \(7,\)")),
    ({"query_gt": np.full(300, 120)}, r"query_gt must hold gallery indices in \[0, 120\)"),
    ({"query_gt": np.zeros((300, 5))}, (r"query_gt must have the shape of the queries' "
                                       r"similarities \(300, 120\)")),
    ({"param_grid": {"gamma": [1.0]}}, (r"param_grid names \['gamma'\], not parameters of "
                                       r"InvertedSoftmax")),
    ({"param_grid": {"beta": []}}, (r"param_grid: Parameter grid for parameter 'beta' need "
                                   r"to be a non-empty sequence")),
    ({"param_grid": []}, r"param_grid holds no candidate"),
    ({"param_grid": {"beta": 3.0}}, r"param_grid: Parameter grid for parameter 'beta'"),
    ({"scoring": "R@0"}, r"scoring must be 'R@K' for an integer K >= 1.*scoring='R@0'"),
    ({"scoring": "R@121"}, (r"scoring='R@121' needs at least 121 gallery items; the gallery "
                           r"has 120")),
    ({"rule": "median"}, r"The 'rule' parameter"),
    ({"n_resamples": 0}, r"The 'n_resamples' parameter"),
    ({"confidence": 1.0}, r"The 'confidence' parameter"),
    ({"fallback": "none"}, r"The 'fallback' parameter"),
])
def test_bad_inputs_name_the_parameter(hub_task, change, message):
    bank, queries, gt, _, _ = hub_task
    params = {"param_grid": {"beta": [10.0]}, "scoring": "R@1", "rule": "lower_bound",
              "n_resamples": 10, "confidence": 0.95, "fallback": "raw"}
    given = {"queries": queries, "query_gt": gt}
    for name, value in change.items():
        (given if name in given else params)[name] = value
    search = QueryBankSearchCV(InvertedSoftmax(), params.pop("param_grid"), **params)
    with pytest.raises(ValueError, match=message):
        search.fit(bank, **given)


def test_embeddings_of_another_dimension_are_refused():
    bank, queries, gallery = strong_model_task(n_gallery=20, n_dims=8)
    search = QueryBankSearchCV(InvertedSoftmax(), {"beta": [10.0]}, n_resamples=10)
    with pytest.raises(ValueError, match=r"queries has shape \(20, 4\) and X \(the bank\) has "
                                         r"shape \(40, 8\)"):
        search.fit(bank, queries=queries[:, :4], query_gt=np.arange(20), gallery=gallery)
    with pytest.raises(TypeError, match="random_state"):
        clone(search).set_params(random_state="seed").fit(
            bank, queries=queries, query_gt=np.arange(20), gallery=gallery)


def test_a_memmap_or_dask_bank_gives_the_same_results(hub_task, tmp_path):
    da = pytest.importorskip("dask.array")
    bank, queries, gt, _, _ = hub_task
    np.save(tmp_path / "bank.npy", bank)
    search = QueryBankSearchCV(CSLS(), {"k": [5, 10]}, n_resamples=50, random_state=0)
    results = [clone(search).fit(given, queries=queries, query_gt=gt).cv_results_
               for given in (bank, np.load(tmp_path / "bank.npy", mmap_mode="r"),
                             da.from_array(bank, chunks=(128, 120)))]
    for other in results[1:]:
        np.testing.assert_array_equal(other["mean_test_score"], results[0]["mean_test_score"])
        np.testing.assert_array_equal(other["change_low_test_score"],
                                      results[0]["change_low_test_score"])


def test_grid_search_cv_tunes_against_another_bank():
    """Why the search exists: GridSearchCV's candidates see a fold of the queries as their
    bank, so its scores are not those of the deployed bank; this search's are."""
    from sklearn.model_selection import GridSearchCV

    from skqbnorm.metrics import make_retrieval_scorer, retrieval_metrics

    sims, gt, bank = make_hubness_sims(300, 80, 900, random_state=5)
    grid = {"k": [1, 10, 40]}
    ours = QueryBankSearchCV(CSLS(), grid, n_resamples=20, random_state=0).fit(
        bank, queries=sims, query_gt=gt)
    on_bank = [retrieval_metrics(CSLS(k=k).fit(bank).transform(sims), gt)["R@1"]
               for k in grid["k"]]
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], on_bank)
    theirs = GridSearchCV(CSLS(), grid, scoring=make_retrieval_scorer("R@1"), cv=3).fit(sims, gt)
    assert not np.allclose(theirs.cv_results_["mean_test_score"], on_bank)


def test_a_relevance_matrix_scores_as_the_indices_do(hub_task):
    bank, queries, gt, _, _ = hub_task
    search = QueryBankSearchCV(CSLS(), {"k": [5, 10]}, scoring="mAP", n_resamples=50,
                               random_state=0)
    by_index = clone(search).fit(bank, queries=queries, query_gt=gt).cv_results_
    relevance = np.eye(queries.shape[1], dtype=int)[gt]
    by_matrix = clone(search).fit(bank, queries=queries, query_gt=relevance).cv_results_
    np.testing.assert_allclose(by_matrix["mean_test_score"], by_index["mean_test_score"])
    np.testing.assert_allclose(by_matrix["change_low_test_score"],
                               by_index["change_low_test_score"])
