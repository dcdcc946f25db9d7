"""Discrete Bayesian networks: BIF files, blocked Gibbs inference with evidence, and CPT
learning from data with missing entries by SAME Gibbs-EM.

Modules: ``network`` (the :class:`Network` structure and its checks), ``bif`` (BIF reader
and writer), ``colouring`` (moral graph, balanced greedy colouring), ``tables`` (the flat
arrays the kernels read), ``sampler`` (the chains: evidence, sweeps, Rao-Blackwellised
marginals, R-hat), ``anneal_start`` (starting states for observations no ancestral draw
completes), ``exact`` (brute-force marginals of small networks), ``model`` (the
engine on the Learner), ``estimator`` (the scikit-learn face, :class:`BayesNet`).
"""

from bidlab.models.bayesnet.bif import read_bif, write_bif
from bidlab.models.bayesnet.estimator import BayesNet
from bidlab.models.bayesnet.network import BayesNetError, Network

__all__ = ["BayesNet", "Network", "BayesNetError", "read_bif", "write_bif"]
