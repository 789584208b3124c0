"""Mutation testing of skqbnorm's computational modules (a small runner, not run in CI).

Each mutant is one small change to one module: a flipped comparison, a swapped
arithmetic or bitwise operator, a dropped unary minus or ``not``, an integer constant
off by one, a flipped boolean, ``and``/``or``, ``min``/``max`` (and their numpy
relatives), ``axis=0``/``axis=1``. A mutant is *killed* when the module's test
selection fails on it, and *survives* when the tests still pass.

The working tree is copied once per job into a temporary folder (``git ls-files``:
tracked and untracked, unignored files, as they are now), so the repository itself is
never modified and later edits to it do not affect a run. Mutants are written into the
copies only, and pytest runs there with ``PYTHONPATH`` pointing at the copy (checked:
``skqbnorm.__file__`` must lie in the copy) and without bytecode caches.

Mutants proven equivalent are listed, each with its reason, in
``scripts/mutation_equivalent.txt`` as ``module :: line :: mutation :: reason``, where
``mutation`` is the key printed by ``--list`` and in the survivors' list
(``scope: original -> mutated``). An entry matches the mutant with the same module
and key (the nearest line wins among equal keys), so the list survives code moving.

Not mutated: strings, f-strings, ``raise`` statements and ``warnings.warn`` calls
(messages), annotations, decorators, default argument values and module-level
UPPER_CASE constants (tuning parameters whose values do not change results).

Usage::

    .venv/bin/python scripts/mutation_test.py --list --module _core/_trees
    .venv/bin/python scripts/mutation_test.py --module metrics/_hubness.py --jobs 2
    .venv/bin/python scripts/mutation_test.py --module _ranks --scope 'count_greater' \\
        --json /tmp/mutation.json
    .venv/bin/python scripts/mutation_test.py --rerun /tmp/mutation.json  # survivors again
    .venv/bin/python scripts/mutation_test.py              # every module of TEST_RULES

Score = (killed + timeout) / (mutants - equivalent); a hang is a detected mutant.
Exit status: 0, or 1 when some non-equivalent mutant survived.
"""

import argparse
import ast
import copy
import difflib
import fnmatch
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EQUIVALENT_FILE = REPO / "scripts" / "mutation_equivalent.txt"

