"""The methods through ``skqbnorm evaluate`` (skqbnorm._cli_commands): each equals its class
called directly; gallery banks, settings, convergence notes and the help."""

import csv
import io
import json
import re
import warnings

import numpy as np
import pytest
from cli_helpers import evaluate_argv, refused, run, without_settings
from sklearn.exceptions import ConvergenceWarning

from skqbnorm import (
    Centering,
    DualBankSinkhornNormalization,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankZNorm,
    SinkhornNormalization,
    _cli_commands,
    cli,
)
from skqbnorm.catalogue import Settings, make_normalizer
from skqbnorm.cli import main
from skqbnorm.datasets import make_hubness_sims
from skqbnorm.metrics import hubness, retrieval_metrics

N_QUERIES, N_GALLERY, N_BANK, N_GALLERY_BANK = 30, 25, 40, 35


@pytest.fixture
def files(tmp_path):
    sims, gt, bank = make_hubness_sims(N_QUERIES, N_GALLERY, N_BANK, random_state=0)
    # a gallery bank with hubs of its own: items close to every gallery-bank sample
    rng = np.random.default_rng(1)
    gallery_bank = rng.normal(0, 0.2, size=(N_GALLERY_BANK, N_GALLERY))
    gallery_bank[:, :3] += 0.5
    bank_to_gallery_bank = rng.normal(0, 0.2, size=(N_BANK, N_GALLERY_BANK))  # for DBSN
    arrays = {"--sims": sims, "--bank-sims": bank, "--gallery-bank-sims": gallery_bank,
              "--bank-gallery-bank-sims": bank_to_gallery_bank, "--gt": gt}
    paths = {}
    for option, array in arrays.items():
        paths[option] = tmp_path / f"{option.strip('-')}.npy"
        np.save(paths[option], array)
    paths.pop("--bank-gallery-bank-sims")  # given where DBSN must run (see bank_to_gallery_bank)
    return paths, arrays


def bank_to_gallery_bank(tmp_path):
    """The --bank-gallery-bank-sims file that ``files`` saved beside the others."""
    return tmp_path / "bank-gallery-bank-sims.npy"


def argv(paths, *extra, **replaced):
    """The evaluate command; --gallery-bank-sims only where a chosen method uses it (an
    unused one is refused), unless given in ``replaced``."""
    methods = extra[extra.index("--method") + 1] if "--method" in extra else "all"
    if methods not in ("all", "dbnorm", "dbnorm-dynamic") and "gallery_bank_sims" not in replaced:
        replaced["gallery_bank_sims"] = None
    return evaluate_argv(paths, *extra, **replaced)


