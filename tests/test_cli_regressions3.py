"""``bidlab`` command lines: the top-level help on stdout and unknown flags refused, the
train help listing the command's own options, a resume whose options reshape the model
refused, and ``--holdout`` refused where nothing would be held out."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from bidlab.cli import main


def _bidlab(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bidlab.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_top_level_help_goes_to_stdout_and_unknown_flags_fail(capsys) -> None:
    assert main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert "COMMAND" in out and "train" in out and err == ""
    assert main(["--bogus"]) == 2
    assert "unrecognised arguments: --bogus" in capsys.readouterr().err


@pytest.mark.parametrize("model", [None, "kmeans"])
def test_train_help_lists_the_commands_own_options(capsys, model) -> None:
    assert main(["train", *([model] if model else []), "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--holdout FRACTION", "--coherence", "--ranks N", "--restart"):
        assert flag in out
    assert "auto|text|lines|none" in out


def test_resuming_with_another_n_components_is_refused(tmp_path) -> None:
    rng = np.random.default_rng(0)
    rows, cols = np.divmod(rng.choice(40 * 30, 320, replace=False), 30)
    ratings = tmp_path / "ratings.csv"
    ratings.write_text("user,item,rating\n" + "".join(
        f"{u},{i},{rng.integers(1, 6)}\n" for u, i in zip(rows, cols, strict=True)))
    ck = tmp_path / "ck"
    common = ("train", "sfa", "--data", str(ratings), "--checkpoint", str(ck),
              "--progress", "none")
    first = _bidlab(*common, "--n_passes", "2", "--n_components", "4")
    assert first.returncode == 0, first.stderr
    again = _bidlab(*common, "--n_passes", "4", "--n_components", "6")
    assert again.returncode == 2, again.stderr
    assert "cannot resume" in again.stderr and "--restart" in again.stderr
    same = _bidlab(*common, "--n_passes", "4", "--n_components", "4")
    assert same.returncode == 0 and "resuming from" in same.stderr, same.stderr


def test_a_failed_rebuild_on_resume_says_cannot_resume(tmp_path) -> None:
    X = np.random.default_rng(0).random((120, 6))
    data = tmp_path / "x.npz"
    np.savez(data, X=X)
    ck = tmp_path / "ck"
    common = ("train", "nmf", "--data", str(data), "--checkpoint", str(ck), "--progress",
              "none", "--n_passes", "2")
    assert _bidlab(*common, "--n_components", "2").returncode == 0
    r = _bidlab(*common, "--n_components", "3")
    assert r.returncode == 2
    assert "cannot resume" in r.stderr and "--restart" in r.stderr, r.stderr


def test_holdout_is_refused_for_a_plain_model(tmp_path, capsys) -> None:
    data = tmp_path / "xy.npz"
    np.savez(data, X=np.random.default_rng(0).random((50, 3)), y=np.zeros(50))
    assert main(["train", "lsq", "--data", str(data), "--holdout", "0.2"]) == 2
    assert "--holdout needs an estimator model" in capsys.readouterr().err

