"""``python -m bidlab.bench glm [--json] [--quick]``: many-target GLMs against their peers.

Workloads:

* ``synth100``: synthetic sparse 200k x 50k power-law rows (~50 non-zeros), 100
  independent logistic targets; held-out 50k rows.
* ``synth20``: the same features, one 20-class softmax target.
* ``news20``: 20 Newsgroups tf-idf (bydate split, headers/footers/quotes removed), 20
  classes; plus a sweep of 32 (lrate, L2) configurations in one pass against one config.
* ``a9a``: LIBSVM a9a, binary.

Peers in the same run: scikit-learn SGDClassifier (log loss; one per target) and
LogisticRegression (saga), Snap ML LogisticRegression, Vowpal Wabbit (logistic loss;
``--oaa`` for classes). A peer that is not installed is skipped with the reason. Each row
reports wall time, samples/s (training rows x passes / s) and held-out accuracy, log loss
and AUC. For bidlab the time is the training time until its held-out metric first reaches
the reference peer's (log loss of SGD for ``synth100``, accuracy of saga for ``synth20`` /
``news20``), checked after every pass with evaluation time excluded.

Peers that fit one model per target are timed on a subset of targets where a full run
would take many minutes; those rows say ``targets_timed`` and the time is scaled up.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from bidlab.bench._common import machine
from bidlab.models.glm import GLM, glm_sweep

# ----------------------------------------------------------------------------- metrics


def _binary_metrics(Y: np.ndarray, P: np.ndarray) -> dict[str, float]:
    """Mean over targets of accuracy, log loss and AUC; Y, P: n x t (P = P(y=1))."""
    from sklearn.metrics import roc_auc_score

    P = np.clip(P.astype(np.float64), 1e-7, 1 - 1e-7)
    ll = -(Y * np.log(P) + (1 - Y) * np.log1p(-P)).mean(0)
    acc = ((P > 0.5) == (Y > 0.5)).mean(0)
    auc = [roc_auc_score(Y[:, j], P[:, j]) for j in range(Y.shape[1])]
    return {"accuracy": float(acc.mean()), "log_loss": float(ll.mean()), "auc": float(np.mean(auc))}


def _proba(model: Any, X: Any, C: int) -> np.ndarray:
    """n x C class probabilities, columns placed by the model's ``classes_`` (a class the
    model never saw in training gets probability 0, later clipped to 1e-12)."""
    P = model.predict_proba(X)
    classes = np.asarray(getattr(model, "classes_", np.arange(P.shape[1])), dtype=np.int64)
    full = np.zeros((P.shape[0], C))
    full[:, classes] = P
    return full


def _multiclass_metrics(y: np.ndarray, P: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import roc_auc_score

    P = np.clip(P.astype(np.float64), 1e-12, 1)
    P /= P.sum(1, keepdims=True)
    ll = -np.log(P[np.arange(len(y)), y]).mean()
    try:
        auc = float(roc_auc_score(y, P, multi_class="ovr"))
    except ValueError:
        auc = float("nan")
    return {"accuracy": float((P.argmax(1) == y).mean()), "log_loss": float(ll), "auc": auc}


def _row(system: str, wall: float, samples: float, metrics: dict, **extra: Any) -> dict:
    return {
        "system": system,
        "wall_s": round(wall, 3),
        "samples_per_s": round(samples / wall) if wall > 0 else None,
        **{k: round(v, 5) for k, v in metrics.items()},
        **extra,
    }


# ----------------------------------------------------------------------------- bidlab


def _bidlab_until(
    model: GLM,
    Xtr: sp.csr_matrix,
    Ytr: np.ndarray,
    evaluate: Callable[[GLM], dict[str, float]],
    reached: Callable[[dict[str, float]], bool],
    max_epochs: int,
) -> dict[str, Any]:
    """Train pass by pass until ``reached(metrics)``; time only the training.

    The passes run through ``model.learner`` (the engine ``fit`` runs, every minibatch
    trained, a new row order each pass), continued one pass at a time. A throw-away
    one-pass fit on a slice first loads the compiled kernels, so a workload run on its own
    is not charged numba's first-call cost (~0.2 s) that a long-lived process pays once.
    """
    model.set_params(n_passes=1)
    warm = min(Xtr.shape[0], 2000)
    clone(model).fit(Xtr[:warm], Ytr[:warm])
    lrn = model.learner(Xtr, Ytr, n_passes=1, val_every=0, train_loss=False)
    train = 0.0
    history = []
    epochs = 0
    while True:
        lrn.set(n_passes=epochs + 1)
        t0 = time.perf_counter()
        lrn.fit(progress=None)
        train += time.perf_counter() - t0
        epochs += 1
        m = evaluate(model)
        history.append({"epoch": epochs, "train_s": round(train, 3), **m})
        if reached(m) or epochs >= max_epochs:
            break
    return {"train_s": train, "epochs": epochs, "metrics": history[-1], "history": history,
            "reached": reached(history[-1])}


# ----------------------------------------------------------------------------- peers


def _have(module: str) -> str | None:
    try:
        __import__(module)
        return None
    except Exception as exc:  # ImportError or a broken binary
        return f"{module} not importable here ({type(exc).__name__}: {exc})"


def _vw_lines(X: sp.csr_matrix, labels: np.ndarray) -> list[str]:
    out = []
    ip, ix, dv = X.indptr, X.indices, X.data
    for i in range(X.shape[0]):
        a, b = ip[i], ip[i + 1]
        feats = " ".join(f"{j}:{v:.6g}" for j, v in zip(ix[a:b], dv[a:b], strict=True))
        out.append(f"{labels[i]} | {feats}")
    return out


def _vw_binary(Xtr, ytr, Xte, passes: int = 3) -> tuple[float, np.ndarray]:
    import vowpalwabbit

    t0 = time.perf_counter()
    lines = _vw_lines(Xtr, np.where(ytr > 0.5, 1, -1))
    vw = vowpalwabbit.Workspace("--loss_function logistic --link logistic --quiet -b 20")
    for _ in range(passes):
        for line in lines:
            vw.learn(line)
    wall = time.perf_counter() - t0
    test = _vw_lines(Xte, np.ones(Xte.shape[0], np.int64))
    p = np.array([vw.predict(line) for line in test])
    vw.finish()
    return wall, p


def _vw_multiclass(Xtr, ytr, Xte, C: int, passes: int = 3) -> tuple[float, np.ndarray]:
    import vowpalwabbit

    t0 = time.perf_counter()
    lines = _vw_lines(Xtr, ytr + 1)
    vw = vowpalwabbit.Workspace(
        f"--oaa {C} --loss_function logistic --probabilities --quiet -b 22"
    )
    for _ in range(passes):
        for line in lines:
            vw.learn(line)
    wall = time.perf_counter() - t0
    test = _vw_lines(Xte, np.ones(Xte.shape[0], np.int64))
    P = np.array([vw.predict(line) for line in test])
    vw.finish()
    return wall, P


def _sgd_targets(Xtr, Ytr, Xte, targets) -> tuple[float, np.ndarray]:
    from sklearn.linear_model import SGDClassifier

    P = np.empty((Xte.shape[0], len(targets)))
    t0 = time.perf_counter()
    for i, j in enumerate(targets):
        c = SGDClassifier(loss="log_loss", random_state=0).fit(Xtr, Ytr[:, j])
        P[:, i] = c.predict_proba(Xte)[:, 1]
    return time.perf_counter() - t0, P


def _snap_targets(Xtr, Ytr, Xte, targets) -> tuple[float, np.ndarray]:
    import snapml

    P = np.empty((Xte.shape[0], len(targets)))
    t0 = time.perf_counter()
    for i, j in enumerate(targets):
        c = snapml.LogisticRegression(n_jobs=2, fit_intercept=True).fit(Xtr, Ytr[:, j])
        P[:, i] = c.predict_proba(Xte)[:, 1]
    return time.perf_counter() - t0, P


def _multiclass_peers(Xtr, ytr, Xte, yte, C: int, peers: set[str], out: list) -> dict | None:
    """Run saga / SGD / Snap ML / VW on one multi-class problem; return saga's row."""
    n = Xtr.shape[0]
    saga = None
    if "saga" in peers:
        from sklearn.linear_model import LogisticRegression

        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = LogisticRegression(solver="saga", max_iter=100, tol=1e-4).fit(Xtr, ytr)
        wall = time.perf_counter() - t0
        saga = _row("sklearn LogisticRegression(saga)", wall, n * int(m.n_iter_.max()),
                    _multiclass_metrics(yte, _proba(m, Xte, C)), epochs=int(m.n_iter_.max()))
        out.append(saga)
    if "sgd" in peers:
        from sklearn.linear_model import SGDClassifier

        t0 = time.perf_counter()
        m = SGDClassifier(loss="log_loss", random_state=0).fit(Xtr, ytr)
        wall = time.perf_counter() - t0
        out.append(_row("sklearn SGDClassifier(log_loss, OvR)", wall, n * m.n_iter_ * C,
                        _multiclass_metrics(yte, _proba(m, Xte, C)), epochs=int(m.n_iter_)))
    if "snapml" in peers:
        why = _have("snapml")
        if why:
            out.append({"system": "Snap ML", "skipped": why})
        else:
            import snapml

            t0 = time.perf_counter()
            m = snapml.LogisticRegression(n_jobs=2, fit_intercept=True).fit(Xtr, ytr)
            wall = time.perf_counter() - t0
            out.append(_row("Snap ML LogisticRegression (OvR)", wall, n,
                            _multiclass_metrics(yte, _proba(m, Xte, C))))
    if "vw" in peers:
        why = _have("vowpalwabbit")
        if why:
            out.append({"system": "Vowpal Wabbit", "skipped": why})
        else:
            wall, P = _vw_multiclass(Xtr, ytr, Xte, C)
            out.append(_row("Vowpal Wabbit --oaa (3 passes, incl. text formatting)", wall,
                            3 * n, _multiclass_metrics(yte, P), epochs=3))
    return saga


