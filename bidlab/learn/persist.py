"""Save and load whole objects (fitted estimators, models) in the safe checkpoint format.

:func:`save_object` walks an object's state and writes it as a checkpoint file
(:mod:`bidlab.learn.checkpoint`: numeric arrays in an ``.npz`` plus one JSON document);
:func:`load_object` rebuilds it. Loading never unpickles and never imports or calls
anything named by the file: an object is rebuilt only if its class was registered with
:func:`persistable` by bidlab's own code, and only by setting its attributes, after its
whole state passed :func:`bidlab.learn.persist_check.check_state` (declared names, types,
ranges and shapes). Every failure is a :class:`CheckpointError` naming the field.

What can be saved: None, bools, ints, floats, strings; lists, tuples, sets and dicts of them;
numpy arrays (numbers in the ``.npz``; strings and small object-free arrays in the JSON),
numpy scalars and dtypes; ``Mat`` / ``SMat`` and scipy sparse matrices (as host arrays, so
a model trained on a GPU loads without CuPy); ``numpy.random`` generators (their state);
the types ``int``, ``float``, ``bool``, ``str``; array modules (as numpy); and objects of
registered classes, through their ``__getstate__`` / ``__setstate__`` or ``__dict__``.
An object met twice is saved once and comes back shared. Anything else (a function, an
open file, a thread) is refused at save time with the attribute path that holds it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab import backend
from bidlab.learn.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from bidlab.learn.persist_check import check_state
from bidlab.learn.persistable import PERSISTABLE, alias, lookup, persistable, upgrade
from bidlab.mat import Mat, SMat

__all__ = ["persistable", "save_object", "load_object", "PERSISTABLE"]

KIND = "bidlab-object"
_TYPES = {"int": int, "float": float, "bool": bool, "str": str}


class _Encoder:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.memo: dict[int, int] = {}
        self.keep: list[Any] = []  # holds encoded objects so their ids stay unique

    def array(self, a: np.ndarray) -> str:
        key = f"a/{len(self.arrays)}"
        self.arrays[key] = np.ascontiguousarray(a)
        return key

    def encode(self, v: Any, where: str) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int) and type(v) is int:
            return v
        if isinstance(v, float) and type(v) is float:
            return v if math.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, np.generic):
            if v.dtype.kind not in "biufU":
                raise TypeError(f"cannot save {where}: numpy scalar of dtype {v.dtype}")
            return {"$scalar": v.dtype.str, "v": self.encode(v.item(), where)}
        if isinstance(v, np.dtype):
            return {"$dtype": v.str}
        if isinstance(v, type):
            if issubclass(v, np.generic):
                return {"$dtype": np.dtype(v).str, "type": True}
            for name, t in _TYPES.items():
                if v is t:
                    return {"$type": name}
            raise TypeError(f"cannot save {where}: the class {v.__qualname__}")
        if isinstance(v, list):
            return [self.encode(x, f"{where}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, tuple) and type(v) is tuple:
            return {"$tuple": [self.encode(x, f"{where}[{i}]") for i, x in enumerate(v)]}
        if type(v) in (set, frozenset):
            items = [self.encode(x, f"{where} item") for x in v]
            return {"$set": items, "frozen": type(v) is frozenset}
        if isinstance(v, dict) and type(v) is dict:
            if all(isinstance(k, str) for k in v):
                return {"$dict": {k: self.encode(x, f"{where}.{k}") for k, x in v.items()}}
            return {"$items": [[self.encode(k, f"{where} key"), self.encode(x, f"{where}[{k!r}]")]
                               for k, x in v.items()]}
        if isinstance(v, (ModuleType, backend.HostModule)):
            return {"$xp": "numpy"}  # an array module: arrays are saved on the host
        if backend.is_cupy_array(v):
            v = backend.to_host(v)
        if isinstance(v, np.ndarray):
            return self._ndarray(v, where)
        if isinstance(v, np.random.Generator):
            return {"$generator": self.encode(v.bit_generator.state, where)}
        if isinstance(v, np.random.RandomState):
            st = v.get_state(legacy=False)
            return {"$randomstate": self.encode(st, where)}
        ref = self.memo.get(id(v))
        if ref is not None:
            return {"$ref": ref}
        self.memo[id(v)] = ref = len(self.memo)
        self.keep.append(v)
        if isinstance(v, Mat):
            return {"$mat": self._ndarray(v.numpy(), where), "id": ref}
        if isinstance(v, SMat) or sp.issparse(v):
            csr = (v.numpy() if isinstance(v, SMat) else sp.csr_matrix(v))
            csr = backend.to_host(csr)
            return {"$csr": [self.array(csr.data), self.array(csr.indices),
                             self.array(csr.indptr)], "shape": list(csr.shape),
                    "smat": isinstance(v, SMat), "id": ref}
        name = f"{type(v).__module__}.{type(v).__qualname__}"
        if PERSISTABLE.get(name) is not type(v):
            raise TypeError(f"cannot save {where}: objects of type {name} are not saved by "
                            "bidlab (only numbers, strings, arrays, matrices, containers "
                            "and bidlab's own model classes are)")
        state = v.__getstate__() if hasattr(v, "__getstate__") else v.__dict__
        if state is None:
            state = {}
        return {"$obj": name, "id": ref, "state": self.encode(state, f"{where}.<{name}>")}

    def _ndarray(self, a: np.ndarray, where: str) -> Any:
        if a.dtype.kind in "biuf":
            return {"$array": self.array(a)}
        if a.dtype.kind == "U" or a.dtype.kind == "O" and all(isinstance(x, str)
                                                                 for x in a.reshape(-1)):
            return {"$strings": a.reshape(-1).tolist(), "shape": list(a.shape),
                    "object": a.dtype.kind == "O"}
        raise TypeError(f"cannot save {where}: an array of dtype {a.dtype}")


class _Decoder:
    def __init__(self, arrays: dict[str, np.ndarray], path: Any) -> None:
        self.arrays = arrays
        self.path = path
        self.objs: dict[int, Any] = {}

    def fail(self, what: str) -> CheckpointError:
        return CheckpointError(f"{self.path}: {what}; the file is corrupt or was not written "
                               "by bidlab's save()")

    def array(self, key: Any) -> np.ndarray:
        if not isinstance(key, str) or key not in self.arrays:
            raise self.fail(f"missing array {key!r}")
        return self.arrays[key]

    def decode(self, v: Any, where: str = "") -> Any:
        """The value ``v`` encodes; ``where`` (``model_.modelmats[0]``) names it in errors."""
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.decode(x, f"{where}[{i}]") for i, x in enumerate(v)]
        if not isinstance(v, dict) or len(v) == 0:
            raise self.fail(f"unreadable value {v!r:.60}")
        tag = next(iter(v))
        body = v[tag]
        if tag == "$float":
            if body not in ("nan", "inf", "-inf"):
                raise self.fail(f"bad float {body!r:.20}")
            return float(body)
        if tag == "$scalar":
            return np.dtype(self._dtype(body)).type(self.decode(v.get("v")))
        if tag == "$dtype":
            dt = np.dtype(self._dtype(body))
            return dt.type if v.get("type") else dt
        if tag == "$type":
            if body not in _TYPES:
                raise self.fail(f"unknown type name {body!r:.40}")
            return _TYPES[body]
        if tag == "$tuple":
            return tuple(self.decode(x, f"{where}[{i}]") for i, x in enumerate(self._list(body)))
        if tag == "$set":
            items = [self._key(self.decode(x, where)) for x in self._list(body)]
            return frozenset(items) if v.get("frozen") else set(items)
        if tag == "$dict":
            if not isinstance(body, dict):
                raise self.fail("bad dict")
            dot = f"{where}." if where else ""
            return {k: self.decode(x, f"{dot}{k}") for k, x in body.items()}
        if tag == "$items":
            return {self._key(self.decode(k, where)): self.decode(x, f"{where}[{k!r:.20}]")
                    for k, x in self._list(body)}
        if tag == "$array":
            return self.array(body)
        if tag == "$strings":
            shape = tuple(int(n) for n in self._list(v.get("shape")))
            flat = np.array([str(s) for s in self._list(body)],
                            dtype=object if v.get("object") else None)
            if flat.size != math.prod(shape):
                raise self.fail("string array of the wrong size")
            return flat.reshape(shape)
        if tag == "$generator":
            state = self.decode(body, where)
            name = state.get("bit_generator") if isinstance(state, dict) else None
            if name not in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"):
                raise self.fail(f"unknown bit generator {name!r:.40}")
            bitgen = getattr(np.random, name)()
            self._random_state(where, lambda: setattr(bitgen, "state", state))
            return np.random.Generator(bitgen)
        if tag == "$randomstate":
            rs = np.random.RandomState()
            state = self.decode(body, where)
            self._random_state(where, lambda: rs.set_state(state))
            return rs
        if tag == "$xp":
            return np
        if tag == "$ref":
            if body not in self.objs:
                raise self.fail(f"reference to unknown object {body!r:.20}")
            return self.objs[body]
        if tag == "$mat":
            return self._remember(v, Mat(self.decode(body, where)))
        if tag == "$csr":
            data, indices, indptr = (self.array(k) for k in self._list(body))
            shape = tuple(int(n) for n in self._list(v.get("shape")))
            try:
                m = sp.csr_matrix((data, indices, indptr), shape=shape)
                m.check_format(full_check=True)
            except (ValueError, TypeError) as exc:
                raise self.fail(f"invalid sparse matrix ({exc})") from None
            return self._remember(v, SMat(m) if v.get("smat") else m)
        if tag == "$obj":
            cls = lookup(body) if isinstance(body, str) else None
            if cls is None:
                raise self.fail(f"object of unknown class {body!r:.80} (only bidlab's own "
                                "model classes load)")
            obj = cls.__new__(cls)
            self._remember(v, obj)
            state = self.decode(v.get("state"), where)
            built = upgrade(cls, state)
            if built is not cls:  # an earlier class, now split: build the one it was
                obj.__class__ = cls = built
            try:
                check_state(cls, state, where)
            except ValueError as exc:
                raise CheckpointError(f"{self.path}: {exc}") from None
            if hasattr(obj, "__setstate__"):
                obj.__setstate__(state)
            elif isinstance(state, dict):
                obj.__dict__.update(state)
            else:
                raise self.fail(f"bad state for {body}")
            return obj
        raise self.fail(f"unknown tag {tag!r:.20}")

    def _random_state(self, where: str, apply: Any) -> None:
        """Set a random generator's state, refusing one numpy will not take."""
        try:
            apply()
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            raise CheckpointError(f"{self.path}: {where or 'the saved object'}: an invalid "
                                  f"random generator state ({type(exc).__name__}: {exc}); "
                                  "the file is corrupt or was not written by bidlab's "
                                  "save()") from None

    def _remember(self, v: dict, obj: Any) -> Any:
        ref = v.get("id")
        if isinstance(ref, int):
            self.objs[ref] = obj
        return obj

    def _list(self, x: Any) -> list:
        if not isinstance(x, list):
            raise self.fail("expected a list")
        return x

    def _key(self, k: Any) -> Any:
        try:
            hash(k)
        except TypeError:
            raise self.fail("unhashable dict key") from None
        return k

    def _dtype(self, s: Any) -> str:
        if not isinstance(s, str) or len(s) > 8:
            raise self.fail(f"bad dtype {s!r:.20}")
        try:
            dt = np.dtype(s)
        except TypeError:
            raise self.fail(f"bad dtype {s!r:.20}") from None
        if dt.kind not in "biufU" or dt.itemsize > 64:
            raise self.fail(f"dtype {s!r:.20} is not allowed")
        return s


