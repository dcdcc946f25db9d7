"""Progress output for ``Learner.fit()``: a bar plus pass summary lines.

``mode="auto"`` uses ``tqdm.auto`` (a widget bar in a notebook, text in a terminal) when
it works and falls back to :class:`TextProgress`, a kernel-agnostic printer that rewrites
one line with ``\\r`` at most twice a second and prints pass summaries on their own lines.
``mode="lines"`` (:class:`LineProgress`) prints only the pass summary lines, and so does any
bar mode when the stream is not a terminal (a log file, a pipe): no ``\\r`` frames there.
``mode=None`` prints nothing. Everything goes to the stream given (default ``sys.stderr``),
pass summary lines included: nothing is sent to ``sys.stdout`` unless it is that stream.

Summary lines come at a readable rate (:class:`PassLines`: the first pass, then at most one
every :data:`PASS_LINE_EVERY_S` seconds, and always the last), and show only what was
measured: no validation score without validation, no GFLOP/s for a model that counts none.

A run that ends before its ``n_passes`` because the model converged (its ``converged``: a
tolerance reached, a held-out stopping rule) or its data source ran out ends its bar
complete, saying why (:func:`ended_early`); a run stopped or failed leaves its bar where
it was.

Everything here runs in the thread that called ``fit()``, never in the training thread.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["make_progress", "TextProgress", "LineProgress", "PassLines", "format_summary",
           "format_scores", "human", "is_terminal", "ended_early", "PASS_LINE_EVERY_S"]

#: The least time between two pass summary lines (the last pass always gets one).
PASS_LINE_EVERY_S = 5.0


def _measured(x: Any) -> bool:
    """A finite number (NaN stands for "not measured yet")."""
    return isinstance(x, (int, float)) and math.isfinite(x)


def human(x: float, unit: str = "") -> str:
    """1234567 -> '1.23M' (k, M, G, T)."""
    if x != x:  # nan
        return "n/a"
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}{unit}"
    return f"{x:.3g}{unit}"


def format_scores(train: Any, val: Any, digits: int = 5) -> str:
    """``"train 0.5 val 0.4"``, leaving out a score that is not measured (NaN)."""
    parts = [f"{name} {x:.{digits}g}" for name, x in (("train", train), ("val", val))
             if _measured(x)]
    return " ".join(parts)


def format_summary(s: dict[str, Any]) -> str:
    """One BIDMach-style line from a pass summary dict, with only the measured figures;
    it starts with the pass and the share done, or with the summary's ``label`` when the
    model gives one (``pass_label()``: PageRank's iterations, which stop when converged)."""
    parts = ([s["label"]] if s.get("label") else
             [f"pass {s['pass'] + 1:>3}/{s['n_passes']}", f"{100 * s['progress']:5.1f}%"])
    scores = format_scores(s.get("train_score"), s.get("val_score"), digits=6)
    if scores:
        parts.append(scores.replace(" val", "  val"))
    parts.append(f"{s['seconds']:.2f}s")
    if _measured(s.get("samples_per_s")):
        parts.append(f"{human(s['samples_per_s'])} samples/s")
    if _measured(s.get("gflops")) and s["gflops"] > 0:  # 0: the model counts no flops
        parts.append(f"{s['gflops']:.3g} GFLOP/s")
    if _measured(s.get("mb_per_s")) and s["mb_per_s"] > 0:
        parts.append(f"{s['mb_per_s']:.3g} MB/s")
    parts.append(f"cache {human(s['cache_bytes'], 'B')}")
    if s.get("gpu_free") is not None:
        parts.append(f"GPU free {human(s['gpu_free'], 'B')}")
    return "  ".join(parts)


class PassLines:
    """Decides which pass summary lines are shown: the first, then at most one every
    ``every`` seconds (default :data:`PASS_LINE_EVERY_S`), and the last one
    (:meth:`finish`), so fast passes do not flood the output with hundreds of lines."""

    def __init__(self, every: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.every = PASS_LINE_EVERY_S if every is None else every
        self.clock = clock
        self._shown_at = -math.inf
        self._held: Any = None

    def offer(self, line: Any) -> Any:
        """The line to show now, or None (it is held in case it turns out the last); a
        line may be anything its caller formats once shown (a pass summary dict)."""
        now = self.clock()
        if now - self._shown_at >= self.every:
            self._shown_at = now
            self._held = None
            return line
        self._held = line
        return None

    def finish(self) -> Any:
        """The last line offered, when it was held back (None when it was shown)."""
        held, self._held = self._held, None
        return held


class TextProgress:
    """A one-line progress printer (``\\r``), throttled; summary lines on their own."""

    def __init__(self, desc: str, file: TextIO | None = None, min_interval: float = 0.5) -> None:
        self.desc = desc
        self.file = file or sys.stderr
        self.min_interval = min_interval
        self._last = 0.0
        self._width = 0
        self._postfix = ""

    def update(self, fraction: float, postfix: str = "") -> None:
        self._postfix = postfix
        now = time.monotonic()
        if now - self._last < self.min_interval and fraction < 1.0:
            return
        self._last = now
        n = 30
        fill = int(round(n * max(0.0, min(1.0, fraction))))
        line = f"{self.desc} [{'#' * fill}{'.' * (n - fill)}] {100 * fraction:5.1f}%"
        if postfix:
            line += " " + postfix
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.file.write("\r" + line + " " * pad)
        self.file.flush()

    def write(self, line: str) -> None:
        clear = "\r" + " " * self._width + "\r" if self._width else ""
        self.file.write(clear + line + "\n")
        self._width = 0
        self._last = 0.0
        self.file.flush()

    def complete(self, note: str | None) -> None:
        """Draw the bar full, ``note`` (why the run ended early) before the postfix; None:
        nothing to do (the run did not end early)."""
        if note is None:
            return
        self._last = -math.inf
        self.update(1.0, "; ".join(x for x in (note, self._postfix) if x))

    def close(self) -> None:
        if self._width:
            self.file.write("\n")
            self.file.flush()


class LineProgress:
    """Pass summary lines only, each on its own line (no bar, no ``\\r``): for logs."""

    def __init__(self, desc: str, file: TextIO | None = None) -> None:
        self.desc = desc
        self.file = file or sys.stderr

    def update(self, fraction: float, postfix: str = "") -> None:
        pass

    def write(self, line: str) -> None:
        self.file.write(f"{self.desc}: {line}\n")
        self.file.flush()

    def complete(self, note: str | None) -> None:
        pass  # no bar: the last pass line says where the run ended

    def close(self) -> None:
        pass


class _TqdmProgress:
    """A tqdm bar; with ``summaries_in_postfix`` the pass summaries replace its postfix
    instead of printing lines (``verbose=1`` of the estimators)."""

    def __init__(self, desc: str, file: TextIO | None,
                 summaries_in_postfix: bool = False) -> None:
        from tqdm.auto import tqdm

        self.file = file or sys.stderr
        self.in_postfix = summaries_in_postfix
        self._summary = ""
        # tqdm puts ", " before a non-empty postfix: it separates it from the times
        self.bar = tqdm(total=1000, desc=desc, file=self.file, leave=True,
                        bar_format="{l_bar}{bar}| {elapsed}<{remaining}{postfix}")

    def update(self, fraction: float, postfix: str = "") -> None:
        target = int(round(1000 * max(0.0, min(1.0, fraction))))
        if target > self.bar.n:
            self.bar.update(target - self.bar.n)
        if self.in_postfix and self._summary:
            postfix = self._summary
        if postfix != (self.bar.postfix or ""):
            self.bar.set_postfix_str(postfix, refresh=False)

    def write(self, line: str) -> None:
        if self.in_postfix:
            self._summary = " ".join(line.split())
            self.bar.set_postfix_str(self._summary, refresh=True)
            return
        self.bar.write(line, file=self.file)  # tqdm.write's default stream is sys.stdout

    def complete(self, note: str | None) -> None:
        """Fill the bar (a notebook's widget then ends green, not red as an unfinished
        bar does), ``note`` (why the run ended early) before the postfix; None: nothing
        to do (the run did not end early)."""
        if note is None:
            return
        bar = self.bar
        if bar.n < bar.total:
            bar.update(bar.total - bar.n)
        bar.set_postfix_str("; ".join(x for x in (note, bar.postfix or "") if x), refresh=True)

    def close(self) -> None:
        self.bar.close()


class _Silent:
    def update(self, fraction: float, postfix: str = "") -> None:
        pass

    def complete(self, note: str | None) -> None:
        pass

    def write(self, line: str) -> None:
        pass

    def close(self) -> None:
        pass


def ended_early(learner: Any) -> str | None:
    """Why ``learner``'s run, ``done`` before its ``n_passes``, ended there, in words: its
    model converged (on this rank or, with ``comm``, another) or its data source ran out of
    passes. None when the run did all its passes (or its ``max_steps``), was stopped or
    failed: only a run that finished early gets its bar filled."""
    if learner.state != "done" or not getattr(learner, "_finished", False):
        return None
    if learner.progress >= 1.0:
        return None
    src, model = learner.source, learner.model
    src_passes = getattr(src, "n_passes", None)
    if model.converged or src_passes is None or src.position[0] < src_passes:
        # a model's own words where it has them (PageRank: converged, or max_iter run)
        return model.pass_label() or "converged"
    return f"data source ended (its n_passes={src_passes})"


def is_terminal(file: Any) -> bool:
    """Whether ``file`` is an interactive terminal (a notebook's output stream counts as
    one: it draws ``\\r`` frames as a bar)."""
    if "ipykernel" in type(file).__module__:
        return True
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError, OSError):
        return False


_MODES = ("auto", "tqdm", "tqdm_postfix", "text", "lines", "none")


def make_progress(mode: str | None, desc: str, file: TextIO | None = None) -> Any:
    """A progress display on ``file`` (default ``sys.stderr``): ``"auto"`` (tqdm.auto, else
    text), ``"tqdm"``, ``"tqdm_postfix"`` (a bar whose postfix shows the last pass summary,
    no lines), ``"text"``, ``"lines"`` (pass summary lines only) or None. A bar mode on a
    stream that is not a terminal prints lines instead (no ``\\r`` in logs)."""
    if mode is None or mode == "none":
        return _Silent()
    if mode not in _MODES:
        raise ValueError(f"progress must be one of {list(_MODES)} or None; got {mode!r}")
    file = file or sys.stderr
    if mode == "lines" or not is_terminal(file):
        return LineProgress(desc, file)
    if mode in ("auto", "tqdm", "tqdm_postfix"):
        try:
            return _TqdmProgress(desc, file, summaries_in_postfix=mode == "tqdm_postfix")
        except Exception:
            if mode != "auto":
                raise
    return TextProgress(desc, file)
