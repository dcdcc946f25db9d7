"""``bidlab lab``: JupyterLab on 127.0.0.1 with a token, opening a notebook."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bidlab.lab import launcher as launch_mod
from bidlab.lab.access import (
    RUNTIME_ENV,
    announce,
    private_runtime_dir,
    start_server,
    token_file,
)
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


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def lab_subprocess(tmp_path: Path, runtime: Path, *args: str) -> subprocess.CompletedProcess:
    """``bidlab lab --no-browser <args>`` in ``tmp_path`` with ``$JUPYTER_RUNTIME_DIR`` =
    ``runtime``; 60 s at most."""
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(runtime),
               JUPYTER_CONFIG_DIR=str(tmp_path / "_cfg"), JUPYTER_DATA_DIR=str(tmp_path / "_d"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return subprocess.run([sys.executable, "-m", "bidlab.cli", "lab", "--no-browser",
                           "--port", str(port), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)


# ------------------------------------------------------------ the token stays private
def test_a_missing_runtime_folder_is_created_private(tmp_path):
    folder = tmp_path / "a" / "runtime"
    old = os.umask(0o022)  # a common umask: folders would be 0755
    try:
        assert private_runtime_dir(folder) == folder
    finally:
        os.umask(old)
    assert mode(folder) == 0o700
    assert private_runtime_dir(folder) == folder, "a private folder is used as it is"
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert private_runtime_dir(link) == folder, "the server gets the checked folder itself"


def test_a_shared_runtime_folder_is_refused_and_left_alone(tmp_path):
    folder = tmp_path / "rt"
    folder.mkdir()
    for bits, words in ((0o1777, "is writable by other users (mode 1777)"),
                        (0o770, "is writable by other users (mode 0770)"),
                        (0o755, "is readable by other users (mode 0755)")):
        os.chmod(folder, bits)
        with pytest.raises(PermissionError, match=re.escape(words)) as err:
            private_runtime_dir(folder)
        assert f"`chmod 700 {folder}`" in str(err.value) and RUNTIME_ENV in str(err.value)
        assert mode(folder) == bits, "the launcher must not change a folder it did not create"
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match="is not a folder"):
        private_runtime_dir(tmp_path / "file")


def test_another_users_runtime_folder_is_refused(tmp_path):
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 65534, 65534)  # nobody
    else:
        theirs = Path("/")  # root's
    with pytest.raises(PermissionError, match="belongs to another user"):
        private_runtime_dir(theirs)


def test_bidlab_lab_refuses_a_shared_runtime_folder(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like JUPYTER_RUNTIME_DIR in the system temporary folder
    res = lab_subprocess(tmp_path, shared)
    assert res.returncode == 2, res.stderr
    assert f"the Jupyter runtime folder {shared} is writable by other users" in res.stderr
    assert list(shared.iterdir()) == [], "nothing was written to the shared folder"


def test_the_server_process_creates_private_files(tmp_path):
    code = ("import os, sys; open(sys.argv[1], 'w').write('token'); os.mkdir(sys.argv[2])")
    old = os.umask(0o022)
    try:
        proc = start_server([sys.executable, "-c", code, str(tmp_path / "f"),
                             str(tmp_path / "d")], os.environ)
    finally:
        os.umask(old)
    assert proc.wait(30) == 0
    assert mode(tmp_path / "f") == 0o600 and mode(tmp_path / "d") == 0o700


URL = "http://127.0.0.1:9999/lab/tree/x.ipynb?token=tok123"


def test_the_url_with_the_token_is_printed_to_a_terminal_only(tmp_path):
    where = token_file(tmp_path, 4242, notebook=True)
    assert where == tmp_path / "jpserver-file-to-run-4242-open.html"
    assert token_file(tmp_path, 4242, notebook=False) == tmp_path / "jpserver-4242-open.html"
    # a redirected stream: a StringIO, a pipe
    buf = io.StringIO()
    line = announce(URL, "tok123", where, buf)
    assert buf.getvalue() == line + "\n" and "tok123" not in line
    assert line.startswith("bidlab lab: http://127.0.0.1:9999/lab/tree/x.ipynb (")
    assert str(where) in line and "jupyter server list" in line
    r, w = os.pipe()
    with open(w, "w") as out:
        announce(URL, "tok123", where, out)
    with open(r) as inp:
        assert "tok123" not in inp.read()
    # a terminal: the URL to click, with the token
    master, slave = os.openpty()
    try:
        with open(slave, "w", closefd=False) as tty:
            assert announce(URL, "tok123", where, tty) == f"bidlab lab: {URL}"
        assert b"?token=tok123" in os.read(master, 4096)
    finally:
        os.close(master)
        os.close(slave)


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
        # the log is a file, not a terminal: the URL without the token, and where it is
        text = log.read_text()
        runtime = tmp_path / "_jupyter" / "rt"
        assert f"bidlab lab: {base}/lab/tree/notebooks/demo.ipynb (the access token" in text
        assert "sekret" not in text, "the token reached a redirected log"
        assert f"{runtime}/jpserver-file-to-run-" in text
        # the runtime folder is private and every file the server wrote there is 0600
        assert mode(runtime) == 0o700
        files = sorted(runtime.iterdir())
        assert any(f.name.endswith("-open.html") for f in files), files
        assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
        holders = [f.name for f in files if "sekret" in f.read_text(errors="replace")]
        assert any("file-to-run" in name for name in holders), holders
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
