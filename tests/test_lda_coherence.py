"""UMass coherence against a direct count over document sets, and the standard library's
docstrings as a corpus."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from bidlab.datasets.docstrings import (
    DOCSTRING_STOP_WORDS,
    load_stdlib_docstrings,
    stdlib_docstrings,
)
from bidlab.models.lda.coherence import umass_coherence


def _direct(top_words: list[int], docs: list[set[int]]) -> float:
    total = 0.0
    for i in range(1, len(top_words)):
        for j in range(i):
            wi, wj = top_words[i], top_words[j]
            both = sum(1 for d in docs if wi in d and wj in d)
            total += math.log((both + 1) / max(1, sum(1 for d in docs if wj in d)))
    return total


def test_umass_matches_a_direct_count_over_document_sets():
    rng = np.random.default_rng(4)
    X = sp.random(150, 40, density=0.15, format="csr", random_state=5)
    X.data = rng.integers(1, 4, X.nnz).astype(np.float64)
    comp = rng.random((5, 40))
    docs = [set(X[d].indices.tolist()) for d in range(X.shape[0])]
    got = umass_coherence(comp, X, top=6)
    for t in range(5):
        best = np.argsort(-comp[t], kind="stable")[:6].tolist()
        assert got[t] == pytest.approx(_direct(best, docs), rel=1e-12)


def test_umass_checks_its_inputs():
    X = sp.csr_matrix(np.eye(4))
    with pytest.raises(ValueError, match="X has 4 columns but components 3 words"):
        umass_coherence(np.ones((2, 3)), X)
    with pytest.raises(ValueError, match="top must be >= 2"):
        umass_coherence(np.ones((2, 4)), X, top=1)
    with pytest.raises(ValueError, match="components must be topics x vocabulary"):
        umass_coherence(np.ones(4), X)


def test_stdlib_docstrings_corpus_is_real_text_without_stop_words():
    names, texts = stdlib_docstrings()
    assert "json" in names and any(n.startswith("socket") for n in names)
    corpus = load_stdlib_docstrings(min_tokens=30)
    assert corpus.X.shape[0] > 300 and corpus.X.shape[1] == len(corpus.vocab)
    assert np.asarray(corpus.X.sum(axis=1)).min() >= 30
    vocab = set(corpus.vocab)
    assert {"socket", "thread", "directory", "header"} <= vocab
    assert not vocab & (set(ENGLISH_STOP_WORDS) | DOCSTRING_STOP_WORDS)
    assert all(w.isalpha() and len(w) >= 3 for w in vocab)
    assert len(corpus.doc_ids) == corpus.X.shape[0]


def test_stdlib_docstrings_needs_a_folder_with_sources(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        stdlib_docstrings(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="no Python source with docstrings"):
        stdlib_docstrings(tmp_path)
