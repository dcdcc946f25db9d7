"""Checks and conversions every estimator shares, so that one parameter means one thing.

Example::

    Option("random_state", int, None, "seed", none_ok=True, test=seed_ok, text=SEED_TEXT)
    seed = seed_from(self.random_state)        # an int for the engine (None: a fresh one)
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = ["SEED_TEXT", "seed_ok", "seed_from", "RANDOM_STATE", "unwrap"]

#: how a parameter table names what ``random_state`` takes
SEED_TEXT = "None, an int in [0, 2**32) or a numpy random generator"


def seed_ok(x: Any) -> bool:
    """An int in [0, 2**32) or a numpy ``Generator`` / ``RandomState`` (None is the
    Option's ``none_ok``)."""
    if isinstance(x, (np.random.Generator, np.random.RandomState)):
        return True
    return (isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))
            and 0 <= int(x) < 2**32)


def seed_from(random_state: Any) -> int | None:
    """The int seed an engine takes for ``random_state``: an int as it is, None as None
    (the engine draws a fresh one), one draw from a generator (which advances it, as
    scikit-learn's estimators do)."""
    if random_state is None:
        return None
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**31 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31 - 1))
    return int(random_state)


def _random_state_row(default: Any, what: str) -> Any:
    from bidlab.learn.options import Option

    return Option("random_state", int, default, what, none_ok=True, test=seed_ok,
                  text=SEED_TEXT, live=False)


#: the estimators' ``random_state`` row (default 0: reproducible unless asked otherwise)
RANDOM_STATE = _random_state_row(0, "seed of the initialisation (and the sampler)")


def unwrap(X: Any) -> Any:
    """The raw matrix inside what an estimator is given: a bidlab ``Mat`` (its array), an
    ``SMat`` (its CSR matrix), a ``bidlab.datasets`` Corpus (``X``) or EdgeList (``A``);
    anything else as it is."""
    from bidlab.mat import Mat, SMat

    if isinstance(X, SMat):
        return X.csr
    if isinstance(X, Mat):
        return X.data
    if hasattr(X, "X") and hasattr(X, "vocab"):  # a Corpus
        return X.X
    if hasattr(X, "ids") and hasattr(X, "A"):  # an EdgeList ("ids" first: CuPy's .A warns)
        return X.A
    return X
