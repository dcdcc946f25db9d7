"""``python -m bidlab.bench nmf [--json] [--quick] [--iters N] [--cap N] [--ks K ...]
[--data NAME ...] [--losses LOSS ...] [--no-masked] [--gpu]``: NMF against scikit-learn to
scikit-learn's own final objective, and masked NMF on MovieLens ratings beside SFA.

Workloads: the KOS blog counts (3,430 x 6,906, CSR float32) and 20 Newsgroups tf-idf
(the training split, sublinear tf, rows L2-normalised, CSR float32), ``k`` = 20 and 64,
scikit-learn's random start (``init="random"``, ``random_state=0``; bidlab draws the same).

Peers, each with scikit-learn's defaults (``tol=1e-4``) and ``max_iter=--iters``:
Frobenius loss: ``NMF(solver="mu")``, ``NMF(solver="cd")`` and ``MiniBatchNMF``; KL loss:
``NMF(solver="mu", beta_loss="kullback-leibler")`` and ``MiniBatchNMF`` with the same
loss. Each peer's final ``reconstruction_err_`` is a target; bidlab's time to reach it is
the time of a whole ``NMF(method="batch", tol=0, max_iter=N).fit(X)`` (default solver:
``cd`` for Frobenius, ``mu`` for KL) for the fewest passes ``N`` that reach it (against KL
``mu``, whose iterates bidlab repeats, ``N`` is mu's own iteration count; otherwise the
first of 1, 2, 3, 5, 8, ... up to ``--cap`` that reaches it, then bisected down to the
fewest; each run from the start). Target: at most 1/5 of the peer's time. A bidlab run
of two passes first keeps numba's compilation out of the figures. ``--losses`` picks the
losses (both by default).

Masked: MovieLens-small ratings (a per-user 80 / 20 split, seed 0), NMF on the observed
entries only (the ratings' CSR with its own pattern as the mask), held-out RMSE beside
``SFA(feedback="explicit")``'s and a biases-only baseline's (``bench sfa``'s).
Every system runs with ``--blas-threads`` BLAS threads (default 1, threadpoolctl): on a
busy machine BLAS threads that spin for work slow each dense product down many times.
``--gpu``: bidlab's NMF runs with ``device="gpu"`` (CuPy; the data copied to the device
inside each timed fit, the clock stopped after the device has finished); the peers stay
on the CPU. ``--quick``: the first 600 KOS documents, k = 8, 10 iterations, no masked part (a smoke
run; its figures are not worth reporting).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from typing import Any

import numpy as np

from bidlab.bench._common import emit, log, machine, print_targets, require_gpu, target

KL = "kullback-leibler"


def _timed(make: Any, X: Any, device: str = "cpu") -> tuple[float, Any]:
    """Seconds of ``make().fit(X)``, the device synchronised after a GPU fit."""
    t0 = time.perf_counter()
    est = make().fit(X)
    if device == "gpu":
        from bidlab import backend

        backend.cupy().cuda.Device().synchronize()
    return time.perf_counter() - t0, est


def _steps(limit: int) -> list[int]:
    steps, a, b = [], 1, 2
    while a <= limit:
        steps.append(a)
        a, b = b, a + b
    return steps if steps[-1] == limit else [*steps, limit]


def data(name: str) -> Any:
    if name in ("kos", "kos-600"):
        from bidlab.datasets import load_kos

        X = load_kos(dtype=np.float32).X
        return X[:600] if name == "kos-600" else X
    from bidlab.datasets.newsgroups import load_20newsgroups, newsgroups_tfidf

    return newsgroups_tfidf(load_20newsgroups(subset="train"))[0]


def peers(k: int, loss: str, iters: int) -> dict[str, Any]:
    from sklearn.decomposition import NMF as SkNMF
    from sklearn.decomposition import MiniBatchNMF

    beta = "frobenius" if loss == "frobenius" else KL
    out = {"sklearn mu": lambda: SkNMF(k, init="random", solver="mu", beta_loss=beta,
                                       random_state=0, max_iter=iters)}
    if loss == "frobenius":
        out["sklearn cd"] = lambda: SkNMF(k, init="random", solver="cd", random_state=0,
                                          max_iter=iters)
    out["sklearn MiniBatchNMF"] = lambda: MiniBatchNMF(k, init="random", beta_loss=beta,
                                                      random_state=0, max_iter=iters)
    return out


def case(X: Any, name: str, k: int, loss: str, iters: int, cap: int,
         device: str = "cpu") -> dict[str, Any]:
    from bidlab.models import NMF

    def ours(n: int) -> Any:
        return lambda: NMF(k, init="random", loss=loss, random_state=0, max_iter=n, tol=0.0,
                           device=device)

    rows = []
    for peer, make in peers(k, loss, iters).items():
        t, est = _timed(make, X)
        goal = float(est.reconstruction_err_)
        log(f"  {name} k={k} {loss} {peer}: {t:.3f} s, {est.n_iter_} iterations, "
            f"error {goal:.6g}")
        # KL: bidlab's multiplicative steps repeat mu's iterates, so mu's count is it
        same = peer == "sklearn mu" and loss == "kl"
        tries = [int(est.n_iter_)] if same else _steps(cap)
        mine, below = None, 0
        for n in tries:
            tb, eb = _timed(ours(n), X, device)
            if eb.reconstruction_err_ <= goal * (1 + 1e-6):
                mine = (tb, n, float(eb.reconstruction_err_))
                break
            below = n
        while mine is not None and mine[1] - below > 1:  # the fewest passes: bisect
            n = (below + mine[1]) // 2
            tb, eb = _timed(ours(n), X, device)
            if eb.reconstruction_err_ <= goal * (1 + 1e-6):
                mine = (tb, n, float(eb.reconstruction_err_))
            else:
                below = n
        if mine is not None:
            log(f"    bidlab: {mine[1]} passes, {mine[0]:.3f} s, error {mine[2]:.6g}")
        rows.append({"data": name, "k": k, "loss": loss, "device": device,
                     "peer": peer, "peer_s": round(t, 4),
                     "peer_iterations": int(est.n_iter_), "target_error": goal,
                     "bidlab_s": None if mine is None else round(mine[0], 4),
                     "bidlab_passes": None if mine is None else mine[1],
                     "bidlab_error": None if mine is None else mine[2],
                     "time_ratio": None if mine is None else round(mine[0] / t, 4)})
    return rows


def masked(k: int, iters: int) -> dict[str, Any]:
    import scipy.sparse as sp

    from bidlab.bench.sfa import explicit_case
    from bidlab.datasets import load_movielens
    from bidlab.models import NMF
    from bidlab.models.sfa.metrics import rmse

    parts = load_movielens().split(0.2, seed=0)
    train, test = parts.train, parts.test
    # movies with no training rating carry nothing to learn (NMF refuses them): left out,
    # with their held-out ratings (counted in the result)
    seen = np.flatnonzero(np.bincount(train.indices, minlength=train.shape[1]))
    column = np.full(train.shape[1], -1)
    column[seen] = np.arange(seen.size)
    train = train[:, seen]
    mask = sp.csr_matrix((np.ones_like(train.data), train.indices, train.indptr),
                         shape=train.shape)
    t0 = time.perf_counter()
    est = NMF(k, init="random", random_state=0, max_iter=iters, tol=0.0)
    W = est.fit_transform(train, mask=mask)
    t = time.perf_counter() - t0
    users = np.repeat(np.arange(test.shape[0]), np.diff(test.indptr))
    kept = column[test.indices] >= 0
    pred = np.einsum("ij,ji->i", W[users[kept]],
                     est.components_[:, column[test.indices[kept]]])
    ours = rmse(test.data[kept], pred)
    log(f"masked MovieLens-small: NMF(k={k}) held-out RMSE {ours:.4f} ({t:.2f} s), "
        f"{int((~kept).sum())} held-out ratings of unseen movies left out")
    sfa = explicit_case(32, 20)
    return {"k": k, "iterations": iters, "nmf_rmse": ours, "nmf_fit_s": round(t, 3),
            "unseen_left_out": int((~kept).sum()), "test_ratings": int(test.nnz),
            "sfa_rmse": sfa["sfa_rmse"], "sfa_k": sfa["k"], "biases_rmse": sfa["biases_rmse"]}


def run(names: list[str], ks: list[int], iters: int, cap: int,
        with_masked: bool, losses: tuple[str, ...] = ("frobenius", "kl"),
        device: str = "cpu") -> dict[str, Any]:
    from bidlab.models import NMF

    rows: list[dict[str, Any]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's ConvergenceWarning
        for name in names:
            X = data(name)
            log(f"{name}: {X.shape[0]} x {X.shape[1]}, {X.nnz} nonzeros")
            for loss in losses:
                NMF(4, init="random", loss=loss, random_state=0, max_iter=2,
                    device=device).fit(X)  # compile
            for k in ks:
                for loss in losses:
                    rows += case(X, name, k, loss, iters, cap, device)
        extra = masked(20, 100) if with_masked else None
    on = " on the GPU" if device == "gpu" else ""
    targets = [target(f"{r['data']} k={r['k']} {r['loss']}: bidlab{on} time / {r['peer']}",
                      r["time_ratio"], 0.2, at_most=True) for r in rows]
    return {"benchmark": "nmf", "device": device, "iters": iters, "cap": cap, "rows": rows,
            "masked": extra, "targets": targets}


def _report(res: dict[str, Any]) -> None:
    where = " (bidlab on the GPU)" if res.get("device") == "gpu" else ""
    print(f"== NMF to scikit-learn's final objective{where} (peers at max_iter={res['iters']}, "
          f"tol 1e-4; bidlab capped at {res['cap']} passes)")
    for r in res["rows"]:
        mine = ("not reached" if r["bidlab_s"] is None else
                f"bidlab {r['bidlab_s']:.3f} s ({r['bidlab_passes']} passes), "
                f"ratio {r['time_ratio']:.3f}")
        print(f"  {r['data']:<7} k={r['k']:<3} {r['loss']:<9} {r['peer']:<21} "
              f"{r['peer_s']:>8.3f} s ({r['peer_iterations']} it, error "
              f"{r['target_error']:.5g})  {mine}")
    m = res["masked"]
    if m:
        print(f"masked MovieLens-small held-out RMSE: NMF(k={m['k']}) {m['nmf_rmse']:.4f}, "
              f"SFA(k={m['sfa_k']}) {m['sfa_rmse']:.4f}, biases only {m['biases_rmse']:.4f}")
    print_targets(res["targets"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bidlab.bench nmf", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--quick", action="store_true",
                        help="600 KOS documents, k=8, 10 iterations, no masked part")
    parser.add_argument("--iters", type=int, default=200, help="the peers' max_iter")
    parser.add_argument("--cap", type=int, default=400, help="most bidlab passes tried")
    parser.add_argument("--ks", type=int, nargs="+", default=[20, 64], help="components")
    parser.add_argument("--data", nargs="+", default=["kos", "news20"],
                        choices=("kos", "news20"), help="workloads")
    parser.add_argument("--no-masked", action="store_true", help="leave out MovieLens")
    parser.add_argument("--losses", nargs="+", default=["frobenius", "kl"],
                        choices=("frobenius", "kl"), help="losses")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="BLAS threads of every system (0: the library default)")
    parser.add_argument("--gpu", action="store_true",
                        help="bidlab's NMF on the GPU (needs CuPy and a CUDA device)")
    args = parser.parse_args(argv)
    device = "gpu" if args.gpu else "cpu"
    require_gpu(parser, args.gpu)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the other benchmarks
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=args.blas_threads or None, user_api="blas"):
        if args.quick:
            res = run(["kos-600"], [8], 6, 13, False, device=device)
        else:
            res = run(args.data, args.ks, max(2, args.iters), max(1, args.cap),
                      not args.no_masked, tuple(args.losses), device)
    res["machine"] = machine(blas_threads=args.blas_threads or "default")
    return emit(res, args.json, _report)


if __name__ == "__main__":
    raise SystemExit(main())
