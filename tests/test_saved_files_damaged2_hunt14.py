"""Saved NMF, SFA, PageRank and BayesNet estimators, and learner checkpoints of NMF, SFA,
PageRank, BayesNet and k-means, edited so their counters, options, attributes or numbers
contradict the rest: each is refused at load with a CheckpointError naming the file and
what is wrong -- never loaded to fail later (AttributeError, IndexError, a kernel's error)
or to answer, or train on, with nonsense."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import scipy.sparse as sp
from saved_file_edits import array as _array
from saved_file_edits import assert_refused
from saved_file_edits import drop as _drop
from saved_file_edits import node as _node
from saved_file_edits import set_value as _set

from bidlab.learn.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from bidlab.models import NMF, SFA, BayesNet, KMeans, PageRank, load
from bidlab.models.bayesnet import Network

X = np.random.default_rng(0).random((40, 6))
R = sp.random(50, 40, density=0.2, random_state=0, format="csr")
R.data = np.ceil(R.data * 5)
A = sp.csr_matrix(([1.0, 1.0, 1.0, 1.0], ([0, 1, 2, 3], [1, 2, 0, 0])), shape=(4, 4))
G = sp.random(30, 30, density=0.1, random_state=1, format="csr")
NET = Network(["rain", "wet"], [["no", "yes"], ["no", "yes"]], [[], [0]],
              [np.array([[0.8, 0.2]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
ROWS = np.array([[0, 1], [1, 1], [0, 0], [1, 0]] * 5, float)


# -- saved estimators ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    NMF(n_components=2, max_iter=5, random_state=0).fit(X).save(folder / "nmf.npz")
    SFA(4, max_iter=2, random_state=0).fit(R).save(folder / "sfa.npz")
    PageRank().fit(A).save(folder / "pr.npz")
    bn = BayesNet(NET, n_chains=20, n_samples=20, random_state=0)
    bn.infer({"wet": "yes"})
    bn.save(folder / "bn.npz")
    return folder


def _train_shape(shape):
    def edit(root, arrays):
        _node(root, "train_")["shape"] = shape
    return edit


COUNT = "where a count \\(a whole number from 0 to 2\\*\\*53 - 1\\) belongs"
CASES = [
    # counters: negative, huge or not whole
    ("nmf.npz", _set("model_.n_passes_done", -4), f"NMF.model_.n_passes_done: -4 {COUNT}"),
    ("nmf.npz", _set("model_.n_passes_done", 10**18), "NMF.model_.n_passes_done: 1000000"),
    ("nmf.npz", _set("model_.n_passes_done", "3"), f"NMF.model_.n_passes_done: '3' {COUNT}"),
    ("nmf.npz", _set("model_.n_passes_done", 2), "n_passes_done: 2, but the model's errors"),
    ("sfa.npz", _set("model_.n_passes_done", -1), "SFA.model_.n_passes_done: -1"),
    ("pr.npz", _set("model_.n_iter", -5), f"PageRank.model_.n_iter: -5 {COUNT}"),
    ("pr.npz", _set("model_.n_iter", 101), "PageRank.model_.n_iter: 101, but the model "
     r"records the changes of \d+ iterations"),
    # attributes a fitted estimator uses, missing
    ("nmf.npz", _drop("updater_"), "NMF.updater_: missing, which every fitted NMF holds"),
    ("sfa.npz", _drop("updater_"), "SFA.updater_: missing"),
    ("sfa.npz", _drop("train_"), "SFA.train_: missing"),
    ("sfa.npz", _drop("model_.W_values"), "SFA.model_.W: missing"),
    ("pr.npz", _drop("model_.residuals"), "PageRank.model_.residuals: missing"),
    # NMF: statistics (a table of named matrices) and the updater's row; dtype; options
    ("nmf.npz", _array("model_.updatemats.0.num", lambda a: a[:, :3]),
     r"NMF.model_.updatemats.0.num: has shape \(2, 3\), but NMF.n_features_in_ = 6"),
    ("nmf.npz", _array("model_.updatemats.0.gram", lambda a: a[:1]),
     r"NMF.model_.updatemats.0.gram: has shape \(1, 2\), but NMF.model_.opts.k = 2"),
    ("nmf.npz", _array("updater_._row.0", lambda a: a[:, :3]),
     r"NMF.updater_._row.0: has shape \(1, 3\)"),
    ("nmf.npz", _set("model_.dtype", {"$dtype": "<i8"}), "NMF.model_.dtype: 'int64', where "),
    ("nmf.npz", _set("model_.opts._values.loss", "kl"),
     "NMF.model_.opts.loss: 'kl', but the estimator's loss is 'frobenius'"),
    ("nmf.npz", _set("model_.opts._values.solver", "mu"),
     "NMF.updater_: a BatchCD, but a model with solver='mu'"),
    ("nmf.npz", _set("model_.w_start", {"$float": "nan"}), "NMF.model_.w_start: holds NaN"),
    # SFA: users and items counted, ratings of that shape, factors of the model's width
    ("sfa.npz", _set("n_users_", -1), "SFA.n_users_: -1"),
    ("sfa.npz", _train_shape([50, 41]),
     r"SFA.train_: has shape \(50, 41\), but SFA.n_items_ = 40"),
    ("sfa.npz", _set("model_.opts._values.k", 5),
     r"SFA.model_.opts.k: 5 with feedback='explicit' \(6 numbers per item\), but the "
     "factors hold 5"),
    ("sfa.npz", _set("model_.opts._values.feedback", "implicit"),
     "SFA.model_.opts.k: 4 with feedback='implicit'"),
    # PageRank: teleport and dangling weights per vertex, the changes measured
    ("pr.npz", _array("model_.personalization", lambda a: a[:3]),
     r"PageRank.model_.personalization: has shape \(3,\), but PageRank.model_.n = 4"),
    ("pr.npz", _array("model_.dangling", lambda a: a * np.nan),
     "PageRank.model_.dangling: holds NaN"),
    ("pr.npz", _array("model_.residuals", lambda a: -a),
     "PageRank.model_.residuals: the changes of the iterations run hold NaN"),
    # BayesNet: a marginal per variable and per state; the model's arrays
    ("bn.npz", lambda root, arrays: _node(root, "marginals_").pop(),
     "BayesNet.marginals_: 1 marginals, but the network has 2 variables"),
    ("bn.npz", _array("marginals_.0", lambda a: a[:1]),
     r"BayesNet.marginals_.0: has shape \(1,\), but variable 0 has 2 states"),
    ("bn.npz", _array("model_._off", lambda a: a[::-1]), "BayesNet.model_._off: offsets"),
    ("bn.npz", _array("model_.temp", lambda a: a * 0), "BayesNet.model_.temp: temperatures"),
    ("bn.npz", _array("model_._counts", lambda a: a[:4]), r"BayesNet.model_._counts: has"),
    ("bn.npz", _array("model_._seen", lambda a: a[:4]),
     r"BayesNet.model_._seen: has shape \(4,\), but BayesNet.model_.info.n_samples = 20"),
    ("bn.npz", _set("model_._where.pass", -3), "BayesNet.model_._where.pass: -3"),
]


@pytest.mark.parametrize("name, change, fragment", CASES,
                         ids=[f"{c[0][:-4]}-{c[2][:45]}" for c in CASES])
def test_a_crafted_saved_estimator_is_refused_naming_file_and_field(
        saved, tmp_path, name, change, fragment):
    assert_refused(saved, tmp_path, name, change, fragment)


def test_estimators_of_every_kind_still_save_and_load(tmp_path):
    def again(est):
        est.save(tmp_path / "e.npz")
        return load(tmp_path / "e.npz")

    for kw in ({}, {"solver": "mu"}, {"loss": "kl"}, {"method": "online", "batch_size": 10},
               {"dtype": np.float32}):
        again(NMF(2, max_iter=3, random_state=0, **kw).fit(X)).partial_fit(X)
    again(NMF(2, random_state=0).partial_fit(X)).partial_fit(X)
    for kw in ({}, {"feedback": "implicit"}, {"dtype": np.float32}):
        sfa = again(SFA(4, max_iter=2, random_state=0, **kw).fit(R))
        sfa.partial_fit_users(R[:3])
        assert again(sfa).recommend(0, n=3)[0].shape == (3,)
    for kw in ({}, {"method": "power"}, {"max_iter": 3}):
        assert again(PageRank(**kw).fit(G)).residuals_.ndim == 1
    bn = BayesNet(NET, n_passes=3, random_state=0).fit(ROWS)
    bn.set_temperature(2.0, "wet")
    bn = again(bn)
    bn.infer({"wet": "yes"})
    assert set(again(bn).marginal("rain")) == {"no", "yes"}


# -- learner checkpoints ------------------------------------------------------------------
LEARNERS = {
    "nmf": lambda: NMF(2, random_state=0).learner(X, n_passes=3),
    "nmf-online": lambda: NMF(2, random_state=0, method="online").learner(
        X, n_passes=3, batch_size=10),
    "sfa": lambda: SFA(4, random_state=0).learner(R, n_passes=2),
    "pagerank": lambda: PageRank().learner(G, n_passes=3),
    "bayesnet": lambda: BayesNet(NET, random_state=0).learner(ROWS, n_passes=3),
    "kmeans": lambda: KMeans(3, random_state=0).learner(X, n_passes=3),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ck")
    out = {}
    for name, make in LEARNERS.items():
        lrn = make()
        lrn.fit(progress=None)
        out[name] = lrn.save(str(folder / f"{name}.npz"))
    return out


def _nan(a):
    a = a.copy()
    a.flat[0] = np.nan
    return a


def _arr(key, change):
    return lambda meta, arrays: arrays.__setitem__(key, change(arrays[key]))


def _counter(key, value):
    return lambda meta, arrays: meta["model_counters"].__setitem__(key, value)


CK_CASES = [
    ("nmf", _arr("model/0", _nan), "model matrix model/0 holds NaN or infinity"),
    ("nmf", _arr("model/0", np.negative), "NMFModel state 'model/0' holds negative values"),
    ("nmf", _arr("model_extra/W.values", _nan), "NMFModel state 'W.values' holds NaN"),
    ("nmf", _arr("model_extra/pass.gram", _nan), "NMFModel state 'pass.gram' holds NaN"),
    ("nmf", _counter("n_passes_done", -3), "NMFModel counter 'n_passes_done' is -3"),
    ("nmf", _counter("errors_n", 10**6), "the model's 'errors' history counts 1000000"),
    ("nmf-online", _arr("updater/den0", _nan), "updater state 'den0' holds NaN"),
    ("sfa", _arr("model/0", _nan), "model matrix model/0 holds NaN"),
    ("sfa", _arr("model_extra/W.values", _nan), "SFAModel state 'W.values' holds NaN"),
    ("sfa", _counter("rmse_n", 10**6), "the model's 'rmse' history counts"),
    ("pagerank", _arr("model/0", np.negative), "PageRankModel state 'model/0' holds negat"),
    ("pagerank", _arr("model_extra/previous", _nan), "PageRankModel state 'previous' holds"),
    ("pagerank", _counter("n_iter", 10**6), "PageRankModel counter 'n_iter' is 1000000, "
     r"where it counts from 0 to \d+ \(the length of its 'residuals'\)"),
    ("bayesnet", _arr("model/0", _nan), "model matrix model/0 holds NaN"),
    ("bayesnet", _arr("model/0", np.negative), "BayesNetModel state 'model/0' holds negat"),
    ("kmeans", _arr("model/1", _nan), "model matrix model/1 holds NaN"),
    ("kmeans", _arr("model_extra/drift", _nan), "LloydKMeansModel state 'drift' holds NaN"),
    ("kmeans", _arr("model_extra/rows.u.values", np.negative),
     "LloydKMeansModel state 'rows.u.values' holds negative"),
    ("kmeans", _arr("model_extra/rows.labels.values", lambda a: a + 7),
     r"its rows' labels run from \d+ to \d+, where each names one of the 3 centres"),
]


@pytest.mark.parametrize("name, change, fragment", CK_CASES,
                         ids=[f"{c[0]}-{c[2][:40]}" for c in CK_CASES])
def test_a_crafted_learner_checkpoint_is_refused_before_training(
        checkpoints, tmp_path, name, change, fragment):
    ck = load_checkpoint(checkpoints[name])
    meta = {k: copy.deepcopy(v) for k, v in ck.meta.items()
            if k not in ("format", "version", "written")}
    meta["options"]["n_passes"] = 5
    arrays = {k: a.copy() for k, a in ck.arrays.items()}
    change(meta, arrays)
    path = save_checkpoint(tmp_path / "crafted.npz", arrays, meta)
    lrn = LEARNERS[name]()
    lrn.fit(progress=None)
    before = [np.array(m.data, copy=True) for m in lrn.model.modelmats]
    with pytest.raises(CheckpointError, match=fragment) as err:
        lrn.load(str(path))
    assert str(path) in str(err.value)
    for m, b in zip(lrn.model.modelmats, before, strict=True):  # nothing was written
        np.testing.assert_array_equal(np.asarray(m.data), b)


@pytest.mark.parametrize("name", list(LEARNERS))
def test_a_sound_learner_checkpoint_still_resumes(checkpoints, tmp_path, name):
    ck = load_checkpoint(checkpoints[name])
    meta = {k: copy.deepcopy(v) for k, v in ck.meta.items()
            if k not in ("format", "version", "written")}
    meta["options"]["n_passes"] = 4
    path = save_checkpoint(tmp_path / "more.npz", dict(ck.arrays), meta)
    lrn = LEARNERS[name]()
    lrn.load(str(path))
    lrn.fit(progress=None)
    assert all(np.isfinite(np.asarray(m.data)).all() for m in lrn.model.modelmats)


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
@pytest.mark.parametrize("name", ["sfa", "pagerank", "kmeans"])
def test_a_truncated_or_flipped_learner_checkpoint_is_refused(
        checkpoints, tmp_path, name, damage):
    data = bytearray(open(checkpoints[name], "rb").read())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        data[300] ^= 0xFF  # in the first array's numbers
    path = tmp_path / "damaged.npz"
    path.write_bytes(bytes(data))
    lrn = LEARNERS[name]()
    with pytest.raises(CheckpointError):
        lrn.load(str(path))
    assert lrn.step == 0
