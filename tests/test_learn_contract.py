"""The model-learner contract: declared hooks and their defaults, an updater per model
matrix with declared statistics, and full-batch models."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from scripted_stats import ScriptedStatsSteps

import bidlab as bl
from bidlab.learn import CG, Batch, Grad, IncMult, L2Regularizer, Learner, Model, PerMatrix


class Bare(Model):
    """Declares nothing optional."""

    def init(self, info):
        self.modelmats = [bl.zeros((2, 2), np.float64)]
        self.updatemats = [bl.zeros((2, 2), np.float64)]

    def update(self, batch):
        self.updatemats[0].data[...] = 1.0

    def evaluate(self, batch):
        return 0.0


def test_optional_hooks_have_declared_defaults():
    m = Bare()
    assert m.sparse_updates is None and m.step_weight == 1.0 and m.full_batch is False
    assert m.blend(0.5) is False and m.mat_names == ()
    assert isinstance(m.default_updater(), Grad)
    assert m.default_updater(lrate=0.5).opts.lrate == 0.5
    lr = Learner(m, np.zeros((3, 1)), batch_size=1, n_passes=1, val_every=0)
    assert isinstance(lr.updater, Grad)  # the model's default updater
    lr.fit(progress=None)
    np.testing.assert_allclose(m.modelmats[0].data, 0.3)  # 3 steps of 0.1 * 1


HOOKS = {"sparse_updates", "blend", "step_weight", "default_updater", "make_updater",
         "_updater", "full_batch"}


def test_no_hook_is_probed_with_getattr():
    """The hooks are declared on Model: nothing in bidlab looks them up by name."""
    found = []
    for path in sorted((Path(__file__).resolve().parent.parent / "bidlab").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value in HOOKS):
                found.append(f"{path.name}:{node.lineno}")
    assert not found


class TwoFactors(ScriptedStatsSteps, Model):
    """W (4 x 3) moved multiplicatively, H (2 x 3) by CG on ``x_r A = b_r``: matrices of
    different row counts, each with its own statistics."""

    SHAPE = (4, 3)
    SEED = 0

    mat_names = ("W", "H")

    def __init__(self, A, B, mapping=None, **options):
        super().__init__(**options)
        self.A, self.B, self.mapping = A, B, mapping
        self.calls = 0

    def default_updater(self, **options):
        return self.mapping if self.mapping is not None else super().default_updater()

    def init(self, info):
        self.modelmats = [bl.Mat(np.ones((4, 3))), bl.zeros((2, 3), np.float64)]
        self.updatemats = [{"num": bl.zeros((4, 3), np.float64),
                            "den": bl.zeros((4, 3), np.float64)},
                           {"rhs": bl.Mat(self.B.copy()), "gram": bl.Mat(self.A.copy())}]


def _system():
    rng = np.random.default_rng(1)
    Q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    return (Q * np.array([1.0, 2.0, 4.0])) @ Q.T, rng.standard_normal((2, 3))


def _check_two_factors(model, steps):
    A, B = model.A, model.B
    m, N, D = np.ones((4, 3)), np.zeros((4, 3)), np.zeros((4, 3))
    for t in range(1, steps + 1):
        r = min(1.0, (1.0 / t) ** 0.3)
        num, den = TwoFactors.stats(t - 1)
        N, D = (1 - r) * N + r * num, (1 - r) * D + r * den
        m = m * N / D
    np.testing.assert_allclose(model.modelmats[0].data, m, rtol=1e-12)
    np.testing.assert_allclose(model.modelmats[1].data, np.linalg.solve(A, B.T).T, rtol=1e-9)


@pytest.mark.parametrize("keys", [("W", "H"), (0, 1), ("0", "H")])
def test_each_model_matrix_gets_its_own_updater(keys):
    A, B = _system()
    model = TwoFactors(A, B)
    ups = {keys[0]: IncMult(), keys[1]: CG(steps=3)}
    lr = Learner(model, np.zeros((5, 1)), ups, batch_size=1, n_passes=1, val_every=0)
    assert isinstance(lr.updater, PerMatrix)
    lr.fit(progress=None)
    _check_two_factors(model, 5)


def test_a_model_declares_its_per_matrix_updaters():
    A, B = _system()
    model = TwoFactors(A, B, mapping={"W": IncMult(), "H": CG(steps=3)})
    lr = Learner(model, np.zeros((5, 1)), batch_size=1, n_passes=1, val_every=0)
    assert isinstance(lr.updater, PerMatrix)
    lr.fit(progress=None)
    _check_two_factors(model, 5)


def test_per_matrix_checkpoint_round_trip(tmp_path):
    A, B = _system()
    path = str(tmp_path / "two.ckpt")
    model = TwoFactors(A, B)
    lr = Learner(model, np.zeros((5, 1)), {"W": IncMult(), "H": CG(steps=1)}, batch_size=1,
                 n_passes=1, val_every=0, max_steps=3, checkpoint=path)
    lr.fit(progress=None)
    saved = [m.data.copy() for m in model.modelmats]
    again = TwoFactors(A, B)
    lr2 = Learner(again, np.zeros((5, 1)), {"W": IncMult(), "H": CG(steps=1)}, batch_size=1,
                  n_passes=1, val_every=0)
    lr2.load(path)
    w = lr2.updater.updaters["W"]
    assert w.t == 3 and lr2.updater.t == 3
    np.testing.assert_array_equal(w.num[0], lr.updater.updaters["W"].num[0])
    for a, b in zip(again.modelmats, saved, strict=True):
        np.testing.assert_array_equal(a.data, b)


@pytest.mark.parametrize(("ups", "match"), [
    ({"W": IncMult(), "Z": CG()}, r"no model matrix 'Z': its model matrices are \['W', 'H'\]"),
    ({"W": IncMult()}, r"no updater for the model matrices \['H'\]"),
    ({"W": Grad(), "H": CG()}, r"Grad reads one update matrix of shape \(4, 3\).*got a dict"),
    ({"W": CG(), "H": CG()}, r"CG reads the statistics \['rhs'\].*missing \['rhs'\]"),
    ({"W": IncMult(), "H": IncMult()}, r"missing \['num', 'den'\]"),
])
def test_a_declaration_that_is_not_met_is_named(ups, match):
    A, B = _system()
    lr = Learner(TwoFactors(A, B), np.zeros((2, 1)), ups, batch_size=1, n_passes=1,
                 val_every=0)
    with pytest.raises(ValueError, match=match):
        lr.init()


def test_cg_without_its_system_matrix_is_named():
    A, B = _system()
    model = TwoFactors(A, B)
    lr = Learner(model, np.zeros((2, 1)), {"W": IncMult(), "H": CG()}, batch_size=1,
                 n_passes=1, val_every=0)
    model.init_from(lr.source.info)
    del model.updatemats[1]["gram"]
    with pytest.raises(ValueError, match="must also hold 'gram'.*or 'matvec'"):
        lr.init()


def test_bad_updater_arguments():
    with pytest.raises(TypeError, match="must be a bidlab.learn.Updater or a mapping"):
        Learner(Bare(), np.zeros((2, 1)), "grad")
    one = Grad()
    with pytest.raises(ValueError, match="an updater object of its own"):
        PerMatrix({"W": one, "H": one})
    with pytest.raises(TypeError, match="updater of model matrix 'W' must be"):
        PerMatrix({"W": "grad"})


class WholePass(Model):
    """Full-batch: keeps its own pass sums and writes the totals at the last block; the
    other blocks leave NaN in the update matrix, which the updater must never read."""

    full_batch = True

    def init(self, info):
        self.modelmats = [bl.zeros((1, 2), np.float64)]
        self.updatemats = [bl.zeros((1, 2), np.float64)]
        self.seen = []

    def start_pass(self, pass_):
        self.total = np.zeros((1, 2))

    def update(self, batch):
        self.seen.append(batch.index)
        self.total += np.asarray(batch.mats[0].data).sum(axis=0)
        self.updatemats[0].data[...] = self.total if batch.last else np.nan

    def evaluate(self, batch):
        raise AssertionError("a full-batch model holds out no block")


def test_a_full_batch_model_loses_no_block_and_batch_reads_only_its_totals():
    X = np.arange(24, dtype=np.float64).reshape(12, 2)
    model = WholePass()
    lr = Learner(model, X, Batch(), batch_size=1, n_passes=2)  # val_every's default is 11
    assert lr.opts.val_every == 0
    lr.fit(progress=None)
    assert model.seen == list(range(12)) * 2
    np.testing.assert_array_equal(model.modelmats[0].data, X.sum(axis=0, keepdims=True))
    assert lr.updater.state() == {}  # no sums of its own
    with pytest.raises(ValueError, match="full-batch.*val_every must stay 0"):
        lr.set(val_every=3)
    with pytest.raises(ValueError, match="full-batch.*val_every must stay 0"):
        Learner(WholePass(), X, Batch(), batch_size=1, val_every=3)


def test_a_mixin_on_named_statistics_is_refused():
    A, B = _system()
    lr = Learner(TwoFactors(A, B), np.zeros((2, 1)), {"W": IncMult(), "H": CG()},
                 [L2Regularizer(mats=[1])], batch_size=1, n_passes=1, val_every=0)
    with pytest.raises(ValueError, match=r"updatemats\[1\] hold named statistics"):
        lr.init()
