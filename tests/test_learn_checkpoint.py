"""Checkpoints: exact round trip, exact resume, atomic under SIGKILL, never unpickles."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from bidlab.learn import (
    ADAGrad,
    CheckpointError,
    Grad,
    Learner,
    MemorySource,
    load_checkpoint,
)
from bidlab.models.lsq import LeastSquares


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((700, 8)).astype(np.float32)
    Y = (X @ rng.standard_normal((8, 2)) + 0.3).astype(np.float32)
    return X, Y


def _learner(**opts):
    X, Y = _data()
    return Learner(LeastSquares(), MemorySource(X, Y, batch_size=64, shuffle=True, seed=4),
                   ADAGrad(lrate=0.05, momentum=0.5), **opts)


def _resumed(first, make, tmp_path):
    """A new learner from ``make()`` loaded from ``first``'s checkpoint and run to the end."""
    first.save(str(tmp_path / "ck.npz"))
    second = make()
    second.load(str(tmp_path / "ck.npz"))
    second.set(max_steps=None)
    second.fit(progress=None)
    return second


def test_round_trip_is_exact(tmp_path):
    a = _learner(n_passes=3, max_steps=17, lrate=0.03)
    a.fit(progress=None)
    path = a.save(str(tmp_path / "a.npz"))
    b = _learner()
    b.load(path)
    for x, y in zip(a.model.modelmats, b.model.modelmats, strict=True):
        np.testing.assert_array_equal(x.data, y.data)
    sa, sb = a.updater.state(), b.updater.state()
    assert sorted(sa) == sorted(sb) == ["sumsq0", "sumsq1", "velocity0", "velocity1"]
    for k in sa:
        np.testing.assert_array_equal(sa[k].data, sb[k].data)
    assert b.updater.t == a.updater.t
    assert b.opts.as_dict() == a.opts.as_dict()
    assert (b.step, b.samples, b._pos) == (a.step, a.samples, a._pos) == (17, 700 + 6 * 64, (1, 6))
    ck = load_checkpoint(path)
    assert ck.meta["model"] == "LeastSquares" and ck.meta["updater"] == "ADAGrad"


@pytest.mark.parametrize("stop_at", [22, 33], ids=["pass-end", "mid-pass"])
def test_resuming_from_a_checkpoint_continues_exactly(tmp_path, stop_at):
    straight = _learner(n_passes=5)
    straight.fit(progress=None)
    first = _learner(n_passes=5, max_steps=stop_at)  # 11 minibatches per pass
    first.fit(progress=None)
    second = _resumed(first, _learner, tmp_path)
    assert second.step == straight.step == 55
    for x, y in zip(straight.model.modelmats, second.model.modelmats, strict=True):
        np.testing.assert_array_equal(x.data, y.data)


def test_periodic_checkpoints_and_saving_while_running(tmp_path):
    path = tmp_path / "run.npz"
    lr = _learner(n_passes=3, checkpoint=str(path))
    lr.fit(progress=None)
    ck = load_checkpoint(path)
    assert ck.meta["progress"]["pass"] == 3
    np.testing.assert_array_equal(ck.modelmats[0], lr.model.modelmats[0].data)
    # while running: the training thread writes it at a minibatch boundary
    lr.set(n_passes=1_000_000, checkpoint=None)
    lr.start()
    saved = lr.save(str(tmp_path / "live.npz"), timeout=10)
    lr.stop()
    live = load_checkpoint(saved)
    assert 3 * 11 <= live.meta["progress"]["step"] <= lr.step
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary files left behind


def test_checkpoint_mismatches_are_explained(tmp_path):
    a = _learner(n_passes=1)
    a.fit(progress=None)
    a.save(str(tmp_path / "a.npz"))
    rng = np.random.default_rng(0)
    other = Learner(LeastSquares(), (rng.random((50, 3)), rng.random(50)), Grad(), batch_size=10)
    with pytest.raises(CheckpointError, match=r"shapes \[\(2, 8\), \(2, 1\)\], but this model "
                                              r"has \[\(1, 3\), \(1, 1\)\]"):
        other.load(str(tmp_path / "a.npz"))
    with pytest.raises(CheckpointError, match="no checkpoint file"):
        a.load(str(tmp_path / "missing.npz"))
    fresh = _learner()
    with pytest.raises(RuntimeError, match="nothing to save yet"):
        fresh.save(str(tmp_path / "b.npz"))
    with pytest.raises(ValueError, match="needs a path"):
        fresh.save()


