"""glm_sweep driven as a user would: grids that hold no value and target counts below one
are refused at once, naming the parameter."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.models import GLM, glm_sweep


@pytest.mark.parametrize("grid", [{"lrate": []}, {"l1": []}, {"l2": np.array([])}])
def test_a_sweep_grid_without_values_is_refused_naming_it(grid):
    (name, _), = grid.items()
    with pytest.raises(ValueError, match=f"glm_sweep: {name}=.* holds no value"):
        glm_sweep(**grid)


@pytest.mark.parametrize("n_targets", [0, -1, 1.5, True])
def test_a_sweep_needs_at_least_one_target(n_targets):
    with pytest.raises(ValueError, match="n_targets must be an int >= 1"):
        glm_sweep(lrate=[0.1, 0.5], n_targets=n_targets)


def test_a_sweep_over_two_targets_still_builds():
    sweep = glm_sweep(lrate=[0.1, 0.5], l2=[0.0, 1e-3], n_targets=np.int64(2))
    assert sweep.targmap == [0, 0, 0, 0, 1, 1, 1, 1]


def test_small_data_gets_several_steps_a_pass_by_default() -> None:
    """A 300-row problem: one 500-row minibatch a pass left it at 0.856 accuracy after
    fit's 10 passes (scikit-learn's LogisticRegression: 0.989)."""
    from sklearn.model_selection import train_test_split

    rng = np.random.default_rng(0)
    X = rng.random((300, 5))
    y = (X[:, 0] > 0.5).astype(int)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    acc = np.mean([GLM("logistic", random_state=s).fit(Xtr, ytr).score(Xte, yte)
                   for s in range(3)])
    assert acc >= 0.93, acc
    est = GLM("logistic")
    assert est._batch_rows(210) == 14 and est._batch_rows(100_000) == 500
    assert GLM(batch_size=64)._batch_rows(210) == 64  # a number is kept
    one = GLM("logistic", batch_size=500, n_passes=4, tol=None, random_state=0).fit(Xtr, ytr)
    assert one.n_steps_ == 4  # an explicit 500 on 210 rows: one step a pass


@pytest.mark.parametrize("bad", ["big", 0, True, 2.5])
def test_a_batch_size_that_is_neither_auto_nor_a_count_is_refused(bad) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        GLM(batch_size=bad).fit(np.eye(4), [0, 1, 0, 1])
