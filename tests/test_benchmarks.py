"""The benchmark scripts still run (at tiny sizes: timings are not asserted here)."""

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from skqbnorm.catalogue import rerankers

pytestmark = pytest.mark.slow  # runs every benchmark script: not in the quick loop

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"


def run_script(script, args):
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("script, args", [
    ("run.py", ["--scale", "0.02", "--repeat", "1"]),
    ("bench_normalisers.py",
     ["--bank", "300", "--gallery", "200", "--queries", "50", "--repeat", "1"]),
])
def test_benchmark_script_runs(script, args):
    stdout = run_script(script, args)
    assert "DynamicInvertedSoftmax" in stdout or "DIS" in stdout


def test_floor_benchmark_prints_every_ratio():
    stdout = run_script("bench_floor.py", ["--scale", "0.01", "--repeat", "1", "--dims", "16"])
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and "---" not in line]
    names = [row.split("|")[1].strip() for row in rows]
    for start, end in [("IS", ", n_jobs=1"), ("CSLS(k=", ", n_jobs=-1"), ("NNN(k=", " with scores"),
                       ("DIS", " without scores"), ("Centering", ", n_jobs=-1")]:
        found = [name for name in names if name.startswith(start) and name.endswith(end)]
        assert len(found) == 2, (start, end)  # at both sizes
    assert names.count("IS") == 1 and names.count("DIS") == 1  # on a precomputed bank
    for row in rows:
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        if cells[1] != "seconds":  # a verdict on each target, none on a reference row
            assert cells[4] in ({""} if cells[0].endswith("(reference)") else {"yes", "NO"}), row
        # each softmax and top-k fit against NumPy's plain passes for the same statistic
        if cells[0] in ("IS", "DIS") or (cells[0].startswith(("IS,", "DIS,", "CSLS(", "NNN("))
                                         and "n_jobs" in cells[0]):
            assert len(cells) == 6 and float(cells[5].rstrip("x")) > 0, row


def test_index_benchmark_runs():
    pytest.importorskip("faiss")
    stdout = run_script("bench_index.py", ["--gallery", "2000", "--queries", "20", "--bank", "500",
                                           "--train-size", "2000", "--factories", "Flat",
                                           "IVF16,Flat", "HNSW8"])
    assert "HNSW8" in stdout and "IVF16,Flat" in stdout


def test_precomputed_fits_benchmark_prints_one_row_per_normalizer():
    stdout = run_script(
        "bench_precomputed_fits.py", ["--scale", "0.02", "--repeat", "1", "--sinkhorn-iter", "2"]
    )
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and "---" not in line]
    header, *rows = rows
    assert header.count("|") == 10
    names = [row.split("|")[1].strip() for row in rows]
    for name in ("Centering(alpha=0.5)", "NearestNeighborNormalization", "QueryBankZNorm",
                 'MutualProximity("gaussian")', 'MutualProximity("empiric")',
                 "DualInvertedSoftmax", "DualDynamicInvertedSoftmax", "SinkhornNormalization",
                 "DualSoftmax"):
        assert any(row_name.startswith(name) for row_name in names), name
    for row in rows:
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        assert len(cells) == 9
        assert float(cells[3]) > 0  # fit / IS fit
        assert cells[5] in {"", "yes", "NO"}  # a verdict on each target ("" for reference rows)
    assert "load average" in stdout


def test_reranker_benchmark_prints_one_row_per_case():
    stdout = run_script("bench_rerankers.py", ["--scale", "0.01", "--repeat", "1"])
    assert stdout.startswith("machine: ")
    for name in ("hinge, all pairs", "hinge, kNN, rho-adjacent", "preference strength",
                 "point-wise, kNN", "random walk, kNN"):
        assert name in stdout


def test_reranker_size_benchmark_prints_a_row_per_size_and_a_verdict_per_reranker():
    stdout = run_script("bench_rerankers.py", ["--part", "sizes", "--sizes", "60,120", "--repeat", "1"])
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split("|")[1].strip() for row in rows] == ["items", "60", "120"]
    names = [cls.__name__ for cls in rerankers()]
    assert all(len(row.split("|")) == 5 + len(names) for row in rows)
    for name in names:
        assert any(line.startswith(f"{name}: ") for line in stdout.splitlines())


