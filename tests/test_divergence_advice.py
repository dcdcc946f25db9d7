"""A diverged run's message names the options in force and advice that applies: a lower
learning rate only where the learner trains with one (SFA's ALS takes none, and its
updater's ``lrate`` is inert: the message had told users to lower it)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.learn.divergence import DivergedError
from bidlab.models import SFA


def test_a_model_without_a_learning_rate_is_not_told_to_lower_it():
    rng = np.random.default_rng(0)
    X = sp.random(50, 40, density=0.3, random_state=rng, format="csr") * 5
    with pytest.raises(DivergedError) as info:
        SFA(4, max_iter=5, l2=1e300).fit(X)
    text = str(info.value)
    assert "l2=1e+300" in text
    assert "lrate" not in text and "learning rate (" not in text
    assert "takes no learning rate" in text
