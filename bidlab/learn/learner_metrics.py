"""What a :class:`~bidlab.learn.learner.Learner` tells about its run: progress, metrics,
per-pass summaries, the per-minibatch record as columns, a DataFrame or CSV. A base of
``Learner``, not used on its own: its methods read the learner's record and counters.
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn.progress import PassLines, format_scores, format_summary
from bidlab.mat import cache_stats

__all__ = ["LearnerMetrics"]


class LearnerMetrics:
    """The metrics and history of :class:`~bidlab.learn.learner.Learner`."""

    @property
    def progress(self) -> float:
        """Fraction done (0..1) by passes, or by ``max_steps`` when that comes first: where
        the training is, also for a run that ended early (the ``progress`` of
        :attr:`metrics`, what observers and dashboards show, reads 1 there)."""
        p, i = self._pos
        bpp = self.source.batches_per_pass
        frac = (p + (i / bpp if bpp else 0.0)) / self.opts.n_passes
        if self.opts.max_steps:
            frac = max(frac, self.step / self.opts.max_steps)
        return float(min(1.0, frac))

    def _shown_progress(self, state: str) -> float:
        """The ``progress`` that :attr:`metrics` (observers, dashboards, the learners panel)
        report in ``state``: 1 once a run has finished before its ``n_passes`` (its model
        converged, its data source ran out), as ``fit()``'s bar then ends full; a run
        stopped or failed reads where it ended (:attr:`progress`)."""
        if state == "done" and getattr(self, "_finished", False):
            return 1.0
        return self.progress

    @property
    def metrics(self) -> dict[str, Any]:
        """The latest metrics (a copy): state, step, pass, scores, speeds, cache, KPIs."""
        with self._metrics_lock:
            out = dict(self._metrics)
        out["state"] = self._state
        return out

    def summary(self) -> dict[str, Any]:
        """What the registry shows for this learner."""
        m = self.metrics
        return {k: m.get(k) for k in ("name", "model", "state", "progress", "train_score",
                                      "val_score", "samples_per_s", "step", "pass")}

    def option_used(self, name: str, step: int) -> Any:
        """The value option ``name`` had when minibatch ``step`` ran (from the record)."""
        rec = self.record.as_dict()
        hit = np.nonzero(rec["step"] == step)[0]
        if hit.size == 0:
            raise KeyError(f"step {step} is not in the record (it keeps the last "
                           f"{self.record.capacity} minibatches)")
        return self.opts.value_at(name, int(rec["opts_version"][hit[0]]))

    def history(self, as_frame: bool = False) -> Any:
        """The per-minibatch record, oldest first: numpy columns by name, or with
        ``as_frame`` a pandas DataFrame (pandas must be installed)."""
        return self.record.as_frame() if as_frame else self.record.as_dict()

    def to_csv(self, path: str | os.PathLike) -> Path:
        """Write :meth:`history` to ``path`` as CSV (a header row; no pandas needed)."""
        return self.record.to_csv(path)

    # -- checkpoints ----------------------------------------------------------------------
    def _end_pass(self, pass_: int) -> None:
        st = self._stats
        secs = max(st.seconds, 1e-12)
        summary = {
            "pass": pass_,
            "n_passes": self.opts.n_passes,
            "progress": self.progress,
            "train_score": st.train,
            "val_score": st.val,
            "seconds": st.seconds,
            "samples_per_s": st.samples / secs,
            "gflops": st.flops / secs / 1e9,
            "mb_per_s": st.nbytes / secs / 1e6,
            "cache_bytes": int(cache_stats()["bytes_held"] or 0),
            "gpu_free": self._gpu_free(),
            "score_name": self.model.score_name,
            "label": self.model.pass_label(),
        }
        self.summaries.append(summary)
        self._lines.append(summary)  # formatted when shown: most passes' lines never are
        while len(self._lines) > 1000:
            self._lines.popleft()

    def _gpu_free(self) -> int | None:
        if self.source.info.device != "gpu":
            return None
        try:
            return int(backend.cupy().cuda.runtime.memGetInfo()[0])
        except Exception:  # pragma: no cover - GPU only
            return None

    def _update_metrics(self, now: float, state: str | None = None) -> None:
        st = self._stats
        secs = max(st.seconds, 1e-12)
        kpis = {}
        if self.model.initialised:
            for mx in self.mixins:
                if mx.model is not None:
                    try:
                        kpis[mx.kpi] = mx.score()
                    except Exception as exc:  # a KPI must never break training
                        kpis[mx.kpi] = math.nan
                        self._kpi_failed(mx.kpi, exc)
        pass_, index = self._pos
        m = {
            "name": self.name,
            "model": type(self.model).__name__,
            "state": state or self._state,
            "step": self.step,
            "pass": pass_,
            "index": index,
            "n_passes": self.opts.n_passes,
            "progress": self._shown_progress(state or self._state),
            "samples": self.samples,
            "train_score": self._last_train,
            "val_score": self._last_val,
            "pass_train_score": st.train,
            "pass_val_score": st.val,
            "samples_per_s": st.samples / secs if st.samples else math.nan,
            "gflops": st.flops / secs / 1e9 if st.samples else math.nan,
            "mb_per_s": st.nbytes / secs / 1e6 if st.samples else math.nan,
            "elapsed": self._elapsed,
            "cache_bytes": int(cache_stats()["bytes_held"] or 0),
            "gpu_free": self._gpu_free() if self.model.initialised else None,
            "opts_version": self._opts_version,
            "score_name": self.model.score_name,
            **{f"kpi_{k}": v for k, v in kpis.items()},
        }
        with self._metrics_lock:
            self._metrics = m

    def _kpi_failed(self, name: str, exc: Exception) -> None:
        """A KPI that raised reads NaN; say why once per KPI and reason (a RuntimeWarning,
        and ``kpi_errors[name]``), so a NaN curve does not go unexplained."""
        why = f"{type(exc).__name__}: {exc}"
        errors = self.__dict__.setdefault("kpi_errors", {})
        if errors.get(name) != why:
            errors[name] = why
            warnings.warn(f"learner {self.name!r}: KPI {name!r} could not be computed and "
                          f"reads NaN: {why}", RuntimeWarning, stacklevel=2)

    def _postfix(self) -> str:
        m = self.metrics
        return format_scores(m["train_score"], m["val_score"])

    def _drain_lines(self, disp: Any, lines: PassLines) -> None:
        """Show the pass summaries that came since the last call, at a readable rate."""
        while self._lines:
            line = lines.offer(self._lines.popleft())
            if line is not None:
                disp.write(format_summary(line))

