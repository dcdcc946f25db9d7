"""Options: one declared table, one validation path, one message shape."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.learn import ADAGrad, Grad, L2Regularizer, Learner, Option, Options
from bidlab.learn.options import OptionError
from bidlab.models.lsq import LeastSquares


def _learner(**kw):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4)).astype(np.float32)
    y = X @ np.arange(4, dtype=np.float32)
    return Learner(LeastSquares(), (X, y), Grad(), [L2Regularizer()], batch_size=50, **kw)


def test_bad_lrate_message_names_option_range_and_value():
    lr = _learner()
    with pytest.raises(OptionError) as ei:
        lr.opts.lrate = -1
    msg = str(ei.value)
    assert msg.startswith("The 'lrate' parameter of Grad must be a float > 0")
    assert "vector" in msg and "Got -1 instead." in msg
    assert lr.opts.lrate == 0.1  # unchanged


@pytest.mark.parametrize(
    "name, value, fragment",
    [
        ("n_passes", 0, "an int in [1, 1000000000]. Got 0"),
        ("n_passes", 2.5, "an int in [1, 1000000000]. Got 2.5"),
        ("n_passes", "3", "an int in [1, 1000000000]. Got '3'"),
        ("n_passes", 10**18, "an int in [1, 1000000000]. Got 1000000000000000000"),
        ("val_every", True, "an int >= 0. Got True"),
        ("momentum", 1.0,
         "a float in [0, 1) (or a per-row / per-model-matrix vector of such). Got 1 instead"),
        ("lrate", float("nan"), "Got nan"),
        ("lrate", [0.1, -0.2], "Got [0.1, -0.2]"),
        ("l2", "big", "a float >= 0"),
        ("checkpoint", 3, "a string or None. Got 3"),
    ],
)
def test_each_bad_value_raises_in_callers_thread(name, value, fragment):
    lr = _learner()
    with pytest.raises(OptionError, match=f"The '{name}' parameter of") as ei:
        lr.set(**{name: value})
    assert fragment in str(ei.value)


def test_set_is_all_or_nothing_and_versions_count():
    lr = _learner()
    v0 = lr.opts.version
    with pytest.raises(OptionError):
        lr.set(lrate=0.5, n_passes=-3)
    assert lr.opts.lrate == 0.1 and lr.opts.version == v0
    v = lr.set(lrate=0.5, n_passes=3)
    assert v == v0 + 1 and lr.opts.lrate == 0.5 and lr.opts.n_passes == 3
    assert lr.opts.value_at("lrate", v0) == 0.1 and lr.opts.value_at("lrate", v) == 0.5


def test_values_read_as_attributes_follow_every_set_and_survive_pickling():
    import pickle

    opts = Options([Option("rate", float, 0.1, "a rate", low=0.0),
                    Option("get", int, 3, "named like a method")])
    assert opts.rate == 0.1 and opts.get("rate") == 0.1
    opts.rate = 0.2
    opts.set(rate=0.3, get=4)
    assert opts.rate == 0.3 and opts.get("rate") == 0.3 and opts.as_dict()["get"] == 4
    assert callable(opts.get)  # an option's value never hides a method
    with pytest.raises(OptionError):
        opts.set(rate=0.5, get=-1.5)  # all or nothing: the attribute keeps its value too
    assert opts.rate == 0.3
    back = pickle.loads(pickle.dumps(opts))
    assert "rate" not in opts.__getstate__()  # values travel once, in their table
    back.rate = 0.7
    assert back.rate == 0.7 and back.as_dict()["get"] == 4 and opts.rate == 0.3


def test_unknown_option_suggests_close_names():
    lr = _learner()
    with pytest.raises(OptionError, match="unknown option 'lrat'. Did you mean 'lrate'"):
        lr.set(lrat=0.1)
    with pytest.raises(OptionError, match="unknown option"):
        Learner(LeastSquares(), np.ones((10, 2)), Grad(), batch_size=5, nosuch=1)
    with pytest.raises(AttributeError, match="unknown option 'nope'"):
        _ = lr.opts.nope


def test_vector_hyperparameters_check_lengths_against_the_model():
    lr = _learner()
    lr.init()  # W is 1 x 4, b is 1 x 1; two model matrices
    lr.set(lrate=[0.1, 0.2])  # one per model matrix
    lr.set(lrate=[0.3])  # one value: a scalar
    assert lr.opts.lrate == 0.3
    with pytest.raises(OptionError, match="vector length among 1, 2"):
        lr.set(lrate=[0.1, 0.2, 0.3])


def test_component_constructor_validates_and_what_prints_flat():
    with pytest.raises(OptionError, match="The 'vexp' parameter of ADAGrad must be a float >= 0"):
        ADAGrad(vexp=-1)
    lr = _learner(n_passes=4)
    text = lr.opts.what()
    lines = text.splitlines()
    assert any(line.startswith("n_passes") and "= 4" in line for line in lines)
    assert any(line.startswith("l2 ") and "L2Regularizer" in line for line in lines)
    assert len(lines) == len(lr.opts.specs)


def test_non_live_option_refused_while_running():
    opts = Options([Option("a", int, 1, "doc", live=False, owner="X"),
                    Option("b", float, 1.0, "doc", owner="X"),
                    Option("c", int, 1, "doc", live=False, owner="Learner")])
    opts.set_running(True)
    with pytest.raises(OptionError, match="The 'a' parameter of X is fixed once the model"):
        opts.a = 2
    with pytest.raises(OptionError, match="The 'c' parameter of Learner cannot change while "
                       "training runs.*stop"):
        opts.c = 2
    opts.b = 2.0
    opts.a = 1  # the value it has
    assert opts.take_changes() == (2, {"b": 2.0, "a": 1})
    assert opts.take_changes() == (2, {})


def test_a_built_models_fixed_options_keep_their_values_when_stopped():
    """Stopped, a learner still refuses a new number of factors: its matrices were made
    with the old one (a new value used to be taken and left the model inconsistent)."""
    import scipy.sparse as sp

    from bidlab.models import SFA

    R = sp.random(60, 40, density=0.2, random_state=0, format="csr")
    R.data = np.ceil(R.data * 5)
    R = R[np.diff(R.indptr) > 0].tocsr()
    est = SFA(4, random_state=0, max_iter=2)
    lrn = est.learner(R)
    lrn.fit(progress=None)
    before = est.predict([0, 1], [2, 3])
    for change in ({"k": 7}, {"feedback": "implicit"}):
        with pytest.raises(OptionError, match="fixed once the model is built.*new learner"):
            lrn.set(**change)
    lrn.set(k=4, l2=0.5)  # the same k, and a live option
    np.testing.assert_array_equal(est.predict([0, 1], [2, 3]), before)
    assert est.user_factors_.shape == (R.shape[0], 4)
    lrn.set(n_passes=3)
    lrn.fit(progress=None)
    assert est.n_iter_ == 3


def test_parse_from_command_line_text():
    spec = Option("lrate", float, 0.1, "doc", low=0, low_open=True, vector=True, owner="Grad")
    assert spec.parse("0.5") == 0.5
    assert spec.parse("0.1,0.2") == (0.1, 0.2)
    with pytest.raises(OptionError, match="Got 'abc' instead"):
        spec.parse("abc")
    flag = Option("isprob", bool, False, "doc", owner="IncNorm")
    assert flag.parse("yes") is True and flag.parse("0") is False
