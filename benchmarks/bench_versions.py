"""This checkout's fits and top_k against another commit's, interleaved in one process.

Separate runs of ``bench_floor.py`` on a shared machine swing with its load; here both
versions run in the same process, on the same data, in the same rounds. The other
commit's ``skqbnorm`` folder is extracted with ``git archive`` into a temporary
directory and imported under another name (the package imports itself relatively).
The cases are ``bench_floor.py``'s, built by its own functions, at ``--scale`` of its
sizes:

a. fits from embeddings (IS, DIS, CSLS, NNN, Centering), ``n_jobs=1`` and ``n_jobs=-1``;
b. ``top_k(queries=Q, k=10)`` of DIS, CSLS and NNN, with scores and without;
c. IS and DIS fits on a precomputed bank.

First each case runs once in each version and the results are compared: the top-10
indices of the queries (for a fit, from the fitted normaliser), and the scores or
fitted statistics, bitwise or by how much they differ. Then, in each of ``--rounds``
rounds, the cases run in a shuffled order, the two versions of a case one after the
other in a random order, each timed by the wall clock and by the process's CPU time
(every thread's). The table gives each case's fastest time in each version and the
geometric mean over the rounds of the new / old ratio, with a 95% paired bootstrap
interval (:func:`skqbnorm.metrics.paired_mean_change` on the logarithms): one slow
spell of the machine slows both versions of a round, and cancels in the ratio.

Run (from anywhere in the repository's git checkout):

    python benchmarks/bench_versions.py --against 26c4378 --scale 0.5 --rounds 20   (about 10 minutes on 2 cores)
    python benchmarks/bench_versions.py --against HEAD --cases "b. *"                (the searches only)
    python benchmarks/bench_versions.py --against HEAD --scale 0.01 --rounds 2      (a quick smoke run)
"""

import argparse
import ast
import importlib
import io
import subprocess
import sys
import tarfile
import tempfile
import time
from fnmatch import fnmatch
from functools import partial
from pathlib import Path

import numpy as np
from bench_floor import (
    EXP_SIZE,
    embedding_sets,
    fit_functions,
    fitters,
    scaled,
    search_functions,
    searched,
    similarity_bank,
)
from sklearn.base import clone

import skqbnorm
from skqbnorm.metrics import paired_mean_change

from _timing import load_average, machine_description

REPOSITORY = Path(__file__).resolve().parents[1]
#: Query rows of a precomputed bank whose top 10 are compared between the versions.
CHECKED_ROWS = 1000