#: Test files run against each module's mutants, after the module's own doctests and
#: before ``ALWAYS``: the first rule whose module glob matches wins. Test globs may use
#: ``{stem}``, the module's name without its underscore (``_sinkhorn`` -> ``sinkhorn``);
#: missing files are skipped. Fast files only (no notebooks, benchmarks, sweeps,
#: hypothesis properties or estimator checks).
NORMALIZER_TESTS = [
    "tests/normalizers/test_{stem}.py",
    "tests/normalizers/test_base.py",
    "tests/normalizers/test_softmax.py",
    "tests/normalizers/test_gc.py",
    "tests/test_numerics.py",
    "tests/test_validation.py",
    "tests/test_scale.py",
]
#: NNN, DN, the querybank z-norm and MP (once tests/test_later_normalisers.py).
COLUMN_STATISTICS_TESTS = [
    "tests/normalizers/test_column_statistics.py",
    "tests/normalizers/test_nnn.py",
    "tests/normalizers/test_mutual_proximity.py",
    "tests/normalizers/test_centering.py",
]
METRIC_TESTS = [
    "tests/metrics/test_{stem}.py",
    "tests/metrics/test_retrieval.py",
    "tests/metrics/test_hubness.py",
    "tests/metrics/test_hubness_from_counts.py",
    "tests/metrics/test_ranking.py",
    "tests/metrics/test_scorers.py",
]
RERANKER_TESTS = ["tests/rerankers/test_*.py"]
TEST_RULES = [
    # The later normalisers' tests too: MP, NNN and DBNorm use the core's moments, sorted
    # rows and columns and soft maxima.
    (
        "skqbnorm/_core/_[!_]*.py",
        [
            "tests/_core/test_*.py",
            "tests/test_top_k_search.py",
            *NORMALIZER_TESTS,
            *COLUMN_STATISTICS_TESTS,
            "tests/metrics/test_retrieval.py",
            "tests/metrics/test_hubness.py",
            "tests/test_dask.py",
        ],
    ),
    (
        "skqbnorm/_ranks.py",
        ["tests/test_ranks.py", *NORMALIZER_TESTS, *COLUMN_STATISTICS_TESTS],
    ),
    ("skqbnorm/_validation.py", [*METRIC_TESTS, *NORMALIZER_TESTS]),
    ("skqbnorm/normalizers/_base.py", [*NORMALIZER_TESTS, "tests/test_dask.py"]),
    # The base's serving half (transform, scores, top_k).
    ("skqbnorm/normalizers/_serving.py", [*NORMALIZER_TESTS, "tests/test_dask.py"]),
    ("skqbnorm/normalizers/_top_k.py", [*NORMALIZER_TESTS, "tests/test_top_k_search.py"]),
    ("skqbnorm/normalizers/_mutual_proximity.py", COLUMN_STATISTICS_TESTS),
    ("skqbnorm/normalizers/_nnn.py", COLUMN_STATISTICS_TESTS),
    # Used by DBNorm and Sinkhorn (gallery banks), tested through them.
    (
        "skqbnorm/normalizers/_gallery_bank.py",
        [
            *NORMALIZER_TESTS,
            "tests/normalizers/test_dbnorm.py",
            "tests/normalizers/test_sinkhorn.py",
            "tests/normalizers/test_dual_softmax.py",
            *COLUMN_STATISTICS_TESTS,
        ],
    ),
    # The gate and the index, by their own tests and the seams' (fitted with a gallery
    # bank, unfitted, closed, wrapping DBSN, served by an index).
    (
        "skqbnorm/normalizers/_querybank_gate.py",
        ["tests/normalizers/test_querybank_gate.py", "tests/test_index_edge_cases.py"],
    ),
    ("skqbnorm/index.py", ["tests/test_index.py", "tests/test_index_edge_cases.py"]),
    ("skqbnorm/normalizers/_*.py", NORMALIZER_TESTS),
    ("skqbnorm/metrics/_ranking.py", [*METRIC_TESTS, *RERANKER_TESTS]),
    ("skqbnorm/metrics/_scorers.py", [*METRIC_TESTS, "tests/test_model_selection.py"]),
    ("skqbnorm/metrics/_*.py", METRIC_TESTS),
    ("skqbnorm/rerankers/_*.py", RERANKER_TESTS),
]
#: Run for every module. The mutation guards that lived in tests/test_guards*.py now sit
#: in the test module of the unit each guards, which the rules above select.
ALWAYS = []
PYTEST_ARGS = ["-q", "-p", "no:cacheprovider", "--no-header", "-o", "console_output_style=classic"]

COMPARE_SWAPS = {
    ast.Lt: (ast.LtE, ast.GtE),
    ast.LtE: (ast.Lt, ast.Gt),
    ast.Gt: (ast.GtE, ast.LtE),
    ast.GtE: (ast.Gt, ast.Lt),
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
}
BINOP_SWAPS = {
    ast.Add: (ast.Sub,),
    ast.Sub: (ast.Add,),
    ast.Mult: (ast.Div,),
    ast.Div: (ast.Mult,),
    ast.FloorDiv: (ast.Div,),
    ast.Mod: (ast.FloorDiv,),
    ast.Pow: (ast.Mult,),
    ast.BitOr: (ast.BitAnd,),
    ast.BitAnd: (ast.BitOr,),
    ast.BitXor: (ast.BitOr,),
    ast.LShift: (ast.RShift,),
    ast.RShift: (ast.LShift,),
}
NAME_SWAPS = {
    "min": "max",
    "max": "min",
    "minimum": "maximum",
    "maximum": "minimum",
    "argmin": "argmax",
    "argmax": "argmin",
    "nanmin": "nanmax",
    "nanmax": "nanmin",
    "fmin": "fmax",
    "fmax": "fmin",
    "any": "all",
    "all": "any",
    "floor": "ceil",
    "ceil": "floor",
}