def save_object(path: str | os.PathLike, obj: Any, meta: dict[str, Any] | None = None) -> Path:
    """Write ``obj`` (see the module docstring for what it may hold) atomically to ``path``."""
    _register_spine()
    enc = _Encoder()
    root = enc.encode(obj, type(obj).__name__)
    return save_checkpoint(path, enc.arrays, {"kind": KIND, "root": root, **(meta or {})})


def load_object(path: str | os.PathLike) -> Any:
    """Rebuild the object :func:`save_object` wrote (CheckpointError names what is wrong)."""
    _register_spine()
    ck = load_checkpoint(path)
    if ck.meta.get("kind") != KIND or "root" not in ck.meta:
        raise CheckpointError(f"{path} is a bidlab checkpoint but not a saved model: load a "
                              "learner's checkpoint with Learner.load(path)")
    try:
        root = ck.meta["root"]
        name = root.get("$obj") if isinstance(root, dict) else None
        where = name.rsplit(".", 1)[-1] if isinstance(name, str) else ""
        return _Decoder(ck.arrays, path).decode(root, where)
    except CheckpointError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        raise CheckpointError(f"{path}: the saved state does not fit this bidlab "
                              f"({type(exc).__name__}: {exc})") from None


def _register_spine() -> None:
    from bidlab.learn.datasource import DataInfo
    from bidlab.learn.hyper import Hyper
    from bidlab.learn.option_row import Option
    from bidlab.learn.options import Change, Options
    from bidlab.learn.staging import MatSpec

    for cls in (Options, Option, Change, Hyper, DataInfo, MatSpec):
        persistable(cls)
    alias("bidlab.learn.options.Option", Option)  # files saved before option_row.py split off
