"""The cells of the demo notebooks, one module a notebook (``common`` holds the cells several
share): each module's ``CELLS`` lists ``(kind, source)`` pairs, kind ``"markdown"`` or
``"code"``. :data:`NOTEBOOKS` maps each notebook's file name to its cells, in the order
``make_notebooks.py`` writes them.
"""

from __future__ import annotations

from . import (
    distributed,
    factor_models,
    glm_sweep,
    graphs_bayesnets,
    kmeans,
    lda_live,
    quickstart,
    topic_steering,
)

__all__ = ["NOTEBOOKS"]

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {
    "01_quickstart.ipynb": quickstart.CELLS,
    "02_lda_live.ipynb": lda_live.CELLS,
    "03_glm_sweep.ipynb": glm_sweep.CELLS,
    "04_kmeans.ipynb": kmeans.CELLS,
    "08_topic_steering.ipynb": topic_steering.CELLS,
    "05_factor_models.ipynb": factor_models.CELLS,
    "06_graphs_bayesnets.ipynb": graphs_bayesnets.CELLS,
    "07_distributed.ipynb": distributed.CELLS,
}
