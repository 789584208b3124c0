"""The command line: demo, evaluate, and its errors."""

import csv
import io
import json
import warnings

import numpy as np
import pytest
from cli_helpers import without_settings
from sklearn.exceptions import ConvergenceWarning

from skqbnorm import (
    DualBankSinkhornNormalization,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
)
from skqbnorm._evaluation import CHANGE_FIELDS
from skqbnorm.cli import main
from skqbnorm.datasets import load_wordnet_revdict, make_hubness_sims
from skqbnorm.metrics import paired_comparison, retrieval_metrics


@pytest.fixture
def files(tmp_path):
    sims, gt, bank = make_hubness_sims(200, 50, 300, random_state=0, dtype=np.float32)
    paths = {name: tmp_path / f"{name}.npy" for name in ("sims", "bank", "gt")}
    np.save(paths["sims"], sims)
    np.save(paths["bank"], bank)
    np.save(paths["gt"], gt)
    return paths, sims, gt, bank


def test_evaluate_matches_the_library(files, capsys, tmp_path):
    paths, sims, gt, bank = files
    out = tmp_path / "out.npy"
    code = main(["evaluate", "--sims", str(paths["sims"]), "--bank-sims", str(paths["bank"]),
                 "--gt", str(paths["gt"]), "--method", "dis", "--beta", "30", "--k", "2",
                 "--format", "json", "--save", str(out)])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    expected = DynamicInvertedSoftmax(beta=30, k=2).fit(bank).transform(sims)
    assert [row["method"] for row in rows] == ["raw similarities", "DIS (beta=30, k=2)"]
    assert rows[1]["R@1"] == pytest.approx(retrieval_metrics(expected, gt)["R@1"])
    assert rows[0]["R@1"] == pytest.approx(retrieval_metrics(sims, gt)["R@1"])
    np.testing.assert_allclose(np.load(out), expected)