@dataclass
class Mutant:
    module: str
    index: int
    line: int
    scope: str
    original: str
    mutated: str
    source: str = field(repr=False)
    status: str = "pending"
    reason: str = ""
    diff: str = ""
    seconds: float = 0.0

    @property
    def key(self):
        return f"{self.scope}: {self.original} -> {self.mutated}"


# --------------------------------------------------------------------------- mutants


def _replacement_nodes(node, parent):
    """``(node, replacement)`` pairs for every mutation of ``node`` itself."""
    if isinstance(node, ast.Compare):
        for position, op in enumerate(node.ops):
            for new_op in COMPARE_SWAPS.get(type(op), ()):
                mutated = copy.deepcopy(node)
                mutated.ops[position] = new_op()
                yield node, mutated
    elif isinstance(node, ast.BinOp):
        for new_op in BINOP_SWAPS.get(type(node.op), ()):
            yield node, ast.BinOp(node.left, new_op(), node.right)
    elif isinstance(node, ast.AugAssign):
        for new_op in BINOP_SWAPS.get(type(node.op), ()):
            yield node, ast.AugAssign(node.target, new_op(), node.value)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not, ast.Invert)):
        if not (isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)):
            yield node, node.operand
    elif isinstance(node, ast.BoolOp):
        yield node, ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)
    elif isinstance(node, ast.Constant):
        yield from _constant_mutations(node, parent)
    elif isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in NAME_SWAPS:
            yield func, ast.Name(NAME_SWAPS[func.id], ast.Load())
        elif isinstance(func, ast.Attribute) and func.attr in NAME_SWAPS:
            yield func, ast.Attribute(func.value, NAME_SWAPS[func.attr], ast.Load())


def _constant_mutations(node, parent):
    value = node.value
    negative = isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub)
    target = parent if negative else node
    signed = -value if negative else value
    if isinstance(value, bool):
        yield node, ast.Constant(not value)
    elif isinstance(value, int):
        if isinstance(parent, ast.keyword) and parent.arg == "axis":
            yield node, ast.Constant({0: 1, 1: 0}.get(value, 0))
        else:
            for new in (signed + 1, signed - 1):
                yield target, ast.Constant(new)
    elif isinstance(value, float):
        yield target, ast.Constant(signed + 1.0)


class _SiteFinder(ast.NodeVisitor):
    """Walks a module and collects mutation sites with their enclosing scope."""

    def __init__(self):
        self.scopes = []
        self.sites = []  # (scope, node, replacement)

    def generic_visit(self, node):
        for child in ast.iter_child_nodes(node):
            child._parent = node
            if not self._skipped(child, node):
                self.visit(child)

    def visit(self, node):
        parent = getattr(node, "_parent", None)
        for child in ast.iter_child_nodes(node):
            child._parent = node
        for site, replacement in _replacement_nodes(node, parent):
            scope = ".".join(self.scopes) or "<module>"
            self.sites.append((scope, site, replacement, _in_context(site, replacement)))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.scopes.append(node.name)
            self.generic_visit(node)
            self.scopes.pop()
        else:
            self.generic_visit(node)

    @staticmethod
    def _skipped(child, parent):
        if isinstance(child, (ast.JoinedStr, ast.Raise)):
            return True
        if isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant):
            return True  # docstrings
        if isinstance(child, ast.Call) and _dotted(child.func).endswith("warn"):
            return True
        if isinstance(parent, ast.arguments) and child in (*parent.defaults, *parent.kw_defaults):
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return child in parent.decorator_list or child is getattr(parent, "returns", None)
        if isinstance(parent, (ast.arg, ast.AnnAssign)) and child is parent.annotation:
            return True
        if isinstance(child, ast.Assign) and isinstance(parent, ast.Module):
            names = [target.id for target in child.targets if isinstance(target, ast.Name)]
            return bool(names) and all(name.isupper() for name in names)
        return False


