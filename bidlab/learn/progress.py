"""Progress output for ``Learner.fit()``: a bar plus one summary line per pass.

``mode="auto"`` uses ``tqdm.auto`` (a widget bar in a notebook, text in a terminal) when
it works and falls back to :class:`TextProgress`, a kernel-agnostic printer that rewrites
one line with ``\\r`` at most twice a second and prints each pass summary on its own line
(works in terminals, notebooks without ipywidgets, and logs). ``mode=None`` prints nothing.

Everything here runs in the thread that called ``fit()``, never in the training thread.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["make_progress", "TextProgress", "format_summary", "human"]


def human(x: float, unit: str = "") -> str:
    """1234567 -> '1.23M' (k, M, G, T)."""
    if x != x:  # nan
        return "n/a"
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}{unit}"
    return f"{x:.3g}{unit}"


def format_summary(s: dict[str, Any]) -> str:
    """One BIDMach-style line from a pass summary dict."""
    parts = [
        f"pass {s['pass'] + 1:>3}/{s['n_passes']}",
        f"{100 * s['progress']:5.1f}%",
        f"train {s['train_score']:.6g}",
        f"val {s['val_score']:.6g}" if s["val_score"] == s["val_score"] else "val n/a",
        f"{s['seconds']:.2f}s",
        f"{human(s['samples_per_s'])} samples/s",
        f"{s['gflops']:.3g} GFLOP/s",
        f"{s['mb_per_s']:.3g} MB/s",
        f"cache {human(s['cache_bytes'], 'B')}",
    ]
    if s.get("gpu_free") is not None:
        parts.append(f"GPU free {human(s['gpu_free'], 'B')}")
    return "  ".join(parts)


class TextProgress:
    """A one-line progress printer (``\\r``), throttled; summary lines on their own."""

    def __init__(self, desc: str, file: TextIO | None = None, min_interval: float = 0.5) -> None:
        self.desc = desc
        self.file = file or sys.stderr
        self.min_interval = min_interval
        self._last = 0.0
        self._width = 0

    def update(self, fraction: float, postfix: str = "") -> None:
        now = time.monotonic()
        if now - self._last < self.min_interval and fraction < 1.0:
            return
        self._last = now
        n = 30
        fill = int(round(n * max(0.0, min(1.0, fraction))))
        line = f"{self.desc} [{'#' * fill}{'.' * (n - fill)}] {100 * fraction:5.1f}% {postfix}"
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.file.write("\r" + line + " " * pad)
        self.file.flush()

    def write(self, line: str) -> None:
        self.file.write("\r" + " " * self._width + "\r" + line + "\n")
        self._width = 0
        self._last = 0.0
        self.file.flush()

    def close(self) -> None:
        if self._width:
            self.file.write("\n")
            self.file.flush()


class _TqdmProgress:
    def __init__(self, desc: str, file: TextIO | None) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=1000, desc=desc, file=file, leave=True,
                        bar_format="{l_bar}{bar}| {elapsed}<{remaining} {postfix}")

    def update(self, fraction: float, postfix: str = "") -> None:
        target = int(round(1000 * max(0.0, min(1.0, fraction))))
        if target > self.bar.n:
            self.bar.update(target - self.bar.n)
        if postfix:
            self.bar.set_postfix_str(postfix, refresh=False)

    def write(self, line: str) -> None:
        self.bar.write(line)

    def close(self) -> None:
        self.bar.close()


class _Silent:
    def update(self, fraction: float, postfix: str = "") -> None:
        pass

    def write(self, line: str) -> None:
        pass

    def close(self) -> None:
        pass


def make_progress(mode: str | None, desc: str, file: TextIO | None = None) -> Any:
    """A progress display: ``"auto"`` (tqdm.auto, else text), ``"tqdm"``, ``"text"``, None."""
    if mode is None or mode == "none":
        return _Silent()
    if mode in ("auto", "tqdm"):
        try:
            return _TqdmProgress(desc, file)
        except Exception:
            if mode == "tqdm":
                raise
    if mode in ("auto", "text"):
        return TextProgress(desc, file)
    raise ValueError(f"progress must be 'auto', 'tqdm', 'text' or None; got {mode!r}")