def direct(normalizer, data, uses):
    """The normaliser's scores of the query similarities, called as a user would."""
    sims, bank, gallery_bank = data["--sims"], data["--bank-sims"], data["--gallery-bank-sims"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if uses == "test queries":
            return normalizer.fit_transform(sims)
        if uses == "gated querybank":
            return normalizer.fit(bank, queries=sims).transform(sims)
        if isinstance(normalizer, DualBankSinkhornNormalization):
            to_gallery_bank = data["--bank-gallery-bank-sims"]
            return normalizer.fit(bank, querybank_to_gallery_bank=to_gallery_bank).transform(sims)
        if uses == "both banks":
            return normalizer.fit(bank, gallery_bank=gallery_bank).transform(sims)
        return normalizer.fit(bank).transform(sims)


# method, options, the normaliser they stand for, what it is fitted on, its label
CASES = [
    ("nnn", ["--k", "5", "--alpha", "0.75"], NearestNeighborNormalization(k=5, alpha=0.75),
     "querybank", "NNN (k=5, alpha=0.75)"),
    ("dn", [], Centering(alpha=0.5), "querybank", "DN"),
    ("znorm", [], QueryBankZNorm(), "querybank", "z-norm"),
    ("mp", [], MutualProximity(method="gaussian"), "querybank", "MP (Gaussian)"),
    ("mp-empiric", [], MutualProximity(method="empiric"), "querybank", "MP (empiric)"),
    ("dbnorm", ["--beta1", "15", "--beta2", "7"], DualInvertedSoftmax(beta1=15, beta2=7),
     "both banks", "DBNorm (beta1=15, beta2=7)"),
    ("dbnorm-dynamic", ["--beta1", "15", "--beta2", "7", "--k", "2"],
     DualDynamicInvertedSoftmax(beta1=15, beta2=7, k=2), "both banks",
     "DBNorm (dynamic; beta1=15, beta2=7, k=2)"),
    ("sn", ["--tau", "0.2", "--n-iter", "40"], SinkhornNormalization(tau=0.2, n_iter=40),
     "querybank", "SN (tau=0.2, n_iter=40)"),
    ("dsl", ["--temperature", "0.5"], DualSoftmax(temperature=0.5), "querybank",
     "DSL (temperature=0.5)"),
    ("dsl-transductive", ["--temperature", "0.5"], DualSoftmax(temperature=0.5),
     "test queries", "DSL (transductive; temperature=0.5)"),
]


@pytest.mark.parametrize("method, options, normalizer, uses, label", CASES,
                         ids=[case[0] for case in CASES])
def test_each_method_equals_its_class(files, capsys, tmp_path, method, options, normalizer,
                                      uses, label):
    paths, data = files
    out_path = tmp_path / "out.npy"
    code, out, err = run(argv(paths, "--method", method, *options, "--format", "json",
                              "--quiet", "--save", str(out_path)), capsys)
    assert code == 0, err
    expected = direct(normalizer, data, uses)
    np.testing.assert_array_equal(np.load(out_path), expected)
    raw_row, row = json.loads(out)
    assert (raw_row["method"], row["method"]) == ("raw similarities", label)
    metrics = retrieval_metrics(expected, data["--gt"])
    assert [row[key] for key in ("R@1", "R@5", "MnR")] == pytest.approx(
        [metrics[key] for key in ("R@1", "R@5", "MnR")])
    assert row["skewness"] == pytest.approx(hubness(expected, k=10)["skewness"])


DEFAULTS = {"nnn": NearestNeighborNormalization(), "dbnorm": DualInvertedSoftmax(),
            "dbnorm-dynamic": DualDynamicInvertedSoftmax(), "sn": SinkhornNormalization(),
            "dsl": DualSoftmax()}


@pytest.mark.parametrize("method", DEFAULTS)
def test_a_hyperparameter_not_given_keeps_the_class_default(files, capsys, tmp_path, method):
    paths, data = files
    bank = np.vstack([data["--bank-sims"]] * 8)  # NNN's default k needs a larger bank
    np.save(tmp_path / "large_bank.npy", bank)
    code, _, err = run(argv(paths, "--method", method, "--quiet", "--save",
                            str(tmp_path / "out.npy"), bank_sims=tmp_path / "large_bank.npy"),
                       capsys)
    assert code == 0, err
    uses = cli.METHODS[method].data
    expected = direct(DEFAULTS[method], dict(data, **{"--bank-sims": bank}), uses)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), expected)


def test_dual_bank_methods_use_the_gallery_bank(files, capsys):
    """With a gallery bank DualIS is not IS: the gallery bank's hubs are divided down."""
    paths, data = files
    code, out, _ = run(argv(paths, "--method", "dbnorm", "--beta1", "20", "--beta2", "20",
                            "--format", "json", "--quiet"), capsys)
    assert code == 0
    single = retrieval_metrics(InvertedSoftmax(beta=20).fit(data["--bank-sims"])
                               .transform(data["--sims"]), data["--gt"])
    assert json.loads(out)[1]["MnR"] != pytest.approx(single["MnR"])


def test_all_methods_as_json_and_csv_carry_every_row(files, capsys, tmp_path):
    paths, data = files
    args = argv(paths, "--k", "3", "--tau", "0.5", "--quiet",
                bank_gallery_bank_sims=bank_to_gallery_bank(tmp_path))
    code, out, err = run([*args, "--format", "json"], capsys)
    assert code == 0 and err == ""
    rows = json.loads(out)
    assert [without_settings(row["method"]) for row in rows] == [
        "raw similarities", "IS", "DIS", "CSLS", "GC", "CENT", "DN", "NNN", "gated DIS", "gated NNN",
        "z-norm", "MP (Gaussian)",
        "MP (empiric)", "DBNorm", "DBNorm (dynamic)", "SN", "DBSN", "DSL", "DSL (transductive)"]
    code, out, _ = run([*args, "--format", "csv"], capsys)
    assert code == 0
    csv_rows = list(csv.DictReader(io.StringIO(out)))
    assert [row["method"] for row in csv_rows] == [row["method"] for row in rows]
    for json_row, csv_row in zip(rows, csv_rows):
        for key in ("R@1", "R@5", "R@10", "MdR", "MnR", "skewness"):
            assert float(csv_row[key]) == pytest.approx(json_row[key])
    # each row is its method's: the scores of the class called directly
    for method, row in zip(cli.METHODS, rows):
        if method == "raw":
            continue
        normalizer = make_normalizer(method, Settings(k=3, tau=0.5))
        scores = direct(normalizer, data, cli.METHODS[method].data)
        assert row["MnR"] == pytest.approx(retrieval_metrics(scores, data["--gt"])["MnR"]), method