class _Evil:
    """Unpickling this would create a marker file: proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_loading_crafted_files_never_runs_code(tmp_path):
    marker = tmp_path / "pwned"
    # 1. an npz whose array is a pickled object
    evil_npz = tmp_path / "evil.npz"
    np.savez(evil_npz, **{"model/0": np.array([_Evil(marker)], dtype=object),
                          "__meta__": np.frombuffer(b'{"format": "bidlab-checkpoint"}',
                                                    np.uint8)})
    with pytest.raises(CheckpointError, match="only numbers are allowed"):
        load_checkpoint(evil_npz)
    # 2. a bare pickle with the checkpoint's name
    evil_pkl = tmp_path / "evil2.npz"
    evil_pkl.write_bytes(pickle.dumps(_Evil(marker)))
    with pytest.raises(CheckpointError):
        load_checkpoint(evil_pkl)
    # 3. an .npy holding a pickle
    evil_npy = tmp_path / "evil3.npz"
    np.save(evil_npy.with_suffix(".npy"), np.array([_Evil(marker)], dtype=object))
    evil_npy.with_suffix(".npy").rename(evil_npy)
    with pytest.raises(CheckpointError):
        load_checkpoint(evil_npy)
    # 4. through the learner
    with pytest.raises(CheckpointError):
        _learner().load(str(evil_npz))
    # 5. numeric arrays but metadata that is not ours
    other = tmp_path / "other.npz"
    np.savez(other, x=np.ones(3), __meta__=np.frombuffer(b'{"format": "x"}', np.uint8))
    with pytest.raises(CheckpointError, match="not a bidlab checkpoint"):
        load_checkpoint(other)
    assert not marker.exists()
    # the real thing is of course unpickled correctly, and only the pickle-free way
    assert pickle.loads(pickle.dumps(_Evil(marker))) is None and marker.exists()


_WRITER = textwrap.dedent("""
    import sys, numpy as np
    from bidlab.learn.checkpoint import save_checkpoint
    path = sys.argv[1]
    big = np.empty((4_000_000, 2), np.float32)   # 32 MB: a write takes a while
    k = 0
    while True:
        big.fill(k)
        save_checkpoint(path, {"model/0": big}, {"progress": {"step": k}})
        if k == 0:
            print("ready", flush=True)
        k += 1
""")


def test_writer_killed_mid_write_leaves_the_previous_checkpoint_loadable(tmp_path):
    path = tmp_path / "ck.npz"
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    caught_mid_write = 0
    for attempt in range(20):  # 20 kills at staggered moments
        proc = subprocess.Popen([sys.executable, str(script), str(path)],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "ready"
            time.sleep(0.02 + 0.023 * attempt)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            proc.stdout.close()
        leftovers = list(tmp_path.glob(".ck.npz.tmp-*"))
        caught_mid_write += bool(leftovers)
        ck = load_checkpoint(path)  # whatever happened, the last complete one loads
        k = ck.meta["progress"]["step"]
        big = ck.modelmats[0]
        assert big.shape == (4_000_000, 2) and big[0, 0] == k and big[-1, -1] == k
    assert caught_mid_write >= 1, "no kill landed during a write; the test proved nothing"


@pytest.mark.parametrize("stop_at", [22, 33], ids=["pass-end", "mid-pass"])
def test_a_resumed_run_continues_its_average_exactly(tmp_path, stop_at):
    """A run cut by max_steps keeps its last iterate and the running sum of iterates; its
    checkpoint holds both, so resuming ends on the same mean as a run never stopped."""
    def averaging(**opts):
        X, Y = _data()
        return Learner(LeastSquares(), MemorySource(X, Y, batch_size=64, shuffle=True, seed=4),
                       Grad(lrate=0.05, average_from=15, average_every=2), **opts)

    straight = averaging(n_passes=5)
    straight.fit(progress=None)
    last = averaging(n_passes=5, average_from=-1)
    last.fit(progress=None)
    assert not np.allclose(straight.model.modelmats[0].data, last.model.modelmats[0].data)
    first = averaging(n_passes=5, max_steps=stop_at)
    first.fit(progress=None)
    t = first.updater.t  # updates so far (validation minibatches do not update)
    assert t > 15 and first.updater.counters()["average_n"] == (t - 15) // 2
    second = _resumed(first, averaging, tmp_path)
    assert second.step == straight.step == 55
    for x, y in zip(straight.model.modelmats, second.model.modelmats, strict=True):
        np.testing.assert_allclose(x.data, y.data, rtol=1e-6)


def test_a_checkpoint_made_with_other_fixed_options_rebuilds_the_model(tmp_path):
    """A topic model saved after a merge holds one topic fewer than the learner that loads
    it was built with: the learner builds its model again with the checkpoint's k."""
    from bidlab.datasets import synthetic_lda_corpus
    from bidlab.models import LDA

    c = synthetic_lda_corpus(n_docs=300, n_words=200, k=5, seed=1)
    est = LDA(n_components=6, random_state=0)
    first = est.learner(c.X, n_passes=1)
    first.fit(progress=None)
    first.merge_topics([0, 1]).wait()
    path = first.save(str(tmp_path / "steered.npz"))
    other = LDA(n_components=6, random_state=0)
    second = other.learner(c.X, n_passes=1)
    second.load(path)
    assert other.components_.shape == (5, 200)
    np.testing.assert_array_equal(other.components_, est.components_)
    second.set(n_passes=2)
    second.fit(progress=None)
    assert second.state == "done" and other.transform(c.X[:3]).shape == (3, 5)


def test_a_checkpoint_interval_set_mid_pass_takes_effect_in_that_pass(tmp_path):
    """checkpoint / checkpoint_every are live: lowered while a long pass runs, the next
    periodic checkpoint comes within the new interval, not at the pass end."""
    import time

    from bidlab.learn import Grad, MemorySource
    from bidlab.models.lsq import LeastSquares

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400_000, 4)).astype(np.float32)
    Y = rng.normal(size=(400_000, 1)).astype(np.float32)
    path = tmp_path / "live.npz"
    lrn = Learner(LeastSquares(), MemorySource(X, Y, batch_size=10), Grad(lrate=0.001),
                  n_passes=1, checkpoint=str(path), checkpoint_every=1000.0)
    lrn.start()
    try:
        time.sleep(0.3)
        lrn.set(checkpoint_every=0.2)
        t0 = time.monotonic()
        while not path.exists() and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        assert path.exists() and lrn.state == "running", lrn.state
        assert load_checkpoint(path).meta["progress"]["pass"] == 0  # within the pass
    finally:
        lrn.stop()
        lrn.join()
