"""The command line: demo, evaluate, and its errors."""

import json

import numpy as np
import pytest

from skqbnorm import DualInvertedSoftmax, DualSoftmax, DynamicInvertedSoftmax
from skqbnorm.cli import main
from skqbnorm.datasets import load_wordnet_revdict, make_hubness_sims
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
    # every method but DualIS and DualDIS, which need --gallery-bank-sims
    assert lines[0] == "method,R@1,R@5,R@10,MdR,MnR,skewness,seconds" and len(lines) == 15
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "CSLS (k=10)" in table and "DSL transductive" in table


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
BANKED = ["IS", "DIS", "CSLS", "GC", "CENT", "DN", "NNN", "z-norm", "MP (Gaussian)",
          "MP (empiric)", "DualIS", "DualDIS", "SN", "DSL"]
DEMO_ROWS = ([("(none)", "raw similarities"), ("(test queries)", "DSL transductive")]
             + [(bank, name) for bank in ("in-domain", "far-domain") for name in BANKED])


def without_parameters(label):
    return label if label.startswith("MP") else label.split(" (")[0]


def test_demo_on_the_bundled_dataset(capsys):
    assert main(["demo", "--format", "json"]) == 0
    captured = capsys.readouterr()
    listed = [(row["bank"], without_parameters(row["method"]))
              for row in json.loads(captured.out)]
    assert listed == DEMO_ROWS
    rows = dict(zip(listed, json.loads(captured.out)))
    raw = rows[("(none)", "raw similarities")]
    assert rows[("in-domain", "DIS")]["R@1"] > raw["R@1"] + 1
    assert rows[("in-domain", "DIS")]["skewness"] < raw["skewness"]
    assert "in-domain querybank: 4000 queries" in captured.err
    # DBNorm uses the bundled gallery bank (without one it would equal IS)
    data = load_wordnet_revdict()
    query_sims, bank, gallery_bank = (x @ data.gallery_embeddings.T for x in (
        data.query_embeddings, data.bank_embeddings, data.gallery_bank_embeddings))
    scores = DualInvertedSoftmax().fit(bank, gallery_bank=gallery_bank).transform(query_sims)
    assert rows[("in-domain", "DualIS")]["MnR"] == pytest.approx(
        retrieval_metrics(scores, data.query_gt)["MnR"])
    assert rows[("(test queries)", "DSL transductive")]["MnR"] == pytest.approx(
        retrieval_metrics(DualSoftmax().fit_transform(query_sims), data.query_gt)["MnR"])

