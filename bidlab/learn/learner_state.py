"""A learner's state in a checkpoint file: what is written, and what a loaded file may set.

:func:`write` puts the model matrices, the model's extra state, the updater's state and
counters, the option values and the progress counters into one checkpoint
(:mod:`bidlab.learn.checkpoint`). :func:`restore` reads one back into a learner's parts
only after checking all of it -- model type, shapes, counters, progress -- so a file that
does not fit changes nothing. A checkpoint carries option values, never paths: where the
learner writes stays the learner's own choice, whatever a (crafted) file says.

A model made with something no option records (a GLM's links) says what in
:meth:`~bidlab.learn.model.Model.made_with` (name -> JSON-able value); the file keeps it,
and a file whose values differ from the model's is refused rather than loaded into a model
that would read its matrices another way.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from bidlab.learn.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from bidlab.learn.checkpoint_values import check_values
from bidlab.learn.model import Model
from bidlab.learn.rowstate import row_state_keys

__all__ = ["write", "restore", "SavedObjectError", "SaveRequest"]

_LIMIT = 1 << 62


class SaveRequest:
    """A checkpoint a caller asked the training thread to write (:meth:`Learner.save`
    while it runs): ``done`` is set once written, with ``error`` or ``retry`` (the run
    ended first: the caller writes it)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.retry = False


class SavedObjectError(CheckpointError):
    """The file given as a learner's checkpoint is a saved model (``est.save``)."""


def write(path: str, name: str, opts: Any, model: Any, updater: Any, mixins: list[Any],
          progress: dict[str, Any], rows: bool = True) -> None:
    """Write the learner's parts and ``progress`` (pass, index, step, samples, elapsed);
    ``rows=False``: not the model's per-row state (a file shared by ranks that each keep
    their own rows'; :attr:`bidlab.learn.comm.Communicator.shared_checkpoint`)."""
    arrays: dict[str, np.ndarray] = {}
    for i, m in enumerate(model.modelmats):
        arrays[f"model/{i}"] = np.array(m.numpy(), copy=True)
    extra = model.extra_state()
    skip = set() if rows else row_state_keys(extra)
    for key, m in extra.items():
        if key not in skip:
            arrays[f"model_extra/{key}"] = np.array(m.numpy(), copy=True)
    for key, m in updater.state().items():
        arrays[f"updater/{key}"] = np.array(m.numpy(), copy=True)
    meta = {
        "name": name,
        "model": type(model).__name__,
        "updater": type(updater).__name__,
        "mixins": [type(m).__name__ for m in mixins],
        "options": {k: (list(v) if isinstance(v, tuple) else v)
                    for k, v in opts.as_dict().items()},
        "progress": progress,
        "updater_counters": updater.counters(),
        "model_counters": model.counters(),
        "shapes": [list(m.shape) for m in model.modelmats],
        "made_with": _made_with(model),
    }
    save_checkpoint(path, arrays, meta)


