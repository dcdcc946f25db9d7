"""A learner's run as TensorBoard event files (the ``tensorboard`` extra: tensorboardX).

:class:`TensorBoardWriter` is an observer: ``learner.observe(TensorBoardWriter(logdir))``
writes the live metrics (scores, throughput, cache, KPIs) as scalars at each snapshot,
from the observer thread, so training never waits for the disk; it flushes when the run
pauses or ends. :meth:`TensorBoardWriter.write_history` writes a finished run's per-minibatch record
(every minibatch's score, not only the ones a snapshot saw). Open the folder with
``tensorboard --logdir LOGDIR``; :func:`read_scalars` reads the files back without
TensorBoard (tests, notebooks). tensorboardX needs neither TensorFlow nor PyTorch.
"""

from __future__ import annotations

import itertools
import math
import os
import struct
import time
from pathlib import Path
from typing import Any

__all__ = ["TensorBoardWriter", "read_scalars"]

#: metric name in a snapshot -> the scalar's tag in TensorBoard.
LIVE_TAGS: dict[str, str] = {
    "train_score": "score/train",
    "val_score": "score/val",
    "samples_per_s": "speed/samples_per_s",
    "gflops": "speed/gflops",
    "mb_per_s": "speed/mb_per_s",
    "cache_bytes": "memory/cache_bytes",
    "progress": "progress",
}
_FLUSHED = ("paused", "done", "stopped", "failed")  # snapshot states written to disk at once
_SERIAL = itertools.count()  # this process's event files, for names of their own


class _EventFile:
    """Scalars written straight into an event file of its own, in the caller's thread.

    tensorboardX's ``SummaryWriter`` queues events for a thread of its own and its
    ``flush`` leaves the queued ones out; it also names its file by the second and the
    host only, so a second writer opened on the same folder in that second truncates the
    first one's file. Here every event is in the file when :meth:`flush` returns, and the
    name ends with the process id and a serial number.
    """

    def __init__(self, logdir: Path, flush_secs: float) -> None:
        try:
            from tensorboardX.event_file_writer import EventsWriter
            from tensorboardX.proto import event_pb2
            from tensorboardX.summary import scalar
        except ImportError:
            raise ImportError("TensorBoardWriter needs tensorboardX: pip install "
                              "'bidlab[tensorboard]' (or pip install tensorboardX)") from None
        self._event, self._summary = event_pb2.Event, scalar
        self._file = EventsWriter(str(logdir / "events"), f".{os.getpid()}.{next(_SERIAL)}")
        self._every = max(1.0, float(flush_secs))
        self._due = time.monotonic() + self._every
        self._closed = False

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        if self._closed:
            return
        self._file.write_event(self._event(wall_time=time.time(), step=step,
                                           summary=self._summary(tag, value)))
        if time.monotonic() >= self._due:
            self.flush()

    def flush(self) -> None:
        if not self._closed:
            self._file.flush()
            self._due = time.monotonic() + self._every

    def close(self) -> None:
        if not self._closed:
            self._file.close()
            self._closed = True


class TensorBoardWriter:
    """Writes a learner's metrics as TensorBoard scalars; an observer callback.

    Parameters
    ----------
    logdir : path
        The folder the event files go to (created when missing); one per run is usual.
    flush_secs : float
        How often the event file is flushed to disk while training runs (also when it
        pauses or ends, and at :meth:`flush`).

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from bidlab.learn import Learner
    >>> from bidlab.models.lsq import LeastSquares
    >>> X = np.random.default_rng(0).random((200, 3)); Y = X @ np.ones((3, 1))
    >>> lrn = Learner(LeastSquares(), (X, Y), n_passes=2, batch_size=50)
    >>> logdir = tempfile.mkdtemp()
    >>> writer = TensorBoardWriter(logdir)
    >>> sub = lrn.observe(writer, rate=50)
    >>> _ = lrn.fit(progress=None)
    >>> writer.write_history(lrn)
    >>> "history/score_train" in read_scalars(logdir)
    True
    """

    def __init__(self, logdir: str | os.PathLike, flush_secs: float = 10.0) -> None:
        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        self._writer = _EventFile(self.logdir, flush_secs)
        self._last_step = -1
        self.written = 0  #: scalars written so far

    def __call__(self, snapshot: Any) -> None:
        """Write one observer snapshot's metrics (skipped when its step was written)."""
        step = int(snapshot.step)
        if step != self._last_step:
            self._last_step = step
            metrics = snapshot.metrics
            for name, tag in LIVE_TAGS.items():
                self._scalar(tag, metrics.get(name), step)
            for name, value in metrics.items():
                if name.startswith("kpi_"):
                    self._scalar(f"kpi/{name[4:]}", value, step)
        if snapshot.state in _FLUSHED:
            self.flush()

    def _scalar(self, tag: str, value: Any, step: int) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
                value):
            self._writer.add_scalar(tag, float(value), step)
            self.written += 1

    def write_history(self, learner: Any) -> None:
        """Write ``learner``'s per-minibatch record: ``history/score_train`` and
        ``history/score_val`` (the held-out minibatches) by step, and ``history/rows``."""
        rec = learner.history()
        for step, val, score, n in zip(rec["step"].tolist(), rec["val"].tolist(),
                                       rec["score"].tolist(), rec["n"].tolist(), strict=True):
            self._scalar("history/score_val" if val else "history/score_train", score, step)
            self._scalar("history/rows", n, step)
        self.flush()

    def flush(self) -> None:
        """Write what is buffered to disk."""
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file (a closed writer writes nothing more)."""
        self._writer.close()

    def __enter__(self) -> TensorBoardWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _records(path: Path) -> Any:
    """The records of a TFRecord file (length, its CRC, data, its CRC; CRCs not checked)."""
    with open(path, "rb") as f:
        while True:
            head = f.read(12)
            if len(head) < 12:
                return
            (length,) = struct.unpack("<Q", head[:8])
            data = f.read(length)
            f.read(4)
            if len(data) < length:
                return
            yield data


def read_scalars(logdir: str | os.PathLike) -> dict[str, list[tuple[int, float]]]:
    """The scalars in a folder's event files: tag -> [(step, value), ...] in file order.

    Parameters
    ----------
    logdir : path
        A folder written by :class:`TensorBoardWriter` (or any tensorboardX writer).

    Returns
    -------
    dict
        One list per tag; empty when the folder holds no event file.

    Examples
    --------
    >>> import tempfile
    >>> read_scalars(tempfile.mkdtemp())
    {}
    """
    try:
        from tensorboardX.proto import event_pb2
    except ImportError:
        raise ImportError("read_scalars needs tensorboardX: pip install "
                          "'bidlab[tensorboard]'") from None
    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(Path(logdir).glob("events.out.tfevents.*")):
        for data in _records(path):
            event = event_pb2.Event.FromString(data)
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    out.setdefault(value.tag, []).append((int(event.step),
                                                          float(value.simple_value)))
    return out
