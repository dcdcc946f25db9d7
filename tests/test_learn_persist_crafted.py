"""Saved estimators edited into states that contradict their class or themselves: each load
is a CheckpointError naming the field, none builds an object."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from saved_file_edits import crafted as _crafted

from bidlab.learn.checkpoint import CheckpointError, save_checkpoint
from bidlab.learn.persist import load_object
from bidlab.models import GLM, LDA, KMeans, load

X = np.random.default_rng(0).standard_normal((60, 4))
COUNTS = sp.random(40, 30, density=0.3, format="csr", random_state=1, dtype=np.float64)
COUNTS.data = np.ceil(COUNTS.data * 5)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    KMeans(n_clusters=3, random_state=0).fit(X).save(folder / "km.npz")
    LDA(n_components=3, n_passes=1, random_state=0).fit(COUNTS).save(folder / "lda.npz")
    GLM("softmax", n_passes=1).fit(X, np.arange(60) % 3).save(folder / "glm.npz")
    return folder


def _state(node, *names):
    """The attribute table of the object at ``names`` below the root ``node``."""
    table = node["state"]["$dict"]
    for name in names:
        table = table[name]["state"]["$dict"]
    return table


def _set(*names, **values):
    return lambda root, arrays: _state(root, *names).update(values)


def _drop(name):
    return lambda root, arrays: _state(root).pop(name)


def _matrix_dtype(dtype, name, *index):
    def change(root, arrays):
        node = _state(root, "model_")[name]
        for i in index:
            node = node[i]
        key = node["$mat"]["$array"]
        arrays[key] = arrays[key].astype(dtype)
    return change


def _glm_columns(root, arrays):
    key = _state(root, "model_")["modelmats"][0]["$mat"]["$array"]
    arrays[key] = arrays[key][:, :2].copy()


def _bad_generator(root, arrays):
    _state(root, "model_")["rng"] = {"$generator": {"$dict": {
        "bit_generator": "PCG64", "state": {"$dict": {"state": 2**200, "inc": 1}},
        "has_uint32": 0, "uinteger": 0}}}


CASES = [
    # names: never a method, property, class constant or dunder
    ("km.npz", _set(predict=1), "KMeans.predict: would shadow a method or property"),
    ("km.npz", _set(cluster_centers_=[[0.0]]), "KMeans.cluster_centers_: would shadow a "
     "method or property"),
    ("km.npz", _set(PARAMS=[]), "KMeans.PARAMS: would shadow its class constant"),
    ("lda.npz", _set("model_", update=0), "LDA.model_.update: would shadow a method"),
    ("lda.npz", _set(__class__="x"), "'__class__': not an attribute name"),
    # parameters: the PARAMS table fit uses, every one present
    ("lda.npz", _set(n_passes=10**18), "LDA.n_passes: The 'n_passes' parameter of LDA must be"),
    ("km.npz", _set(batch_size=-5), "KMeans.batch_size: The 'batch_size' parameter of KMeans"),
    ("km.npz", _set(algorithm="elkan2"), "KMeans.algorithm: The 'algorithm' parameter"),
    # option values: the component's own OPTIONS table, not the one in the file
    ("lda.npz", lambda root, arrays: _state(root, "model_", "opts")["_values"]["$dict"].update(
        alpha=-1.0), "LDA.model_.opts.alpha: The 'alpha' parameter of LDAModel"),
    # shapes agree with each other and with the parameters
    ("lda.npz", _set(n_components=5), r"LDA.model_.lamT: has shape \(30, 3\), but "
     "LDA.n_components = 5"),
    ("lda.npz", _set(vocab_=["a", "b"]), r"LDA.vocab_: has shape \(2,\), but "
     "LDA.n_features_in_ = 30"),
    ("lda.npz", lambda root, arrays: _state(root, "model_", "opts")["_values"]["$dict"].update(
        n_components=4), r"LDA.model_.lamT: has shape \(30, 3\), but "
     "LDA.model_.opts.n_components = 4"),
    ("km.npz", _set(n_clusters=2), r"KMeans.model_.modelmats.0: has shape \(3, 4\), but "
     "KMeans.n_clusters = 2"),
    ("km.npz", _set(n_features_in_=1), r"has shape \(3, 4\), but KMeans.n_features_in_ = 1"),
    ("glm.npz", _glm_columns, r"GLM.model_.modelmats.0: has shape \(3, 2\), but "
     r"GLM.model_.info.specs.0.cols = 4"),
    ("glm.npz", _set(n_passes=0), "GLM.n_passes: The 'n_passes' parameter of GLM must be"),
    # model matrices: float32 or float64, with the fix
    ("lda.npz", _matrix_dtype(np.float16, "lamT"), r"LDA.model_.lamT: a matrix of dtype "
     r"float16; bidlab's model matrices are float32 or float64: convert them"),
    ("km.npz", _matrix_dtype(np.int8, "modelmats", 0), r"KMeans.model_.modelmats\[0\]: a "
     "matrix of dtype int8; bidlab's model matrices are float32 or float64"),
    # a random generator's state numpy will not take
    ("km.npz", _bad_generator, "KMeans.model_.rng: an invalid random generator state"),
]


@pytest.mark.parametrize("name, change, fragment", CASES,
                         ids=[f"{c[0][:-4]}-{c[2][:40]}" for c in CASES])
def test_a_state_that_contradicts_itself_is_refused_naming_the_field(
        saved, tmp_path, name, change, fragment):
    path = _crafted(saved, tmp_path, name, change)
    with pytest.raises(CheckpointError, match=fragment):
        load(path)


def test_the_unedited_files_still_load(saved, tmp_path):
    km = load(_crafted(saved, tmp_path, "km.npz", lambda root, arrays: None))
    assert km.transform(X).shape == (60, 3)
    lda = load(_crafted(saved, tmp_path, "lda.npz", lambda root, arrays: None))
    assert lda.transform(COUNTS).shape == (40, 3)
    glm = load(_crafted(saved, tmp_path, "glm.npz", lambda root, arrays: None))
    assert glm.predict(X).shape == (60,)


def test_a_live_learner_is_never_rebuilt_from_a_file(tmp_path):
    path = save_checkpoint(tmp_path / "learner.npz", {}, {"kind": "bidlab-object", "root": {
        "$obj": "bidlab.learn.learner.Learner", "id": 0,
        "state": {"$dict": {"_state": "running", "name": "x"}}}})
    with pytest.raises(CheckpointError, match="Learner: a live Learner is not saved in files"):
        load_object(path)


@pytest.mark.parametrize("root", [
    {"$generator": {"$dict": {"bit_generator": "PCG64", "state": {"$dict": {
        "state": 2**200, "inc": 1}}, "has_uint32": 0, "uinteger": 0}}},
    {"$randomstate": {"$dict": {"bit_generator": "MT19937", "state": {"$dict": {
        "key": [2**40] * 624, "pos": 0}}, "has_gauss": 0, "gauss": 0.0}}},
])
def test_a_crafted_random_state_is_a_checkpoint_error(tmp_path, root):
    path = save_checkpoint(tmp_path / "rng.npz", {}, {"kind": "bidlab-object", "root": root})
    with pytest.raises(CheckpointError, match="the saved object: an invalid random generator "
                                              "state"):
        load_object(path)


def test_a_parameter_missing_from_the_file_takes_its_default(saved, tmp_path):
    """Files written before a parameter existed load with that parameter's default."""
    path = _crafted(saved, tmp_path, "km.npz", _drop("tol"))
    assert KMeans.load(path).tol == KMeans().tol
