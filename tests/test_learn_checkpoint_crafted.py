"""Crafted and damaged checkpoints: every one is a CheckpointError, none writes anywhere."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from bidlab.learn import ADAGrad, Learner, MemorySource
from bidlab.learn.checkpoint import (
    CheckpointError,
    load_checkpoint,
    remove_stale_temps,
    save_checkpoint,
)
from bidlab.models.lsq import LeastSquares


def _data_xy():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4)).astype(np.float32)
    return X, (X @ rng.standard_normal((4, 1))).astype(np.float32)


def _learner(**opts):
    return Learner(LeastSquares(), MemorySource(*_data_xy(), batch_size=50),
                   ADAGrad(lrate=0.05), **opts)


def _good(tmp_path):
    lr = _learner(n_passes=1)
    lr.fit(progress=None)
    return lr.save(str(tmp_path / "good.npz"))


def _rewrite_meta(src, dst, change):
    ck = load_checkpoint(src)
    meta = {k: v for k, v in ck.meta.items() if k not in ("format", "version", "written")}
    change(meta)
    save_checkpoint(dst, ck.arrays, meta)
    return dst


def test_a_checkpoint_cannot_redirect_where_the_learner_writes(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    crafted = _rewrite_meta(_good(tmp_path), tmp_path / "crafted.npz",
                            lambda m: m["options"].update(checkpoint=str(victim), n_passes=2))
    lr = _learner(n_passes=1)
    lr.load(str(crafted))
    assert lr.opts.checkpoint is None and lr.opts.n_passes == 2  # values yes, paths no
    lr.fit(progress=None)
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("progress, fragment", [
    ({"pass": 10**30}, "'pass' must be a whole number"),
    ({"index": -5}, "'index' must be a whole number"),
    ({"step": "3"}, "'step' must be a whole number"),
    ({"elapsed": -1.0}, "'elapsed' must be seconds"),
    ({"index": 99}, "beyond this data's 6 minibatches"),
])
def test_bad_progress_metadata_is_refused(tmp_path, progress, fragment):
    crafted = _rewrite_meta(_good(tmp_path), tmp_path / "crafted.npz",
                            lambda m: m["progress"].update(progress))
    lr = _learner()
    with pytest.raises(CheckpointError, match=fragment):
        lr.load(str(crafted))
    assert lr.step == 0


@pytest.mark.parametrize("options, fragment", [
    ({"n_passes": 10**18}, "'n_passes' parameter of Learner must be an int in"),
    ({"val_every": -5}, "'val_every' parameter of Learner must be an int >= 0"),
    ({"lrate": -1.0}, "'lrate' parameter of ADAGrad must be a float > 0"),
])
def test_option_values_out_of_their_range_are_refused(tmp_path, options, fragment):
    crafted = _rewrite_meta(_good(tmp_path), tmp_path / "crafted.npz",
                            lambda m: m["options"].update(options))
    lr = _learner()
    with pytest.raises(CheckpointError, match=f"holds an invalid option: .*{fragment}"):
        lr.load(str(crafted))
    assert lr.step == 0 and lr.opts.n_passes == 10 and lr.state == "created"


def test_a_loaded_learner_is_stopped_whatever_it_was(tmp_path):
    path = _good(tmp_path)
    done = _learner(n_passes=1)
    done.fit(progress=None)
    failed = _learner(n_passes=1)
    failed.model.update = lambda batch: 1 / 0  # this learner's run fails
    with pytest.raises(ZeroDivisionError):
        failed.fit(progress=None)
    del failed.model.update
    assert (done.state, failed.state) == ("done", "failed")
    for lr in (_learner(), done, failed):
        lr.load(path)
        assert lr.state == lr.metrics["state"] == "stopped"
        assert lr.error is None and lr.traceback is None and lr.join(0.1)  # nothing re-raised
    failed.set(n_passes=2)
    failed.fit(progress=None)
    assert failed.state == "done" and failed.metrics["pass"] == 2


def _zip(path, members, compress=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression=compress) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _npy_header(shape, dtype="<f4"):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def test_a_header_claiming_a_huge_array_is_refused_before_allocating(tmp_path):
    meta = np.frombuffer(json.dumps({"format": "bidlab-checkpoint"}).encode(), np.uint8)
    buf = io.BytesIO()
    np.save(buf, meta)
    path = _zip(tmp_path / "huge.npz", {"model/0.npy": _npy_header((10**6, 10**6)) + b"\0" * 64,
                                         "__meta__.npy": buf.getvalue()})
    assert path.stat().st_size < 1000
    with pytest.raises(CheckpointError, match=r"claims shape \(1000000, 1000000\)"):
        load_checkpoint(path)


def test_a_zip_bomb_is_refused_before_inflating(tmp_path):
    bomb = _npy_header((256 * 1024 * 1024,), "|u1") + b"\0" * (256 * 1024 * 1024)
    path = _zip(tmp_path / "bomb.npz", {"model/0.npy": bomb}, zipfile.ZIP_DEFLATED)
    assert path.stat().st_size < 2_000_000
    with pytest.raises(CheckpointError, match="compressed"):
        load_checkpoint(path)


def test_every_single_byte_flip_is_a_checkpoint_error_or_loads(tmp_path):
    raw = bytearray(open(_good(tmp_path), "rb").read())
    rng = np.random.default_rng(1)
    flipped = tmp_path / "flipped.npz"
    outcomes = set()
    for pos in rng.choice(len(raw), 150, replace=False):
        bad = bytearray(raw)
        bad[pos] ^= 1 << int(rng.integers(8))
        flipped.write_bytes(bytes(bad))
        try:
            _learner().load(str(flipped))
            outcomes.add("loaded")  # a flipped bit inside a number is still a number
        except CheckpointError:
            outcomes.add("refused")
    assert "refused" in outcomes


def test_an_lda_checkpoint_does_not_load_into_a_gibbs_learner(tmp_path):
    from bidlab.datasets import synthetic_lda_corpus
    from bidlab.models import LDA, LDAGibbs

    X = synthetic_lda_corpus(n_docs=120, n_words=50, k=3, seed=0).X
    vb = LDA(n_components=3, n_passes=1).learner(X)
    vb.fit(progress=None)
    path = vb.save(str(tmp_path / "vb.npz"))
    with pytest.raises(CheckpointError, match="holds a 'LDAModel' model"):
        LDAGibbs(n_components=3, n_passes=1).learner(X).load(path)


def test_temp_files_of_dead_writers_are_removed_by_the_next_save(tmp_path):
    target = tmp_path / "ck.npz"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    stale = tmp_path / f".ck.npz.tmp-{int(dead.stdout)}-123"
    stale.write_bytes(b"torn")
    live = tmp_path / f".ck.npz.tmp-{os.getpid()}-456"  # a writer that is still alive
    live.write_bytes(b"in progress")
    other = tmp_path / ".other.npz.tmp-1-1"
    other.write_bytes(b"not ours")
    save_checkpoint(target, {"x": np.ones(2)}, {})
    assert not stale.exists() and live.exists() and other.exists()
    assert load_checkpoint(target).arrays["x"].tolist() == [1.0, 1.0]
    assert remove_stale_temps(target) == []


@pytest.mark.parametrize("key", ["updater/average_sum0", "updater/velocity1"])
def test_updater_state_made_on_first_use_is_shape_checked_before_anything_is_written(
        tmp_path, key):
    """Running sums of averaged iterates and momentum buffers exist only once used; a
    checkpoint's copy of the wrong shape is refused before the model is touched."""
    lr = Learner(LeastSquares(), MemorySource(*_data_xy(), batch_size=50),
                 ADAGrad(lrate=0.05, average_from=0, momentum=0.5), n_passes=2, max_steps=5)
    lr.fit(progress=None)
    ck = load_checkpoint(lr.save(str(tmp_path / "good.npz")))
    arrays = dict(ck.arrays)
    assert key in arrays
    arrays[key] = np.zeros((3, 3), np.float32)
    meta = {k: v for k, v in ck.meta.items() if k not in ("format", "version", "written")}
    save_checkpoint(str(tmp_path / "bad.npz"), arrays, meta)
    fresh = _learner(n_passes=2)
    fresh.init()
    before = [m.data.copy() for m in fresh.model.modelmats]
    with pytest.raises(CheckpointError, match=f"updater state '{key.split('/')[1]}' has shape"):
        fresh.load(str(tmp_path / "bad.npz"))
    for a, m in zip(before, fresh.model.modelmats, strict=True):
        np.testing.assert_array_equal(a, m.data)
