"""The package's layers: every subpackage imports first, and no import goes upwards.

The layers, bottom up (docs/user_guide/development.rst, DESIGN's "1.0: declared
contracts"): the streaming core (``skqbnorm._core``, then the shared checks and rank
statistics beside it); ``normalizers`` and ``rerankers`` on it, with ``metrics``
beside them, importing neither; the gate above both; ``index`` above the
normalisers; ``attacks`` above the metrics and the normalisers, imported by nothing;
the catalogue, ``compare`` and the command line on top. The rules are read from the
source with ``ast``, so a lazy import inside a function counts too.
"""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import skqbnorm

PACKAGE = Path(skqbnorm.__file__).parent

#: The low layer: the streaming core and the modules that every layer above shares.
CORE = ("skqbnorm._core",)
SHARED = ("skqbnorm._validation", "skqbnorm._ranks", "skqbnorm._dask", "skqbnorm._files")
#: What may sit on top: nothing below them may import these.
TOP = ("skqbnorm.catalogue", "skqbnorm.compare", "skqbnorm._compare", "skqbnorm._evaluation",
       "skqbnorm.cli", "skqbnorm._cli_commands", "skqbnorm.__main__", "skqbnorm.index",
       "skqbnorm.plotting")
#: The one module of ``normalisers`` above ``metrics``: the gate reads the diagnostics.
GATE = "skqbnorm.normalizers._querybank_gate"


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(name):
    """Every skqbnorm module ``name`` imports: ``(target, at_module_level)`` pairs.

    ``from package import name`` imports the submodule ``package.name`` when there is
    one, else the package itself (its ``__init__``).
    """
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []

    def visit(node, top_level):
        for child in ast.iter_child_nodes(node):
            inner = top_level and not isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((alias.name, top_level) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - child.level + 1]
                    source = ".".join(base + ([child.module] if child.module else []))
                else:
                    source = child.module
                for alias in child.names:
                    submodule = f"{source}.{alias.name}"
                    found.append((submodule if submodule in MODULES else source, top_level))
            visit(child, inner)

    visit(tree, True)
    return [(target, top) for target, top in found
            if target == "skqbnorm" or target.startswith("skqbnorm.")]


def within(name, prefixes):
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def broken_rules(name):
    """The imports of ``name`` that go against a layering rule, with the rule."""
    broken = []
    for target, _ in imports(name):
        if within(name, CORE) and not within(target, CORE):
            broken.append((target, "the core imports nothing of skqbnorm outside skqbnorm._core"))
        elif name in SHARED and not within(target, CORE + SHARED):
            broken.append((target, "the shared low modules import only the core and each other"))
        elif within(name, ("skqbnorm.metrics",)) and not within(
                target, CORE + SHARED + ("skqbnorm.metrics",)):
            broken.append((target, "metrics imports neither normalisers nor rerankers"))
        elif within(name, ("skqbnorm.datasets",)) and not within(
                target, CORE + SHARED + ("skqbnorm.datasets",)):
            broken.append((target, "datasets stand on the core and the shared checks alone"))
        elif within(name, ("skqbnorm.normalizers", "skqbnorm.rerankers")):
            other = "skqbnorm.rerankers" if name.startswith("skqbnorm.normalizers") else (
                "skqbnorm.normalizers")
            if target == "skqbnorm" or within(target, (other, *TOP)):
                broken.append((target, "normalisers and rerankers import neither each other "
                                       + "nor the package's top (its __init__, what is on it)"))
            elif (within(target, ("skqbnorm.metrics",)) and name.startswith("skqbnorm.normal")
                  and name != GATE):
                broken.append((target, "among the normalisers only the gate stands on metrics"))
        if name == "skqbnorm.attacks" and not within(
                target, CORE + SHARED + ("skqbnorm.metrics", "skqbnorm.normalizers")):
            broken.append((target, "the attacks stand on the metrics and normalisers alone"))
        if target == "skqbnorm.attacks":
            broken.append((target, "nothing imports the attacks"))
        if name == "skqbnorm.index" and target.startswith("skqbnorm.normalizers._"):
            broken.append((target, "the index serves through the normalizers' public protocol"))
        if target in ("skqbnorm.cli", "skqbnorm.__main__") and name != "skqbnorm.__main__":
            broken.append((target, "nothing imports the command line"))
    return broken


