"""Smoke runs of ``python -m bidlab.bench nmf --quick`` and ``bayesnet --quick`` (the
learning and pgmpy parts): the programs run end to end on small data and report what they
measured.
(``bench pagerank --quick`` has its smoke test in test_pagerank.py.)"""

from __future__ import annotations

import json

import numpy as np
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
    for r in doc["rows"]:
        if r["peer"] != "sklearn mu":
            continue
        if r["loss"] == "kl":  # bidlab repeats mu's iterates: the same passes, same error
            assert r["bidlab_passes"] == r["peer_iterations"]
        else:  # coordinate descent (the Frobenius default) gets there in fewer passes
            assert r["bidlab_passes"] is not None
            assert r["bidlab_passes"] <= r["peer_iterations"]
    assert len(doc["targets"]) == len(doc["rows"])


@pytest.mark.skipif(_SHARED is None or not (_SHARED / "bnlearn").is_dir(),
                    reason="shared data folder with bnlearn/ not found")
def test_bayesnet_bench_quick_learning(capsys):
    from bidlab.bench.bayesnet import main

    assert main(["--quick", "--json", "--parts", "learning"]) == 0
    doc = json.loads(capsys.readouterr().out)
    lr = doc["learning"]
    assert doc["device"] == "cpu"
    assert lr["rows"] == 5000 and lr["seconds"] > 0
    # learned tables: most of the way from the uniform start to the true network
    assert lr["ll_uniform"] < lr["ll_learned"] <= lr["ll_true"] + 0.05
    assert lr["ll_learned"] > lr["ll_uniform"] + 0.9 * (lr["ll_true"] - lr["ll_uniform"])


def test_bayesnet_bench_device_gpu_is_refused_without_one(capsys):
    from bidlab import backend
    from bidlab.bench.bayesnet import main

    if backend.gpu_available():
        pytest.skip("a GPU is here")
    with pytest.raises(SystemExit):
        main(["--quick", "--device", "gpu"])
    assert "--device gpu: no CuPy/CUDA device here" in capsys.readouterr().err


@pytest.mark.skipif(_SHARED is None or not (_SHARED / "bnlearn").is_dir(),
                    reason="shared data folder with bnlearn/ not found")
def test_bayesnet_bench_quick_pgmpy(capsys):
    pytest.importorskip("pgmpy", reason="pgmpy (the bench-bayesnet extra) not installed")
    from bidlab.bench.bayesnet import main

    assert main(["--quick", "--json", "--parts", "pgmpy"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (r,) = doc["pgmpy"]
    assert r["network"] == "cancer" and r["mode"] == "kernel built"
    # the kernel pgmpy built has the entries kernel_entries counts
    assert r["kernel_entries"] == r["full_kernel_entries"] == 5 * 2 ** 4
    assert r["peer_samples"] >= 50 and r["peer_setup_s"] > 0 and r["peer_error"] > 0
    b = r["bidlab"]
    assert b["reached"] and b["error"] <= r["peer_error"]
    assert r["time_ratio"] > r["time_ratio_sampling"] > 0
    ratios = [t["value"] for t in doc["targets"]]
    assert ratios == [r["time_ratio"], r["time_ratio_sampling"]]
    assert [t["met"] for t in doc["targets"]] == [v >= 1000 for v in ratios]


@pytest.mark.skipif(_SHARED is None or not (_SHARED / "bnlearn").is_dir(),
                    reason="shared data folder with bnlearn/ not found")
def test_pgmpy_kernel_on_first_use_equals_its_built_kernel():
    pytest.importorskip("pgmpy", reason="pgmpy (the bench-bayesnet extra) not installed")
    from pgmpy.sampling import GibbsSampling

    from bidlab.bench._bayesnet_peers import pgmpy_model
    from bidlab.bench._bayesnet_pgmpy import _lazy_sampler
    from bidlab.models.bayesnet import read_bif

    model, _ = pgmpy_model(read_bif(_SHARED / "bnlearn" / "asia.bif.gz"))
    built, lazy = GibbsSampling(model), _lazy_sampler(model)
    assert list(lazy.variables) == list(built.variables)
    for var, kernel in built.transition_models.items():
        for key, p in kernel.items():
            np.testing.assert_array_equal(lazy.transition_models[var][key], p)
    assert all(len(lazy.transition_models[v]) == 2 ** 7 for v in lazy.variables)
