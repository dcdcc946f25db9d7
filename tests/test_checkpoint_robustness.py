"""A learner's checkpoints under a changing file system and a changing mind: a live change
of the checkpoint path to something that is not a file is refused at once, a folder
deleted under a running learner is made again, and a GLM checkpoint is never loaded into
a model with other links."""

from __future__ import annotations

import os
import shutil
import time

import numpy as np
import pytest

from bidlab.learn import Grad, Learner
from bidlab.learn.checkpoint import CheckpointError, atomic_write_bytes, load_checkpoint
from bidlab.learn.save_target import SaveTargetError
from bidlab.models import GLM
from bidlab.models.lsq import LeastSquares

RNG = np.random.default_rng(0)
X = RNG.standard_normal((300, 4)).astype(np.float32)
Y = (X @ RNG.standard_normal((4, 1))).astype(np.float32)


def _endless(**options):
    """A least-squares learner that trains until stopped, checkpointing often."""
    return Learner(LeastSquares(), (X, Y), Grad(lrate=0.01), batch_size=10, n_passes=10**6,
                   checkpoint_every=0.005, **options)


def _until(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def _mtime(path):
    return os.stat(path).st_mtime_ns


def test_a_live_change_of_the_checkpoint_to_a_folder_is_refused_and_training_goes_on(
        tmp_path):
    first = tmp_path / "run.ckpt"
    folder = tmp_path / "folder"
    folder.mkdir()
    lr = _endless(checkpoint=str(first)).start()
    try:
        _until(first.exists)
        for change in (lambda: lr.set(checkpoint=str(folder)),
                       lambda: setattr(lr.opts, "checkpoint", folder)):
            with pytest.raises(SaveTargetError, match=(
                    f"'checkpoint' option must name a file .*{folder} is a directory.*e.g. "
                    f"{folder / 'checkpoint.npz'}.*It stays '{first}'")):
                change()
        assert lr.opts.checkpoint == str(first)
        before = _mtime(first)
        _until(lambda: _mtime(first) != before)  # still written to the old path
        assert lr.state == "running" and lr.error is None
    finally:
        lr.stop()
    lr.join()  # no failure to re-raise
    assert lr.state == "stopped" and list(folder.iterdir()) == []
    assert load_checkpoint(first).meta["progress"]["step"] == lr.step


def test_a_checkpoint_folder_given_to_a_new_learner_is_refused_at_once(tmp_path):
    with pytest.raises(SaveTargetError, match=f"{tmp_path} is a directory"):
        _endless(checkpoint=str(tmp_path))
    lr = _endless()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SaveTargetError, match="afile is not a folder"):
        lr.set(checkpoint=str(tmp_path / "afile" / "ck.npz"))
    assert lr.opts.checkpoint is None


def test_a_live_change_to_a_new_file_in_a_new_folder_is_taken(tmp_path):
    first, second = tmp_path / "a.ckpt", tmp_path / "later" / "b.ckpt"
    lr = _endless(checkpoint=str(first)).start()
    try:
        _until(first.exists)
        lr.set(checkpoint=second)
        _until(second.exists)
        lr.set(lrate=0.02)  # other options still change once a path is set
    finally:
        lr.stop()
    lr.join()
    assert load_checkpoint(second).meta["progress"]["step"] == lr.step


def test_a_write_whose_folder_is_removed_meanwhile_starts_over_in_a_new_folder(tmp_path):
    target = tmp_path / "gone" / "deeper" / "ck.bin"
    calls = []

    def write(f):
        calls.append(1)
        if len(calls) == 1:  # the folder is deleted while the file is written
            shutil.rmtree(tmp_path / "gone")
        f.write(b"payload")

    assert atomic_write_bytes(target, write) == target
    assert len(calls) == 2 and target.read_bytes() == b"payload"
    assert os.listdir(target.parent) == ["ck.bin"]  # no temporary file left


def _remove(folder):
    """Remove ``folder`` although a writer keeps adding files to it."""
    for _ in range(1000):
        try:
            shutil.rmtree(folder)
            return
        except FileNotFoundError:
            return
        except OSError:  # a file appeared while removing: again
            pass
    raise AssertionError(f"could not remove {folder}")


def test_a_checkpoint_folder_deleted_while_training_runs_is_made_again(tmp_path):
    ck = tmp_path / "runs" / "today" / "ck.npz"
    lr = _endless(checkpoint=str(ck)).start()
    try:
        for _ in range(15):  # deleted at any moment: between writes or in one
            _until(lambda: ck.exists() or lr.state != "running")
            assert lr.state == "running", lr.error
            _remove(tmp_path / "runs")
            time.sleep(0.03)
        _until(lambda: ck.exists() or lr.state != "running")
        assert lr.state == "running" and lr.error is None, lr.error
    finally:
        lr.stop()
    lr.join()
    resumed = Learner(LeastSquares(), (X, Y), Grad(lrate=0.01), batch_size=10).load(str(ck))
    assert resumed.step == lr.step
    assert [p.name for p in ck.parent.iterdir()] == ["ck.npz"]


def _glm_learner(link, **options):
    y = (X[:, 0] > 0).astype(np.float32)
    return GLM(link, n_passes=2, batch_size=50, random_state=0).learner(X, y, **options)


def test_a_glm_checkpoint_is_not_loaded_into_a_glm_with_another_link(tmp_path):
    ck = tmp_path / "logistic.ckpt"
    _glm_learner("logistic", checkpoint=str(ck)).fit(progress=None)
    other = _glm_learner("linear").init()
    W = other.model.modelmats[0].numpy().copy()
    with pytest.raises(CheckpointError, match=(
            "made with link 'logistic', but this learner's is made with link 'linear'.*"
            "estimator's link='logistic'")):
        other.load(str(ck))
    np.testing.assert_array_equal(other.model.modelmats[0].numpy(), W)  # nothing loaded
    assert other.step == 0
    same = _glm_learner("logistic").load(str(ck))  # the same link loads as before
    assert same.step > 0
    np.testing.assert_array_equal(same.model.modelmats[0].numpy(),
                                  load_checkpoint(ck).modelmats[0])

