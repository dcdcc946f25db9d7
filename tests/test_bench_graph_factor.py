"""Smoke runs of ``python -m bidlab.bench nmf --quick`` and ``bayesnet --quick`` (the
learning part): the programs run end to end on small data and report what they measured.
(``bench pagerank --quick`` has its smoke test in test_pagerank.py.)"""

from __future__ import annotations

import json

import pytest

from bidlab.datasets.paths import find_shared_data_dir

_SHARED = find_shared_data_dir()


@pytest.mark.skipif(_SHARED is None or not (_SHARED / "uci-kos").is_dir(),
                    reason="shared data folder with uci-kos/ not found")
def test_nmf_bench_quick_reaches_the_peers_objectives(capsys):
    from bidlab.bench.nmf import main

    assert main(["--quick", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    peers = {(r["loss"], r["peer"]) for r in doc["rows"]}
    assert peers == {("frobenius", "sklearn mu"), ("frobenius", "sklearn cd"),
                     ("frobenius", "sklearn MiniBatchNMF"), ("kl", "sklearn mu"),
                     ("kl", "sklearn MiniBatchNMF")}
    for r in doc["rows"]:
        assert r["peer_s"] > 0 and r["target_error"] > 0
        if r["bidlab_s"] is not None:  # reached: its error is at most the peer's
            assert r["bidlab_error"] <= r["target_error"] * (1 + 1e-6)
    mu = [r for r in doc["rows"] if r["peer"] == "sklearn mu"]
    # bidlab's batch method repeats mu's iterates: the same passes reach the same error
    assert all(r["bidlab_passes"] == r["peer_iterations"] for r in mu)
    assert len(doc["targets"]) == len(doc["rows"])


@pytest.mark.skipif(_SHARED is None or not (_SHARED / "bnlearn").is_dir(),
                    reason="shared data folder with bnlearn/ not found")
def test_bayesnet_bench_quick_learning(capsys):
    from bidlab.bench.bayesnet import main

    assert main(["--quick", "--json", "--parts", "learning"]) == 0
    lr = json.loads(capsys.readouterr().out)["learning"]
    assert lr["rows"] == 5000 and lr["seconds"] > 0
    # learned tables: most of the way from the uniform start to the true network
    assert lr["ll_uniform"] < lr["ll_learned"] <= lr["ll_true"] + 0.05
    assert lr["ll_learned"] > lr["ll_uniform"] + 0.9 * (lr["ll_true"] - lr["ll_uniform"])