def test_all_methods_without_a_gallery_bank_skip_the_dual_bank_ones(files, capsys):
    paths, _ = files
    code, out, err = run(argv(paths, "--k", "3", "--tau", "0.5", "--quiet", "--format", "json",
                              gallery_bank_sims=None), capsys)
    assert code == 0
    assert not {"DBNorm", "DBNorm (dynamic)"} & {without_settings(row["method"]) for row in json.loads(out)}
    betas = f"beta1={DualInvertedSoftmax().beta1:g}, beta2={DualInvertedSoftmax().beta2:g}"
    needs = "it needs --gallery-bank-sims (without a gallery bank it equals"
    assert err.splitlines() == [
        f"skqbnorm evaluate: skipped DBNorm ({betas}): {needs} IS).",
        f"skqbnorm evaluate: skipped DBNorm (dynamic; {betas}, k=3): {needs} DIS).",
        (f"skqbnorm evaluate: skipped DBSN (tau=0.5, n_iter={SinkhornNormalization().n_iter}): "
         "it needs --bank-gallery-bank-sims (without a gallery bank it equals SN)."),
    ]


@pytest.fixture
def no_evaluation(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the evaluation ran")
    monkeypatch.setattr(_cli_commands, "method_rows", fail)


@pytest.mark.parametrize("method", ["dbnorm", "dbnorm-dynamic"])
def test_a_dual_bank_method_named_without_a_gallery_bank_is_an_error(files, capsys, method,
                                                                     no_evaluation):
    paths, _ = files
    err = refused(argv(paths, "--method", method, gallery_bank_sims=None), capsys)
    assert f"--method {method}: DBNorm" in err and "needs --gallery-bank-sims" in err


@pytest.mark.parametrize("change, message", [
    (lambda g: g[:, :-1], (r"--sims has shape \(30, 25\) and --gallery-bank-sims has shape "
                           r"\(35, 24\): both need one column per gallery item")),
    (lambda g: np.where(np.arange(N_GALLERY) == 4, np.nan, g),
     r"--gallery-bank-sims \S+: the similarity of row 0 to gallery item 4 is nan"),
    (lambda g: g[:0], r"--gallery-bank-sims \S+: has shape \(0, 25\); it needs at least one row"),
    (lambda g: g[0], r"--gallery-bank-sims \S+: has shape \(25,\); expected a similarity"),
])
def test_a_bad_gallery_bank_is_one_line(files, capsys, tmp_path, change, message,
                                        no_evaluation):
    paths, data = files
    np.save(tmp_path / "bad.npy", change(data["--gallery-bank-sims"]))
    for method in ("all", "dbnorm", "is"):  # checked whether used or not
        err = refused(argv(paths, "--method", method, gallery_bank_sims=tmp_path / "bad.npy"),
                      capsys)
        assert re.search(message, err), err


def test_a_missing_gallery_bank_file_is_one_line(files, capsys, tmp_path, no_evaluation):
    paths, _ = files
    missing = tmp_path / "missing.npy"
    err = refused(argv(paths, "--method", "dbnorm-dynamic", gallery_bank_sims=missing), capsys)
    assert f"--gallery-bank-sims {missing}: no such file" in err


@pytest.mark.parametrize("method", ["dbnorm", "raw"])
def test_save_onto_the_gallery_bank_is_refused(files, capsys, method, no_evaluation):
    paths, _ = files
    target = paths["--gallery-bank-sims"]
    before = target.read_bytes()
    err = refused(argv(paths, "--method", method, "--save", str(target),
                       gallery_bank_sims=target), capsys)
    assert "is the input --gallery-bank-sims" in err
    assert target.read_bytes() == before


def test_a_gallery_bank_in_an_npz_is_read_by_its_name(files, capsys, tmp_path):
    paths, data = files
    np.savez(tmp_path / "banks.npz", bank_sims=data["--bank-sims"],
             gallery_bank_sims=data["--gallery-bank-sims"])
    code, out, _ = run(argv(paths, "--method", "dbnorm", "--format", "json", "--quiet",
                            bank_sims=tmp_path / "banks.npz",
                            gallery_bank_sims=tmp_path / "banks.npz"), capsys)
    assert code == 0
    expected = direct(DualInvertedSoftmax(), data, "both banks")
    assert json.loads(out)[1]["MnR"] == pytest.approx(
        retrieval_metrics(expected, data["--gt"])["MnR"])


@pytest.mark.parametrize("quiet", [True, False])
def test_sn_that_does_not_converge_is_one_note(files, capsys, quiet):
    paths, _ = files
    args = argv(paths, "--method", "sn", "--tau", "0.01", "--n-iter", "1", "--format", "json",
                *(["--quiet"] if quiet else []))
    code, out, err = run(args, capsys)
    assert code == 0 and len(json.loads(out)) == 2
    notes = [line for line in err.splitlines() if "did not converge" in line]
    assert len(notes) == 1
    assert notes[0].startswith(
        "skqbnorm evaluate: note: SN (tau=0.01, n_iter=1): did not converge in n_iter=1 "
        "iterations (the plan's marginals are off by up to ")
    assert notes[0].endswith("A larger --n-iter or --tau converges further.")
    assert "error" not in err  # one error line is the rule for a failed command only


def test_sn_that_converges_says_nothing(files, capsys):
    paths, _ = files
    code, _, err = run(argv(paths, "--method", "sn", "--tau", "0.5", "--n-iter", "100",
                            "--quiet"), capsys)
    assert (code, err) == (0, "")


def test_nnn_default_k_larger_than_the_querybank(files, capsys, tmp_path):
    """Skipped under --method all as CSLS is; an error when named, or when --k is given."""
    paths, data = files
    default_k = NearestNeighborNormalization().k
    if default_k == 1:
        pytest.skip("every querybank fits NNN's default k")
    np.save(tmp_path / "bank.npy", data["--bank-sims"][np.arange(default_k - 1) % N_BANK])
    small = {"bank_sims": tmp_path / "bank.npy"}
    code, out, err = run(argv(paths, "--quiet", "--format", "json", **small), capsys)
    assert code == 0 and "NNN" not in out
    assert f"skipped NNN (k={default_k}, alpha=" in err
    assert f"k={default_k} is larger than the querybank" in err
    assert "Give a smaller --k" in refused(argv(paths, "--method", "nnn", **small), capsys)
    err = refused(argv(paths, "--method", "nnn", "--k", str(default_k), **small), capsys)
    assert re.search(rf"NNN \(k={default_k}, alpha=\S+\): k={default_k} is larger", err)


@pytest.mark.parametrize("option, value, message", [
    ("--alpha", "-0.5", "must be a finite number >= 0"),
    ("--alpha", "nan", "must be a finite number >= 0"),
    ("--beta1", "0", "must be a positive finite number"),
    ("--beta2", "inf", "must be a positive finite number"),
    ("--tau", "-1", "must be a positive finite number"),
    ("--temperature", "x", "must be a positive finite number"),
    ("--n-iter", "0", "must be a positive integer"),
    ("--n-iter", "2.5", "must be a positive integer"),
])
def test_bad_hyperparameters_are_refused_even_where_unused(files, capsys, option, value,
                                                           message):
    paths, _ = files
    code, out, err = run(argv(paths, "--method", "raw", option, value, "--quiet"), capsys)
    assert (code, out) == (2, "")
    assert f"error: argument {option}: {message}" in err.splitlines()[-1]


def test_alpha_zero_leaves_nnn_raw(files, capsys, tmp_path):
    paths, data = files
    code, _, _ = run(argv(paths, "--method", "nnn", "--k", "2", "--alpha", "0", "--quiet",
                          "--save", str(tmp_path / "out.npy")), capsys)
    assert code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), data["--sims"])


