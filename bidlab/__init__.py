"""bidlab: fast, interactive machine learning for Jupyter.

The matrix core (``Mat``, ``SMat``, the result cache and its ops) is re-exported here; the
learners live in :mod:`bidlab.learn`, models in :mod:`bidlab.models`, data loaders in
:mod:`bidlab.datasets`. Live dashboards are in :mod:`bidlab.widgets` (needs the ``viz``
extra); importing ``bidlab`` itself never imports ipywidgets or bokeh.
"""

from __future__ import annotations

# first: sets how long idle OpenMP workers spin, before numba loads OpenMP (bidlab/_threads.py)
from bidlab import _threads  # noqa: F401  isort: skip
# next: a writable folder for numba's kernel cache, before any kernel is defined
from bidlab import _numba_cache  # noqa: F401  isort: skip
from bidlab import _source_checkout
from bidlab.backend import gpu_available
from bidlab.mat import *  # noqa: F403  (the matrix core is bidlab's front door)
from bidlab.mat import __all__ as _mat_all
from bidlab.mat.ops import abs  # noqa: A004

__version__ = "0.1.0"
__all__ = [*_mat_all, "abs", "gpu_available", "__version__"]

_source_checkout.install()

# Inside a Jupyter kernel, publish this kernel's learners to the JupyterLab extension's
# "Learners" panel (a daemon thread; does nothing in plain Python, pytest or a terminal).
from bidlab.lab import bridge as _bridge  # noqa: E402

_bridge.install()