# ----------------------------------------------------------------------------- workloads


def _i32(X: sp.csr_matrix) -> sp.csr_matrix:
    """32-bit indices: scikit-learn's saga refuses int64-indexed sparse matrices."""
    X = sp.csr_matrix(X)
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    return X


def _synthetic(quick: bool, **kw: Any):
    from bidlab.datasets import synthetic_glm

    n_tr, n_te, d = (40_000, 10_000, 10_000) if quick else (200_000, 50_000, 50_000)
    X, Y, _ = synthetic_glm(n_tr + n_te, d, 50, seed=0, **kw)
    return _i32(X[:n_tr]), Y[:n_tr], _i32(X[n_tr:]), Y[n_tr:]


def bench_synth100(quick: bool, peers: set[str]) -> dict:
    t = 100
    Xtr, Ytr, Xte, Yte = _synthetic(quick, n_targets=t)
    n = Xtr.shape[0]
    rows: list[dict] = []
    ref = None
    if "sgd" in peers:
        timed = list(range(t)) if not quick else list(range(20))
        wall, P = _sgd_targets(Xtr, Ytr, Xte, timed)
        scale = t / len(timed)
        ref = _binary_metrics(Yte[:, timed], P)
        rows.append(_row("sklearn SGDClassifier(log_loss) x targets", wall * scale, n * t, ref,
                         targets_timed=len(timed)))
    if "snapml" in peers:
        why = _have("snapml")
        if why:
            rows.append({"system": "Snap ML", "skipped": why})
        else:
            timed = list(range(10))
            wall, P = _snap_targets(Xtr, Ytr, Xte, timed)
            rows.append(_row("Snap ML LogisticRegression x targets", wall * t / len(timed),
                             n * t, _binary_metrics(Yte[:, timed], P), targets_timed=len(timed)))
    if "vw" in peers:
        why = _have("vowpalwabbit")
        if why:
            rows.append({"system": "Vowpal Wabbit", "skipped": why})
        else:
            timed = [0, 1]
            walls, Ps = [], []
            for j in timed:
                w, p = _vw_binary(Xtr, Ytr[:, j], Xte)
                walls.append(w)
                Ps.append(p)
            rows.append(_row("Vowpal Wabbit x targets (3 passes)", sum(walls) * t / len(timed),
                             3 * n * t, _binary_metrics(Yte[:, timed], np.column_stack(Ps)),
                             targets_timed=len(timed)))
    goal = ref["log_loss"] if ref else -math.inf
    model = GLM("logistic", lrate=0.1, l2=3e-5, batch_size=2000, random_state=0)

    def evaluate(m: GLM) -> dict[str, float]:
        P = m.decision_function(Xte)
        return _binary_metrics(Yte, 1.0 / (1.0 + np.exp(-P)))

    res = _bidlab_until(model, Xtr, Ytr, evaluate, lambda m: m["log_loss"] <= goal, 8)
    rows.insert(0, _row("bidlab GLM (100 targets, one pass each epoch)", res["train_s"],
                        n * res["epochs"], res["metrics"], epochs=res["epochs"],
                        reached_reference=res["reached"]))
    out = {"workload": "synth100", "n_train": n, "n_test": Xte.shape[0], "d": Xtr.shape[1],
           "nnz_train": int(Xtr.nnz), "targets": t, "results": rows, "history": res["history"]}
    if ref:
        sgd_time = rows[1]["wall_s"]
        out["target"] = {
            "goal": "reach SGD's held-out log loss in <= 1/10 of its time",
            "reference_log_loss": round(goal, 5),
            "time_ratio_bidlab_over_sgd": round(res["train_s"] / sgd_time, 4),
            "met": bool(res["reached"] and res["train_s"] <= sgd_time / 10),
        }
    return out