@pytest.mark.parametrize("method, setting, users", [
    ("gc", ["--tau", "5"], "sn, dbsn"),
    ("is", ["--k", "3"], "dis, csls, nnn, dis-gated, nnn-gated, dbnorm-dynamic"),
    ("raw", ["--beta", "2"], "is, dis, dis-gated"),
])
def test_a_setting_no_chosen_method_takes_is_refused(files, capsys, method, setting, users):
    paths, _ = files
    err = refused(argv(paths, "--method", method, *setting), capsys)
    assert f"{setting[0]} {setting[1]} is not a setting of --method {method}; it sets {users}." in err
    code, _, _ = run(argv(paths, "--method", "all", *setting, "--quiet", "--bootstrap", "0"), capsys)
    assert code == 0  # some method takes it


def test_the_help_lists_every_method_and_setting(capsys):
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = capsys.readouterr().out
    for method in ("nnn", "dn", "znorm", "mp", "mp-empiric", "dbnorm", "dbnorm-dynamic", "sn", "dbsn",
                   "dsl", "dsl-transductive"):
        assert re.search(rf"^  {re.escape(method)} ", text, re.MULTILINE), method
    for option in ("--gallery-bank-sims", "--bank-gallery-bank-sims", "--alpha", "--beta1", "--beta2", "--tau",
                   "--n-iter", "--temperature"):
        assert option in text
    flat = " ".join(text.split())
    assert f"NNN (k={NearestNeighborNormalization().k}) when the querybank" in flat
    assert "without --gallery-bank-sims it skips dbnorm and dbnorm-dynamic" in flat
    assert f"temperature of SN and DBSN, > 0 (default {SinkhornNormalization().tau:g})" in flat


