"""Topic models on ranks when one rank's documents are mostly empty: every rank keeps its
rows (the minibatch counts were evened over them), and ranks that meet at different
minibatches say so instead of mixing up their collectives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import needs_mpi

ROOT = Path(__file__).resolve().parent.parent


def _mostly_empty_second_half(path: Path) -> None:
    X = sp.random(400, 50, density=0.2, random_state=0, format="csr")
    X.data = np.ceil(X.data * 5)
    keep = np.ones(400)
    keep[200:][np.arange(200, 400) % 4 != 0] = 0  # 150 of the second half's 200 emptied
    X = sp.csr_matrix(sp.diags(keep) @ X)
    X.eliminate_zeros()
    assert int((np.diff(X.indptr) == 0).sum()) == 150
    sp.save_npz(path, X)


@needs_mpi
@pytest.mark.parametrize("model", ["lda", "ldagibbs"])
def test_a_rank_of_mostly_empty_documents_trains_with_the_others(tmp_path, model):
    """Rank 1's 200 documents hold 150 empty ones. Each rank dropped its empty documents
    after the batch size had evened the ranks' minibatch counts, so rank 1 made fewer, the
    ranks' collectives went out of step and the job failed with 'Unable to allocate 4.17
    EiB' from a broadcast size read out of another collective."""
    _mostly_empty_second_half(tmp_path / "x.npz")
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-m", "bidlab.cli", "train", model, "--ranks", "2", "--data",
         str(tmp_path / "x.npz"), "--n_components", "4", "--batch_size", "20",
         "--n_passes", "2", "--progress", "none"],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done: 20 minibatches, 400 samples on rank 0 of 2" in done.stdout, done.stdout


OUT_OF_STEP = """
import sys

import numpy as np
from bidlab.distributed import MPIComm
from bidlab.models import GLM

comm = MPIComm(timeout=60)
rng = np.random.default_rng(comm.rank)
X = rng.random((200, 5))
y = (X[:, 0] > 0.5).astype(float)
# rank 1 cuts its rows into twice as many minibatches: the ranks cannot meet in step
lrn = GLM("logistic").learner(X, y, comm=comm, batch_size=20 if comm.rank == 0 else 10,
                              n_passes=2, val_every=0)
try:
    lrn.fit(progress=None)
except RuntimeError as exc:  # written before the abort, which may cut the other rank short
    with open(f"{sys.argv[1]}.rank{comm.rank}", "w") as f:
        f.write(str(exc))
    comm.abort(1)
"""


@needs_mpi
def test_ranks_out_of_step_say_so(tmp_path):
    from bidlab.distributed.launch import mpiexec_path

    (tmp_path / "prog.py").write_text(OUT_OF_STEP)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    out = tmp_path / "said"
    done = subprocess.run([mpiexec_path(), "-n", "2", sys.executable, str(tmp_path / "prog.py"),
                           str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    said = " ".join(p.read_text() for p in tmp_path.glob("said.rank*"))
    assert "the ranks met at different minibatches" in said, done.stderr[-3000:]
