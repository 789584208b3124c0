"""The k-reciprocal reranker (skqbnorm.rerankers._kreciprocal) against the dense reference
written from the paper's formulas (tests/reference_rerankers.py)."""

import numpy as np
import pytest
from reference_rerankers import k_reciprocal, node_similarities

from skqbnorm import KReciprocalReranker

from helpers import clustered_list, same_ranking


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k1, k2, lambda_value", [(20, 6, 0.3), (5, 1, 0.3), (7, 3, 0.0),
                                                  (3, 2, 1.0), (60, 10, 0.5)])
def test_k_reciprocal_equals_the_dense_reference(seed, k1, k2, lambda_value):
    features, initial, _ = clustered_list(seed)
    scores = KReciprocalReranker(k1, k2, lambda_value).fit_predict(features, initial)
    expected = -k_reciprocal(2 - 2 * node_similarities(features, initial), k1, k2, lambda_value)
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-8)
    assert same_ranking(scores, expected)


@pytest.mark.slow
def test_kreciprocal_benchmark_script_runs_without_the_published_function():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[2] / "benchmarks" / "bench_kreciprocal.py"
    result = subprocess.run(
        [sys.executable, str(script), "--n-items", "300", "--n-features", "8", "--published",
         str(Path(__file__).parent / "no_such_file.py"), "--published-sizes"],
        capture_output=True, text=True, timeout=300, check=False, cwd=script.parent,
    )
    assert result.returncode == 0, result.stderr
    assert "skqbnorm (sparse)" in result.stdout and "published re_ranking: not given" in result.stdout
