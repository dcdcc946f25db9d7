"""Cells several demo notebooks share: the data folder parameter, the loader that falls
back to synthetic data, and the wait for a live learner to finish its passes."""

from __future__ import annotations

DATA_PARAM = '''# parameters
# The folder holding the shared data sets (uci-kos/, libsvm-a9a/, ...). None: found by
# bidlab.datasets.shared_data_dir ($BIDLAB_SHARED_DATA, else shared/data beside the checkout).
DATA = None'''

LOAD_DATA = '''from pathlib import Path

from bidlab.datasets import shared_data_dir


def data_dir(name):
    """The data set's folder, or None (then the synthetic fallback is used)."""
    try:
        base = Path(DATA) if DATA is not None else shared_data_dir()
    except FileNotFoundError:
        base = None
    if base is not None and (base / name).is_dir():
        return base / name
    print(f"note: {name}/ not found in {base or 'the shared data folders'}: using synthetic "
          "data instead (set DATA, or $BIDLAB_SHARED_DATA, to the folder that holds the "
          "shared data sets)")
    return None'''

WAIT_NOTE = ("## The trained model\n\n"
             "The next cell waits until the learner has run its `NPASSES` passes (the views "
             "above keep updating), so a headless run or *Run All* ends with the trained "
             "model. It does not wait when the passes would take longer than `MAX_WAIT_S` "
             "seconds: the learner then keeps training and the cells below show the model so "
             "far. While the cell waits the kernel is busy, so clicks on the views take effect "
             "when it returns; to steer the learner by hand, raise `NPASSES` or run the cells "
             "above one at a time.")

WAIT = '''import math
import time


def wait_for_passes(learner, max_seconds):
    """True once the learner is done; False, leaving it training, when its passes would
    end more than max_seconds after the wait began, or max_seconds have passed. The pace
    is judged over a pass after the first (the first also compiles the kernels)."""
    start = time.monotonic()
    mark = None  # (seconds waited, progress) once the first pass is done
    while not learner.join(timeout=0.25):  # a training failure re-raises here
        m = learner.metrics
        waited = time.monotonic() - start
        if mark is None and m["pass"] >= 1:
            mark = (waited, m["progress"])
        elif mark is not None and m["progress"] - mark[1] >= 1 / m["n_passes"]:
            pace = (waited - mark[0]) / (m["progress"] - mark[1])  # seconds per whole fit
            if waited + pace * (1 - m["progress"]) > max_seconds:
                return False
        if waited > max_seconds:
            return False
    return True


finished = wait_for_passes(learner, MAX_WAIT_S)
m = learner.metrics
print(f"state: {m['state']}, passes: {m['pass']}/{m['n_passes']}, minibatches: {m['step']}, "
      f"progress: {learner.progress:.0%}")
scores = [f"{part} {m[part + '_score']:.5g}" for part in ("train", "val")
          if math.isfinite(m[part + "_score"])]
if scores:  # sampling a posterior (BayesNet inference) has no score
    print(f"last {m['score_name']}: " + ", ".join(scores))
if not finished:
    print(f"not waiting: the passes take longer than MAX_WAIT_S = {MAX_WAIT_S} s; the learner "
          "keeps training, and the cells below show the model so far")'''

WAIT_PARAM = "\nMAX_WAIT_S = 120  # the last cells wait at most this long for the trained model"


def corpus_cell(loader: str, folder: str, load: str, n_docs: str, k: str, rest: str,
                extra_import: str = "") -> str:
    """The cell that loads a corpus, or planted synthetic topics when it is absent.

    ``loader`` is the ``bidlab.datasets`` function the cell imports, ``folder`` the data
    set's folder name, ``load`` the call that reads it, ``n_docs`` and ``k`` the sizes of
    the synthetic stand-in (expressions in the notebook's parameters) and ``rest`` the lines
    that follow.
    """
    imports = f"from bidlab.datasets import {loader}, synthetic_lda_corpus\n{extra_import}"
    return (f'{imports}\nfolder = data_dir("{folder}")\nif folder:\n    corpus = {load}\n'
            f"else:\n    corpus = synthetic_lda_corpus(n_docs={n_docs}, n_words=2000, "
            f"k={k}, seed=0)\n"
            f"{rest}")
