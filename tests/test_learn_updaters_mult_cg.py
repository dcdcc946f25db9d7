"""The multiplicative updaters (BatchMult, IncMult) and CG against known answers:
scikit-learn's multiplicative-update NMF, their formulas, and numpy.linalg.solve."""

from __future__ import annotations

import numpy as np
import pytest
from scripted_stats import ScriptedStatsSteps
from sklearn.decomposition import NMF

import bidlab as bl
from bidlab.learn import CG, BatchMult, IncMult, Learner, Model


class TinyNMF(Model):
    """X ~ W @ H with the factor H (rank x features) the model matrix, moved by a
    multiplicative updater from ``num = W_b.T @ X_b`` and ``den = W_b.T @ W_b @ H`` summed
    over the blocks; each block's rows of W (independent given H) first take the
    multiplicative step ``W_b *= (X_b @ H.T) / (W_b @ H @ H.T)``, as scikit-learn's solver
    does before its H step."""

    mat_names = ("H",)

    def __init__(self, W0, H0, **options):
        super().__init__(**options)
        self.W, self.H0 = W0.copy(), H0

    def init(self, info):
        shape = self.H0.shape
        self.modelmats = [bl.Mat(self.H0.copy())]
        self.updatemats = [{"num": bl.zeros(shape, np.float64),
                            "den": bl.zeros(shape, np.float64)}]

    def update(self, batch):
        X = np.asarray(batch.mats[0].data)
        H = self.modelmats[0].data
        rows = slice(batch.start, batch.start + batch.n)
        W = self.W[rows]
        W *= (X @ H.T) / (W @ (H @ H.T))
        u = self.updatemats[0]
        u["num"].data[...] = W.T @ X
        u["den"].data[...] = W.T @ W @ H

    def evaluate(self, batch):
        return 0.0


def _nmf_problem():
    rng = np.random.default_rng(3)
    X = rng.random((30, 3)) @ rng.random((3, 20)) + 0.05 * rng.random((30, 20))
    W0 = rng.random((30, 3)) + 0.1
    H0 = rng.random((3, 20)) + 0.1
    return X, W0, H0


