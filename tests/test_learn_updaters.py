"""Updaters and mixins against numpy oracles of their formulas."""

from __future__ import annotations

import numpy as np
import pytest

import bidlab as bl
from bidlab import backend
from bidlab.learn import (
    ADAGrad,
    Batch,
    Grad,
    IncNorm,
    L1Regularizer,
    L2Regularizer,
    Learner,
    Model,
    updaters,
)


class Scripted(Model):
    """A model whose update directions are a fixed random sequence (seeded by step)."""

    def init(self, info):
        rng = np.random.default_rng(0)
        self.modelmats = [bl.Mat(rng.random((2, 3)).astype(np.float64)),
                          bl.Mat(rng.random((4, 1)).astype(np.float64))]
        self.updatemats = [bl.zeros((2, 3), np.float64), bl.zeros((4, 1), np.float64)]
        self.calls = 0

    @staticmethod
    def direction(step):
        rng = np.random.default_rng(100 + step)
        return [rng.standard_normal((2, 3)), rng.standard_normal((4, 1))]

    def update(self, batch):
        for u, d in zip(self.updatemats, self.direction(self.calls), strict=True):
            u.data[...] = d
        self.calls += 1
        return 0.0

    def evaluate(self, batch):
        return 0.0


class Positive(Scripted):
    """Non-negative directions (sufficient statistics, as IncNorm's isprob expects)."""

    @staticmethod
    def direction(step):
        return [np.abs(d) for d in Scripted.direction(step)]

    def update(self, batch):
        for u, d in zip(self.updatemats, self.direction(self.calls), strict=True):
            u.data[...] = d
        self.calls += 1
        return 0.0


def _run(updater, steps, mixins=(), model_class=Scripted, **opts):
    model = model_class()
    data = np.zeros((steps, 1))
    lr = Learner(model, data, updater, list(mixins), batch_size=1, n_passes=1, val_every=0,
                 **opts)
    lr.init()
    start = [m.data.copy() for m in model.modelmats]
    lr.fit(progress=None)
    assert model.calls == steps
    return start, [m.data for m in model.modelmats]


