"""Packaging: the wheel carries the JupyterLab extension, the CUDA kernels and the demos.

Builds the wheel with ``python -m build --wheel`` (isolated: it installs hatchling,
hatch-jupyter-builder and jupyterlab into a fresh build environment, runs ``jlpm install``
and ``jlpm build:prod`` in labextension/), then checks the wheel's files, that
``jupyter labextension list`` finds the extension, enabled, in the wheel's data folder,
and that ``bidlab lab`` run from the unpacked wheel opens the LDA demo from a user folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXT_DIR = REPO / "labextension"
NAME = json.loads((EXT_DIR / "package.json").read_text())["name"]


def test_extension_sources_are_complete_and_pinned():
    package = json.loads((EXT_DIR / "package.json").read_text())
    assert package["jupyterlab"]["outputDir"] == "../bidlab/labextension"
    assert (EXT_DIR / "yarn.lock").is_file(), "commit labextension/yarn.lock"
    assert "nodeLinker: node-modules" in (EXT_DIR / ".yarnrc.yml").read_text()
    install = json.loads((EXT_DIR / "install.json").read_text())
    assert install["packageName"] == "bidlab"
    # every @jupyterlab package resolves on one release line (the registry lacks some 4.6.x)
    lines = {v.split(".")[1] for k, v in package["resolutions"].items()
             if k.startswith("@jupyterlab/") and not k.endswith(("services", "-interfaces"))}
    assert lines == {"5"}, f"@jupyterlab/* resolutions mix minor lines: {lines}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build")
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the JupyterLab extension cannot be built")
    out = tmp_path_factory.mktemp("wheel")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out),
                           str(REPO)], capture_output=True, text=True, timeout=540)
    seconds = time.perf_counter() - t0
    assert proc.returncode == 0, (
        f"wheel build failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    print(f"\n`python -m build --wheel` took {seconds:.1f} s (JS build included)")
    wheels = list(out.glob("bidlab-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {out}, found {wheels}"
    return wheels[0]


@pytest.mark.slow
def test_wheel_contains_the_extension_the_kernels_and_the_widgets(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = next(n.split("/data/")[0] for n in names if ".data/data/" in n)
    ext = f"{data}/data/share/jupyter/labextensions/{NAME}"
    assert f"{ext}/package.json" in names
    assert f"{ext}/install.json" in names
    assert any(n.startswith(f"{ext}/static/remoteEntry.") and n.endswith(".js") for n in names)
    assert f"{ext}/static/style.js" in names
    assert any(n.startswith("bidlab/_cuda/") and n.endswith(".cu") for n in names)
    assert "bidlab/widgets/__init__.py" in names
    assert "bidlab/lab/bridge.py" in names
    assert not any("node_modules" in n for n in names)


@pytest.mark.slow
def test_wheel_ships_the_demo_notebooks_with_their_outputs(wheel):
    demos = sorted((REPO / "notebooks").glob("*.ipynb"))
    assert demos
    with zipfile.ZipFile(wheel) as zf:
        shipped = sorted(n for n in zf.namelist() if n.startswith("bidlab/notebooks/"))
        assert shipped == [f"bidlab/notebooks/{p.name}" for p in demos]
        for p in demos:
            assert zf.read(f"bidlab/notebooks/{p.name}") == p.read_bytes()


@pytest.mark.slow
def test_lab_from_the_wheel_opens_the_lda_demo_from_a_user_folder(wheel, tmp_path):
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "BIDLAB_DEMOS"}
    env.update(HOME=str(home), PYTHONPATH=str(site))  # the unpacked wheel comes first
    code = ("import bidlab.lab.launcher as m; print(m.__file__); "
            "print(m.resolve_notebook(None))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    module, path = proc.stdout.split()
    assert Path(module).is_relative_to(site), f"imported {module}, not the wheel's launcher"
    demo = home / "bidlab-demos" / "02_lda_live.ipynb"
    assert Path(path) == demo
    assert demo.read_bytes() == (REPO / "notebooks" / "02_lda_live.ipynb").read_bytes()
    assert "copied the demo notebooks" in proc.stderr


@pytest.mark.slow
def test_jupyter_lists_the_wheels_extension_enabled(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(tmp_path)
    share = next(tmp_path.glob("bidlab-*.data/data/share/jupyter"))
    built = json.loads((share / "labextensions" / NAME / "package.json").read_text())
    assert built["jupyterlab"]["_build"]["load"].startswith("static/remoteEntry.")
    env = dict(os.environ, JUPYTER_PATH=str(share), JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"),
               JUPYTER_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, "-m", "jupyterlab.labextensions", "list"],
                          capture_output=True, text=True, env=env, timeout=120)
    out = proc.stdout + proc.stderr
    line = next((ln for ln in out.splitlines() if NAME in ln), None)
    assert line is not None, f"`jupyter labextension list` does not show {NAME}:\n{out}"
    assert "enabled" in line and "OK" in line, line
    assert str(share) in out
