"""Edits of a saved file's JSON tree and arrays, for the tests that craft damaged files.

A saved estimator is a checkpoint whose ``meta["root"]`` describes the object: an object
node ``{"$obj": ..., "state": {"$dict": {...}}}``, a dict ``{"$dict": {...}}``, a list, or
an array reference ``{"$array": key}`` (a Mat: ``{"$mat": {"$array": key}}``). An edit is a
function ``edit(root, arrays)`` changing both in place; :func:`crafted` writes a copy of a
saved file with one applied.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from bidlab.learn.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from bidlab.models import load

Edit = Callable[[dict[str, Any], dict[str, np.ndarray]], None]


def node(root: Any, path: str) -> Any:
    """The JSON node of the attribute at the dotted ``path`` below the saved ``root``."""
    at = root
    for part in path.split(".") if path else ():
        for tag in ("$obj", "$dict"):
            if isinstance(at, dict) and tag in at:
                at = at["state"]["$dict"] if tag == "$obj" else at["$dict"]
        at = at[int(part)] if isinstance(at, list) else at[part]
    return at


def table(root: Any, path: str) -> dict[str, Any]:
    """The attribute table of the object (or the items of the dict) at ``path``."""
    at = node(root, path)
    return at["state"]["$dict"] if "$obj" in at else at.get("$dict", at)


def array(path: str, change: Callable[[np.ndarray], np.ndarray]) -> Edit:
    """Replace the array at ``path`` by ``change(a copy of it)``."""
    def edit(root: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        at = node(root, path)
        key = (at["$mat"] if "$mat" in at else at)["$array"]
        arrays[key] = np.ascontiguousarray(change(arrays[key].copy()))
    return edit


def set_value(path: str, value: Any) -> Edit:
    """Set the attribute at ``path`` to the JSON ``value``."""
    def edit(root: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        head, _, last = path.rpartition(".")
        table(root, head)[last] = value
    return edit


def drop(path: str) -> Edit:
    """Remove the attribute at ``path``."""
    def edit(root: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        head, _, last = path.rpartition(".")
        del table(root, head)[last]
    return edit


def crafted(saved: Any, tmp_path: Any, name: str, change: Edit) -> Any:
    """A copy of the saved file ``saved / name`` in ``tmp_path`` with ``change`` applied."""
    ck = load_checkpoint(saved / name)
    meta = {k: copy.deepcopy(v) for k, v in ck.meta.items()
            if k not in ("format", "version", "written")}
    arrays = dict(ck.arrays)
    change(meta["root"], arrays)
    return save_checkpoint(tmp_path / name, arrays, meta)


def assert_refused(saved: Any, tmp_path: Any, name: str, change: Edit, fragment: str) -> None:
    """Loading the crafted copy of ``saved / name`` raises a CheckpointError matching
    ``fragment`` and naming the file."""
    path = crafted(saved, tmp_path, name, change)
    with pytest.raises(CheckpointError, match=fragment) as err:
        load(path)
    assert str(path) in str(err.value)
