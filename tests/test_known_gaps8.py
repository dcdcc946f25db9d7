"""Shard manifests that list one file twice, ``bidlab warmup``'s idle background compiler,
and the distributed trainer called with an argv of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import drain, needs_mpi

from bidlab.learn.comm import SingleProcess
from bidlab.learn.shards import ShardError, ShardSource, read_manifest, write_shards

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ shard manifests
def _shards(folder: Path, n: int = 12, rows: int = 4) -> tuple[np.ndarray, np.ndarray]:
    X = np.arange(2 * n, dtype=np.float64).reshape(n, 2)
    y = np.arange(n, dtype=np.float64)
    write_shards(folder, X, y, rows_per_shard=rows)
    return X, y


def _list_twice(folder: Path, spelling: str) -> None:
    """Add ``spelling`` (a name of shard-00000.npz) to the manifest as a further shard."""
    path = folder / "manifest.json"
    m = json.loads(path.read_text())
    first = m["shards"][0]
    m["shards"].append({**first, "file": spelling})
    m["n_samples"] += first["rows"]
    path.write_text(json.dumps(m))


@pytest.mark.parametrize("spelling", ["shard-00000.npz", "./shard-00000.npz", "link.npz",
                                      "sub/../shard-00000.npz"])
def test_a_manifest_that_lists_a_shard_twice_is_refused(tmp_path, spelling):
    """Listing one file twice (or under two names of one file) made every reader train on
    its rows twice, without a word."""
    from bidlab.cli import main
    from bidlab.distributed.sharding import read_rank_data

    _shards(tmp_path)
    if spelling == "link.npz":
        (tmp_path / "link.npz").symlink_to(tmp_path / "shard-00000.npz")
    _list_twice(tmp_path, spelling)
    want = "twice" if ".." not in spelling else "outside its folder"
    with pytest.raises(ShardError, match=want) as err:
        read_manifest(tmp_path)
    if ".." not in spelling:
        assert "shard-00000.npz" in str(err.value) and "list each file once" in str(err.value)
    with pytest.raises(ShardError, match=want):
        drain(ShardSource(tmp_path, batch_size=5, n_passes=1))
    with pytest.raises(ShardError, match=want):
        read_rank_data(SingleProcess(), str(tmp_path))
    assert main(["train", "glm", "--data", str(tmp_path), "--n_passes", "1",
                 "--progress", "none"]) == 2


def test_what_write_shards_writes_is_read_back_once(tmp_path):
    """Written twice into one folder (fewer shards the second time), the folder reads back
    as the second data set, each row once."""
    _shards(tmp_path, n=12, rows=3)
    X, y = _shards(tmp_path, n=10, rows=4)
    got = drain(ShardSource(tmp_path, batch_size=3, n_passes=1))
    np.testing.assert_array_equal(np.concatenate([b[1].ravel() for b in got]), y)


def test_a_manifest_of_no_shards_is_named_not_an_index_error(tmp_path):
    """A hand-made manifest with ``n_samples: 0`` and no shards: ``bidlab train`` says the
    folder holds no rows (it failed with an IndexError from stacking no pieces)."""
    from bidlab.cli.train_data import read_shards

    _shards(tmp_path, n=4, rows=2)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest.update(shards=[], n_samples=0)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ShardError, match="holds no rows"):
        read_shards(tmp_path)


# ------------------------------------------------------------------ bidlab warmup
def _workers(marker: str) -> set[int]:
    """The background compile processes started with ``marker`` in their environment."""
    found = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in env and b"compile_worker" in cmd:
            found.add(int(pid))
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
def test_warmup_starts_no_background_compiler(tmp_path):
    """``bidlab warmup`` compiles in the foreground, yet importing the models with a cold
    cache started the background compiler at its end: a process (with a reader and a timer
    thread) that nothing sent a job to, left running after the command had exited."""
    marker = f"bidlab-warmup-test-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT),
               NUMBA_NUM_THREADS="1", BIDLAB_BACKGROUND_COMPILE="1", BIDLAB_TEST_MARK=marker)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bidlab.cli", "warmup", "--models", "core", "--dtypes",
         "float32,float64", "--processes", "2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            seen |= _workers(marker)
            time.sleep(0.05)
        out = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
        seen |= _workers(marker)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _workers(marker):  # what a failing run left behind
            os.kill(pid, 9)
    assert proc.returncode == 0, out
    assert "done in" in out and str(tmp_path / "cache") in out, out
    assert not seen, f"background compiler processes {sorted(seen)} were started"


def test_warmup_leaves_the_background_setting_as_it_was():
    from bidlab.cli.warmup import warmup
    from bidlab.kern import standin

    for on in (True, False):
        with standin.enabled(on):
            warmup(("core",), ("float32",), processes=1)
            assert standin.is_enabled() is on


# ------------------------------------------------------------------ ranks
_PROGRAM = """
import sys
data = sys.argv[1]
sys.argv = [sys.argv[0], "glm", "--data", data, "--batch_size", "4", "--n_passes", "3"]
from bidlab.distributed.train import main
sys.exit(main(["glm", "--data", data, "--batch_size", "10", "--n_passes", "1",
               "--progress", "none"]))