def import_commit(commit, folder):
    """The ``skqbnorm`` package of ``commit``, extracted into ``folder`` and imported
    as ``skqbnorm_<commit id>``; returns ``(module, full commit id)``."""
    commit_id = git("rev-parse", "--verify", f"{commit}^{{commit}}").decode().strip()
    archive = git("archive", "--format=tar", commit_id, "skqbnorm")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        # the "data" filter (Python 3.10.12+) refuses links and paths out of the folder
        tar.extractall(folder, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    name = f"skqbnorm_{commit_id[:12]}"
    (Path(folder) / "skqbnorm").rename(Path(folder) / name)
    absolute = absolute_imports(Path(folder) / name)
    if absolute:  # the other version would run this checkout's code under its name
        raise SystemExit(f"{name} imports skqbnorm by name ({', '.join(absolute[:3])}): cannot compare.")
    sys.path.insert(0, str(folder))
    return importlib.import_module(name), commit_id


def absolute_imports(package):
    """``file:line`` of each statement in ``package`` that imports ``skqbnorm`` by name
    (code, not docstrings), wherever it stands: a module's top or a function's body."""
    return [f"{path.relative_to(package)}:{node.lineno}"
            for path in sorted(package.rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if any(name == "skqbnorm" or name.startswith("skqbnorm.") for name in imported(node))]


def imported(node):
    """The absolute module names an import statement names (none for other nodes)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0:
        return [node.module or ""]
    return []


def git(*args):
    """``git args`` run in this repository; its standard output, as bytes."""
    result = subprocess.run(["git", "-C", str(REPOSITORY), *args], capture_output=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {result.stderr.decode().strip() or result.returncode}")
    return result.stdout


def embedding_cases(package, bank, gallery, queries, k, wanted):
    """Sections a and b of ``bench_floor.py`` at one size, from ``package``:
    ``{case: (function, check)}``, where ``check(result)`` gives what is compared."""
    label = f"{len(bank):,} x {len(gallery):,}"
    cases = {}
    for name, fit in fit_functions(fitters(k, package), bank, gallery).items():
        cases[f"a. {name} · {label}"] = (fit, lambda fitted: fitted_results(fitted, queries=queries))
    search_names = {f"b. {name} · {len(queries):,} queries": name
                    for name in search_functions(searched(fitters(k)), queries)}
    if any(wanted(case) for case in search_names):
        fitted = {name: clone(estimator).fit(bank, gallery=gallery)
                  for name, estimator in searched(fitters(k, package)).items()}
        functions = search_functions(fitted, queries)
        for case, name in search_names.items():
            cases[case] = (functions[name], search_results)
    return {case: pair for case, pair in cases.items() if wanted(case)}


def precomputed_cases(package, bank, wanted):
    """Section c of ``bench_floor.py``: IS and DIS fits on a precomputed bank."""
    label = f"precomputed {len(bank):,} x {len(bank):,}"
    query_rows = bank[:CHECKED_ROWS]
    cases = {
        f"c. {name} · {label}": (partial(estimator.fit, bank), lambda fitted: fitted_results(fitted, X=query_rows))
        for name, estimator in (("IS", package.InvertedSoftmax()), ("DIS", package.DynamicInvertedSoftmax()))
    }
    return {case: pair for case, pair in cases.items() if wanted(case)}


def fitted_results(fitted, **query):
    """A fitted normaliser's top-10 indices of the checked queries, and its fitted arrays."""
    statistics = {key: value for key, value in vars(fitted).items()
                  if key.endswith("_") and not key.startswith("_") and isinstance(value, np.ndarray)}
    return fitted.top_k(**query, k=10, return_scores=False), statistics


def search_results(result):
    """A search's top-10 indices, and its scores if it returned them."""
    return (result[0], {"scores": result[1]}) if isinstance(result, tuple) else (result, {})


def draw_data(scale, dims):
    """The embeddings at each size and the precomputed bank, drawn as ``bench_floor.py`` draws them."""
    rng = np.random.default_rng(0)
    embeddings = list(embedding_sets(scale, dims, rng))
    return embeddings, similarity_bank(scaled(EXP_SIZE, scale), rng)


def all_cases(package, data, k, wanted):
    """Every wanted case of ``package`` on ``data`` (from :func:`draw_data`)."""
    embeddings, similarities = data
    cases = {}
    for bank, gallery, queries in embeddings:
        cases |= embedding_cases(package, bank, gallery, queries, min(k, len(bank), len(gallery)), wanted)
    return cases | precomputed_cases(package, similarities, wanted)


def compare(old, new):
    """One line on how ``old``'s results and ``new``'s, each ``(indices, arrays)``, agree,
    and whether the indices are equal."""
    (old_indices, old_arrays), (new_indices, new_arrays) = old, new
    indices_equal = np.array_equal(old_indices, new_indices)
    if indices_equal:
        line = "top-10 indices equal"
    else:
        differing = np.any(old_indices != new_indices, axis=1).sum() if old_indices.shape == new_indices.shape else "all"
        line = f"top-10 indices DIFFER ({differing} of {len(old_indices)} queries)"
    unmatched = sorted(set(old_arrays) ^ set(new_arrays))
    if unmatched:
        line = f"{line}; only one version has {', '.join(unmatched)}"
    shared = sorted(set(old_arrays) & set(new_arrays))
    if any(old_arrays[name].shape != new_arrays[name].shape for name in shared):
        return f"{line}; scores or fitted statistics of different shapes", False
    if all(np.array_equal(old_arrays[name], new_arrays[name], equal_nan=True) for name in shared):
        return f"{line}; scores and fitted statistics bitwise equal", indices_equal
    largest = max(float(np.nanmax(np.abs(old_arrays[name].astype(np.float64) - new_arrays[name]), initial=0.0))
                  for name in shared)
    return f"{line}; scores or fitted statistics differ by up to {largest:.3g}", indices_equal


def timed(function):
    """``function()``'s wall-clock and CPU seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    function()
    return time.perf_counter() - wall, time.process_time() - cpu


def interleaved_pairs(pairs, rounds, rng):
    """``{case: array of shape (rounds, 2 versions, 2 clocks)}``: each round runs the cases
    in a shuffled order, the two versions of each in a random order."""
    times = {case: np.empty((rounds, 2, 2)) for case in pairs}
    names = list(pairs)
    for round_ in range(rounds):
        for case in rng.permutation(names):
            for version in rng.permutation(2):
                times[case][round_, version] = timed(pairs[case][version])
    return times


def geometric_mean_ratio(old, new):
    """``new / old``'s geometric mean over the rounds and its 95% paired bootstrap interval, as text."""
    # a clock's tick may read 0 s for a tiny case: floor at 1 ns so that the logarithm is finite
    old, new = np.log(np.maximum(old, 1e-9)), np.log(np.maximum(new, 1e-9))
    change = paired_mean_change(old, new, random_state=0)
    return f"{np.exp(change.change):.3f} [{np.exp(change.low):.3f}, {np.exp(change.high):.3f}]"


def report(times, equal):
    print("\n| case | indices equal | old min s | new min s | new / old wall [95%] "
          "| old min CPU s | new min CPU s | new / old CPU [95%] |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for case, t in times.items():
        cells = [case, "yes" if equal[case] else "NO"]
        for clock in (0, 1):
            old, new = t[:, 0, clock], t[:, 1, clock]
            cells += [f"{old.min():.4f}", f"{new.min():.4f}", geometric_mean_ratio(old, new)]
        print("| " + " | ".join(cells) + " |")


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True,
                        help="the other commit (any name git knows: a hash, a tag, HEAD~3)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size of bench_floor.py by this")
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds, each running every case once a version")
    parser.add_argument("--cases", nargs="+", default=["*"], metavar="PATTERN",
                        help='shell patterns of the case names to run, e.g. "a. *" (fits from embeddings), '
                             '"b. *" (searches), "c. *" (fits on a precomputed bank), "*DIS*"; default: all')
    parser.add_argument("--dims", type=int, default=512)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0, help="seed of the order of the cases and versions")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    return args


def main():
    args = parse_arguments()
    print(machine_description())
    print(f"load average before: {load_average()}")

    def wanted(case):
        return any(fnmatch(case, pattern) for pattern in args.cases)

    with tempfile.TemporaryDirectory() as folder:
        other, commit_id = import_commit(args.against, folder)
        print(f"old: {args.against} ({commit_id}) as {other.__name__}; new: this checkout ({skqbnorm.__file__})")
        data = draw_data(args.scale, args.dims)
        old_cases, new_cases = (all_cases(package, data, args.k, wanted) for package in (other, skqbnorm))
        if not new_cases:
            raise SystemExit(f"no case matches {args.cases}")
        print(f"\nResults ({len(new_cases)} cases, each run once in each version):")
        equal = {}
        for case, (new_function, check) in new_cases.items():
            old_function, old_check = old_cases[case]
            line, equal[case] = compare(old_check(old_function()), check(new_function()))
            print(f"- {case}: {line}")
        pairs = {case: (old_cases[case][0], new_cases[case][0]) for case in new_cases}
        times = interleaved_pairs(pairs, args.rounds, np.random.default_rng(args.seed))
    print(f"\n{args.rounds} rounds; old = {args.against}, new = this checkout; ratios < 1: the new is faster.")
    report(times, equal)
    print(f"\nload average after: {load_average()}")


if __name__ == "__main__":
    main()
