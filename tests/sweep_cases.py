"""Table of bad and edge inputs for the public API and the CLI (used by test_sweep.py).

Every case is a call on small arrays plus the outcome it may end in:

- ``expect="any"``: a sound result, a warning with a sound result, or a ValueError /
  TypeError naming one of ``names`` (and showing a shape when ``shape`` is set);
- ``expect="ok"``: valid input, so only a sound result (a warning allowed);
- ``expect="error"``: invalid input with no meaningful result, so an error as above
  (or at least a warning); a silent result is a failure.

"Sound" is checked by the case's ``check(result, ctx)``, which raises AssertionError.
"""

import hashlib
import inspect
import io
import os
import zipfile
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from scipy import sparse

from skqbnorm import (
    CSLS,
    Centering,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    PointwiseReranker,
    catalogue,
    compare,
)
from skqbnorm import metrics as M
from skqbnorm.cli import main as cli_main
from skqbnorm.normalizers import Capabilities, QueryBankGate
from skqbnorm.rerankers import BayesianReranker

SHAPE_PATTERN = r"\(\d+,(\s*\d+,?)*\)|\bshape\b"


@dataclass(frozen=True)
class Case:
    area: str
    name: str
    run: Callable[["Ctx"], Any]
    check: Callable[[Any, "Ctx"], None]
    names: tuple = ()
    shape: bool = False
    expect: str = "any"
    finite_in: bool = True

    @property
    def id(self):
        return f"{self.area}-{self.name}"


class Ctx:
    """What a case touches: a temporary folder and the caller objects it must not modify."""

    def __init__(self, tmp, finite_in=True):
        self.tmp = tmp
        self.finite_in = finite_in  # whether the case's inputs are all finite
        self.caught = []  # the warnings recorded so far
        self._kept = []
        self._files = {}

    def keep(self, value):
        """Remember ``value`` (an array, memmap or list) to compare after the call."""
        self._kept.append((value, _snapshot(value)))
        return value

    def keep_file(self, path):
        self._files[str(path)] = _file_hash(path)
        return path

    def changed(self):
        found = [f"argument #{i} modified" for i, (value, snap) in enumerate(self._kept)
                 if not _same(snap, _snapshot(value))]
        found += [f"input file {os.path.basename(p)} modified or removed"
                  for p, digest in self._files.items() if _file_hash(p) != digest]
        return found


def _snapshot(value):
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, np.array(value, copy=True))
    if sparse.issparse(value):
        return ("sparse", value.toarray().copy())
    return ("repr", repr(value))


def _same(a, b):
    if a[0] != b[0] or a[:-1] != b[:-1]:
        return False
    if a[0] == "repr":
        return a[1] == b[1]
    try:
        return np.array_equal(a[-1], b[-1], equal_nan=True)
    except TypeError:
        return np.array_equal(a[-1], b[-1])


def _file_hash(path):
    path = os.path.realpath(path)
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


# -- checks of a sound result ------------------------------------------------------------


def check_matrix(out, shape, dtype, finite):
    assert isinstance(out, np.ndarray), f"returned {type(out).__name__}, not an ndarray"
    assert out.shape == shape, f"shape {out.shape}, expected {shape}"
    assert out.dtype == dtype, f"dtype {out.dtype}, expected {dtype}"
    if finite:
        assert np.isfinite(out).all(), f"{np.count_nonzero(~np.isfinite(out))} non-finite outputs"


def check_top_k(result, n_queries, k, n_gallery, dtype, finite):
    indices, scores = result
    check_matrix(scores, (n_queries, k), dtype, finite)
    assert indices.shape == (n_queries, k), f"indices shape {indices.shape}"
    assert np.issubdtype(indices.dtype, np.integer), f"indices dtype {indices.dtype}"
    assert ((indices >= 0) & (indices < n_gallery)).all(), "index out of the gallery"
    assert all(len(set(row)) == k for row in indices.tolist()), "repeated index in a row"
    if finite:
        assert (np.diff(scores, axis=1) <= 0).all(), "top_k scores not in decreasing order"


def check_float(value, low=-np.inf, high=np.inf):
    numeric = isinstance(value, (float, int, np.floating, np.integer))
    assert numeric and not isinstance(value, bool), f"returned {type(value).__name__}"
    assert np.isfinite(value), f"returned {value}"
    assert low <= value <= high, f"returned {value}, outside [{low}, {high}]"


def check_dict(result, bounds):
    assert isinstance(result, dict), f"returned {type(result).__name__}"
    for key, (low, high) in bounds.items():
        assert key in result, f"missing {key}"
        check_float(result[key], low, high)


# -- data ---------------------------------------------------------------------------------

_rng = np.random.default_rng(20261130)
BANK = _rng.uniform(-1, 1, (8, 6))
QUERY = _rng.uniform(-1, 1, (5, 6))
BANK_EMB = _rng.normal(size=(8, 4))
GAL_EMB = _rng.normal(size=(6, 4))
QUERY_EMB = _rng.normal(size=(5, 4))


def _set(value, index, fill):
    out = np.array(value, dtype=float, copy=True)
    out[index] = fill
    return out


def _scaled_to(a, largest):
    """``a`` scaled so that its largest magnitude is ``largest`` (no overflow on the way)."""
    return a / np.abs(a).max() * largest


def _memmap(ctx, a, dtype, name):
    path = ctx.tmp / f"{name}.dat"
    mm = np.memmap(path, dtype=dtype, mode="w+", shape=a.shape)
    mm[:] = a.astype(dtype)
    mm.flush()
    ctx.keep_file(path)
    return np.memmap(path, dtype=dtype, mode="r", shape=a.shape)


def _readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def _dup_column(a):
    a = a.copy()
    a[:, 1] = a[:, 0]
    return a


