"""The documentation site's pages: which files make the guide, and the API reference.

The guide pages are the checkout's own Markdown files and notebooks (one source each, so
the site never drifts from them); the API reference is written here as reStructuredText
that autodoc fills from the docstrings (numpy style, read by napoleon).
"""

from __future__ import annotations

__all__ = ["API", "GUIDE", "NOTEBOOK_GLOB", "api_page", "index_page"]

#: Markdown pages from the top of the checkout: (file, title)
GUIDE = (("README.md", "Overview"), ("ARCHITECTURE.md", "Architecture"),
         ("BENCHMARKS.md", "Benchmarks"), ("DEVELOPERS.md", "Developing"))
#: the notebooks rendered, with the outputs they were saved with (not executed again)
NOTEBOOK_GLOB = "notebooks/*.ipynb"
#: API reference: page name -> (title, module, public names documented on it)
API: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "models": ("Models", "bidlab.models",
               ("LDA", "LDAGibbs", "GLM", "KMeans", "NMF", "SFA", "PageRank", "BayesNet",
                "LeastSquares", "glm_sweep", "best_config", "load")),
    "datasets": ("Data sets", "bidlab.datasets",
                 ("load_kos", "load_uci_bow", "load_20newsgroups", "load_a9a", "load_w8a",
                  "load_svmlight", "load_text_folder", "load_snap_edges",
                  "load_matrix_market", "load_movielens", "read_ratings_csv",
                  "shared_data_dir", "synthetic_lda_corpus", "block_diagonal_corpus",
                  "synthetic_glm", "blobs", "sparse_blobs", "Corpus")),
    "core": ("Matrix core", "bidlab", ("Mat", "SMat", "caching", "cache_stats", "scalar",
                                       "sddmm", "expdigamma", "dense_sparse_t")),
    "widgets": ("Live views", "bidlab.widgets",
                ("Dashboard", "TopicBubbles", "IntertopicMap", "SweepView", "KMeansView",
                 "SimilarItemsView", "BayesNetView")),
}


def api_page(name: str, kinds: dict[str, str]) -> str:
    """The reStructuredText of API page ``name``; ``kinds`` maps each public name to its
    autodoc directive (``"class"`` or ``"function"``; a name missing there is left out)."""
    title, module, names = API[name]
    lines = [title, "=" * len(title), "", f".. currentmodule:: {module}", "",
             f".. automodule:: {module}", "   :no-members:", ""]
    for obj in names:
        if obj in kinds:
            lines += [f".. auto{kinds[obj]}:: {obj}", ""]
    return "\n".join(lines)


def index_page(guide: list[str], notebooks: list[str]) -> str:
    """The front page (Markdown): the guide, the notebooks, the API reference."""
    def tree(caption: str, entries: list[str]) -> list[str]:
        return ["```{toctree}", ":maxdepth: 1", f":caption: {caption}", "", *entries, "```",
                ""]

    return "\n".join(["# bidlab", "",
                      "Fast, interactive machine learning for Jupyter.", "",
                      *tree("Guide", guide), *tree("Notebooks", notebooks),
                      *tree("API reference", [f"api/{n}" for n in API])])