def restore(path: str, opts: Any, model: Any, updater: Any, batches_per_pass: int | None,
            ensure_initialised: Callable[..., None], rows: bool = True,
            check_progress: Callable[[dict[str, Any]], None] | None = None
            ) -> dict[str, Any]:
    """Load ``path`` into the learner's parts; return its checked progress counters
    (``"row"``: the first row of the next minibatch in its pass, None in a file written
    before checkpoints kept it). ``check_progress(progress)`` may refuse the position
    (raising) before anything is written.

    Options are restored first (they may shape the model), then ``ensure_initialised``
    makes the model (``ensure_initialised(rebuild=True)`` makes it again when it was built
    with other values of its fixed options: a checkpoint of a model whose topics were
    merged holds fewer of them); every shape and counter is checked before any matrix is
    written.
    """
    ck = load_checkpoint(path)
    meta = ck.meta
    want = type(model).__name__
    if meta.get("kind") == "bidlab-object":  # what est.save writes, not a learner's file
        raise SavedObjectError(f"{path} is a saved {meta.get('estimator') or 'object'} (written "
                              "by save(path)), not a learner's checkpoint: read it with "
                              "bidlab.models.load(path)")
    if meta.get("model") not in _model_names(type(model)):
        raise CheckpointError(f"checkpoint {path} holds a {meta.get('model')!r} model but "
                              f"this learner trains a {want!r}")
    _check_made_with(path, meta, model)
    try:
        mats = ck.modelmats
    except KeyError:
        raise CheckpointError(f"checkpoint {path} lacks model matrices") from None
    progress = _checked_progress(path, meta.get("progress", {}))
    saved = meta.get("options", {})
    if not isinstance(saved, dict):
        raise CheckpointError(f"checkpoint {path}: options are not a table")
    carried = {k: v for k, v in saved.items()
               if k in opts.specs and opts.specs[k].type != "path"}
    counters = meta.get("updater_counters", {})
    if not isinstance(counters, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in counters.values()):
        raise CheckpointError(f"checkpoint {path}: updater counters are not numbers")
    model_counters = meta.get("model_counters", {})
    if not isinstance(model_counters, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and abs(v) < _LIMIT
            for v in model_counters.values()):
        raise CheckpointError(f"checkpoint {path}: model counters are not whole numbers")
    if (batches_per_pass is not None and progress["row"] is None
            and progress["index"] > batches_per_pass):
        raise CheckpointError(f"checkpoint {path}: minibatch index {progress['index']} is "
                              f"beyond this data's {batches_per_pass} minibatches per pass")
    if check_progress is not None:
        check_progress(progress)
    fixed = {k for k, spec in opts.specs.items() if not spec.live and spec.owner != "Learner"}
    before = {k: opts.get(k) for k in fixed & set(carried)}
    previous = {k: opts.get(k) for k in carried}
    try:
        opts.restore(carried)
    except ValueError as exc:
        raise CheckpointError(f"checkpoint {path} holds an invalid option: {exc}") from None
    rebuild = model.initialised and any(opts.get(k) != v for k, v in before.items())
    kept = _kept(model, updater) if rebuild else None
    try:
        ensure_initialised(rebuild=rebuild)
        extra, extra_saved, upd_saved, fresh = _checked_state(path, ck, model, updater, rows)
        check_values(path, model, mats, extra_saved, upd_saved, model_counters)
        try:
            model.check_extra_state(extra_saved)
        except ValueError as exc:
            raise CheckpointError(f"checkpoint {path}: {exc}") from None
    except BaseException:  # the file does not fit: the learner keeps its options and model
        opts.restore(previous)
        if kept is not None:
            ensure_initialised(rebuild=True)
            _put_back(kept)
        raise
    # every check passed: now write
    for m, a in zip(model.modelmats, mats, strict=True):
        m.data[...] = m.xp.asarray(a.astype(m.dtype, copy=False))
    for key, a in extra_saved.items():
        if key in extra:
            extra[key].data[...] = extra[key].xp.asarray(a)
    for key in fresh:  # per-row state not in the file: the rows start afresh
        extra[key].data.fill(0)
    updater.load_state(upd_saved)
    updater.set_counters(counters)
    model.set_counters(model_counters)
    if fresh:
        model.rows_reset()
    model.restored({k: a for k, a in extra_saved.items() if k not in extra})
    return progress


def _kept(model: Any, updater: Any) -> tuple[list[tuple[Any, dict[str, Any]]],
                                           list[tuple[Any, Any]]]:
    """What a rebuild for a checkpoint replaces, to put back if the file is refused: the
    model's and the updater's attributes, and a copy of every array the model holds (a
    rebuild may write into them). Taken only on that path: a load that needs no rebuild
    checks the file before it writes anything."""
    arrays = [(m, m.data.copy()) for m in (*model.modelmats, *model.extra_state().values())]
    return [(part, dict(vars(part))) for part in (model, updater)], arrays


def _put_back(kept: tuple[list[tuple[Any, dict[str, Any]]], list[tuple[Any, Any]]]) -> None:
    """Undo a rebuild (:func:`_kept`): the trained model and updater state as they were."""
    attrs, arrays = kept
    for part, values in attrs:
        vars(part).clear()
        vars(part).update(values)
    for m, a in arrays:
        m.data[...] = a


