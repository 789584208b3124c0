"""Sweep cases for the command line's newer options, compare() and the paired metrics,
and two points carried from earlier sweeps: the querybank diagnostics near float64's
limits, and the gate wrapping the dual-bank Sinkhorn normaliser.

Included by ``sweep_cases.all_cases``; judged as every other case (``test_sweep.py``).
"""

from dataclasses import replace

import numpy as np
from sweep_cases import (
    CLI_BANK12,
    CLI_SIMS12,
    Case,
    _args,
    _cli_case,
    _standard_files,
    _write,
    check_cli,
    check_float,
    check_matrix,
    run_cli,
)

from skqbnorm import DualBankSinkhornNormalization, QueryBankGate, compare
from skqbnorm.metrics import paired_mean_change, querybank_diagnostics

_rng = np.random.default_rng(20261201)
EMB_QUERIES = _rng.normal(size=(12, 5))
EMB_GALLERY = EMB_QUERIES + 0.3 * _rng.normal(size=(12, 5))
EMB_BANK = _rng.normal(size=(30, 5))
EMB_GALLERY_BANK = _rng.normal(size=(9, 5))


def _embedding_files(ctx, **replaced):
    arrays = {"queries": EMB_QUERIES, "gallery": EMB_GALLERY, "bank": EMB_BANK,
              "gallery-bank": EMB_GALLERY_BANK, **replaced}
    return {name: _write(ctx, f"emb_{name}.npy", array) for name, array in arrays.items()
            if array is not None}


def _embedding_args(paths, *extra, gallery_bank=False):
    argv = []
    for name, path in paths.items():
        if name != "gallery-bank" or gallery_bank:
            argv += [f"--{name}", str(path)]
    return [*argv, "--quiet", *extra]


def _method_cases():
    spellings = [
        ("DIS", "ok"), ("Csls,NNN", "any"), ("is,dis,cent", "ok"), ("IS , gc", "ok"),
        ("all,is", "error"), ("is,", "error"), (",", "error"), ("", "error"), ("IS;DIS", "error"),
        ("raw,raw", "ok"), ("dn,DN", "ok"),
    ]
    cases = []
    for spelling, expect in spellings:
        extra = ["--k", "3"] if "csls" in spelling.lower() else []
        cases.append(_cli_case(f"method_spelling={spelling!r}", lambda c, s=spelling, e=extra:
                               _args(_standard_files(c, CLI_SIMS12, CLI_BANK12), "--method", s,
                                     *e), expect))

    def old_name(ctx):
        paths = _standard_files(ctx, CLI_SIMS12, CLI_BANK12)
        gallery_bank = _write(ctx, "gb.npy", _rng.normal(size=(7, 12)))
        return _args(paths, "--method", "dual-dis", "--gallery-bank-sims", str(gallery_bank))

    cases.append(_cli_case("method_old_name_dual-dis", old_name, "error"))
    return cases


def _unused_gallery_bank_cases():
    cases = []
    for method, option, expect in [("is", "--gallery-bank-sims", "error"),
                                   ("dbnorm", "--bank-gallery-bank-sims", "error"),
                                   ("dbsn", "--gallery-bank-sims", "error"),
                                   ("dbnorm", "--gallery-bank-sims", "ok"),
                                   ("all", "--gallery-bank-sims", "any")]:
        def build(ctx, method=method, option=option):
            paths = _standard_files(ctx, CLI_SIMS12, CLI_BANK12)
            shape = (30, 7) if option == "--bank-gallery-bank-sims" else (7, 12)
            extra = _write(ctx, "extra.npy", _rng.normal(size=shape))
            return _args(paths, "--method", method, option, str(extra))

        cases.append(_cli_case(f"gallery_bank_file{option}-method={method}", build, expect))
    return cases


