"""Files written by the previous release load with today's code and give the same numbers.

Since that release (commit ``16f6e30``) several families keep more in their files: k-means
checkpoints the origin the centres are measured from, PageRank a pass's totals so far and
its void passes, NMF, SFA and BayesNet the ranks they ran on, GLM's partial_fit the maps of
fit. The fixture exports that release's tree with ``git archive`` and runs this module as a
script under it (:func:`_write_old`): it saves every family's fitted estimator and a
learner checkpoint taken within a run, and records the numbers that code computes from them,
a resumed learner's included. The tests load each file with today's code and compare.
Without git or that commit (a shallow clone) they skip, saying so.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab import backend
from bidlab.learn.checkpoint import load_checkpoint
from bidlab.models import GLM, LDA, NMF, SFA, BayesNet, KMeans, LDAGibbs, PageRank, load
from bidlab.models.bayesnet import Network

RELEASE = "16f6e30"  # the previous release, whose files must keep loading
REPO = Path(__file__).resolve().parents[1]


# -- the cases, shared by the writer (under the old code) and the tests ----------------------
def _data() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    docs = sp.csr_matrix(rng.poisson(0.4, (60, 40)).astype(np.float64))
    Xd = rng.standard_normal((80, 5))
    y = (Xd[:, 0] + 0.3 * rng.standard_normal(80) > 0).astype(int)
    Xk = np.repeat(rng.standard_normal((3, 4)) * 6, 100, axis=0) + rng.standard_normal((300, 4))
    Xk = Xk[rng.permutation(300)]
    V = rng.random((40, 6)) @ rng.random((6, 30))
    R = sp.random(50, 30, density=0.3, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.integers(1, 6, k).astype(float))
    C = sp.random(50, 30, density=0.3, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.integers(1, 9, k).astype(float))
    A = sp.random(120, 120, density=0.05, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.integers(1, 5, k).astype(float))
    net = Network(["rain", "sprinkler", "wet"], [["no", "yes"]] * 3, [[], [0], [0, 1]],
                  [np.array([[0.8, 0.2]]), np.array([[0.6, 0.4], [0.99, 0.01]]),
                   np.array([[1.0, 0.0], [0.2, 0.8], [0.1, 0.9], [0.01, 0.99]])])
    rain = rng.random(300) < 0.2  # drawn from the network's tables, then 30 % hidden
    sprinkler = rng.random(300) < np.where(rain, 0.01, 0.4)
    wet = rng.random(300) < np.array([0.0, 0.8, 0.9, 0.99])[2 * rain + sprinkler]
    rows = np.column_stack([rain, sprinkler, wet]).astype(np.float64)
    rows[rng.random(rows.shape) < 0.3] = np.nan
    return {"docs": docs, "Xd": Xd, "y": y, "Xk": Xk, "Xfar": (Xk + 1e4).astype(np.float32),
            "V": V, "R": R, "C": C, "A": A, "net": net, "rows": rows}


def _cpts(est: Any) -> np.ndarray:
    return np.concatenate([c.ravel() for c in est.network_.cpts])


def _folded_users(est: Any, rows: Any) -> np.ndarray:
    ids = est.partial_fit_users(rows)
    return est.user_factors_[ids]


def _kmeans(alg: str, X: np.ndarray) -> Callable[[], KMeans]:
    return lambda: KMeans(3, algorithm=alg, init=X[:3], random_state=0, tol=0.0, max_iter=5)


def _cases(d: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per family: ``make`` (a fresh estimator), ``data`` (fit's arguments), ``numbers``
    (what a fitted estimator computes), and the learner checkpoint: after ``steps``
    minibatches of a learner made with ``opts``, resumed to its end; ``view`` the result."""
    docs, rows = d["docs"], d["rows"]
    f32 = 2e-5  # LDA's float32 model: the writer's kernels (stand-ins) round otherwise
    users, items = np.array([0, 3, 10]), np.array([1, 4, 2])
    cases: dict[str, dict[str, Any]] = {
        "lda": dict(make=lambda: LDA(3, n_passes=2, random_state=0, batch_size=10),
                    data=(docs,), steps=8, opts={"batch_size": 10, "n_passes": 3},
                    numbers=lambda e: {"transform": e.transform(docs[:5]),
                                       "components": e.components_},
                    more=lambda e: e.partial_fit(docs[:20]).components_,
                    view=lambda e: e.components_, rtol=f32),
        "lda_gibbs": dict(make=lambda: LDAGibbs(3, n_passes=2, random_state=0, batch_size=20),
                          data=(docs,), steps=4, opts={"batch_size": 20, "n_passes": 3},
                          numbers=lambda e: {"components": e.components_,
                                             "transform": e.transform(docs[:5])},
                          view=lambda e: e.components_, rtol=f32),
        "glm": dict(make=lambda: GLM("logistic", n_passes=3, random_state=0, batch_size=10),
                    data=(d["Xd"], d["y"]), steps=12, opts={"batch_size": 10, "n_passes": 3},
                    numbers=lambda e: {"proba": e.predict_proba(d["Xd"][:5])},
                    more=lambda e: e.partial_fit(d["Xd"][:40], d["y"][:40]).predict_proba(
                        d["Xd"][:5]), changed=True,  # now through fit's maps
                    view=lambda e: e.coef_),
        "nmf": dict(make=lambda: NMF(4, max_iter=20, random_state=0), data=(d["V"],), steps=5,
                    opts={"batch_size": 20, "n_passes": 10},
                    numbers=lambda e: {"transform": e.transform(d["V"][:5]),
                                       "components": e.components_},
                    more=lambda e: e.partial_fit(d["V"][:20]).components_,
                    view=lambda e: e.components_),
        "pagerank": dict(make=lambda: PageRank(tol=1e-10), data=(d["A"],), steps=3, opts={},
                         numbers=lambda e: {"scores": e.scores_}, view=lambda e: e.scores_),
        "bayesnet": dict(make=lambda: BayesNet(d["net"].uniform(), n_passes=4, nsamps=2,
                                               random_state=0, n_chains=50, n_samples=100),
                         data=(rows,), steps=2, opts={},
                         numbers=lambda e: {"cpts": _cpts(e), "loglik": np.array(
                             [e.log_likelihood(rows[:50][~np.isnan(rows[:50]).any(1)])])},
                         more=lambda e: list(e.infer({"wet": "yes"})["rain"].values()),
                         view=_cpts),
    }
    # PageRank in blocks of 50 of 120 rows: checkpoints within a pass and at its end
    blocks = {"make": cases["pagerank"]["make"], "data": (d["A"],), "opts": {"batch_size": 50},
              "view": lambda e: e.scores_}
    cases["pagerank_blocks"] = dict(blocks, steps=7)
    cases["pagerank_blocks_end"] = dict(blocks, steps=6)
    for fb, M in (("explicit", d["R"]), ("implicit", d["C"])):
        cases[f"sfa_{fb}"] = dict(
            make=lambda fb=fb: SFA(3, feedback=fb, max_iter=4, random_state=0), data=(M,),
            steps=5, opts={"batch_size": 20, "n_passes": 4},
            numbers=lambda e: {"predict": e.predict(users, items),
                               "user_factors": e.user_factors_,
                               "item_factors": e.item_factors_},
            more=lambda e, M=M: _folded_users(e, M[:5]),
            view=lambda e: e.item_factors_)
    for alg in ("lloyd", "minibatch"):
        for far, X in (("near", d["Xk"]), ("far", d["Xfar"])):
            cases[f"kmeans_{alg}_{far}"] = dict(
                make=_kmeans(alg, X), data=(X,), steps=4,  # pass 1, block 1 of 3
                opts={"batch_size": 100, "n_passes": 3},
                numbers=lambda e, X=X: {"transform": e.transform(X[:5]),
                                        "predict": e.predict(X),
                                        "centres": e.cluster_centers_},
                more=lambda e, X=X: e.partial_fit(X[:100]).cluster_centers_,
                view=lambda e: e.cluster_centers_)
    return cases


