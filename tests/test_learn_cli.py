"""``bidlab train``: a real process trains from shards, checkpoints and resumes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from bidlab.cli import COMMANDS, main
from bidlab.learn import load_checkpoint, write_shards


@pytest.fixture
def planted(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 5)).astype(np.float32)
    w = np.array([1.0, -2.0, 0.5, 3.0, -1.0], np.float32)
    y = X @ w + 2.0
    write_shards(tmp_path / "shards", X, y, rows_per_shard=900)
    np.savez(tmp_path / "data.npz", X=X, y=y)
    return tmp_path, w


def _bidlab(*args):
    return subprocess.run([sys.executable, "-m", "bidlab.cli", *args], capture_output=True,
                          text=True, timeout=120)


def test_train_from_shards_checkpoints_and_resumes(planted):
    tmp, w = planted
    ck = tmp / "ck.npz"
    r = _bidlab("train", "lsq", "--data", str(tmp / "shards"), "--batch-size", "200",
                "--n_passes", "3", "--lrate", "0.1", "--checkpoint", str(ck), "--progress",
                "text")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("done: 60 minibatches, 12000 samples")
    assert "pass   1/3" in r.stderr and "pass   3/3" in r.stderr and "samples/s" in r.stderr
    first = load_checkpoint(ck)
    assert first.meta["progress"]["step"] == 60
    np.testing.assert_allclose(first.modelmats[0].ravel(), w, atol=1e-3)
    np.testing.assert_allclose(first.modelmats[1].ravel(), [2.0], atol=1e-3)
    r = _bidlab("train", "lsq", "--data", str(tmp / "shards"), "--batch-size", "200",
                "--n_passes", "5", "--checkpoint", str(ck), "--progress", "none")
    assert r.returncode == 0, r.stderr
    assert "resuming from" in r.stderr and "step 60" in r.stderr
    assert load_checkpoint(ck).meta["progress"]["step"] == 100


def test_train_from_npz_in_process(planted, capsys):
    tmp, w = planted
    rc = main(["train", "lsq", "--data", str(tmp / "data.npz"), "--batch-size", "250",
               "--n_passes=4", "--val-every", "5", "--l2", "0", "--progress", "none"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert out.out.startswith("done: 64 minibatches")


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["train", "lsq", "--data", "DATA", "--lrate", "-1"], 2,
         "The 'lrate' parameter of Grad must be a float > 0"),
        (["train", "lsq", "--data", "DATA", "--lratee", "1"], 2,
         "unknown option 'lratee'. Did you mean 'lrate'"),
        (["train", "lsq", "--data", "DATA", "--n_passes"], 2, "option --n_passes needs a value"),
        (["train", "lsq", "--data", "missing.npz"], 2, "no such file or folder"),
        (["train", "lsq"], 2, "--data is required"),
        (["train", "nope", "--data", "DATA"], 2, "unknown model 'nope'; known models: "),
        (["train", "lsq", "--data", "DATA", "--updater", "sgd"], 2,
         "The 'updater' parameter of bidlab train must be one of 'grad', 'adagrad'"),
        (["frobnicate"], 2, "unknown command 'frobnicate'"),
    ],
)
def test_bad_command_lines_explain_themselves(planted, capsys, args, code, message):
    tmp, _ = planted
    args = [str(tmp / "data.npz") if a == "DATA" else a for a in args]
    assert main(args) == code
    assert message in capsys.readouterr().err


def test_help_lists_commands_and_model_options(capsys):
    assert main(["--help"]) == 0
    assert main([]) == 2
    assert "train" in capsys.readouterr().err
    assert main(["train", "lsq", "--help"]) == 0
    out = capsys.readouterr().out
    assert "lrate" in out and "fit_intercept" in out and "n_passes" in out
    assert set(COMMANDS) >= {"train"}