def _overflow_cases():
    """A setting that overflows the scores of finite similarities: an error naming it."""
    large = CLI_SIMS12 * 5
    cases = []
    for label, extra in [("alpha=1e308", ["--method", "nnn", "--k", "3", "--alpha", "1e308"]),
                         ("temperature=1e-300", ["--method", "dsl", "--temperature", "1e-300"]),
                         ("beta1=1e308", ["--method", "dbnorm", "--beta1", "1e308"]),
                         ("tau=1e-300", ["--method", "sn", "--tau", "1e-300"])]:
        def build(ctx, extra=extra):
            paths = _standard_files(ctx, large, CLI_BANK12 * 5)
            more = []
            if "dbnorm" in extra:
                more = ["--gallery-bank-sims", str(_write(ctx, "gb.npy",
                                                          _rng.normal(size=(7, 12)) * 5))]
            return _args(paths, *extra, *more)

        cases.append(_cli_case(f"setting_overflow-{label}", build, "any"))
    return cases


def _embedding_cases():
    bad = {
        "dim_mismatch": ({"bank": EMB_BANK[:, :4]}, "error"),
        "zero_row_cosine": ({"gallery": np.where(np.arange(12)[:, None] == 2, 0.0, EMB_GALLERY)},
                            "error"),
        "nan": ({"queries": np.where(np.arange(5) == 1, np.nan, EMB_QUERIES)}, "error"),
        "inf": ({"bank": np.where(np.arange(5) == 0, np.inf, EMB_BANK)}, "error"),
        "empty_rows": ({"bank": EMB_BANK[:0]}, "error"),
        "empty_columns": ({"queries": EMB_QUERIES[:, :0], "gallery": EMB_GALLERY[:, :0],
                           "bank": EMB_BANK[:, :0]}, "error"),
        "one_dim": ({"queries": EMB_QUERIES[0]}, "error"),
        "float32": ({name: array.astype(np.float32) for name, array in
                     (("queries", EMB_QUERIES), ("gallery", EMB_GALLERY), ("bank", EMB_BANK))},
                    "ok"),
        "float16": ({"queries": EMB_QUERIES.astype(np.float16)}, "ok"),
        "int16": ({"queries": np.round(EMB_QUERIES * 100).astype(np.int16)}, "ok"),
        "huge_1e200": ({"queries": EMB_QUERIES * 1e200, "gallery": EMB_GALLERY * 1e200}, "ok"),
        "non_square_without_gt": ({"queries": EMB_QUERIES[:7]}, "error"),
        "missing_gallery": ({"gallery": None}, "error"),
        "bool": ({"queries": EMB_QUERIES > 0}, "any"),
    }
    cases = []
    for label, (replaced, expect) in bad.items():
        cases.append(_cli_case(f"embeddings-{label}", lambda c, r=replaced: _embedding_args(
            _embedding_files(c, **r), "--method", "is"), expect))
    cases.append(_cli_case("embeddings-huge_1e200_dot", lambda c: _embedding_args(
        _embedding_files(c, queries=EMB_QUERIES * 1e200, gallery=EMB_GALLERY * 1e200),
        "--metric", "dot", "--method", "is"), "error"))
    cases.append(_cli_case("embeddings-zero_row_dot", lambda c: _embedding_args(
        _embedding_files(c, gallery=np.where(np.arange(12)[:, None] == 2, 0.0, EMB_GALLERY)),
        "--metric", "dot", "--method", "is"), "ok"))
    for metric, expect in [("cosine", "ok"), ("DOT", "ok"), ("euclidean", "error"), ("", "error")]:
        cases.append(_cli_case(f"embeddings-metric={metric!r}", lambda c, m=metric:
                               _embedding_args(_embedding_files(c), "--metric", m,
                                               "--method", "dis"), expect))
    for method, expect in [("dbnorm", "ok"), ("dbnorm-dynamic", "ok"), ("dbsn", "ok"),
                           ("is", "error"), ("all", "ok")]:
        cases.append(_cli_case(f"embeddings-gallery_bank-method={method}", lambda c, m=method:
                               _embedding_args(_embedding_files(c), "--method", m,
                                               "--bootstrap", "20", gallery_bank=True), expect))

    cases += _embedding_gallery_bank_wanted_cases()

    def mixed(ctx):
        paths = _standard_files(ctx, CLI_SIMS12, CLI_BANK12)
        return [*_args(paths, "--method", "is"), "--queries", str(_embedding_files(ctx)["queries"])]

    cases.append(_cli_case("embeddings-mixed_with_sims", mixed, "error"))
    cases.append(_cli_case("metric_with_sims", lambda c: _args(
        _standard_files(c, CLI_SIMS12, CLI_BANK12), "--method", "is", "--metric", "dot"), "error"))
    cases.append(_cli_case("no_input", lambda c: ["--quiet", "--method", "is"], "error"))
    return cases