def _multiclass_bidlab(Xtr, ytr, Xte, yte, saga: dict | None, **params: Any) -> tuple[dict, dict]:
    goal = saga["accuracy"] if saga else math.inf
    model = GLM("softmax", random_state=0, **params)
    C = int(max(ytr.max(), yte.max())) + 1

    def evaluate(m: GLM) -> dict[str, float]:
        return _multiclass_metrics(yte, _proba(m, Xte, C))

    res = _bidlab_until(model, Xtr, ytr, evaluate, lambda m: m["accuracy"] >= goal, 30)
    row = _row("bidlab GLM softmax", res["train_s"], Xtr.shape[0] * res["epochs"],
               res["metrics"], epochs=res["epochs"], reached_reference=res["reached"])
    target = {}
    if saga:
        target = {
            "goal": "reach saga's held-out accuracy in <= 1/2 of its time",
            "reference_accuracy": saga["accuracy"],
            "time_ratio_bidlab_over_saga": round(res["train_s"] / saga["wall_s"], 4),
            "met": bool(res["reached"] and res["train_s"] <= saga["wall_s"] / 2),
        }
    return row, {"target": target, "history": res["history"]}


def bench_synth20(quick: bool, peers: set[str]) -> dict:
    Xtr, ytr, Xte, yte = _synthetic(quick, classes=20)
    rows: list[dict] = []
    saga = _multiclass_peers(Xtr, ytr, Xte, yte, 20, peers, rows)
    row, extra = _multiclass_bidlab(Xtr, ytr, Xte, yte, saga, lrate=0.1, l2=1e-4,
                                    batch_size=2000)
    rows.insert(0, row)
    return {"workload": "synth20", "n_train": Xtr.shape[0], "n_test": Xte.shape[0],
            "d": Xtr.shape[1], "classes": 20, "results": rows, **extra}


