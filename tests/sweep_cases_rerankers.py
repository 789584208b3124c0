"""Sweep cases (see ``sweep_cases.py``) for the rerankers of the catalogue that are not
Bayesian rerankers (k-reciprocal, diffusion, query expansion and any registered one), on
the same small lists as the Bayesian rerankers."""

import inspect
from functools import partial

import numpy as np
from sklearn.model_selection import GroupKFold, KFold, LeaveOneGroupOut
from sweep_cases import (
    MATRIX_VARIANTS,
    REPRESENTATION_ONLY,
    RG,
    RX,
    RY,
    Case,
    _scaled_to,
    _set,
    check_matrix,
    reranker_maker,
    sweep_rerankers,
)

from skqbnorm import (
    DiffusionReranker,
    KReciprocalReranker,
    PointwiseReranker,
    QueryExpansionReranker,
)
from skqbnorm.rerankers import RerankerCV

#: The shipped rerankers' own parameters, by catalogue name: (name, value, expect)
#: (optional: a reranker not named here runs every other case).
PARAMS = {
    "k-reciprocal": [("k1", v, e) for v, e in [(0, "error"), (1, "ok"), (100, "any"),
                                               (True, "error"), (2.5, "error"), (2.0, "any")]]
    + [("k2", v, e) for v, e in [(0, "error"), (1, "ok"), (100, "any"), (-1, "error")]]
    + [("lambda_value", v, e) for v, e in [(0, "ok"), (1, "ok"), (-0.1, "error"), (1.1, "error"),
                                           (np.nan, "error"), (True, "error")]],
    "diffusion": [("alpha", v, e) for v, e in [(0, "ok"), (0.999999, "any"), (1, "error"),
                                                (-0.1, "error"), (np.nan, "error"),
                                                (True, "error")]]
    + [("n_neighbors", v, e) for v, e in [(0, "error"), (1, "ok"), (100, "any"),
                                          (True, "error"), (2.5, "error")]]
    + [("gamma", v, e) for v, e in [(0, "ok"), (-1.0, "error"), (1e300, "any"), (np.inf, "any"),
                                    (np.nan, "error")]]
    + [("n_source", v, e) for v, e in [(None, "ok"), (1, "ok"), (100, "ok"), (0, "error"),
                                       (2.5, "error")]],
    "query-expansion": [("alpha", v, e) for v, e in [(0, "ok"), (1e300, "any"), (-1.0, "error"),
                                         (np.nan, "error"), (True, "error")]]
    + [("n_query", v, e) for v, e in [(0, "ok"), (100, "any"), (-1, "error"), (2.5, "error")]]
    + [("n_database", v, e) for v, e in [(0, "ok"), (100, "any"), (-1, "error"),
                                         (True, "error")]],
}


def _cosine_initial(cls):
    """Whether the reranker's initial scores are cosines by default (then others refused)."""
    initial = inspect.signature(cls).parameters.get("initial")
    return initial is not None and initial.default == "cosine"


def _case(make, est_name, label, X, y, groups, expect, names, shape=False, params=None,
          finite=True, same_as_base=False):
    params = params or {}

    def run(ctx):
        Xv, yv, gv = (ctx.keep(v(ctx)) if callable(v) else ctx.keep(v) if v is not None else None
                      for v in (X, y, groups))
        return make(**params).fit_predict(Xv, yv, groups=gv), yv

    def check(result, ctx):
        out, yv = result
        check_matrix(out, (len(yv),), np.float64, ctx.finite_in)
        if same_as_base:
            base = make(**params).fit_predict(RX, RY, groups=RG)
            np.testing.assert_allclose(out, base, rtol=1e-5, atol=1e-7 * np.abs(base).max(),
                                       err_msg=f"{label} changed the scores")

    return Case("rerankers", f"{est_name}-{label}", run, check, names, shape, expect, finite)