def _embedding_gallery_bank_wanted_cases():
    """A dual-bank method in embedding mode without --gallery-bank: the error (or, for
    all, the skip note) names --gallery-bank, the option that mode takes, not a -sims one."""
    cases = []
    for method, expect in [("dbnorm", "error"), ("dbnorm-dynamic", "error"), ("dbsn", "error"),
                           ("all", "ok")]:
        case = _cli_case(f"embeddings-no_gallery_bank-method={method}", lambda c, m=method:
                         _embedding_args(_embedding_files(c), "--method", m, "--bootstrap",
                                         "20"), expect, quiet=method != "all")

        def check(result, ctx, plain=case.check, method=method):
            plain(result, ctx)
            asked = [line for line in result[2].splitlines() if "needs --gallery" in line]
            assert asked, f"no line asks for the gallery bank: {result[2]!r}"
            assert all("needs --gallery-bank," in line or "needs --gallery-bank (" in line
                       for line in asked), f"asks for an option embedding mode refuses: {asked}"

        cases.append(replace(case, check=check))
    return cases


def _querybank_limit_cases():
    """querybank_diagnostics on similarities near the float limits: finite figures, or a
    ValueError naming bank and queries when a figure itself leaves float64."""
    rng = np.random.default_rng(20261207)
    bank, queries = rng.uniform(0.2, 1.0, size=(20, 8)), rng.uniform(0.2, 1.0, size=(9, 8))
    variants = [
        ("1e300", bank * 1e300, queries * 1e300, "ok"),
        ("1.7e308", bank / bank.max() * 1.7e308, queries / bank.max() * 1.7e308, "ok"),
        ("float32_3.3e38", (bank / bank.max() * 3.3e38).astype(np.float32),
         (queries / bank.max() * 3.3e38).astype(np.float32), "ok"),
        ("subnormal_1e-310", bank * 1e-310, queries * 1e-310, "ok"),
        ("opposite_1.7e308", bank / bank.max() * 1.7e308, -queries / queries.max() * 1.7e308,
         "error"),
    ]
    cases = []
    for label, bank_sims, query_sims, expect in variants:
        def run(ctx, bank_sims=bank_sims, query_sims=query_sims):
            return querybank_diagnostics(ctx.keep(bank_sims.copy()), ctx.keep(query_sims.copy()),
                                         warn=False)

        def check(report, ctx):
            for value in report.to_dict().values():
                if isinstance(value, float):
                    check_float(value)

        cases.append(Case("metrics", f"querybank_diagnostics-sims_{label}", run, check,
                          ("bank", "queries"), False, expect))
    return cases


def _gate_dbsn_cases():
    """The gate around DualBankSinkhornNormalization on each input form, open and closed."""
    rng = np.random.default_rng(4)
    bank, gallery, gallery_bank = (rng.normal(size=(n, 5)) for n in (100, 40, 9))
    bank += [4.0, 0, 0, 0, 0]
    queries = gallery + 0.1 * rng.normal(size=gallery.shape)
    cases = []
    for max_ks in (1.0, 1e-9):
        def run(ctx, max_ks=max_ks):
            gate = QueryBankGate(DualBankSinkhornNormalization(tau=0.1, n_iter=200),
                                 max_ks=max_ks, max_outlier_share=1.0)
            gate.fit(ctx.keep(bank.copy()), queries=ctx.keep(queries.copy()), gallery=gallery,
                     gallery_bank=ctx.keep(gallery_bank.copy()))
            return gate, gate.top_k(queries=queries, k=3)

        def check(result, ctx):
            gate, (_, scores) = result
            check_matrix(scores, (40, 3), np.float64, True)
            assert gate.normalizer_.n_gallery_bank_ == 9, "the gallery bank was not passed on"

        state = "open" if max_ks == 1.0 else "closed"
        cases.append(Case("normalizers", f"gate-DBSN-embeddings-{state}", run, check,
                          ("gallery_bank",), False, "ok"))

    def given_as_gallery_bank(ctx):
        return QueryBankGate(DualBankSinkhornNormalization()).fit(
            bank @ gallery.T, queries=queries @ gallery.T, gallery_bank=gallery_bank @ gallery.T)

    cases.append(Case("normalizers", "gate-DBSN-similarities-gallery_bank", given_as_gallery_bank,
                      lambda r, c: None, ("querybank_to_gallery_bank",), False, "error"))
    return cases


