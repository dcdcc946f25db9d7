"""Checks on what a shard folder declares and holds (used by :mod:`bidlab.learn.shards`).

* :func:`check_matrices`: a manifest's ``"matrices"`` list is well formed;
* :func:`check_names`: the names :func:`~bidlab.learn.shards.write_shards` is given make
  distinct ``.npz`` members (a repeated name would overwrite another matrix's arrays);
* :func:`check_stored`: the arrays a shard holds have the dtypes its manifest declares
  (read as declared, a float column in an int8 container would lose its values silently).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["check_matrices", "check_names", "check_stored", "members"]


def members(name: str, sparse: bool) -> tuple[str, ...]:
    """The ``.npz`` members that hold matrix ``name`` in a shard.

    Examples
    --------
    >>> members("X", True), members("y", False)
    (('X__data', 'X__indices', 'X__indptr'), ('y',))
    """
    return (f"{name}__data", f"{name}__indices", f"{name}__indptr") if sparse else (name,)


def check_names(names: tuple[Any, ...], sparse: list[bool]) -> None:
    """Raise ValueError unless ``names`` are non-empty strings whose shard members are
    all distinct (one name per matrix, ``sparse[i]``: matrix ``i`` is stored as CSR).

    Examples
    --------
    >>> check_names(("X", "y"), [True, False]) is None
    True
    """
    seen: set[str] = set()
    for name, sp_ in zip(names, sparse, strict=True):
        ok = isinstance(name, str) and bool(name)
        mine = members(name, sp_) if ok else ()
        if not ok or seen.intersection(mine):
            raise ValueError(f"write_shards: matrix names must be distinct non-empty strings "
                             f"(each names .npz members of its own); got {tuple(names)!r}: "
                             "give other names=...")
        seen.update(mine)


def check_matrices(mats: Any) -> None:
    """Raise ValueError / TypeError / KeyError unless ``mats`` describes >= 1 matrix, each
    with a name, a kind (csr or dense), cols >= 0, a numeric dtype, an integer index dtype
    and a well-formed row-length histogram (lengths and counts >= 0)."""
    if not isinstance(mats, list) or not mats:
        raise ValueError("it lists no matrices")
    for m in mats:
        if not isinstance(m["name"], str) or m["kind"] not in ("csr", "dense"):
            raise ValueError(f"matrix entry {m!r:.80} needs a name and kind 'csr' or 'dense'")
        if int(m["cols"]) < 0 or np.dtype(m["dtype"]).kind not in "biuf":
            raise ValueError(f"matrix {m['name']!r} has cols {m['cols']!r} and dtype "
                             f"{m['dtype']!r}: it needs cols >= 0 and a numeric dtype")
        if m["kind"] == "csr":
            if np.dtype(m.get("index_dtype", "int32")).kind not in "iu":
                raise ValueError(f"matrix {m['name']!r} has index_dtype {m['index_dtype']!r}")
            for length, count in m.get("row_nnz_hist", []):
                if int(length) < 0 or int(count) < 0:
                    raise ValueError(f"matrix {m['name']!r} has a row_nnz_hist entry "
                                     f"{[length, count]!r}: row lengths and counts are >= 0")


def check_stored(m: dict[str, Any], arrays: tuple[np.ndarray, ...]) -> None:
    """Raise ValueError unless the arrays of manifest matrix ``m`` (its members, in
    :func:`members` order) have the dtypes the manifest declares."""
    want = [np.dtype(m["dtype"])]
    if m["kind"] == "csr":
        index = np.dtype(m.get("index_dtype", "int32"))
        want += [index, index]
    for member, a, dt in zip(members(m["name"], m["kind"] == "csr"), arrays, want,
                             strict=True):
        if a.dtype != dt:
            raise ValueError(f"{member!r} holds {a.dtype} but the manifest declares {dt}")
