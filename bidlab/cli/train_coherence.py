"""``bidlab train lda|ldagibbs --coherence MEASURE``: train a pass at a time and print,
after each, the pass (of all of them), its training score and the topics' coherence."""

from __future__ import annotations

import math
import sys
import time
from typing import Any

__all__ = ["train_pass_by_pass"]


def train_pass_by_pass(job: Any, learner: Any, measure: str) -> int:
    """Run ``job.train`` one pass at a time up to the learner's ``n_passes``, printing one
    line a pass to stderr (``pass 2/10: train -7.41  2.3s  coherence c_v 0.512``); the
    exit code of the first run that fails, else 0.

    Each run is one pass long, so the learner's own progress would count every pass as
    its last (``pass 1/1``, ``2/2``): it is off meanwhile and these lines take its place.
    """
    total = int(learner.opts.n_passes)
    shown, job.args.progress = job.args.progress, "none"
    try:
        for p in range(int(learner.metrics["pass"]), total):
            learner.set(n_passes=p + 1)
            start = time.perf_counter()
            code = job.train(learner)
            if code != 0:
                return code
            score = learner.metrics.get("pass_train_score", math.nan)
            trained = f"train {score:.6g}  " if score == score else ""
            print(f"pass {p + 1}/{total}: {trained}{time.perf_counter() - start:.1f}s  "
                  f"coherence {measure} {learner.coherence(measure=measure):.6g}",
                  file=sys.stderr, flush=True)
    finally:
        job.args.progress = shown
    return 0
