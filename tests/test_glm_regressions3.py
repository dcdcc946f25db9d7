"""glm_sweep driven as a user would: grids that hold no value and target counts below one
are refused at once, naming the parameter."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.models import glm_sweep


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
