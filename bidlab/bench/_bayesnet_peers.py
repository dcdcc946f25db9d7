"""The peers of the Bayesian-network benchmark: pgmpy (exact variable elimination, and its
Gibbs sampler) and pyAgrum (its Gibbs sampler). Each loader returns None with the reason
when the package is absent, so the benchmark runs (and says what it skipped) without it.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from typing import Any

import numpy as np

from bidlab.models.bayesnet.bif import format_bif
from bidlab.models.bayesnet.network import Network

__all__ = ["pgmpy_model", "pyagrum_model", "exact_pgmpy", "gibbs_pyagrum", "gibbs_pgmpy"]


def pgmpy_model(net: Network) -> tuple[Any, str]:
    """(pgmpy's model of ``net``, "") or (None, why not)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pgmpy.readwrite import BIFReader
    except ImportError as exc:
        return None, f"pgmpy not installed ({exc}); pip install 'bidlab[bench-bayesnet]'"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BIFReader(string=format_bif(net)).get_model(), ""


def pyagrum_model(net: Network) -> tuple[Any, str]:
    """(pyAgrum's BayesNet of ``net``, "") or (None, why not)."""
    try:
        import pyagrum as gum
    except ImportError as exc:
        return None, f"pyAgrum not installed ({exc}); pip install 'bidlab[bench-bayesnet]'"
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "net.bif")
        with open(path, "w") as f:
            f.write(format_bif(net))
        try:
            return gum.loadBN(path), ""
        except Exception as exc:  # its BIF parser refuses some state names ("Asy/Patch")
            return None, f"pyAgrum cannot read the network: {str(exc).splitlines()[0]}"


def _dense(net: Network, v: int, values: Any, names: list[str]) -> np.ndarray:
    """Reorder a peer's marginal into ``net``'s state order."""
    order = [list(names).index(s) for s in net.states[v]]
    return np.asarray(values, dtype=np.float64)[order]


def exact_pgmpy(model: Any, net: Network, evidence: dict[str, str]) -> list[np.ndarray]:
    """Every variable's exact marginal given ``evidence`` (pgmpy VariableElimination)."""
    from pgmpy.inference import VariableElimination

    ve = VariableElimination(model)
    out = []
    for v, name in enumerate(net.names):
        if name in evidence:
            m = np.zeros(len(net.states[v]))
            m[net.states[v].index(evidence[name])] = 1.0
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                q = ve.query([name], evidence=evidence or None, show_progress=False)
            m = _dense(net, v, q.values, q.state_names[name])
        out.append(m)
    return out


def gibbs_pyagrum(bn: Any, net: Network, evidence: dict[str, str], iterations: int,
                  burn_in: int) -> tuple[list[np.ndarray], float, float]:
    """pyAgrum's Gibbs marginals after ``iterations`` iterations: (marginals, seconds,
    variable draws)."""
    import pyagrum as gum

    g = gum.GibbsSampling(bn)
    if evidence:
        g.setEvidence(dict(evidence))
    g.setMaxIter(int(iterations))
    g.setEpsilon(1e-15)
    g.setMinEpsilonRate(1e-15)
    g.setBurnIn(int(burn_in))
    g.setMaxTime(3600.0)
    t = time.perf_counter()
    g.makeInference()
    dt = time.perf_counter() - t
    draws = float(g.nbrIterations() + burn_in) * g.nbrDrawnVar()
    out = []
    for v, name in enumerate(net.names):
        p = g.posterior(name)
        labels = [p.variable(0).label(i) for i in range(p.variable(0).domainSize())]
        out.append(_dense(net, v, p.tolist(), labels))
    return out, dt, draws


def gibbs_pgmpy(model: Any, net: Network, size: int, seed: int = 0,
                timeout: float = 180.0) -> tuple[list[np.ndarray], float, float]:
    """pgmpy's Gibbs marginals (no evidence: its sampler takes none) from ``size`` samples:
    (marginals, seconds including building its kernel, variable draws). Runs in a child
    process; raises ``TimeoutError`` after ``timeout`` seconds (pgmpy builds its
    transition kernel by enumerating the states of every Markov blanket first)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        job = pool.apply_async(_gibbs_pgmpy, (model, net, size, seed))
        try:
            return job.get(timeout)
        except mp.TimeoutError:
            pool.terminate()
            raise TimeoutError(f"pgmpy GibbsSampling did not finish {size} samples in "
                               f"{timeout:.0f} s") from None


def _gibbs_pgmpy(model: Any, net: Network, size: int,
                 seed: int) -> tuple[list[np.ndarray], float, float]:
    from pgmpy.sampling import GibbsSampling

    try:  # no progress bar on stderr
        from pgmpy.global_vars import config

        config.set_show_progress(False)
    except (ImportError, AttributeError):
        pass
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = GibbsSampling(model)
        df = g.sample(size=int(size), seed=seed, include_latents=True)
    dt = time.perf_counter() - t
    out = []
    for v, name in enumerate(net.names):
        names = model.get_cpds(name).state_names[name]  # its sample holds indices into these
        counts = np.zeros(len(net.states[v]))
        for val, c in df[name].value_counts().items():
            label = val if isinstance(val, str) else names[int(val)]
            counts[net.states[v].index(str(label))] = c
        out.append(counts / counts.sum())
    return out, dt, float(size) * net.n_vars
