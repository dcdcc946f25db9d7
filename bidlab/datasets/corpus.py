"""``Corpus``: a documents x vocabulary count matrix with its words, labels and ids.

Every text loader and the synthetic topic-model generators return one. ``X`` is always a
canonical ``scipy.sparse.csr_matrix`` (sorted column indices, no duplicates), one row per
document, so it can be handed to :class:`bidlab.SMat` or to scikit-learn unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(repr=False)
class Corpus:
    """A bag-of-words corpus: ``X[d, w]`` is how often word ``vocab[w]`` occurs in document d.

    Attributes
    ----------
    X
        documents x vocabulary counts, canonical CSR.
    vocab
        the column names (``len(vocab) == X.shape[1]``).
    labels
        one integer class per document (an index into ``label_names``), or None.
    label_names
        the class names, or None.
    doc_ids
        one id per document (UCI document numbers, file paths), or None.
    name
        a short name for printing.
    topics
        planted topics (k x vocabulary, rows sum to 1), synthetic corpora only.
    theta
        planted document-topic proportions (documents x k), synthetic corpora only.
    """

    X: sp.csr_matrix
    vocab: list[str]
    labels: np.ndarray | None = None
    label_names: list[str] | None = None
    doc_ids: np.ndarray | None = None
    name: str = ""
    topics: np.ndarray | None = None
    theta: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not sp.issparse(self.X) or self.X.format != "csr":
            raise TypeError(f"Corpus.X must be a scipy CSR matrix, got {type(self.X).__name__}")
        n_docs, n_words = self.X.shape
        if len(self.vocab) != n_words:
            raise ValueError(
                f"Corpus {self.name!r}: vocab has {len(self.vocab)} words but X has "
                f"{n_words} columns"
            )
        for attr in ("labels", "doc_ids", "theta"):
            value = getattr(self, attr)
            if value is not None and len(value) != n_docs:
                raise ValueError(
                    f"Corpus {self.name!r}: {attr} has {len(value)} entries but X has "
                    f"{n_docs} documents"
                )
        if self.topics is not None and self.topics.shape[1] != n_words:
            raise ValueError(
                f"Corpus {self.name!r}: topics have {self.topics.shape[1]} words but X has "
                f"{n_words} columns"
            )

    @property
    def n_docs(self) -> int:
        """Number of documents (rows of X)."""
        return self.X.shape[0]

    @property
    def n_words(self) -> int:
        """Vocabulary size (columns of X)."""
        return self.X.shape[1]

    @property
    def n_tokens(self) -> int:
        """Total count: the number of word tokens in the corpus."""
        return int(round(float(self.X.sum())))

    @property
    def doc_lengths(self) -> np.ndarray:
        """Tokens per document, shape (n_docs,)."""
        return np.asarray(self.X.sum(axis=1)).ravel()

    def top_words(self, n: int = 10, topics: np.ndarray | None = None) -> list[list[str]]:
        """The ``n`` most probable words of each row of ``topics`` (default: the planted ones).

        ``topics`` is any k x vocabulary weight matrix, e.g. a trained model's topics.
        """
        return top_words(self.topics if topics is None else topics, self.vocab, n)

    def __repr__(self) -> str:
        labels = "" if self.label_names is None else f", {len(self.label_names)} labels"
        topics = "" if self.topics is None else f", {self.topics.shape[0]} planted topics"
        return (
            f"Corpus({self.name!r}: {self.n_docs} docs x {self.n_words} words, "
            f"nnz={self.X.nnz}, tokens={self.n_tokens}{labels}{topics})"
        )


def top_words(topics: np.ndarray | None, vocab: Sequence[str], n: int = 10) -> list[list[str]]:
    """For each row of a k x vocabulary matrix, its ``n`` highest-weighted words, best first."""
    if topics is None:
        raise ValueError("no topics to rank: this corpus has no planted topics; pass topics=")
    topics = np.asarray(topics)
    if topics.ndim != 2 or topics.shape[1] != len(vocab):
        raise ValueError(
            f"topics must be k x {len(vocab)} (one column per vocabulary word), "
            f"got shape {topics.shape}"
        )
    n = min(n, topics.shape[1])
    best = np.argsort(-topics, axis=1, kind="stable")[:, :n]
    return [[vocab[j] for j in row] for row in best]


def counts_csr(
    rows: np.ndarray,
    cols: np.ndarray,
    values: np.ndarray | None,
    shape: tuple[int, int],
    dtype: np.dtype | type = np.float32,
) -> sp.csr_matrix:
    """A canonical CSR matrix from (row, col, value) triples; repeated entries are summed.

    ``values=None`` counts each (row, col) pair once per occurrence (token lists).
    """
    if values is None:
        values = np.ones(len(rows), dtype=dtype)
    X = sp.coo_matrix((values, (rows, cols)), shape=shape).tocsr()
    X.sum_duplicates()
    X.sort_indices()
    if X.dtype != np.dtype(dtype):
        X = X.astype(dtype)
    return X


def canonical_csr(X: sp.spmatrix, dtype: np.dtype | type | None = None) -> sp.csr_matrix:
    """``X`` as a csr_matrix with sorted indices, no duplicates, no stored zeros."""
    X = sp.csr_matrix(X)
    X.sum_duplicates()
    X.eliminate_zeros()
    X.sort_indices()
    if dtype is not None and X.dtype != np.dtype(dtype):
        X = X.astype(dtype)
    return X
