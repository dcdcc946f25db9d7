"""The benchmark programs' shared parts: targets, the machine record, JSON or report output."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bidlab.bench._common import emit, format_target, machine, print_targets, target


@pytest.mark.parametrize("value, limit, at_most, met", [
    (1.0, 0.95, False, True), (0.9, 0.95, False, False), (0.95, 0.95, False, True),
    (0.02, 0.03, True, True), (0.04, 0.03, True, False),
    (None, 0.5, True, False), (math.nan, 0.5, False, False),
])
def test_a_target_is_met_by_its_measured_value(value, limit, at_most, met):
    t = target("x", value, limit, at_most=at_most, peer_s=1.5)
    assert t["met"] is met and t["value"] is value and t["target"] == limit
    assert t["direction"] == ("at most" if at_most else "at least") and t["peer_s"] == 1.5


def test_targets_print_as_one_line_each(capsys):
    print_targets([target("ratio", 0.97, 0.95), target("delay", None, 150, at_most=True)])
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["  MET    ratio: 0.97 (target >= 0.95)",
                     "  MISSED delay: not reached (target <= 150)"]
    assert format_target(target("t", 2.0, 1.0, at_most=True)).startswith("MISSED")


def test_machine_names_the_cpu_and_versions():
    m = machine(threads=2)
    assert m["cpus"] >= 1 and m["cpu"] and m["numpy"] == np.__version__ and m["threads"] == 2


def test_emit_prints_json_or_the_report(capsys):
    result = {"benchmark": "x", "n": np.int64(3), "v": np.float32(0.5), "a": np.arange(2)}
    assert emit(result, True, lambda r: print("report")) == 0
    assert json.loads(capsys.readouterr().out) == {"benchmark": "x", "n": 3, "v": 0.5,
                                                   "a": [0, 1]}
    assert emit(result, False, lambda r: print("report", r["benchmark"])) == 0
    assert capsys.readouterr().out == "report x\n"