def _whole_command_case(label, argv, expect):
    """A case whose argv is the whole command line (``--version``, ``--help``)."""
    def run(ctx):
        return (*run_cli(argv), None)

    def check(result, ctx):
        status, out, err, _ = result
        assert "Traceback" not in err, "traceback on stderr"
        if expect == "ok":
            assert status == 0 and out.strip(), f"status {status}: {err.strip()[-200:]}"
        else:
            check_cli(result, ctx)

    return Case("cli", label, run, check, (), False, "cli")


def _paired_cases():
    a, b = _rng.random(9), _rng.random(9)
    specs = [
        ("beyond_float64", (np.full(4, -1.7e308), np.full(4, 1.7e308)), {}, ("values_a",), "error"),
        ("beyond_float64_mixed", ([1e308, 1e308, -1e308], [-1e308, 1e308, 1e308]), {},
         ("values_a", "values_b"), "error"),
        ("huge_within_range", (np.full(4, -8e307), np.full(4, 8e307)), {}, (), "ok"),
        ("largest_half", ([-8.98e307] * 3, [8.98e307] * 3), {}, (), "ok"),
        ("inf", (a, np.where(np.arange(9) == 2, np.inf, b)), {}, ("values_b",), "error"),
        ("nan", (np.where(np.arange(9) == 0, np.nan, a), b), {}, ("values_a",), "error"),
        ("length_mismatch", (a, b[:8]), {}, ("values_a", "values_b"), "error"),
        ("two_dim", (a[None], b[None]), {}, ("values_a",), "error"),
        ("one_query", (a[:1], b[:1]), {}, (), "ok"),
        ("empty", (a[:0], b[:0]), {}, ("values_a",), "any"),
        ("ints", (np.arange(9), np.arange(9)[::-1]), {}, (), "ok"),
        ("bools", (a > 0.5, b > 0.5), {}, (), "any"),
        ("n_resamples_bool", (a, b), {"n_resamples": True}, ("n_resamples",), "error"),
        ("n_resamples_float", (a, b), {"n_resamples": 10.0}, ("n_resamples",), "error"),
        ("n_resamples_zero", (a, b), {"n_resamples": 0}, (), "ok"),
        ("confidence_zero", (a, b), {"confidence": 0.0}, ("confidence",), "error"),
        ("confidence_nan", (a, b), {"confidence": np.nan}, ("confidence",), "error"),
        ("random_state_str", (a, b), {"random_state": "x"}, ("random_state",), "error"),
        ("subnormal", (np.full(9, 5e-324), np.zeros(9)), {}, (), "ok"),
    ]
    cases = []
    for label, (values_a, values_b), kwargs, names, expect in specs:
        def run(ctx, values_a=values_a, values_b=values_b, kwargs=kwargs):
            values_a, values_b = ctx.keep(np.asarray(values_a)), ctx.keep(np.asarray(values_b))
            return paired_mean_change(values_a, values_b, **{"n_resamples": 200,
                                                             "random_state": 0, **kwargs})

        def check(result, ctx):
            check_float(result.change)
            for end in (result.low, result.high) if result.interval else ():
                check_float(end)
            check_float(result.value_a)
            check_float(result.value_b)

        cases.append(Case("metrics", f"paired_mean_change-{label}", run, check, names,
                          "length" in label, expect))
    return cases


