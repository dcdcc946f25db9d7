"""The peers of ``bench glm`` and the metrics every row is judged by.

scikit-learn (SGDClassifier, LogisticRegression with saga), Snap ML and Vowpal Wabbit, each
run as a user would call it; a peer that is not importable is skipped with the reason.
The metrics are computed the same way for every system from its held-out probabilities.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["binary_metrics", "have", "i32", "multiclass_metrics", "multiclass_peers", "proba",
           "result_row", "sgd_targets", "snap_targets", "vw_binary", "vw_multiclass"]

# ----------------------------------------------------------------------------- metrics


def binary_metrics(Y: np.ndarray, P: np.ndarray) -> dict[str, float]:
    """Mean over targets of accuracy, log loss and AUC; Y, P: n x t (P = P(y=1))."""
    from sklearn.metrics import roc_auc_score

    P = np.clip(P.astype(np.float64), 1e-7, 1 - 1e-7)
    ll = -(Y * np.log(P) + (1 - Y) * np.log1p(-P)).mean(0)
    acc = ((P > 0.5) == (Y > 0.5)).mean(0)
    auc = [roc_auc_score(Y[:, j], P[:, j]) for j in range(Y.shape[1])]
    return {"accuracy": float(acc.mean()), "log_loss": float(ll.mean()), "auc": float(np.mean(auc))}


def proba(model: Any, X: Any, C: int) -> np.ndarray:
    """n x C class probabilities, columns placed by the model's ``classes_`` (a class the
    model never saw in training gets probability 0, later clipped to 1e-12)."""
    P = model.predict_proba(X)
    classes = np.asarray(getattr(model, "classes_", np.arange(P.shape[1])), dtype=np.int64)
    full = np.zeros((P.shape[0], C))
    full[:, classes] = P
    return full


def multiclass_metrics(y: np.ndarray, P: np.ndarray) -> dict[str, float]:
    """Accuracy, log loss and one-vs-rest AUC of n x C class probabilities ``P``."""
    from sklearn.metrics import roc_auc_score

    P = np.clip(P.astype(np.float64), 1e-12, 1)
    P /= P.sum(1, keepdims=True)
    ll = -np.log(P[np.arange(len(y)), y]).mean()
    try:
        auc = float(roc_auc_score(y, P, multi_class="ovr"))
    except ValueError:
        auc = float("nan")
    return {"accuracy": float((P.argmax(1) == y).mean()), "log_loss": float(ll), "auc": auc}


def result_row(system: str, wall: float, samples: float, metrics: dict, **extra: Any) -> dict:
    """One row of the report: wall time, samples per second and the metrics, rounded."""
    return {
        "system": system,
        "wall_s": round(wall, 3),
        "samples_per_s": round(samples / wall) if wall > 0 else None,
        **{k: round(v, 5) for k, v in metrics.items()},
        **extra,
    }


# ----------------------------------------------------------------------------- peers


def have(module: str) -> str | None:
    """None when ``module`` imports here, else why not (the row says it is skipped)."""
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


def _vw_run(args: str, Xtr, labels: np.ndarray, Xte, passes: int) -> tuple[float, np.ndarray]:
    """Train Vowpal Wabbit with ``args`` for ``passes`` passes over the training rows (the
    text formatting counted, as a user of its Python API pays it); its test predictions."""
    import vowpalwabbit

    t0 = time.perf_counter()
    lines = _vw_lines(Xtr, labels)
    vw = vowpalwabbit.Workspace(args)
    for _ in range(passes):
        for line in lines:
            vw.learn(line)
    wall = time.perf_counter() - t0
    test = _vw_lines(Xte, np.ones(Xte.shape[0], np.int64))
    P = np.array([vw.predict(line) for line in test])
    vw.finish()
    return wall, P


def vw_binary(Xtr, ytr, Xte, passes: int = 3) -> tuple[float, np.ndarray]:
    """Logistic loss, labels -1 / +1; P(y = 1) per test row."""
    return _vw_run("--loss_function logistic --link logistic --quiet -b 20", Xtr,
                   np.where(ytr > 0.5, 1, -1), Xte, passes)


def vw_multiclass(Xtr, ytr, Xte, C: int, passes: int = 3) -> tuple[float, np.ndarray]:
    """One-against-all with logistic loss, labels 1..C; class probabilities per test row."""
    return _vw_run(f"--oaa {C} --loss_function logistic --probabilities --quiet -b 22", Xtr,
                   ytr + 1, Xte, passes)


def sgd_targets(Xtr, Ytr, Xte, targets, alpha: float = 1e-4) -> tuple[float, np.ndarray]:
    """One ``SGDClassifier(log_loss, alpha)`` per listed target column: seconds and
    P(y = 1)."""
    from sklearn.linear_model import SGDClassifier

    P = np.empty((Xte.shape[0], len(targets)))
    t0 = time.perf_counter()
    for i, j in enumerate(targets):
        c = SGDClassifier(loss="log_loss", alpha=alpha, random_state=0).fit(Xtr, Ytr[:, j])
        P[:, i] = c.predict_proba(Xte)[:, 1]
    return time.perf_counter() - t0, P


def snap_targets(Xtr, Ytr, Xte, targets) -> tuple[float, np.ndarray]:
    """One Snap ML ``LogisticRegression`` per listed target column: seconds and P(y = 1)."""
    import snapml

    P = np.empty((Xte.shape[0], len(targets)))
    t0 = time.perf_counter()
    for i, j in enumerate(targets):
        c = snapml.LogisticRegression(n_jobs=2, fit_intercept=True).fit(Xtr, Ytr[:, j])
        P[:, i] = c.predict_proba(Xte)[:, 1]
    return time.perf_counter() - t0, P


def multiclass_peers(Xtr, ytr, Xte, yte, C: int, peers: set[str],
                     out: list) -> dict[str, dict]:
    """Run saga / SGD / Snap ML / VW on one multi-class problem, appending their rows to
    ``out``; return the reference rows (scikit-learn's saga and SGD) by name."""
    n = Xtr.shape[0]
    refs: dict[str, dict] = {}
    if "saga" in peers:
        from sklearn.linear_model import LogisticRegression

        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = LogisticRegression(solver="saga", max_iter=100, tol=1e-4).fit(Xtr, ytr)
        wall = time.perf_counter() - t0
        refs["saga"] = result_row("sklearn LogisticRegression(saga)", wall,
                                  n * int(m.n_iter_.max()),
                                  multiclass_metrics(yte, proba(m, Xte, C)),
                                  epochs=int(m.n_iter_.max()))
        out.append(refs["saga"])
    if "sgd" in peers:
        from sklearn.linear_model import SGDClassifier

        t0 = time.perf_counter()
        m = SGDClassifier(loss="log_loss", random_state=0).fit(Xtr, ytr)
        wall = time.perf_counter() - t0
        refs["sgd"] = result_row("sklearn SGDClassifier(log_loss, OvR)", wall,
                                 n * m.n_iter_ * C, multiclass_metrics(yte, proba(m, Xte, C)),
                                 epochs=int(m.n_iter_))
        out.append(refs["sgd"])
        t0 = time.perf_counter()
        m = SGDClassifier(random_state=0).fit(Xtr, ytr)  # the defaults: hinge loss
        wall = time.perf_counter() - t0
        acc = float((m.classes_[m.decision_function(Xte).argmax(1)] == yte).mean())
        refs["sgd_hinge"] = result_row("sklearn SGDClassifier() (hinge, OvR)", wall,
                                       n * m.n_iter_ * C, {"accuracy": acc},
                                       epochs=int(m.n_iter_))
        out.append(refs["sgd_hinge"])
    if "snapml" in peers:
        why = have("snapml")
        if why:
            out.append({"system": "Snap ML", "skipped": why})
        else:
            import snapml

            t0 = time.perf_counter()
            m = snapml.LogisticRegression(n_jobs=2, fit_intercept=True).fit(Xtr, ytr)
            wall = time.perf_counter() - t0
            out.append(result_row("Snap ML LogisticRegression (OvR)", wall, n,
                            multiclass_metrics(yte, proba(m, Xte, C))))
    if "vw" in peers:
        why = have("vowpalwabbit")
        if why:
            out.append({"system": "Vowpal Wabbit", "skipped": why})
        else:
            wall, P = vw_multiclass(Xtr, ytr, Xte, C)
            out.append(result_row("Vowpal Wabbit --oaa (3 passes, incl. text formatting)", wall,
                            3 * n, multiclass_metrics(yte, P), epochs=3))
    return refs


def i32(X: sp.csr_matrix) -> sp.csr_matrix:
    """32-bit indices: scikit-learn's saga refuses int64-indexed sparse matrices."""
    X = sp.csr_matrix(X)
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    return X
