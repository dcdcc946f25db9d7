"""The touched-rows kernels (bidlab.kern.touched) stay inside their arrays on every step.

A step that does not defer regulariser terms has no row of the step-size record at
``t - base``; numba's parfor pass hoists that loop-invariant load out of the ``prange`` loop
and out of the branch that guards it. The runs go in a subprocess: an out-of-bounds read
either raises under ``NUMBA_BOUNDSCHECK=1`` or crashes the interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_DATA = """
import numpy as np
from bidlab.models import GLM
rng = np.random.default_rng(0)
X = rng.standard_normal((3000, 6)).astype(np.float32)
y = (X[:, 0] > 0).astype(int)
"""


def _run(code: str, tmp_path, **env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
                BIDLAB_BACKGROUND_COMPILE="0", **env)  # the compiled kernels, not stand-ins
    return subprocess.run([sys.executable, "-c", textwrap.dedent(_DATA + code)], env=full,
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_glm_fit_compiled_with_bounds_checking_stays_in_bounds(tmp_path):
    # the kernels compile afresh with bounds checks (a cached build would not have them)
    res = _run("GLM(n_passes=10).fit(X, y)\nprint('fitted')\n", tmp_path,
               NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "fitted" in res.stdout


@pytest.mark.slow
def test_long_background_learner_run_does_not_crash(tmp_path):
    # 16,000 steps: the unguarded read ran ~250 KB past the record and segfaulted
    res = _run("L = GLM(n_passes=2).learner(X, y, n_passes=1000).start()\n"
               "L.join()\nprint('steps', L.step)\n", tmp_path)
    assert res.returncode == 0, f"exit {res.returncode}: {res.stderr[-3000:]}"
    assert "steps 16000" in res.stdout

