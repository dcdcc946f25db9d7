"""Saved NMF, SFA, PageRank and BayesNet estimators edited so their matrices contradict
each other or hold impossible numbers (NaN, negative scores): each load is a
CheckpointError naming the file and the field, never a model that loads and then answers
with nonsense or fails later inside a kernel."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from saved_file_edits import array as _array
from saved_file_edits import assert_refused
from saved_file_edits import crafted as _crafted
from saved_file_edits import set_value as _set

from bidlab.models import NMF, SFA, BayesNet, PageRank, load
from bidlab.models.bayesnet import Network

X = np.random.default_rng(0).random((40, 6))
R = sp.random(50, 40, density=0.2, random_state=0, format="csr")
R.data = np.ceil(R.data * 5)
A = sp.csr_matrix(([1.0, 1.0, 1.0, 1.0], ([0, 1, 2, 3], [1, 2, 0, 0])), shape=(4, 4))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    NMF(n_components=2, max_iter=5, random_state=0).fit(X).save(folder / "nmf.npz")
    SFA(4, max_iter=2, random_state=0).fit(R).save(folder / "sfa.npz")
    PageRank().fit(A).save(folder / "pr.npz")
    net = Network(["rain", "wet"], [["no", "yes"], ["no", "yes"]], [[], [0]],
                  [np.array([[0.8, 0.2]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
    bn = BayesNet(net, n_chains=20, n_samples=20, random_state=0)
    bn.infer({"wet": "yes"})
    bn.save(folder / "bn.npz")
    return folder


CASES = [
    # NMF: components k x d against the model's k and the features; finite and >= 0
    ("nmf.npz", _array("model_.modelmats.0", lambda a: np.vstack([a, a[:1]])),
     r"NMF.model_.modelmats.0: has shape \(3, 6\), but NMF.model_.opts.k = 2"),
    ("nmf.npz", _array("model_.modelmats.0", lambda a: a[:, :5]),
     r"has shape \(2, 5\), but NMF.n_features_in_ = 6"),
    ("nmf.npz", _array("model_._Ht", lambda a: a[:5]),
     r"NMF.model_._Ht: has shape \(5, 2\), but NMF.n_features_in_ = 6"),
    ("nmf.npz", _array("model_.modelmats.0", lambda a: a * np.nan),
     r"NMF.model_.modelmats\[0\]: holds NaN or infinity"),
    ("nmf.npz", _array("model_.modelmats.0", lambda a: -a),
     r"NMF.model_.modelmats\[0\]: holds negative values"),
    # SFA: item and user factors of one width, finite; a finite global mean
    ("sfa.npz", _array("model_.modelmats.0", lambda a: a[:, :3]),
     "SFA.model_.updatemats.0: has shape .*, but SFA.model_.modelmats.0 has f = 3"),
    ("sfa.npz", _array("model_.W_values", lambda a: a[:, :3]),
     r"SFA.model_.W.values: has shape \(50, 3\), but SFA.model_.modelmats.0 has f = 5"),
    ("sfa.npz", _array("model_.W_values", lambda a: a * np.nan),
     "SFA.model_.W.values: holds NaN or infinity"),
    ("sfa.npz", _set("model_.mu", {"$float": "nan"}), "SFA.model_.mu: holds NaN or infinity"),
    # PageRank: one score per vertex of the graph, each finite and >= 0
    ("pr.npz", _array("model_.modelmats.0", lambda a: a[:, :3]),
     r"PageRank.model_.modelmats.0: has shape \(1, 3\), but PageRank.n_features_in_ = 4"),
    ("pr.npz", _set("model_.n", 5),
     r"PageRank.model_.updatemats.0: has shape \(1, 4\), but PageRank.model_.n = 5"),
    ("pr.npz", _array("model_.modelmats.0", lambda a: a * np.nan),
     r"PageRank.model_.modelmats\[0\]: holds NaN or infinity"),
    ("pr.npz", _array("model_.modelmats.0", lambda a: -a),
     r"PageRank.model_.modelmats\[0\]: holds negative values"),
    # BayesNet: the marginals marginal() answers with are probabilities
    ("bn.npz", _array("marginals_.0", lambda a: a * np.nan),
     r"BayesNet.marginals_\[0\]: holds NaN or infinity"),
    ("bn.npz", _array("marginals_.0", lambda a: -a),
     r"BayesNet.marginals_\[0\]: holds negative values"),
]


@pytest.mark.parametrize("name, change, fragment", CASES,
                         ids=[f"{c[0][:-4]}-{c[2][:50]}" for c in CASES])
def test_a_damaged_saved_estimator_is_refused_naming_file_and_field(
        saved, tmp_path, name, change, fragment):
    assert_refused(saved, tmp_path, name, change, fragment)


def test_the_unedited_files_still_load_and_answer(saved, tmp_path):
    def same(name):
        return load(_crafted(saved, tmp_path, name, lambda root, arrays: None))

    nmf = same("nmf.npz")
    assert nmf.transform(X).shape == (40, 2)
    nmf.partial_fit(X)
    sfa = same("sfa.npz")
    assert sfa.predict([0, 49], [0, 39]).shape == (2,)
    pr = same("pr.npz")
    assert pr.scores_.shape == (4,) and abs(pr.scores_.sum() - 1.0) < 1e-6
    bn = same("bn.npz")
    assert set(bn.marginal("rain")) == {"no", "yes"}
