"""The start of a script run in a fresh process that records every bidlab kernel numba
compiles in it (through numba's event API), for the first-fit tests: append the fits and
print ``compiled``."""

from __future__ import annotations


def compile_recorder(with_args: bool = False) -> str:
    """Python source defining ``compiled`` (a list) and a listener that appends the
    qualified name of every ``bidlab`` function numba compiles (``with_args``: and its
    argument types)."""
    name = "{fn.__module__}.{fn.__qualname__}" + ("{ev.data['args']}" if with_args else "")
    return f'''
import json
import numpy as np
import scipy.sparse as sp
from numba.core import event

compiled = []

class Listener(event.Listener):
    def on_start(self, ev):
        pass

    def on_end(self, ev):
        fn = ev.data["dispatcher"].py_func
        if fn.__module__.startswith("bidlab"):
            compiled.append(f"{name}")

event.register("numba:compile", Listener())
'''