def _compare_cases():
    rng = np.random.default_rng(5)
    sims, bank = rng.normal(size=(10, 10)) + 2 * np.eye(10), rng.normal(size=(25, 10))
    specs = [
        ("defaults", {}, (), "any"),
        ("methods_spelled", {"methods": "DIS, csls", "params": {"k": 3}}, (), "ok"),
        ("methods_unknown", {"methods": "magic"}, ("methods",), "error"),
        ("methods_not_strings", {"methods": [1, 2]}, ("methods",), "error"),
        ("methods_dual_no_bank", {"methods": "dbnorm"}, ("gallery_bank",), "error"),
        ("gallery_bank_unused", {"methods": "is", "gallery_bank": rng.normal(size=(4, 10))},
         ("gallery_bank",), "error"),
        ("gallery_bank_wrong_columns", {"methods": "dbnorm",
                                        "gallery_bank": rng.normal(size=(4, 9))},
         ("gallery_bank",), "error"),
        ("params_unknown", {"params": {"gamma": 1}}, ("gamma",), "error"),
        ("params_untaken", {"methods": "is", "params": {"k": 2}}, ("k",), "error"),
        ("params_bool", {"methods": "dis", "params": {"k": True}}, ("k",), "error"),
        ("params_k_too_large", {"methods": "csls", "params": {"k": 50}}, ("k",), "error"),
        ("params_beta_huge", {"methods": "is", "params": {"beta": 1e308}}, ("beta",), "any"),
        ("no_bank", {"bank_sims": None, "methods": "all"}, (), "ok"),
        ("no_bank_named_method", {"bank_sims": None, "methods": "is"}, ("bank_sims",), "error"),
        ("bank_wrong_columns", {"bank_sims": bank[:, :9]}, ("bank_sims",), "error"),
        ("gt_none_non_square", {"query_sims": sims[:7], "gt": None}, ("query_sims", "gt"),
         "error"),
        ("gt_out_of_range", {"gt": np.arange(10) + 5}, ("gt",), "error"),
        ("query_sims_nan", {"query_sims": np.where(np.eye(10) > 0, np.nan, sims)},
         ("query_sims",), "error"),
        ("n_resamples_negative", {"n_resamples": -1}, ("n_resamples",), "error"),
        ("random_state_float", {"random_state": 0.5}, ("random_state",), "error"),
        ("as_frame_str", {"as_frame": "no"}, ("as_frame",), "error"),
        ("float32", {"query_sims": sims.astype(np.float32),
                     "bank_sims": bank.astype(np.float32)}, (), "ok"),
    ]
    cases = []
    for label, kwargs, names, expect in specs:
        def run(ctx, kwargs=kwargs):
            call = {"query_sims": sims, "gt": np.arange(10), "bank_sims": bank,
                    "methods": "is,dis,cent", "n_resamples": 50, "as_frame": False, **kwargs}
            for key in ("query_sims", "bank_sims", "gallery_bank"):
                if isinstance(call.get(key), np.ndarray):
                    call[key] = ctx.keep(call[key].copy())
            return compare(call.pop("query_sims"), call.pop("gt"), **call)

        def check(result, ctx):
            assert len(result) >= 1 and result.rows[0]["method"] == "raw similarities"
            for row in result.rows:
                for column in ("R@1", "MnR", "skewness"):
                    check_float(row[column])

        cases.append(Case("metrics", f"compare-{label}", run, check, names,
                          "columns" in label or "square" in label, expect,
                          "nan" not in label))
    return cases


def cli_and_paired_cases():
    """Every case of this module."""
    return (_method_cases() + _unused_gallery_bank_cases() + _overflow_cases()
            + _embedding_cases() + _paired_cases() + _compare_cases()
            + _querybank_limit_cases() + _gate_dbsn_cases()
            + [_whole_command_case("version", ["--version"], "ok"),
               _whole_command_case("evaluate_help", ["evaluate", "--help"], "ok"),
               _whole_command_case("no_command", [], "error")])
