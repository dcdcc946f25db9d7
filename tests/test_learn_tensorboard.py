"""TensorBoardWriter: a learner's live metrics and its history as TensorBoard event files,
read back from disk; and where progress output goes."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bidlab.learn import Learner
from bidlab.models.lsq import LeastSquares

pytest.importorskip("tensorboardX", reason="the tensorboard extra is not installed "
                    "(pip install 'bidlab[tensorboard]')")

from bidlab.learn.tensorboard_writer import TensorBoardWriter, read_scalars  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def _learner(n_passes: int = 3) -> Learner:
    rng = np.random.default_rng(0)
    X = rng.random((3000, 4))
    Y = X @ np.array([[1.0], [-2.0], [0.5], [3.0]]) + 0.1
    return Learner(LeastSquares(), (X, Y), n_passes=n_passes, batch_size=100, lrate=0.2,
                   val_every=5)


def test_live_metrics_are_written_and_read_back(tmp_path):
    lrn = _learner()
    writer = TensorBoardWriter(tmp_path / "run")
    lrn.observe(writer, rate=200)
    lrn.fit(progress=None)
    assert lrn.observers.wait_idle(10)
    writer.close()
    assert list((tmp_path / "run").glob("events.out.tfevents.*"))
    got = read_scalars(tmp_path / "run")
    assert {"score/train", "score/val", "speed/samples_per_s", "progress"} <= set(got)
    steps = [s for s, _ in got["score/train"]]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)  # one row per step
    assert steps[-1] == lrn.step  # the final snapshot is written
    assert got["progress"][-1][1] == pytest.approx(1.0)
    assert got["score/train"][-1][1] == pytest.approx(lrn.metrics["train_score"], rel=1e-5)
    assert writer.written == sum(len(v) for v in got.values())


def test_history_writes_every_minibatch_score(tmp_path):
    lrn = _learner(n_passes=2)
    lrn.fit(progress=None)
    with TensorBoardWriter(tmp_path) as writer:
        writer.write_history(lrn)
    got = read_scalars(tmp_path)
    rec = lrn.history()
    train = [(int(s), float(v)) for s, v, held in
             zip(rec["step"], rec["score"], rec["val"], strict=True) if not held]
    assert [s for s, _ in got["history/score_train"]] == [s for s, _ in train]
    np.testing.assert_allclose([v for _, v in got["history/score_train"]],
                               [v for _, v in train], rtol=1e-6)
    assert len(got["history/score_val"]) == int(rec["val"].sum()) > 0
    # the scores improve: the first minibatches' error is larger than the last ones'
    assert np.mean([v for _, v in train[:5]]) < np.mean([v for _, v in train[-5:]])


def test_read_scalars_of_an_empty_folder_is_empty(tmp_path):
    assert read_scalars(tmp_path) == {}


# --------------------------------------------------------------------- progress streams
def test_progress_goes_only_to_the_stream_given_without_carriage_returns(capfd):
    for progress in ("tqdm", "auto", "text", "lines"):
        buf = io.StringIO()
        _learner(n_passes=2).fit(progress=progress, file=buf)
        text = buf.getvalue()
        assert "pass   2/2" in text and "\r" not in text, (progress, text)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_a_terminal_gets_the_bar_and_a_redirected_stdout_stays_clean(tmp_path):
    """`bidlab train ... > log` on a terminal: the bar goes to stderr (the terminal), the
    log gets plain lines only."""
    data = tmp_path / "d.svm"
    rng = np.random.default_rng(1)
    rows = [f"{1 if rng.random() > 0.5 else -1} 1:{rng.random():.3f} 2:{rng.random():.3f}"
            for _ in range(2000)]
    data.write_text("\n".join(rows) + "\n")
    leader, follower = pty.openpty()
    log = tmp_path / "log"
    with open(log, "w") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "bidlab.cli", "train", "glm", "--data", str(data),
             "--n_passes", "2"], stdout=out, stderr=follower, timeout=240,
            env={**os.environ, "PYTHONPATH": str(REPO)})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.returncode == 0
    text = log.read_text()
    assert text.startswith("done: ") and "\r" not in text
    assert b"\r" in b"".join(chunks)  # tqdm's frames went to the terminal
