"""What a shell user meets: method names, --version, embeddings, the assumed gt, pipes."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from cli_helpers import run

from skqbnorm import (
    CSLS,
    DualInvertedSoftmax,
    DynamicInvertedSoftmax,
    InvertedSoftmax,
    NearestNeighborNormalization,
    __version__,
)
from skqbnorm.catalogue import METHODS
from skqbnorm.datasets import make_hubness_sims
from skqbnorm.metrics import retrieval_metrics


@pytest.fixture
def files(tmp_path):
    sims, gt, bank = make_hubness_sims(40, 30, 60, random_state=0)
    paths = {"--sims": tmp_path / "sims.npy", "--bank-sims": tmp_path / "bank.npy",
             "--gt": tmp_path / "gt.npy"}
    for (option, path), array in zip(paths.items(), (sims, bank, gt)):
        np.save(path, array)
    return paths, (sims, gt, bank)


def evaluate(paths, *extra):
    return ["evaluate", *[str(item) for pair in paths.items() for item in pair],
            *map(str, extra)]


def rows_of(out):
    return [(row["method"], row["MnR"]) for row in json.loads(out)]


# -- --method: case-insensitive, comma-separated, the names before 1.0 refused -------------


@pytest.mark.parametrize("spelling", ["DIS", "Dis", " dis "])
def test_method_names_are_case_insensitive(files, capsys, spelling):
    paths, _ = files
    expected = run(evaluate(paths, "--method", "dis", "--format", "json", "--quiet"), capsys)
    got = run(evaluate(paths, "--method", spelling, "--format", "json", "--quiet"), capsys)
    assert got[0] == 0 and rows_of(got[1]) == rows_of(expected[1])


def test_several_methods_comma_separated_equal_their_classes(files, capsys):
    paths, (sims, gt, bank) = files
    code, out, err = run(evaluate(paths, "--method", "CSLS,nnn", "--k", "3", "--format", "json",
                                  "--quiet", "--bootstrap", "0"), capsys)
    assert code == 0, err
    rows = json.loads(out)
    assert [row["method"] for row in rows] == ["raw similarities", "CSLS (k=3)",
                                               "NNN (k=3, alpha=1)"]
    for row, normalizer in zip(rows[1:], (CSLS(k=3), NearestNeighborNormalization(k=3))):
        expected = retrieval_metrics(normalizer.fit(bank).transform(sims), gt)["MnR"]
        assert row["MnR"] == pytest.approx(expected)


@pytest.mark.parametrize("value, message", [
    ("magic", "invalid choice: 'magic'"),
    ("is,magic", "invalid choice: 'magic'"),
    ("all,is", "'all' cannot be combined"),
    ("is,", "invalid choice: ''"),
])
def test_unknown_or_mixed_method_names_are_one_line(files, capsys, value, message):
    paths, _ = files
    code, out, err = run(evaluate(paths, "--method", value, "--quiet"), capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1 and message in err, err


def test_save_takes_one_method_only(files, capsys, tmp_path):
    paths, _ = files
    code, _, err = run(evaluate(paths, "--method", "is,dis", "--save", tmp_path / "o.npy"),
                       capsys)
    assert code == 2 and "--save writes one normalised matrix" in err


@pytest.mark.parametrize("old", ["dual-is", "DUAL-DIS"])
def test_the_names_before_one_point_oh_are_unknown_methods(files, capsys, tmp_path, old):
    paths, _ = files
    np.save(tmp_path / "gallery_bank.npy", np.random.default_rng(2).normal(size=(25, 30)))
    paths = {**paths, "--gallery-bank-sims": tmp_path / "gallery_bank.npy"}
    code, out, err = run(evaluate(paths, "--method", old, "--format", "json", "--quiet"), capsys)
    assert code == 2 and out == ""
    assert f"invalid choice: {old.lower()!r}" in err


def test_a_method_registered_later_is_offered(files, capsys, monkeypatch):
    """The CLI reads the catalogue when it runs: a new entry is a new --method."""
    paths, (sims, gt, bank) = files
    monkeypatch.setitem(METHODS, "is-sharp", METHODS["is"]._replace(
        label="sharp IS", fixed=(("beta", 50.0),), options=()))
    code, out, err = run(evaluate(paths, "--method", "IS-sharp", "--format", "json", "--quiet"),
                         capsys)
    assert code == 0, err
    expected = InvertedSoftmax(beta=50).fit(bank).transform(sims)
    assert rows_of(out)[1] == ("sharp IS", pytest.approx(retrieval_metrics(expected, gt)["MnR"]))
    _, help_text, _ = run(["evaluate", "--help"], capsys)
    assert "  is-sharp " in help_text


def test_version(capsys):
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out == f"skqbnorm {__version__}\n"


# -- embeddings ---------------------------------------------------------------------------


@pytest.fixture
def embeddings(tmp_path):
    rng = np.random.default_rng(0)
    gallery = rng.normal(size=(30, 8))
    arrays = {"--queries": gallery + 0.7 * rng.normal(size=gallery.shape),
              "--gallery": gallery, "--bank": rng.normal(size=(50, 8)),
              "--gallery-bank": rng.normal(size=(20, 8))}
    paths = {}
    for option, array in arrays.items():
        paths[option] = tmp_path / f"embedded_{option.strip('-')}.npy"
        np.save(paths[option], array)
    return paths, arrays


def unit(rows):
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("metric", [None, "cosine", "DOT"])
def test_embeddings_equal_their_similarities(embeddings, capsys, tmp_path, metric):
    paths, arrays = embeddings
    scale = (lambda x: x) if metric == "DOT" else unit
    query, gallery, bank = (scale(arrays[o]) for o in ("--queries", "--gallery", "--bank"))
    np.save(tmp_path / "sims.npy", query @ gallery.T)
    np.save(tmp_path / "bank_sims.npy", bank @ gallery.T)
    common = ["--method", "dis", "--format", "json", "--quiet", "--bootstrap", "50"]
    by_sims = run(["evaluate", "--sims", str(tmp_path / "sims.npy"),
                   "--bank-sims", str(tmp_path / "bank_sims.npy"), *common], capsys)
    inputs = {o: paths[o] for o in ("--queries", "--gallery", "--bank")}
    by_embeddings = run(evaluate(inputs, *common, *(["--metric", metric] if metric else [])),
                        capsys)
    assert by_embeddings[0] == 0, by_embeddings[2]
    for got, want in zip(json.loads(by_embeddings[1]), json.loads(by_sims[1]), strict=True):
        numbers = [key for key, value in want.items() if isinstance(value, float)
                   and key != "seconds"]
        assert {k: v for k, v in got.items() if k not in numbers and k != "seconds"} == {
            k: v for k, v in want.items() if k not in numbers and k != "seconds"}
        assert [got[k] for k in numbers] == pytest.approx([want[k] for k in numbers], rel=1e-9)
    expected = DynamicInvertedSoftmax().fit(bank @ gallery.T).transform(query @ gallery.T)
    assert json.loads(by_embeddings[1])[1]["MnR"] == pytest.approx(
        retrieval_metrics(expected, np.arange(30))["MnR"])


def test_a_gallery_bank_of_embeddings_feeds_dbnorm(embeddings, capsys):
    paths, arrays = embeddings
    query, gallery, bank, gallery_bank = (unit(a) for a in arrays.values())
    code, out, err = run(evaluate(paths, "--method", "dbnorm", "--format", "json", "--quiet",
                                  "--bootstrap", "0"), capsys)
    assert code == 0, err
    expected = DualInvertedSoftmax().fit(bank @ gallery.T, gallery_bank=gallery_bank @ gallery.T)
    scores = expected.transform(query @ gallery.T)
    assert json.loads(out)[1]["MnR"] == pytest.approx(
        retrieval_metrics(scores, np.arange(30))["MnR"])


@pytest.mark.parametrize("method", ["dbnorm", "dbnorm-dynamic", "dbsn"])
def test_a_dual_bank_method_without_a_gallery_bank_asks_for_the_embedding_option(
        embeddings, capsys, method):
    paths, _ = embeddings
    inputs = {o: paths[o] for o in ("--queries", "--gallery", "--bank")}
    code, out, err = run(evaluate(inputs, "--method", method, "--quiet"), capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "needs --gallery-bank, the gallery-bank embeddings;" in err and "-sims" not in err, err
    # every method: the skipped ones are told the option that mode takes
    code, _, err = run(evaluate(inputs, "--method", "all", "--bootstrap", "0"), capsys)
    assert code == 0 and err.count("it needs --gallery-bank (without") == 3, err
    assert "-sims" not in err, err


@pytest.mark.parametrize("change, message", [
    (lambda p, t: {**p, "--bank": t["bad_dim"]},
     r"the embeddings differ in dimension \(.*--bank \(50, 7\)"),
    (lambda p, t: {**p, "--gallery": t["zero_row"]}, r"--gallery \S+: row 3 has norm 0"),
    (lambda p, t: {**p, "--queries": t["nan"]}, r"--queries \S+: row 1, column 2 is nan"),
    (lambda p, t: {o: v for o, v in p.items() if o != "--gallery"}, "needs --gallery too"),
    (lambda p, t: {**p, "--sims": t["bad_dim"]}, "cannot be combined"),
])
def test_bad_embeddings_are_one_line(embeddings, capsys, tmp_path, change, message):
    paths, arrays = embeddings
    bad = {"bad_dim": arrays["--bank"][:, :7], "zero_row": np.where(
        np.arange(30)[:, None] == 3, 0.0, arrays["--gallery"]),
        "nan": np.where(np.arange(8) == 2, np.where(np.arange(30)[:, None] == 1, np.nan, 1.0),
                        arrays["--queries"])}
    temporary = {}
    for name, array in bad.items():
        temporary[name] = tmp_path / f"{name}.npy"
        np.save(temporary[name], array)
    inputs = {o: paths[o] for o in ("--queries", "--gallery", "--bank")}
    code, out, err = run(evaluate(change(inputs, temporary), "--method", "is", "--quiet"), capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert __import__("re").search(message, err), err


def test_metric_with_similarities_and_no_input_at_all_are_refused(files, capsys):
    paths, _ = files
    code, _, err = run(evaluate(paths, "--metric", "dot", "--quiet"), capsys)
    assert code == 2 and "--metric dot applies to embeddings" in err
    code, _, err = run(["evaluate", "--quiet"], capsys)
    assert code == 2 and "give --sims and --bank-sims (similarities), or --queries" in err


# -- gallery banks nobody uses; settings that overflow -------------------------------------


def test_a_gallery_bank_no_chosen_method_uses_is_refused(files, embeddings, capsys, tmp_path):
    paths, _ = files
    np.save(tmp_path / "gb.npy", np.ones((5, 30)))
    code, out, err = run(evaluate({**paths, "--gallery-bank-sims": tmp_path / "gb.npy"},
                                  "--method", "is,csls", "--quiet"), capsys)
    assert (code, out) == (2, "")
    assert ("--gallery-bank-sims is not used by --method is,csls; it is used by dbnorm, "
            "dbnorm-dynamic.") in err
    embedding_paths, _ = embeddings
    code, out, err = run(evaluate(embedding_paths, "--method", "sn", "--quiet"), capsys)
    assert (code, out) == (2, "") and "--gallery-bank is not used by --method sn" in err


def test_an_overflow_under_a_setting_names_the_option(files, capsys, tmp_path):
    paths, (sims, _, bank) = files
    np.save(tmp_path / "sims.npy", sims * 5)
    np.save(tmp_path / "bank.npy", bank * 5)
    paths = {**paths, "--sims": tmp_path / "sims.npy", "--bank-sims": tmp_path / "bank.npy"}
    code, out, err = run(evaluate(paths, "--method", "dsl", "--temperature", "1e-300",
                                  "--quiet"), capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith("skqbnorm evaluate: error: --temperature 1e-300: ")


# -- the assumed gt -----------------------------------------------------------------------


def test_an_assumed_gt_is_a_note_and_near_chance_a_warning(tmp_path, capsys):
    rng = np.random.default_rng(1)
    sims, bank = rng.normal(size=(60, 60)) + 3 * np.eye(60), rng.normal(size=(80, 60))
    np.save(tmp_path / "sims.npy", sims)
    np.save(tmp_path / "shuffled.npy", sims[:, np.random.default_rng(0).permutation(60)])
    np.save(tmp_path / "bank.npy", bank)
    common = ["--bank-sims", str(tmp_path / "bank.npy"), "--method", "is", "--bootstrap", "0"]
    code, _, err = run(["evaluate", "--sims", str(tmp_path / "sims.npy"), *common], capsys)
    assert code == 0
    assert ("skqbnorm evaluate: note: no --gt: query i's correct item is taken to be gallery "
            "item i (the diagonal of --sims).") in err.splitlines()
    assert "near chance" not in err
    code, _, err = run(["evaluate", "--sims", str(tmp_path / "shuffled.npy"), *common,
                        "--quiet"], capsys)
    assert code == 0 and "note: no --gt" not in err  # --quiet: no note, but the warning
    warning = [line for line in err.splitlines() if "near chance" in line]
    assert len(warning) == 1 and warning[0].startswith("skqbnorm evaluate: warning: raw R@1 is ")
    assert "(1.67% for 60 gallery items)" in warning[0] and "may be shuffled" in warning[0]
    code, _, err = run(["evaluate", "--sims", str(tmp_path / "shuffled.npy"), *common,
                        "--gt", str(_save(tmp_path, np.arange(60))), "--quiet"], capsys)
    assert code == 0 and "near chance" not in err  # a gt given: no guess to doubt


def _save(tmp_path, array):
    np.save(tmp_path / "gt_given.npy", array)
    return tmp_path / "gt_given.npy"


# -- a closed pipe ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_closed_pipe_ends_quietly(files):
    """``skqbnorm evaluate ... | head -0``: no traceback, status 0 or 141 (SIGPIPE's)."""
    paths, _ = files
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "skqbnorm", *evaluate(paths, "--format", "csv", "--quiet",
                                                     "--bootstrap", "0")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    process.stdout.close()  # the reader leaves before anything is written
    err = process.stderr.read().decode()
    status = process.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert status in (0, 141), (status, err)
