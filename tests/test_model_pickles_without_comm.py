"""A model trained on several ranks pickles and saves without its learner's communicator
(``Model.bind`` keeps it on every model; a communicator is not picklable, and an MPI
one's pickle failed the save of a ranks run and an ipyparallel pull)."""

from __future__ import annotations

import pickle

import numpy as np
import scipy.sparse as sp

from bidlab.models import GLM, LDA, NMF, SFA, KMeans, LDAGibbs, PageRank


class _Unpicklable:
    """Stands where the communicator's handle would be (an MPI one cannot be pickled)."""

    def __reduce__(self):
        raise TypeError("a communicator is not picklable")


def _data(name: str):
    rng = np.random.default_rng(0)
    if name in ("lda", "gibbs", "nmf", "sfa"):
        X = sp.random(60, 30, density=0.3, random_state=rng, format="csr")
        X.data = np.ceil(X.data * 4)
        return X, None
    if name == "pagerank":
        A = sp.random(40, 40, density=0.1, random_state=rng, format="csr")
        return A, None
    X = rng.standard_normal((60, 4))
    return X, (X[:, 0] > 0).astype(int)


MAKERS = {"lda": lambda: LDA(3, random_state=0), "gibbs": lambda: LDAGibbs(3, random_state=0),
          "nmf": lambda: NMF(3, random_state=0, max_iter=2),
          "sfa": lambda: SFA(2, max_iter=2, random_state=0),
          "kmeans": lambda: KMeans(3, random_state=0),
          "minibatch": lambda: KMeans(3, algorithm="minibatch", random_state=0),
          "glm": lambda: GLM(n_passes=1, random_state=0),
          "pagerank": lambda: PageRank(max_iter=3)}


def test_every_family_saves_and_pickles_its_model_without_the_communicator(tmp_path):
    for name, make in MAKERS.items():
        X, y = _data(name)
        est = make()
        est.fit(X) if y is None else est.fit(X, y)
        est.model_._comm = _Unpicklable()  # what Model.bind keeps on several ranks
        back = pickle.loads(pickle.dumps(est.model_))
        assert back.__dict__.get("_comm") is None, name
        est.save(tmp_path / f"{name}.npz")  # the safe format refuses unknown objects
