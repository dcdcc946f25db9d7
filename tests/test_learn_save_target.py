"""Saving writes only regular files: a FIFO, directory, symbolic link or device at the target
is refused and left as it was, by ``est.save``, ``Learner.save`` and ``bidlab train``."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from bidlab.cli import main
from bidlab.learn import Grad, Learner
from bidlab.learn.save_target import SaveTargetError, check_writable
from bidlab.models import KMeans, load
from bidlab.models.lsq import LeastSquares

X = np.random.default_rng(0).standard_normal((60, 3))


def _fifo(tmp_path):
    os.mkfifo(tmp_path / "target")
    return tmp_path / "target", stat.S_ISFIFO, "a FIFO"


def _directory(tmp_path):
    (tmp_path / "target").mkdir()
    return tmp_path / "target", stat.S_ISDIR, "a directory"


def _symlink(tmp_path):
    (tmp_path / "real.npz").write_bytes(b"precious")
    (tmp_path / "target").symlink_to(tmp_path / "real.npz")
    return tmp_path / "target", stat.S_ISLNK, "a symbolic link"


def _dangling_symlink(tmp_path):
    (tmp_path / "target").symlink_to(tmp_path / "elsewhere" / "x.npz")
    return tmp_path / "target", stat.S_ISLNK, "a symbolic link"


def _char_device(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("making a character device needs root")
    os.mknod(tmp_path / "target", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    return tmp_path / "target", stat.S_ISCHR, "a character device"


TARGETS = [_fifo, _directory, _symlink, _dangling_symlink, _char_device]


def _unchanged(tmp_path, target, is_kind):
    assert is_kind(os.lstat(target).st_mode)
    if (tmp_path / "real.npz").exists():
        assert (tmp_path / "real.npz").read_bytes() == b"precious"
    assert not (tmp_path / "elsewhere").exists()
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]  # no temp file left


@pytest.mark.parametrize("make", TARGETS, ids=[f.__name__[1:] for f in TARGETS])
def test_estimator_save_refuses_a_target_that_is_not_a_regular_file(tmp_path, make):
    target, is_kind, words = make(tmp_path)
    est = KMeans(n_clusters=2, random_state=0).fit(X)
    with pytest.raises(SaveTargetError, match=f"{target} is {words}"):
        est.save(target)
    _unchanged(tmp_path, target, is_kind)


@pytest.mark.parametrize("make", TARGETS, ids=[f.__name__[1:] for f in TARGETS])
def test_learner_checkpoint_refuses_a_target_that_is_not_a_regular_file(tmp_path, make):
    target, is_kind, words = make(tmp_path)
    lr = Learner(LeastSquares(), (X.astype(np.float32), X[:, :1].astype(np.float32)), Grad(),
                 batch_size=20, n_passes=1)
    lr.fit(progress=None)
    with pytest.raises(SaveTargetError, match=f"{target} is {words}"):
        lr.save(str(target))
    _unchanged(tmp_path, target, is_kind)


def test_a_regular_file_is_replaced_and_a_new_path_written(tmp_path):
    est = KMeans(n_clusters=2, random_state=0).fit(X)
    old = tmp_path / "old.npz"
    old.write_bytes(b"an earlier file")
    est.save(old)
    est.save(tmp_path / "new" / "km.npz")
    for path in (old, tmp_path / "new" / "km.npz"):
        np.testing.assert_array_equal(load(path).cluster_centers_, est.cluster_centers_)


def test_check_writable_names_the_path_and_the_reason(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SaveTargetError, match=r"cannot write .*afile/sub/ck\.npz: .*afile is "
                                              "not a folder"):
        check_writable(tmp_path / "afile" / "sub" / "ck.npz")
    assert check_writable(tmp_path / "a" / "b" / "ck.npz") == tmp_path / "a" / "b" / "ck.npz"
    assert not (tmp_path / "a").exists()  # checking makes nothing
    if os.geteuid() != 0:  # root writes anywhere: a read-only folder only stops others
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(SaveTargetError, match="Permission denied"):
            check_writable(ro / "ck.npz")


def _points(tmp_path):
    path = tmp_path / "points.npz"
    np.savez(path, X=X)
    return str(path)


@pytest.mark.parametrize("flag", ["--checkpoint", "--save"])
def test_cli_refuses_an_unwritable_output_before_training(tmp_path, capsys, flag):
    (tmp_path / "afile").write_text("x")
    bad = tmp_path / "afile" / "out.npz"
    code = main(["train", "kmeans", "--data", _points(tmp_path), "--n_clusters", "2",
                 "--progress", "none", flag, str(bad)])
    out = capsys.readouterr()
    assert code == 2
    lines = out.err.strip().splitlines()
    assert lines == [f"bidlab train: {flag}: cannot write {bad}: {tmp_path / 'afile'} is not a "
                     "folder"], out.err
    assert out.out == ""  # nothing was trained


@pytest.mark.parametrize("flag", ["--checkpoint", "--save"])
def test_cli_refuses_a_fifo_output_and_leaves_it(tmp_path, capsys, flag):
    target, is_kind, _ = _fifo(tmp_path)
    code = main(["train", "kmeans", "--data", _points(tmp_path), "--n_clusters", "2",
                 "--progress", "none", flag, str(target)])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert out.err.strip() == (f"bidlab train: {flag}: {target} is a FIFO (named pipe), not a "
                               "regular file; bidlab writes models and checkpoints only to "
                               "regular files (it replaces an existing file, nothing else): "
                               "choose a file path")
    assert is_kind(os.lstat(target).st_mode)
