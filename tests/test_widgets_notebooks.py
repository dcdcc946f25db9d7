"""Every demo notebook executes headless (nbclient, a real kernel) on small data.

Each notebook's ``parameters`` cell is overridden with the data path; without the shared
data the notebooks must fall back to synthetic data and say so.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("jupyter_bokeh", reason="the notebooks need the viz extra")

from conftest import SHARED_DATA  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = ["01_quickstart.ipynb", "02_lda_live.ipynb", "03_glm_sweep.ipynb", "04_kmeans.ipynb"]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def run_notebook(name: str, **params: object) -> tuple[nbformat.NotebookNode, float]:
    """Execute notebooks/<name> with ``params`` appended to its parameters cell."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += "".join(f"\n{k} = {v!r}" for k, v in params.items())
    t0 = time.perf_counter()
    nbclient.NotebookClient(nb, timeout=60, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return nb, time.perf_counter() - t0


def stdout(nb: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.get("output_type") == "stream")


def widget_outputs(nb: nbformat.NotebookNode) -> int:
    return sum(WIDGET_MIME in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
               for o in c.get("outputs", []))


def test_notebooks_are_committed_without_outputs():
    for name in NAMES:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), name


@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes(name):
    nb, seconds = run_notebook(name, DATA=str(SHARED_DATA))
    assert seconds < 60
    out = stdout(nb)
    if name == "01_quickstart.ipynb":
        assert "'allocations'" in out and "'hits'" in out
        return
    assert widget_outputs(nb) >= 2, "the live views were not displayed"
    if name == "02_lda_live.ipynb":
        assert "heated: topic 0" in out
        if (SHARED_DATA / "uci-kos").is_dir():
            assert "kos (" in out
    if name == "03_glm_sweep.ipynb":
        assert "frozen: [" in out


def test_missing_data_falls_back_to_synthetic(tmp_path):
    nb, _ = run_notebook("02_lda_live.ipynb", DATA=str(tmp_path / "absent"), MAX_DOCS=500)
    out = stdout(nb)
    assert "not found: using synthetic data" in out
    assert "synthetic-lda" in out
