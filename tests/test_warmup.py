"""``bidlab warmup`` fills numba's disk cache so that a later process compiles nothing, and
the cache-folder policy of :mod:`bidlab._numba_cache`.

The main test runs real processes against an empty ``NUMBA_CACHE_DIR``: one runs the
warm-up (k-means, float32: the cheapest family to compile), which compiles the kernels
that have no numpy stand-in; a fresh one then fits k-means on data of other sizes with the
stand-ins running (as before the background compiles land) and records every numba
compilation through numba's event API. It must see none for the warmed dtype, and must see
some for float64, which was not warmed (so the check can fail).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from compile_events import compile_recorder

REPO = Path(__file__).resolve().parent.parent

# A first fit in a fresh process: prints the bidlab kernels numba compiled while fitting
# float32 data (dense and CSR; Lloyd with and without bounds, minibatch), then those it
# compiled for float64 data.
_FIRST_FIT = compile_recorder(with_args=True) + r"""
from bidlab.kern import standin
from bidlab.models import KMeans

rng = np.random.default_rng(5)
dense = rng.standard_normal((3000, 40)).astype(np.float32)
csr = sp.random(3000, 200, density=0.05, format="csr", dtype=np.float32, random_state=rng)
out = {}
with standin.forced():  # as on a fresh installation before the background compiles land
    for dtype in ("float32", "float64"):
        start = len(compiled)
        for X in (dense.astype(dtype), csr.astype(dtype)):
            KMeans(6, max_iter=5, random_state=0).fit(X).predict(X)
            KMeans(6, max_iter=5, bounds=False, random_state=0).fit(X)
            KMeans(6, algorithm="minibatch", batch_size=512, max_iter=2, random_state=0).fit(X)
        out[dtype] = compiled[start:]
print(json.dumps(out))
"""


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    env.setdefault("NUMBA_NUM_THREADS", "2")
    return env


def test_warmup_rejects_unknown_names() -> None:
    from bidlab.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["warmup", "--models", "kmeans,nonesuch"])
    assert exc.value.code == 2
    from bidlab.cli.warmup import jobs

    with pytest.raises(ValueError, match="float16"):
        jobs(("kmeans",), ("float16",))


def test_warmup_thresholds_exist() -> None:
    """Every threshold the warm-up moves to reach a kernel variant is still there."""
    import importlib

    from bidlab.cli.warmup import BRANCHES

    for settings in BRANCHES.values():
        for module, attr in settings:
            assert isinstance(getattr(importlib.import_module(module), attr), int), (module, attr)


def test_glm_warmup_runs_the_deferred_catch_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GLM job reaches the kernel that lands deferred L1 / L2 terms, for ADAGrad and
    plain gradient steps: a default fit on wide sparse data defers them, and its first
    fit after a warm-up that never deferred compiled that kernel (~2 s)."""
    from bidlab.cli import warmup
    from bidlab.kern import touched

    seen: list[bool] = []
    catch_up = touched._catch_up_all

    def counted(*args: object) -> None:
        seen.append(bool(args[11]))  # the adagrad flag
        catch_up(*args)

    monkeypatch.setattr(touched, "_catch_up_all", counted)
    rule = touched.DEFER_BELOW
    warmup._glm("float32")
    assert set(seen) == {True, False}, seen
    assert touched.DEFER_BELOW == rule  # the warm-up put the threshold back


# ----------------------------------------------------------------------------- policy


@pytest.fixture
def policy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """bidlab._numba_cache with every location under tmp_path (restores numba's config)."""
    import numba.core.config as numba_config

    from bidlab import _numba_cache

    blocker = tmp_path / "a-file"
    blocker.write_text("")  # nothing can be created below a file: an unwritable place
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with monkeypatch.context() as m:
        m.setenv("NUMBA_CACHE_DIR", "unset")  # recorded, so the teardown restores it...
        m.delenv("NUMBA_CACHE_DIR")  # ...even after configure() sets it
        m.setattr(tempfile, "tempdir", str(tmp))
        m.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
        m.setattr(_numba_cache, "KERNEL_DIRS", (tmp_path / "pkg",))
        yield _numba_cache, m, blocker
    numba_config.reload_config()  # the variable is back to its value: numba re-reads it


def test_policy_leaves_a_writable_package_folder_to_numba(policy) -> None:
    nc, _, _ = policy
    assert nc.configure() is None
    assert "NUMBA_CACHE_DIR" not in os.environ


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="XDG layout")
def test_policy_leaves_the_user_cache_folder_to_numba(policy) -> None:
    nc, m, blocker = policy
    m.setattr(nc, "KERNEL_DIRS", (blocker / "pkg",))
    assert nc.configure() is None
    assert "NUMBA_CACHE_DIR" not in os.environ
    assert (Path(os.environ["XDG_CACHE_HOME"]) / "numba").is_dir()


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="XDG layout")
def test_policy_falls_back_to_the_temp_folder(policy) -> None:
    import numba.core.config as numba_config

    nc, m, blocker = policy
    m.setattr(nc, "KERNEL_DIRS", (blocker / "pkg",))
    m.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
    chosen = nc.configure()
    assert chosen == str(nc.fallback_dir())
    assert chosen.startswith(tempfile.gettempdir())
    assert os.environ["NUMBA_CACHE_DIR"] == chosen
    assert numba_config.CACHE_DIR == chosen  # numba was imported already: it re-read it
    assert Path(chosen).is_dir()


def test_policy_respects_an_explicit_cache_dir(policy, tmp_path: Path) -> None:
    nc, m, blocker = policy
    m.setattr(nc, "KERNEL_DIRS", (blocker / "pkg",))
    m.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
    m.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    assert nc.configure() is None
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "mine")


def test_warmup_in_worker_processes_fills_the_cache(tmp_path: Path) -> None:
    """``--processes 2`` runs the jobs in two spawned workers; their kernels land in the
    cache (each job reported once) and a first fit afterwards, stand-ins running where
    kernels have them, compiles nothing in float32,
    while the float64 it did not warm up compiles (so the check can see compilations)."""
    cache = tmp_path / "numba-cache"
    warm = subprocess.run(
        [sys.executable, "-m", "bidlab.cli", "warmup", "--models", "kmeans,core",
         "--dtypes", "float32", "--processes", "2"],
        cwd=REPO, env=_env(cache), capture_output=True, text=True, timeout=600)
    assert warm.returncode == 0, warm.stderr[-3000:]
    assert warm.stdout.count("kmeans float32") == 1 and warm.stdout.count("core float32") == 1
    assert f"numba cache: {cache}" in warm.stdout, warm.stdout
    assert any(cache.rglob("*.nbi")), "the warm-up wrote no numba cache index"
    fit = subprocess.run([sys.executable, "-c", _FIRST_FIT], cwd=REPO, env=_env(cache),
                         capture_output=True, text=True, timeout=600)
    assert fit.returncode == 0, fit.stderr[-3000:]
    got = json.loads(fit.stdout.strip().splitlines()[-1])
    assert got["float32"] == [], "compiled after warmup:\n" + "\n".join(got["float32"])
    # float64 was not warmed up: the listener must have seen those compilations
    assert got["float64"], "no compilation seen for unwarmed float64: the check is blind"