def _news20(quick: bool):
    from bidlab.datasets import load_20newsgroups, newsgroups_tfidf

    remove = ("headers", "footers", "quotes")
    tr = load_20newsgroups(subset="train", remove=remove, min_df=2)
    te = load_20newsgroups(subset="test", remove=remove, vocabulary=tr.vocab)
    Xtr, Xte = newsgroups_tfidf(tr, te)
    ytr, yte = np.asarray(tr.labels), np.asarray(te.labels)
    if quick:  # a random subset: the files are grouped by class, a prefix holds few classes
        keep = np.sort(np.random.default_rng(0).choice(Xtr.shape[0], 4000, replace=False))
        Xtr, ytr = Xtr[keep], ytr[keep]
    return _i32(Xtr), ytr, _i32(Xte), yte


def bench_news20(quick: bool, peers: set[str]) -> dict:
    Xtr, ytr, Xte, yte = _news20(quick)
    rows: list[dict] = []
    saga = _multiclass_peers(Xtr, ytr, Xte, yte, 20, peers, rows)
    params = dict(lrate=0.1, l2=0.0, batch_size=500)
    row, extra = _multiclass_bidlab(Xtr, ytr, Xte, yte, saga, **params)
    rows.insert(0, row)
    out = {"workload": "news20", "n_train": Xtr.shape[0], "n_test": Xte.shape[0],
           "d": Xtr.shape[1], "nnz_train": int(Xtr.nnz), "classes": 20, "results": rows,
           **extra}
    out["sweep"] = _sweep(Xtr, ytr, Xte, yte)
    return out