def _host(a: Any) -> list[Any]:
    return np.asarray(backend.to_host(a), dtype=np.float64).tolist()


def _resume(case: dict[str, Any], path: str) -> tuple[Any, Any]:
    """A fresh estimator's learner that loads the checkpoint ``path`` and trains to its
    end: (estimator, learner)."""
    est = case["make"]()
    lrn = est.learner(*case["data"], **case["opts"])
    lrn.load(path)
    lrn.set(max_steps=None)
    lrn.fit(progress=None)
    return est, lrn


def _write_old(out: Path) -> None:
    """Save every case with the code on ``sys.path``, and what it computes from the files
    (``expected.json``)."""
    out.mkdir(parents=True, exist_ok=True)
    d = _data()
    exp: dict[str, Any] = {}
    for name, case in _cases(d).items():
        if "numbers" in case:
            fitted = case["make"]().fit(*case["data"])
            fitted.save(out / f"{name}.bidlab")
            (out / f"{name}.pickle").write_bytes(pickle.dumps(fitted))
            got = case["numbers"](load(out / f"{name}.bidlab"))
            exp[name] = {k: _host(v) for k, v in got.items()}
            if "more" in case:  # continued after loading
                exp[name]["more"] = _host(case["more"](load(out / f"{name}.bidlab")))
        path = str(out / f"{name}.ckpt.npz")
        lrn = case["make"]().learner(*case["data"], max_steps=case["steps"], **case["opts"])
        lrn.fit(progress=None)
        lrn.save(path)
        est, again = _resume(case, path)
        exp[f"{name}_learner"] = {"step": lrn.step, "resumed": _host(case["view"](est)),
                                  "resumed_step": again.step}
    glm = GLM("logistic", random_state=0, batch_size=10).partial_fit(d["Xd"], d["y"],
                                                                     classes=[0, 1])
    glm.save(out / "glm_partial.bidlab")
    back = load(out / "glm_partial.bidlab").partial_fit(d["Xd"][:40], d["y"][:40])
    exp["glm_partial"] = {"proba": _host(back.predict_proba(d["Xd"][:5]))}
    (out / "expected.json").write_text(json.dumps(exp))


