"""The notebooks run top to bottom, draw their figures, and are stored without outputs."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))
FIGURES = {"querybank_normalisation.ipynb": 5, "bayesian_reranking.ipynb": 2}


def test_every_notebook_is_checked():
    assert {path.name for path in NOTEBOOKS} == set(FIGURES)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "strip the outputs before committing"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_runs_and_draws(path):
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    images = [
        output for cell in notebook.cells if cell.cell_type == "code"
        for output in cell.outputs if "image/png" in output.get("data", {})
    ]
    assert len(images) >= FIGURES[path.name]
