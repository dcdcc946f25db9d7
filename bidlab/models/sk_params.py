"""The parameters every estimator shares with scikit-learn: ``verbose``, ``n_jobs`` and
``warm_start``, and what they do.

* ``verbose``: 0 prints nothing; 1 a tqdm bar whose postfix shows the last pass summary;
  2 a summary line per pass. All of it goes to ``sys.stderr`` (a stream that is not a
  terminal gets plain lines, no ``\\r`` bar frames), never to ``sys.stdout``.
* ``n_jobs``: the CPU threads of the training and prediction kernels, set through
  threadpoolctl for the duration of the call (numba's kernels included, see
  :mod:`bidlab.kern.threads`); None leaves the process's limits alone, -1 means every core,
  -2 every core but one (joblib's convention).
* ``warm_start``: a second ``fit`` continues from the fitted state (scikit-learn's
  meaning) instead of starting again.
"""

from __future__ import annotations

import contextlib
import numbers
import os
from collections.abc import Iterator
from typing import Any

from bidlab.learn import Option

__all__ = ["VERBOSE", "N_JOBS", "WARM_START", "COMMON", "factor_rows", "progress_mode",
           "thread_limit", "n_threads"]


def n_jobs_ok(x: Any) -> bool:
    """None or an int other than 0."""
    if x is None:
        return True
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and int(x) != 0


VERBOSE = Option("verbose", int, 0, "progress output: 0 none, 1 a bar with the pass "
                 "summaries, 2 a line per pass (on stderr)", low=0)
N_JOBS = Option("n_jobs", int, None, "CPU threads of the kernels (None: leave the limits "
                "alone; -1: every core)", none_ok=True, test=n_jobs_ok,
                text="None or an int other than 0 (-1: every core)")
WARM_START = Option("warm_start", bool, False, "fit continues from the fitted state instead "
                    "of starting again")
#: the three rows, in the order the estimators list them
COMMON = (WARM_START, N_JOBS, VERBOSE)


def factor_rows(what: str) -> tuple[Option, ...]:
    """The rows that end a factor model's table (NMF, SFA): ``random_state`` (default
    None), ``verbose``, ``dtype`` of its ``what`` (default None: the input's) and
    ``device`` (default ``"cpu"``).

    Examples
    --------
    >>> [row.name for row in factor_rows("factors")]
    ['random_state', 'verbose', 'dtype', 'device']
    """
    from bidlab.models.validation import device_row, dtype_row, random_state_row

    return (random_state_row(None), VERBOSE, dtype_row(what), device_row())


def progress_mode(verbose: Any) -> str | None:
    """``Learner.fit``'s progress mode for an estimator's ``verbose``."""
    level = int(verbose or 0)
    if level <= 0:
        return None
    return "tqdm_postfix" if level == 1 else "lines"


def n_threads(n_jobs: int) -> int:
    """The thread count ``n_jobs`` asks for on this machine (-1: every core)."""
    cores = os.cpu_count() or 1
    n = int(n_jobs)
    return max(1, n if n > 0 else cores + 1 + n)


@contextlib.contextmanager
def thread_limit(n_jobs: Any) -> Iterator[None]:
    """Limit every threadpoolctl-visible pool (BLAS, OpenMP, numba) to ``n_jobs`` threads
    inside the ``with`` block; None changes nothing."""
    if n_jobs is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=n_threads(n_jobs)):
        yield
