"""Benchmark programs, run as ``python -m bidlab.bench <name> [--json] [args...]``.

Each module here is one benchmark with a ``main(argv: list[str] | None = None) -> int``
entry point; :mod:`bidlab.bench.__main__` dispatches to it by name. They are programs that
print measured figures (and ratios against targets), never timed pass/fail tests.
"""

from __future__ import annotations

BENCHMARKS: dict[str, str] = {
    "kernels": "the CPU kernels vs the triad-bandwidth roofline and numpy/scipy",
    "cache": "the LDA E-step loop with the result cache on and off",
    "learner": "what the learner costs on top of the model",
    "lda": "LDA three ways against its peers",
    "glm": "many-target GLMs against their peers",
    "kmeans": "k-means per iteration vs scikit-learn",
    "nmf": "NMF on KOS counts vs scikit-learn (mu, cd) to the same objective",
    "dashboard": "the live dashboard (bidlab/bench/dashboard.py)",
    "temperature": "SAME Gibbs with heated parameters vs without",
    "coldstart": "first fit of a fresh process: empty kernel cache, after warmup, warm",
    "pagerank": "PageRank vs networkx, igraph, fast_pagerank, scipy (SNAP, R-MAT 2 M, 20 M)",
    "topics": "coherence vs gensim, topic-edit latency, held-out recovery after a merge",
    "sfa": "SFA (ALS by CG) vs implicit on MovieLens-small and a generated 20 M matrix",
    "distributed": "learners on MPI ranks: sparse vs dense bytes per sync, 2 ranks vs 1",
    "bayesnet": "Bayesian-network Gibbs vs exact, pyAgrum and pgmpy; SAME Gibbs-EM",
    "gibbs": "SAME Gibbs vs tomotopy to its 200-sweep held-out LL (KOS, 20news, long docs)",
    "gpu": "every GPU check in one run within a time budget: the GPU tests, each --gpu bench",
}
"""Benchmark name -> one-line summary; the name is the module ``bidlab.bench.<name>``."""