def _in_context(site, replacement):
    """``(original, mutated)`` as text; a lone constant or name shows its parent too."""
    context = site
    negative_constant = isinstance(site, ast.UnaryOp) and isinstance(site.operand, ast.Constant)
    if isinstance(site, (ast.Constant, ast.Name, ast.Attribute)) or negative_constant:
        context = getattr(site, "_parent", site)
        if isinstance(context, ast.UnaryOp) and site is not context:
            context = getattr(context, "_parent", context)
    original = ast.unparse(context)
    holder = getattr(site, "_parent", None)
    if context is site or holder is None:
        return original, ast.unparse(replacement)
    for name, value in ast.iter_fields(holder):
        if value is site:
            setattr(holder, name, replacement)
            mutated = ast.unparse(context)
            setattr(holder, name, site)
            return original, mutated
        if isinstance(value, list) and any(item is site for item in value):
            position = next(i for i, item in enumerate(value) if item is site)
            value[position] = replacement
            mutated = ast.unparse(context)
            value[position] = site
            return original, mutated
    return original, ast.unparse(replacement)


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _char_offset(line, byte_offset):
    return len(line.encode()[:byte_offset].decode())


def _replace_segment(source, node, text):
    lines = source.splitlines(keepends=True)
    first, last = node.lineno - 1, node.end_lineno - 1
    start = _char_offset(lines[first], node.col_offset)
    end = _char_offset(lines[last], node.end_col_offset)
    return (
        "".join(lines[:first])
        + lines[first][:start]
        + text
        + lines[last][end:]
        + "".join(lines[last + 1 :])
    )


def _changed_lines(source, mutated):
    diff = difflib.unified_diff(source.splitlines(), mutated.splitlines(), lineterm="", n=0)
    return "\n".join(line for line in diff if not line.startswith(("---", "+++", "@@")))


def generate_mutants(module, source):
    """Every mutant of ``source``, in source order."""
    finder = _SiteFinder()
    finder.visit(ast.parse(source))
    mutants, seen = [], set()
    for scope, node, replacement, (original, shown) in sorted(
        finder.sites, key=lambda site: (site[1].lineno, site[1].col_offset)
    ):
        text = ast.unparse(replacement)
        is_statement = isinstance(node, ast.stmt)
        mutated = _replace_segment(source, node, text if is_statement else f"({text})")
        if mutated == source or mutated in seen:
            continue
        try:
            ast.parse(mutated)
        except SyntaxError:
            continue
        seen.add(mutated)
        mutants.append(
            Mutant(
                module=module,
                index=len(mutants),
                line=node.lineno,
                scope=scope,
                original=" ".join(original.split()),
                mutated=" ".join(shown.split()),
                source=mutated,
                diff=_changed_lines(source, mutated),
            )
        )
    return mutants


# ------------------------------------------------------------------------ equivalents


def read_equivalents(path):
    """Entries ``(module, line, key, reason)``; a missing reason is an error."""
    if not path.exists():
        return []
    entries = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = [part.strip() for part in raw.split(" :: ")]
        if len(parts) != 4 or not parts[3]:
            sys.exit(f"{path}:{number}: expected 'module :: line :: mutation :: reason'")
        entries.append((parts[0], int(parts[1]), parts[2], parts[3]))
    return entries


def mark_equivalents(mutants, entries):
    """Mark the mutants the allow-list names; return the entries that matched none."""
    stale = []
    for module, line, key, reason in entries:
        candidates = [
            m for m in mutants if m.module == module and m.key == key and m.status == "pending"
        ]
        if not candidates:
            stale.append((module, line, key))
            continue
        match = min(candidates, key=lambda mutant: abs(mutant.line - line))
        match.status, match.reason = "equivalent", reason
    return stale


# ---------------------------------------------------------------------------- running


def snapshot(destination):
    """Copy the working tree's tracked and unignored files to ``destination``."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def test_environment(root):
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(root),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONHASHSEED="0",
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    return env


def check_imports_copy(root):
    found = subprocess.run(
        [sys.executable, "-c", "import skqbnorm; print(skqbnorm.__file__)"],
        cwd=root,
        env=test_environment(root),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to(root.resolve()):
        sys.exit(f"the copy at {root} imports skqbnorm from {found}, not from the copy")


def run_pytest(root, arguments, timeout):
    """``(returncode or None on timeout, seconds, output)``."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", *PYTEST_ARGS, *arguments],
        cwd=root,
        env=test_environment(root),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
        returncode = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        returncode = None
    return returncode, time.perf_counter() - start, output


