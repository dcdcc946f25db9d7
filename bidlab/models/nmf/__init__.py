"""Nonnegative matrix factorisation: :class:`NMF`, multiplicative updates over the observed
entries (NaN or a mask marks the missing ones), full-batch or online.

Modules: ``estimator`` (the scikit-learn face), ``model`` (the engine: the components as
the model matrix, the row factors as per-row state), ``steps`` (the multiplicative steps
and the loss on a block of rows), ``inputs`` (input checks and the masks), ``seeding``
(the NNDSVDa start).
"""

from bidlab.models.nmf.estimator import NMF

__all__ = ["NMF"]
