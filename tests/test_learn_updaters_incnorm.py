"""IncNorm, the incremental moving average of online EM, against its formula.

``m <- (1 - r) m + r u`` with ``r = min(1, (t0 / (tau0 + t)) ** kappa) * step_weight``:
numpy oracles for scalar and per-matrix rates, a short minibatch's partial step, a model
that takes the step itself, and files that name its earlier options.
"""

from __future__ import annotations

import numpy as np
import pytest

import bidlab as bl
from bidlab.learn import IncNorm, Learner, Model, Option, Options
from bidlab.models import LDA
from bidlab.models.lda.core import RhoStep


class Stats(Model):
    """Two model matrices (2 x 3, 4 x 1); each update writes fixed non-negative statistics
    (seeded by the update's number) and asks for ``weight`` of a step."""

    def __init__(self, weight=1.0, **options):
        super().__init__(**options)
        self.weight = weight
        self.calls = 0

    def init(self, info):
        rng = np.random.default_rng(0)
        self.modelmats = [bl.Mat(rng.random((2, 3))), bl.Mat(rng.random((4, 1)))]
        self.updatemats = [bl.zeros((2, 3), np.float64), bl.zeros((4, 1), np.float64)]

    @staticmethod
    def stats(step):
        rng = np.random.default_rng(100 + step)
        return [np.abs(rng.standard_normal((2, 3))), np.abs(rng.standard_normal((4, 1)))]

    def update(self, batch):
        for u, d in zip(self.updatemats, self.stats(self.calls), strict=True):
            u.data[...] = d
        self.step_weight = self.weight
        self.calls += 1

    def evaluate(self, batch):
        return 0.0


class SelfBlending(Stats):
    """Takes the step itself (as LDA Gibbs's scaled counts do) and records each rate."""

    def __init__(self, **options):
        super().__init__(**options)
        self.rates = []

    def blend(self, rho):
        self.rates.append(rho)
        return True


def _run(model, updater, steps=6):
    lrn = Learner(model, np.zeros((steps, 1)), updater, batch_size=1, n_passes=1,
                  val_every=0)
    lrn.init()
    start = [m.data.copy() for m in model.modelmats]
    lrn.fit(progress=None)
    return start, [m.data for m in model.modelmats], lrn


def _oracle(start, steps, rate):
    w = [s.copy() for s in start]
    for t in range(1, steps + 1):
        for i, d in enumerate(Stats.stats(t - 1)):
            r = rate(i, t)
            w[i] = (1.0 - r) * w[i] + r * d
    return w


@pytest.mark.parametrize("kappa, tau0, t0, weight", [
    (0.7, 0.0, 1.0, 1.0),     # the defaults: the first update replaces the matrix
    (0.6, 1.5, 2.0, 1.0),     # a delay and a time scale
    (0.9, 8.0, 1.0, 0.25),    # online LDA's rho_t = (tau0 + t)^-kappa, a quarter step
])
def test_incnorm_blends_with_the_scheduled_rate(kappa, tau0, t0, weight):
    start, end, lrn = _run(Stats(weight=weight), IncNorm(kappa=kappa, tau0=tau0, t0=t0))
    want = _oracle(start, 6, lambda i, t: min(1.0, (t0 / (tau0 + t)) ** kappa) * weight)
    for a, b in zip(end, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert lrn.updater.t == 6
    assert lrn.updater.rate(3) == min(1.0, (t0 / (tau0 + 3)) ** kappa)


def test_incnorm_takes_a_rate_per_model_matrix():
    kappa, tau0 = [0.6, 0.95], [0.0, 4.0]
    start, end, _ = _run(Stats(), IncNorm(kappa=kappa, tau0=tau0))
    want = _oracle(start, 6, lambda i, t: min(1.0, (1.0 / (tau0[i] + t)) ** kappa[i]))
    for a, b in zip(end, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_a_model_that_blends_itself_gets_the_rate_and_its_matrices_stay():
    model = SelfBlending(weight=0.5)
    start, end, lrn = _run(model, IncNorm(kappa=0.8, tau0=2.0), steps=4)
    np.testing.assert_allclose(model.rates, [0.5 * (2.0 + t) ** -0.8 for t in range(1, 5)],
                               rtol=1e-12)
    for a, b in zip(end, start, strict=True):
        np.testing.assert_array_equal(a, b)
    lrn.set(kappa=[0.6, 0.7], n_passes=2)  # one rate per matrix: it cannot take those
    with pytest.raises(ValueError, match="single numbers"):
        lrn.fit(progress=None)


def test_kappa_outside_the_convergent_range_is_refused():
    with pytest.raises(ValueError, match=r"'kappa'.*\(0\.5, 1\]"):
        IncNorm(kappa=0.4)


def test_an_incnorm_saved_under_its_earlier_option_names_loads():
    old = Options([Option("power", float, 0.7, "decay exponent", owner="IncNorm"),
                   Option("t0", float, 1.0, "time offset", owner="IncNorm"),
                   Option("isprob", bool, False, "normalise", owner="IncNorm")])
    old.set(power=0.6, t0=3.0)
    up = IncNorm.__new__(IncNorm)
    up.__setstate__({**IncNorm().__dict__, "opts": old, "_given": {"power": 0.6}})
    assert up.opts.kappa == 0.6 and up.opts.t0 == 3.0 and up.opts.tau0 == 0.0
    assert "power" not in up.opts
    assert RhoStep is IncNorm  # LDA's former step updater is this one


def test_an_lda_estimator_keeps_its_schedule_in_incnorm():
    est = LDA(3, n_passes=1, batch_size=10, tau0=4.0, kappa=0.6, random_state=0)
    X = np.random.default_rng(0).poisson(0.5, (40, 20)).astype(np.float64)
    est.fit(X)
    assert type(est.updater_) is IncNorm
    assert (est.updater_.opts.tau0, est.updater_.opts.kappa, est.updater_.opts.t0) == (
        4.0, 0.6, 1.0)
    assert {s.name for s in LDA.PARAMS} >= {"tau0", "kappa"}
    assert not {s.name for s in LDA.PARAMS} & {"t0", "isprob"}