def rule_tests(module):
    """The test globs of the first rule matching ``module``, ``{stem}`` filled in."""
    stem = Path(module).stem.lstrip("_")
    for pattern, tests in TEST_RULES:
        if fnmatch.fnmatch(module, pattern):
            return [test.format(stem=stem) for test in tests]
    return []


def test_files(module, root, extra):
    # The module's own tests before ALWAYS: pytest -x stops a killed mutant's run at
    # its first failure, which they reach sooner.
    patterns = [module, *(extra if extra is not None else rule_tests(module)), *ALWAYS]
    files = []
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            name = str(path.relative_to(root))
            if name not in files:
                files.append(name)
    return files


def clean_run(module, root, files):
    """Run the selection on the unmutated copy; deselect the tests that fail there."""
    returncode, seconds, output = run_pytest(root, [*files, "-rf"], timeout=1800)
    failing = re.findall(r"^FAILED (\S+)", output, flags=re.MULTILINE)
    if returncode not in (0, 1) or (returncode == 1 and not failing):
        sys.exit(f"the clean run of {module}'s tests does not pass:\n{output[-4000:]}")
    if failing:
        print(f"  {module}: {len(failing)} test(s) fail without mutation, deselected:")
        for node in failing:
            print(f"    {node}")
    return seconds, [argument for node in failing for argument in ("--deselect", node)]


def classify(returncode):
    if returncode is None:
        return "timeout"
    if returncode == 0:
        return "survived"
    if returncode in (1, 2):  # failures, or an error while collecting (e.g. on import)
        return "killed"
    return "error"


#: Run in one long-lived process per copy: it imports the heavy dependencies once, then
#: forks a child per mutant that runs pytest (and imports the mutated skqbnorm afresh).
SERVER = r"""
import importlib, json, os, signal, sys, time
for name in ("numpy", "scipy.sparse", "scipy.stats", "scipy.special", "sklearn.utils",
             "sklearn.base", "sklearn.metrics", "sklearn.neighbors", "sklearn.cluster",
             "sklearn.model_selection", "joblib", "osqp", "hypothesis", "pytest", "_pytest.doctest"):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
assert "skqbnorm" not in sys.modules, "the server must not import skqbnorm"
import pytest
for line in sys.stdin:
    request = json.loads(line)
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(log, 1)
        os.dup2(log, 2)
        try:
            code = int(pytest.main(request["args"]))
        except BaseException:
            code = 3
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    returncode = None
    while time.perf_counter() - start < request["timeout"]:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            returncode = os.waitstatus_to_exitcode(status)
            break
        time.sleep(0.02)
    else:
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    print(json.dumps({"returncode": returncode, "seconds": time.perf_counter() - start}),
          flush=True)
"""


