"""How a PageRank run stands, in words: the end of ``bidlab train pagerank`` and the
``ConvergenceWarning`` of ``PageRank.fit`` (:class:`~bidlab.models.graph.model.PageRankModel`
is the run)."""

from __future__ import annotations

from typing import Any

__all__ = ["stop_text"]


def stop_text(model: Any) -> str:
    """How the run stands, in words: converged or not, the last change against the
    tolerance ``tol * n``, and the way out when the tolerance was not reached."""
    n_it, limit = int(model.n_iter), float(model.opts.tol) * model.n
    what = "Gauss-Seidel sweeps" if model.sweeping else "iterations"
    longer = "train longer (more passes: n_passes, by default max_iter + 1)"
    if not n_it:
        return (f"stopped before the change of an iteration was measured (tolerance "
                f"tol x n = {limit:.3g}): {longer}")
    r = float(model.residuals[n_it - 1])
    side = "below" if model.reached_tol else "above"
    text = f"the last changed the scores by {r:.3g} in L1 norm"
    if not model.sweeping:
        text += f", {side} the tolerance tol x n = {limit:.3g}"
    elif model.reached_tol and model.last_bound >= limit:
        text += (f": the rounding level of {model.modelmats[0].data.dtype} scores, where "
                 "further sweeps change nothing")
    elif model.last_bound == model.last_bound:  # (NaN in a model saved without it)
        text += (f"; divided by damping x their total, {model.last_bound:.3g}, {side} the "
                 f"tolerance tol x n = {limit:.3g}")
    if model.reached_tol:
        return f"converged in {n_it} {what} ({text})"
    if not model.converged:
        return f"stopped after {n_it} {what}, before converging ({text}): {longer}"
    fix = "raise max_iter (or tol)"
    if model.sweeping and r < limit:
        fix += (", or use method='power', which stops when the change itself is below "
                "tol x n (as it is here)")
    return f"did not converge in max_iter={n_it} {what} ({text}): {fix}"
