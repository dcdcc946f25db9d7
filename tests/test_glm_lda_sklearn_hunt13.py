"""GLM as scikit-learn users use it: sparse label indicator matrices, ``classes`` given as
an object array, weighted ``score`` with unseen labels, and ``partial_fit`` continuing a
model that ``fit`` trained through its feature scaling."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from bidlab.models import GLM


def _data(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    Y = (X[:, :3] > 0).astype(np.int64)  # three binary labels per row
    return X, Y


def test_a_sparse_label_indicator_matrix_trains_as_its_dense_form():
    X, Y = _data()
    dense = GLM("logistic", n_passes=3, random_state=0).fit(X, Y)
    # MultiLabelBinarizer(sparse_output=True) gives this; it was "got shape ()"
    est = GLM("logistic", n_passes=3, random_state=0).fit(X, sp.csr_matrix(Y))
    np.testing.assert_array_equal(est.predict(X), dense.predict(X))
    assert est.score(X, sp.csr_matrix(Y)) == dense.score(X, Y)


@pytest.mark.parametrize("link, n_cols", [("logistic", 2), ("softmax", 3)])
def test_classes_as_an_object_array_of_labels_is_every_columns_labels(link, n_cols):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    labels = np.array(["hi", "lo", "mid"][: n_cols if link == "softmax" else 2])
    Y = labels[rng.integers(0, labels.size, (300, n_cols))].astype(object)
    # np.unique of object labels: as many labels as Y has columns, read as one array per
    # column before ("needs exactly 2 classes but Y column 0 has 1 class: ['hi']")
    classes = np.unique(Y)
    assert classes.dtype == object and classes.size == n_cols
    est = GLM(link, n_passes=3, random_state=0).partial_fit(X, Y, classes=classes)
    assert [c.tolist() for c in est.targets_.classes] == [sorted(labels)] * n_cols
    est.partial_fit(X, Y, classes=classes)  # the same classes on a later call
    assert est.predict(X).shape == (300, n_cols)


def test_weighted_score_refuses_unseen_labels_as_the_unweighted_score_does():
    X, _ = _data()
    y = np.digitize(X[:, 1], [-0.5, 0.5])
    est = GLM("softmax", n_passes=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=r"label\(s\) \[3\]"):
        est.score(X, y + 1)
    # was an accuracy of 0.007, as if labels shifted by one were a model's mistakes
    with pytest.raises(ValueError, match=r"label\(s\) \[3\]"):
        est.score(X, y + 1, sample_weight=np.ones(len(y)))
    assert est.score(X, y, sample_weight=np.ones(len(y))) == est.score(X, y)


def test_partial_fit_continues_a_fitted_model_through_fits_feature_scaling():
    X, y = load_breast_cancer(return_X_y=True)  # raw features, up to thousands
    Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.5, random_state=0)
    est = GLM(random_state=0).fit(Xa, ya)
    assert est.scaling_ is not None
    before = est.score(Xb, yb)
    scale = est.scaling_["scale"].copy()
    est.partial_fit(Xb[:40], yb[:40])
    # was 0.35 from 0.96: the chunk stepped the folded weights on the raw features
    assert est.score(Xb, yb) > before - 0.03
    np.testing.assert_array_equal(est.scaling_["scale"], scale)  # the map is kept
    # the same step as a partial_fit of a model fitted on the standardised features
    Xs = (Xa - est.scaling_["mean"]) * scale
    plain = GLM(random_state=0, standardize=False).fit(Xs, ya)
    mine = GLM(random_state=0).fit(Xa, ya)
    plain.partial_fit((Xb[:40] - mine.scaling_["mean"]) * scale, yb[:40])
    mine.partial_fit(Xb[:40], yb[:40])
    np.testing.assert_allclose(mine.decision_function(Xb),
                               plain.decision_function((Xb - mine.scaling_["mean"]) * scale),
                               rtol=1e-6, atol=1e-6)


def test_partial_fit_continues_a_linear_target_on_its_fitted_scale():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 3))
    y = 1e4 * (X @ np.array([0.5, -1.0, 0.2])) + 3e5  # e.g. prices
    est = GLM("linear", random_state=0).fit(X, y)
    assert est.target_scale_ is not None
    moved = y + 2e4  # the stream's values move by two deviations
    assert est.score(X, moved) < 0
    for _ in range(3):
        est.partial_fit(X, moved)
    # was -2.41: on the values as given each step moved the bias by about lrate
    assert est.score(X, moved) > 0.99


def test_complex_targets_are_refused():
    X, Y = _data(40)
    y = Y[:, 0] + 1j * Y[:, 1]
    # the linear link trained on the real part alone, with only a ComplexWarning
    with pytest.raises(ValueError, match="complex numbers"):
        GLM("linear", n_passes=2).fit(X, y)
    with pytest.raises(ValueError, match="complex numbers"):
        GLM("linear", n_passes=2).fit(X, Y[:, 0].astype(float)).score(X, y)
