"""Every warning points at the caller's line, whichever path reaches it.

A warning attributed to a line inside skqbnorm or scikit-learn is no help: the user
must see which of their calls produced it, and a ``-W error::...:this_module`` filter
must be able to select it.
"""

import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from skqbnorm import (
    DualBankSinkhornNormalization,
    HingeReranker,
    InvertedSoftmax,
    SinkhornNormalization,
)
from skqbnorm.metrics import QueryBankWarning, querybank_diagnostics


def bank_and_cross(rng):
    bank = rng.normal(size=(60, 12)) * 0.2 + 0.3
    return bank, rng.normal(size=(60, 9)) * 0.2 + 0.3


def no_score(estimator, X, y=None):
    return 0.0


def caught(category, call):
    """The warnings of ``category`` that ``call()`` issues (at least one)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        call()
    found = [warning for warning in record if issubclass(warning.category, category)]
    assert found, f"no {category.__name__}"
    return found


@pytest.mark.parametrize(
    "path",
    ["fit", "fit_transform", "pipeline", "grid_search", "dbsn_fit_transform", "dbsn_gallery_bank"],
)
def test_sinkhorn_convergence_warning(rng, path):
    bank, cross = bank_and_cross(rng)
    sn = SinkhornNormalization(tau=0.01, n_iter=2)
    dbsn = DualBankSinkhornNormalization(tau=0.01, n_iter=2)
    calls = {
        "fit": lambda: sn.fit(bank),
        "fit_transform": lambda: sn.fit_transform(bank),
        "pipeline": lambda: make_pipeline(sn).fit(bank),
        "grid_search": lambda: GridSearchCV(sn, {"n_iter": [2]}, cv=2, scoring=no_score).fit(bank),
        "dbsn_fit_transform": lambda: dbsn.fit_transform(bank),
        "dbsn_gallery_bank": lambda: dbsn.fit_transform(bank, querybank_to_gallery_bank=cross),
    }
    for warning in caught(ConvergenceWarning, calls[path]):
        assert warning.filename == __file__, (path, warning.filename, warning.lineno)


def test_probability_overflow_warning_from_transform_and_top_k(rng):
    bank = rng.normal(size=(40, 5)).astype(np.float32)
    normalizer = InvertedSoftmax(beta=100.0, output="probability").fit(bank)
    queries = bank.max(axis=0, keepdims=True) + np.float32(2)  # exp(200) overflows float32
    for call in (lambda: normalizer.transform(queries), lambda: normalizer.top_k(queries, k=2)):
        for warning in caught(RuntimeWarning, call):
            assert warning.filename == __file__


def test_querybank_diagnostics_warning(rng):
    bank = rng.normal(size=(30, 40))
    queries = rng.normal(size=(30, 40)) + 3.0 * (np.arange(40) >= 20)  # another top-1 region
    for warning in caught(QueryBankWarning, lambda: querybank_diagnostics(bank, queries)):
        assert warning.filename == __file__


def test_reranker_warnings_from_fit_and_fit_predict(rng):
    features = np.r_[rng.normal(0, 0.3, size=(20, 2)), rng.normal(3, 0.3, size=(20, 2))]
    initial = rng.normal(size=40)
    # c=1e3: the QP, not the closed form, solves it, and stops after 3 iterations.
    reranker = HingeReranker(c=1e3, max_iter=3, eps_abs=1e-12, eps_rel=1e-12)
    for call in (lambda: reranker.fit(features, initial), lambda: reranker.fit_predict(features, initial)):
        for warning in caught(ConvergenceWarning, call):
            assert warning.filename == __file__
    isolated = HingeReranker(sigma=1e-300)  # every affinity underflows
    for warning in caught(UserWarning, lambda: isolated.fit(features, initial)):
        assert warning.filename == __file__


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_reranker_warnings_reach_the_caller_from_worker_processes(rng, n_jobs):
    # Each list is reranked by a joblib worker (another process for n_jobs=2), whose
    # own warnings never reached the caller: fit reports every list that stopped short.
    features = np.r_[rng.normal(0, 0.3, size=(20, 2)), rng.normal(3, 0.3, size=(20, 2))]
    features = np.r_[features, features]
    initial = rng.normal(size=80)
    groups = np.repeat(["a", "b"], 40)
    reranker = HingeReranker(c=1e3, max_iter=3, eps_abs=1e-12, eps_rel=1e-12, n_jobs=n_jobs)
    found = caught(ConvergenceWarning, lambda: reranker.fit(features, initial, groups=groups))
    assert len(found) == 1 and found[0].filename == __file__
    assert ("OSQP stopped with status 'maximum iterations reached' after 3 iterations on 2 of 2 "
            "lists (groups 'a', 'b')") in str(found[0].message)
    assert list(reranker.solver_status_) == ["maximum iterations reached"] * 2


def test_warnings_from_the_jobs_threads_point_at_the_caller(rng):
    # A job's thread never leaves the library: its warning names the main thread's
    # caller, which waits on the jobs (it named multiprocessing/pool.py).
    bank = rng.normal(size=(40, 50)).astype(np.float32)
    normalizer = InvertedSoftmax(beta=100.0, output="probability", n_jobs=2, working_memory=0.001)
    normalizer.fit(bank)
    queries = np.repeat(bank.max(axis=0, keepdims=True) + np.float32(2), 20, axis=0)
    for call in (lambda: normalizer.transform(queries), lambda: normalizer.top_k(queries, k=2)):
        found = caught(RuntimeWarning, call)
        assert {warning.filename for warning in found} == {__file__}


def test_warnings_from_the_jobs_threads_of_a_caller_in_another_thread(rng):
    # The caller is a user's thread, not the main one (which waits in join()).
    bank = rng.normal(size=(40, 50)).astype(np.float32)
    normalizer = InvertedSoftmax(beta=100.0, output="probability", n_jobs=2, working_memory=0.001)
    normalizer.fit(bank)
    queries = np.repeat(bank.max(axis=0, keepdims=True) + np.float32(2), 20, axis=0)
    lines = []

    def serve():
        lines.append(sys._getframe().f_lineno + 1)
        normalizer.transform(queries)

    def in_a_thread():
        worker = threading.Thread(target=serve)
        worker.start()
        worker.join()

    found = caught(RuntimeWarning, in_a_thread)
    assert {(warning.filename, warning.lineno) for warning in found} == {(__file__, lines[0])}


@pytest.mark.slow
def test_a_warning_under_python_c_does_not_fail():
    # Where __main__ has no source file (python -c, stdin, the REPL), attributing the
    # warning there must not ask its loader for source (an ImportError).
    code = ("import numpy as np; from skqbnorm import PointwiseReranker; "
            "rng = np.random.default_rng(0); "
            "PointwiseReranker(sigma=1e-10).fit(rng.normal(size=(20, 3)), np.arange(20.0)); "
            "print('fitted')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "fitted\n"
    assert done.stderr.startswith("<string>:1: UserWarning: sigma=1e-10 is so small")


def test_probability_overflow_warns_once_per_call_not_once_per_block(rng):
    bank = rng.normal(size=(40, 50)).astype(np.float32)
    normalizer = InvertedSoftmax(beta=100.0, output="probability", working_memory=0.001).fit(bank)
    queries = np.repeat(bank.max(axis=0, keepdims=True) + np.float32(2), 40, axis=0)  # many blocks
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("default")
        normalizer.transform(queries)
    assert len([warning for warning in record if issubclass(warning.category, RuntimeWarning)]) == 1
