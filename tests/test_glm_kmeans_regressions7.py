"""GLM regressions beyond a plain fit: class weights in partial fits, the classes of later
partial fits of several targets, weighted scores of mixed label columns, a sweep's selected
model and a warm start after set_params."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_iris

from bidlab.models.glm import GLM, glm_sweep


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


def test_partial_fit_class_weight_may_name_a_class_the_chunk_lacks(iris):
    """A dict naming class 2 on a chunk of class 0 only raised scikit-learn's 'The
    classes, [0], are not in class_weight'; the dict weighs every class given."""
    X, y = iris
    est = GLM("softmax", class_weight={2: 3.0}, random_state=0)
    est.partial_fit(X[:50], y[:50], classes=[0, 1, 2])  # class 0 only
    est.partial_fit(X[100:], y[100:])  # class 2, weighed 3
    assert est.n_iter_ == 2
    with pytest.raises(ValueError, match=r"label\(s\) \[7\]"):
        est.partial_fit(X[:2], np.array([0, 7]))


def test_later_partial_fits_take_the_same_per_column_classes(iris):
    """Two binary columns given [[0, 1], [0, 1]]: the second call compared the flattened
    [0, 1, 0, 1] with the multilabel classes_ [0, 1] and refused the same classes."""
    X, y = iris
    Y = np.column_stack([(y == 0).astype(int), (y == 1).astype(int)])
    est = GLM("logistic", random_state=0)
    est.partial_fit(X[:75], Y[:75], classes=[[0, 1], [0, 1]])
    est.partial_fit(X[75:], Y[75:], classes=[[0, 1], [0, 1]])
    assert est.n_iter_ == 2
    mixed = GLM(["softmax", "logistic"], random_state=0)
    Ym = np.column_stack([y, (y == 0).astype(int)])
    mixed.partial_fit(X[:75], Ym[:75], classes=[[0, 1, 2], [0, 1]])
    with pytest.raises(ValueError, match=r"differs from the first partial_fit call's "
                       r"\[\[0, 1, 2\], \[0, 1\]\]"):  # ragged: was not compared at all
        mixed.partial_fit(X[75:], Ym[75:], classes=[[0, 1, 2, 3], [0, 1]])
    assert mixed.n_iter_ == 1


def test_partial_fit_takes_none_for_a_linear_column_and_says_what_is_wrong(iris):
    """classes=[labels, None] with a linear second column raised numpy's 'inhomogeneous
    shape'; now None stands for a column no classifier learns."""
    X, y = iris
    Y = np.column_stack([y, X[:, 0]])
    est = GLM(["softmax", "linear"], random_state=0)
    est.partial_fit(X[:, 1:], Y, classes=[[0, 1, 2], None])
    assert list(est.classes_[0]) == [0, 1, 2] and est.classes_[1] is None
    with pytest.raises(ValueError, match="no labels for Y column 0"):
        GLM(["softmax", "linear"]).partial_fit(X[:, 1:], Y, classes=[None, [0]])
    with pytest.raises(ValueError, match=r"one array of labels per Y column \(2"):
        GLM(["softmax", "linear"]).partial_fit(X[:, 1:], Y, classes=[[0, 1, 2], [0], [1]])


def test_weighted_score_reads_an_object_column_of_integer_labels(iris):
    """A DataFrame of mixed columns reaches the GLM as an object array: score() worked, but
    score(sample_weight=...) raised 'a mix of unknown and multiclass targets'."""
    X, y = iris
    Y = pd.DataFrame({"name": np.array(["a", "b", "c"])[y], "code": np.array([3, 7, 11])[y]})
    est = GLM("softmax", n_passes=3, random_state=0).fit(X, Y)
    assert est.score(X, Y, sample_weight=np.ones(len(y))) == pytest.approx(est.score(X, Y))


def test_a_selected_sweep_model_counts_the_passes_it_trained(iris):
    X, y = iris
    sweep = glm_sweep("softmax", lrate=[0.3, 1.0], n_passes=3, tol=None,
                      random_state=0).fit(X, y)
    one = sweep.select(1)
    assert (one.n_iter_, one.n_steps_) == (sweep.n_iter_, sweep.n_steps_) == (3, 45)


def test_a_warm_start_trains_with_the_rates_set_since(iris):
    """set_params(lrate=..., l2=...) before a warm fit was ignored: the fitted updater and
    mixins kept the first fit's values (and lrate_ reported them)."""
    X, y = iris
    est = GLM("softmax", lrate=0.3, n_passes=2, tol=None, random_state=0,
              warm_start=True).fit(X, y)
    coef = est.coef_.copy()
    est.set_params(lrate=1e-12, l2=0.5)
    est.fit(X, y)
    assert est.lrate_ == 1e-12 and est.mixins_[1].opts.l2 == 0.5
    np.testing.assert_allclose(est.coef_, coef, atol=1e-9)  # the rate barely moves it


def test_a_warm_start_with_another_target_map_starts_over(iris):
    """A changed targmap was ignored: the GLM kept its one target while the parameters
    asked for two."""
    X, y = iris
    est = GLM("softmax", lrate=0.3, n_passes=2, tol=None, random_state=0,
              warm_start=True).fit(X, y)
    est.set_params(targmap=[0, 0], lrate=[0.3, 1.0]).fit(X, y)
    assert est.n_targets_ == 2 and est.coef_.shape == (6, 4) and est.lrate_ == [0.3, 1.0]
    est.set_params(updater="grad").fit(X, y)  # ADAGrad's state cannot start plain steps
    assert type(est.updater_).__name__ == "Grad" and est.n_iter_ == 2