def test_evaluate_all_methods_as_csv_and_table(files, capsys):
    paths, *_ = files
    args = ["evaluate", "--sims", str(paths["sims"]), "--bank-sims", str(paths["bank"]),
            "--gt", str(paths["gt"]), "--quiet"]
    assert main(args + ["--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # every method but DBNorm, DBNorm (dynamic) and DBSN, which need a gallery bank
    assert lines[0].startswith("method,R@1,R@5,R@10,MdR,MnR,skewness,seconds,") and len(lines) == 17
    assert lines[0].split(",")[8:] == list(CHANGE_FIELDS)
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "CSLS (k=10)" in table and "DSL (transductive; temperature=" in table


def test_evaluate_takes_the_diagonal_when_square_and_reads_npz(tmp_path, capsys):
    sims = np.eye(5) + 0.01
    np.savez(tmp_path / "sims.npz", sims=sims)
    np.save(tmp_path / "bank.npy", np.random.default_rng(0).normal(size=(20, 5)))
    assert main(["evaluate", "--sims", str(tmp_path / "sims.npz"),
                 "--bank-sims", str(tmp_path / "bank.npy"),
                 "--method", "raw", "--format", "json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["R@1"] == 100.0


@pytest.mark.parametrize("change, message", [
    (lambda p: ["--sims", str(p["sims"]) + ".missing"], "no such file"),
    (lambda p: ["--bank-sims", str(p["bad_bank"])],
     r"--sims has shape \(200, 50\) and --bank-sims has shape \(300, 49\)"),
    (lambda p: ["--method", "magic"], "invalid choice: 'magic'"),
    (lambda p: ["--gt", str(p["bad_gt"])], "gt must hold gallery indices"),
    (lambda p: ["--save", "x.npy"], "--save writes one normalised matrix"),
])
def test_evaluate_errors_exit_non_zero(files, capsys, change, message):
    paths, _, gt, bank = files
    paths = dict(paths, bad_bank=paths["bank"].with_name("bad_bank.npy"),
                 bad_gt=paths["gt"].with_name("bad_gt.npy"))
    np.save(paths["bad_bank"], bank[:, :49])
    np.save(paths["bad_gt"], gt + 50)
    args = {"--sims": str(paths["sims"]), "--bank-sims": str(paths["bank"]),
            "--gt": str(paths["gt"])}
    extra = change(paths)
    args.update(dict(zip(extra[::2], extra[1::2])))
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", *[item for pair in args.items() for item in pair]])
    assert exit_info.value.code == 2
    assert __import__("re").search(message, capsys.readouterr().err)


#: The labels of the demo's rows without their parameters, per bank: every normaliser
#: with both querybanks, and the two rows that use no querybank once.
BANKED = ["IS", "DIS", "CSLS", "GC", "CENT", "DN", "NNN", "gated DIS", "gated NNN", "z-norm", "MP (Gaussian)",
          "MP (empiric)", "DBNorm", "DBNorm (dynamic)", "SN", "DBSN", "DSL"]
DEMO_ROWS = ([("(none)", "raw similarities"), ("(test queries)", "DSL (transductive)")]
             + [(bank, name) for bank in ("in-domain", "far-domain") for name in BANKED])


@pytest.mark.slow
def test_demo_on_the_bundled_dataset(capsys):
    assert main(["demo", "--format", "json"]) == 0
    captured = capsys.readouterr()
    listed = [(row["bank"], without_settings(row["method"]))
              for row in json.loads(captured.out)]
    assert listed == DEMO_ROWS
    rows = dict(zip(listed, json.loads(captured.out)))
    raw = rows[("(none)", "raw similarities")]
    assert rows[("in-domain", "DIS")]["R@1"] > raw["R@1"] + 1
    assert rows[("in-domain", "DIS")]["skewness"] < raw["skewness"]
    dis = rows[("in-domain", "DIS")]  # a gain whose 95% interval excludes 0
    assert dis["R@1 change"] == pytest.approx(dis["R@1"] - raw["R@1"])
    assert 0 < dis["R@1 change low"] < dis["R@1 change"] < dis["R@1 change high"]
    assert dis["R@1 McNemar p"] < 0.05 and raw["R@1 change"] is None
    assert "in-domain querybank: 4000 queries" in captured.err
    # DBNorm uses the bundled gallery bank (without one it would equal IS)
    data = load_wordnet_revdict()
    query_sims, bank, gallery_bank = (x @ data.gallery_embeddings.T for x in (
        data.query_embeddings, data.bank_embeddings, data.gallery_bank_embeddings))
    scores = DualInvertedSoftmax().fit(bank, gallery_bank=gallery_bank).transform(query_sims)
    assert rows[("in-domain", "DBNorm")]["MnR"] == pytest.approx(
        retrieval_metrics(scores, data.query_gt)["MnR"])
    # DBSN's s(b, h) is the querybank's embeddings against the gallery bank's
    cross = data.bank_embeddings @ data.gallery_bank_embeddings.T
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        scores = DualBankSinkhornNormalization().fit(
            bank, querybank_to_gallery_bank=cross).transform(query_sims)
    assert rows[("in-domain", "DBSN")]["MnR"] == pytest.approx(
        retrieval_metrics(scores, data.query_gt)["MnR"])
    assert rows[("(test queries)", "DSL (transductive)")]["MnR"] == pytest.approx(
        retrieval_metrics(DualSoftmax().fit_transform(query_sims), data.query_gt)["MnR"])



def evaluate_json(paths, capsys, *extra):
    code = main(["evaluate", "--sims", str(paths["sims"]), "--bank-sims", str(paths["bank"]),
                 "--gt", str(paths["gt"]), "--format", "json", "--quiet", *extra])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_changes_against_raw_equal_the_paired_comparison(files, capsys):
    paths, sims, gt, bank = files
    rows = evaluate_json(paths, capsys, "--method", "dis", "--beta", "30", "--k", "2",
                         "--bootstrap", "300", "--seed", "4")
    assert all(rows[0][field] is None for field in CHANGE_FIELDS)  # raw against itself
    scores = DynamicInvertedSoftmax(beta=30, k=2).fit(bank).transform(sims)
    expected = paired_comparison(sims, scores, gt, n_resamples=300, random_state=4)
    for metric in expected.metrics:
        assert rows[1][f"{metric} change"] == pytest.approx(expected.change[metric])
        low, high = rows[1][f"{metric} change low"], rows[1][f"{metric} change high"]
        assert (low, high) == pytest.approx(expected.interval[metric]), metric
    for metric, tested in expected.discordant.items():
        assert rows[1][f"{metric} McNemar p"] == pytest.approx(tested.p_value)
    assert expected.interval["R@1"][0] < expected.interval["R@1"][1]


def test_each_method_draws_the_same_resamples_and_the_seed_matters(files, capsys):
    paths, *_ = files
    alone = evaluate_json(paths, capsys, "--method", "csls", "--bootstrap", "200")[1]
    among = {row["method"]: row for row in evaluate_json(paths, capsys, "--bootstrap", "200")}
    assert among[alone["method"]] == {**alone, "seconds": among[alone["method"]]["seconds"]}
    other = evaluate_json(paths, capsys, "--method", "csls", "--bootstrap", "200",
                          "--seed", "1")[1]
    intervals = [(row["MnR change low"], row["MnR change high"]) for row in (alone, other)]
    assert intervals[0] != intervals[1] and other["MnR change"] == alone["MnR change"]


def test_bootstrap_zero_keeps_the_changes_and_mcnemar_without_intervals(files, capsys):
    paths, *_ = files
    args = ["evaluate", "--sims", str(paths["sims"]), "--bank-sims", str(paths["bank"]),
            "--gt", str(paths["gt"]), "--method", "is", "--quiet", "--bootstrap", "0"]
    assert main([*args, "--format", "csv"]) == 0
    raw, row = csv.DictReader(io.StringIO(capsys.readouterr().out))
    assert raw["R@1 change"] == "" and row["R@1 change low"] == row["R@1 change high"] == ""
    assert float(row["R@1 change"]) == pytest.approx(float(row["R@1"]) - float(raw["R@1"]))
    assert 0 <= float(row["R@1 McNemar p"]) <= 1
    assert main(args) == 0
    header, _, raw_line, is_line = capsys.readouterr().out.splitlines()
    assert header.endswith("R@1 change    95% interval  McNemar p")
    assert "[" not in is_line and is_line.split()[-2] == f"{float(row['R@1 change']):+.1f}"
    assert raw_line.split()[-1] == f"{float(raw['skewness']):.2f}"  # no change for raw


def test_table_shows_the_change_of_r1_with_its_interval(files, capsys):
    paths, *_ = files
    rows = evaluate_json(paths, capsys, "--method", "is", "--bootstrap", "100")
    assert main(["evaluate", "--sims", str(paths["sims"]), "--bank-sims", str(paths["bank"]),
                 "--gt", str(paths["gt"]), "--method", "is", "--quiet",
                 "--bootstrap", "100"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    row = rows[1]
    expected = (f"{row['R@1 change']:+.1f}", f"[{row['R@1 change low']:+.1f},",
                f"{row['R@1 change high']:+.1f}]", f"{row['R@1 McNemar p']:.2g}")
    assert tuple(line.split()[-4:]) == expected


@pytest.mark.parametrize("option, value", [("--bootstrap", "-1"), ("--bootstrap", "1.5"),
                                           ("--seed", "x"), ("--seed", "-3")])
def test_bad_bootstrap_and_seed_are_refused(files, capsys, option, value):
    paths, *_ = files
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", "--sims", str(paths["sims"]), "--bank-sims", str(paths["bank"]),
              option, value])
    assert exit_info.value.code == 2
    assert f"argument {option}: must be an integer >= 0; got '{value}'" in capsys.readouterr().err


def test_the_help_explains_the_changes(capsys):
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "change against raw similarities (95%, percentile; default 1000;" in text
    assert "95% paired percentile bootstrap interval over --bootstrap resamples" in text
