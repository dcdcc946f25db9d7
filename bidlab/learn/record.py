"""The per-minibatch record: a bounded ring buffer of preallocated numpy columns.

One row per minibatch the learner processed: global step, pass, index in the pass, time
stamp, rows, whether it was held out for validation, its score, and the version of the
option set it used (look the values up with ``learner.option_used(name, step)``). The
oldest rows are overwritten once ``capacity`` is reached; nothing grows.

Also here: :class:`PassStats` (the sums behind a pass's summary line) and
:class:`ScoreSink`, which turns the scores models return into floats -- at once on the
host, and on a GPU batched (one device-to-host sync per 64 minibatches) so the training
stream is not stalled every step.
"""

from __future__ import annotations

import csv
import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bidlab import backend

__all__ = ["RunRecord", "PassStats", "ScoreSink"]

_COLUMNS = {
    "step": np.int64,
    "pass": np.int32,
    "index": np.int32,
    "time": np.float64,
    "n": np.int32,
    "val": np.bool_,
    "score": np.float64,
    "opts_version": np.int64,
}


class RunRecord:
    """Ring buffer of per-minibatch facts (thread-safe: written by the training thread)."""

    def __init__(self, capacity: int = 100_000) -> None:
        if capacity < 1:
            raise ValueError(f"record capacity must be >= 1; got {capacity}")
        self.capacity = int(capacity)
        self._cols = {k: np.zeros(self.capacity, dtype=t) for k, t in _COLUMNS.items()}
        self._count = 0  # rows written into these columns
        self._dropped = 0  # rows written before a resize that it did not keep
        self._lock = threading.Lock()

    def append(self, step: int, pass_: int, index: int, time: float, n: int, val: bool,
               score: float, opts_version: int) -> int:
        """Write one row; return its slot (for a score filled in later)."""
        with self._lock:
            i = self._count % self.capacity
            c = self._cols
            c["step"][i], c["pass"][i], c["index"][i] = step, pass_, index
            c["time"][i], c["n"][i], c["val"][i] = time, n, val
            c["score"][i], c["opts_version"][i] = score, opts_version
            self._count += 1
            return i

    def set_score(self, slot: int, step: int, score: float) -> None:
        """Fill in a deferred score (ignored when the slot was overwritten meanwhile)."""
        with self._lock:
            if self._cols["step"][slot] == step:
                self._cols["score"][slot] = score

    def __len__(self) -> int:
        return min(self._count, self.capacity)

    @property
    def total(self) -> int:
        """Rows ever written (including overwritten ones)."""
        return self._dropped + self._count

    def resize(self, capacity: int) -> None:
        """Keep up to ``capacity`` rows from now on; the newest rows held stay.

        Examples
        --------
        >>> rec = RunRecord(4)
        >>> for step in range(6):
        ...     _ = rec.append(step, 0, step, 0.0, 1, False, 0.0, 0)
        >>> rec.resize(2)
        >>> rec.as_dict()["step"].tolist(), rec.capacity, rec.total
        ([4, 5], 2, 6)
        """
        if capacity < 1:
            raise ValueError(f"record capacity must be >= 1; got {capacity}")
        rows = self.as_dict()
        with self._lock:
            held = len(rows["step"])
            keep = min(held, int(capacity))
            self._cols = {k: np.zeros(int(capacity), dtype=t) for k, t in _COLUMNS.items()}
            for k, col in self._cols.items():
                col[:keep] = rows[k][held - keep:]
            self._dropped += self._count - keep
            self._count = keep
            self.capacity = int(capacity)

    def as_dict(self) -> dict[str, np.ndarray]:
        """Copies of the columns, oldest row first."""
        with self._lock:
            n, cap = self._count, self.capacity
            if n <= cap:
                return {k: v[:n].copy() for k, v in self._cols.items()}
            i = n % cap
            return {k: np.concatenate([v[i:], v[:i]]) for k, v in self._cols.items()}

    def as_frame(self) -> Any:
        """:meth:`as_dict` as a pandas DataFrame (one row per minibatch)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("history(as_frame=True) needs pandas: pip install pandas, or "
                              "use history() (numpy columns) or to_csv(path)") from None
        return pd.DataFrame(self.as_dict())

    def to_csv(self, path: str | os.PathLike) -> Path:
        """Write :meth:`as_dict` to ``path`` as CSV with a header row; returns the path."""
        cols = self.as_dict()
        path = Path(path)
        with open(path, "w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(list(cols))
            for row in zip(*(c.tolist() for c in cols.values()), strict=True):
                out.writerow([repr(v) if isinstance(v, float) else int(v) if
                              isinstance(v, bool) else v for v in row])
        return path

    def last(self) -> dict[str, float] | None:
        """The newest row as a dict, or None."""
        with self._lock:
            if self._count == 0:
                return None
            i = (self._count - 1) % self.capacity
            return {k: v[i].item() for k, v in self._cols.items()}

    def clear(self) -> None:
        with self._lock:
            self._count = self._dropped = 0


@dataclass
class PassStats:
    """Sums over the current pass (training thread only)."""

    pass_: int = 0
    train_sum: float = 0.0
    train_n: int = 0
    val_sum: float = 0.0
    val_n: int = 0
    samples: int = 0
    seconds: float = 0.0
    flops: float = 0.0
    nbytes: int = 0

    def reset(self, pass_: int) -> None:
        self.__init__(pass_)  # type: ignore[misc]

    @property
    def train(self) -> float:
        return self.train_sum / self.train_n if self.train_n else math.nan

    @property
    def val(self) -> float:
        return self.val_sum / self.val_n if self.val_n else math.nan


class ScoreSink:
    """Turns scores into floats: at once on the host; batched (one sync per 64) on a GPU."""

    def __init__(self, on_value: Any, device_buffer: Any = None) -> None:
        self.on_value = on_value
        self._pending: list[tuple] = []
        self._dev: Any = device_buffer  # reused across runs, so a second fit allocates nothing

    @property
    def device_buffer(self) -> Any:
        """The 64-slot device buffer of pending GPU scores (None until a GPU score came)."""
        return self._dev

    def push(self, score: Any, meta: tuple) -> None:
        if score is None:
            self.on_value(meta, math.nan)
            return
        data = getattr(score, "data", score)
        if backend.is_cupy_array(data):
            cp = backend.cupy()
            if self._dev is None:
                self._dev = backend.empty((64,), np.float64, cp)
            k = len(self._pending)
            self._dev[k : k + 1] = data.reshape(-1)[:1]  # device-side copy, no sync
            self._pending.append(meta)
            if len(self._pending) == 64:
                self.flush()
            return
        if hasattr(data, "reshape"):
            value = float(np.asarray(data).reshape(-1)[0])
        else:
            value = float(data)
        self.on_value(meta, value)

    def flush(self) -> None:
        if not self._pending:
            return
        host = backend.to_host(self._dev[: len(self._pending)])
        pending, self._pending = self._pending, []
        for meta, v in zip(pending, host, strict=True):
            self.on_value(meta, float(v))
