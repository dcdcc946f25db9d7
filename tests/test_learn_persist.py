"""Whole objects in the safe format, pickling of the spine, and fit in the calling thread."""

from __future__ import annotations

import json
import pickle
import threading

import numpy as np
import pytest
import scipy.sparse as sp

import bidlab as bl
from bidlab.learn import ADAGrad, Grad, L2Regularizer, Learner, MemorySource
from bidlab.learn.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from bidlab.learn.persist import load_object, save_object
from bidlab.models.lsq import LeastSquares


def _trained(**opts):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 6)).astype(np.float32)
    Y = (X @ rng.standard_normal((6, 2))).astype(np.float32)
    lr = Learner(LeastSquares(), MemorySource(X, Y, batch_size=50, shuffle=True, seed=1),
                 ADAGrad(lrate=0.05), [L2Regularizer(l2=1e-3)], n_passes=2, **opts)
    lr.fit(progress=None)
    return lr


def test_model_updater_and_mixins_pickle_with_shared_references():
    lr = _trained()
    model, upd, mx = pickle.loads(pickle.dumps((lr.model, lr.updater, lr.mixins[0])))
    for a, b in zip(lr.model.modelmats, model.modelmats, strict=True):
        np.testing.assert_array_equal(a.data, b.data)
        assert a.guid != b.guid  # a fresh GUID in the new process/cache
    assert upd.model is model and mx.model is model
    assert upd.xp is np and upd.opts is model.opts
    np.testing.assert_array_equal(upd.sumsq[0], lr.updater.sumsq[0])
    # the unpickled options still validate and take changes
    with pytest.raises(ValueError, match="The 'lrate' parameter of ADAGrad must be a float > 0"):
        model.opts.lrate = -1
    model.opts.lrate = 0.2
    assert model.opts.take_changes()[1] == {"lrate": 0.2}


def test_save_object_round_trip(tmp_path):
    lr = _trained()
    csr = sp.random(5, 7, density=0.4, format="csr", random_state=0, dtype=np.float32)
    tree = {
        "model": lr.model, "updater": lr.updater, "csr": csr, "smat": bl.SMat(csr),
        "names": np.array(["a", "bb"]), "dtype": np.float64, "t": (1, 2.5, None, "x"),
        "nan": float("nan"), "ints": {3: "three"}, "set": {1, 2},
        "rng": np.random.default_rng(7), "scalar": np.float32(1.5),
    }
    path = save_object(tmp_path / "obj.npz", tree)
    back = load_object(path)
    np.testing.assert_array_equal(back["model"].modelmats[0].data, lr.model.modelmats[0].data)
    assert back["updater"].model is back["model"]
    assert (back["csr"] != csr).nnz == 0 and isinstance(back["smat"], bl.SMat)
    assert back["names"].tolist() == ["a", "bb"] and back["dtype"] is np.float64
    assert back["t"] == (1, 2.5, None, "x") and np.isnan(back["nan"])
    assert back["ints"] == {3: "three"} and back["set"] == {1, 2}
    assert back["rng"].random() == np.random.default_rng(7).random()
    assert back["scalar"] == np.float32(1.5) and back["scalar"].dtype == np.float32


def test_unsaveable_values_are_refused_with_their_path(tmp_path):
    with pytest.raises(TypeError, match=r"cannot save dict.f.*function"):
        save_object(tmp_path / "x.npz", {"f": lambda: 1})
    with pytest.raises(TypeError, match=r"list\[0\].*_thread.lock"):
        save_object(tmp_path / "x.npz", [threading.Lock()])


def _crafted(tmp_path, root):
    path = tmp_path / "crafted.npz"
    save_checkpoint(path, {}, {"kind": "bidlab-object", "root": root})
    return path


@pytest.mark.parametrize("root, fragment", [
    ({"$obj": "os.system", "id": 0, "state": {"$dict": {}}}, "unknown class"),
    ({"$obj": "subprocess.Popen", "id": 0, "state": "ls"}, "unknown class"),
    ({"$array": "a/0"}, "missing array"),
    ({"$dtype": "O"}, "not allowed"),
    ({"$generator": {"$dict": {"bit_generator": "os"}}}, "unknown bit generator"),
    ({"$type": "eval"}, "unknown type name"),
    ({"$ref": 5}, "unknown object"),
    ({"$csr": ["a/0"], "shape": [2, 2]}, "missing array"),
    ({"$nope": 1}, "unknown tag"),
])
def test_crafted_files_fail_cleanly_and_run_nothing(tmp_path, root, fragment):
    with pytest.raises(CheckpointError, match=fragment):
        load_object(_crafted(tmp_path, root))


def test_a_learner_checkpoint_is_not_an_object(tmp_path):
    lr = _trained()
    path = lr.save(str(tmp_path / "ck.npz"))
    with pytest.raises(CheckpointError, match="not a saved model"):
        load_object(path)
    meta = load_checkpoint(path).meta
    json.dumps(meta)  # plain JSON


def test_fit_runs_in_the_calling_thread_and_background_in_its_own():
    seen = []

    class Spy(LeastSquares):
        def update(self, batch):
            seen.append(threading.current_thread())
            return super().update(batch)

    X = np.random.default_rng(0).standard_normal((200, 3)).astype(np.float32)
    lr = Learner(Spy(), (X, X[:, :1]), Grad(), batch_size=50, n_passes=1)
    lr.fit(progress=None)
    assert seen and all(t is threading.current_thread() for t in seen)
    assert lr.state == "done" and lr.stop() == "done" and lr.join(0.1)
    seen.clear()
    lr.opts.n_passes = 2
    lr.fit(progress=None, background=True)
    assert seen and all(t is not threading.current_thread() for t in seen)
    assert lr.state == "done"


def test_fit_in_calling_thread_can_be_stopped_from_another_thread():
    X = np.random.default_rng(0).standard_normal((2000, 3)).astype(np.float32)
    lr = Learner(LeastSquares(), (X, X[:, :1]), Grad(), batch_size=10, n_passes=10_000)
    timer = threading.Timer(0.3, lr.stop)
    timer.start()
    lr.fit(progress=None)
    timer.join()
    assert lr.state == "stopped" and 0 < lr.step


def test_failure_in_calling_thread_fit_is_raised():
    class Broken(LeastSquares):
        def update(self, batch):
            raise ArithmeticError("boom")

    X = np.ones((100, 2), np.float32)
    lr = Learner(Broken(), (X, X[:, :1]), Grad(), batch_size=50, n_passes=1)
    with pytest.raises(ArithmeticError, match="boom"):
        lr.fit(progress=None)
    assert lr.state == "failed"


def test_a_new_learner_on_a_used_model_keeps_model_options_not_learner_options():
    X = np.random.default_rng(0).standard_normal((200, 3)).astype(np.float32)
    model, upd = LeastSquares(), Grad(lrate=0.05)
    first = Learner(model, (X, X[:, :1]), upd, batch_size=50, n_passes=1, max_steps=2)
    first.fit(progress=None)
    first.set(lrate=0.2)
    second = Learner(model, (X, X[:, :1]), upd, batch_size=50)
    assert second.opts.max_steps is None and second.opts.n_passes == 10
    assert second.opts.lrate == 0.2
