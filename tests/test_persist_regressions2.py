"""Saved estimators edited so a value has the wrong kind (a number where the model object
goes, a plain array where a bidlab matrix goes, a list where the option set goes): each
load is a CheckpointError naming the field, never an object that crashes when used."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.learn.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from bidlab.models import NMF, KMeans, PageRank, load

X = np.random.default_rng(0).random((40, 4))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    KMeans(n_clusters=3, random_state=0).fit(X).save(folder / "km")
    NMF(2, random_state=0, max_iter=2).fit(X).save(folder / "nmf")
    ring = sp.csr_matrix(np.roll(np.eye(6), 1, axis=1))
    PageRank().fit(ring).save(folder / "pr")
    return folder


def _model_state(root):
    return root["state"]["$dict"]["model_"]["state"]["$dict"]


def _as_plain_array(root):
    mats = _model_state(root)["modelmats"]
    mats[0] = mats[0]["$mat"]  # {"$array": key}: a numpy array, not a Mat


def _crafted(saved, tmp_path, name, change):
    ck = load_checkpoint(saved / name)
    meta = {k: copy.deepcopy(v) for k, v in ck.meta.items()
            if k not in ("format", "version", "written")}
    change(meta["root"])
    return save_checkpoint(tmp_path / name, dict(ck.arrays), meta)


CASES = [
    ("km", lambda root: root["state"]["$dict"].update(model_=1.5),
     "KMeans.model_: a float, where a saved KMeans holds a Model"),
    ("km", lambda root: root["state"]["$dict"].update(model_=[1, 2]),
     "KMeans.model_: a list, where a saved KMeans holds a Model"),
    ("pr", lambda root: root["state"]["$dict"].update(model_=1.5),
     "PageRank.model_: a float, where a saved PageRank holds a Model"),
    ("km", lambda root: _model_state(root).update(modelmats={"$array": "a/0"}),
     "KMeans.model_.modelmats: a ndarray, where a saved LloydKMeansModel holds a list"),
    ("km", lambda root: _model_state(root).pop("modelmats"),
     "KMeans.model_.modelmats: missing; every saved LloydKMeansModel holds it"),
    ("km", _as_plain_array, r"KMeans.model_.modelmats\[0\]: a ndarray, not a bidlab matrix"),
    ("nmf", _as_plain_array, r"NMF.model_.modelmats\[0\]: a ndarray, not a bidlab matrix"),
    ("nmf", lambda root: _model_state(root).update(opts=[1, 2]),
     "NMF.model_.opts: a list, not an option set"),
]


@pytest.mark.parametrize("name, change, fragment", CASES, ids=[c[2][:40] for c in CASES])
def test_a_value_of_the_wrong_kind_is_refused_naming_the_field(saved, tmp_path, name,
                                                                change, fragment):
    path = _crafted(saved, tmp_path, name, change)
    with pytest.raises(CheckpointError, match=fragment):
        load(path)


@pytest.mark.parametrize("name", ["km", "nmf", "pr"])
def test_the_unedited_files_still_load_and_predict(saved, name):
    est = load(saved / name)
    out = {"km": lambda: est.predict(X), "nmf": lambda: est.transform(X),
           "pr": lambda: est.scores_}[name]()
    assert np.isfinite(np.asarray(out, dtype=float)).all()
