"""bidlab in JupyterLab: the kernel-side learner bridge and the ``bidlab lab`` launcher.

* :mod:`bidlab.lab.bridge` publishes this kernel's learners to the ``bidlab-labextension``
  JupyterLab extension (a sidebar panel, a status-bar item, palette commands) and runs its
  pause / resume / stop commands. ``bidlab`` installs it on import inside a kernel.
* :func:`launch` (``bidlab lab [notebook]``) starts JupyterLab on 127.0.0.1 with a token.

Nothing here imports Jupyter, ipywidgets or bokeh at import time.
"""

from __future__ import annotations

from bidlab.lab.bridge import TARGET, LearnerBridge, install
from bidlab.lab.launcher import DEFAULT_NOTEBOOK, add_arguments, launch, run
from bidlab.lab.snapshot import dashboard_class

__all__ = ["TARGET", "LearnerBridge", "install", "launch", "add_arguments", "run",
           "DEFAULT_NOTEBOOK", "dashboard_class", "EXTENSION_NAME"]

#: The JupyterLab extension's package name (share/jupyter/labextensions/<name>).
EXTENSION_NAME = "bidlab-labextension"


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the built extension lives inside the package (``jupyter labextension develop``)."""
    return [{"src": "../labextension", "dest": EXTENSION_NAME}]
