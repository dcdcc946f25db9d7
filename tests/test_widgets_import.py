"""The core stays headless: importing bidlab (and its learners and models) pulls in neither
ipywidgets nor bokeh; only ``bidlab.widgets`` does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("ipywidgets", "bokeh", "jupyter_bokeh", "IPython")


def _loaded_after(code: str) -> dict[str, bool]:
    probe = (f"import sys, json\n{code}\n"
             f"print(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_bidlab_is_headless():
    loaded = _loaded_after("import bidlab, bidlab.learn, bidlab.models, bidlab.datasets\n"
                           "import bidlab.models.glm, bidlab.models.kmeans")
    assert not any(loaded.values()), loaded


def test_import_widgets_does_load_them():
    pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")
    loaded = _loaded_after("import bidlab.widgets")  # the probe can see them when present
    assert loaded["ipywidgets"] and loaded["bokeh"] and loaded["jupyter_bokeh"], loaded
