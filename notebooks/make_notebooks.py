"""Write the demo notebooks with nbformat: ``python notebooks/make_notebooks.py``.

The notebooks are generated so their code stays reviewable as Python: each notebook's
cells are a module of the ``cells`` package beside this file. Each notebook starts
with a cell tagged ``parameters`` (the data folder and sizes), which papermill-style tools
and the tests override; each runs headless (nbclient) on small data in well under a
minute, falls back to synthetic data, with a printed note, when the data is absent, and
ends with the trained model on screen: the live demos wait for their learner to finish,
then print its state, passes, scores and what it learned.

``--execute`` also runs every notebook headless and saves its outputs, so the committed
notebooks (and the copies shipped in the wheel) show a trained model before anyone runs
them. The saved copy is slimmed by :func:`slim`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import nbformat

HERE = Path(__file__).resolve().parent

#: The text a saved live widget shows: its state is not kept (see :func:`slim`).
WIDGET_NOTE = "[live widget: it appears when this cell runs in JupyterLab]"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _cells() -> ModuleType:
    """The ``cells`` package beside this file, imported from its path: this file runs as a
    script or is loaded by path (the tests), so its folder need not be on ``sys.path``."""
    name = "bidlab_demo_cells"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, HERE / "cells" / "__init__.py",
            submodule_search_locations=[str(HERE / "cells")])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


#: each notebook's file name -> its cells, ``(kind, source)`` pairs (cells/*.py)
NOTEBOOKS: dict[str, list[tuple[str, str]]] = _cells().NOTEBOOKS


def build(name: str) -> nbformat.NotebookNode:
    """The notebook ``name`` without outputs."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    for kind, src in NOTEBOOKS[name]:
        if kind == "markdown":
            nb.cells.append(nbformat.v4.new_markdown_cell(src))
        else:
            cell = nbformat.v4.new_code_cell(src)
            if src.startswith("# parameters"):
                cell.metadata["tags"] = ["parameters"]
            nb.cells.append(cell)
    for i, cell in enumerate(nb.cells):  # stable ids: regenerating gives no diff
        cell["id"] = f"{Path(name).stem.split('_')[0]}-{i:02d}"
    return nb


def _is_bokeh_loader(output: nbformat.NotebookNode) -> bool:
    data = output.get("data", {})
    return any(k == "application/javascript" or k.startswith("application/vnd.bokehjs")
               for k in data)


def slim(nb: nbformat.NotebookNode, forbidden: tuple[str, ...] = ()) -> nbformat.NotebookNode:
    """Make an executed notebook fit to commit and ship; return it (changed in place).

    * BokehJS, inlined by the first chart (megabytes), is dropped: it is sent again when
      the notebook runs.
    * The saved widget state is dropped and each live widget's output becomes
      :data:`WIDGET_NOTE`: the state is large and would be stale (the charts stream
      through messages it does not hold), and without it JupyterLab would show "model
      not found" instead of the note.
    * ValueError when an output contains one of the ``forbidden`` strings (this machine's
      folders): a shipped notebook must not show them.
    """
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            if _is_bokeh_loader(out):
                continue
            if WIDGET_MIME in out.get("data", {}):
                # a static picture of the final state (widgets/static.py) stays beside it
                out["data"] = {**{k: v for k, v in out["data"].items()
                                  if k.startswith("image/")}, "text/plain": WIDGET_NOTE}
                out["metadata"] = {}
            text = nbformat.writes(nbformat.from_dict({"o": out}))
            hit = next((s for s in forbidden if s and s in text), None)
            if hit is not None:
                raise ValueError(f"cell {cell.get('id')} prints this machine's path {hit!r}: "
                                 "change what it prints before saving the outputs")
            kept.append(out)
        cell.outputs = kept
    return nb


def execute(name: str, timeout: int = 600) -> nbformat.NotebookNode:
    """Run notebook ``name`` headless (kernel in notebooks/) and return it, slimmed."""
    import nbclient
    from bidlab.widgets.static import attach_snapshots, snapshot_cell

    nb = build(name)
    nb.cells.append(snapshot_cell())  # pictures of the live views' final state
    nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(HERE)}}).execute()
    attach_snapshots(nb)
    forbidden = [str(HERE.parent), str(HERE.parent.parent), str(Path.home())]
    try:
        from bidlab.datasets import shared_data_dir

        forbidden.append(str(shared_data_dir().resolve()))
    except FileNotFoundError:
        pass
    return slim(nb, forbidden=tuple(s for s in forbidden if len(s) > 1))


def main(argv: list[str] | None = None) -> int:
    """Write the notebooks; with ``--execute``, with their outputs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--execute", action="store_true",
                        help="run each notebook headless and save its outputs")
    parser.add_argument("--data", default=None,
                        help="the shared data folder for the run (sets $BIDLAB_SHARED_DATA "
                        "for the kernel; the notebooks' DATA parameter stays None)")
    parser.add_argument("names", nargs="*", help="notebooks to write (default: all)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in NOTEBOOKS]
    if unknown:
        parser.error(f"unknown notebooks {unknown}; the notebooks are {list(NOTEBOOKS)}")
    if args.data:
        os.environ["BIDLAB_SHARED_DATA"] = str(Path(args.data).resolve())
    for name in args.names or NOTEBOOKS:
        nb = execute(name) if args.execute else build(name)
        nbformat.write(nb, HERE / name)
        print("wrote", HERE / name, "(executed)" if args.execute else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