def _sweep(Xtr, ytr, Xte, yte, epochs: int = 5) -> dict:
    """One configuration vs 32 (lrate, L2) configurations in one pass, same epochs."""
    from bidlab.models.glm import best_config

    lrates = [0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0]
    l2s = [0.0, 1e-6, 1e-5, 1e-4]
    common = dict(n_passes=epochs, batch_size=500, random_state=0)
    one = GLM("softmax", lrate=0.1, l2=0.0, **common)
    t0 = time.perf_counter()
    one.fit(Xtr, ytr)
    t_one = time.perf_counter() - t0
    sweep = glm_sweep("softmax", lrate=lrates, l2=l2s, **common)
    t0 = time.perf_counter()
    sweep.fit(Xtr, ytr)
    t_sweep = time.perf_counter() - t0
    best = best_config(sweep, Xte, yte)
    floor = _products_floor(sweep, Xtr, common["batch_size"], epochs)
    learner = {}
    for name, make in (("one_config_s", lambda: GLM("softmax", lrate=0.1, l2=0.0, **common)),
                       ("sweep_s", lambda: glm_sweep("softmax", lrate=lrates, l2=l2s,
                                                     **common))):
        lrn = make().learner(Xtr, ytr, val_every=0)  # every minibatch trains, as in fit
        t0 = time.perf_counter()
        lrn.fit(progress=None)
        learner[name] = round(time.perf_counter() - t0, 3)
    learner["sweep_over_fit"] = round(learner["sweep_s"] / t_sweep, 3)
    learner["one_config_over_fit"] = round(learner["one_config_s"] / t_one, 3)
    return {
        "configs": len(lrates) * len(l2s),
        "epochs": epochs,
        "one_config_s": round(t_one, 3),
        "sweep_s": round(t_sweep, 3),
        "ratio_sweep_over_one": round(t_sweep / t_one, 3),
        "ratio_sweep_over_32_separate": round(t_sweep / (32 * t_one), 4),
        "one_config_accuracy": round(float(one.score(Xte, yte)), 5),
        "best": {"lrate": best.lrate, "l2": best.l2, "accuracy": round(best.score, 5)},
        "goal": "a sweep of 32 configurations costs <= 3x one configuration",
        "met": bool(t_sweep <= 3 * t_one),
        "products_floor_s": round(floor, 3),
        "ratio_products_floor_over_one": round(floor / t_one, 3),
        "learner": learner,
    }


