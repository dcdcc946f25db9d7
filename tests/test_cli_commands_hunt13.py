"""``bidlab demo``, ``lab``, ``warmup`` and ``docs`` on a user's first mistakes: one line on
stderr and an exit status, no traceback, nothing started that cannot run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bidlab.cli import main

_ENV = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")


def _private_runtime(tmp_path: Path) -> Path:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    os.chmod(runtime, 0o700)
    return runtime


def test_lab_on_a_port_in_use_is_refused_before_any_server_starts(tmp_path, monkeypatch,
                                                                  capsys) -> None:
    pytest.importorskip("jupyterlab")
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(_private_runtime(tmp_path)))
    monkeypatch.chdir(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        rc = main(["lab", "--no-browser", "--port", str(port)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and f"port {port} on 127.0.0.1 is not available" in err, err
    assert "choose another --port" in err
    assert "http://" not in err, "no URL may be printed for a server that never started"
    assert not list((tmp_path / "runtime").glob("jpserver-*")), "a server was started"


def test_lab_without_jupyterlab_says_how_to_install_it(tmp_path) -> None:
    # a jupyterlab that `python -m jupyterlab` cannot run (a broken or partial install)
    (tmp_path / "shadow" / "jupyterlab").mkdir(parents=True)
    (tmp_path / "shadow" / "jupyterlab" / "__init__.py").write_text("")
    env = dict(_ENV, PYTHONPATH=str(tmp_path / "shadow"),
               JUPYTER_RUNTIME_DIR=str(_private_runtime(tmp_path)))
    r = subprocess.run([sys.executable, "-m", "bidlab.cli", "lab", "--no-browser"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "JupyterLab is not installed" in r.stderr and "pip install" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "http://" not in r.stderr, r.stderr


def test_demo_names_a_shared_data_variable_that_points_nowhere(tmp_path, monkeypatch) -> None:
    from bidlab.demo import default_corpus

    missing = tmp_path / "no such folder"
    monkeypatch.setenv("BIDLAB_SHARED_DATA", str(missing))
    corpus, why = default_corpus()
    assert corpus.X.shape[0] > 0
    assert "$BIDLAB_SHARED_DATA" in why and str(missing) in why and "not a folder" in why, why
    empty = tmp_path / "shared"
    empty.mkdir()
    monkeypatch.setenv("BIDLAB_SHARED_DATA", str(empty))
    assert f"{empty} has no uci-kos folder" in default_corpus()[1]


@pytest.mark.parametrize("kind", ["file", "below a file"])
def test_docs_into_a_file_is_refused_with_one_line(tmp_path, capsys, kind) -> None:
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_nb")
    existing = tmp_path / "notes.txt"
    existing.write_text("mine")
    out = existing if kind == "file" else existing / "site"
    rc = main(["docs", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and f"cannot write the site into --out {out}" in err, err
    assert existing.read_text() == "mine"


def test_warmup_refuses_bad_processes_before_announcing_work(capsys) -> None:
    assert main(["warmup", "--processes", "0"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--processes must be >= 1" in err


def _interrupted(args, cwd, env, started):
    """``bidlab ARGS`` sent Ctrl-C once ``started(proc)`` has read that it is under way
    (SIGINT as an interactive shell leaves it, whatever this worker does with it): its
    exit status and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "bidlab.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        started(proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def test_ctrl_c_in_warmup_ends_with_one_line_and_status_130(tmp_path) -> None:
    # a cold cache of its own: compiling takes long enough to be interrupted midway
    env = dict(_ENV, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONUNBUFFERED="1")
    def started(proc):
        first = proc.stdout.readline()
        assert first.startswith("bidlab warmup: compiling"), first

    code, err = _interrupted(["warmup", "--all", "--models", "kmeans", "--processes", "1"],
                             tmp_path, env, started)
    assert code == 130, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines() == [
        "bidlab warmup: interrupted; the kernels compiled so far stay in numba's cache: run "
        "bidlab warmup again to compile the rest"], err


def test_ctrl_c_in_demo_training_ends_with_one_line_and_status_130(tmp_path) -> None:
    env = dict(_ENV, BIDLAB_SHARED_DATA=str(tmp_path / "none"), PYTHONUNBUFFERED="1")
    def started(proc):
        assert proc.stdout.readline().startswith("corpus: ")
        assert "training + " in proc.stdout.readline()  # printed as the training starts

    code, err = _interrupted(["demo", "--n_passes", "100000", "--progress", "none", "--out",
                              str(tmp_path / "chart.html")], tmp_path, env, started)
    assert code == 130, err
    assert err.strip().splitlines() == ["bidlab demo: interrupted"], err
    assert not (tmp_path / "chart.html").exists()


def test_demo_top_too_large_to_score_is_refused_before_training(tmp_path, monkeypatch,
                                                                 capsys) -> None:
    monkeypatch.setenv("BIDLAB_SHARED_DATA", str(tmp_path / "none"))
    rc = main(["demo", "--top", "3000", "--progress", "none", "--out",
               str(tmp_path / "chart.html")])
    out, err = capsys.readouterr()
    assert rc == 2, err
    assert err.count("\n") == 1 and "--top 3000" in err and "give --top" in err, err
    assert "trained in" not in out and not (tmp_path / "chart.html").exists()


def test_lab_on_a_folder_says_it_is_a_folder(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "my notebooks").mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(_private_runtime(tmp_path)))
    monkeypatch.chdir(tmp_path)
    assert main(["lab", "--no-browser", "my notebooks"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'my notebooks' is a folder, not a notebook" in err, err
