"""Sweep cases (see ``sweep_cases.py``) for the neighbourhood rerankers: k-reciprocal,
diffusion and query expansion, on the same small lists as the Bayesian rerankers."""

import numpy as np
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
)

from skqbnorm import DiffusionReranker, KReciprocalReranker, QueryExpansionReranker

NEIGHBOURHOOD_RERANKERS = {
    "kreciprocal": lambda **kw: KReciprocalReranker(**{"k1": 3, "k2": 2, **kw}),
    "diffusion": lambda **kw: DiffusionReranker(**{"n_neighbors": 3, **kw}),
    "qe": lambda **kw: QueryExpansionReranker(**{"n_query": 2, "n_database": 2, **kw}),
}

#: Each reranker's own parameters: (name, value, expect).
PARAMS = {
    "kreciprocal": [("k1", v, e) for v, e in [(0, "error"), (1, "ok"), (100, "any"),
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
    "qe": [("alpha", v, e) for v, e in [(0, "ok"), (1e300, "any"), (-1.0, "error"),
                                         (np.nan, "error"), (True, "error")]]
    + [("n_query", v, e) for v, e in [(0, "ok"), (100, "any"), (-1, "error"), (2.5, "error")]]
    + [("n_database", v, e) for v, e in [(0, "ok"), (100, "any"), (-1, "error"),
                                         (True, "error")]],
}
COSINE_INITIAL = ("kreciprocal", "qe")


def _case(est_name, label, X, y, groups, expect, names, shape=False, params=None, finite=True,
          same_as_base=False):
    make = NEIGHBOURHOOD_RERANKERS[est_name]
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


def neighbourhood_reranker_cases():
    cases = []
    for est_name in NEIGHBOURHOOD_RERANKERS:
        for variant, (build, expect, finite, shape_problem) in MATRIX_VARIANTS.items():
            if variant in ("column_missing", "column_extra", "duplicate_column", "single_row"):
                expect = {"single_row": "error"}.get(variant, "ok")
            cases.append(_case(est_name, f"X-{variant}", lambda c, b=build: b(RX.copy(), c),
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
            cases.append(_case(est_name, f"y-{label}", RX.copy(), y, RG.copy(), expect, ("y",),
                               shape, finite=finite, same_as_base=label == "list"))
            if est_name in COSINE_INITIAL and label.startswith(("huge", "offset")):
                cases.append(_case(est_name, f"y-{label}-minmax", RX.copy(), y, RG.copy(), "ok",
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
            cases.append(_case(est_name, f"groups-{label}", RX.copy(), RY.copy(), groups, expect,
                               ("groups", "group"), shape, same_as_base=label == "strings"))
        params = list(PARAMS[est_name]) + [("n_jobs", v, e) for v, e in [(2.5, "error")]]
        if est_name in COSINE_INITIAL:
            params += [("initial", v, e) for v, e in [("minmax", "ok"), ("scores", "error")]]
        for name, value, expect in params:
            cases.append(_case(est_name, f"param-{name}={value!r}", RX.copy(), RY.copy(),
                               RG.copy(), expect, (name,), params={name: value}))
        for scale in (1e200, 1e-200):
            cases.append(_case(est_name, f"X_scaled_{scale:g}", RX * scale, RY.copy(), RG.copy(),
                               "ok", ("X",), same_as_base=True))
        cases.append(_case(est_name, "X_identical_rows", np.ones((12, 3)), RY.copy(), RG.copy(),
                           "ok", ("X",)))
        cases.append(_case(est_name, "X_duplicate_pairs", np.repeat(RX[:6], 2, axis=0), RY.copy(),
                           RG.copy(), "ok", ("X",)))
        cases.append(_case(est_name, "two_items", RX[:2], RY[:2], None, "ok", ("X", "y")))
    return cases
