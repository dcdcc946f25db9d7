"""What ``bidlab train`` says when it resumes ``--checkpoint``: where the run goes on from
(and a warning when the checkpoint has made every pass asked for, so nothing would be
trained), and why a checkpoint whose model matrices have other shapes than the command's
options make is refused (the model options it was made with that differ from them)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["resumed_text", "reshaped_text"]

#: options that seed the model, never shape it: left out of a reshaped checkpoint's causes
_SEEDS = ("random_state", "seed")


def resumed_text(learner: Any, checkpoint: str) -> str:
    """The pass and step ``learner`` (``checkpoint`` loaded, the command's options set)
    goes on from, and a warning when the checkpoint has made every pass ``--n_passes``
    asks for, so the run would train nothing and end at once: how to train more."""
    made, n = learner.metrics["pass"], learner.opts.n_passes
    text = f"resuming from {checkpoint} at pass {made + 1}, step {learner.step}"
    if made >= n:
        text += (f"\nwarning: {checkpoint} has made {made} passes and these options ask for "
                 f"{n} in all (--n_passes, which counts the passes made), so this run trains "
                 f"none: give --n_passes {made + n} to train {n} more, or add --restart to "
                 "train anew")
    return text


def reshaped_text(checkpoint: str, opts: Any, built: dict[str, Any],
                  params: dict[str, Any], loaded: list[tuple[int, ...]],
                  made: list[tuple[int, ...]]) -> str:
    """Why ``checkpoint`` (loaded into the learner whose options are ``opts``) cannot be
    resumed: its model matrices have shapes ``loaded``, and the command's options (the
    values ``built``, of which ``params`` were given on the command line) make ``made``.
    Names the model's fixed options whose saved values differ from the command's (an
    option left at its default differs as much as a given one), else the given flags."""
    differ = [f"{k}={opts.get(k)!r} (these options make {built[k]!r})"
              for k, spec in opts.specs.items()
              if spec.owner != "Learner" and not spec.live and k in built
              and k not in _SEEDS and not _equal(opts.get(k), built[k])]
    head = (f"cannot resume: checkpoint {checkpoint} has model matrices of shapes {loaded}, "
            "but these options")
    if differ:
        return f"{head} make {made}: it was made with the model's {', '.join(differ)}."
    flags = " ".join(f"--{k} {v}" for k, v in params.items())
    return f"{head} ({flags}) make {made}."


def _equal(a: Any, b: Any) -> bool:
    """Whether two option values are equal (arrays elementwise, never ambiguous)."""
    try:
        return bool(np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object)))
    except (TypeError, ValueError):
        return a is b