def neighborhood_reranker_cases(rerankers=None):
    """The cases of the rerankers that are not Bayesian (by default every registered one),
    then RerankerCV's."""
    cases = []
    for est_name, cls in (sweep_rerankers(False) if rerankers is None else rerankers).items():
        cosine_initial = _cosine_initial(cls)
        case = partial(_case, reranker_maker(cls), est_name)
        for variant, (build, expect, finite, shape_problem) in MATRIX_VARIANTS.items():
            if variant in ("column_missing", "column_extra", "duplicate_column", "single_row"):
                expect = {"single_row": "error"}.get(variant, "ok")
            cases.append(case(f"X-{variant}", lambda c, b=build: b(RX.copy(), c),
                              RY.copy(), RG.copy(), expect, ("X",), shape_problem, finite=finite,
                              same_as_base=variant in REPRESENTATION_ONLY))
        y_specs = [
            ("nan", _set(RY, 2, np.nan), "error", False, False),
            ("inf", _set(RY, 3, np.inf), "error", False, False),
            ("neginf", _set(RY, 3, -np.inf), "error", False, False),
            ("huge_1e300", RY * 1e300, "any", True, False),
            ("huge_1e308", _scaled_to(RY, 1.7e308), "any", True, False),
            ("gaps_1e-300", RY * 1e-300, "any", True, False),
            ("offset_1e15", RY + 1e15, "any", True, False),
            ("negative", -RY, "ok", True, False),
            ("ties", np.round(RY, 1), "ok", True, False),
            ("constant_group", np.where(RG == 0, 0.5, RY), "error", True, False),
            ("int", np.arange(12) % 2, "ok", True, False),
            ("float32", RY.astype(np.float32), "ok", True, False),
            ("complex", RY.astype(complex), "any", True, False),
            ("str_words", np.full(12, "x"), "error", True, False),
            ("list", RY.tolist(), "ok", True, False),
            ("two_columns", np.c_[RY, RY], "error", True, True),
            ("short", RY[:11], "error", True, True),
            ("empty", RY[:0], "error", True, True),
        ]
        for label, y, expect, finite, shape in y_specs:
            cases.append(case(f"y-{label}", RX.copy(), y, RG.copy(), expect, ("y",),
                              shape, finite=finite, same_as_base=label == "list"))
            if cosine_initial and label.startswith(("huge", "offset")):
                cases.append(case(f"y-{label}-minmax", RX.copy(), y, RG.copy(), "ok",
                                  ("y",), shape, params={"initial": "minmax"}))
        g_specs = [
            ("none", None, "ok", False),
            ("strings", np.where(RG == 0, "a", "b"), "ok", False),
            ("nan", _set(RG, 0, np.nan), "any", False),
            ("singleton_group", np.r_[RG[:-1], 7], "error", False),
            ("short", RG[:11], "error", True),
            ("two_dim", np.c_[RG, RG], "error", True),
            ("object_mixed", np.array([0, "a"] * 6, dtype=object), "any", False),
        ]
        for label, groups, expect, shape in g_specs:
            cases.append(case(f"groups-{label}", RX.copy(), RY.copy(), groups, expect,
                              ("groups", "group"), shape, same_as_base=label == "strings"))
        params = list(PARAMS.get(est_name, []))
        if "n_jobs" in inspect.signature(cls).parameters:
            params.append(("n_jobs", 2.5, "error"))
        if cosine_initial:
            params += [("initial", v, e) for v, e in [("minmax", "ok"), ("scores", "error")]]
        for name, value, expect in params:
            cases.append(case(f"param-{name}={value!r}", RX.copy(), RY.copy(),
                              RG.copy(), expect, (name,), params={name: value}))
        for scale in (1e200, 1e-200):
            cases.append(case(f"X_scaled_{scale:g}", RX * scale, RY.copy(), RG.copy(),
                              "ok", ("X",), same_as_base=True))
        cases.append(case("X_identical_rows", np.ones((12, 3)), RY.copy(), RG.copy(),
                          "ok", ("X",)))
        cases.append(case("X_duplicate_pairs", np.repeat(RX[:6], 2, axis=0), RY.copy(),
                          RG.copy(), "ok", ("X",)))
        cases.append(case("two_items", RX[:2], RY[:2], None, "ok", ("X", "y")))
    return cases + (reranker_cv_cases() if rerankers is None else [])


# -- RerankerCV and rerank_path: the candidates, the folds, the relevance ------------------

