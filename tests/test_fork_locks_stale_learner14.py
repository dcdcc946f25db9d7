"""A forked child gets fresh process-wide locks; a learner its estimator replaced is refused.

1. A lock that one of the parent's threads held at ``os.fork()`` stayed held in the child
   for good: its first fit, cache access, allocation or registry listing hung.
2. ``lrn1 = est.learner(X); lrn2 = est.learner(X); lrn1.start()`` trained a model the
   estimator no longer held (``model_`` is lrn2's): nothing the estimator showed saw it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bidlab.models import GLM, NMF, KMeans

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

# The parent holds LOCK in a thread of its own while it forks; the child runs USE and must
# exit 0 within CHILD_S seconds (a hang is a timeout, and the child is killed).
_SCRIPT = """
import os, sys, threading, time
import numpy as np
import bidlab
from bidlab import backend
from bidlab.kern import cpu, threads
from bidlab.learn import registry, learner_exit
from bidlab.mat import cache
from bidlab.models import base, GLM
from bidlab.models.bayesnet import tables
from bidlab.models.bayesnet.network import Network

X = np.random.default_rng(0).random((40, 3))
y = X @ np.array([1.0, -2.0, 0.5])
GLM(link="linear", n_passes=1).fit(X, y)  # the parent's kernels are ready

held, release = threading.Event(), threading.Event()

def holder():
    with {lock}:
        held.set()
        release.wait()

threading.Thread(target=holder, daemon=True).start()
held.wait()
pid = os.fork()
if pid == 0:
    try:
{use}
    except BaseException as exc:
        print("child failed:", repr(exc), flush=True)
        os._exit(3)
    os._exit(0)
release.set()
deadline = time.monotonic() + {child_s}
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        sys.exit(os.waitstatus_to_exitcode(status))
    time.sleep(0.05)
os.kill(pid, 9)
os.waitpid(pid, 0)
print("child hung", flush=True)
sys.exit(4)
"""

_FIT = """
est = GLM(link="linear", n_passes=1).fit(X, y)
assert est.predict(X).shape == (40,)
assert isinstance(registry.info(), list)
"""

_CASES = {
    "result cache": ("cache.CACHE._lock", """
with bidlab.caching():
    a = bidlab.Mat(np.ones((3, 2), np.float32))
    assert (a + a) is (a + a)
assert cache.cache_stats()["hits"] >= 1
"""),
    "allocation counter": ("backend.allocations._lock", """
backend.empty((4,), np.float32)
"""),
    "backend import lock": ("backend._lock", """
backend._cupy, backend._cupy_error = None, None
backend.gpu_available()
"""),
    "cpu scratch pool": ("cpu._workspaces._lock", """
cpu._workspaces.give(np.dtype(np.float32), np.zeros(4, np.float32))
assert cpu._workspaces.take(np.dtype(np.float32)) is not None
"""),
    "kernel thread pool": ("threads._pool_lock", """
out = np.zeros(2)
def put(i):
    out[i] = i + 1
threads.run_together(put, [(0,), (1,)])
assert out.tolist() == [1.0, 2.0]
"""),
    "learner registry": ("registry._lock", """
registry.info()
registry.names()
"""),
    "learner exit hook": ("learner_exit._install_lock", """
learner_exit._installed = False
learner_exit.training_thread(lambda: None, "x")
"""),
    "estimator guard": ("base._GUARD_MADE", "est = GLM(link='linear'); est._training_guard()"),
    "bayesnet tables": ("tables._CACHE_LOCK", """
net = Network(["a", "b"], [["0", "1"], ["0", "1"]], [[], [0]],
              [np.array([[0.5, 0.5]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
tables.Tables.of(net)
"""),
    "a fit under the registry lock": ("registry._lock", _FIT),
    "a fit under the allocation lock": ("backend.allocations._lock", _FIT),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_forked_child_does_not_hang_on_a_lock_a_parent_thread_held(case):
    lock, use = _CASES[case]
    code = _SCRIPT.format(lock=lock, use=textwrap.indent(use.strip(), " " * 8),
                          child_s=60)
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, (case, out.stdout[-2000:], out.stderr[-2000:])


# ------------------------------------------------------------------ a replaced learner
def _data():
    rng = np.random.default_rng(1)
    X = rng.random((40, 4))
    return X, X @ np.array([1.0, -1.0, 0.5, 2.0])


@pytest.mark.parametrize("make", [
    lambda: (GLM(link="linear", n_passes=1), _data()),
    lambda: (NMF(2, max_iter=1), (_data()[0],)),
    lambda: (KMeans(2, max_iter=2), (_data()[0],)),
])
def test_learner_replaced_by_a_newer_one_refuses_to_start(make):
    est, args = make()
    lrn1 = est.learner(*args)
    lrn2 = est.learner(*args)
    assert est.model_ is lrn2.model and lrn1.model is not lrn2.model
    with pytest.raises(RuntimeError, match=rf"{lrn1.name!r} cannot start.*{lrn2.name!r}"):
        lrn1.start()
    with pytest.raises(RuntimeError, match="cannot start"):
        lrn1.fit(progress=None)
    assert lrn1.state != "running"
    lrn2.fit(progress=None)  # the newest one trains the estimator's model
    assert est.model_ is lrn2.model and lrn2.state == "done"


def test_learner_replaced_by_a_fit_refuses_to_start():
    X, y = _data()
    est = GLM(link="linear", n_passes=1)
    lrn = est.learner(X, y)
    est.fit(X, y)
    with pytest.raises(RuntimeError, match=r"GLM\.fit / partial_fit"):
        lrn.start()


def test_learner_of_the_current_model_runs_again():
    X, y = _data()
    est = GLM(link="linear", n_passes=1)
    lrn = est.learner(X, y)
    lrn.fit(progress=None)
    lrn.set(n_passes=2)
    lrn.fit(progress=None)  # still the estimator's model: continuing is fine
    assert est.model_ is lrn.model and lrn.state == "done"
