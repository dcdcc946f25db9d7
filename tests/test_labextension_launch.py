"""``bidlab lab``: JupyterLab on 127.0.0.1 with a token, opening a notebook."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bidlab.lab import launcher as launch_mod
from bidlab.lab.launcher import (
    DEFAULT_NOTEBOOK,
    DEMOS_ENV,
    add_arguments,
    lab_command,
    lab_environment,
    resolve_notebook,
)


def test_a_named_notebook_must_exist(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="notebook 'missing.ipynb' not found"):
        resolve_notebook("missing.ipynb")
    (tmp_path / "a.ipynb").write_text("{}")
    assert resolve_notebook("a.ipynb") == tmp_path / "a.ipynb"


def test_the_default_notebook_is_looked_up_here_then_in_the_checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launch_mod, "CHECKOUT_DIR", tmp_path / "nowhere")
    monkeypatch.setattr(launch_mod, "SHIPPED_DEMOS", tmp_path / "nowhere" / "notebooks")
    assert resolve_notebook(None) is None  # no checkout, and a package without the demos
    nb = tmp_path / DEFAULT_NOTEBOOK
    nb.parent.mkdir(parents=True)
    nb.write_text("{}")
    assert resolve_notebook(None) == nb


@pytest.fixture
def wheel_install(tmp_path, monkeypatch):
    """An installed wheel: no checkout, the demos shipped in the package, a fresh home."""
    site = tmp_path / "site-packages"
    shipped = site / "bidlab" / "notebooks"
    shipped.mkdir(parents=True)
    for name in ("01_quickstart.ipynb", "02_lda_live.ipynb"):
        (shipped / name).write_text(json.dumps({"shipped": name}))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(DEMOS_ENV, raising=False)
    monkeypatch.setattr(launch_mod, "CHECKOUT_DIR", site)
    monkeypatch.setattr(launch_mod, "SHIPPED_DEMOS", shipped)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return shipped, home


def test_without_a_checkout_the_lda_demo_opens_from_a_user_folder(wheel_install, capsys):
    shipped, home = wheel_install
    demos = home / "bidlab-demos"
    path = resolve_notebook(None)
    assert path == demos / "02_lda_live.ipynb"
    assert sorted(p.name for p in demos.iterdir()) == ["01_quickstart.ipynb",
                                                        "02_lda_live.ipynb"]
    assert path.read_bytes() == (shipped / "02_lda_live.ipynb").read_bytes()
    assert f"to {demos}" in capsys.readouterr().err
    # the server's root is the demos folder (the notebook is outside the working directory)
    cmd, url = lab_command(path, 9999, "tok", open_browser=False)
    assert f"--ServerApp.root_dir={demos}" in cmd
    assert url.endswith("/lab/tree/02_lda_live.ipynb?token=tok")
    # the user's edits are never overwritten; a deleted demo comes back
    path.write_text("edited")
    (demos / "01_quickstart.ipynb").unlink()
    assert resolve_notebook(None) == path
    assert path.read_text() == "edited"
    assert (demos / "01_quickstart.ipynb").read_bytes() == (
        shipped / "01_quickstart.ipynb").read_bytes()
    assert "01_quickstart.ipynb to" in capsys.readouterr().err


def test_the_demos_folder_can_be_chosen_and_an_unwritable_one_is_reported(
        wheel_install, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(DEMOS_ENV, str(tmp_path / "mine"))
    assert resolve_notebook(None) == tmp_path / "mine" / "02_lda_live.ipynb"
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(DEMOS_ENV, str(blocker / "demos"))
    assert resolve_notebook(None) is None  # JupyterLab then opens without a notebook
    err = capsys.readouterr().err
    assert "cannot copy the demo notebooks" in err and DEMOS_ENV in err


def test_command_binds_loopback_with_a_token_and_opens_the_notebook(tmp_path):
    nb = tmp_path / "notebooks" / "x.ipynb"
    cmd, url = lab_command(nb, 9999, "tok", open_browser=False, root_dir=tmp_path)
    assert "--ServerApp.ip=127.0.0.1" in cmd
    assert not any("tok" in part for part in cmd), "the token must not be on the command line"
    env = lab_environment("tok", {"PATH": "/bin", "JUPYTER_TOKEN_FILE": "/elsewhere"})
    assert env == {"PATH": "/bin", "JUPYTER_TOKEN": "tok"}
    assert "--ServerApp.port=9999" in cmd and "--ServerApp.open_browser=False" in cmd
    assert str(nb) in cmd and f"--ServerApp.root_dir={tmp_path}" in cmd
    assert url == "http://127.0.0.1:9999/lab/tree/notebooks/x.ipynb?token=tok"
    # a notebook outside the working directory: its folder becomes the root
    cmd, url = lab_command(nb, 9999, "tok", open_browser=True, root_dir=tmp_path / "other")
    assert f"--ServerApp.root_dir={nb.parent}" in cmd
    assert url.endswith("/lab/tree/x.ipynb?token=tok")


def test_cli_arguments():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["nb.ipynb", "--port", "9000", "--no-browser"])
    assert (args.notebook, args.port, args.token, args.no_browser) == ("nb.ipynb", 9000, None,
                                                                       True)
    assert parser.parse_args([]).notebook is None


def listening_addresses(port: int) -> list[str]:
    """Local addresses of the TCP sockets listening on ``port`` (from /proc/net/tcp*)."""
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp here to check the bound address")
    found = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, hexport = local.split(":")
            if state != "0A" or int(hexport, 16) != port:
                continue
            raw = bytes.fromhex(addr)
            if v6:
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                found.append(socket.inet_ntop(socket.AF_INET6, words))
            else:
                found.append(socket.inet_ntop(socket.AF_INET, raw[::-1]))
    return found


def get(url: str, token: str | None) -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"} if token
                                 else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, ConnectionError):
        return 0  # not listening (yet)


def command_lines() -> dict[int, str]:
    """pid -> command line of every process this user can see (as ``ps`` shows them)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out[int(entry.name)] = (entry / "cmdline").read_bytes().replace(
                    b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
    return out


def other_user_cannot_read_environment(pid: int) -> None:
    """As another OS user (``nobody``, when this test runs as root), the server's
    environment -- where its token is -- cannot be read."""
    import shutil

    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return  # needs root to act as a second user; the command-line check above stands
    res = subprocess.run(["runuser", "-u", "nobody", "--", "cat", f"/proc/{pid}/environ"],
                         capture_output=True, timeout=10)
    assert res.returncode != 0 and b"sekret" not in res.stdout, (
        "another user could read the server's environment")
    res = subprocess.run(["runuser", "-u", "nobody", "--", "cat", f"/proc/{pid}/cmdline"],
                         capture_output=True, timeout=10)
    assert res.returncode == 0 and b"sekret" not in res.stdout


@pytest.mark.slow
def test_launch_serves_the_notebook_on_loopback_with_a_token(tmp_path):
    pytest.importorskip("jupyterlab")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "demo.ipynb").write_text(json.dumps(
        {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ)
    for var, sub in (("JUPYTER_CONFIG_DIR", "cfg"), ("JUPYTER_RUNTIME_DIR", "rt"),
                     ("JUPYTER_DATA_DIR", "data"), ("JUPYTERLAB_WORKSPACES_DIR", "ws"),
                     ("JUPYTERLAB_SETTINGS_DIR", "settings")):
        env[var] = str(tmp_path / "_jupyter" / sub)
    env["JUPYTER_TOKEN"] = "sekret"  # the launcher's own command line stays clean too
    code = ("import sys; from bidlab.lab import launch; "
            f"sys.exit(launch('notebooks/demo.ipynb', port={port}, open_browser=False))")
    log = tmp_path / "lab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 60
        while get(f"{base}/api/status", "sekret") != 200:
            assert proc.poll() is None, f"bidlab lab exited early:\n{log.read_text()}"
            assert time.monotonic() < end, f"server did not answer:\n{log.read_text()}"
            time.sleep(0.25)
        assert get(f"{base}/api/status", None) == 403, "the server must require the token"
        assert get(f"{base}/api/contents/notebooks/demo.ipynb", "sekret") == 200
        text = log.read_text()
        assert f"bidlab lab: {base}/lab/tree/notebooks/demo.ipynb?token=sekret" in text
        # bound to loopback only: every listening socket on the port is 127.0.0.1 (or ::1)
        listeners = listening_addresses(port)
        assert listeners, f"no listening socket found for port {port}"
        assert set(listeners) <= {"127.0.0.1", "::1"}, f"listens on {listeners}"
        # no process shows the token on its command line (readable by every local user)
        leaks = [pid for pid, line in command_lines().items() if "sekret" in line]
        assert not leaks, f"the token is on the command line of processes {leaks}"
        server_pids = [pid for pid, line in command_lines().items()
                       if "jupyterlab" in line and str(port) in line]
        assert server_pids, "the JupyterLab server process was not found"
        other_user_cannot_read_environment(server_pids[0])
        # SIGTERM to `bidlab lab` stops the server too
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(f"{base}/api/status", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
