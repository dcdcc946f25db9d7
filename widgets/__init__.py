"""Live dashboards for bidlab learners in JupyterLab (needs the ``viz`` extra).

Training runs in a background thread; one pump thread per learner turns its snapshots
into widget and bokeh updates at most ten times a second (see ``_pump``). BokehJS is
loaded inline, so the charts work offline.

* :class:`Dashboard` -- buttons, state, progress, score curves, throughput and controls
  generated from the learner's live options.
* :class:`TopicBubbles` -- the LDA word x topic bubble chart with per-parameter
  temperatures (SAME Gibbs).
* :class:`IntertopicMap` -- the LDA intertopic map; merge, split or delete topics from it.
* :class:`SweepView` -- a GLM hyperparameter sweep, one curve per configuration.
* :class:`KMeansView` -- k-means cluster sizes and centre movement.
* :class:`SimilarItemsView` -- an SFA learner's "similar items to ..." list, RMSE and p@10.
* :class:`BayesNetView` -- a Bayesian network's marginals as bars; a click sets evidence.
"""

from ._bokeh import LiveBokeh, load_bokehjs
from ._pump import MAX_RATE, Pump, View, pump_for
from .bayesnet_view import BayesNetView
from .dashboard import Dashboard
from .intertopic import IntertopicMap
from .kmeans_view import KMeansView
from .sfa_view import SimilarItemsView, similar_titles
from .sweep import SweepView
from .topics import TopicBubbles, supports_temperature

__all__ = [
    "MAX_RATE",
    "BayesNetView",
    "Dashboard",
    "IntertopicMap",
    "KMeansView",
    "LiveBokeh",
    "Pump",
    "SimilarItemsView",
    "SweepView",
    "TopicBubbles",
    "View",
    "load_bokehjs",
    "pump_for",
    "similar_titles",
    "supports_temperature",
]
