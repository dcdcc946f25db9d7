"""Smoke test of ``python -m bidlab.bench kmeans``'s whole-fit grid, on a tiny cell."""

from __future__ import annotations

import math

from bidlab.bench._kmeans_fit import fit_grid, report_rows


def test_whole_fit_grid_times_both_systems_and_compares_inertia():
    res = fit_grid(dims=(2,), ks=(4,), seeds=2, rows={2: 3000}, real=False)
    (cell,) = res["cells"]
    assert (cell["n"], cell["d"], cell["k"]) == (3000, 2, 4)
    assert cell["bidlab_s"] > 0 and cell["sklearn_s"] > 0
    assert 0.9 < cell["inertia_ratio"] < 1.1  # both find the four blobs' optimum
    assert math.isclose(cell["time_ratio"], cell["time_ratio"])
    assert len(res["targets"]) == 1 and "time ratio" in res["targets"][0]["name"]
    assert any("blobs 3,000 x 2" in line for line in report_rows(res))
