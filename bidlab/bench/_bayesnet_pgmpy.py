"""pgmpy's ``GibbsSampling`` measured without taking the benchmark down: in a child process
with a time limit and a memory limit, with a sample count chosen from a timed pilot.

pgmpy builds its Gibbs transition kernel before drawing anything: for every variable, one
entry per joint state of *all the other* variables (not of its Markov blanket), each a
reduced and normalised factor. :func:`kernel_entries` counts them; a network whose count is
over a limit is not run (the count, and the time and memory it would take at the rate
measured on the networks that ran, are reported instead). ``lazy=True`` runs pgmpy's own
sampling loop with each kernel entry computed by pgmpy's own factor reduction the first time
the loop asks for it, which is how its sampler can be measured on alarm and child at all.

The chain starts from a row drawn from the network (pgmpy's default start, uniform at random,
can be a state of probability zero: on asia it draws NaN odds and fails).
"""

from __future__ import annotations

import contextlib
import io
import math
import multiprocessing as mp
import resource
import time
import warnings
from typing import Any

import numpy as np

from bidlab.models.bayesnet.network import Network

__all__ = ["kernel_entries", "gibbs_pgmpy"]

MEMORY_LIMIT = 3 << 30  # bytes the child may add to its address space


def kernel_entries(cards: list[int]) -> int:
    """Entries of pgmpy's Gibbs kernel for variables of ``cards`` states: for each variable,
    the product of the other variables' state counts.

    Examples
    --------
    >>> kernel_entries([2, 2, 3])   # 2*3 + 2*3 + 2*2
    16
    """
    total = math.prod(cards)
    return sum(total // c for c in cards)


def gibbs_pgmpy(model: Any, net: Network, start: np.ndarray, seconds: float, timeout: float,
                lazy: bool = False, pilot: int = 50, seed: int = 0,
                max_size: int = 2_000_000) -> dict[str, Any]:
    """pgmpy's Gibbs marginals without evidence (its sampler takes none) on ``model``
    (pgmpy's model of ``net``), in a child process.

    The kernel is built (``setup_s``), a pilot of ``pilot`` samples (times 4 until it takes
    a tenth of ``seconds``) is timed, then one chain of ``size`` samples chosen to take about
    ``seconds`` is drawn from the state ``start`` (state indices of ``net``'s variables).
    Returns ``{"setup_s", "pilot_s", "size", "sample_s", "draws", "marginals",
    "kernel_entries", "rss_growth_bytes"}`` (the resident memory the set-up added; for
    ``lazy``, ``kernel_entries`` counts the entries computed by the end). Raises
    ``TimeoutError`` after ``timeout`` seconds and ``MemoryError`` past
    :data:`MEMORY_LIMIT`.

    Examples
    --------
    >>> from bidlab.models.bayesnet.bif import parse_bif
    >>> net = parse_bif("variable A { type discrete [ 2 ] { y, n }; } "
    ...                 "probability ( A ) { table 0.5, 0.5; }")
    >>> from bidlab.bench._bayesnet_peers import pgmpy_model
    >>> model, _ = pgmpy_model(net)                                      # doctest: +SKIP
    >>> r = gibbs_pgmpy(model, net, np.zeros(1, int), 0.1, timeout=60)   # doctest: +SKIP
    >>> r["size"] >= 50                                                  # doctest: +SKIP
    True
    """
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        job = pool.apply_async(_measure, (model, net, [int(s) for s in start], seconds, lazy,
                                          pilot, seed, max_size))
        try:
            return job.get(timeout)
        except mp.TimeoutError:
            pool.terminate()
            raise TimeoutError(f"pgmpy GibbsSampling did not finish in {timeout:.0f} s "
                               f"(kernel, pilot and {seconds:.0f} s of samples)") from None


def _limit_memory() -> None:
    with open("/proc/self/status") as fh:
        vm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize"))
    cap = vm + MEMORY_LIMIT
    resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))


def _rss() -> int:
    """Resident bytes now."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def _measure(model: Any, net: Network, start: list[int], seconds: float, lazy: bool,
             pilot: int, seed: int, max_size: int) -> dict[str, Any]:
    _limit_memory()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgmpy.global_vars import config
        from pgmpy.sampling import GibbsSampling
        from pgmpy.sampling.Sampling import State

        config.set_show_progress(False)
        rss = _rss()
        t = time.perf_counter()
        g = _lazy_sampler(model) if lazy else GibbsSampling(model)
        setup = time.perf_counter() - t
        rss = _rss() - rss
        state = [State(name, s) for name, s in zip(net.names, start, strict=True)]
        with contextlib.redirect_stderr(io.StringIO()):  # its progress bar
            g.sample(start_state=state, size=2, seed=seed)  # first call: imports, caches
            size, pilot_s = pilot, 0.0
            while True:
                t = time.perf_counter()
                g.sample(start_state=state, size=size, seed=seed)
                pilot_s = time.perf_counter() - t
                if pilot_s >= 0.1 * seconds or size >= max_size:
                    break
                size *= 4
            size = int(min(max_size, max(size, seconds * (size - 1) / pilot_s)))
            t = time.perf_counter()
            df = g.sample(start_state=state, size=size, seed=seed + 1, include_latents=True)
            dt = time.perf_counter() - t
    entries = sum(len(k) for k in g.transition_models.values())
    return {"setup_s": setup, "pilot_s": pilot_s, "size": size, "sample_s": dt,
            "draws": float(size - 1) * net.n_vars, "marginals": _marginals(model, net, df),
            "kernel_entries": entries, "rss_growth_bytes": rss}


def _marginals(model: Any, net: Network, df: Any) -> list[np.ndarray]:
    out = []
    for v, name in enumerate(net.names):
        names = model.get_cpds(name).state_names[name]  # its samples index these
        counts = np.zeros(len(net.states[v]))
        for val, c in df[name].value_counts().items():
            label = val if isinstance(val, str) else names[int(val)]
            counts[net.states[v].index(str(label))] = c
        out.append(counts / counts.sum())
    return out


class _LazyKernel(dict):
    """One variable's pgmpy kernel whose entries (keyed by the states of all the other
    variables, as pgmpy keys them) are computed by pgmpy's reduction on first use."""

    def __init__(self, factor: Any, others: list[str], state: Any) -> None:
        super().__init__()
        self.factor, self.others, self.state = factor, others, state
        self.scope = set(factor.scope())

    def __missing__(self, key: tuple[int, ...]) -> np.ndarray:
        fixed = [self.state(v, s) for v, s in zip(self.others, key, strict=True)
                 if v in self.scope]
        values = self.factor.reduce(fixed, inplace=False).values
        self[key] = p = values / sum(values)
        return p


def _lazy_sampler(model: Any) -> Any:
    """pgmpy's ``GibbsSampling`` on ``model`` with :class:`_LazyKernel` kernels."""
    from pgmpy.factors import factor_product
    from pgmpy.sampling import GibbsSampling
    from pgmpy.sampling.Sampling import State

    g = GibbsSampling()
    g.variables = np.array(model.nodes())
    g.latents = model.latents
    g.cardinalities = {v: model.get_cpds(v).variable_card for v in g.variables}
    for var in g.variables:
        factors = [cpd.to_factor() for cpd in model.cpds if var in cpd.scope()]
        others = [v for v in g.variables if v != var]
        g.transition_models[var] = _LazyKernel(factor_product(*factors), others, State)
    return g