@pytest.mark.parametrize("batch_size", [30, 7])
def test_batchmult_nmf_reaches_sklearn_multiplicative_update_error(batch_size):
    X, W0, H0 = _nmf_problem()
    iters = 40
    ref = NMF(n_components=3, init="custom", solver="mu", beta_loss="frobenius",
              max_iter=iters, tol=0.0)
    Wr = ref.fit_transform(X, W=W0.copy(), H=H0.copy())
    assert ref.n_iter_ == iters
    model = TinyNMF(W0, H0)
    lr = Learner(model, X, {"H": BatchMult()}, batch_size=batch_size, n_passes=iters,
                 val_every=0)
    lr.fit(progress=None)
    H = model.modelmats[0].data
    err = np.linalg.norm(X - model.W @ H)
    assert err == pytest.approx(ref.reconstruction_err_, rel=1e-9)
    np.testing.assert_allclose(H, ref.components_, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(model.W, Wr, rtol=1e-7, atol=1e-12)
    assert err < np.linalg.norm(X - W0 @ H0) / 5


class WholePassNMF(TinyNMF):
    """Full-batch: sums the pass's statistics itself and hands over the totals at the last
    block (the other blocks leave NaN, which BatchMult must never read)."""

    full_batch = True

    def update(self, batch):
        if batch.index == 0:
            self.sums = [0.0, 0.0]
        super().update(batch)
        u = self.updatemats[0]
        for j, stat in enumerate(("num", "den")):
            self.sums[j] = self.sums[j] + u[stat].data
            u[stat].data[...] = self.sums[j] if batch.last else np.nan


def test_batchmult_on_a_full_batch_model_reads_the_pass_totals():
    X, W0, H0 = _nmf_problem()
    ref = NMF(n_components=3, init="custom", solver="mu", max_iter=10, tol=0.0)
    ref.fit_transform(X, W=W0.copy(), H=H0.copy())
    model = WholePassNMF(W0, H0)
    lr = Learner(model, X, {"H": BatchMult()}, batch_size=7, n_passes=10)
    assert lr.opts.val_every == 0
    lr.fit(progress=None)
    np.testing.assert_allclose(model.modelmats[0].data, ref.components_, rtol=1e-7, atol=1e-12)
    assert lr.updater.state() == {}


class ScriptedStats(ScriptedStatsSteps, Model):
    """Numerator and denominator statistics from a fixed random sequence."""

    SHAPE = (2, 3)
    SEED = 50

    def init(self, info):
        self.modelmats = [bl.Mat(np.full((2, 3), 1.0))]
        self.updatemats = [{"num": bl.zeros((2, 3), np.float64),
                            "den": bl.zeros((2, 3), np.float64)}]
        self.calls = 0


def test_incmult_blends_running_statistics_with_a_decaying_weight():
    steps, power, t0 = 6, 0.5, 2.0
    model = ScriptedStats()
    Learner(model, np.zeros((steps, 1)), IncMult(power=power, t0=t0), batch_size=1,
            n_passes=1, val_every=0).fit(progress=None)
    m, N, D = np.ones((2, 3)), np.zeros((2, 3)), np.zeros((2, 3))
    for t in range(1, steps + 1):
        r = min(1.0, (t0 / t) ** power)
        num, den = ScriptedStats.stats(t - 1)
        N, D = (1 - r) * N + r * num, (1 - r) * D + r * den
        m = m * N / D
    np.testing.assert_allclose(model.modelmats[0].data, m, rtol=1e-12)
    assert r < 1  # the weight decayed: old statistics were kept


def test_batchmult_steps_once_per_pass_from_the_summed_statistics():
    model = ScriptedStats()
    lr = Learner(model, np.zeros((4, 1)), BatchMult(), batch_size=1, n_passes=1, val_every=0)
    lr.fit(progress=None)
    num = sum(ScriptedStats.stats(t)[0] for t in range(4))
    den = sum(ScriptedStats.stats(t)[1] for t in range(4))
    np.testing.assert_allclose(model.modelmats[0].data, num / den, rtol=1e-12)


def _spd(n, rng, cond=50.0):
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (Q * np.linspace(1.0, cond, n)) @ Q.T


class System(Model):
    """Rows x of the model matrix X solve ``x_r A = b_r`` (A SPD): the normal-equation
    terms ``{"rhs": B, "gram": A}``, or the product callback ``{"rhs": B, "matvec": f}``."""

    mat_names = ("X",)

    def __init__(self, A, B, form="gram", **options):
        super().__init__(**options)
        self.A, self.B, self.form = A, B, form

    def init(self, info):
        self.modelmats = [bl.zeros(self.B.shape, np.float64)]
        stats = {"rhs": bl.Mat(self.B.copy())}
        if self.form == "gram":
            stats["gram"] = bl.Mat(self.A.copy())
        else:
            stats["matvec"] = lambda P, out: np.matmul(P, self.A, out=out)
        self.updatemats = [stats]

    def update(self, batch):
        self.updatemats[0]["rhs"].data[...] = self.B  # the system of this minibatch

    def evaluate(self, batch):
        return 0.0


@pytest.mark.parametrize("form", ["gram", "matvec"])
def test_cg_a_few_steps_per_minibatch_reach_the_solution(form):
    rng = np.random.default_rng(7)
    A = _spd(12, rng, cond=10.0)
    B = rng.standard_normal((3, 12))
    model = System(A, B, form)
    Learner(model, np.zeros((30, 1)), CG(steps=3), batch_size=1, n_passes=1,
            val_every=0).fit(progress=None)
    want = np.linalg.solve(A, B.T).T  # A symmetric: x A = b
    X = model.modelmats[0].data
    assert np.linalg.norm(X - want) / np.linalg.norm(want) < 1e-6


def test_cg_warm_started_needs_fewer_steps_the_second_time():
    rng = np.random.default_rng(8)
    A = _spd(200, rng, cond=100.0)  # large enough that CG converges before n steps
    B = rng.standard_normal((2, 200))
    model = System(A, B)
    cg = CG(steps=500, tol=1e-10)
    lr = Learner(model, np.zeros((1, 1)), cg, batch_size=1, n_passes=1, val_every=0)
    lr.fit(progress=None)
    first = cg.last_steps
    want = np.linalg.solve(A, B.T).T
    assert np.linalg.norm(model.modelmats[0].data - want) / np.linalg.norm(want) < 1e-8
    model.B = B + 1e-4 * rng.standard_normal(B.shape)  # the next minibatch's system
    lr.set(n_passes=2)
    lr.fit(progress=None)
    second = cg.last_steps
    assert 0 < second < 0.8 * first, (first, second)  # measured: 80 steps, then 56
    want = np.linalg.solve(A, model.B.T).T
    assert np.linalg.norm(model.modelmats[0].data - want) / np.linalg.norm(want) < 1e-8
