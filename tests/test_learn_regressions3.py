"""The learner, its updaters, observers and TensorBoard files driven as a user would:
vector options whose values are all equal, a record size set between runs, an observer
callback that raises anything, and event files read back at once."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from bidlab.learn import ADAGrad, Grad, IncNorm, L1Regularizer, Learner
from bidlab.models.lsq import LeastSquares


def _data(n: int = 2000, targets: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 6))
    return X, X @ rng.standard_normal((6, targets))


@pytest.mark.parametrize("option", [{"kappa": [0.7, 0.7, 0.7]}, {"tau0": [1.0, 1.0]},
                                    {"t0": [2.0, 2.0, 2.0]}])
def test_incnorm_takes_a_vector_of_equal_values_as_that_number(option):
    (name, vector), = option.items()
    runs = []
    for value in (vector, vector[0]):
        lrn = Learner(LeastSquares(), _data(), IncNorm(**{name: value}), batch_size=100,
                      n_passes=2)
        lrn.fit(progress=None)
        runs.append(lrn.model.modelmats[0].numpy().copy())
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-12)
    assert IncNorm(**{name: vector}).rate(3) == IncNorm(**{name: vector[0]}).rate(3)


@pytest.mark.parametrize("make, fix", [
    (lambda: (Grad(lrate=[0.1] * 7), []), {"lrate": 0.01}),
    (lambda: (ADAGrad(vexp=[0.5] * 4), []), {"vexp": 0.5}),
    (lambda: (Grad(lrate=0.01), [L1Regularizer(l1=[0.1] * 5)]), {"l1": 0.01}),
    (lambda: (IncNorm(kappa=[0.7] * 5), []), {"kappa": 0.7}),
])
def test_a_vector_of_the_wrong_length_set_right_then_trains(make, fix):
    updater, mixins = make()
    lrn = Learner(LeastSquares(), _data(), updater, mixins, batch_size=100, n_passes=1)
    with pytest.raises(ValueError, match="values, but the model matrices have 3, 3 rows"):
        lrn.fit(progress=None)
    assert lrn.state == "failed"
    lrn.set(**fix)
    lrn.fit(progress=None)
    assert lrn.state == "done" and lrn.step == 20


def test_record_size_set_between_runs_sizes_the_record():
    lrn = Learner(LeastSquares(), _data(), batch_size=100, n_passes=2)
    lrn.set(record_size=5)
    lrn.fit(progress=None)
    rec = lrn.history()
    assert lrn.record.capacity == 5 and len(rec["step"]) == 5
    assert rec["step"].tolist() == list(range(lrn.step - 5, lrn.step))  # the newest kept
    lrn.set(record_size=8, n_passes=3)
    lrn.fit(progress=None)
    assert lrn.record.capacity == 8
    assert lrn.history()["step"].tolist() == list(range(lrn.step - 8, lrn.step))
    assert lrn.record.total == lrn.step


@pytest.mark.parametrize("error", [SystemExit, KeyboardInterrupt])
def test_an_observer_raising_any_exception_does_not_silence_the_others(error):
    lrn = Learner(LeastSquares(), _data(), batch_size=100, n_passes=3)

    def broken(snapshot):
        raise error

    states: list[str] = []
    bad = lrn.observe(broken, rate=1000)
    lrn.observe(lambda s: states.append(s.state), rate=1000)
    lrn.fit(progress=None)
    assert lrn.observers.wait_idle(10)
    assert states and states[-1] == "done"
    assert bad.errors and isinstance(bad.errors[-1], error)


def _snap(step: int, **metrics: float) -> SimpleNamespace:
    return SimpleNamespace(step=step, metrics=metrics, state="running")


def test_tensorboard_flush_puts_every_scalar_on_disk(tmp_path):
    pytest.importorskip("tensorboardX", reason="the tensorboard extra is not installed")
    from bidlab.learn.tensorboard_writer import TensorBoardWriter, read_scalars

    writer = TensorBoardWriter(tmp_path, flush_secs=60)
    for step in range(200):
        writer(_snap(step, train_score=float(step)))
    writer.flush()
    got = read_scalars(tmp_path)["score/train"]
    assert got == [(s, float(s)) for s in range(200)]
    writer.close()


def test_two_tensorboard_writers_on_one_folder_keep_both_runs(tmp_path):
    pytest.importorskip("tensorboardX", reason="the tensorboard extra is not installed")
    from bidlab.learn.tensorboard_writer import TensorBoardWriter, read_scalars

    first, second = TensorBoardWriter(tmp_path), TensorBoardWriter(tmp_path)
    for step in range(5):
        first(_snap(step, train_score=1.0))
        second(_snap(step, val_score=2.0))
    first.close()
    second.close()
    got = read_scalars(tmp_path)
    assert len(got["score/train"]) == 5 and len(got["score/val"]) == 5
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2


def test_nan_in_the_data_is_named_as_a_cause_of_a_nan_model():
    X, Y = _data()
    X[5, 3] = np.nan
    lrn = Learner(LeastSquares(), (X, Y), Grad(lrate=0.01), batch_size=100, n_passes=1)
    with pytest.raises(ArithmeticError, match="NaN or inf in the data does this"):
        lrn.fit(progress=None)


@pytest.mark.parametrize("rate", [np.float32(50.0), np.int64(50)])
def test_an_observer_rate_may_be_a_numpy_number(rate):
    lrn = Learner(LeastSquares(), _data(), batch_size=100, n_passes=1)
    sub = lrn.observe(lambda s: None, rate=rate)
    assert sub.rate == 50.0
    sub.cancel()


@pytest.mark.parametrize("rate", [0, -1.0, float("nan"), True, "10"])
def test_an_observer_rate_that_is_no_positive_number_is_refused(rate):
    lrn = Learner(LeastSquares(), _data(), batch_size=100, n_passes=1)
    with pytest.raises(ValueError, match="'rate' of an observer must be a float > 0"):
        lrn.observe(lambda s: None, rate=rate)