_cv_rng = np.random.default_rng(20261207)
CV_X = _cv_rng.normal(size=(24, 3))
CV_Y = _cv_rng.uniform(-0.5, 1.0, 24)
CV_GROUPS = np.repeat(np.arange(4), 6)
CV_RELEVANCE = (CV_Y + _cv_rng.normal(scale=0.3, size=24)) > 0.4

#: Each tuned reranker: (maker, valid values of its strength, an out-of-range value,
#: rerank_path's keyword).
TUNED = {
    "pointwise": (lambda: PointwiseReranker(n_neighbors=3), [0.1, 1.0], -1.0, "cs"),
    "diffusion": (lambda: DiffusionReranker(n_neighbors=3), [0.0, 0.9], 1.0, "alphas"),
    "kreciprocal": (lambda: KReciprocalReranker(k1=3, k2=2), [0.0, 0.5], 1.5, "lambda_values"),
    "qe": (lambda: QueryExpansionReranker(n_query=2, n_database=2), [0.0, 2.0], -1.0, "alphas"),
}


class _NoFold:
    """A splitter that yields no fold, or (``empty_test``) one whose test part is empty."""

    def __init__(self, empty_test=False):
        self.empty_test = empty_test

    def split(self, X, y=None, groups=None):
        if self.empty_test:
            yield np.arange(len(X)), np.array([], dtype=int)

    def __repr__(self):
        return f"_NoFold(empty_test={self.empty_test})"


def _value_variants(valid, out_of_range):
    """(label, values, expect) for a sequence of candidate values."""
    first = valid[0]
    return [
        ("list", list(valid), "ok"), ("array", np.array(valid), "ok"),
        ("float32", np.array(valid, dtype=np.float32), "ok"),
        ("numpy_scalars", [np.float64(v) for v in valid], "ok"), ("duplicates", [first, first], "ok"),
        ("int", [int(first)], "any"), ("str_and_bool", ["0.1", True], "error"),
        ("with_bool", [first, True], "error"), ("np_bool", [np.True_], "error"),
        ("bool_array", np.array([True, False]), "error"), ("word", ["a"], "error"),
        ("str", "0.5", "error"), ("str_array", np.array(["0.5"]), "error"), ("empty", [], "error"),
        ("nested", [[first]], "error"), ("nan", [first, np.nan], "error"),
        ("inf", [np.inf], "error"), ("none_entry", [first, None], "error"),
        ("scalar", first, "error"), ("out_of_range", [first, out_of_range], "error"),
    ]


def _check_search(values):
    def check(search, ctx):
        check_matrix(search.scores_, (24,), np.float64, True)
        results = search.cv_results_
        assert np.isfinite(results["mean_test_score"]).all(), "non-finite fold scores"
        assert results["rank_test_score"].min() == 1, f"ranks {results['rank_test_score']}"
        if values is not None:
            assert search.best_c_ in [float(v) for v in np.ravel(values)], "best_c_ not a candidate"
    return check


def _search_case(label, make, expect, names, cs=None, cv=2, relevance=None, shape=False):
    def run(ctx):
        X, y, groups = (ctx.keep(a.copy()) for a in (CV_X, CV_Y, CV_GROUPS))
        kept_cs = ctx.keep(cs) if isinstance(cs, (list, np.ndarray)) else cs
        rel = ctx.keep(np.array(CV_RELEVANCE if relevance is None else relevance))
        return RerankerCV(make(), cs=kept_cs, cv=cv).fit(X, y, groups, relevance=rel)

    values = cs if isinstance(cs, (list, np.ndarray)) and expect == "ok" else None
    return Case("rerankers", f"cv-{label}", run, _check_search(values), names, shape, expect)


def _path_case(label, make, keyword, values, expect):
    def run(ctx):
        X, y, groups = (ctx.keep(a.copy()) for a in (CV_X, CV_Y, CV_GROUPS))
        kept = ctx.keep(values) if isinstance(values, (list, np.ndarray)) else values
        return make().rerank_path(X, y, groups, **{keyword: kept})

    def check(path, ctx):
        assert len(path) == len(values), f"{len(path)} rerankers for {len(values)} values"
        for fitted in path:
            check_matrix(fitted.scores_, (24,), np.float64, True)

    return Case("rerankers", f"rerank_path-{label}", run, check, (keyword,), False, expect)


