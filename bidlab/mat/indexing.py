"""Indexing (``a[index]`` cached by the index's key, ``a[index] = value``) and BIDMat's
``dst <-- src`` copy (:func:`copy_into`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.mat.dense import Mat
from bidlab.mat.operands import _UNCACHED, _key, _mats, _unwrap, result
from bidlab.mat.sparse import SMat


def _index_key(index: Any) -> Hashable:
    parts = index if isinstance(index, tuple) else (index,)
    key = []
    for p in parts:
        if isinstance(p, slice):
            key.append(("slice", p.start, p.stop, p.step))
        elif isinstance(p, (int, np.integer)):
            key.append(("int", int(p)))
        elif isinstance(p, Mat):
            key.append(("mat", p.guid))
        else:
            return _UNCACHED
    return tuple(key)


def _normalise_index(index: Any, shape: tuple[int, int]) -> tuple[Any, Any]:
    parts = index if isinstance(index, tuple) else (index, slice(None))
    if len(parts) != 2:
        raise IndexError(f"a Mat takes [rows] or [rows, cols]; got {len(parts)} indices")
    out = []
    for axis, (p, n) in enumerate(zip(parts, shape, strict=True)):
        if isinstance(p, (int, np.integer)):
            i = int(p)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            i %= n
            out.append(slice(i, i + 1))
        elif isinstance(p, Mat):
            if p.dtype.kind not in "iu":
                raise TypeError(f"an index Mat must hold integers; got {p.dtype}")
            out.append(p.data.reshape(-1))
        elif isinstance(p, slice):
            out.append(p)
        else:
            idx = p if hasattr(p, "dtype") else np.asarray(p)
            if idx.ndim != 1 or idx.dtype.kind not in "biu":
                raise IndexError(
                    f"index arrays must be 1-D integers or booleans; got shape "
                    f"{tuple(idx.shape)} and dtype {idx.dtype}"
                )
            if idx.dtype.kind == "b":  # a mask: the positions of its True entries
                if idx.shape[0] != n:
                    raise IndexError(
                        f"boolean index has {idx.shape[0]} entries for axis {axis} of size {n}"
                    )
                idx = backend.namespace(idx).flatnonzero(idx)
            out.append(idx)
    return out[0], out[1]


def _take_checked(view: Any, idx: Any, out: Any, axis: int) -> None:
    """Gather along ``axis`` into ``out``; host indices are checked first (numpy's in-place
    take wraps out-of-range ones instead of raising)."""
    n = view.shape[axis]
    if isinstance(idx, np.ndarray) and idx.size and (idx.max() >= n or idx.min() < -n):
        bad = int(idx.max()) if idx.max() >= n else int(idx.min())
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")
    backend.take_into(view, idx, out=out, axis=axis)


def getitem(a: Mat, index: Any, out: Mat | None = None) -> Mat:
    """A copy of a block (slices, ints -> kept 2-D) or a row/column gather by an index Mat.

    The result is cached under the slice values or the index Mat's GUID: in a loop whose
    offsets change, gather with an integer index Mat whose contents you update.
    """
    rows, cols = _normalise_index(index, a.shape)
    arr = a.data
    xp = a.xp
    if not isinstance(rows, slice) and not isinstance(cols, slice):
        raise IndexError("gather rows or columns with one index Mat at a time")
    if not isinstance(rows, slice):
        view = arr[:, cols]
        shape = (int(rows.shape[0]), view.shape[1])
        res = result(
            _key("getitem", a.guid, _index_key(index)),
            _mats(a, *index) if isinstance(index, tuple) else _mats(a, index),
            shape,
            a.dtype,
            xp,
            out,
        )
        _take_checked(view, rows, res.data, 0)
        return res
    if not isinstance(cols, slice):
        view = arr[rows, :]
        shape = (view.shape[0], int(cols.shape[0]))
        res = result(
            _key("getitem", a.guid, _index_key(index)), _mats(a, *index), shape, a.dtype, xp, out
        )
        _take_checked(view, cols, res.data, 1)
        return res
    view = arr[rows, cols]
    res = result(
        _key("getitem", a.guid, _index_key(index)), (a,), tuple(view.shape), a.dtype, xp, out
    )
    res.data[...] = view
    return res


def setitem(a: Mat, index: Any, value: Any) -> None:
    """In-place assignment into a block of ``a``."""
    rows, cols = _normalise_index(index, a.shape)
    v, _ = _unwrap(value)
    backend.namespace(a.data, v)
    if not isinstance(rows, slice):
        a.data[rows, cols] = v
    else:
        a.data[rows, cols] = v


def copy_into(dst: Mat | SMat, src: Any) -> Mat | SMat:
    """BIDMat's ``dst <-- src``: write src's values into dst (same shape), return dst.

    The safe loop pattern computes new values from the loop variables, then copies them
    into the loop variables at the end of the step, so no cached result is mutated while
    it is still an input.
    """
    if isinstance(dst, SMat):
        return dst.copy_from(src)
    if not isinstance(dst, Mat):
        raise TypeError(f"copy_into writes into a Mat or SMat; got {type(dst).__name__}")
    if isinstance(src, SMat):
        raise TypeError("copying a sparse matrix into a dense Mat: use src.toarray() explicitly")
    if isinstance(src, np.ndarray) and src.ndim == 0:
        src = src[()]  # a 0-d array is a number, as a numpy scalar is
    if isinstance(src, np.generic):  # a numpy number (shape ()): fills dst, cast as an array
        dst.xp.copyto(dst.data, src, casting="same_kind")
        return dst
    v, _ = _unwrap(src)
    if hasattr(v, "shape"):
        shape = tuple(v.shape)
        if shape != dst.shape and shape != (1, 1):
            raise ValueError(f"cannot copy shape {shape} into a Mat of shape {dst.shape}")
        backend.namespace(dst.data, v)
        dst.xp.copyto(dst.data, v, casting="same_kind")
    else:
        dst.data.fill(v)
    return dst
