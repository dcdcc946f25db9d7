"""Data for bidlab: loaders for the shared offline data sets and synthetic generators.

Samples are rows. Count data comes back as a :class:`Corpus` whose ``X`` is a canonical
documents x vocabulary ``scipy.sparse.csr_matrix``; svmlight data as ``(X, y)``. Pure
numpy / scipy / scikit-learn: nothing here touches the matrix core or a GPU.

Real data (see ``shared/data/README.md``): :func:`load_kos`, :func:`load_20newsgroups`,
:func:`load_a9a`, :func:`load_w8a`, :func:`load_movielens` (ratings; any ratings CSV:
:func:`read_ratings_csv`), found through :func:`shared_data_dir`. General loaders:
:func:`load_uci_bow`, :func:`load_text_folder`, :func:`load_svmlight`; graphs:
:func:`load_snap_edges` (SNAP edge lists), :func:`load_matrix_market`. Synthetic data with
planted answers: :func:`synthetic_lda_corpus`, :func:`block_diagonal_corpus`,
:func:`synthetic_glm`, :func:`blobs`, :func:`sparse_blobs`.
"""

from bidlab.datasets.blobs import Blobs, blobs, sparse_blobs
from bidlab.datasets.corpus import Corpus, canonical_csr, counts_csr, top_words
from bidlab.datasets.graphs import EdgeList, load_matrix_market, load_snap_edges
from bidlab.datasets.movielens import Ratings, RatingsSplit, load_movielens, read_ratings_csv
from bidlab.datasets.newsgroups import (
    load_20newsgroups,
    newsgroups_tfidf,
    strip_footer,
    strip_headers,
    strip_quotes,
)
from bidlab.datasets.paths import shared_data_dir
from bidlab.datasets.svmlight import TrainTest, load_a9a, load_svmlight, load_w8a
from bidlab.datasets.synthetic_corpus import (
    block_diagonal_corpus,
    planted_topics,
    sample_counts,
    synthetic_lda_corpus,
)
from bidlab.datasets.synthetic_glm import GLMData, synthetic_glm
from bidlab.datasets.text import load_text_folder, read_text_documents
from bidlab.datasets.uci import load_kos, load_uci_bow, parse_docword

__all__ = [
    "Blobs",
    "Corpus",
    "EdgeList",
    "Ratings",
    "RatingsSplit",
    "GLMData",
    "TrainTest",
    "blobs",
    "block_diagonal_corpus",
    "canonical_csr",
    "counts_csr",
    "load_20newsgroups",
    "load_a9a",
    "load_kos",
    "load_matrix_market",
    "load_movielens",
    "load_snap_edges",
    "load_svmlight",
    "load_text_folder",
    "load_uci_bow",
    "load_w8a",
    "newsgroups_tfidf",
    "parse_docword",
    "planted_topics",
    "read_ratings_csv",
    "read_text_documents",
    "sample_counts",
    "shared_data_dir",
    "sparse_blobs",
    "strip_footer",
    "strip_headers",
    "strip_quotes",
    "synthetic_glm",
    "synthetic_lda_corpus",
    "top_words",
]