def reranker_cv_cases():
    """RerankerCV's cs, cv and relevance, and each reranker's rerank_path values."""
    cases = []
    for est_name, (make, valid, out_of_range, keyword) in TUNED.items():
        for label, values, expect in _value_variants(valid, out_of_range):
            cases.append(_search_case(f"{est_name}-cs-{label}", make, expect, ("cs",), cs=values))
            cases.append(_path_case(f"{est_name}-{keyword}-{label}", make, keyword, values, expect))
        cases.append(_search_case(f"{est_name}-cs-None", make, "ok", ("cs",)))
    make, valid = TUNED["pointwise"][:2]
    cv_variants = [
        ("2", 2, "ok"), ("GroupKFold", GroupKFold(n_splits=2), "ok"),
        ("LeaveOneGroupOut", LeaveOneGroupOut(), "ok"), ("4", 4, "ok"), ("5_over_4_lists", 5, "error"),
        ("1", 1, "error"), ("0", 0, "error"), ("True", True, "error"), ("2.5", 2.5, "error"),
        ("str", "2", "error"), ("None", None, "error"), ("KFold_cuts_lists", KFold(n_splits=2), "error"),
        ("no_fold", _NoFold(), "error"), ("empty_test_fold", _NoFold(empty_test=True), "error"),
    ]
    for label, cv, expect in cv_variants:
        cases.append(_search_case(f"cv={label}", make, expect, ("cv",), cs=valid, cv=cv))
    relevance_variants = [
        ("all_zero", np.zeros(24, dtype=bool), "error", False),  # a warning: candidates alike
        ("all_one", np.ones(24, dtype=bool), "any", False),
        ("one_relevant", np.arange(24) == 3, "ok", False),
        ("int01", CV_RELEVANCE.astype(int), "ok", False),
        ("twos", np.where(CV_RELEVANCE, 2, 0), "error", False),
        ("nan", np.where(np.arange(24) == 1, np.nan, CV_RELEVANCE), "error", False),
        ("short", CV_RELEVANCE[:23], "error", True),
    ]
    for label, relevance, expect, shape in relevance_variants:
        cases.append(_search_case(f"relevance-{label}", make, expect, ("relevance",), cs=valid,
                                  relevance=relevance, shape=shape))
    return cases + _diffusion_order_cases()


def _diffusion_order_cases():
    """Diffusion keeps the initial order where it has nothing of its own to say."""
    def ranked_as(expected_y):
        def check(result, ctx):
            scores, y = result
            check_matrix(scores, (len(y),), np.float64, True)
            for label in np.unique(RG):
                at = RG == label
                assert len(np.unique(scores[at])) == at.sum(), "ties the initial scores lack"
                assert (np.argsort(scores[at]) == np.argsort(expected_y[at])).all(), \
                    "ranks unlike the initial scores"
        return check

    def not_flat(result, ctx):
        scores, y = result
        check_matrix(scores, (len(y),), np.float64, True)
        for label in np.unique(RG):
            assert np.ptp(scores[RG == label]) > 0, "a list's ranking lost (all scores equal)"

    def run_with(alpha, y):
        def run(ctx):
            yv = ctx.keep(y.copy())
            return DiffusionReranker(alpha, n_neighbors=3).fit_predict(RX.copy(), yv, RG), yv
        return run

    negative = -RY - 0.1
    return [
        Case("rerankers", "diffusion-alpha0-ranks-as-y", run_with(0.0, RY), ranked_as(RY),
             ("y", "alpha"), False, "ok"),
        Case("rerankers", "diffusion-alpha0-all-negative-ranks-as-y", run_with(0.0, negative),
             ranked_as(negative), ("y",), False, "ok"),
        Case("rerankers", "diffusion-all-negative-keeps-a-ranking", run_with(0.99, negative),
             not_flat, ("y",), False, "ok"),
        Case("rerankers", "diffusion-all-negative-1e308", run_with(0.9, _scaled_to(negative, 1.7e308)),
             not_flat, ("y",), False, "ok"),
    ]