def _checked_state(path: str, ck: Any, model: Any, updater: Any, rows: bool
                   ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], set[str]]:
    """The model's state now, the file's model and updater state to write, and the per-row
    state that starts afresh; CheckpointError when a shape does not fit this model."""
    shapes = [m.shape for m in model.modelmats]
    got = [tuple(a.shape) for a in ck.modelmats]
    if got != shapes:
        raise CheckpointError(f"checkpoint {path} has model matrices of shapes {got}, but "
                              f"this model has {shapes} (different data or options?)")
    grown = model.grown_state  # lengths vary: handed to model.restored
    extra = {k: m for k, m in model.extra_state().items() if k not in grown}
    extra_saved = ck.group("model_extra")
    fresh = row_state_keys(extra) - (set(extra_saved) if rows else set())
    if not rows:  # this rank's own rows: the file holds another rank's, or none
        extra_saved = {k: a for k, a in extra_saved.items() if k not in row_state_keys(
            set(extra_saved) | set(extra))}
    upd_now, upd_saved = updater.state(), ck.group("updater")
    for what, now, saved_mats in (("model state", extra, extra_saved),
                                  ("updater state", upd_now, upd_saved)):
        for key, a in saved_mats.items():
            like = (tuple(now[key].shape) if key in now
                    else _lazy_state_shape(key, shapes) if what == "updater state" else None)
            if like is not None and tuple(a.shape) != like:
                raise CheckpointError(f"checkpoint {path}: {what} {key!r} has shape "
                                      f"{tuple(a.shape)}, this learner's {like} (different "
                                      "data or options?)")
    return extra, extra_saved, upd_saved, fresh


def _made_with(model: Any) -> dict[str, Any]:
    """The model's ``made_with()`` as the file keeps it (JSON's lists)."""
    return json.loads(json.dumps(model.made_with()))


def _check_made_with(path: str, meta: dict[str, Any], model: Any) -> None:
    """CheckpointError when the file's model was made with other values than ``model``
    (a file without them, written before models kept them, is not checked)."""
    saved, now = meta.get("made_with"), _made_with(model)
    if not isinstance(saved, dict):
        return
    for key in sorted(set(saved) & set(now)):
        if saved[key] != now[key]:
            was, has = _shown(saved[key]), _shown(now[key])
            raise CheckpointError(
                f"checkpoint {path} holds a {meta.get('model')} made with {key} {was}, but "
                f"this learner's is made with {key} {has}: its matrices would be read with "
                f"the wrong {key}. Load it into a model made with {key} {was} (an "
                f"estimator's {key}={was}), or train this one afresh with a checkpoint path "
                "of its own")


def _shown(value: Any) -> str:
    """A file's value in a message: a list of one as that one (``'logistic'``)."""
    return repr(value[0] if isinstance(value, list) and len(value) == 1 else value)


def _model_names(cls: type) -> set[str]:
    """The model class names a checkpoint may hold for a ``cls`` model: its own and its
    model bases' (a class since split into subclasses wrote the base's name)."""
    return {k.__name__ for k in cls.__mro__ if issubclass(k, Model) and k is not Model}


def _lazy_state_shape(key: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The shape of updater state allocated on first use and named after model matrix
    ``i`` (``velocity0``, ``average_sum1``): that matrix's shape; None for other names."""
    stem = key.rstrip("0123456789")
    if stem == key or stem not in ("velocity", "average_sum"):
        return None
    i = int(key[len(stem):])
    return tuple(shapes[i]) if i < len(shapes) else (-1,)


def _checked_progress(path: str, prog: Any) -> dict[str, Any]:
    """A checkpoint's progress counters, refused unless they are sane numbers."""
    if not isinstance(prog, dict):
        raise CheckpointError(f"checkpoint {path}: progress is not a table")
    out: dict[str, Any] = {}
    for key in ("pass", "index", "step", "samples"):
        v = prog.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < _LIMIT:
            raise CheckpointError(f"checkpoint {path}: progress {key!r} must be a whole "
                                  f"number >= 0; got {v!r}")
        out[key] = v
    row = prog.get("row")
    if row is not None and (isinstance(row, bool) or not isinstance(row, int)
                            or not 0 <= row < _LIMIT):
        raise CheckpointError(f"checkpoint {path}: progress 'row' must be a whole number "
                              f">= 0; got {row!r}")
    if row is not None and (out["index"] > row or (row == 0) != (out["index"] == 0)):
        row = None  # no run writes this pair: resumed by the minibatch index, checked
    out["row"] = row
    e = prog.get("elapsed", 0.0)
    if isinstance(e, bool) or not isinstance(e, (int, float)) or not 0 <= e < 1e12:
        raise CheckpointError(f"checkpoint {path}: progress 'elapsed' must be seconds >= 0; "
                              f"got {e!r}")
    out["elapsed"] = float(e)
    return out
