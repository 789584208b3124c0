"""Sphinx configuration of the skqbnorm documentation site.

Build (CI runs it with warnings as errors):
``sphinx-build -W --keep-going -b html docs docs/_build/html``.
"""

import os
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

# One OpenMP thread: on machines shared with other jobs, the examples' k-NN graphs
# (scikit-learn's OpenMP reductions) run faster than with threads that compete with
# them. It must be set before anything loads the OpenMP runtime, so before skqbnorm.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList

import skqbnorm

project = "skqbnorm"
author = "the skqbnorm developers"
copyright = "the skqbnorm developers"
release = skqbnorm.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",  # the performance page is Markdown
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
root_doc = "index"

# API reference: one generated page per public name, written by autosummary. The stubs are
# written afresh at every build, so that a renamed or removed name leaves no stale page.
autosummary_generate = True
shutil.rmtree(Path(__file__).parent / "generated", ignore_errors=True)
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# ``:class:`~sklearn.utils.Bunch``` and the like: no intersphinx (the build runs offline).
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = f"skqbnorm {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
}
html_static_path = []

# The gallery: every example runs in the build, matplotlib without a display.
os.environ.setdefault("MPLBACKEND", "agg")
sphinx_gallery_conf = {
    "examples_dirs": ["../examples"],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "abort_on_example_error": True,
    "write_computation_times": False,
    "reset_modules": ("matplotlib",),
    "image_scrapers": ("matplotlib",),
    "backreferences_dir": None,
    "show_memory": False,
}


class CommandOutput(Directive):
    """``.. command-output:: demo --quiet``: what ``skqbnorm ARGS`` prints, run at build time.

    The text comes from the installed command (``--help`` for its options, ``demo`` for
    the demo table), so the pages cannot drift from the program.
    """

    required_arguments = 1
    final_argument_whitespace = True

    def run(self):
        command = [sys.executable, "-m", "skqbnorm", *self.arguments[0].split()]
        environment = {**os.environ, "COLUMNS": "92"}
        text = subprocess.run(
            command, capture_output=True, text=True, check=True, env=environment
        ).stdout
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


def join_continued_lines(app, what, name, obj, options, lines):
    """Join docstring lines continued with a trailing backslash (a long parameter type).

    numpydoc reads ``name : type`` from one line; a type continued on the next line would
    otherwise become a stray block quote. Runs before numpydoc (priority below 500).
    """
    index = 0
    while index < len(lines) - 1:
        if lines[index].endswith("\\"):
            lines[index] = lines[index][:-1].rstrip() + " " + lines.pop(index + 1).strip()
        else:
            index += 1


def class_role(cls):
    """A cross-reference to ``cls`` where skqbnorm exports it, else its name."""
    if getattr(skqbnorm, cls.__name__, None) is cls:
        return f":class:`~skqbnorm.{cls.__name__}`"
    return f"``{cls.__name__}``"


class CatalogueTable(Directive):
    """The catalogue's methods and rerankers as tables, read from ``skqbnorm.catalogue``:
    a registered method appears without editing the docs."""

    def run(self):
        from skqbnorm.catalogue import METHODS, RERANKERS

        rows = ["   * - ``--method``", "     - label", "     - class", "     - fitted on",
                "     - capabilities"]
        for name, method in METHODS.items():
            cls = method.normalizer
            declared = ", ".join(
                f"{field.name}={getattr(cls.capabilities, field.name)!r}"
                for field in fields(cls.capabilities)
                if getattr(cls.capabilities, field.name) != field.default or field.name == "index"
            ) if cls is not None else "(none)"
            rows += [f"   * - ``{name}``", f"     - {method.label}",
                     f"     - {class_role(cls)}" if cls else "     -",
                     f"     - {method.data}", f"     - {declared}"]
        rows += ["", ".. list-table:: Rerankers", "   :header-rows: 1", "",
                 "   * - name", "     - class"]
        for name, cls in RERANKERS.items():
            rows += [f"   * - ``{name}``", f"     - {class_role(cls)}"]
        text = "\n".join([".. list-table:: Normalisers", "   :header-rows: 1", ""] + rows)
        container = nodes.container()
        self.state.nested_parse(StringList(text.splitlines(), "catalogue"), 0, container)
        return container.children


def setup(app):
    app.add_directive("command-output", CommandOutput)
    app.add_directive("catalogue-table", CatalogueTable)
    app.connect("autodoc-process-docstring", join_continued_lines, priority=400)
