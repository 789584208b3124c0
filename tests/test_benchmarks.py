"""The benchmark scripts still run (at tiny sizes: timings are not asserted here)."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"


@pytest.mark.parametrize("script, args", [
    ("run.py", ["--scale", "0.02", "--repeat", "1"]),
    ("bench_normalisers.py", ["--bank", "300", "--gallery", "200", "--queries", "50", "--repeat", "1"]),
])
def test_benchmark_script_runs(script, args):
    result = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "DynamicInvertedSoftmax" in result.stdout or "DIS" in result.stdout
