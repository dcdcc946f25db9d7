"""A newcomer's first hour: the README's shell commands name data that is there,
``bidlab train bayesnet`` trains on every row and says which flag holds the network, the
options' help shows defaults as they are typed, and the demo notebooks' closing cells show
a learner's last scores readably. The commands run in a subprocess, as a user runs them."""

from __future__ import annotations

import importlib.util
import io
import math
import os
import re
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import SHARED_DATA

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
#: --data values in the README that stand for the reader's own files
PLACEHOLDERS = {"PATH", "DATA", "my_texts/", "rows.npz"}


def _bidlab(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "bidlab.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env)


def _rain_network():
    from bidlab.models.bayesnet import Network

    return Network(["rain", "sprinkler", "wet"], [["no", "yes"]] * 3, [[], [], [0, 1]],
                   [np.array([[0.8, 0.2]]), np.array([[0.6, 0.4]]),
                    np.array([[0.99, 0.01], [0.1, 0.9], [0.2, 0.8], [0.01, 0.99]])])


@pytest.fixture
def bayesnet_files(tmp_path):
    """(a BIF network, an .npz of 200 rows drawn from it with some entries unobserved)."""
    from bidlab.models import BayesNet
    from bidlab.models.bayesnet import write_bif

    net = _rain_network()
    bif = tmp_path / "rain.bif"
    write_bif(net, bif)
    X = BayesNet(net).sample(200, random_state=0).astype(float)
    X[::4, 0] = np.nan
    np.savez(tmp_path / "rows.npz", X=X)
    return bif, tmp_path / "rows.npz"


# ------------------------------------------------------------------------------ README
def test_readme_data_paths_exist_from_the_checkout():
    """Every --data the README shows (its own placeholders aside) is a path from the
    checkout to the shared data sets, which hold it, in a format bidlab reads."""
    from bidlab.cli.train_data import sniff_data

    if not SHARED_DATA.is_dir():
        pytest.skip(f"real datasets not found at {SHARED_DATA} (set BIDLAB_SHARED_DATA)")
    paths = re.findall(r"--data\s+([^\s`]+)", README)
    shown = [p for p in paths if p not in PLACEHOLDERS]
    assert len(shown) >= 5, paths
    for path in shown:
        assert path.startswith("../shared/data/"), (
            f"the README's --data {path} is not a path a reader in the checkout can use")
        real = SHARED_DATA / path.removeprefix("../shared/data/")
        assert real.is_file(), f"the README names {path}, which is not in {SHARED_DATA}"
        sniff_data(str(real))  # a format bidlab train reads


def test_readme_glm_command_runs_as_written(tmp_path):
    if not (REPO.parent / "shared" / "data" / "libsvm-a9a").is_dir():
        pytest.skip("the README's commands read ../shared/data from the checkout")
    line = next(ln for ln in README.splitlines() if ln.startswith("bidlab train glm --data"))
    args = line.split()[1:]
    args[args.index("--save") + 1] = str(tmp_path / "a9a.glm")
    r = _bidlab(*args, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "GLM.score on 3256 held-out rows" in r.stdout


def test_readme_lists_every_demo_notebook():
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        assert f"`{nb.stem}`" in README, f"the README's list of demos leaves out {nb.stem}"


# ---------------------------------------------------------------------- bidlab train
def test_bayesnet_trains_on_every_row_by_default(tmp_path, bayesnet_files):
    bif, rows = bayesnet_files
    r = _bidlab("train", "bayesnet", "--data", str(rows), "--network", str(bif),
                "--n_passes", "2", "--progress", "none", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # BayesNet has no score: rows held out would only be lost to training
    assert "done: 2 minibatches, 400 samples" in r.stdout, r.stdout


def test_bayesnet_holdout_is_refused_with_the_reason(tmp_path, bayesnet_files):
    bif, rows = bayesnet_files
    r = _bidlab("train", "bayesnet", "--data", str(rows), "--network", str(bif),
                "--holdout", "0.2", cwd=tmp_path)
    assert r.returncode == 2
    assert "--holdout 0.2: BayesNet has no score method" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_bayesnet_without_network_names_the_flag(tmp_path, bayesnet_files):
    _, rows = bayesnet_files
    r = _bidlab("train", "bayesnet", "--data", str(rows), cwd=tmp_path)
    assert r.returncode == 2
    assert "bayesnet needs --network PATH" in r.stderr, r.stderr


@pytest.mark.parametrize("model, says", [("bayesnet", "give it as --network"),
                                         ("kmeans", "bidlab train bayesnet --network")])
def test_a_network_file_given_as_data_points_to_network(tmp_path, bayesnet_files, model,
                                                        says):
    import gzip

    bif, _ = bayesnet_files
    packed = tmp_path / "rain.bif.gz"
    packed.write_bytes(gzip.compress(b"// a comment line\n" + bif.read_bytes()))
    network = ["--network", str(bif)] if model == "bayesnet" else []
    r = _bidlab("train", model, "--data", str(packed), *network, cwd=tmp_path)
    assert r.returncode == 2
    assert "is a Bayesian network (BIF), not rows of data" in r.stderr, r.stderr
    assert says in r.stderr and "svmlight" not in r.stderr


def test_help_shows_the_dtype_default_as_it_is_typed(tmp_path):
    r = _bidlab("train", "lda", "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "default float32; float32 or float64" in r.stdout
    assert "<class" not in r.stdout


# ------------------------------------------------------------------- notebooks' wait
def _wait_cell() -> str:
    spec = importlib.util.spec_from_file_location("make_notebooks_fh",
                                                  REPO / "notebooks" / "make_notebooks.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    return make._cells().common.WAIT


def _run_wait(learner) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        exec(_wait_cell(), {"learner": learner, "MAX_WAIT_S": 60})
    return out.getvalue()


def test_wait_cell_shows_a_small_score_in_full():
    from bidlab.models import PageRank

    rng = np.random.default_rng(0)
    A = sp.random(300, 300, density=0.03, format="csr", random_state=rng)
    learner = PageRank(tol=1e-10, max_iter=200).learner(A)
    learner.start()
    out = _run_wait(learner)
    value = float(re.search(r"last L1 change: train (\S+)", out)[1])
    assert 0 < value < 1e-3 and math.isfinite(value), out


def test_wait_cell_prints_no_empty_score_line_for_sampling():
    from bidlab.models import BayesNet

    learner = BayesNet(_rain_network(), n_chains=50, burn_in=5, n_samples=20,
                       random_state=0).learner()
    learner.start()
    out = _run_wait(learner)
    assert "state: done" in out
    assert not re.search(r": *$", out, re.M), out
    saved = (REPO / "notebooks" / "06_graphs_bayesnets.ipynb").read_text()
    assert "last log p(x)/row: \\n" not in saved
