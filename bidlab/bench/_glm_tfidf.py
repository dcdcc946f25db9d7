"""``bench glm --workloads tfidf100,tfidf100_l2``: 100 logistic targets over generated rows
made TF-IDF (idf-weighted, L2-normalised, as ``TfidfVectorizer`` writes them), L2 1e-6 /
1e-4: ``GLM`` with its default settings (``lrate="auto"``), the whole ``fit`` timed,
against ``SGDClassifier(log_loss, alpha=l2)`` one target at a time in the same run; and
``news20_tfidf`` / ``news20_tfidf_l2``: 20 Newsgroups as ``TfidfVectorizer`` writes it,
one-vs-rest, the same comparison.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from bidlab.bench._glm_peers import binary_metrics, i32, result_row, sgd_targets
from bidlab.models.glm import GLM

__all__ = ["bench_news20_tfidf", "bench_news20_tfidf_l2", "bench_tfidf100", "bench_tfidf100_l2"]


def _tfidf_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    """Rows as ``TfidfTransformer`` writes them: idf-weighted, L2-normalised."""
    from sklearn.feature_extraction.text import TfidfTransformer

    return sp.csr_matrix(TfidfTransformer().fit_transform(X), dtype=np.float32)


def _tfidf100(quick: bool, l2: float, name: str, peers: set[str]) -> dict:
    """100 logistic targets over generated rows made TF-IDF (what ``TfidfVectorizer``
    writes), the GLM with its default settings but ``l2`` (the whole ``fit`` timed,
    learning-rate pilot included) against SGD one target at a time."""
    from bidlab.datasets import synthetic_glm

    n_tr, n_te, d = (16_000, 4_000, 8_000) if quick else (66_000, 16_000, 30_000)
    X, Y, _ = synthetic_glm(n_tr + n_te, d, 40, n_targets=100, seed=23)
    X = i32(_tfidf_rows(X))
    timed = list(range(20)) if quick else list(range(100))
    return _defaults_vs_sgd(X[:n_tr], Y[:n_tr], X[n_tr:], Y[n_tr:], l2, name, peers, timed)


def _news20_tfidf(quick: bool, l2: float, name: str, peers: set[str]) -> dict:
    """20 Newsgroups through ``TfidfVectorizer``'s defaults (word counts, smoothed idf,
    L2-normalised rows; words in at least 2 training documents), one logistic target per
    newsgroup (one-vs-rest), the same comparison as :func:`_tfidf100`."""
    from bidlab.datasets import load_20newsgroups, newsgroups_tfidf

    tr = load_20newsgroups(subset="train", min_df=2)
    te = load_20newsgroups(subset="test", vocabulary=tr.vocab)
    Xtr, Xte = newsgroups_tfidf(tr, te, sublinear_tf=False)
    ytr, yte = np.asarray(tr.labels), np.asarray(te.labels)
    if quick:
        keep = np.sort(np.random.default_rng(0).choice(Xtr.shape[0], 4000, replace=False))
        Xtr, ytr = Xtr[keep], ytr[keep]
    Ytr = (ytr[:, None] == np.arange(20)[None, :]).astype(np.float64)
    Yte = (yte[:, None] == np.arange(20)[None, :]).astype(np.float64)
    return _defaults_vs_sgd(i32(Xtr), Ytr, i32(Xte), Yte, l2, name, peers, list(range(20)))


def _defaults_vs_sgd(Xtr: sp.csr_matrix, Ytr: np.ndarray, Xte: sp.csr_matrix,
                     Yte: np.ndarray, l2: float, name: str, peers: set[str],
                     timed: list[int]) -> dict:
    """``GLM(l2=l2)`` with every other setting its default, the whole ``fit`` timed,
    against ``SGDClassifier(log_loss, alpha=l2)`` on the ``timed`` targets (scaled up)."""
    q = Ytr.shape[1]
    n_tr, n_te = Xtr.shape[0], Xte.shape[0]
    rows: list[dict] = []
    ref = None
    if "sgd" in peers:
        wall, P = sgd_targets(Xtr, Ytr, Xte, timed, alpha=l2)
        ref = binary_metrics(Yte[:, timed], P)
        rows.append(result_row(f"sklearn SGDClassifier(log_loss, alpha={l2:g}) x targets",
                               wall * q / len(timed), n_tr * q, ref,
                               targets_timed=len(timed)))
    model = GLM("logistic", l2=l2, random_state=0)
    few = np.linspace(0, n_tr - 1, min(n_tr, 2000)).astype(np.int64)  # every class
    clone(model).set_params(n_passes=2).fit(Xtr[few], Ytr[few])  # load the kernels
    t0 = time.perf_counter()
    model.fit(Xtr, Ytr)
    wall = time.perf_counter() - t0
    P = 1.0 / (1.0 + np.exp(-np.clip(model.decision_function(Xte), -30, 30)))
    mine = binary_metrics(Yte, P)
    rates = np.atleast_1d(np.asarray(model.lrate_, dtype=float))
    rows.insert(0, result_row(f"bidlab GLM(l2={l2:g}) defaults, whole fit", wall,
                              n_tr * model.n_passes, mine,
                              lrate_chosen=sorted({float(r) for r in rates}),
                              passes=int(model.n_iter_)))
    out = {"workload": name, "n_train": n_tr, "n_test": n_te, "d": Xtr.shape[1],
           "targets": q, "nnz_train": int(Xtr.nnz), "results": rows}
    if ref:
        same = binary_metrics(Yte[:, timed], P[:, timed])
        out["target"] = {
            "goal": "SGD's held-out log loss + 0.002 in <= 1/10 of its time",
            "log_loss_bidlab_vs_sgd": [round(same["log_loss"], 5), round(ref["log_loss"], 5)],
            "time_ratio_bidlab_over_sgd": round(wall / rows[1]["wall_s"], 4),
            "met": bool(same["log_loss"] <= ref["log_loss"] + 0.002
                        and wall <= rows[1]["wall_s"] / 10),
        }
    return out


def bench_tfidf100(quick: bool, peers: set[str]) -> dict:
    return _tfidf100(quick, 1e-6, "tfidf100", peers)


def bench_tfidf100_l2(quick: bool, peers: set[str]) -> dict:
    return _tfidf100(quick, 1e-4, "tfidf100_l2", peers)


def bench_news20_tfidf(quick: bool, peers: set[str]) -> dict:
    return _news20_tfidf(quick, 1e-6, "news20_tfidf", peers)


def bench_news20_tfidf_l2(quick: bool, peers: set[str]) -> dict:
    return _news20_tfidf(quick, 1e-4, "news20_tfidf_l2", peers)