#: Variants of a 2-D numeric matrix: name -> (make(a, ctx), expect, finite, shape_problem).
#: ``shape_problem`` marks variants whose error must show a shape.
MATRIX_VARIANTS = {
    "nan_first": (lambda a, c: _set(a, (0, 0), np.nan), "error", False, False),
    "nan_last": (lambda a, c: _set(a, (-1, -1), np.nan), "error", False, False),
    "nan_middle": (lambda a, c: _set(a, (a.shape[0] // 2, a.shape[1] // 2), np.nan), "error",
                   False, False),
    "inf_first": (lambda a, c: _set(a, (0, 0), np.inf), "error", False, False),
    "neginf_last": (lambda a, c: _set(a, (-1, -1), -np.inf), "error", False, False),
    "all_nan": (lambda a, c: np.full(a.shape, np.nan), "error", False, False),
    "nan_float32": (lambda a, c: _set(a, (0, -1), np.nan).astype(np.float32), "error", False,
                    False),
    "huge_1e300": (lambda a, c: a * 1e300, "any", True, False),
    "neg_huge_1e300": (lambda a, c: -a * 1e300, "any", True, False),
    "huge_1e308": (lambda a, c: _scaled_to(a, 1.7e308), "any", True, False),
    "tiny_1e-300": (lambda a, c: a * 1e-300, "any", True, False),
    "subnormal_1e-310": (lambda a, c: a * 1e-310, "any", True, False),
    "float32_3e38": (lambda a, c: _scaled_to(a, 3e38).astype(np.float32), "any", True, False),
    "float32_1e-38": (lambda a, c: (a * 1e-38).astype(np.float32), "any", True, False),
    "offset_1e6": (lambda a, c: a + 1e6, "any", True, False),
    "float32": (lambda a, c: a.astype(np.float32), "ok", True, False),
    "float16": (lambda a, c: a.astype(np.float16), "any", True, False),
    "longdouble": (lambda a, c: a.astype(np.longdouble), "any", True, False),
    "int64": (lambda a, c: np.round(a * 10).astype(np.int64), "ok", True, False),
    "int8": (lambda a, c: np.round(a * 10).astype(np.int8), "ok", True, False),
    "uint8": (lambda a, c: np.round(np.abs(a) * 10).astype(np.uint8), "ok", True, False),
    "bool": (lambda a, c: a > 0, "any", True, False),
    "complex": (lambda a, c: a.astype(complex), "any", True, False),
    "object_numbers": (lambda a, c: a.astype(object), "any", True, False),
    "object_none": (lambda a, c: np.where(a > 0, a, None), "error", False, False),
    "str_numbers": (lambda a, c: a.astype(str), "any", True, False),
    "str_words": (lambda a, c: np.full(a.shape, "x"), "error", True, False),
    "datetime": (lambda a, c: np.zeros(a.shape, dtype="M8[s]"), "error", True, False),
    "list": (lambda a, c: a.tolist(), "ok", True, False),
    "list_nan": (lambda a, c: _set(a, (0, 1), np.nan).tolist(), "error", False, False),
    "ragged_list": (lambda a, c: [row[: len(row) - i % 2] for i, row in enumerate(a.tolist())],
                    "error", True, True),
    "fortran": (lambda a, c: np.asfortranarray(a), "ok", True, False),
    "strided": (lambda a, c: np.repeat(a, 2, axis=1)[:, ::2], "ok", True, False),
    "reversed": (lambda a, c: a[::-1, ::-1], "ok", True, False),
    "readonly": (lambda a, c: _readonly(a), "ok", True, False),
    "memmap_f64": (lambda a, c: _memmap(c, a, np.float64, "mm64"), "ok", True, False),
    "memmap_f32": (lambda a, c: _memmap(c, a, np.float32, "mm32"), "ok", True, False),
    "memmap_int16": (lambda a, c: _memmap(c, np.round(a * 100), np.int16, "mm16"), "ok", True,
                     False),
    "sparse_csr": (lambda a, c: sparse.csr_matrix(a), "any", True, False),
    "constant": (lambda a, c: np.full(a.shape, 0.5), "ok", True, False),
    "zeros": (lambda a, c: np.zeros(a.shape), "ok", True, False),
    "ties_rounded": (lambda a, c: np.round(a, 1), "ok", True, False),
    "duplicate_column": (lambda a, c: _dup_column(a), "ok", True, False),
    "one_dim": (lambda a, c: a[0], "error", True, True),
    "three_dim": (lambda a, c: a[None], "error", True, True),
    "scalar": (lambda a, c: np.float64(0.5), "error", True, True),
    "none": (lambda a, c: None, "error", True, False),
    "zero_rows": (lambda a, c: a[:0], "error", True, True),
    "zero_columns": (lambda a, c: a[:, :0], "error", True, True),
    "zero_by_zero": (lambda a, c: np.empty((0, 0)), "error", True, True),
    "column_missing": (lambda a, c: a[:, :-1], "any", True, True),
    "column_extra": (lambda a, c: np.hstack([a, a[:, :1]]), "any", True, True),
    "single_row": (lambda a, c: a[:1], "any", True, True),
}

#: Variants that change only how the same values are held: the results must not change.
REPRESENTATION_ONLY = {"list", "fortran", "strided", "readonly", "memmap_f64", "object_numbers",
                       "str_numbers", "sparse_csr"}

#: Variants that only make sense as an error from every consumer of matrices (the
#: others depend on whether a column count matters for the consumer).
SHAPE_ERRORS_ON_COLUMNS = {"column_missing", "column_extra"}


# -- normalisers --------------------------------------------------------------------------

#: Settings the small arrays need, by class (optional: a class not named here runs at its
#: defaults): a bank of 8 rows leaves CSLS and NNN no valid default k.
SMALL_DATA_PARAMS = {CSLS: {"k": 3}, NearestNeighborNormalization: {"k": 3}}
# Optional extra cases, by the catalogue name upper-case; a class named in none of these
# still runs every case that all normalisers share.
#: Whose k must not exceed the querybank: a bank of one row leaves them no valid k of 3.
BANK_K_NORMALIZERS = ("CSLS", "NNN")
#: Whose scores, S exp((S - c) / T), leave float64 for similarities far above the bank's
#: (|S - c| / T past about 709): refused, so every input of a larger scale may be.
SCALE_BOUND_NORMALIZERS = ("DSL",)
SCALED_VARIANTS = ("memmap_int16",)
K_NORMALIZERS = ("DIS", "CSLS")
BETA_NORMALIZERS = ("IS", "DIS")


def _out_dtype(x):
    """float32 and float16 give float32; anything else float64."""
    return np.float32 if getattr(x, "dtype", None) in (np.float32, np.float16) else np.float64


def _maker(cls, fixed):
    """A factory of ``cls`` with the method's fixed parameters and the small-data settings."""
    preset = {**SMALL_DATA_PARAMS.get(cls, {}), **dict(fixed)}
    return lambda **kw: cls(**{**preset, **kw})


def sweep_normalizers():
    """One factory per distinct (class, fixed parameters) of the catalogue, under the first
    method's name, upper-case: a registered method enters the sweep with no other edit."""
    found, seen = {}, set()
    for name, method in catalogue.METHODS.items():
        key = (method.normalizer, tuple(sorted(method.fixed)))
        if method.normalizer is None or key in seen:
            continue
        seen.add(key)
        found[name.upper()] = _maker(method.normalizer, method.fixed)
    return found


def one_pass_top_k(est_name, make):
    """Whether top_k reads chunks once: as the class declares (it needs no whole row)."""
    return not make().capabilities.whole_rows


def _normalizer_cases(normalizers=None):
    cases = []
    for est_name, make in (sweep_normalizers() if normalizers is None else normalizers).items():
        cases += _normalizer_matrix_cases(est_name, make)
        cases += _normalizer_param_cases(est_name, make)
        cases += _normalizer_top_k_cases(est_name, make)
        cases += _normalizer_embedding_cases(est_name, make)
        cases += _normalizer_chunking_cases(est_name, make)
    return cases


def _normalizer_matrix_cases(est_name, make):
    cases = []
    for variant, (build, expect, finite, shape_problem) in MATRIX_VARIANTS.items():
        cases += _normalizer_fit_side(est_name, make, variant, build, expect, finite,
                                      shape_problem)
        cases += _normalizer_query_side(est_name, make, variant, build, expect, finite,
                                        shape_problem)
    return cases


def _same_as(out, reference, what):
    """A representation-only change of the input must not change the output."""
    np.testing.assert_allclose(out, reference, rtol=1e-10, atol=1e-12,
                               err_msg=f"{what} changed the result")


def _normalizer_fit_side(est_name, make, variant, build, expect, finite, shape_problem):
    fit_expect = expect
    if variant == "single_row" and est_name in BANK_K_NORMALIZERS:
        fit_expect = "any"  # k=3 > a bank of 1 row
    elif variant in SHAPE_ERRORS_ON_COLUMNS:
        fit_expect = "ok"  # a different gallery size is fine at fit
    same = variant in REPRESENTATION_ONLY

    def fit_then_transform(ctx):
        bank = ctx.keep(build(BANK, ctx))
        query = ctx.keep(QUERY.copy())
        est = make().fit(bank)
        n_gallery = est.n_features_in_
        return est.transform(query[:, :n_gallery] if n_gallery <= 6 else np.hstack(
            [query, query[:, : n_gallery - 6]]))

    def check_fit(out, ctx):
        assert isinstance(out, np.ndarray) and out.ndim == 2 and out.shape[0] == 5, "bad shape"
        check_matrix(out, out.shape, np.float64, ctx.finite_in)
        if same:
            _same_as(out, make().fit(BANK).transform(QUERY), f"a {variant} bank")

    def fit_transform(ctx):
        bank = ctx.keep(build(BANK, ctx))
        return make().fit_transform(bank), bank

    def check_fit_transform(result, ctx):
        out, bank = result
        check_matrix(out, tuple(bank.shape if sparse.issparse(bank) else np.shape(bank)),
                     _out_dtype(bank), ctx.finite_in)
        if same:
            _same_as(out, make().fit_transform(BANK), f"a {variant} bank")

    names = ("X", "querybank")
    return [Case("normalizers", f"{est_name}-fit_bank-{variant}", fit_then_transform, check_fit,
                 names, shape_problem, fit_expect, finite),
            Case("normalizers", f"{est_name}-fit_transform-{variant}", fit_transform,
                 check_fit_transform, names, shape_problem, fit_expect, finite)]


def _normalizer_query_side(est_name, make, variant, build, expect, finite, shape_problem):
    query_expect = "error" if variant in SHAPE_ERRORS_ON_COLUMNS else expect
    if variant == "single_row":
        query_expect = "ok"
    if variant == "zero_rows":
        query_expect = "any"  # no query is a valid, empty, request
    if est_name in SCALE_BOUND_NORMALIZERS and variant in SCALED_VARIANTS and expect == "ok":
        query_expect = "any"
    shape_problem = shape_problem or variant in SHAPE_ERRORS_ON_COLUMNS
    same = variant in REPRESENTATION_ONLY

    def transform(ctx):
        query = ctx.keep(build(QUERY, ctx))
        return make().fit(BANK).transform(query), query

    def check_transform(result, ctx):
        out, query = result
        check_matrix(out, tuple(query.shape if hasattr(query, "shape") else np.shape(query)),
                     _out_dtype(query), ctx.finite_in)
        if same:
            _same_as(out, make().fit(BANK).transform(QUERY), f"a {variant} query matrix")

    def top_k(ctx):
        query = ctx.keep(build(QUERY, ctx))
        return make(working_memory=1e-5).fit(BANK).top_k(query, k=3), query

    def check_top(result, ctx):
        (indices, scores), query = result
        check_top_k((indices, scores), np.shape(query)[0], 3, 6, _out_dtype(query),
                    ctx.finite_in)
        if ctx.finite_in:
            _top_k_is_sorted_transform(make, query, indices, scores)

    return [Case("normalizers", f"{est_name}-transform-{variant}", transform, check_transform,
                 ("X",), shape_problem, query_expect, finite),
            Case("normalizers", f"{est_name}-top_k_X-{variant}", top_k, check_top, ("X",),
                 shape_problem, query_expect, finite)]


def _top_k_is_sorted_transform(make, query, indices, scores):
    """top_k equals transform followed by a stable sort (ties to the lowest index)."""
    try:
        out = make().fit(BANK).transform(query)
    except (ValueError, TypeError) as error:
        raise AssertionError(f"top_k answered but transform raised {error!r:.80}") from None
    expected = np.argsort(-out, axis=1, kind="stable")[:, :3]
    assert np.array_equal(indices, expected), (
        f"top_k indices {indices.tolist()[:2]} differ from transform's {expected.tolist()[:2]}")
    np.testing.assert_allclose(scores, np.take_along_axis(out, expected, axis=1), rtol=1e-6,
                               err_msg="top_k scores differ from transform's")


CHUNK_BANK = _rng.uniform(-1, 1, (40, 30))
CHUNK_QUERY = _rng.uniform(-1, 1, (20, 30))
#: Columns that hold the same values in different orders: equal column statistics in
#: exact arithmetic, so that only the order of summation can break the ties they leave.
CHUNK_PERMUTED = np.stack([_rng.permutation(np.round(CHUNK_BANK[:, 0], 3)) for _ in range(30)],
                          axis=1)
CHUNK_DATA = {
    "ties_3_decimals": lambda a: np.round(a, 3),
    "ties_1_decimal": lambda a: np.round(a, 1),
    "float32": lambda a: a.astype(np.float32),
    "float32_ties": lambda a: np.round(a, 2).astype(np.float32),
    "constant": lambda a: np.full_like(a, 0.25),
    "huge_1e300": lambda a: a * 1e300,
    "permuted_columns": lambda a: CHUNK_PERMUTED if len(a) == 40 else np.round(a, 1),
    "permuted_columns_float32": lambda a: (CHUNK_PERMUTED if len(a) == 40
                                           else np.round(a, 1)).astype(np.float32),
}
CHUNKINGS = {"row_blocks_of_1": {"working_memory": 1e-5}, "row_blocks_of_7": {
    "working_memory": 0.005}, "two_threads": {"n_jobs": 2},
    "blocks_of_1_two_threads": {"working_memory": 1e-5, "n_jobs": 2}}


def _normalizer_chunking_cases(est_name, make):
    """Results (rankings exactly, values to rounding) must not depend on the chunking."""
    cases = []
    for data_name, transform in CHUNK_DATA.items():
        for chunking, params in CHUNKINGS.items():
            def run(ctx, transform=transform, params=params):
                bank, query = transform(CHUNK_BANK), transform(CHUNK_QUERY)
                whole = make().fit(bank).transform(query)
                chunked = make(**params).fit(bank).transform(query)
                return whole, chunked

            def check(result, ctx):
                whole, chunked = result
                check_matrix(chunked, whole.shape, whole.dtype, ctx.finite_in)
                differ = np.flatnonzero((np.argsort(-whole, axis=1, kind="stable")
                                         != np.argsort(-chunked, axis=1, kind="stable")).any(1))
                assert not len(differ), f"{len(differ)} of {len(whole)} rows ranked differently"
                np.testing.assert_allclose(chunked, whole, rtol=1e-6, atol=1e-12)

            scaled = est_name in SCALE_BOUND_NORMALIZERS and data_name == "huge_1e300"
            cases.append(Case("normalizers", f"{est_name}-chunking-{data_name}-{chunking}", run,
                              check, ("working_memory", "n_jobs", *("X",) * scaled), False,
                              "any" if scaled else "ok"))
    return cases


def _fit_transform_top(make, params, bank=BANK, query=QUERY, k=3):
    def run(ctx):
        b, q = ctx.keep(bank.copy()), ctx.keep(query.copy())
        est = make(**params).fit(b)
        return est.transform(q), est.top_k(q, k=k), q

    def check(result, ctx):
        out, top, q = result
        check_matrix(out, q.shape, _out_dtype(q), ctx.finite_in)
        check_top_k(top, q.shape[0], k, bank.shape[1], _out_dtype(q), ctx.finite_in)

    return run, check


def _normalizer_param_cases(est_name, make):
    cases = []
    params = []
    if est_name in BETA_NORMALIZERS:
        params += [("beta", v, e) for v, e in [
            (0, "error"), (-1.0, "error"), (-np.inf, "error"), (np.inf, "error"), (np.nan, "error"),
            (1e-300, "any"), (1e-30, "any"), (1e300, "any"), (1e40, "any"), (True, "error"),
            (False, "error"), ("20", "error"), (None, "error"), (1 + 0j, "error"),
            ([20.0], "error"),
            (np.float32(20), "ok"), (np.int64(20), "ok"), (1, "ok")]]
        params += [("output", v, e) for v, e in [("prob", "error"), (None, "error"),
                                                    ("probability", "ok")]]
    if est_name in K_NORMALIZERS:
        params += [("k", v, e) for v, e in [
            (0, "error"), (-1, "error"), (True, "error"), (False, "error"), (2.5, "error"),
            (2.0, "any"), (1e10, "error"), (10**12, "error"), (7, "error"), ("2", "error"),
            (None, "error"), (np.int64(2), "ok"), (np.uint8(2), "ok"), (6, "ok"), (9, "error")]]
    params += [("metric", v, e)
               for v, e in [("euclidean", "error"), (None, "error"), ("dot", "ok")]]
    params += [("working_memory", v, e) for v, e in [
        (0, "error"), (-1, "error"), (np.nan, "error"), (True, "error"), ("16", "error"),
        (1e-12, "ok"), (np.inf, "any"), (1e12, "ok")]]
    params += [("n_jobs", v, e) for v, e in [(0, "any"), (2, "ok"), (-1, "ok"), (2.5, "error"),
                                                ("2", "error")]]
    for name, value, expect in params:
        run, check = _fit_transform_top(make, {name: value})
        cases.append(Case("normalizers", f"{est_name}-param-{name}={value!r}", run, check, (name,),
                          False, expect))
    # beta against float32 data and data at large magnitudes
    if est_name in BETA_NORMALIZERS:
        for beta in (1e40, 1e30, 1e10, 1e3):
            run, check = _fit_transform_top(make, {"beta": beta}, BANK.astype(np.float32),
                                            QUERY.astype(np.float32))
            cases.append(Case("normalizers", f"{est_name}-param-beta={beta:g}-float32", run, check,
                              ("beta",), False, "any"))
        for output in ("log", "probability"):
            run, check = _fit_transform_top(make, {"output": output}, BANK * 1e300, QUERY * 1e300)
            cases.append(Case("normalizers", f"{est_name}-output={output}-data-1e300", run, check,
                              ("beta", "X", "querybank"), False, "any"))
    # tiny and degenerate querybanks and galleries that are still valid
    k1 = {"k": 1} if est_name in K_NORMALIZERS + BANK_K_NORMALIZERS else {}
    for label, bank, query, k in [
        ("single_gallery_item", BANK[:, :1], QUERY[:, :1], 1),
        ("single_bank_row", BANK[:1], QUERY, 1),
        ("single_bank_row_single_item", BANK[:1, :1], QUERY[:, :1], 1),
        ("identical_bank_rows", np.repeat(BANK[:1], 8, axis=0), QUERY, 3),
        ("identical_gallery_columns", np.repeat(BANK[:, :1], 6, axis=1),
         np.repeat(QUERY[:, :1], 6, axis=1), 3),
        ("wide_gallery", np.tile(BANK, 50), np.tile(QUERY, 50), 10),
    ]:
        run, check = _fit_transform_top(make, k1, bank, query, k)
        cases.append(Case("normalizers", f"{est_name}-{label}", run, check, ("X", "k"), False,
                          "ok"))
    # y: ignored when 1-D, refused when 2-D
    for label, y, expect, shape in [("y_1d", np.arange(8), "ok", False),
                                    ("y_wrong_length", np.arange(3), "ok", False),
                                    ("y_2d_gallery", GAL_EMB, "error", True)]:
        def run(ctx, y=y):
            return make().fit(ctx.keep(BANK.copy()), ctx.keep(y.copy())).transform(QUERY)

        cases.append(Case("normalizers", f"{est_name}-fit-{label}", run,
                          lambda out, c: check_matrix(out, (5, 6), np.float64, True), ("y",), shape,
                          expect))
    # unfitted use
    for method in ("transform", "top_k", "similarities"):
        def run(ctx, method=method):
            return getattr(make(), method)(QUERY)

        cases.append(Case("normalizers", f"{est_name}-unfitted-{method}", run,
                          lambda out, c: None, ("fit", "fitted"), False, "error"))
    return cases


WIDE_BANK = _rng.uniform(-1, 1, (8, 40))
WIDE_QUERY = _rng.uniform(-1, 1, (5, 40))


def _normalizer_top_k_cases(est_name, make):
    cases = []
    for value, expect in [(0, "error"), (-1, "error"), (True, "error"), (False, "error"),
                          (2.5, "error"),
                          (2.0, "any"), (7, "error"), (None, "error"), ("2", "error"),
                          (np.int64(2), "ok"), (6, "ok"), (1, "ok"), (10**20, "error")]:
        def run(ctx, value=value):
            return make().fit(BANK).top_k(ctx.keep(QUERY.copy()), k=value)

        def check(out, ctx, value=value):
            check_top_k(out, 5, int(value), 6, np.float64, True)

        cases.append(Case("normalizers", f"{est_name}-top_k-k={value!r}", run, check, ("k",),
                          False, expect))

    def chunk_case(label, chunks, expect, names=("chunks",), shape=False, finite=True, wm=None):
        def run(ctx):
            given = chunks(ctx)
            return make(working_memory=wm).fit(BANK).top_k(chunks=given, k=3)

        def check(out, ctx):
            dtype = np.float32 if label == "chunks_float32" else np.float64  # the first chunk's
            check_top_k(out, 5, 3, 6, dtype, True)

        cases.append(Case("normalizers", f"{est_name}-top_k-{label}", run, check, names, shape,
                          expect, finite))

    q = QUERY
    chunk_case("chunks_list", lambda c: [c.keep(q[:, :2].copy()), c.keep(q[:, 2:].copy())], "ok")
    chunk_case("chunks_callable", lambda c: (lambda: [q[:, :4], q[:, 4:]]), "ok")
    chunk_case("chunks_iterator", lambda c: iter([q[:, :4], q[:, 4:]]),
               "ok" if one_pass_top_k(est_name, make) else "error")
    chunk_case("chunks_nan_later", lambda c: [q[:, :3], _set(q[:, 3:], (1, 2), np.nan)], "error",
               ("chunks", "X"), finite=False)
    chunk_case("chunks_short", lambda c: [q[:, :3], q[:, 3:5]], "error")
    chunk_case("chunks_long", lambda c: [q[:, :3], q], "error", shape=True)
    chunk_case("chunks_rows_differ", lambda c: [q[:, :3], q[:2, 3:]], "error", shape=True)
    chunk_case("chunks_empty_list", lambda c: [], "error", shape=False)
    chunk_case("chunks_1d", lambda c: [q[0, :3], q[0, 3:]], "error", shape=True)
    chunk_case("chunks_float32", lambda c: [q[:, :3].astype(np.float32), q[:, 3:]], "ok")
    chunk_case("chunks_zero_width", lambda c: [q[:, :3], q[:, 3:3], q[:, 3:]], "ok")

    def nan_late(ctx):
        x = ctx.keep(_set(QUERY, (2, 5), np.nan))
        return make(working_memory=1e-5).fit(BANK).top_k(x, k=2)

    cases.append(Case("normalizers", f"{est_name}-top_k-X_nan_in_later_column_chunk", nan_late,
                      lambda o, c: None, ("X",), False, "error", False))

    def nan_late_wide(ctx):
        # column chunks of 6 items, wider than k: the NaN sits among other scores
        x = ctx.keep(_set(WIDE_QUERY, (3, 35), np.nan))
        return make(working_memory=0.001).fit(WIDE_BANK).top_k(x, k=5)

    def nan_late_wide_chunks(ctx):
        x = _set(WIDE_QUERY, (3, 35), np.nan)
        return make().fit(WIDE_BANK).top_k(chunks=[x[:, :20], x[:, 20:]], k=5)

    for label, run in (("X_nan_in_later_wide_column_chunk", nan_late_wide),
                       ("chunks_nan_in_later_wide_chunk", nan_late_wide_chunks)):
        cases.append(Case("normalizers", f"{est_name}-top_k-{label}", run, lambda o, c: None,
                          ("X", "chunks"), False, "error", False))

    sources = {
        "X_and_queries": lambda est: est.top_k(QUERY, queries=QUERY_EMB, k=2),
        "no_source": lambda est: est.top_k(k=2),
        "queries_on_precomputed": lambda est: est.top_k(queries=QUERY_EMB, k=2),
        "similarities_on_precomputed": lambda est: est.similarities(QUERY_EMB),
    }
    for label, call in sources.items():
        def run(ctx, call=call):
            return call(make().fit(BANK))

        cases.append(Case("normalizers", f"{est_name}-{label}", run, lambda o, c: None,
                          ("X", "queries", "chunks", "gallery"), False, "error"))
    return cases


def _embedding_case(est_name, make, label, bank, gallery, queries, expect, names, shape=False,
                    params=None, finite=True, k=3):
    params = params or {}

    def run(ctx):
        b, g, q = (ctx.keep(v(ctx) if callable(v) else v) for v in (bank, gallery, queries))
        est = make(**params).fit(b, gallery=g)
        sims = est.similarities(q)
        return est.transform(sims), est.top_k(queries=q, k=k), q, g

    def check(result, ctx):
        out, top, q, g = result
        n_q, n_g = np.shape(q)[0], np.shape(g)[0]
        dtype = _out_dtype(np.asarray(q)) if np.asarray(q).dtype.kind == "f" else np.float64
        check_matrix(out, (n_q, n_g), dtype, ctx.finite_in)
        check_top_k(top, n_q, k, n_g, dtype, ctx.finite_in)
        if np.isfinite(out).all() and params.get("metric", "cosine") == "cosine":
            # cosine similarities of non-zero embeddings cannot all be zero
            nonzero = (np.abs(np.asarray(q, float)).sum(axis=1) > 0)[:, None] & (
                np.abs(np.asarray(g, float)).sum(axis=1) > 0)[None, :]
            sims = out if est_name == "CENT" else None
            if sims is not None and nonzero.all():
                assert np.abs(sims).max() > 0, "all-zero similarities from non-zero embeddings"

    return Case("normalizers", f"{est_name}-embedding-{label}", run, check, names, shape, expect,
                finite)


def _normalizer_embedding_cases(est_name, make):
    b, g, q = BANK_EMB, GAL_EMB, QUERY_EMB
    all_names = ("X", "querybank", "gallery", "queries")
    specs = [
        ("valid", b, g, q, "ok", all_names, False, None, True),
        ("metric_dot", b, g, q, "ok", all_names, False, {"metric": "dot"}, True),
        ("float32", b.astype(np.float32), g.astype(np.float32), q.astype(np.float32), "ok",
         all_names, False, None, True),
        ("float32_bank_float64_gallery", b.astype(np.float32), g, q, "ok", all_names, False, None,
         True),
        ("int_embeddings", np.round(b * 3).astype(int), np.round(g * 3).astype(int) + 1,
         np.round(q * 3).astype(int) + 1, "any", all_names, False, None, True),
        ("list_embeddings", b.tolist(), g.tolist(), q.tolist(), "ok", all_names, False, None, True),
        ("scaled_1e200", b * 1e200, g * 1e200, q * 1e200, "any", all_names, False, None, True),
        ("scaled_1e-170", b * 1e-170, g * 1e-170, q * 1e-170, "any", all_names, False, None, True),
        ("scaled_1e-170_dot", b * 1e-170, g * 1e-170, q * 1e-170, "any", all_names, False,
         {"metric": "dot"}, True),
        ("scaled_1e200_dot", b * 1e200, g * 1e200, q * 1e200, "any", all_names + ("metric",),
         False, {"metric": "dot"}, True),
        ("float32_1e19_dot", (b * 1e19).astype(np.float32), (g * 1e19).astype(np.float32),
         (q * 1e19).astype(np.float32), "any", all_names + ("metric",), False, {"metric": "dot"},
         True),
        ("float32_3e38", _scaled_to(b, 3e38).astype(np.float32),
         _scaled_to(g, 3e38).astype(np.float32), _scaled_to(q, 3e38).astype(np.float32), "any",
         all_names, False, None, True),
        ("zero_gallery_row", b, _set(g, 0, 0.0), q, "any", all_names, False, None, True),
        ("zero_query_row", b, g, _set(q, 0, 0.0), "any", all_names, False, None, True),
        ("zero_bank_row", _set(b, 0, 0.0), g, q, "any", all_names, False, None, True),
        ("duplicate_gallery_rows", b, np.vstack([g[:3], g[:3]]), q, "ok", all_names, False, None,
         True),
        ("gallery_dim_mismatch", b, g[:, :3], q, "error", ("gallery", "querybank"), True, None,
         True),
        ("query_dim_mismatch", b, g, q[:, :3], "error", ("queries",), True, None, True),
        ("gallery_nan", b, _set(g, (1, 1), np.nan), q, "error", ("gallery",), False, None, False),
        ("bank_nan", _set(b, (1, 1), np.nan), g, q, "error", ("querybank", "X"), False, None,
         False),
        ("query_inf", b, g, _set(q, (1, 1), np.inf), "error", ("queries",), False, None, False),
        ("gallery_1d", b, g[0], q, "error", ("gallery",), True, None, True),
        ("gallery_3d", b, g[None], q, "error", ("gallery",), True, None, True),
        ("bank_1d", b[0], g, q, "error", ("querybank", "X"), True, None, True),
        ("gallery_empty", b, g[:0], q, "error", ("gallery",), True, None, True),
        ("bank_empty", b[:0], g, q, "error", ("querybank", "X"), True, None, True),
        ("zero_dims", b[:, :0], g[:, :0], q[:, :0], "error", all_names, True, None, True),
        ("gallery_complex", b, g.astype(complex), q, "any", ("gallery",), False, None, True),
        ("gallery_str", b, g.astype(str), q, "any", ("gallery",), False, None, True),
        ("single_gallery_item", b, g[:1], q, "any", all_names + ("k",), True, None, True),
        ("query_empty", b, g, q[:0], "any", ("queries",), True, None, True),
    ]
    cases = []
    for label, bank, gallery, queries, expect, names, shape, params, finite in specs:
        k = 1 if label == "single_gallery_item" else 3
        cases.append(_embedding_case(est_name, make, label, bank, gallery, queries, expect, names,
                                     shape, params, finite, k))
    return cases


# -- rerankers ----------------------------------------------------------------------------

RX = _rng.normal(size=(12, 3))
RY = _rng.uniform(0, 1, 12)
RG = np.repeat([0, 1], 6)

#: Settings the small lists (two of 6 items) need, by parameter name (optional: a reranker
#: with none of these parameters runs at its defaults).
SMALL_LIST_PARAMS = {"n_neighbors": 3, "k1": 3, "k2": 2, "n_query": 2, "n_database": 2}
#: The one reranker run with worker processes: starting them takes seconds.
PARALLEL_RERANKER = PointwiseReranker


def reranker_maker(cls):
    """A factory of the reranker ``cls`` with the small-list settings of its parameters."""
    names = inspect.signature(cls).parameters
    preset = {name: value for name, value in SMALL_LIST_PARAMS.items() if name in names}
    return lambda **kw: cls(**{**preset, **kw})


def sweep_rerankers(bayesian):
    """The registered rerankers, by catalogue name, that are (``bayesian=True``) or are not
    Bayesian rerankers: a registered reranker enters the sweep with no other edit."""
    found = {}
    for name, cls in catalogue.RERANKERS.items():
        if issubclass(cls, BayesianReranker) == bayesian and cls not in found.values():
            found[name] = cls
    return found


def _rerank_case(make, est_name, label, X, y, groups, expect, names, shape=False, params=None,
                 finite=True, same_as_base=False):
    params = params or {}

    def run(ctx):
        Xv, yv, gv = (ctx.keep(v(ctx)) if callable(v) else ctx.keep(v) if v is not None else None
                      for v in (X, y, groups))
        estimator = make(**params)
        return estimator.fit_predict(Xv, yv, groups=gv), estimator, yv

    def check(result, ctx):
        out, estimator, yv = result
        check_matrix(out, (len(yv),), np.float64, ctx.finite_in)
        unsolved = set(np.asarray(estimator.solver_status_).tolist()) - {"solved"}
        assert not unsolved or ctx.caught, f"solver status {unsolved} without a warning"
        if same_as_base:
            base = make(**params).fit_predict(RX, RY, groups=RG)
            scale = np.abs(base).max()
            np.testing.assert_allclose(out, base, rtol=1e-5, atol=1e-7 * scale,
                                       err_msg=f"{label} changed the scores")

    return Case("rerankers", f"{est_name}-{label}", run, check, names, shape, expect, finite)


#: Values of the Bayesian rerankers' parameters, (value, expect), each swept on every
#: reranker that has the parameter.
BAYESIAN_PARAMS = {
    "c": [(0, "error"), (-1.0, "error"), (np.nan, "error"), (np.inf, "error"), (True, "error"),
          ("1", "error"), (1e-300, "any"), (1e-12, "any"), (1e100, "any"), (1e300, "any"),
          (np.float32(1), "ok"), (1, "ok")],
    "sigma": [(0, "error"), (-1.0, "error"), (np.nan, "error"), (np.inf, "any"), (1e-300, "any"),
              (1e300, "any"), (1e-3, "any"), ("mean", "error"), (True, "error"), (2, "ok")],
    "n_neighbors": [(0, "error"), (-1, "error"), (1, "ok"), (5, "ok"), (100, "any"),
                    (True, "error"), (2.5, "error"), (2.0, "any")],
    "graph": [("dense", "ok"), ("full", "error"), (None, "error")],
    "initial": [("scores", "ok"), ("minmax", "ok"), ("rank", "ok"), ("binary", "any"),
                ("x", "error")],
    "n_positive": [(0, "error"), (1, "any"), (100, "any"), (2.5, "error")],
    "n_jobs": [(0, "any"), (2.5, "error")],
    "laplacian": [("normalized", "ok"), ("x", "error")],
    "pairs": [("all", "ok"), ("top_bottom", "any"), ("clustering", "any"), ("x", "error")],
    "rho": [(0, "error"), (1, "ok"), (4, "ok"), (5, "ok"), (1000, "ok"), (True, "error"),
            (2.5, "error")],
    "n_top": [(0, "error"), (1, "any"), (1000, "any")],
    "n_bottom": [(0, "error"), (1, "any"), (1000, "any")],
    "n_clusters": [(0, "error"), (1, "any"), (100, "any")],
    "random_state": [("x", "error"), (0, "ok")],
    "margin": [(0, "error"), (-1.0, "error"), (np.inf, "error"), (1e300, "any"), (1e-300, "any"),
               (1e-30, "any")],
    "eps_abs": [(0, "any"), (-1.0, "error"), (1e-300, "any")],
    "eps_rel": [(0, "any"), (-1.0, "error")],
    "max_iter": [(0, "error"), (1, "any"), (2.5, "error")],
}


def _bayesian_params(cls):
    """(name, value, expect) for each parameter of ``cls`` in BAYESIAN_PARAMS."""
    names = inspect.signature(cls).parameters
    params = [(name, value, expect) for name, values in BAYESIAN_PARAMS.items() if name in names
              for value, expect in values]
    if cls is PARALLEL_RERANKER:
        params.append(("n_jobs", 2, "ok"))
    return params


def _reranker_cases(rerankers=None):
    """The cases of the Bayesian rerankers (by default every registered one)."""
    cases = []
    for est_name, cls in (sweep_rerankers(True) if rerankers is None else rerankers).items():
        case = partial(_rerank_case, reranker_maker(cls), est_name)
        for variant, (build, expect, finite, shape_problem) in MATRIX_VARIANTS.items():
            if variant in ("column_missing", "column_extra", "duplicate_column"):
                expect = "ok"
            if variant in ("constant", "zeros"):
                expect = "any"  # all samples alike: no graph to speak of
            if variant in ("single_row",):
                expect = "error"
            cases.append(case(f"X-{variant}",
                              lambda c, b=build: b(RX.copy(), c), RY.copy(), RG.copy(),
                              expect, ("X",), shape_problem, finite=finite,
                              same_as_base=variant in REPRESENTATION_ONLY))
        y_specs = [
            ("nan", _set(RY, 2, np.nan), "error", False, False),
            ("inf", _set(RY, 3, np.inf), "error", False, False),
            ("neginf", _set(RY, 3, -np.inf), "error", False, False),
            ("huge_1e300", RY * 1e300, "any", True, False),
            ("huge_1e308", _scaled_to(RY, 1.7e308), "any", True, False),
            ("gaps_1e-200", RY * 1e-200, "any", True, False),
            ("gaps_1e-300", RY * 1e-300, "any", True, False),
            ("offset_1e15", RY + 1e15, "any", True, False),
            ("ties", np.round(RY, 1), "any", True, False),
            ("constant_group", np.where(RG == 0, 0.5, RY), "any", True, False),
            ("int", np.arange(12) % 6, "ok", True, False),
            ("bool", RY > 0.5, "any", True, False),
            ("float32", RY.astype(np.float32), "ok", True, False),
            ("complex", RY.astype(complex), "any", True, False),
            ("str_numbers", RY.astype(str), "any", True, False),
            ("str_words", np.full(12, "x"), "error", True, False),
            ("list", RY.tolist(), "ok", True, False),
            ("column_vector", RY[:, None], "any", True, False),
            ("two_columns", np.c_[RY, RY], "error", True, True),
            ("short", RY[:11], "error", True, True),
            ("long", np.r_[RY, 0.1], "error", True, True),
            ("empty", RY[:0], "error", True, True),
            ("scalar", 0.5, "error", True, True),
        ]
        for label, y, expect, finite, shape in y_specs:
            cases.append(case(f"y-{label}", RX.copy(), y, RG.copy(), expect,
                              ("y",), shape, finite=finite,
                              same_as_base=label in ("list", "str_numbers")))
        g_specs = [
            ("none", None, "ok", False),
            ("strings", np.where(RG == 0, "a", "b"), "ok", False),
            ("floats", RG.astype(float) + 0.5, "ok", False),
            ("nan", _set(RG, 0, np.nan), "any", False),
            ("bool", RG.astype(bool), "ok", False),
            ("singleton_group", np.r_[RG[:-1], 7], "error", False),
            ("all_distinct", np.arange(12), "error", False),
            ("short", RG[:11], "error", True),
            ("long", np.r_[RG, 1], "error", True),
            ("two_dim", np.c_[RG, RG], "error", True),
            ("list", RG.tolist(), "ok", False),
            ("object_mixed", np.array([0, "a"] * 6, dtype=object), "any", False),
        ]
        for label, groups, expect, shape in g_specs:
            relabelled = label in ("strings", "floats", "bool", "list")
            cases.append(case(f"groups-{label}", RX.copy(), RY.copy(), groups,
                              expect, ("groups", "group"), shape,
                              same_as_base=relabelled))
        params = _bayesian_params(cls)
        for name, value, expect in params:
            extra = {"pairs": "clustering"} if name in ("n_clusters", "random_state") else {}
            if name in ("n_top", "n_bottom"):
                extra = {"pairs": "top_bottom"}
            if name == "n_positive":
                extra = {"initial": "binary"}
            names = (name, *extra, "pairs") if extra else (name,)
            cases.append(case(f"param-{name}={value!r}", RX.copy(), RY.copy(),
                              RG.copy(), expect, names, params={name: value, **extra}))
        if "eps_rel" in inspect.signature(cls).parameters:
            cases.append(case("param-eps_abs=eps_rel=0", RX.copy(), RY.copy(),
                              RG.copy(), "any", ("eps_abs", "eps_rel"),
                              params={"eps_abs": 0.0, "eps_rel": 0.0}))
        for scale in (1e200, 1e-200, 1e100, 1e-100):
            cases.append(case(f"X_scaled_{scale:g}", RX * scale, RY.copy(),
                              RG.copy(), "ok", ("X",), same_as_base=True))
        cases.append(case("X_identical_rows", np.ones((12, 3)), RY.copy(),
                          RG.copy(), "ok", ("X",)))
        cases.append(case("X_duplicate_pairs", np.repeat(RX[:6], 2, axis=0),
                          RY.copy(), RG.copy(), "ok", ("X",)))
        cases.append(case("two_items", RX[:2], RY[:2], None, "ok", ("X", "y")))
        for scale in (1e-200, 1e-300, 1e200):
            # raw initial scores with tiny or huge gaps (pair weights 1 / gap^2 for pref)
            cases.append(case(f"y_scaled_{scale:g}-initial=scores", RX.copy(),
                              RY * scale, RG.copy(), "any", ("y", "initial", "c"),
                              params={"initial": "scores"}))
        cases.append(case("dense_identical_rows", np.ones((12, 3)), RY.copy(),
                          RG.copy(), "ok", ("X",), params={"graph": "dense"}))
    return cases


# -- metrics ------------------------------------------------------------------------------

SIMS = _rng.uniform(-1, 1, (5, 6))
GT = np.array([0, 1, 2, 3, 4])
RETRIEVAL_BOUNDS = {**{f"R@{k}": (0, 100) for k in (1, 5, 10, 50)}, "MdR": (1, 6), "MnR": (1, 6),
                    "geometric_mean": (0, 100)}
HUBNESS_BOUNDS = {"skewness": (-np.inf, np.inf), "antihub_occurrence": (0, 1),
                  "hub_occurrence": (0, 1), "robin_hood": (0, 1), "gini": (0, 1)}


def _metric_case(label, call, check, names, shape=False, expect="any", finite=True):
    return Case("metrics", label, call, check, names, shape, expect, finite)


#: Variants that keep every row's order (so rank-based metrics must not change).
ORDER_PRESERVING = REPRESENTATION_ONLY | {"float32", "huge_1e300", "tiny_1e-300", "memmap_f32",
                                          "float32_3e38", "huge_1e308", "subnormal_1e-310"}


def _metrics_matrix_cases():
    cases = []
    for variant, (build, expect, finite, shape_problem) in MATRIX_VARIANTS.items():
        if variant in SHAPE_ERRORS_ON_COLUMNS or variant == "single_row":
            expect_r = "error" if variant == "single_row" else "ok"  # gt has 5 entries
        else:
            expect_r = expect
        expect_h = "ok" if variant in SHAPE_ERRORS_ON_COLUMNS or variant == "single_row" else expect
        n_cols = {"column_missing": 5, "column_extra": 7}.get(variant, 6)
        bounds = {**RETRIEVAL_BOUNDS, "MdR": (1, n_cols), "MnR": (1, n_cols)}
        sims_names = ("sims", "gt") if variant == "single_row" else ("sims",)
        same = variant in ORDER_PRESERVING
        specs = [
            ("retrieval_metrics", lambda sims: M.retrieval_metrics(sims, GT.copy()),
             lambda r, b=bounds: check_dict(r, b), sims_names, expect_r),
            ("correct_item_ranks", lambda sims: M.correct_item_ranks(sims, GT),
             lambda r, n=n_cols: check_ranks(r, 5, n), sims_names, expect_r),
            ("hubness", lambda sims: M.hubness(sims, k=2),
             lambda r: check_dict(r, HUBNESS_BOUNDS), ("sims",), expect_h),
            ("k_occurrence", lambda sims: M.k_occurrence(sims, k=2),
             lambda r, n=n_cols, m=1 if variant == "single_row" else 5: check_counts(r, (m, n), 2),
             ("sims",), expect_h),
        ]
        for fn_name, call, check_value, names, case_expect in specs:
            def run(ctx, build=build, call=call):
                return call(ctx.keep(build(SIMS, ctx)))

            def check(result, ctx, call=call, check_value=check_value, same=same,
                      variant=variant):
                check_value(result)
                if same:
                    base = call(SIMS)
                    assert repr(result) == repr(base), (
                        f"{variant} sims changed the result: {result} != {base}")

            cases.append(_metric_case(f"{fn_name}-sims-{variant}", run, check, names,
                                      shape_problem, case_expect, finite))
    return cases


def check_ranks(ranks, n_queries, n_gallery):
    check_matrix(ranks, (n_queries,), np.float64, True)
    assert ((ranks >= 0) & (ranks <= n_gallery - 1)).all(), f"ranks {ranks} outside the gallery"


def check_counts(counts, shape, k):
    assert isinstance(counts, np.ndarray) and counts.shape == (shape[1],), "bad counts shape"
    assert np.issubdtype(counts.dtype, np.integer), f"counts dtype {counts.dtype}"
    assert counts.sum() == shape[0] * k, f"counts sum {counts.sum()} != {shape[0]} * {k}"


def _metrics_param_cases():
    cases = []

    def constant(ctx):
        return M.retrieval_metrics(np.full((5, 6), 0.5), GT)

    def check_constant(result, ctx):
        check_dict(result, RETRIEVAL_BOUNDS)
        assert result["R@1"] == 0, f"a constant matrix scores R@1 = {result['R@1']}"

    cases.append(_metric_case("retrieval_metrics-constant_matrix_R@1_is_0", constant,
                              check_constant, ("sims",), False, "ok"))
    gt_specs = [
        ("float_integral", GT.astype(float), "any", False),
        ("float_fraction", GT + 0.5, "error", False),
        ("negative", np.r_[GT[:-1], -1], "error", False),
        ("too_large", np.r_[GT[:-1], 6], "error", False),
        ("short", GT[:4], "error", True),
        ("long", np.r_[GT, 0], "error", True),
        ("scalar", np.int64(0), "error", True),
        ("none", None, "error", False),
        ("strings", GT.astype(str), "error", False),
        ("bool_1d", GT > 2, "error", False),
        ("nan", _set(GT, 0, np.nan), "error", False),
        ("list", GT.tolist(), "ok", False),
        ("int8", GT.astype(np.int8), "ok", False),
        ("uint64", GT.astype(np.uint64), "ok", False),
        ("relevance_matrix", np.eye(5, 6, dtype=bool), "ok", False),
        ("relevance_int", np.eye(5, 6, dtype=int), "ok", False),
        ("relevance_wrong_shape", np.eye(5, 5, dtype=bool), "error", True),
        ("relevance_empty_row", np.eye(5, 6, dtype=bool) & (np.arange(5) < 4)[:, None], "error",
         False),
        ("relevance_nan", _set(np.eye(5, 6), (0, 0), np.nan), "error", False),
        ("relevance_3d", np.eye(5, 6, dtype=bool)[None], "error", True),
    ]
    for label, gt, expect, shape in gt_specs:
        def retrieval(ctx, gt=gt):
            return M.retrieval_metrics(SIMS, ctx.keep(gt))

        def ranks(ctx, gt=gt):
            return M.correct_item_ranks(SIMS, ctx.keep(gt))

        cases.append(_metric_case(f"retrieval_metrics-gt-{label}", retrieval,
                                  lambda r, c: check_dict(r, RETRIEVAL_BOUNDS), ("gt",), shape,
                                  expect))
        cases.append(_metric_case(f"correct_item_ranks-gt-{label}", ranks,
                                  lambda r, c: check_ranks(r, 5, 6), ("gt",), shape, expect))
    for k, expect in [(0, "error"), (-1, "error"), (2.5, "error"), (True, "error"), (7, "error"),
                      (None, "error"), ("2", "error"), (np.int64(2), "ok"), (6, "ok"), (1, "ok"),
                      (2.0, "any"), (np.nan, "error")]:
        def hub(ctx, k=k):
            return M.hubness(SIMS, k=k)

        def occurrence(ctx, k=k):
            return M.k_occurrence(SIMS, k=k)

        cases.append(_metric_case(f"hubness-k={k!r}", hub,
                                  lambda r, c: check_dict(r, HUBNESS_BOUNDS), ("k",), k == 7,
                                  expect))
        cases.append(_metric_case(f"k_occurrence-k={k!r}", occurrence,
                                  lambda r, c, k=k: check_counts(r, (5, 6), int(k)), ("k",),
                                  k == 7, expect))
    count_specs = [
        ("zeros", np.zeros(6), 2, "any", False),
        ("empty", np.zeros(0), 2, "error", True),
        ("negative", np.array([3, -1, 2, 2, 2, 2]), 2, "error", False),
        ("nan", _set(np.full(6, 2.0), 0, np.nan), 2, "error", False),
        ("inf", _set(np.full(6, 2.0), 0, np.inf), 2, "error", False),
        ("two_dim", np.ones((2, 3)), 1, "error", True),
        ("floats", np.array([0.5, 1.5, 2, 2, 2, 2]), 2, "any", False),
        ("single", np.array([5]), 5, "any", False),
        ("constant", np.full(6, 2), 2, "ok", False),
        ("list", [0, 1, 2, 3, 4, 0], 2, "ok", False),
        ("k=0", np.array([0, 1, 2, 3, 4, 0]), 0, "error", False),
        ("k=-1", np.array([0, 1, 2, 3, 4, 0]), -1, "error", False),
        ("k=True", np.array([0, 1, 2, 3, 4, 0]), True, "error", False),
        ("k=2.5", np.array([0, 1, 2, 3, 4, 0]), 2.5, "error", False),
        ("strings", np.array(["1", "2"]), 1, "any", False),
        ("huge", np.array([1e300, 1e300, 0, 0]), 1, "any", False),
    ]
    for label, counts, k, expect, shape in count_specs:
        def from_counts(ctx, counts=counts, k=k):
            return M.hubness_from_counts(ctx.keep(counts), k)

        name = "k" if label.startswith("k=") else "counts"
        cases.append(_metric_case(f"hubness_from_counts-{label}", from_counts,
                                  lambda r, c: check_dict(r, HUBNESS_BOUNDS), (name,), shape,
                                  expect))
    cases += _ap_cases()
    cases += _distance_cases()
    cases += _scorer_cases()
    return cases


AP_SCORES = np.array([0.9, 0.3, 0.8, 0.1, 0.5, 0.7])
AP_REL = np.array([1, 0, 0, 1, 1, 0])
AP_GROUPS = np.array([0, 0, 0, 1, 1, 1])


def _ap_cases():
    cases = []
    s, r = AP_SCORES, AP_REL
    specs = [
        ("scores_nan", _set(s, 1, np.nan), r, {}, "error", ("scores",), False, False),
        ("scores_inf", _set(s, 1, np.inf), r, {}, "error", ("scores",), False, False),
        ("scores_neginf", _set(s, 1, -np.inf), r, {}, "any", ("scores",), False, False),
        ("scores_huge", s * 1e300, r, {}, "ok", ("scores",), False, True),
        ("scores_ties", np.round(s, 0), r, {}, "ok", ("scores",), False, True),
        ("scores_int", (s * 10).astype(int), r, {}, "ok", ("scores",), False, True),
        ("scores_bool", s > 0.5, r, {}, "any", ("scores",), False, True),
        ("scores_list", s.tolist(), r.tolist(), {}, "ok", ("scores",), False, True),
        ("scores_str", s.astype(str), r, {}, "any", ("scores",), False, True),
        ("scores_words", np.full(6, "x"), r, {}, "error", ("scores",), False, True),
        ("scores_complex", s.astype(complex), r, {}, "any", ("scores",), False, True),
        ("scores_column", s[:, None], r, {}, "any", ("scores",), True, True),
        ("scores_2d", np.c_[s, s], r, {}, "error", ("scores",), True, True),
        ("scores_3d", s[None, None], r, {}, "error", ("scores",), True, True),
        ("empty", s[:0], r[:0], {}, "any", ("scores", "relevance"), True, True),
        ("single", s[:1], r[:1], {}, "ok", ("scores",), False, True),
        ("length_mismatch", s, r[:5], {}, "error", ("scores", "relevance"), True, True),
        ("relevance_all_zero", s, 0 * r, {}, "ok", ("relevance",), False, True),
        ("relevance_bool", s, r.astype(bool), {}, "ok", ("relevance",), False, True),
        ("relevance_graded", s, r * 2, {}, "any", ("relevance",), False, True),
        ("relevance_negative", s, r - 1, {}, "any", ("relevance",), False, True),
        ("relevance_fraction", s, r * 0.5, {}, "any", ("relevance",), False, True),
        ("relevance_nan", s, _set(r, 0, np.nan), {}, "error", ("relevance",), False, False),
        ("relevance_words", s, np.full(6, "yes"), {}, "any", ("relevance",), False, True),
        ("relevance_2d", s, np.c_[r, r], {}, "error", ("relevance",), True, True),
        ("n=0", s, r, {"n": 0}, "error", ("n",), False, True),
        ("n=-1", s, r, {"n": -1}, "error", ("n",), False, True),
        ("n=2.7", s, r, {"n": 2.7}, "error", ("n",), False, True),
        ("n=2.0", s, r, {"n": 2.0}, "any", ("n",), False, True),
        ("n=True", s, r, {"n": True}, "error", ("n",), False, True),
        ("n=100", s, r, {"n": 100}, "ok", ("n",), False, True),
        ("n=nan", s, r, {"n": np.nan}, "error", ("n",), False, True),
        ("n=inf", s, r, {"n": np.inf}, "error", ("n",), False, True),
        ("n='2'", s, r, {"n": "2"}, "error", ("n",), False, True),
        ("n=int64", s, r, {"n": np.int64(2)}, "ok", ("n",), False, True),
        ("denominator=x", s, r, {"denominator": "x"}, "error", ("denominator",), False, True),
        ("denominator=truncated", s, r, {"denominator": "truncated", "n": 2}, "ok", ("denominator",),
         False, True),
    ]
    for label, scores, relevance, kwargs, expect, names, shape, finite in specs:
        def ap(ctx, scores=scores, relevance=relevance, kwargs=kwargs):
            return M.average_precision(ctx.keep(scores), ctx.keep(relevance), **kwargs)

        def mean_ap(ctx, scores=scores, relevance=relevance, kwargs=kwargs):
            groups = np.resize(AP_GROUPS, np.shape(scores)[:1] or (1,))
            return M.mean_average_precision(ctx.keep(scores), ctx.keep(relevance),
                                            groups, **kwargs)

        def check_ap(value, ctx, label=label, kwargs=kwargs):
            check_float(value, 0, 1)
            if label in ("scores_huge", "scores_int", "scores_list", "relevance_bool",
                         "scores_column", "scores_str"):
                base = M.average_precision(s, r, **kwargs)
                assert value == base, f"{label} changed AP: {value} != {base}"

        cases.append(_metric_case(f"average_precision-{label}", ap, check_ap, names, shape,
                                  expect, finite))
        if label != "empty":
            cases.append(_metric_case(f"mean_average_precision-{label}", mean_ap,
                                      lambda v, c: check_float(v, 0, 1), names, shape, expect,
                                      finite))
    for label, groups, expect, shape in [
        ("groups_short", AP_GROUPS[:5], "error", True),
        ("groups_long", np.r_[AP_GROUPS, 1], "error", True),
        ("groups_2d", np.c_[AP_GROUPS, AP_GROUPS], "error", True),
        ("groups_str", AP_GROUPS.astype(str), "ok", False),
        ("groups_nan", _set(AP_GROUPS, 0, np.nan), "any", False),
        ("groups_none", None, "error", False),
        ("all_empty", np.zeros(0), "any", True),
    ]:
        def mean_ap(ctx, groups=groups, label=label):
            n = 0 if label == "all_empty" else 6
            return M.mean_average_precision(s[:n], r[:n], ctx.keep(groups))

        names = ("groups", "scores") if label == "all_empty" else ("groups",)
        cases.append(_metric_case(f"mean_average_precision-{label}", mean_ap,
                                  lambda v, c: check_float(v, 0, 1), names, shape, expect))
    return cases


D_SCORES = np.array([0.6, 0.7, 0.8, 0.9, 1.0])
D_INIT = np.array([1.0, 0.9, 0.8, 0.7, 0.6])


def _distance_cases():
    distances = {
        "pointwise_distance": lambda a, b, **kw: M.pointwise_distance(a, b, **kw),
        "discordant_pairs": lambda a, b, **kw: M.discordant_pairs(a, b, **kw),
        "hinge_distance": lambda a, b, **kw: M.hinge_distance(a, b, **kw),
        "preference_strength_distance":
            lambda a, b, **kw: M.preference_strength_distance(a, b, **kw),
    }
    a, b = D_SCORES, D_INIT
    specs = [
        ("valid", a, b, {}, "ok", (), False, True),
        ("scores_short", a[:4], b, {}, "error", ("scores", "initial_scores"), True, True),
        ("initial_short", a, b[:4], {}, "error", ("scores", "initial_scores"), True, True),
        ("scores_one", a[:1], b, {}, "error", ("scores", "initial_scores"), True, True),
        ("scores_2d", np.c_[a, a], b, {}, "error", ("scores",), True, True),
        ("initial_2d", a, np.c_[b, b], {}, "error", ("initial_scores",), True, True),
        ("column_vectors", a[:, None], b[:, None], {}, "any", ("scores", "initial_scores"), True,
         True),
        ("empty", a[:0], b[:0], {}, "any", ("scores", "initial_scores"), True, True),
        ("single", a[:1], b[:1], {}, "ok", ("scores",), False, True),
        ("scores_nan", _set(a, 0, np.nan), b, {}, "error", ("scores",), False, False),
        ("initial_nan", a, _set(b, 0, np.nan), {}, "error", ("initial_scores",), False, False),
        ("initial_inf", a, _set(b, 0, np.inf), {}, "error", ("initial_scores",), False, False),
        ("huge", a * 1e300, b * 1e300, {}, "any", ("scores",), False, True),
        ("ties", np.round(a), np.round(b), {}, "ok", (), False, True),
        ("tiny_gaps", a, b * 1e-300, {}, "any", ("initial_scores",), False, True),
        ("lists", a.tolist(), b.tolist(), {}, "ok", (), False, True),
        ("ints", np.arange(5), np.arange(5)[::-1], {}, "ok", (), False, True),
        ("strings", a.astype(str), b.astype(str), {}, "any", ("scores",), False, True),
        ("words", np.full(5, "x"), b, {}, "error", ("scores",), False, True),
    ]
    cases = []
    for fn_name, fn in distances.items():
        for label, x, y, kwargs, expect, names, shape, finite in specs:
            def run(ctx, fn=fn, x=x, y=y, kwargs=kwargs):
                return fn(ctx.keep(x), ctx.keep(y), **kwargs)

            cases.append(_metric_case(f"{fn_name}-{label}", run,
                                      lambda v, c: check_float(v, 0), names, shape, expect, finite))
    pair_specs = [
        ("pairs_out_of_range", (np.array([0, 9]), np.array([1, 2])), {}, "error", True),
        ("pairs_negative", (np.array([0, -1]), np.array([1, 2])), {}, "error", False),
        ("pairs_lengths_differ", (np.array([0, 1]), np.array([2])), {}, "error", True),
        ("pairs_floats", (np.array([0.0, 1.0]), np.array([2.0, 3.0])), {}, "any", False),
        ("pairs_three", (np.array([0]), np.array([1]), np.array([2])), {}, "error", False),
        ("pairs_empty", (np.array([], dtype=int), np.array([], dtype=int)), {}, "ok", False),
        ("pairs_valid", (np.array([0, 1]), np.array([2, 3])), {}, "ok", False),
    ]
    for fn_name in ("hinge_distance", "preference_strength_distance"):
        for label, pairs, kwargs, expect, shape in pair_specs:
            def run(ctx, fn=distances[fn_name], pairs=pairs):
                return fn(a, b, pairs=ctx.keep(pairs))

            cases.append(_metric_case(f"{fn_name}-{label}", run, lambda v, c: check_float(v, 0),
                                      ("pairs",), shape, expect))
    for margin, expect in [(-1.0, "any"), (np.nan, "error"), (np.inf, "error"), (1e300, "any"),
                           ("1", "error"), (True, "any")]:
        def run(ctx, margin=margin):
            return M.hinge_distance(a, b, margin=margin)

        cases.append(_metric_case(f"hinge_distance-margin={margin!r}", run,
                                  lambda v, c: check_float(v, 0), ("margin",), False, expect))
    for label, values, expect, shape in [("valid", b, "ok", False), ("nan", _set(b, 0, np.nan),
                                                                      "error", False),
                                         ("two_dim", np.c_[b, b], "error", True),
                                         ("empty", b[:0], "any", True)]:
        def run(ctx, values=values):
            return M.ordered_pairs(ctx.keep(values))

        def check(result, ctx):
            high, low = result
            assert high.shape == low.shape and high.ndim == 1, "bad pair arrays"

        cases.append(_metric_case(f"ordered_pairs-{label}", run, check, ("initial_scores",), shape,
                                  expect))
    for label, ranks, k, expect in [("valid", [0, 1, 2], 1, "ok"), ("k=0", [0, 1, 2], 0, "any"),
                                    ("k=-1", [0, 1, 2], -1, "error"),
                                    ("nan", [0, np.nan], 1, "error"),
                                    ("empty", [], 1, "error"), ("k=2.5", [0, 1, 2], 2.5, "any")]:
        def run(ctx, ranks=ranks, k=k):
            return M.recall_at_k(ctx.keep(ranks), k)

        names = ("k",) if label.startswith("k=") else ("ranks",)
        cases.append(_metric_case(f"recall_at_k-{label}", run, lambda v, c: check_float(v, 0, 100),
                                  names, False, expect))
    return cases


def _scorer_cases():
    cases = []
    for metric, expect in [("R@1", "ok"), ("geometric_mean", "ok"), ("R@2", "error"),
                           (None, "error"),
                           ("r@1", "error")]:
        def run(ctx, metric=metric):
            scorer = M.make_retrieval_scorer(metric)
            return scorer(InvertedSoftmax().fit(BANK), QUERY, GT)

        cases.append(_metric_case(f"make_retrieval_scorer-metric={metric!r}", run,
                                  lambda v, c: check_float(v, 0, 100), ("metric",), False, expect))
    for label, kwargs, expect in [("n=0", {"n": 0}, "error"), ("n=-1", {"n": -1}, "error"),
                                  ("n=2.7", {"n": 2.7}, "error"),
                                  ("normalizer=x", {"normalizer": "x"}, "error"),
                                  ("normalizer=None", {"normalizer": None}, "error"),
                                  ("valid", {"n": 3}, "ok")]:
        def construct(ctx, kwargs=kwargs):
            scorer = M.make_map_scorer(**kwargs)
            assert callable(scorer)
            return scorer

        cases.append(_metric_case(f"make_map_scorer-construct-{label}", construct,
                                  lambda v, c: None, tuple(kwargs)[-1:], False,
                                  "ok" if expect == "ok" else "error"))
    for label, y, expect, shape in [("gt_short", GT[:4], "error", True),
                                    ("gt_out_of_range", GT + 3, "error", False),
                                    ("gt_float", GT + 0.5, "error", False)]:
        def run(ctx, y=y):
            return M.make_retrieval_scorer()(InvertedSoftmax().fit(BANK), QUERY, ctx.keep(y))

        cases.append(_metric_case(f"retrieval_scorer-call-{label}", run,
                                  lambda v, c: check_float(v, 0, 100), ("gt", "y"), shape, expect))
    for label, relevance, groups, expect, shape in [
        ("valid", RY > 0.5, RG, "ok", False),
        ("relevance_short", (RY > 0.5)[:11], RG, "error", True),
        ("groups_none", RY > 0.5, None, "any", False),
    ]:
        def run(ctx, relevance=relevance, groups=groups):
            scorer = M.make_map_scorer()
            return scorer(PointwiseReranker(n_neighbors=3), RX, RY, ctx.keep(relevance), groups)

        cases.append(_metric_case(f"map_scorer-call-{label}", run,
                                  lambda v, c: check_float(v, 0, 1),
                                  ("relevance", "scores", "groups"), shape, expect))
    return cases


# -- command line -------------------------------------------------------------------------

CLI_SIMS = np.eye(6) * 0.5 + _rng.uniform(0, 0.4, (6, 6))
CLI_BANK = _rng.uniform(0, 1, (20, 6))
CLI_SIMS12 = np.eye(12) * 0.5 + _rng.uniform(0, 0.4, (12, 12))
CLI_BANK12 = _rng.uniform(0, 1, (30, 12))


def run_cli(argv):
    """``(status, stdout, stderr)`` of ``skqbnorm ...`` run in-process."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            status = cli_main(argv)
        except SystemExit as exit_:
            status = exit_.code
    return status, out.getvalue(), err.getvalue()


def check_cli(result, ctx, finite=True):
    status, out, err, save = result
    assert "Traceback" not in err, "traceback on stderr"
    assert status in (0, 2), f"exit status {status!r}; stderr: {err.strip()[-200:]}"
    if status == 2:
        error_lines = [line for line in err.splitlines() if "error" in line.lower()]
        assert len(error_lines) == 1, f"{len(error_lines)} error lines on stderr: {err!r}"
        return
    assert out.strip(), "status 0 with no output"
    if finite:
        lowered = out.lower()
        assert "nan" not in lowered and "inf" not in lowered, f"non-finite metric: {out!r}"
    if save is not None:
        written = [p for p in (save, save + ".npy") if os.path.isfile(p)]
        assert written, "status 0 but --save wrote nothing"
        array = np.load(written[0])
        if finite:
            assert np.isfinite(array).all(), "saved matrix has non-finite entries"


def _write(ctx, name, content):
    path = ctx.tmp / name
    if callable(content):
        content(path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, np.ndarray):
        with open(path, "wb") as handle:
            np.save(handle, content, allow_pickle=content.dtype == object)
    else:
        raise TypeError(content)
    return path


def _npy_header_only(shape, descr="<f8", extra=b"\0" * 64):
    def write(path):
        with open(path, "wb") as handle:
            np.lib.format.write_array_header_1_0(
                handle, {"descr": descr, "fortran_order": False, "shape": shape})
            handle.write(extra)
    return write


def _npy_bytes(array):
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=array.dtype == object)
    return buffer.getvalue()


def _truncated(array):
    data = _npy_bytes(array)
    return data[: len(data) - 100]


def _npz(members):
    def write(path):
        with zipfile.ZipFile(path, "w") as archive:
            for member, content in members.items():
                archive.writestr(member + ".npy", content if isinstance(content, bytes)
                                 else _npy_bytes(content))
    return write


def _huge_npz_member(path):
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": "<f8", "fortran_order": False, "shape": (10**9, 10**6)})
    _npz({"sims": buffer.getvalue() + b"\0" * 64})(path)


#: File contents that are not a loadable 2-D float matrix, by name -> (file name, content).
BAD_FILES = {
    "zero_bytes": ("x.npy", b""),
    "text_named_npy": ("x.npy", b"0.1 0.2\n0.3 0.4\n"),
    "truncated_npy": ("x.npy", lambda p: p.write_bytes(_truncated(CLI_SIMS))),
    "huge_header": ("x.npy", _npy_header_only((10**12, 6))),
    "huge_header_2": ("x.npy", _npy_header_only((6, 10**15))),
    "negative_shape_header": ("x.npy", lambda p: p.write_bytes(
        _npy_bytes(CLI_SIMS).replace(b"(6, 6)", b"(-6, 6)"))),
    "npz_named_npy": ("x.npy", _npz({"sims": CLI_SIMS, "bank_sims": CLI_BANK, "gt": np.arange(6)})),
    "npy_named_npz": ("x.npz", lambda p: p.write_bytes(_npy_bytes(CLI_SIMS))),
    "corrupt_zip": ("x.npz", lambda p: p.write_bytes(b"PK\x03\x04" + b"\x00" * 40)),
    "npz_bad_member": ("x.npz", _npz({"sims": b"not an npy file"})),
    "npz_huge_member": ("x.npz", _huge_npz_member),
    "npz_empty": ("x.npz", _npz({})),
    "npz_several_unnamed": ("x.npz", _npz({"a": CLI_SIMS, "b": CLI_SIMS})),
    "structured": ("x.npy", np.zeros((6, 6), dtype=[("a", "f8")])),
    "datetime": ("x.npy", np.zeros((6, 6), dtype="M8[s]")),
    "complex": ("x.npy", CLI_SIMS.astype(complex)),
    "object_pickle": ("x.npy", CLI_SIMS.astype(object)),
    "strings": ("x.npy", CLI_SIMS.astype(str)),
    "txt_suffix": ("x.txt", b"0.1 0.2\n"),
    "no_suffix": ("x", lambda p: p.write_bytes(_npy_bytes(CLI_SIMS))),
    "one_dim": ("x.npy", CLI_SIMS[0]),
    "three_dim": ("x.npy", CLI_SIMS[None]),
    "zero_rows": ("x.npy", CLI_SIMS[:0]),
    "zero_columns": ("x.npy", CLI_SIMS[:, :0]),
    "nan": ("x.npy", _set(CLI_SIMS, (1, 1), np.nan)),
    "inf": ("x.npy", _set(CLI_SIMS, (1, 1), np.inf)),
    "scalar": ("x.npy", np.array(0.5)),
    "bool": ("x.npy", CLI_SIMS > 0.5),
}

#: Files that hold a valid matrix in an unusual form: name -> (file name, content).
ODD_GOOD_FILES = {
    "float32": ("x.npy", CLI_SIMS.astype(np.float32)),
    "int16": ("x.npy", np.round(CLI_SIMS * 100).astype(np.int16)),
    "float16": ("x.npy", CLI_SIMS.astype(np.float16)),
    "fortran": ("x.npy", np.asfortranarray(CLI_SIMS)),
    "big_endian": ("x.npy", CLI_SIMS.astype(">f8")),
    "npz_one_member": ("x.npz", _npz({"whatever": CLI_SIMS})),
    "constant": ("x.npy", np.full((6, 6), 0.5)),
    "huge_values": ("x.npy", CLI_SIMS * 1e300),
}


def _cli_case(label, build, expect="any", finite=True, save=None, quiet=True):
    """``build(ctx)`` writes the files and returns the argv after ``evaluate``."""
    def run(ctx):
        argv = build(ctx)
        for path in ctx.tmp.iterdir():
            ctx.keep_file(path)
        if not quiet:
            argv.remove("--quiet")
        status, out, err = run_cli(["evaluate", *argv])
        return status, out, err, None if save is None else str(ctx.tmp / save)

    def check(result, ctx):
        status = result[0]
        if expect == "ok":
            assert status == 0, f"status {status} on valid input: {result[2].strip()[-300:]}"
        if expect == "error":
            assert status == 2, f"status {status}: invalid input accepted"
        check_cli(result, ctx, finite)
        if not quiet and status == 0 and save is not None:
            written = [p for p in (save, save + ".npy") if os.path.isfile(ctx.tmp / p)]
            said = [line for line in result[2].splitlines() if "wrote" in line]
            assert said and str(ctx.tmp / written[0]) in said[0], (
                f"wrote {written}, but said {said!r}")

    return Case("cli", label, run, check, (), False, "cli", finite)


def _standard_files(ctx, sims=CLI_SIMS, bank=CLI_BANK):
    paths = {"sims": _write(ctx, "sims.npy", sims), "bank": _write(ctx, "bank.npy", bank),
             "gt": _write(ctx, "gt.npy", np.arange(sims.shape[0]))}
    return paths


def _args(paths, *extra, gt=True):
    argv = ["--sims", str(paths["sims"]), "--bank-sims", str(paths["bank"]), "--quiet"]
    return argv + (["--gt", str(paths["gt"])] if gt else []) + list(extra)


def _cli_cases():
    cases = []
    for method in ("all", "raw", "is", "dis", "csls", "gc", "cent"):
        cases.append(_cli_case(f"small_gallery-method={method}",
                               lambda c, m=method: _args(_standard_files(c), "--method", m),
                               "any" if method == "csls" else "ok"))
        cases.append(_cli_case(f"gallery12-method={method}", lambda c, m=method: _args(
            _standard_files(c, CLI_SIMS12, CLI_BANK12), "--method", m), "ok"))
    for role in ("sims", "bank", "gt"):
        for label, (file_name, content) in BAD_FILES.items():
            def build(ctx, role=role, file_name=file_name, content=content):
                paths = _standard_files(ctx)
                paths[role] = _write(ctx, f"{role}_{file_name}", content)
                return _args(paths, "--method", "dis")

            finite = label not in ("nan", "inf")
            lenient = label == "bool" or (role == "gt" and label == "zero_columns")
            expect = "any" if lenient else "error"
            cases.append(_cli_case(f"{role}-{label}", build, expect, finite))
        for label, (file_name, content) in ODD_GOOD_FILES.items():
            if role == "gt":
                continue

            def build(ctx, role=role, file_name=file_name, content=content):
                paths = _standard_files(ctx)
                paths[role] = _write(ctx, f"{role}_{file_name}", content)
                return _args(paths, "--method", "is")

            cases.append(_cli_case(f"{role}-{label}", build,
                                   "any" if label == "huge_values" else "ok"))

        def folder(ctx, role=role):
            paths = _standard_files(ctx)
            paths[role] = ctx.tmp / "folder.npy"
            paths[role].mkdir()
            return _args(paths, "--method", "is")

        cases.append(_cli_case(f"{role}-folder", folder, "error"))

        def missing(ctx, role=role):
            paths = _standard_files(ctx)
            paths[role] = ctx.tmp / "missing.npy"
            return _args(paths, "--method", "is")

        cases.append(_cli_case(f"{role}-missing", missing, "error"))
    gt_specs = {
        "gt_out_of_range": np.arange(6) + 3, "gt_negative": np.arange(6) - 1,
        "gt_float": np.arange(6) + 0.5, "gt_short": np.arange(5), "gt_long": np.arange(7),
        "gt_2d_wrong_shape": np.eye(5, dtype=bool),
    }
    for label, gt in gt_specs.items():
        def build(ctx, gt=gt):
            paths = _standard_files(ctx)
            paths["gt"] = _write(ctx, "gt_bad.npy", gt)
            return _args(paths, "--method", "cent")

        cases.append(_cli_case(label, build, "error"))
    cases.append(_cli_case("gt_relevance_matrix", lambda c: _args(
        dict(_standard_files(c), gt=_write(c, "rel.npy", np.eye(6, dtype=bool))), "--method", "is"),
        "ok"))
    cases.append(_cli_case("columns_mismatch", lambda c: _args(
        _standard_files(c, CLI_SIMS, CLI_BANK[:, :5]), "--method", "is"), "error"))
    cases.append(_cli_case("non_square_without_gt", lambda c: _args(
        _standard_files(c, CLI_SIMS[:4], CLI_BANK), "--method", "is", gt=False), "error"))
    cases.append(_cli_case("square_without_gt", lambda c: _args(
        _standard_files(c), "--method", "is", gt=False), "ok"))
    options = [
        ("k=0", ["--method", "dis", "--k", "0"], "error"),
        ("k=-1", ["--method", "csls", "--k", "-1"], "error"),
        ("k=1000", ["--method", "dis", "--k", "1000"], "error"),
        ("k=2.5", ["--method", "dis", "--k", "2.5"], "error"),
        ("k=2_all", ["--method", "all", "--k", "2"], "ok"),
        ("k=7_all", ["--method", "all", "--k", "7"], "any"),
        ("beta=0", ["--method", "is", "--beta", "0"], "error"),
        ("beta=-1", ["--method", "is", "--beta", "-1"], "error"),
        ("beta=nan", ["--method", "is", "--beta", "nan"], "error"),
        ("beta=inf", ["--method", "dis", "--beta", "inf"], "error"),
        ("beta=1e308", ["--method", "is", "--beta", "1e308"], "any"),
        ("beta=1e-300", ["--method", "is", "--beta", "1e-300"], "any"),
        ("beta=abc", ["--method", "is", "--beta", "abc"], "error"),
        ("method=magic", ["--method", "magic"], "error"),
        ("format=xml", ["--method", "is", "--format", "xml"], "error"),
        ("format=json", ["--method", "is", "--format", "json"], "ok"),
        ("format=csv", ["--method", "all", "--format", "csv"], "ok"),
        ("save_with_all", ["--method", "all", "--save", "SAVE"], "error"),
        ("unknown_option", ["--method", "is", "--frobnicate"], "error"),
    ]
    for label, extra, expect in options:
        def build(ctx, extra=extra):
            return _args(_standard_files(ctx), *[str(ctx.tmp / "o.npy") if e == "SAVE" else e
                                                 for e in extra])

        cases.append(_cli_case(label, build, expect))
    cases.append(_cli_case("no_sims", lambda c: ["--bank-sims", str(_standard_files(c)["bank"])],
                           "error"))
    cases += _cli_save_cases()
    return cases


def _cli_save_cases():
    cases = []
    for role in ("sims", "bank", "gt"):
        for method in ("raw", "cent", "is"):
            def onto(ctx, role=role, method=method):
                paths = _standard_files(ctx)
                return _args(paths, "--method", method, "--save", str(paths[role]))

            cases.append(_cli_case(f"save_onto_{role}-method={method}", onto, "error"))

        def via_link(ctx, role=role):
            paths = _standard_files(ctx)
            link = ctx.tmp / "link.npy"
            link.symlink_to(paths[role])
            return _args(paths, "--method", "raw", "--save", str(link))

        cases.append(_cli_case(f"save_onto_{role}_via_symlink", via_link, "error"))

    def via_relative(ctx):
        paths = _standard_files(ctx)
        return _args(paths, "--method", "cent", "--save",
                     str(ctx.tmp / "sub" / ".." / "sims.npy") if (ctx.tmp / "sub").mkdir() is None
                     else "")

    cases.append(_cli_case("save_onto_sims_via_dotdot", via_relative, "error"))

    def onto_npz_input(ctx):
        paths = _standard_files(ctx)
        paths["sims"] = _write(ctx, "s.npz", _npz({"sims": CLI_SIMS}))
        return _args(paths, "--method", "cent", "--save", str(paths["sims"]))

    cases.append(_cli_case("save_onto_npz_input", onto_npz_input, "any"))

    def to_folder(ctx):
        (ctx.tmp / "outdir").mkdir()
        return _args(_standard_files(ctx), "--method", "is", "--save", str(ctx.tmp / "outdir"))

    cases.append(_cli_case("save_to_folder", to_folder, "error"))

    def to_missing_folder(ctx):
        return _args(_standard_files(ctx), "--method", "is", "--save",
                     str(ctx.tmp / "nowhere" / "o.npy"))

    cases.append(_cli_case("save_into_missing_folder", to_missing_folder, "error"))
    cases.append(_cli_case("save_without_suffix", lambda c: _args(
        _standard_files(c), "--method", "is", "--save", str(c.tmp / "out")), "any", save="out"))
    cases.append(_cli_case("save_without_suffix_says_what_it_wrote", lambda c: _args(
        _standard_files(c), "--method", "is", "--save", str(c.tmp / "out")), "any", save="out",
        quiet=False))
    cases.append(_cli_case("save_valid", lambda c: _args(
        _standard_files(c), "--method", "dis", "--save", str(c.tmp / "out.npy")), "ok",
        save="out.npy"))
    cases.append(_cli_case("save_overwrite_existing_output", lambda c: _args(
        dict(_standard_files(c), other=_write(c, "old.npy", np.zeros(3))), "--method", "cent",
        "--save", str(c.tmp / "old_out.npy")), "ok", save="old_out.npy"))
    return cases


# -- the catalogue and compare ------------------------------------------------------------


class _NoFit:
    """Declares capabilities, but is no transformer."""

    capabilities = Capabilities()


#: Names no method list could select: "all", a list's comma, spaces.
BAD_METHOD_NAMES = ["all", "ALL", "a,b", " x", "x y", "", "-x", 3, None, ["x"]]


def _restoring(key, call):
    """Run ``call``; if it removed or replaced the built-in entry ``key``, put it back."""
    entry = catalogue.METHODS[key]

    def run(ctx):
        try:
            return call()
        finally:
            catalogue.METHODS[key] = entry

    return run


def _registered_then_removed(name, method):
    """Register ``method`` as ``name``, look it up and remove it again."""
    def run(ctx):
        try:
            registered = catalogue.register(name, method)
            return registered, catalogue.get_method(name.upper())
        finally:
            catalogue.METHODS.pop(name.lower(), None)

    def check(result, ctx):
        registered, found = result
        assert registered is method and found is method, "register did not return the entry"
        assert name.lower() not in catalogue.METHODS, "left registered"

    return run, check


def _catalogue_case(label, run, check=lambda result, ctx: None, names=(), expect="any"):
    return Case("catalogue", label, run, check, names, False, expect)


def _mutated_entries(key, spec):
    """Variants of the entry ``spec`` that no evaluation can run: (label, entry, names)."""
    variants = [
        ("label_int", spec._replace(label=3), ("label",)),
        ("summary_none", spec._replace(summary=None), ("summary",)),
        ("options_str", spec._replace(options="".join(spec.options) or "beta"), ("options",)),
        ("fixed_flat", spec._replace(fixed=("alpha", 0.5)), ("fixed",)),
        ("data_unknown", spec._replace(data="elsewhere"), ("data",)),
        ("iterative_str", spec._replace(iterative="yes"), ("iterative",)),
    ]
    if spec.normalizer is None:
        return variants + [("data_querybank", spec._replace(data="querybank"), ("data",))]
    variants += [
        ("data_nothing", spec._replace(data="nothing"), ("data",)),
        ("normalizer_instance", spec._replace(normalizer=object()), ("normalizer",)),
        ("normalizer_no_fit", spec._replace(normalizer=_NoFit), ("normalizer",)),
    ]
    if spec.data == "both banks":
        variants += [("single_bank_none", spec._replace(single_bank=None), ("single_bank",)),
                     ("data_querybank", spec._replace(data="querybank"),
                      ("data", "gallery_bank"))]
    return variants


def _method_catalogue_cases(key, spec):
    """Look-ups, registration and removal of one registered method."""
    upper = key.upper()

    def check_found(result, ctx):
        assert result is spec, f"get_method({upper!r}) is not the entry {key!r}"

    def check_made(made, ctx):
        if spec.normalizer is None:
            assert made is None, f"make_normalizer({upper!r}) gave {made!r} for raw"
            return
        inner = made.normalizer if isinstance(made, QueryBankGate) else made
        assert type(inner) is spec.normalizer, f"made {type(inner).__name__}"
        assert spec.gated == isinstance(made, QueryBankGate), "gated and made differ"
        for name, value in spec.fixed:
            assert inner.get_params()[name] == value, f"fixed {name} not set"

    run_copy, check_copy = _registered_then_removed(f"sweep-copy-of-{key}", spec)
    cases = [
        _catalogue_case(f"get_method-{key}", lambda ctx: catalogue.get_method(upper),
                        check_found, expect="ok"),
        _catalogue_case(f"make_normalizer-{key}", lambda ctx: catalogue.make_normalizer(upper),
                        check_made, expect="ok"),
        _catalogue_case(f"register-copy-of-{key}", run_copy, check_copy, expect="ok"),
        _catalogue_case(f"register-over-{key}", _restoring(
            key, lambda: catalogue.register(upper, spec)), names=("name",), expect="error"),
    ]
    if key in catalogue.BUILT_IN:
        cases += [
            _catalogue_case(f"replace-built-in-{key}", _restoring(
                key, lambda: catalogue.register(key, spec._replace(label="x"), replace=True)),
                names=("name",), expect="error"),
            _catalogue_case(f"unregister-built-in-{key}", _restoring(
                key, lambda: catalogue.unregister(upper)), names=("name",), expect="error"),
        ]
    for label, entry, names in _mutated_entries(key, spec):
        def run(ctx, entry=entry):
            try:
                return catalogue.register("sweep-mutated", entry)
            finally:
                catalogue.METHODS.pop("sweep-mutated", None)

        cases.append(_catalogue_case(f"register-{key}-{label}", run, names=names,
                                     expect="error"))
    return cases


def _capability_cases():
    """normalizers() on every value each capability takes, and on values none takes."""
    cases = []
    allowed = {field: catalogue.CAPABILITY_VALUES.get(field, (True, False))
               for field in Capabilities.__dataclass_fields__}
    for field, values in allowed.items():
        for value in values:
            def check(found, ctx, field=field, value=value):
                assert isinstance(found, list), f"returned {type(found).__name__}"
                assert all(getattr(cls.capabilities, field) == value for cls in found)
                expected = [cls for cls in catalogue.normalizers()
                            if getattr(cls.capabilities, field) == value]
                assert found == expected, f"{field}={value!r} missed classes"

            cases.append(_catalogue_case(
                f"normalizers-{field}={value!r}",
                lambda ctx, f=field, v=value: catalogue.normalizers(**{f: v}), check,
                expect="ok"))
        for value in ("yes", 1, 0.0, "flat", ["bias"], *(() if None in values else (None,))):
            cases.append(_catalogue_case(
                f"normalizers-{field}={value!r}",
                lambda ctx, f=field, v=value: catalogue.normalizers(**{f: v}), names=(field,),
                expect="error"))
    cases.append(_catalogue_case("normalizers-unknown", lambda ctx: catalogue.normalizers(
        bias=True), names=("bias",), expect="error"))
    return cases


def catalogue_cases():
    """register, unregister, get_method, make_normalizer and normalizers, generated from
    the registered methods, and the names no method list could select."""
    cases = []
    for key, spec in list(catalogue.METHODS.items()):
        cases += _method_catalogue_cases(key, spec)
    for name in BAD_METHOD_NAMES:
        run_bad, _ = _registered_then_removed(name, catalogue.METHODS["cent"]) if isinstance(
            name, str) else (None, None)
        run = run_bad or (lambda ctx, name=name: catalogue.register(
            name, catalogue.METHODS["cent"]))
        cases.append(_catalogue_case(f"register-name-{name!r}", run, names=("name",),
                                     expect="error"))
    for name in ("nope", ["csls"], None, 3, "", "all", "csls,is"):
        for function in ("get_method", "make_normalizer", "unregister"):
            call = getattr(catalogue, function)
            cases.append(_catalogue_case(f"{function}-{name!r}", lambda ctx, c=call, n=name: c(n),
                                         names=("name", "method"), expect="error"))
    cases.append(_catalogue_case("make_normalizer-settings_dict", lambda ctx: (
        catalogue.make_normalizer("is", {"beta": 3})), names=("settings",), expect="error"))
    cases.append(_catalogue_case("register-replace_str", _restoring("cent", lambda: (
        catalogue.register("cent-copy", catalogue.METHODS["cent"], replace="yes"))),
        names=("replace",), expect="error"))
    return cases + _capability_cases()


_compare_rng = np.random.default_rng(20261207)
COMPARE_SIMS = _compare_rng.normal(size=(12, 12)) + 2 * np.eye(12)
COMPARE_BANK = _compare_rng.normal(size=(40, 12))
COMPARE_GALLERY_BANK = {"gallery_bank": _compare_rng.normal(size=(6, 12)),
                        "querybank_to_gallery_bank": _compare_rng.normal(size=(40, 6))}


def _compare_call(ctx, methods, *, banks_for=None, **kwargs):
    """compare on the small matrices, given the gallery-bank inputs that the methods
    named in ``banks_for`` (default: ``methods``, a string) use."""
    names = methods if banks_for is None else banks_for
    keys = catalogue.METHODS if names == "all" else [
        name.strip().lower() for name in names.split(",")]
    used = {catalogue.METHODS[key].gallery_bank_input for key in keys
            if key in catalogue.METHODS and catalogue.METHODS[key].data == "both banks"}
    call = {"bank_sims": COMPARE_BANK, "methods": methods, "n_resamples": 20, "as_frame": False,
            **{key: COMPARE_GALLERY_BANK[key] for key in used}, **kwargs}
    arrays = {key: ctx.keep(value.copy()) for key, value in call.items()
              if isinstance(value, np.ndarray)}
    return compare(ctx.keep(COMPARE_SIMS.copy()), np.arange(12), **{**call, **arrays})


def check_comparison(result, ctx, labels=None):
    """A table of finite metrics, raw similarities first (and ``labels``, if given)."""
    assert len(result) >= 1 and result.rows[0]["method"] == "raw similarities", "raw not first"
    for row in result.rows:
        for column in ("R@1", "R@10", "MnR", "skewness"):
            check_float(row[column])
        assert row is result.rows[0] or row["R@1 change"] is not None, "no change against raw"
    if labels is not None:
        assert result["method"] == labels, f"rows {result['method']}, expected {labels}"


def _compare_method_cases(key, spec):
    """One registered method through compare, spelled three ways, and its settings."""
    cases = []
    for label, methods in [("upper", key.upper()), ("list", [key]),
                           ("spaced", f" {key} , raw")]:
        def run(ctx, methods=methods):
            return _compare_call(ctx, methods, banks_for=key)

        def check(result, ctx):
            check_comparison(result, ctx)
            assert len(result) == (1 if key == "raw" else 2), f"{len(result)} rows"

        cases.append(Case("catalogue", f"compare-{key}-{label}", run, check,
                          ("methods", key), False, "ok"))
    for option in spec.options:
        value = catalogue.class_default(key, option)
        cases.append(Case("catalogue", f"compare-{key}-params-{option}-default",
                          lambda ctx, o=option, v=value: _compare_call(ctx, key, params={o: v}),
                          check_comparison, ("methods", option), False, "ok"))
        cases.append(Case("catalogue", f"compare-{key}-params-{option}-str",
                          lambda ctx, o=option, v=value: _compare_call(ctx, key,
                                                                       params={o: str(v)}),
                          check_comparison, (option,), False, "error"))
        cases.append(Case("catalogue", f"compare-{key}-params-{option}-not-taken",
                          lambda ctx, o=option, v=value: _compare_call(ctx, "raw",
                                                                       params={o: v}),
                          check_comparison, (option,), False, "error"))
    return cases


class _Spoiled(Centering):
    """Centering whose scores ``spoil`` spoils (a registered method gone wrong)."""

    capabilities = Centering.capabilities
    spoil = staticmethod(lambda scores: scores)

    def transform(self, X):
        return type(self).spoil(super().transform(X))


SPOILS = {
    "nan": lambda s: np.where(np.arange(s.shape[1]) == 2, np.nan, s),
    "inf": lambda s: np.where(s > 0, np.inf, s),
    "column_dropped": lambda s: s[:, :-1],
    "row_dropped": lambda s: s[:-1],
    "none": lambda s: None,
    "object": lambda s: s.astype(object),
    "transposed": lambda s: s[:, :5].T,
    "ragged": lambda s: [row[: i + 1] for i, row in enumerate(s)],
}


def _spoiled_case(label, spoil):
    def run(ctx):
        spoiled = type("Spoiled", (_Spoiled,), {"spoil": staticmethod(spoil)})
        catalogue.register("sweep-spoiled", catalogue.Method("spoiled", label, spoiled))
        try:
            return _compare_call(ctx, "sweep-spoiled")
        except ValueError as error:
            if "sims" in str(error) or "gt" in str(error).split():
                raise AssertionError(f"blames the inputs, not the method: {error}") from None
            raise
        finally:
            catalogue.METHODS.pop("sweep-spoiled", None)

    return Case("catalogue", f"compare-spoiled-{label}", run, check_comparison,
                ("sweep-spoiled", "spoiled"), False, "error")


def catalogue_compare_cases():
    """compare's methods and params, generated from the registered methods."""
    cases = []
    for key, spec in list(catalogue.METHODS.items()):
        cases += _compare_method_cases(key, spec)
    everything = [*(["all"], ("ALL",), " All "), "all"]
    for methods in everything:
        cases.append(Case("catalogue", f"compare-methods-{methods!r}",
                          lambda ctx, m=methods: _compare_call(ctx, m, banks_for="all"),
                          check_comparison, ("methods",), False, "ok"))
    for methods in (None, 3, b"is", {"is": 1}, [], "", "all,is", ["all", "is"], ["is", None],
                    "nope", "is,,dis", ["is,dis"]):
        cases.append(Case("catalogue", f"compare-methods-{methods!r}",
                          lambda ctx, m=methods: _compare_call(ctx, m, banks_for="is"),
                          check_comparison, ("methods",), False, "error"))
    for params in ("beta=3", [("beta", 3)], 3, {1: 2}, {"beta": "3"}, {"beta": np.nan},
                   {"beta": True}, {"gamma": 1}):
        cases.append(Case("catalogue", f"compare-params-{params!r}",
                          lambda ctx, p=params: _compare_call(ctx, "is", params=p),
                          check_comparison, ("params", "beta", "gamma"), False, "error"))
    cases.append(Case("catalogue", "compare-params-none-value",
                      lambda ctx: _compare_call(ctx, "is", params={"beta": None}),
                      check_comparison, ("params",), False, "ok"))
    return cases + [_spoiled_case(label, spoil) for label, spoil in SPOILS.items()]


#: Index factory strings: those FAISS builds, and those it cannot (some crashed it).
GOOD_FACTORIES = ("Flat", "IVF4,Flat", "HNSW2", "HNSW8")
BAD_FACTORIES = ("HNSW0", "HNSW1", "IVF4_HNSW1,Flat", "IVF0,Flat", "IDMap,Flat", "NSG4",
                 "HNSW100000000", "IVF4,PQ4x0", "RQ1x0", "NoSuchIndex", "", "Flat,Flat")


def index_factory_cases():
    """NormalizedIndex over every normaliser the catalogue serves from an index, with
    factory strings FAISS builds and strings it cannot (none may crash the process)."""
    try:
        import faiss  # noqa: F401
    except ImportError:
        return []
    from skqbnorm.index import NormalizedIndex

    rng = np.random.default_rng(11)
    bank, gallery, queries = (rng.normal(size=(n, 6)) for n in (60, 40, 3))
    dual = rng.normal(size=(50, 6))

    def check_search(result, ctx):
        indices, scores = result
        assert indices.shape == (3, 5) and np.all(indices < 40), indices
        assert np.all(np.isfinite(scores[indices >= 0])), scores

    cases = []
    for cls in catalogue.normalizers(index="bias") + catalogue.normalizers(index="rerank"):
        if cls is MutualProximity:
            cls = partial(MutualProximity, method="gaussian")  # empiric is refused
        for factory in GOOD_FACTORIES + BAD_FACTORIES:
            def run(ctx, cls=cls, factory=factory):
                normalizer = cls()
                extra = ({"gallery_bank": dual}
                         if normalizer.capabilities.gallery_bank is not None else {})
                normalizer.fit(bank, gallery=gallery, **extra)
                return NormalizedIndex(normalizer, factory).fit().search(queries, k=5)

            name = getattr(cls, "__name__", "MutualProximity")  # a partial has none
            cases.append(Case("index", f"{name}-{factory or 'empty'}", run, check_search,
                              ("factory",), False,
                              "ok" if factory in GOOD_FACTORIES else "error"))
    return cases


def all_cases():
    from sweep_cases_cli import cli_and_paired_cases  # it builds on this module's helpers

    cases = (_normalizer_cases() + _reranker_cases() + _metrics_matrix_cases()
             + _metrics_param_cases() + _cli_cases() + cli_and_paired_cases()
             + catalogue_cases() + catalogue_compare_cases() + index_factory_cases())
    ids = [case.id for case in cases]
    duplicates = {i for i in ids if ids.count(i) > 1}
    assert not duplicates, f"duplicate case ids: {sorted(duplicates)[:5]}"
    return cases
