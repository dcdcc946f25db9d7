"""The peers of the Bayesian-network benchmark: pgmpy (exact variable elimination; its Gibbs
sampler is run by ``_bayesnet_pgmpy``) and pyAgrum (its Gibbs sampler). Each loader returns
None with the reason when the package is absent, so the benchmark runs (and says what it
skipped) without it.
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

__all__ = ["pgmpy_model", "pyagrum_model", "exact_pgmpy", "gibbs_pyagrum"]


def pgmpy_model(net: Network) -> tuple[Any, str]:
    """(pgmpy's model of ``net``, "") or (None, why not): its ``DiscreteBayesianNetwork``
    with one ``TabularCPD`` per variable, built from the tables directly (pgmpy's BIF reader
    takes seconds a network to build its grammar)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pgmpy.factors.discrete import TabularCPD
            from pgmpy.models import DiscreteBayesianNetwork
    except ImportError as exc:
        return None, f"pgmpy not installed ({exc}); pip install 'bidlab[bench-bayesnet]'"
    names = net.names
    model = DiscreteBayesianNetwork()
    model.add_nodes_from(names)
    model.add_edges_from((names[p], names[v]) for v in range(net.n_vars)
                         for p in net.parents[v])
    cpds = []
    for v, ps in enumerate(net.parents):  # both order parent rows with the first slowest
        cpds.append(TabularCPD(
            names[v], len(net.states[v]), net.cpts[v].T,
            evidence=[names[p] for p in ps] or None,
            evidence_card=[len(net.states[p]) for p in ps] or None,
            state_names={names[u]: list(net.states[u]) for u in [v, *ps]}))
    model.add_cpds(*cpds)
    return model, ""


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
    with warnings.catch_warnings():  # its deprecation notices
        warnings.simplefilter("ignore")
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