"""


@needs_mpi
def test_the_rank_trainer_reads_the_argv_it_is_given_not_sys_argv(tmp_path):
    """Called from Python, ``bidlab.distributed.train.main(argv)`` takes its batch size
    (and every other option) from ``argv``, whatever ``sys.argv`` holds."""
    from bidlab.distributed.launch import mpiexec_path

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    np.savez(tmp_path / "x.npz", X=X, y=(X[:, 0] > 0).astype(np.float64))
    (tmp_path / "prog.py").write_text(_PROGRAM)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    done = subprocess.run([mpiexec_path(), "-n", "2", sys.executable, str(tmp_path / "prog.py"),
                           str(tmp_path / "x.npz")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    # rank 0's 20 rows in minibatches of 10, one pass (sys.argv: 5 of 4 rows, 3 passes)
    assert "done: 2 minibatches, 20 samples" in done.stdout, done.stdout


# ------------------------------------------------------------------ bidlab train --ranks
@pytest.mark.parametrize("args, said", [
    (("--data", "{tmp}/missing.svm"), "missing.svm"),
    (("--data", "{tmp}/x.npz", "--bogus", "1"), "unknown option 'bogus'"),
    (("--data", "{tmp}/x.npz", "--l2", "-1"), "l2"),
    (("--data", "{tmp}/x.npz", "--save", "{tmp}"), "--save"),
])
def test_bad_input_on_ranks_is_said_once_before_any_rank_starts(tmp_path, capsys, args,
                                                                 said):
    """Every rank printed the same error (two copies could run into one line), each
    followed by MPI's abort lines; now the command checks the options and --data's format
    first, says it once and starts no rank."""
    from bidlab.cli import main

    np.savez(tmp_path / "x.npz", X=np.ones((8, 2)), y=np.ones(8))
    code = main(["train", "glm", "--ranks", "2", "--progress", "none",
                 *(a.format(tmp=tmp_path) for a in args)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert said in err and err.count("bidlab train:") == 1 and "Abort" not in err, err


@pytest.mark.parametrize("args, said", [
    (("--sync-timeout", "0"), "argument --sync-timeout: must be a number of seconds > 0"),
    (("--comm-mode", "ring"), "argument --comm-mode: invalid choice: 'ring'"),
    (("--nest", "2"), "--nest layers the sparse mode, and --comm-mode is average"),
    (("--comm-mode", "sparse", "--nest", "2,x"), "--nest 2,x: give the layer degrees"),
])
def test_bad_rank_options_are_said_once_before_any_rank_starts(tmp_path, capsys, args, said):
    from bidlab.cli import main

    np.savez(tmp_path / "x.npz", X=np.ones((8, 2)), y=np.ones(8))
    code = main(["train", "glm", "--ranks", "2", "--data", str(tmp_path / "x.npz"), *args])
    err = capsys.readouterr().err
    assert code == 2 and said in err and err.count("bidlab train:") == 1, err


@needs_mpi
def test_the_rank_trainers_help_lists_the_rank_options():
    """--help printed bidlab train's help only: --comm-mode, --elastic, --sync-timeout,
    --nest and --comm, which the module's own example uses, were nowhere."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "bidlab.distributed.train", "glm", "--help"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    for flag in ("--comm-mode", "--elastic", "--sync-timeout", "--nest", "--comm "):
        assert flag in done.stdout, done.stdout[-2000:]
