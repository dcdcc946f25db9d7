"""bidlab's estimators inside joblib's and scikit-learn's parallel machinery: the background
compilers of a parallel search's worker processes share numba's disk cache instead of each
compiling the same kernels at once, and a BayesNet named by a BIF path, which joblib's
workers unpickle, says what to give instead (and that runs as one worker does)."""

from __future__ import annotations

import base64
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import numba
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]

#: holds the lock file of one specialization, as another process's worker compiling it
#: does; on a line on stdin compiles it into the disk cache, then lets the lock go
_HOLDER = """
import base64, fcntl, pickle, sys
from bidlab.kern import compile_worker
job = {"id": 0, "module": "bidlab.kern.cpu_elementwise", "name": "_csr_col_sums",
       "sig": sys.argv[1]}
disp = compile_worker._dispatcher(job["module"], job["name"])
lock = compile_worker._lock_file(disp, job)
fcntl.flock(lock, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.readline()
disp.compile(pickle.loads(base64.b64decode(job["sig"])))
print("compiled", flush=True)
lock.close()
"""


def _sig(dtype: type) -> tuple:
    idx = np.zeros(2, np.int32)
    return (numba.typeof(idx), numba.typeof(np.zeros(2, dtype)), numba.int64,
            numba.typeof(np.zeros(2, dtype)))


@pytest.mark.skipif(sys.platform == "win32", reason="lock files need fcntl")
def test_a_worker_compiles_another_job_while_another_process_compiles_one(
        tmp_path, monkeypatch):
    """Each worker process of ``GridSearchCV(n_jobs=2)`` (and the parent, for the refit)
    sent the same specializations to its own background compiler, and all of them compiled
    each one at the same time: on a fresh installation every specialization cost as many
    compiles as there were processes, on cores the search itself was using. A worker now
    passes over a specialization another process is compiling, compiles the next one, and
    then loads the first from the disk cache instead of compiling it again."""
    from bidlab.kern.compile_worker import Worker

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO),
                                                      os.environ.get("PYTHONPATH", "")]))
    first, second = _sig(np.float64), _sig(np.float32)
    held = base64.b64encode(pickle.dumps(first)).decode("ascii")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, held], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    results: list[int] = []
    landed = threading.Condition()

    def on_result(job_id: int, ok: bool, seconds: float | None) -> None:
        with landed:
            results.append(job_id if ok else -1 - job_id)
            landed.notify_all()

    try:
        assert holder.stdout.readline().strip() == "locked"
        worker = Worker(on_result)
        worker.submit(0, "bidlab.kern.cpu_elementwise", "_csr_col_sums", first)
        worker.submit(1, "bidlab.kern.cpu_elementwise", "_csr_col_sums", second)
        with landed:
            assert landed.wait_for(lambda: results, timeout=240)
        assert results == [1]  # the free job first; job 0 waits for the other process
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "compiled"
        assert worker.close(timeout=240)
        assert results == [1, 0]  # then job 0, loaded from what the other process wrote
    finally:
        holder.kill()
        holder.wait()


def _log_likelihood(est, X, y=None):
    return est.log_likelihood(X)


def test_a_bayesnet_named_by_a_path_in_a_parallel_search_says_what_to_give(shared_data):
    """``cross_validate(BayesNet("asia.bif.gz"), n_jobs=2)``: the workers unpickle the
    estimator, and an unpickled BayesNet does not open the path it names; the error said
    it "was loaded from a file", which the user never did. It now says that joblib's
    workers unpickle it and what to give instead, which runs as one worker does."""
    from sklearn.model_selection import cross_validate

    from bidlab.models.bayesnet import BayesNet, read_bif

    path = str(shared_data / "bnlearn" / "asia.bif.gz")
    X = BayesNet.from_bif(path, random_state=0).sample(200).astype(np.float64)
    params = {"n_passes": 2, "n_chains": 20, "random_state": 0}
    with pytest.raises(ValueError, match=r"unpickled \(as joblib does.*read_bif\(path\)"):
        cross_validate(BayesNet(path, **params), X, cv=2, n_jobs=2, error_score="raise",
                       scoring=_log_likelihood)
    one, two = (cross_validate(BayesNet(read_bif(path), **params), X, cv=2, n_jobs=n,
                               scoring=_log_likelihood, error_score="raise")
                for n in (1, 2))
    np.testing.assert_array_equal(one["test_score"], two["test_score"])
