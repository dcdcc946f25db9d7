"""The background compiler when things go wrong: a worker that dies, a cache that cannot be
written, a forked child, a timed-out wait, an unusable ``NUMBA_CACHE_DIR``.

Each cold case runs in a fresh process with its own empty ``NUMBA_CACHE_DIR``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _cold(code: str, cache: Path, timeout: float = 150) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), BIDLAB_BACKGROUND_COMPILE="1",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


_PRELUDE = """
import json, os, signal, sys, time
import numpy as np, scipy.sparse as sp
from bidlab import kern
from bidlab.kern import cpu_elementwise, standin
S = sp.random(50, 40, density=0.2, format="csr", random_state=0)
oracle = np.asarray(S.sum(axis=0)).ravel()
"""

_KILLED = _PRELUDE + """
first = kern.col_sums(S)
before = [j["state"] for j in standin.status()["jobs"]]
os.kill(standin._worker.pid, signal.SIGKILL)
finished = standin.wait(60)
second = kern.col_sums(S)
print(json.dumps({"before": before, "finished": finished, "runs": standin.runs(),
                  "states": [j["state"] for j in standin.status()["jobs"]],
                  "right": bool(np.allclose(first, oracle) and np.allclose(second, oracle))}))
"""


def test_a_killed_worker_s_jobs_are_compiled_here_not_stood_in_for_ever(tmp_path: Path) -> None:
    got = _cold(_KILLED, tmp_path / "cache")
    assert got["before"] == ["pending"]
    assert got["finished"] and got["right"]
    assert got["states"] == ["failed"]  # reported when the worker's output ended...
    assert got["runs"] == 1  # ...so the second call ran machine code compiled here


_FULL = _PRELUDE + """
import errno
from numba.core import caching

def full(*args, **kws):
    raise OSError(errno.ENOSPC, "No space left on device")

caching.IndexDataCacheFile.save = full  # this process cannot write the disk cache
standin._submit = lambda hook, sig: False  # and no worker takes the job: compile here
out = kern.col_sums(S)
print(json.dumps({"right": bool(np.allclose(out, oracle)), "runs": standin.runs(),
                  "compiled": len(cpu_elementwise._csr_col_sums.overloads)}))
"""


def test_a_cache_that_cannot_be_written_does_not_fail_the_call(tmp_path: Path) -> None:
    got = _cold(_FULL, tmp_path / "cache")
    assert got == {"right": True, "runs": 0, "compiled": 1}


_FORK = _PRELUDE + """
kern.col_sums(S)
go_r, go_w = os.pipe()
res_r, res_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(go_w)
    pending = [s for h in standin._hooks for s in h.state.values() if s == "pending"]
    os.read(go_r, 1)  # alive, touching nothing, until the parent's wait is over
    kern.col_sums(S)  # sent to a worker of the child's own
    ok = standin.wait(90)
    out = kern.col_sums(S)
    os.write(res_w, json.dumps({"pending": len(pending), "waited": ok,
                                "compiled": len(cpu_elementwise._csr_col_sums.overloads),
                                "right": bool(np.allclose(out, oracle))}).encode())
    os._exit(0)
os.close(res_w)
t0 = time.monotonic()
waited = standin.wait(45)  # the child lives on, with its copies of the worker's pipes
seconds = time.monotonic() - t0
os.write(go_w, b"x")
child = json.loads(os.read(res_r, 4096).decode())
os.waitpid(pid, 0)
print(json.dumps({"waited": waited, "seconds": seconds, "child": child}))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_neither_keeps_the_parent_s_worker_nor_waits_on_it(tmp_path) -> None:
    got = _cold(_FORK, tmp_path / "cache", timeout=240)
    assert got["waited"], got  # the parent's worker ended while the child lived
    child = got["child"]
    assert child["pending"] == 0  # the parent's job is not the child's to wait for
    assert child["waited"] and child["right"]
    assert child["compiled"] == 1  # the child switched to the compiled kernel


_TIMED_OUT = _PRELUDE + """
kern.col_sums(S)
first = standin._worker.pid
quick = standin.wait(0.001)  # gives up at once: the worker is still compiling
runs = standin.runs()
out = kern.col_sums(S.astype(np.float32))  # a new specialization
print(json.dumps({"quick": quick, "stood_in": standin.runs() - runs,
                  "new_worker": standin._worker is not None and standin._worker.pid != first,
                  "right": bool(np.allclose(out, oracle, rtol=1e-5)),
                  "finished": standin.wait(90)}))
"""


def test_after_a_timed_out_wait_the_next_job_starts_a_new_worker(tmp_path: Path) -> None:
    got = _cold(_TIMED_OUT, tmp_path / "cache")
    assert not got["quick"]
    assert got["stood_in"] == 1  # not compiled here, stalling the call
    assert got["new_worker"] and got["right"] and got["finished"]


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="XDG layout")
def test_an_unwritable_explicit_cache_dir_is_named_in_the_error(monkeypatch, tmp_path) -> None:
    import numba.core.config as numba_config

    from bidlab import _numba_cache as nc

    blocker = tmp_path / "a-file"
    blocker.write_text("")  # nothing can be created below a file
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with monkeypatch.context() as m:
        m.setattr(tempfile, "tempdir", str(tmp))
        m.setattr(nc, "KERNEL_DIRS", (blocker / "pkg",))
        m.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
        m.setenv("NUMBA_CACHE_DIR", str(blocker / "mine"))
        with pytest.raises(RuntimeError, match="NUMBA_CACHE_DIR=.*a-file/mine.*writable"):
            nc.configure()
        assert os.environ["NUMBA_CACHE_DIR"] == str(blocker / "mine")  # left as it was
        m.setattr(nc, "KERNEL_DIRS", (tmp_path / "pkg",))  # numba can use another folder
        assert nc.configure() is None
    numba_config.reload_config()