class ForkServer:
    """A preloaded Python process in ``root`` that runs pytest in forked children."""

    def __init__(self, root):
        self.root = root
        self.log = root / ".mutation-log.txt"
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            cwd=root,
            env=test_environment(root),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, arguments, timeout):
        """``(returncode or None on timeout, seconds, output)``, as ``run_pytest``."""
        request = {"args": [*PYTEST_ARGS, *arguments], "timeout": timeout, "log": str(self.log)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            sys.exit(f"the test server in {self.root} died")
        answer = json.loads(answer)
        output = self.log.read_text(errors="replace") if self.log.exists() else ""
        return answer["returncode"], answer["seconds"], output

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def plain_runner(root):
    """A runner with ForkServer's interface that starts a fresh interpreter every time."""

    class Plain:
        def run(self, arguments, timeout):
            return run_pytest(root, arguments, timeout)

        def close(self):
            pass

    return Plain()


def run_mutants(mutants, runners, arguments, timeout, progress, deadline):
    """Run the mutants; from ``deadline`` (a perf_counter time) or Ctrl-C on, start no
    more of them (those stay ``pending``) and let the running ones finish."""
    free = queue.Queue()
    for root, runner in runners:
        free.put((root, runner))
    stop = threading.Event()

    def run_one(mutant):
        if stop.is_set() or time.perf_counter() > deadline:
            return mutant
        root, runner = free.get()
        path = root / mutant.module
        original = path.read_text()
        try:
            path.write_text(mutant.source)
            returncode, mutant.seconds, output = runner.run(["-x", *arguments], timeout)
            mutant.status = classify(returncode)
            if mutant.status == "error":
                mutant.reason = output[-2000:]
        finally:
            path.write_text(original)
            free.put((root, runner))
        progress(mutant)
        return mutant

    pool = ThreadPoolExecutor(max_workers=len(runners))
    futures = [pool.submit(run_one, mutant) for mutant in mutants]
    try:
        for future in futures:
            future.result()
    except KeyboardInterrupt:
        print("interrupted: finishing the running mutants, starting no more", flush=True)
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------------------- reports


def summarise(mutants):
    statuses = ("killed", "timeout", "survived", "equivalent", "error", "pending")
    counts = dict.fromkeys(statuses, 0)
    for mutant in mutants:
        counts[mutant.status] += 1
    counted = len(mutants) - counts["equivalent"] - counts["pending"]
    detected = counts["killed"] + counts["timeout"]
    counts["mutants"] = len(mutants)
    counts["score"] = detected / counted if counted else 1.0
    return counts


def print_table(rows):
    header = f"{'module':38} {'mutants':>7} {'killed':>6} {'timeout':>7} {'survived':>8} "
    header += f"{'equiv':>5} {'error':>5} {'not run':>7} {'score':>7} {'seconds':>7}"
    print(header)
    print("-" * len(header))
    for module, counts, seconds in rows:
        print(
            f"{module:38} {counts['mutants']:7d} {counts['killed']:6d} {counts['timeout']:7d} "
            f"{counts['survived']:8d} {counts['equivalent']:5d} {counts['error']:5d} "
            f"{counts['pending']:7d} "
            f"{counts['score']:7.1%} {seconds:7.0f}"
        )


def print_survivors(mutants):
    for mutant in mutants:
        if mutant.status in ("survived", "error"):
            print(f"\n{mutant.module}:{mutant.line}  [{mutant.status}]  {mutant.key}")
            print(mutant.diff)


# ------------------------------------------------------------------------------- main


def parse_arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--module",
        action="append",
        help="restrict to modules whose path contains this (repeatable)",
    )
    parser.add_argument("--scope", help="regex: only mutants in matching functions/classes")
    parser.add_argument("--only", help="comma-separated mutant indices (with one --module)")
    parser.add_argument(
        "--rerun", type=Path, help="only the mutants that survived in this earlier --json report"
    )
    parser.add_argument("--jobs", type=int, default=1, help="mutants run in parallel (default 1)")
    parser.add_argument(
        "--timeout-factor", type=float, default=3.0, help="per-mutant timeout / clean run time"
    )
    parser.add_argument(
        "--tests",
        nargs="+",
        help="test files (globs) to run instead of the module's TEST_RULES entry",
    )
    parser.add_argument(
        "--min-timeout", type=float, default=60.0, help="per-mutant timeout floor, s (default 60)"
    )
    parser.add_argument(
        "--no-fork", action="store_true", help="a fresh interpreter per mutant (slower)"
    )
    parser.add_argument(
        "--max-minutes",
        type=float,
        help="start no mutant after this many minutes (the rest are reported as not run)",
    )
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--json", type=Path, help="write every mutant's result to this file")
    parser.add_argument(
        "--equivalent",
        type=Path,
        default=EQUIVALENT_FILE,
        help="allow-list of proven-equivalent mutants (default scripts/mutation_equivalent.txt)",
    )
    return parser.parse_args(argv)


def selected_modules(root, patterns):
    """The modules of ``TEST_RULES`` present under ``root`` (package ``__init__`` aside)."""
    modules = []
    for pattern, _ in TEST_RULES:
        for path in sorted(root.glob(pattern)):
            name = path.relative_to(root).as_posix()
            if name not in modules:
                modules.append(name)
    if patterns:
        modules = [module for module in modules if any(p in module for p in patterns)]
    if not modules:
        sys.exit(f"no module of TEST_RULES matches {patterns}")
    return modules