def test_the_rules_read_the_imports():
    """The reader finds relative, absolute, lazy and submodule imports (a rule that read
    nothing would pass vacuously)."""
    assert ("skqbnorm._core._probe", True) in imports("skqbnorm._core")
    assert ("skqbnorm.metrics._querybank", True) in imports(GATE)
    assert ("skqbnorm.datasets", False) in imports("skqbnorm._cli_commands")  # inside a function
    assert broken_rules("skqbnorm.metrics._querybank") == []
    assert ("skqbnorm.normalizers", True) in imports("skqbnorm.index")
    assert len(MODULES) > 40


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_import_goes_up_a_layer(name):
    assert broken_rules(name) == []


def test_no_import_cycle():
    """No cycle among the package's modules at import time (the packages' ``__init__``
    included): such a package imports only when another is imported first."""
    graph = {name: {target for target, top in imports(name) if top and target in MODULES}
             for name in MODULES}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def connect(node):  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    assert cycles == []


FIRST_IMPORTS = ["skqbnorm.metrics", "skqbnorm.normalizers", "skqbnorm.rerankers",
                 "skqbnorm.datasets", "skqbnorm.index", "skqbnorm.cli", "skqbnorm._core",
                 "skqbnorm.attacks"]

#: Below the top-level package: each must import with skqbnorm's __init__ not run at
#: all, so that no order of imports in that __init__ can matter.
BARE_IMPORTS = ["skqbnorm.metrics", "skqbnorm.normalizers", "skqbnorm.rerankers",
                "skqbnorm.datasets", "skqbnorm._core", "skqbnorm._validation"]

BARE = """
import importlib, sys, types
package = types.ModuleType("skqbnorm")
package.__path__, package.__file__ = [{path!r}], {init!r}
sys.modules["skqbnorm"] = package
importlib.import_module({name!r})
"""


def bare(package, name):
    return BARE.format(path=str(package), init=str(package / "__init__.py"), name=name)


@pytest.fixture(scope="module")
def fresh_imports():
    """Each import in its own fresh interpreter, all started at once: {case: (code, stderr)}."""
    cases = {("first", name): f"import {name}" for name in FIRST_IMPORTS}
    cases.update({("bare", name): bare(PACKAGE, name) for name in BARE_IMPORTS})
    running = {case: subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE,
                                      text=True) for case, code in cases.items()}
    return {case: (process.wait(timeout=300), process.stderr.read())
            for case, process in running.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", FIRST_IMPORTS)
def test_each_subpackage_imports_first_in_a_fresh_interpreter(fresh_imports, name):
    returncode, stderr = fresh_imports["first", name]
    assert returncode == 0, stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", BARE_IMPORTS)
def test_each_lower_subpackage_imports_without_the_package_init(fresh_imports, name):
    returncode, stderr = fresh_imports["bare", name]
    assert returncode == 0, stderr


@pytest.mark.slow
def test_the_bare_import_would_catch_the_old_cycle(tmp_path):
    """The check can fail: a copy of metrics/_querybank.py that imports a normaliser, as
    it once did, does not import bare (normalizers' gate imports the half-made
    metrics)."""
    copy = tmp_path / "skqbnorm"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("data", "__pycache__"))
    querybank = copy / "metrics" / "_querybank.py"
    querybank.write_text("from ..normalizers._softmax import DynamicInvertedSoftmax\n"
                         + querybank.read_text())
    result = subprocess.run([sys.executable, "-c", bare(copy, "skqbnorm.metrics")], check=False,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "ImportError" in result.stderr
