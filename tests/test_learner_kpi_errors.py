"""A KPI that raises reads NaN (training goes on), and the learner says why once per KPI
and reason: a RuntimeWarning and ``learner.kpi_errors``."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from bidlab.learn.mixins import Mixin
from bidlab.models import LDA


class _Broken(Mixin):
    kpi = "broken"

    def gradient(self) -> None:
        pass

    def score(self) -> float:
        raise ZeroDivisionError("no rows to average")


def test_a_failing_kpi_reads_nan_and_says_why_once():
    X = sp.random(200, 30, density=0.2, format="csr", random_state=0) * 5
    X.data = np.ceil(X.data)
    lrn = LDA(3, random_state=0).learner(X, n_passes=3, mixins=[_Broken()])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lrn.fit(progress=None)
    said = [w for w in seen if "KPI 'broken'" in str(w.message)]
    assert len(said) == 1 and issubclass(said[0].category, RuntimeWarning)
    assert "ZeroDivisionError: no rows to average" in str(said[0].message)
    assert lrn.kpi_errors == {"broken": "ZeroDivisionError: no rows to average"}
    assert np.isnan(lrn.metrics["kpi_broken"])
    assert lrn.metrics["state"] == "done"


def test_a_learner_whose_kpis_work_has_no_errors():
    X = sp.random(200, 30, density=0.2, format="csr", random_state=1) * 5
    X.data = np.ceil(X.data)
    lrn = LDA(3, random_state=0).learner(X, n_passes=2)
    lrn.fit(progress=None)
    assert getattr(lrn, "kpi_errors", {}) == {}




def test_a_glm_learner_takes_mixins_after_its_own_l1_l2():
    # GLM.learner(X, y, mixins=[...]) raised "got multiple values for argument 'mixins'".
    from bidlab.models import GLM

    class _Count(Mixin):
        kpi = "count"

        def gradient(self) -> None:
            pass

        def score(self) -> float:
            return 3.0

    rng = np.random.default_rng(2)
    X, y = rng.random((200, 4)), (rng.random(200) > 0.5).astype(float)
    lrn = GLM(n_passes=2, batch_size=50, tol=None).learner(X, y, mixins=[_Count()])
    lrn.fit(progress=None)
    assert lrn.metrics["kpi_count"] == 3.0
    assert {"l1", "l2"} <= {k[4:] for k in lrn.metrics if k.startswith("kpi_")}