def test_grad_with_decay_momentum_and_per_row_lrate():
    steps = 7
    lrate = [0.5, 0.1]  # one per model matrix
    start, end = _run(Grad(lrate=lrate, texp=0.5, t0=2.0, momentum=0.3), steps)
    w = [s.copy() for s in start]
    v = [np.zeros_like(s) for s in start]
    for t in range(steps):
        for i, d in enumerate(Scripted.direction(t)):
            step = lrate[i] * (2.0 / (2.0 + t)) ** 0.5 * d
            v[i] = 0.3 * v[i] + step
            w[i] += v[i]
    for a, b in zip(end, w, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_grad_per_row_vector_applies_row_by_row():
    rows = [0.1, 0.2, 0.3, 0.4]  # fits the 4 rows of matrix 1 but not the 2 of matrix 0
    model = Scripted()
    lr = Learner(model, np.zeros((1, 1)), Grad(), batch_size=1, n_passes=1, val_every=0)
    lr.init()
    with pytest.raises(ValueError, match="has 4 values, but the model matrices have 2, 4 rows"):
        lr.updater.lrate.fill(rows)
    with pytest.raises(ValueError, match="vector length among 2"):
        lr.set(lrate=rows)  # refused in the caller's thread already
    lr.updater.lrate.fill([0.5, 0.25])
    np.testing.assert_array_equal(lr.updater.lrate[0].ravel(), [0.5, 0.5])
    np.testing.assert_array_equal(lr.updater.lrate[1].ravel(), [0.25] * 4)


def test_adagrad_matches_its_formula():
    steps = 6
    start, end = _run(ADAGrad(lrate=0.2, vexp=0.5, epsilon=1e-3, texp=0.5, t0=1.0), steps)
    w = [s.copy() for s in start]
    ss = [np.zeros_like(s) for s in start]
    for t in range(steps):
        for i, d in enumerate(Scripted.direction(t)):
            ss[i] += (d * d - ss[i]) / (t + 1)
            w[i] += 0.2 * (1.0 / (1.0 + t)) ** 0.5 * d / (np.sqrt(ss[i]) + 1e-3)
    for a, b in zip(end, w, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_adagrad_general_vexp():
    start, end = _run(ADAGrad(lrate=0.1, vexp=0.25, texp=0.0), 4)
    w, ss = start[0].copy(), np.zeros_like(start[0])
    for t in range(4):
        d = Scripted.direction(t)[0]
        ss += (d * d - ss) / (t + 1)
        w += 0.1 * d / (ss ** 0.25 + 1e-5)
    np.testing.assert_allclose(end[0], w, rtol=1e-12)


@pytest.mark.parametrize("isprob", [False, True])
def test_incnorm_moving_average(isprob):
    steps = 5
    start, end = _run(IncNorm(kappa=0.6, t0=2.0, isprob=isprob), steps, model_class=Positive)
    w = [s.copy() for s in start]
    for t in range(1, steps + 1):
        r = min(1.0, (2.0 / t) ** 0.6)
        for i, d in enumerate(Positive.direction(t - 1)):
            if isprob:
                d = d / d.sum(axis=1, keepdims=True)
            w[i] = (1 - r) * w[i] + r * d
    for a, b in zip(end, w, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_batch_replace_and_step():
    steps = 4  # one pass of 4 minibatches
    _, end = _run(Batch(), steps)
    total = [sum(Scripted.direction(t)[i] for t in range(steps)) for i in range(2)]
    for a, b in zip(end, total, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    start, end = _run(Batch(batch_mode="step", lrate=0.5), steps)
    for i in range(2):
        np.testing.assert_allclose(end[i], start[i] + 0.5 * total[i] / steps, rtol=1e-12)


def test_batch_applies_only_at_the_pass_end():
    model = Scripted()
    lr = Learner(model, np.zeros((4, 1)), Batch(), batch_size=1, n_passes=1, val_every=0,
                 max_steps=3)
    lr.init()
    start = model.modelmats[0].data.copy()
    lr.fit(progress=None)
    np.testing.assert_array_equal(model.modelmats[0].data, start)  # pass not finished


def test_l1_and_l2_mixins_add_their_gradients_and_report_kpis():
    start, end = _run(Grad(lrate=0.1), 1, [L1Regularizer(l1=0.3, mats=[0]),
                                           L2Regularizer(l2=[0.5, 2.0])])
    d = Scripted.direction(0)
    w0 = start[0] + 0.1 * (d[0] - 0.3 * np.sign(start[0]) - 0.5 * start[0])
    w1 = start[1] + 0.1 * (d[1] - 2.0 * start[1])  # no L1 on matrix 1
    np.testing.assert_allclose(end[0], w0, rtol=1e-12)
    np.testing.assert_allclose(end[1], w1, rtol=1e-12)


def test_mixin_kpis_in_metrics():
    model = Scripted()
    lr = Learner(model, np.zeros((3, 1)), Grad(lrate=0.1),
                 [L1Regularizer(l1=0.3), L2Regularizer(l2=0.5)], batch_size=1, n_passes=1,
                 val_every=0)
    lr.fit(progress=None)
    w = [m.data for m in model.modelmats]
    m = lr.metrics
    assert m["kpi_l1"] == pytest.approx(0.3 * sum(np.abs(x).sum() for x in w))
    assert m["kpi_l2"] == pytest.approx(0.25 * sum((x * x).sum() for x in w))


def test_mixin_with_bad_matrix_index():
    lr = Learner(Scripted(), np.zeros((3, 1)), Grad(), [L2Regularizer(mats=[5])], batch_size=1)
    with pytest.raises(ValueError, match=r"mats=\[5\] names matrices \[5\], but the model has 2"):
        lr.init()


def test_live_hyperparameter_change_keeps_the_same_matrix():
    model = Scripted()
    lr = Learner(model, np.zeros((3, 1)), ADAGrad(), batch_size=1, val_every=0)
    lr.init()
    col = lr.updater.lrate.cols[0]
    guid = col.guid
    lr.set(lrate=0.7)
    lr._apply_changes()  # what the training thread does at a boundary
    assert lr.updater.lrate.cols[0] is col and col.guid == guid
    np.testing.assert_array_equal(col.data, 0.7)


class Layouts(Model):
    """A C-ordered and an F-ordered matrix (the GLM's T x d layout), random directions.

    ``update_order`` lays the update matrices out differently from the model's, which no
    fused step accepts (the generic ufuncs must then run).
    """

    def __init__(self, dtype, update_order=None, **options):
        super().__init__(**options)
        self.dtype, self.update_order = np.dtype(dtype), update_order

    def init(self, info):
        rng = np.random.default_rng(1)
        shapes_orders = [((6, 7), "C"), ((6, 9), "F")]
        self.modelmats, self.updatemats = [], []
        for shape, order in shapes_orders:
            w = np.asarray(rng.standard_normal(shape), dtype=self.dtype, order=order)
            w[0, :3] = 0.0  # sign(0) = 0 for the L1 term
            self.modelmats.append(bl.Mat(w))
            uorder = self.update_order or order
            self.updatemats.append(bl.Mat(np.zeros(shape, self.dtype, order=uorder)))
        self.calls = 0

    def update(self, batch):
        rng = np.random.default_rng(200 + self.calls)
        for u in self.updatemats:
            u.data[...] = rng.standard_normal(u.shape)
        self.calls += 1
        return 0.0

    def evaluate(self, batch):
        return 0.0


def _layouts_run(make_updater, dtype, update_order=None, generic=False, monkeypatch=None):
    from bidlab.kern import steps

    if generic:
        for name in ("adagrad", "grad", "subtract_scaled", "subtract_scaled_sign"):
            monkeypatch.setattr(steps, name, lambda *a, **k: False)
    model = Layouts(dtype, update_order)
    mixins = [L1Regularizer(l1=[0.01, 0.02, 0.0, 0.03, 0.01, 0.02]),
              L2Regularizer(l2=0.05)]
    lr = Learner(model, np.zeros((5, 1)), make_updater(), mixins, batch_size=1, n_passes=1,
                 val_every=0)
    lr.fit(progress=None)
    state = {k: v.data.copy() for k, v in lr.updater.state().items()}
    monkeypatch.undo()
    return [m.data.copy() for m in model.modelmats], state


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("make", [
    lambda: ADAGrad(lrate=[0.1, 0.2, 0.3, 0.1, 0.2, 0.3], epsilon=1e-3),
    lambda: Grad(lrate=[0.1, 0.2, 0.3, 0.1, 0.2, 0.3], texp=0.5),
], ids=["adagrad", "grad"])
def test_fused_cpu_steps_equal_the_ufunc_steps_bit_for_bit(make, dtype, monkeypatch):
    fused, fused_state = _layouts_run(make, dtype, monkeypatch=monkeypatch)
    generic, generic_state = _layouts_run(make, dtype, generic=True, monkeypatch=monkeypatch)
    start = Layouts(dtype)
    start.init(None)
    for f, g, s in zip(fused, generic, start.modelmats, strict=True):
        assert not np.array_equal(f, s.data)  # the steps moved the model
        np.testing.assert_array_equal(f, g)
    assert fused_state.keys() == generic_state.keys()
    for k in fused_state:
        np.testing.assert_array_equal(fused_state[k], generic_state[k])


def test_updater_state_follows_each_model_matrix_layout():
    model = Layouts(np.float32)
    lr = Learner(model, np.zeros((2, 1)), ADAGrad(momentum=0.5), [L2Regularizer(l2=0.1)],
                 batch_size=1, n_passes=1, val_every=0)
    lr.fit(progress=None)  # momentum: the generic path, with its velocity buffers
    assert [backend.order_of(m.data) for m in model.modelmats] == ["C", "F"]
    for i, m in enumerate(model.modelmats):
        for buf in (lr.updater.sumsq[i], lr.updater._tmp[i], lr.updater._velocity[i],
                    lr.mixins[0]._tmp[i]):
            assert backend.order_of(buf) == backend.order_of(m.data)


def test_mixed_layout_update_matrices_take_the_generic_step(monkeypatch):
    # update matrices row-major beside a column-major model matrix: no fused step applies
    mixed, _ = _layouts_run(lambda: ADAGrad(lrate=0.1), np.float64, update_order="C",
                            monkeypatch=monkeypatch)
    same, _ = _layouts_run(lambda: ADAGrad(lrate=0.1), np.float64, monkeypatch=monkeypatch)
    for a, b in zip(mixed, same, strict=True):
        np.testing.assert_array_equal(a, b)


def test_vectors_read_per_row_then_per_group_then_per_matrix():
    from bidlab.learn.hyper import expand_hyper
    from bidlab.learn.options import OptionError

    groups = np.array([0, 0, 1, 1, 1, 2])  # 6 rows in 3 groups, two matrices of 6 rows
    rows = [6, 6]
    per_row = expand_hyper("lrate", list(range(6)), rows, groups)
    np.testing.assert_array_equal(per_row[0], np.arange(6))
    per_group = expand_hyper("lrate", [0.1, 0.2, 0.3], rows, groups)
    for col in per_group:
        np.testing.assert_array_equal(col, [0.1, 0.1, 0.2, 0.2, 0.2, 0.3])
    two = expand_hyper("lrate", [0.1, 0.2], rows, np.array([0, 0, 0, 1, 1, 1]))
    np.testing.assert_array_equal(two[1], [0.1] * 3 + [0.2] * 3)  # groups win over matrices
    per_matrix = expand_hyper("lrate", [0.1, 0.2], rows, groups)
    np.testing.assert_array_equal(per_matrix[1], [0.2] * 6)
    with pytest.raises(OptionError, match=r"has 4 values.*one per row group \(3\)"):
        expand_hyper("lrate", [1, 2, 3, 4], rows, groups)


class SparseProduct(Model):
    """A T x d column-major model whose update is handed over unformed: ``U = A.T @ X``
    for the minibatch's sparse rows ``X`` and a random dense factor ``A`` (n x T)."""

    T, d = 5, 40

    def __init__(self, sparse=True, **options):
        super().__init__(**options)
        self.sparse = sparse

    def init(self, info):
        rng = np.random.default_rng(4)
        w = np.asfortranarray(rng.standard_normal((self.T, self.d)))
        w[:, :3] = 0.0  # sign(0) = 0 for the L1 term
        self.modelmats = [bl.Mat(w)]
        self.updatemats = [bl.Mat(np.zeros((self.T, self.d), order="F"))]
        self.rec = updaters.SparseUpdate()
        self.factors = []

    def update(self, batch):
        X = batch.mats[0]
        A = bl.Mat(np.random.default_rng(300 + len(self.factors)).standard_normal(
            (batch.n, self.T)))
        self.factors.append((X.numpy().toarray(), A.data.copy()))
        if self.sparse:
            self.rec.reset(X, A)
            self.sparse_updates = {0: self.rec}
        else:
            self.updatemats[0].data[...] = A.data.T @ X.numpy().toarray()
        return 0.0

    def evaluate(self, batch):
        return 0.0


def _sparse_run(make_updater, sparse, mixins=()):
    import scipy.sparse as sp

    X = sp.random(24, SparseProduct.d, density=0.05, format="csr", random_state=1)
    model = SparseProduct(sparse)
    lr = Learner(model, X, make_updater(), list(mixins), batch_size=6, n_passes=2,
                 val_every=0)
    lr.init()
    start = model.modelmats[0].data.copy()
    lr.fit(progress=None)
    return start, model, lr


@pytest.mark.parametrize("make", [
    lambda: ADAGrad(lrate=[0.1, 0.2, 0.3, 0.4, 0.5], epsilon=1e-3),
    lambda: Grad(lrate=0.2, texp=0.5),
    lambda: ADAGrad(lrate=0.1, momentum=0.5),  # momentum: the update is formed
    lambda: ADAGrad(lrate=0.1, vexp=0.3),  # a general exponent: the update is formed
], ids=["adagrad", "grad", "momentum", "vexp"])
def test_sparse_updates_follow_the_updater_formula_with_the_mixin_terms(make, monkeypatch):
    def mixins():
        return [L1Regularizer(l1=[0.0, 0.01, 0.02, 0.0, 0.03]), L2Regularizer(l2=0.05)]

    calls = []
    real = updaters.SparseUpdate.materialize
    monkeypatch.setattr(updaters.SparseUpdate, "materialize",
                        lambda self, U: calls.append(1) or real(self, U))
    start, sparse, lr = _sparse_run(make, True, mixins())
    formed = calls[:]
    _, dense, _ = _sparse_run(make, False, mixins())
    upd = lr.updater
    fused_path = upd.momentum.is_zero() and (
        not isinstance(upd, ADAGrad) or upd.vexp.scalar == 0.5)
    assert (len(formed) == 0) == fused_path  # the touched-rows step, or the update formed
    assert not np.array_equal(sparse.modelmats[0].data, start)

    def oracle(l1, l2):
        """The updater's formula on U = A.T @ X minus the L2 term, step by step, then
        L1's proximal step with each weight's step size."""
        w, ss, v = start.copy(), np.zeros_like(start), np.zeros_like(start)
        o = upd.opts
        lrate = np.broadcast_to(np.asarray(o.lrate, dtype=float).reshape(-1, 1), (5, 1))
        for t, (Xd, A) in enumerate(sparse.factors):
            u = A.T @ Xd - l2 * w
            step = lrate * (o.t0 / (o.t0 + t)) ** o.texp
            eta = step
            if isinstance(upd, ADAGrad):
                ss += u * u
                den = (ss / (t + 1)) ** o.vexp + o.epsilon
                u, eta = u / den, step / den
            v = o.momentum * v + step * u
            w += v
            w = np.sign(w) * np.maximum(np.abs(w) - eta * l1, 0.0)
        return w

    want = oracle(np.array([0.0, 0.01, 0.02, 0.0, 0.03])[:, None], 0.05)
    got, dense_got = sparse.modelmats[0].data, dense.modelmats[0].data
    if not fused_path:  # the formed update is the formula, step by step
        np.testing.assert_allclose(got, dense_got, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    else:  # terms of untouched rows deferred (bidlab.kern.touched): near the formula
        effect = np.abs(want - oracle(0.0, 0.0)).max()
        assert effect > 0.01 * np.abs(want).max()
        # the rows without L1: deferred L2 (strong here: 0.05) within 10 % of its effect
        l2_only = [0, 3]
        assert np.abs(got - want)[l2_only].max() < 0.1 * effect
        # with L1 too: its deferred shrinkage takes ADAGrad's step sizes at the gap's
        # middle, so the rows agree more loosely
        assert np.abs(got - want).max() < 0.2 * effect


def test_adagrad_keeps_sums_of_squares_that_zero_updates_leave_alone():
    start, model, lr = _sparse_run(lambda: ADAGrad(lrate=0.1), True)
    X = np.vstack([f[0] for f in model.factors])
    untouched = np.flatnonzero(np.abs(X).sum(0) == 0)
    assert untouched.size > 0
    ss = lr.updater.sumsq[0]
    np.testing.assert_array_equal(ss[:, untouched], 0.0)
    np.testing.assert_array_equal(model.modelmats[0].data[:, untouched], start[:, untouched])
    assert list(lr.updater.state()) == ["sumsq0"]


@pytest.mark.parametrize("make", [lambda: Batch(batch_mode="step", lrate=0.3),
                                  lambda: IncNorm(kappa=0.6)], ids=["batch", "incnorm"])
def test_updaters_without_a_sparse_step_form_the_update(make):
    _, sparse, lr = _sparse_run(make, True, [L2Regularizer(l2=0.05)])
    _, dense, _ = _sparse_run(make, False, [L2Regularizer(l2=0.05)])
    np.testing.assert_allclose(sparse.modelmats[0].data, dense.modelmats[0].data, rtol=1e-12)
    assert not sparse.rec.pending  # used once, and no reference to the minibatch kept
