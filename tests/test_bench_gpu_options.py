"""The benchmarks' ``--gpu`` options without a GPU: a clear refusal, and the measurements'
arithmetic and records with numpy / scipy standing in for CuPy / cuSPARSE (the array
module is the only difference on a device). The GPU runs themselves are the figures a GPU
session records in BENCHMARKS.md."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from test_bench import _bench, _positive

from bidlab import backend


@pytest.fixture
def numpy_device(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """``backend.cupy()`` as numpy with a device that synchronises at once."""
    fake = SimpleNamespace(**{name: getattr(np, name) for name in (
        "zeros", "ones", "full", "empty", "asarray", "asfortranarray", "ascontiguousarray",
        "add", "multiply")})
    fake.cuda = SimpleNamespace(Device=lambda: SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setattr(backend, "cupy", lambda: fake)
    monkeypatch.setattr(backend, "to_device", lambda x: x)
    monkeypatch.setattr(backend, "gpu_available", lambda: True)
    return fake


@pytest.mark.parametrize("name", ["nmf", "pagerank", "sfa", "kernels"])
def test_gpu_option_without_a_gpu_says_what_it_needs(name: str) -> None:
    if backend.gpu_available():
        pytest.skip("a GPU is here: the --gpu runs are the GPU session's benchmarks")
    small = ("--scale", "0.001") if name == "kernels" else ("--quick",)
    proc = _bench(name, *small, "--gpu", timeout=60)
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert "--gpu needs CuPy and a CUDA device" in proc.stderr


def test_gpu_shapes_of_the_pagerank_and_sfa_runs(numpy_device: SimpleNamespace,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from bidlab.bench import pagerank, sfa
    from bidlab.models import SFA

    A = pagerank.rmat(9, 8)
    row = pagerank.gpu_rate("rmat-9", A, 1e-7, pagerank.reference(A, False)[0])
    for t in ("float32", "float64"):
        r = row[t]
        assert r["iterations"] > 1 and r["l1_to_reference"] < 1e-5
        assert r["edges_per_s_per_iteration"] == pytest.approx(
            A.nnz * r["iterations"] / r["seconds"], rel=0.02)
    cpu_params = SFA.set_params
    monkeypatch.setattr(SFA, "set_params", lambda self, **kw: cpu_params(
        self, **{k: v for k, v in kw.items() if k != "device"}))
    case = sfa.gpu_case("generated", sfa.generated(0.001), 4, 2)
    assert np.isfinite(case["gpu_s_per_iter"]) and 0 <= case["bidlab_gpu"]["p@10"] <= 1
    assert case["gpu_fit_s"] > 0 and case["gpu_one_iteration_fit_s"] > 0
    assert case["iterations"] == 3
    assert np.isfinite(case["bidlab_gpu"]["ndcg@10"])


def test_gpu_kernels_run_reports_rates_against_its_roofline(numpy_device: SimpleNamespace
                                                            ) -> None:
    """Every kernel agrees with the library way and gets a rate and a roofline share."""
    from bidlab.bench._kernel_cases import power_law_csr
    from bidlab.bench._kernels_gpu import gpu_run

    res = gpu_run(power_law_csr(300, 200, 3000), 8, 2, 1 << 16, chunk=1000)
    assert set(res["kernels"]) == {"sddmm", "sparse_dense", "sparse_t_dense", "dense_sparse",
                                   "dense_sparse_t"}
    assert res["triad"]["bandwidth_GBps"] > 0
    for r in res["kernels"].values():
        assert r["max_rel_err"] < 1e-5 and _positive(r["rate"]) and _positive(r["seconds"])
        assert r["roofline_ratio"] == pytest.approx(r["rate"] / res["roofline_gflops"])
    assert len(res["targets"]) == 5


def test_kernels_gpu_only_leaves_the_cpu_part_out(numpy_device: SimpleNamespace,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``--gpu-only``: the GPU figures and targets alone, no CPU kernels or peers timed."""
    import json

    from bidlab.bench import kernels

    assert kernels.main(["--scale", "0.0005", "--gpu", "--gpu-only", "--repeats", "1",
                         "--triad-mib", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kernels"] == {} and set(doc["gpu"]["kernels"]) == {
        "sddmm", "sparse_dense", "sparse_t_dense", "dense_sparse", "dense_sparse_t"}
    assert [t["name"].startswith("GPU ") for t in doc["targets"]] == [True] * 5
    assert kernels.main(["--scale", "0.0005", "--gpu", "--gpu-only", "--repeats", "1",
                         "--triad-mib", "1"]) == 0
    text = capsys.readouterr().out
    assert "GPU (" in text and "1-thread" not in text
    with pytest.raises(SystemExit) as exc:
        kernels.main(["--scale", "0.0005", "--gpu-only"])
    assert exc.value.code == 2 and "--gpu-only goes with --gpu" in capsys.readouterr().err
