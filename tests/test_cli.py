"""The command line: demo, evaluate, and its errors."""

import json

import numpy as np
import pytest

from skqbnorm import DynamicInvertedSoftmax
from skqbnorm.cli import main
from skqbnorm.datasets import make_hubness_sims
from skqbnorm.metrics import retrieval_metrics


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
    assert lines[0] == "method,R@1,R@5,R@10,MdR,MnR,skewness,seconds" and len(lines) == 7
    assert main(args) == 0
    assert "CSLS (k=10)" in capsys.readouterr().out


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


def test_demo_on_the_bundled_dataset(capsys):
    assert main(["demo", "--format", "json"]) == 0
    captured = capsys.readouterr()
    rows = {(row["bank"], row["method"].split(" ")[0]): row for row in json.loads(captured.out)}
    raw = rows[("(none)", "raw")]["R@1"]
    assert rows[("in-domain", "DIS")]["R@1"] > raw + 1
    assert rows[("in-domain", "DIS")]["skewness"] < rows[("(none)", "raw")]["skewness"]
    assert "in-domain querybank: 4000 queries" in captured.err
