"""LDA's bad input: each error names the problem (both numbers for a mismatch) and the fix."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError

from bidlab.datasets import block_diagonal_corpus
from bidlab.learn import OptionError
from bidlab.models import LDA, LDAGibbs


@pytest.fixture(scope="module")
def X():
    return block_diagonal_corpus(k=3, words_per_topic=4, n_docs=60, doc_len=20).X


@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
def test_negative_nan_and_infinite_counts_are_refused_with_their_position(cls, X):
    for bad, what in ((-1.0, "negative"), (np.nan, "NaN or infinite"),
                      (np.inf, "NaN or infinite")):
        Y = X.copy().tolil()
        Y[5, 2] = bad
        with pytest.raises(ValueError, match=rf"{what} counts \(first at document 5, word 2\)"):
            cls(3, n_passes=1).fit(Y.tocsr())
    dense = X.toarray()
    dense[7, 1] = -3
    with pytest.raises(ValueError, match=r"negative counts \(first at document 7, word 1\)"):
        cls(3, n_passes=1).fit(dense)


def test_gibbs_refuses_fractional_counts_and_vb_accepts_them(X):
    Y = X.copy()
    Y.data = Y.data * 0.5
    msg = r"non-integer count \d+\.5 at document 0, word \d+.*round them"
    with pytest.raises(ValueError, match=msg):
        LDAGibbs(3, n_passes=1).fit(Y)
    model = LDA(3, n_passes=2, batch_size=20).fit(Y)  # variational LDA takes weights
    assert np.isfinite(model.components_).all()


@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
def test_vocabulary_mismatch_names_both_sizes(cls, X):
    model = cls(3, n_passes=1).fit(X)
    wrong = sp.csr_matrix((4, X.shape[1] + 5), dtype=np.float32)
    for call in (model.transform, model.score, model.partial_fit):
        with pytest.raises(ValueError, match=rf"X has {X.shape[1] + 5} features, but "
                                             rf"{cls.__name__} is expecting {X.shape[1]} "
                                             r"features .*training vocabulary"):
            call(wrong)


@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
@pytest.mark.parametrize("kw,msg", [
    ({"n_components": 0}, r"'n_components' parameter of LDA\w* must be an int >= 1\. Got 0"),
    ({"n_components": 2.5}, r"'n_components' parameter .* Got 2\.5"),
    ({"alpha": 0.0}, r"'alpha' parameter .* > 0\. Got 0 instead"),
    ({"alpha": -1}, r"'alpha' parameter .* Got -1"),
    ({"beta": 0}, r"'beta' parameter .* Got 0"),
    ({"beta": float("nan")}, r"'beta' parameter .* Got nan"),
    ({"batch_size": 0}, r"'batch_size' parameter"),
    ({"kappa": 0.3}, r"'kappa' parameter .* \(0\.5, 1\]"),
    ({"dtype": np.int32}, r"'dtype' parameter .* float32 or float64"),
    ({"init": "magic"}, r"'init' parameter .* one of 'random', 'kmeans'"),
    ({"random_state": -1}, r"'random_state' parameter .* an int in \[0, 2\*\*32\)"),
    ({"device": "tpu"}, r"'device' parameter .* 'cpu', 'gpu' or None"),
])
def test_bad_parameters_are_refused_by_fit_with_one_message_shape(cls, kw, msg, X):
    args = {"n_components": 3, **kw}
    model = cls(**args)  # __init__ only stores (scikit-learn's contract)
    assert model.get_params()[next(iter(kw))] is kw[next(iter(kw))]
    for call in (model.fit, model.partial_fit, model.learner):
        with pytest.raises(OptionError, match=msg):
            call(X)
    assert not hasattr(model, "model_")


def test_bad_method_and_sampler_parameters(X):
    with pytest.raises(ValueError, match=r"'method' parameter of LDA must be 'online' or "
                                         r"'batch' \(.*LDAGibbs\)\. Got 'gibbs'"):
        LDA(3, "gibbs").fit(X)
    with pytest.raises(ValueError, match=r"'nsamps' parameter of LDAGibbs .* > 0\. Got 0"):
        LDAGibbs(3, nsamps=0).fit(X)
    with pytest.raises(ValueError, match=r"'anneal' parameter .* Got 'fast'"):
        LDAGibbs(3, anneal="fast").fit(X)


def test_temperature_must_be_positive_and_inside_the_matrix(X):
    model = LDAGibbs(3, 10, n_passes=1).fit(X)
    V = X.shape[1]
    for bad in (0.0, -2.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match=r"'temperature' parameter .* > 0"):
            model.set_temperature(bad, topic=0, word=0)
    with pytest.raises(IndexError, match=rf"\(topic=3, word=None\) is outside the k x "
                                         rf"vocabulary = 3 x {V} temperature matrix"):
        model.set_temperature(2.0, topic=3)
    with pytest.raises(IndexError, match=rf"word must be in 0\.\.{V - 1}"):
        model.set_temperature(2.0, topic=0, word=V)
    with pytest.raises(IndexError, match="outside"):
        model.set_temperature(2.0, word=-1)
    with pytest.raises(TypeError, match="must be an int"):
        model.set_temperature(2.0, topic=1.5)
    assert model.temperature_log_ == [], "refused changes are not logged"
    with pytest.raises(RuntimeError, match="not fitted yet"):
        LDAGibbs(3).set_temperature(2.0)


@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
def test_not_fitted_and_wrong_shapes(cls, X):
    for call in (cls(3).transform, cls(3).score):
        with pytest.raises(NotFittedError, match=rf"This {cls.__name__} instance is not "
                                                 "fitted yet"):
            call(X)
    with pytest.raises(NotFittedError):
        cls(3).components_  # noqa: B018
    model = cls(3, n_passes=1).fit(X)
    with pytest.raises(ValueError, match=r"2-D \(documents x vocabulary\); got shape \(12,\)"):
        model.transform(np.ones(12))


def test_all_empty_documents_are_refused(X):
    with pytest.raises(ValueError, match="every document of X is empty"):
        LDA(3).fit(sp.csr_matrix(X.shape, dtype=np.float32))


def test_wrong_shapes(X):
    with pytest.raises(ValueError, match=r"2-D \(documents x vocabulary\); got shape \(5,\)"):
        LDA(3).fit(np.ones(5))
    with pytest.raises(AttributeError, match="LDAGibbs"):
        LDA(3, n_passes=1).learner(X).set_temperature(2.0)


@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
def test_raw_text_is_refused_with_the_way_to_count_it(cls):
    X = block_diagonal_corpus(k=3, words_per_topic=10, n_docs=60, seed=0).X
    model = cls(3, n_passes=1, random_state=0).fit(X)
    for text in (["a document", "another one"], "one document",
                 np.array(["a document", "another"])):
        with pytest.raises(TypeError, match="X holds text.*transform_texts"):
            model.transform(text)
        with pytest.raises(TypeError, match="X holds text.*CountVectorizer"):
            cls(3).fit(text)
