"""``Learner.fit()``'s progress output: only measured figures, pass lines at a readable rate."""

from __future__ import annotations

import io
import math
import re

import numpy as np
import pytest

import bidlab as bl
from bidlab.learn import Grad, Learner, Model
from bidlab.learn.progress import PassLines, format_scores, format_summary

pytest.importorskip("tqdm")


class Step(Model):
    """A model that does nothing but count: passes take microseconds."""

    def init(self, info):
        self.modelmats = [bl.zeros((1, 1), np.float64)]
        self.updatemats = [bl.ones((1, 1), np.float64)]

    def update(self, batch):
        return float(self.modelmats[0].data[0, 0])

    def evaluate(self, batch):
        return float(self.modelmats[0].data[0, 0])


def _summary(**over):
    s = {"pass": 4, "n_passes": 10, "progress": 0.5, "train_score": -0.25,
         "val_score": math.nan, "seconds": 1.5, "samples_per_s": 2000.0, "gflops": 0.0,
         "mb_per_s": 3.0, "cache_bytes": 2048, "gpu_free": None}
    return {**s, **over}


def test_a_summary_leaves_out_what_was_not_measured():
    line = format_summary(_summary())
    assert "train -0.25" in line and "samples/s" in line and "MB/s" in line
    for absent in ("val", "nan", "n/a", "GFLOP/s", "GPU"):
        assert absent not in line, (absent, line)
    full = format_summary(_summary(val_score=-0.3, gflops=1.5, gpu_free=2**30))
    for present in ("train -0.25", "val -0.3", "1.5 GFLOP/s", "GPU free"):
        assert present in full, (present, full)
    bare = format_summary(_summary(train_score=math.nan, samples_per_s=math.nan,
                                   mb_per_s=math.nan))
    assert "nan" not in bare and "train" not in bare and "samples/s" not in bare


def test_scores_leave_out_a_missing_one():
    assert format_scores(0.5, math.nan) == "train 0.5"
    assert format_scores(math.nan, 0.25) == "val 0.25"
    assert format_scores(0.5, 0.25) == "train 0.5 val 0.25"
    assert format_scores(math.nan, math.nan) == ""


def test_pass_lines_come_at_most_every_few_seconds_plus_the_last():
    now = [0.0]
    lines = PassLines(every=5.0, clock=lambda: now[0])
    shown = []
    for i in range(200):  # 200 passes of 0.1 s: 20 s in all
        now[0] = i / 10
        line = lines.offer(f"pass {i + 1}")
        if line is not None:
            shown.append(line)
    last = lines.finish()
    assert shown == ["pass 1", "pass 51", "pass 101", "pass 151"]
    assert last == "pass 200"
    assert lines.finish() is None  # given once


def test_a_shown_last_line_is_not_given_twice():
    now = [0.0]
    lines = PassLines(every=5.0, clock=lambda: now[0])
    assert lines.offer("pass 1") == "pass 1"
    now[0] = 10.0
    assert lines.offer("pass 2") == "pass 2"
    assert lines.finish() is None


class _Terminal(io.StringIO):
    """A stream that says it is a terminal (bars are drawn only on one)."""

    def isatty(self) -> bool:
        return True


def _pass_lines(text: str) -> list[str]:
    return [m.group(0) for m in re.finditer(r"pass +\d+/\d+[^\r\n]*", text)]


def test_fit_prints_a_few_lines_for_many_fast_passes():
    lr = Learner(Step(), np.zeros((4, 1)), Grad(), batch_size=2, n_passes=200, val_every=0)
    out = _Terminal()
    lr.fit(progress="text", file=out)
    text = out.getvalue()
    lines = _pass_lines(text)
    assert 2 <= len(lines) <= 5, lines  # the first, one per 5 s at most, the last
    assert lines[0].startswith("pass   1/200") and lines[-1].startswith("pass 200/200")
    assert len(lr.summaries) >= 2  # every pass is still recorded
    assert "nan" not in text and "n/a" not in text and " val" not in text
    assert not re.search(r"% +\n", text), "no trailing blank postfix"


def test_the_tqdm_bar_has_no_stray_separator_or_placeholder():
    lr = Learner(Step(), np.zeros((4, 1)), Grad(), batch_size=1, n_passes=3, val_every=0)
    out = _Terminal()
    lr.fit(progress="tqdm", file=out)
    text = out.getvalue()
    assert "nan" not in text and " , " not in text and ", ," not in text
    bars = [b for b in text.split("\r") if "%|" in b]
    assert bars and re.search(r"00:00, train [\d.]+$", bars[-1].rstrip()), bars[-1]
    assert not any(b.rstrip().endswith(",") for b in bars), bars


def test_tqdm_pass_lines_go_to_the_given_stream_not_stdout(capsys):
    lr = Learner(Step(), np.zeros((4, 1)), Grad(), batch_size=2, n_passes=3, val_every=0)
    out = _Terminal()
    lr.fit(progress="tqdm", file=out)
    assert _pass_lines(out.getvalue())  # the summary lines are in the bar's stream
    assert capsys.readouterr().out == ""


def test_a_stream_that_is_not_a_terminal_gets_plain_lines(capsys):
    for mode in ("auto", "tqdm", "text"):
        lr = Learner(Step(), np.zeros((4, 1)), Grad(), batch_size=1, n_passes=3, val_every=0)
        log = io.StringIO()
        lr.fit(progress=mode, file=log)
        text = log.getvalue()
        assert "\r" not in text and "%|" not in text, (mode, text)
        assert _pass_lines(text)[-1].startswith("pass   3/3"), (mode, text)
    lr = Learner(Step(), np.zeros((4, 1)), Grad(), batch_size=1, n_passes=2, val_every=0)
    lr.fit(progress="auto")  # default stream: stderr
    out, err = capsys.readouterr()
    assert out == "" and "pass   2/2" in err


def test_lines_mode_prints_every_pass_and_postfix_mode_none():
    lr = Learner(Step(), np.zeros((4, 1)), Grad(), batch_size=2, n_passes=50, val_every=0)
    log = io.StringIO()
    lr.fit(progress="lines", file=log)
    assert len(_pass_lines(log.getvalue())) == 50  # not thinned to one per 5 s
    lr = Learner(Step(), np.zeros((4, 1)), Grad(), batch_size=2, n_passes=4, val_every=0)
    tty = _Terminal()
    lr.fit(progress="tqdm_postfix", file=tty)
    text = tty.getvalue()
    assert "\n" not in text.rstrip("\n")  # one bar line redrawn, no pass lines under it
    assert re.search(r"pass 4/4 100\.0%", text.split("\r")[-1]), text.split("\r")[-1]