def test_device_benchmark_prints_every_fit_and_search_and_says_no_accelerator_was_measured():
    pytest.importorskip("torch")  # not in CI: the device benchmark needs torch
    stdout = run_script("bench_device.py", ["--device", "cpu", "--bank", "300", "--gallery", "200",
                                            "--queries", "50", "--dims", "16", "--k", "8",
                                            "--repeat", "1", "--no-peer"])
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and "---" not in line]
    names = [row.split("|")[1].strip() for row in rows]
    for name in ("IS", "DIS", "CSLS(k=8)", "NNN(k=8)"):
        assert names.count(name) == 2 and names.count(f"{name}, NumPy path") == 2, name  # fit, top_k
    assert names.count("device blocked product (torch.matmul)") == 2
    for row in rows:
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        if cells[1] != "seconds":
            assert float(cells[1]) >= 0 and float(cells[2].rstrip("x")) >= 0, row
        if cells[0] in ("IS", "DIS", "CSLS(k=8)", "NNN(k=8)"):
            assert float(cells[3].rstrip("x")) > 0, row  # a speed-up over the NumPy path
    assert "top-10 identical to the NumPy path's" in stdout
    assert "no accelerator was measured" in stdout


def test_versions_benchmark_checks_and_times_every_case_against_head():
    if shutil.which("git") is None or not (BENCHMARKS.parent / ".git").exists():
        pytest.skip("bench_versions.py extracts a commit with git: needs git and the repository's .git")
    changed = subprocess.run(["git", "-C", str(BENCHMARKS.parent), "status", "--porcelain", "skqbnorm"],
                             capture_output=True, text=True, check=True).stdout
    if changed:
        pytest.skip("the working tree's package differs from HEAD, whose results it is checked against")
    stdout = run_script("bench_versions.py", ["--against", "HEAD", "--scale", "0.01", "--dims", "16",
                                              "--rounds", "2"])
    checks = [line for line in stdout.splitlines() if line.startswith("- ")]
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and "---" not in line]
    header, *rows = rows
    assert header.count("|") == 9
    cases = [row.split("|")[1].strip() for row in rows]
    fits = [f"a. {name}, n_jobs={n_jobs}" for name in ("IS", "DIS", "CSLS(k)", "NNN(k)", "Centering")
            for n_jobs in (1, -1)]
    searches = [f"b. {name} {scores} scores" for name in ("DIS", "CSLS(k)", "NNN(k)")
                for scores in ("with", "without")]
    # each case of sections a and b at both sizes, each of section c once
    expected = Counter(2 * (fits + searches) + ["c. IS", "c. DIS"])
    assert Counter(re.sub(r"k=\d+", "k", case.split(" · ")[0]) for case in cases) == expected
    assert len(set(cases)) == len(cases)
    # the same commit's code on the same data: every case's results equal, to the bit
    assert len(checks) == len(cases)
    assert all(line.endswith("top-10 indices equal; scores and fitted statistics bitwise equal")
               for line in checks), checks
    for row in rows:
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        assert cells[1] == "yes", row
        for ratio in (cells[4], cells[7]):  # "mean [low, high]", low <= mean <= high
            mean, low, high = (float(x) for x in ratio.replace("[", "").replace("]", "").replace(",", "").split())
            assert 0 < low <= mean <= high, row
        assert all(float(cells[i]) > 0 for i in (2, 3)), row
    assert "load average before" in stdout and "load average after" in stdout


def test_versions_benchmark_says_when_results_differ(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from bench_versions import compare

    indices = np.array([[0, 1], [2, 3], [4, 5]])
    scores = np.array([[0.5, 0.25], [0.5, 0.25], [0.5, 0.25]], dtype=np.float32)
    with_nan = np.array([np.nan, 1.0])
    same = compare((indices, {"scores": scores, "mean_": with_nan}),
                   (indices.copy(), {"mean_": with_nan.copy(), "scores": scores.copy()}))
    assert same == ("top-10 indices equal; scores and fitted statistics bitwise equal", True)
    swapped = indices.copy()
    swapped[1] = [3, 2]
    line, equal = compare((indices, {"scores": scores}), (swapped, {"scores": scores + np.float32(2**-10)}))
    assert not equal
    assert line == ("top-10 indices DIFFER (1 of 3 queries); "
                    "scores or fitted statistics differ by up to 0.000977")
    line, _ = compare((indices, {"scores": scores, "old_": with_nan}), (indices, {"scores": scores}))
    assert line == "top-10 indices equal; only one version has old_; scores and fitted statistics bitwise equal"


def test_versions_benchmark_refuses_a_version_that_imports_skqbnorm_by_name(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from bench_versions import absolute_imports

    (tmp_path / "sub").mkdir()
    (tmp_path / "__init__.py").write_text("from . import sub\n")
    (tmp_path / "sub" / "m.py").write_text(
        '"""\n    from skqbnorm import CSLS\n"""\nfrom . import m\n\n\ndef f():\n    import skqbnorm.metrics\n')
    assert absolute_imports(tmp_path) == ["sub/m.py:8"]
