"""Every public name is in the API reference, and every gallery example is one.

The API reference lists names in ``.. autosummary::`` blocks (or ``autoclass`` /
``autofunction`` directives) of the ``.rst`` sources under ``docs/``. These tests parse
those sources, so they run without Sphinx: a public name added without documentation
fails here, in the test suite, before the docs build would miss it silently.
"""

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import skqbnorm

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"
#: Folders of the docs tree that are templates or written by the build.
GENERATED = {"_build", "_templates", "generated", "auto_examples"}
#: Public modules that are programs, not APIs.
NOT_API = {"skqbnorm.cli"}

DIRECTIVE = re.compile(r"^\s*\.\.\s+([\w:-]+)::\s*(.*?)\s*$")


def rst_sources():
    return [
        path for path in sorted(DOCS.rglob("*.rst"))
        if not GENERATED.intersection(path.relative_to(DOCS).parts)
    ]


def documented_names(text):
    """The (module, name) pairs that ``text`` documents, in reStructuredText."""
    documented = set()
    module = None
    in_autosummary = False
    for line in text.splitlines():
        directive = DIRECTIVE.match(line)
        if line.strip() and not line[0].isspace():
            in_autosummary = False
        if directive:
            name, argument = directive.groups()
            if name in ("currentmodule", "py:currentmodule", "module", "py:module"):
                module = argument
            elif name == "autosummary":
                in_autosummary = True
            elif name in ("autoclass", "autofunction", "automodule") and argument:
                documented.add(qualify(argument, module))
            continue
        entry = line.strip()
        if in_autosummary and entry and not entry.startswith(":"):
            documented.add(qualify(entry.lstrip("~"), module))
    return documented


def qualify(entry, module):
    if module is None or entry.startswith("skqbnorm."):
        return tuple(entry.rsplit(".", 1))
    return module, entry


def public_modules():
    """skqbnorm and every module below it whose dotted name has no private part."""
    names = ["skqbnorm"]
    for info in pkgutil.walk_packages(skqbnorm.__path__, prefix="skqbnorm."):
        parts = info.name.split(".")
        if not any(part.startswith("_") for part in parts) and info.name not in NOT_API:
            names.append(info.name)
    return names


def public_names(module):
    """``__all__``, or else the functions and classes the module itself defines."""
    if hasattr(module, "__all__"):
        return [name for name in module.__all__ if not name.startswith("__")]
    return [
        name for name, value in vars(module).items()
        if not name.startswith("_") and (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == module.__name__
    ]


def reference():
    documented = set()
    for path in rst_sources():
        documented |= documented_names(path.read_text(encoding="utf-8"))
    return documented


def documented_objects(documented):
    objects = set()
    for module, name in documented:
        try:
            objects.add(id(getattr(importlib.import_module(module), name)))
        except (ImportError, AttributeError):
            continue
    return objects


def test_parser_reads_autosummary_blocks_and_directives():
    text = """
Title
=====

.. currentmodule:: skqbnorm.metrics

.. autosummary::
   :toctree: generated
   :nosignatures:

   hubness
   ~skqbnorm.datasets.load_wordnet_revdict

Not an entry
   indented prose after the block

.. autofunction:: recall_at_k
"""
    assert documented_names(text) == {
        ("skqbnorm.metrics", "hubness"),
        ("skqbnorm.datasets", "load_wordnet_revdict"),
        ("skqbnorm.metrics", "recall_at_k"),
    }


def test_the_reference_documents_names_that_exist():
    documented = reference()
    assert documented, "docs/api.rst lists no names"
    missing = []
    for module, name in sorted(documented):
        try:
            getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            missing.append(f"{module}.{name}")
    assert not missing, f"the API reference lists names that do not exist: {missing}"


@pytest.mark.parametrize("module_name", public_modules())
def test_every_public_name_is_in_the_api_reference(module_name):
    module = importlib.import_module(module_name)
    documented = reference()
    objects = documented_objects(documented)
    # A re-export (skqbnorm.InvertedSoftmax) counts as documented where it is defined.
    undocumented = [
        name for name in public_names(module)
        if (module_name, name) not in documented and id(getattr(module, name)) not in objects
    ]
    assert not undocumented, (
        f"public names of {module_name} missing from the API reference "
        f"(add them to docs/api.rst): {undocumented}"
    )


def test_every_example_is_a_gallery_example():
    """sphinx-gallery runs ``examples/plot_*.py``; another name would never run."""
    scripts = sorted(EXAMPLES.glob("*.py"))
    assert len(scripts) >= 6
    for path in scripts:
        assert path.name.startswith("plot_"), f"{path.name} is not run by the docs build"
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert docstring and docstring.lstrip().startswith("="), (
            f"{path.name} needs a docstring with a title, as sphinx-gallery expects"
        )
