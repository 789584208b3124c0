"""A sweep of bad and edge inputs over the public API and the command line.

Every case (see ``sweep_cases.py``) must end in one of:

- a sound result: no exception, the right shape and dtype, finite output from finite
  input, caller arrays and input files unchanged;
- a warning (any Warning but numpy's floating-point RuntimeWarnings: "overflow
  encountered in ...", which only show that an overflow leaked) with a sound result;
- a ValueError or TypeError whose message names the offending parameter and, for a
  shape problem, shows a shape.

Any other exception, a leaked numpy RuntimeWarning, a non-finite result from finite input
or a modified input fails. The command line must exit with status 0 or 2, print one
error line and no traceback, and leave its input files alone.
"""

import importlib.util
import re
import warnings

import numpy as np
import pytest
from sweep_cases import SHAPE_PATTERN, Ctx, all_cases
from sweep_cases_rerankers import neighborhood_reranker_cases
from threadpoolctl import threadpool_limits

pytestmark = pytest.mark.slow  # about 7,300 bad and edge inputs: not in the quick loop

CASES = all_cases() + neighborhood_reranker_cases()


def is_numpy_floating_point_warning(record):
    """numpy's overflow / invalid / divide-by-zero warnings ("... encountered in ...")."""
    return issubclass(record.category, RuntimeWarning) and "encountered in" in str(record.message)


def brief(error, limit=160):
    """``Type: message`` on one line, cut to ``limit`` characters."""
    text = f"{type(error).__name__}: {' '.join(str(error).split())}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def judge_error(case, error):
    """Problems with the ValueError/TypeError ``error`` as the answer to ``case``."""
    if case.expect == "ok":
        return [f"refused a valid input: {brief(error)}"]
    message = " ".join(str(error).split())
    problems = []
    if case.names and not any(
        re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message)
        for name in case.names
    ):
        problems.append(f"message names none of {case.names}: {brief(error)}")
    if case.shape and not re.search(SHAPE_PATTERN, message):
        problems.append(f"message shows no shape: {brief(error)}")
    return problems


def outcome(case, tmp_path):
    """The list of problems with running ``case``; empty when its outcome is acceptable."""
    ctx = Ctx(tmp_path, case.finite_in)
    problems = []
    with warnings.catch_warnings(record=True) as caught:
        ctx.caught = caught
        warnings.simplefilter("always")
        try:
            result = case.run(ctx)
        except (ValueError, TypeError) as error:
            if case.area == "cli":
                problems.append(f"escaped the CLI: {brief(error)}")
            else:
                problems += judge_error(case, error)
        except Exception as error:  # noqa: BLE001 (any other exception is a finding)
            problems.append(brief(error))
        else:
            try:
                case.check(result, ctx)
            except AssertionError as error:
                problems.append(f"unsound result: {' '.join(str(error).split())[:160]}")
            except Exception as error:  # noqa: BLE001 (a result the check cannot read)
                problems.append(f"unsound result ({brief(error)})")
            warned = [w for w in caught if not is_numpy_floating_point_warning(w)]
            if case.expect == "error" and not warned and not problems:
                problems.append("silently returned a result for invalid input")
    leaked = sorted({brief(w.category(str(w.message))) for w in caught
                     if is_numpy_floating_point_warning(w)})
    problems += [f"leaked {text}" for text in leaked]
    problems += ctx.changed()
    return problems


@pytest.fixture(scope="module", autouse=True)
def one_thread_per_pool():
    """On tiny arrays thread start-up dominates (sklearn's k-NN search takes ~70 ms on
    6 points on a busy machine); results must not depend on the thread count anyway."""
    with threadpool_limits(1):
        yield


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_sweep(case, tmp_path):
    problems = outcome(case, tmp_path)
    assert not problems, "; ".join(problems)


def test_sweep_is_large_enough():
    assert len(CASES) >= 500
    areas = {"normalizers", "rerankers", "metrics", "cli", "catalogue"}
    if importlib.util.find_spec("faiss") is not None:  # the optional extra
        areas.add("index")
    assert {case.area for case in CASES} == areas


def test_judge_rejects_an_unnamed_parameter():
    """The judge itself: a bare error or a silent result for a bad input fails."""
    from sweep_cases import Case

    def raise_plain(ctx):
        raise ValueError("bad value")

    plain = Case("metrics", "self-test", raise_plain, lambda r, c: None, ("k",), True, "error")
    assert len(outcome(plain, None)) == 2

    def overflow(ctx):
        return np.float64(1e308) * 10

    silent = Case("metrics", "self-test", overflow, lambda r, c: None, ("k",), False, "error")
    problems = outcome(silent, None)
    assert any("silently" in p for p in problems) and any("RuntimeWarning" in p for p in problems)