if __name__ == "__main__":  # the writer, run under the old release's tree
    from bidlab.kern import standin

    with standin.forced():  # the kernels' array-level stand-ins: that tree is not compiled
        _write_old(Path(sys.argv[1]))
    sys.exit(0)


# -- the tests -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def old(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The previous release's files and numbers (written by it, in a subprocess)."""
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("needs git and this repository's history to export the previous release")
    probe = subprocess.run([git, "-C", str(REPO), "cat-file", "-e", f"{RELEASE}^{{commit}}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"commit {RELEASE} (the previous release) cannot be read from this clone "
                    f"(a shallow clone? git said: {probe.stderr.strip()[:200]!r}): fetch it "
                    "to run these checks")
    tree, out = tmp_path_factory.mktemp("release"), tmp_path_factory.mktemp("files")
    archive = subprocess.run([git, "-C", str(REPO), "archive", RELEASE, "bidlab"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    env = dict(os.environ, PYTHONPATH=str(tree), NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               BIDLAB_BACKGROUND_COMPILE="0")  # no compiler process left behind
    probe = subprocess.run([sys.executable, "-c", "import bidlab; print(bidlab.__file__)"],
                           env=env, cwd=str(out), capture_output=True, text=True, check=True)
    assert probe.stdout.strip().startswith(str(tree))  # the old code, not this checkout
    done = subprocess.run([sys.executable, __file__, str(out)], env=env, cwd=str(out),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, json.loads((out / "expected.json").read_text())


CASES = _cases(_data())
FITTED = [n for n, c in CASES.items() if "numbers" in c]


def _close(got: Any, want: Any, rtol: float = 1e-9) -> None:
    np.testing.assert_allclose(np.asarray(backend.to_host(got), np.float64),
                               np.asarray(want, np.float64), rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("name", FITTED)
def test_an_estimator_saved_by_the_previous_release_computes_the_same(old, name, tmp_path):
    files, exp = old
    case = CASES[name]
    cls = type(case["make"]())
    pickled = pickle.loads((files / f"{name}.pickle").read_bytes())  # noqa: S301 (ours)
    for est in (load(files / f"{name}.bidlab"), cls.load(files / f"{name}.bidlab"), pickled):
        assert type(est) is cls
        numbers = case["numbers"](est)
        for key, want in exp[name].items():
            if key != "more":
                _close(numbers[key], want, case.get("rtol", 1e-9))
        est.save(tmp_path / "again.bidlab")  # saved again with today's code: the same
        numbers = case["numbers"](load(tmp_path / "again.bidlab"))
        for key, want in exp[name].items():
            if key != "more":
                _close(numbers[key], want, case.get("rtol", 1e-9))


@pytest.mark.parametrize("name", [n for n in CASES if not n.startswith("pagerank_blocks")])
def test_a_checkpoint_of_the_previous_release_resumes_to_its_result(old, name):
    files, exp = old
    want = exp[f"{name}_learner"]
    est, lrn = _resume(CASES[name], str(files / f"{name}.ckpt.npz"))
    assert lrn.step == want["resumed_step"]
    _close(CASES[name]["view"](est), want["resumed"], CASES[name].get("rtol", 1e-7))


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if "more" in c])
def test_a_loaded_estimator_goes_on_training_as_before(old, name):
    """partial_fit (fold-ins, inference) on a loaded file: what that release computed, or,
    where it has changed since (GLM continues through fit's maps), what today's code
    computes from an estimator it fitted itself."""
    files, exp = old
    case = CASES[name]
    got = case["more"](load(files / f"{name}.bidlab"))
    if case.get("changed"):
        want = case["more"](case["make"]().fit(*case["data"]))
        _close(got, want, 1e-9)
    else:
        _close(got, exp[name]["more"], case.get("rtol", 1e-7))


def test_a_glm_started_by_partial_fit_goes_on_as_before(old):
    files, exp = old
    d = _data()
    est = load(files / "glm_partial.bidlab").partial_fit(d["Xd"][:40], d["y"][:40])
    _close(est.predict_proba(d["Xd"][:5]), exp["glm_partial"]["proba"])


def test_pagerank_resumed_within_a_pass_from_a_file_without_its_totals(old):
    """That release kept no totals of a pass in progress: resumed within the pass, the
    blocks it had added were lost (its own resume: scores summing to 0.54). The pass is
    run again, and the result is that of a run never stopped."""
    files, exp = old
    case = CASES["pagerank_blocks"]
    assert sum(exp["pagerank_blocks_learner"]["resumed"]) < 0.6  # what that code did
    est, lrn = _resume(case, str(files / "pagerank_blocks.ckpt.npz"))
    straight = case["make"]()
    whole = straight.learner(*case["data"], **case["opts"])
    whole.fit(progress=None)
    assert est.scores_.sum() == pytest.approx(1.0, rel=1e-12)
    _close(est.scores_, straight.scores_, 1e-9)
    assert est.n_iter_ == straight.n_iter_


@pytest.mark.parametrize("writer", ["previous release", "today"])
def test_a_whole_graph_pagerank_checkpoint_resumes_in_blocks(old, writer, tmp_path):
    """A whole-graph learner sweeps (Gauss-Seidel), and its checkpoint holds scores not yet
    scaled to sum 1; a learner in blocks resumed from it kept their sum (1.03) to the end.
    The loaded scores are scaled: the result is the whole-graph fit's."""
    files, _ = old
    case = CASES["pagerank"]
    path = str(files / "pagerank.ckpt.npz")
    if writer == "today":
        path = str(tmp_path / "whole.npz")
        first = case["make"]().learner(*case["data"], max_steps=3)
        first.fit(progress=None)
        first.save(path)
    assert abs(float(load_checkpoint(path).modelmats[0].sum()) - 1.0) > 1e-3  # unscaled
    est, _ = _resume(dict(case, opts={"batch_size": 50}), path)
    assert est.scores_.sum() == pytest.approx(1.0, rel=1e-12)
    _close(est.scores_, case["make"]().fit(*case["data"]).scores_, 1e-7)
