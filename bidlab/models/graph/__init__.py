"""Graph models: :class:`PageRank`, power iteration as a sparse mat-vec per pass (or
Gauss-Seidel sweeps on small graphs).

Modules: ``estimator`` (the scikit-learn face), ``model`` (the engine on the Learner),
``transition`` (input checks, the transition matrix and the vertex weight vectors),
``stopping`` (how a run stands, in words).
"""

from bidlab.models.graph.estimator import PageRank

__all__ = ["PageRank"]