class WarningDualSoftmax(DualSoftmax):
    """DSL that warns in fit, as a stand-in for a future normaliser."""

    def fit(self, X, y=None, **kwargs):
        warnings.warn("did not settle", ConvergenceWarning)
        warnings.warn("a remark", UserWarning)
        return super().fit(X, y, **kwargs)


def test_other_warnings_pass_on_and_a_convergence_warning_is_a_note(files, capsys,
                                                                      monkeypatch):
    paths, _ = files
    monkeypatch.setitem(cli.METHODS, "dsl",
                        cli.METHODS["dsl"]._replace(normalizer=WarningDualSoftmax))
    with pytest.warns(UserWarning, match="a remark") as caught:
        code, _, err = run(argv(paths, "--method", "dsl", "--temperature", "2", "--quiet"),
                           capsys)
    assert code == 0
    assert err == "skqbnorm evaluate: note: DSL (temperature=2): did not settle\n"
    assert not [w for w in caught if issubclass(w.category, ConvergenceWarning)]


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    """The bundled data's query and querybank similarities, as files."""
    from skqbnorm.datasets import load_wordnet_revdict

    data = load_wordnet_revdict()
    folder = tmp_path_factory.mktemp("bundled")
    gallery_t = data.gallery_embeddings.T
    arrays = {"sims": data.query_embeddings @ gallery_t, "in": data.bank_embeddings @ gallery_t,
              "far": data.far_bank_embeddings @ gallery_t, "gt": data.query_gt}
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", array)
    return folder, arrays


def bundled_args(folder, bank, *extra):
    return ["evaluate", "--sims", str(folder / "sims.npy"), "--bank-sims", str(folder / f"{bank}.npy"),
            "--gt", str(folder / "gt.npy"), *extra]


@pytest.mark.slow
def test_evaluate_reports_the_querybank_diagnostics(bundled, capsys):
    folder, _ = bundled
    code, _, err = run(bundled_args(folder, "in", "--method", "dis", "--bootstrap", "0"), capsys)
    assert code == 0 and "Querybank diagnostics" in err and "no warning" in err
    code, _, err = run(bundled_args(folder, "far", "--method", "dis", "--bootstrap", "0"), capsys)
    assert code == 0 and "Querybank diagnostics" in err and "looks out of domain" in err
    code, _, err = run(bundled_args(folder, "far", "--method", "dis", "--quiet", "--bootstrap", "0"),
                       capsys)
    assert code == 0 and "Querybank diagnostics" not in err
    assert "skqbnorm evaluate: warning: The querybank looks out of domain" in err
    code, _, err = run(bundled_args(folder, "in", "--method", "dis", "--quiet", "--bootstrap", "0"),
                       capsys)
    assert code == 0 and err == ""


@pytest.mark.slow
@pytest.mark.parametrize("method, template", [
    ("dis-gated", DynamicInvertedSoftmax()), ("nnn-gated", NearestNeighborNormalization())])
def test_a_gated_method_is_its_normalizer_in_domain_and_raw_far_from_it(bundled, capsys, method,
                                                                      template):
    folder, arrays = bundled
    rows = {}
    for bank in ("in", "far"):
        code, out, err = run(bundled_args(folder, bank, "--method", method, "--quiet",
                                          "--format", "json", "--bootstrap", "0"), capsys)
        assert code == 0
        rows[bank] = json.loads(out)[1]
    expected = retrieval_metrics(template.fit(arrays["in"]).transform(arrays["sims"]), arrays["gt"])
    assert rows["in"]["MnR"] == pytest.approx(expected["MnR"])
    raw = retrieval_metrics(arrays["sims"], arrays["gt"])
    assert rows["far"]["MnR"] == pytest.approx(raw["MnR"]) != pytest.approx(expected["MnR"])
    assert "the gate left them raw" in err
