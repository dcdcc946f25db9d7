"""Shared fixtures: the `xp` fixture runs a test on numpy and, where a GPU exists, on cupy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bidlab import backend
from bidlab.datasets.paths import find_shared_data_dir, shared_data_candidates

REPO = Path(__file__).resolve().parent.parent
#: The shared data sets' folder (bidlab.datasets.paths decides where); when there is none,
#: the first place looked, so that a skip can say where the data was expected.
SHARED_DATA = find_shared_data_dir() or shared_data_candidates()[0]


def _backends() -> list:
    params = [pytest.param("numpy", id="numpy")]
    params.append(pytest.param("cupy", id="cupy", marks=pytest.mark.gpu))
    return params


@pytest.fixture(params=_backends())
def xp(request):
    """The array module to run a backend-generic test on (numpy, or cupy when a GPU exists)."""
    if request.param == "numpy":
        return np
    if not backend.gpu_available():
        pytest.skip("no CuPy/CUDA device here: GPU variant skipped (install bidlab[gpu] on a GPU)")
    return backend.cupy()


@pytest.fixture
def shared_data() -> Path:
    """The shared data folder, or skip with the reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real datasets not found at {SHARED_DATA} (set BIDLAB_SHARED_DATA)")
    return SHARED_DATA
