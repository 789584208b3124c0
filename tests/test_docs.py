"""Every public name is in the API reference, every docstring passes numpydoc's
validation, and every gallery example is one.

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
import tokenize
from pathlib import Path

import pytest
from numpydoc.validate import validate

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


#: numpydoc's checks that every public docstring passes: all of numpydoc 1.8's, written
#: out so that a newer numpydoc adds none unseen, less these:
#: - GL01: the summary starts on the line of the opening quotes (PEP 257's habit).
#: - RT02: a return value may carry its name (``indices : ndarray``), as scikit-learn's
#:   do, so that the text can refer to it.
#: - ES01, SA01: an extended summary and a See Also section are welcome, not required.
#: - EX01: see EXAMPLE_CHECK below.
DOCSTRING_CHECKS = frozenset({
    "GL02", "GL03", "GL05", "GL06", "GL07", "GL08", "GL09", "GL10",
    "SS01", "SS02", "SS03", "SS04", "SS05", "SS06",
    "PR01", "PR02", "PR03", "PR04", "PR05", "PR06", "PR07", "PR08", "PR09", "PR10",
    "RT01", "RT03", "RT04", "RT05", "YD01",
    "SA02", "SA03", "SA04",
})
#: An Examples section (run as a doctest) is required of every public class and function;
#: its methods and properties are shown in the class's examples.
EXAMPLE_CHECK = "EX01"


def documented_objects_by_name():
    """Every public class and function (each once, under its first public name) and
    the public methods and properties that skqbnorm's own classes define.

    Returns ``{dotted name: checks}``.
    """
    objects, seen = {}, set()
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in public_names(module):
            value = getattr(module, name)
            if not (inspect.isclass(value) or inspect.isroutine(value)) or id(value) in seen:
                continue
            seen.add(id(value))
            objects[f"{module_name}.{name}"] = DOCSTRING_CHECKS | {EXAMPLE_CHECK}
            if inspect.isclass(value):
                for member in own_public_members(value):
                    objects[f"{module_name}.{name}.{member}"] = DOCSTRING_CHECKS
    return objects


def own_public_members(cls):
    """Public methods and properties that a skqbnorm class defines."""
    for name in dir(cls):
        owner = next((base for base in cls.__mro__ if name in vars(base)), None)
        if name.startswith("_") or owner is None or not owner.__module__.startswith("skqbnorm"):
            continue
        member = vars(owner)[name]
        routine = (inspect.isfunction(member) or isinstance(member, (classmethod, staticmethod))
                   or inspect.isfunction(getattr(member, "__wrapped__", None)))  # a wrapping descriptor
        if routine or isinstance(member, property):
            yield name


def docstring_errors(name, checks):
    return [f"{name}: {code} {message}" for code, message in validate(name)["errors"]
            if code in checks]


def test_every_public_docstring_passes_numpydoc_validation():
    objects = documented_objects_by_name()
    assert len(objects) > 100
    errors = [error for name, checks in objects.items() for error in docstring_errors(name, checks)]
    assert not errors, "numpydoc validation:\n" + "\n".join(errors)


PACKAGE = ROOT / "skqbnorm"
#: What a user's copy cannot open or reproduce: the project's internal notes and issue
#: numbers, study scripts the wheel does not ship, and timings from one machine. The
#: guide's pages hold the evidence; a docstring links them (``:ref:``).
LAB_NOTE_PATTERNS = (
    r"\bSPEC\b", r"\bDESIGN\b", r"\bissue \d+", r"\(issue",
    r"scripts/\w+_study\.py",
    r"\b\d+(\.\d+)?(-\d+(\.\d+)?)? ?(ms|µs|ns|microseconds?|milliseconds?)\b",
    r"\b(\d+|one|two)[- ](busy )?cores?\b", r"GFLOP/s",
    r"\d \+- \d", "±",
)
LAB_NOTES = re.compile("|".join(LAB_NOTE_PATTERNS))


def comments_and_strings(path):
    """``(line, text)`` of every comment and string literal (docstrings included)."""
    with path.open(encoding="utf-8") as source:
        for token in tokenize.generate_tokens(source.readline):
            if token.type in (tokenize.COMMENT, tokenize.STRING):
                yield token.start[0], token.string


def lab_notes(path):
    return [f"{path.relative_to(ROOT)}:{line}: {match.group()!r}"
            for line, text in comments_and_strings(path)
            for match in LAB_NOTES.finditer(text)]


@pytest.mark.parametrize("text", [
    "# see SPEC section 4", "chosen in DESIGN", "(issue 12)", "as issue 30 asks",
    "``scripts/defaults_study.py``", "about 4 ms a thread", "1.1-3.5 ms on one thread",
    "25 microseconds", "on a 2-core machine", "on 2 busy cores", "second on one core",
    "at about 2 GFLOP/s", "-0.17 +- 0.26", "+2.1 ± 0.3",
])
def test_the_lab_notes_pattern_finds_notes(text):
    assert LAB_NOTES.search(text)


@pytest.mark.parametrize("text", [
    "None means 1, -1 all cores", "the streaming core", "``spec`` of the index",
    "a Design matrix", "issues a QueryBankWarning", "scripts/build_retrieval_sets.py",
    "4 MiB chunks", "items", "R@1 change", "seconds of fit and transform",
])
def test_the_lab_notes_pattern_spares_prose(text):
    assert not LAB_NOTES.search(text)


def test_no_lab_notes_in_the_package():
    """Docstrings, comments and messages say what a thing does and how to call it."""
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 50
    notes = [note for path in sources for note in lab_notes(path)]
    assert not notes, "lab notes in the package (link the guide instead):\n" + "\n".join(notes)