def _products_floor(sweep: Any, Xtr: Any, batch_size: int, epochs: int) -> float:
    """Seconds the sweep's unavoidable sparse products alone take over its whole fit.

    Any implementation multiplies each minibatch by the T = 640 weight columns twice (the
    margins X @ W and the gradient X.T @ E: nnz x T multiply-adds each); this times the
    forward product at its best over the run's minibatches and counts it twice. Against
    one configuration's whole fit it bounds what the sweep ratio can be at this kernel
    speed on this machine.
    """
    from bidlab import kern

    W = sweep.model_.modelmats[0].data.T  # d x T, C-ordered
    E = np.empty((batch_size, W.shape[1]), W.dtype)
    total = 0.0
    for start in range(0, Xtr.shape[0] - batch_size + 1, batch_size):
        Xb = Xtr[start : start + batch_size]
        kern.sparse_dense(Xb, W, out=E)  # warm
        best = math.inf
        for _ in range(3):
            t0 = time.perf_counter()
            kern.sparse_dense(Xb, W, out=E)
            best = min(best, time.perf_counter() - t0)
        total += best
    full = Xtr.shape[0] // batch_size
    steps = -(-Xtr.shape[0] // batch_size)
    return 2.0 * total * epochs * steps / max(full, 1)


def bench_a9a(quick: bool, peers: set[str]) -> dict:
    from bidlab.datasets import load_a9a

    Xtr, ytr, Xte, yte = load_a9a(zero_one=True)
    Xtr, Xte = _i32(Xtr), _i32(Xte)
    n = Xtr.shape[0]
    rows: list[dict] = []
    Yte = yte.reshape(-1, 1)
    if "saga" in peers:
        from sklearn.linear_model import LogisticRegression

        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = LogisticRegression(solver="saga", max_iter=100).fit(Xtr, ytr)
        wall = time.perf_counter() - t0
        rows.append(_row("sklearn LogisticRegression(saga)", wall, n * int(m.n_iter_.max()),
                         _binary_metrics(Yte, m.predict_proba(Xte)[:, 1:])))
    if "sgd" in peers:
        wall, P = _sgd_targets(Xtr, ytr.reshape(-1, 1), Xte, [0])
        rows.append(_row("sklearn SGDClassifier(log_loss)", wall, n, _binary_metrics(Yte, P)))
    if "snapml" in peers and not _have("snapml"):
        wall, P = _snap_targets(Xtr, ytr.reshape(-1, 1), Xte, [0])
        rows.append(_row("Snap ML LogisticRegression", wall, n, _binary_metrics(Yte, P)))
    if "vw" in peers and not _have("vowpalwabbit"):
        wall, p = _vw_binary(Xtr, ytr, Xte)
        rows.append(_row("Vowpal Wabbit (3 passes, incl. text formatting)", wall, 3 * n,
                         _binary_metrics(Yte, p.reshape(-1, 1))))
    model = GLM("logistic", lrate=0.1, l2=1e-5, batch_size=500, n_passes=3, random_state=0)
    clone(model).set_params(n_passes=1).fit(Xtr[:2000], ytr[:2000])  # load the kernels
    t0 = time.perf_counter()
    model.fit(Xtr, ytr)
    wall = time.perf_counter() - t0
    P = model.predict_proba(Xte)[:, 1:]
    rows.insert(0, _row("bidlab GLM logistic (3 epochs)", wall, 3 * n, _binary_metrics(Yte, P)))
    return {"workload": "a9a", "n_train": n, "n_test": Xte.shape[0], "d": Xtr.shape[1],
            "results": rows}


WORKLOADS = {"synth100": bench_synth100, "synth20": bench_synth20, "news20": bench_news20,
             "a9a": bench_a9a}
PEERS = ("sgd", "saga", "snapml", "vw")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bidlab.bench glm", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated subset of {list(WORKLOADS)}")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help=f"comma-separated subset of {list(PEERS)}")
    args = parser.parse_args(argv)
    # numba's OpenMP workers and OpenBLAS's threads share the cores; OpenMP workers that
    # spin after a parallel region steal the BLAS threads' time (kernels measured 5-8x
    # slower here). Must be set before numba's first parallel launch.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    names = [w for w in args.workloads.split(",") if w]
    unknown = set(names) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}; choose from {list(WORKLOADS)}")
    peers = {p for p in args.peers.split(",") if p}
    report = {"benchmark": "glm", "machine": machine(), "quick": args.quick, "workloads": []}
    for name in names:
        t0 = time.perf_counter()
        res = WORKLOADS[name](args.quick, peers)
        res["bench_wall_s"] = round(time.perf_counter() - t0, 1)
        report["workloads"].append(res)
        if not args.json:
            _print(res)
    if args.json:
        print(json.dumps(report, indent=1, default=float))
    return 0


def _print(res: dict) -> None:
    print(f"== {res['workload']}: {res.get('n_train')} train x {res.get('d')} features")
    for r in res["results"]:
        if "skipped" in r:
            print(f"  {r['system']:<58} skipped: {r['skipped']}")
            continue
        nan = float("nan")
        print(
            f"  {r['system']:<58} {r['wall_s']:>9.2f} s  {r['samples_per_s'] or 0:>11,} /s  "
            f"acc {r.get('accuracy', nan):.4f}  logloss {r.get('log_loss', nan):.4f}  "
            f"auc {r.get('auc', nan):.4f}"
        )
    for key in ("target", "sweep"):
        if res.get(key):
            print(f"  {key}: {json.dumps(res[key])}")


if __name__ == "__main__":
    raise SystemExit(main())
