"""Models: one package per model family, each with a scikit-learn surface and a live ``.learner()``.

* :class:`LDA`: topic models by online or batch variational Bayes;
* :class:`LDAGibbs`: SAME Gibbs sampling with per-parameter temperatures;
* :class:`GLM`: linear / logistic / softmax / SVM, many targets (or a sweep) in one pass;
  :func:`glm_sweep` builds a sweep, :func:`best_config` picks its winner;
* :class:`KMeans`: Lloyd's algorithm by GEMM distances, and a minibatch variant;
* :class:`NMF`: nonnegative matrix factorisation, over the observed entries only where
  some are missing;
* :class:`SFA`: matrix factorisation by ALS with conjugate gradient (ratings, implicit
  feedback);
* :class:`PageRank`: PageRank by power iteration, one sparse mat-vec per pass;
* :class:`BayesNet`: Bayesian networks: Gibbs marginals with evidence, SAME Gibbs-EM;
* :class:`~bidlab.models.lsq.LeastSquares`: the spine's small reference model (a bare
  :class:`bidlab.learn.Model`, trained by a :class:`bidlab.learn.Learner` directly).

Every estimator saves itself with ``est.save(path)`` (the pickle-free safe format);
:func:`load` reads any of them back.
"""

# first, a kernel module (before scikit-learn's second of imports): on a fresh installation
# registering its kernels starts the background compiler (bidlab.kern.standin.prestart),
# which sets itself up while the rest is imported and the data loads
from bidlab.kern import csr_rows as _csr_rows  # noqa: F401  isort: skip
from bidlab.models.base import BidlabEstimator, load
from bidlab.models.bayesnet import BayesNet
from bidlab.models.glm import GLM, best_config, glm_sweep
from bidlab.models.graph import PageRank
from bidlab.models.kmeans import KMeans
from bidlab.models.lda import LDA, LDAGibbs
from bidlab.models.lsq import LeastSquares
from bidlab.models.nmf import NMF
from bidlab.models.sfa import SFA

__all__ = ["LDA", "LDAGibbs", "GLM", "KMeans", "NMF", "SFA", "PageRank", "LeastSquares",
           "BidlabEstimator", "load", "glm_sweep", "best_config"]
__all__ += ["BayesNet"]


# -- modules of earlier versions ------------------------------------------------------------
# Before one package per family, the engines lived in flat modules (bidlab.models._glm_model,
# ...). A pickle names a class by its module, so those names resolve to the modules the
# classes live in now (bidlab.learn.persistable.MOVED_MODULES; the safe format uses the
# same table). Only names that no longer exist are mapped.
def _install_moved_modules() -> None:
    import importlib
    import importlib.abc
    import importlib.util
    import sys

    from bidlab.learn.persistable import MOVED_MODULES

    old = {k: v for k, v in MOVED_MODULES.items()
           if k.rpartition(".")[2].startswith("_") or k.endswith(".lda_gibbs")}

    class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname: str, path: object, target: object = None) -> object:
            if fullname not in old:
                return None
            return importlib.util.spec_from_loader(fullname, self)

        def exec_module(self, module: object) -> None:
            now = importlib.import_module(old[module.__name__])
            module.__dict__.update({k: v for k, v in vars(now).items()
                                    if not k.startswith("__")})

    if not any(type(f).__name__ == "MovedModules" for f in sys.meta_path):
        sys.meta_path.append(MovedModules())


_install_moved_modules()