def select_mutants(mutants, args):
    if args.scope:
        mutants = [m for m in mutants if re.search(args.scope, m.scope)]
    if args.rerun:
        previous = json.loads(args.rerun.read_text())["mutants"]
        alive = {(m["module"], m["key"]) for m in previous if m["status"] in ("survived", "error")}
        mutants = [m for m in mutants if (m.module, m.key) in alive]
    if args.only:
        wanted = {int(index) for index in args.only.split(",")}
        mutants = [m for m in mutants if m.index in wanted]
    return mutants


def main(argv=None):
    args = parse_arguments(argv)
    started = time.perf_counter()
    args.deadline = started + 60 * args.max_minutes if args.max_minutes else float("inf")
    entries = read_equivalents(args.equivalent)
    with tempfile.TemporaryDirectory(prefix="skqbnorm-mutation-") as temporary:
        roots = [Path(temporary) / f"copy{job}" for job in range(max(1, args.jobs))]
        for root in roots:
            snapshot(root)
        modules = selected_modules(roots[0], args.module)
        all_mutants, rows = [], []
        for module in modules:
            source = (roots[0] / module).read_text()
            mutants = generate_mutants(module, source)
            stale = mark_equivalents(mutants, [e for e in entries if e[0] == module])
            mutants = select_mutants(mutants, args)
            if args.list:
                for mutant in mutants:
                    note = f"  [equivalent: {mutant.reason}]" if mutant.reason else ""
                    print(f"{module} #{mutant.index} line {mutant.line}: {mutant.key}{note}")
                continue
            for module_, line, key in stale:
                print(f"  stale allow-list entry: {module_} :: {line} :: {key}")
            all_mutants.extend(mutants)
            if time.perf_counter() > args.deadline:
                rows.append((module, summarise(mutants), 0.0))
                continue
            try:
                rows.append(run_module(module, mutants, roots, args))
            except KeyboardInterrupt:
                rows.append((module, summarise(mutants), float("nan")))
                break
    if args.list:
        return 0
    print()
    print_table(rows)
    survivors = [m for m in all_mutants if m.status in ("survived", "error")]
    if survivors:
        print(f"\n{len(survivors)} surviving (or erroring) mutants:")
        print_survivors(all_mutants)
    if args.json:
        report = {
            "modules": {module: {**counts, "seconds": seconds} for module, counts, seconds in rows},
            "mutants": [
                {**{k: v for k, v in asdict(m).items() if k != "source"}, "key": m.key}
                for m in all_mutants
            ],
        }
        args.json.write_text(json.dumps(report, indent=1))
    return 1 if survivors else 0


def run_module(module, mutants, roots, args):
    start = time.perf_counter()
    for root in roots:
        check_imports_copy(root)
    files = test_files(module, roots[0], args.tests)
    clean_seconds, deselect = clean_run(module, roots[0], files)
    timeout = max(args.min_timeout, args.timeout_factor * clean_seconds)
    pending = [m for m in mutants if m.status == "pending"]
    print(
        f"{module}: {len(pending)} mutants to run ({len(mutants) - len(pending)} equivalent), "
        f"clean run {clean_seconds:.1f} s, timeout {timeout:.0f} s, tests: {' '.join(files)}",
        flush=True,
    )
    done = [0]

    def progress(mutant):
        done[0] += 1
        marker = "" if mutant.status == "killed" else f"  <- {mutant.status}: {mutant.key}"
        print(
            f"  [{done[0]}/{len(pending)}] #{mutant.index} line {mutant.line}{marker}", flush=True
        )

    arguments = [*files, *deselect]
    make_runner = plain_runner if args.no_fork else ForkServer
    runners = [(root, make_runner(root)) for root in roots]
    try:
        for root, runner in runners:
            returncode, _, output = runner.run(arguments, timeout=1800)
            if returncode != 0:
                sys.exit(f"the tests fail in the runner of {root}:\n{output[-4000:]}")
        run_mutants(pending, runners, arguments, timeout, progress, args.deadline)
    finally:
        for _, runner in runners:
            runner.close()
    return module, summarise(mutants), time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
