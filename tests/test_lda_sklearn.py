"""LDA and LDAGibbs as scikit-learn estimators: every check_estimator check, clone,
pipelines, grid search, pickling and the safe save/load."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import estimator_checks_generator, parametrize_with_checks

from bidlab.datasets import synthetic_lda_corpus
from bidlab.learn.model import MODELS
from bidlab.models import LDA, LDAGibbs
from bidlab.models.base import load

# small models, so the ~50 checks per estimator run in seconds
_FAST = {"n_components": 3, "n_passes": 2, "e_iters": 3, "e_iters_warm": 2}

# LDAGibbs draws whole tokens: it refuses fractional counts with a ValueError, and the
# checks it declares feed it non-integer data (uniform or Gaussian floats)
_GIBBS_FAILS = LDAGibbs.EXPECTED_FAILED_CHECKS


def _expected_failures(estimator):
    return _GIBBS_FAILS if isinstance(estimator, LDAGibbs) else {}


def _check_name(check):
    return getattr(check, "func", check).__name__


@parametrize_with_checks(
    [LDA(**_FAST), LDA(method="batch", **_FAST), LDAGibbs(nsamps=5, **_FAST)])
def test_sklearn_compatible(estimator, check):
    """Every check passes, except that LDAGibbs fails exactly the checks it lists as
    feeding fractional counts, each with the sampler's refusal of non-integer counts."""
    if _check_name(check) not in _expected_failures(estimator):
        check(estimator)
        return
    with pytest.raises(Exception) as info:
        check(estimator)
    assert "non-integer count" in f"{info.value} {info.value.__cause__}", info.value


def test_gibbs_lists_only_checks_that_exist():
    names = {_check_name(check) for _, check in
             estimator_checks_generator(LDAGibbs(nsamps=5, **_FAST), mark=None)}
    assert set(_GIBBS_FAILS) <= names, set(_GIBBS_FAILS) - names


@pytest.fixture(scope="module")
def corpus():
    return synthetic_lda_corpus(n_docs=300, n_words=120, k=4, doc_len=(40, 80), alpha=0.1,
                                seed=1)


MAKERS = {
    "online": lambda **kw: LDA(4, n_passes=3, batch_size=50, **kw),
    "batch": lambda **kw: LDA(4, "batch", n_passes=8, batch_size=100, **kw),
    "gibbs": lambda **kw: LDAGibbs(4, 10, n_passes=3, batch_size=50, **kw),
}


def test_models_are_registered_for_bidlab_train():
    assert MODELS["lda"] is LDA and MODELS["ldagibbs"] is LDAGibbs


@pytest.mark.parametrize("method", list(MAKERS))
def test_clone_refits_to_the_same_topics(corpus, method):
    est = MAKERS[method](alpha=0.2).fit(corpus.X)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and not hasattr(twin, "model_")
    np.testing.assert_array_equal(twin.fit(corpus.X).components_, est.components_)


@pytest.mark.parametrize("method", list(MAKERS))
def test_pickle_joblib_and_save_load_give_identical_transforms(corpus, method, tmp_path):
    est = MAKERS[method]().fit(corpus.X[:250])
    X = corpus.X[250:]
    want = est.transform(X)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.transform(X), want)
    joblib.dump(est, tmp_path / "est.joblib")
    np.testing.assert_array_equal(joblib.load(tmp_path / "est.joblib").transform(X), want)
    est.save(tmp_path / "est.bidlab")
    loaded = type(est).load(tmp_path / "est.bidlab")
    assert type(loaded) is type(est) and loaded.get_params() == est.get_params()
    np.testing.assert_array_equal(loaded.transform(X), want)
    np.testing.assert_array_equal(load(tmp_path / "est.bidlab").components_, est.components_)
    assert loaded.score(X) == est.score(X)
    # a loaded model trains on: partial_fit continues it like the original
    est.partial_fit(X)
    loaded.partial_fit(X)
    np.testing.assert_array_equal(loaded.components_, est.components_)


def test_pipeline_with_countvectorizer_and_grid_search():
    rng = np.random.default_rng(0)
    topics = [["apple", "pear", "plum", "fig"], ["car", "bus", "train", "tram"],
              ["red", "blue", "green", "pink"]]
    docs = [" ".join(rng.choice(topics[i % 3], size=12)) for i in range(90)]
    pipe = Pipeline([("counts", CountVectorizer()),
                     ("lda", LDA(3, n_passes=5, batch_size=30))])
    theta = pipe.fit_transform(docs)
    assert theta.shape == (90, 3) and np.allclose(theta.sum(axis=1), 1.0)
    assert (theta.argmax(axis=1)[:3].size == 3) and len(set(theta.argmax(axis=1)[:30])) == 3
    names = pipe.named_steps["counts"].get_feature_names_out()
    words = pipe.named_steps["lda"].top_words(4, vocab=list(names))
    assert sorted(sorted(w) for w in words) == sorted(sorted(t) for t in topics)
    assert list(pipe.get_feature_names_out()) == ["lda0", "lda1", "lda2"]
    search = GridSearchCV(LDA(n_passes=3, batch_size=20), {"n_components": [1, 3]}, cv=3)
    search.fit(CountVectorizer().fit_transform(docs))
    assert search.best_params_ == {"n_components": 3}


@pytest.mark.parametrize("method", ["online", "gibbs"])
def test_transform_follows_the_input_dtype(corpus, method):
    est = MAKERS[method]().fit(corpus.X)
    X = corpus.X[:20]
    assert est.transform(X.astype(np.float64)).dtype == np.float64
    assert est.transform(X.astype(np.float32)).dtype == np.float32
    assert est.transform(X.astype(np.int64).toarray()).dtype == np.float64
    np.testing.assert_allclose(est.transform(X.astype(np.float32)),
                               est.transform(X.toarray()), rtol=1e-6)


def test_dataframes_give_feature_names(corpus):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(corpus.X[:100].toarray(), columns=corpus.vocab)
    est = LDA(4, n_passes=2, batch_size=50).fit(df)
    assert list(est.feature_names_in_) == list(corpus.vocab) and est.n_features_in_ == 120
    assert all(w in corpus.vocab for t in est.top_words(3) for w in t)


@pytest.mark.parametrize("method", list(MAKERS))
def test_fit_trains_in_the_calling_thread_and_learner_shares_the_model(corpus, method):
    import threading

    est = MAKERS[method]()
    before = threading.active_count()
    est.fit(corpus.X)
    assert threading.active_count() == before, "fit started no thread"
    fitted = est.components_
    model = est.model_
    lr = est.learner(corpus.X, n_passes=1)
    assert lr.model is model and lr.estimator is est
    lr.fit(progress=None)
    assert est.model_ is model and lr.state == "done"
    assert not np.array_equal(est.components_, fitted), "the learner trained the fit model"


@pytest.mark.parametrize("method", list(MAKERS))
def test_cli_style_learner_with_checkpoint_resumes_exactly(corpus, method, tmp_path):
    """What ``bidlab train`` does: Est(**params).learner(X, None, **learner options).
    (Warm starts are not checkpointed: a resumed run starts its documents afresh.)"""
    ck = tmp_path / "lda.ckpt"
    a = MAKERS[method](warm_docs=False)
    lr = a.learner(corpus.X, None, n_passes=2, checkpoint=str(ck), batch_size=50,
                   val_every=0)
    lr.fit(progress=None)
    assert lr.step == 12 and ck.exists()
    shutil.copy(ck, tmp_path / "after2.ckpt")
    lr.set(n_passes=3)
    lr.fit(progress=None)
    b = MAKERS[method](warm_docs=False)
    lr2 = b.learner(corpus.X, None, n_passes=2, batch_size=50, val_every=0)
    lr2.load(str(tmp_path / "after2.ckpt"))
    assert b.n_batches_ == 12 and b.n_passes_done_ == 2
    lr2.set(n_passes=3)
    lr2.fit(progress=None)
    np.testing.assert_allclose(b.components_, a.components_, rtol=1e-5, atol=1e-7)


# -- scikit-learn's names and habits ------------------------------------------------------
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
def test_scikit_learn_parameter_names(cls):
    est = cls(n_components=5, warm_start=True, n_jobs=1, verbose=2)
    params = est.get_params()
    assert params["n_components"] == 5 and params["warm_start"] and params["n_jobs"] == 1
    assert "k" not in params and "warm_docs" in params  # one name per concept
    with pytest.raises(TypeError, match=r"no parameter 'k' \('k' is 'n_components' here\)"):
        cls(k=5)


@pytest.mark.parametrize("cls, given, ours", [
    ("LDA", "max_iter", "n_passes"), ("LDAGibbs", "num_topics", "n_components"),
    ("KMeans", "n_components", "n_clusters"), ("GLM", "learning_rate", "lrate"),
    ("NMF", "n_passes", "max_iter"), ("SFA", "factors", "n_components"),
    ("SFA", "iterations", "max_iter"), ("BayesNet", "max_iter", "n_passes"),
    ("LDA", "learning_method", "method"), ("LDA", "learning_decay", "kappa"),
    ("LDA", "learning_offset", "tau0"), ("LDAGibbs", "total_samples", "total_docs"),
    ("GLM", "alpha", "l2"), ("GLM", "loss", "link")])
def test_another_librarys_parameter_name_is_answered_with_ours(cls, given, ours):
    import bidlab.models

    est = getattr(bidlab.models, cls)
    with pytest.raises(TypeError, match=f"{cls} has no parameter '{given}' \\('{given}' is "
                                        f"'{ours}' here\\). Its parameters: .*{ours}"):
        est(**{given: 3})
    with pytest.raises(TypeError, match=f"{cls} has no parameter 'bogus'. Its parameters"):
        est(bogus=1)
    assert clone(est()).get_params() == est().get_params()  # scikit-learn sees the same


@pytest.mark.parametrize("method", list(MAKERS))
def test_warm_start_continues_and_passes_add_up(corpus, method):
    est = MAKERS[method](warm_start=True).fit(corpus.X)
    first = est.n_passes_done_
    batches = est.n_batches_
    est.fit(corpus.X)
    assert est.n_passes_done_ == 2 * first and est.n_batches_ == 2 * batches
    cold = MAKERS[method]().fit(corpus.X)
    cold.fit(corpus.X)  # without warm_start a second fit starts again
    assert cold.n_passes_done_ == first


@pytest.mark.parametrize("method", ["online", "gibbs"])
def test_verbose_writes_to_stderr_only(corpus, method, capsys):
    MAKERS[method](verbose=0).fit(corpus.X)
    assert capsys.readouterr() == ("", "")
    MAKERS[method](verbose=2).fit(corpus.X)
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if "pass " in ln]
    assert out == "" and len(lines) == 3 and "\r" not in err, err  # a line per pass
    MAKERS[method](verbose=1).fit(corpus.X)
    out, err = capsys.readouterr()
    assert out == "" and "pass   3/3" in err  # not a terminal: plain lines, no bar frames


@pytest.mark.parametrize("name", ["lda_k3_v0.bidlab", "lda_k3_v0.pkl"])
def test_files_written_with_the_old_name_k_still_load(name):
    """The fixtures were written by the code before the rename (LDA(k=3, warm_start=False),
    warm_start then meaning each document's E-step started from its previous pass)."""
    inputs = np.load(FIXTURES / "sknames_v0_inputs.npz")
    path = FIXTURES / name
    if name.endswith(".pkl"):
        with open(path, "rb") as fh:
            est = pickle.load(fh)
    else:
        est = LDA.load(path)
    params = est.get_params()
    assert params["n_components"] == 3 and "k" not in params
    assert params["warm_docs"] is False and params["warm_start"] is False
    assert params["n_jobs"] is None and params["verbose"] == 0
    X = inputs["X"]
    # the same proportions (transform now normalises them in float64: last bits differ)
    np.testing.assert_allclose(est.transform(X), inputs["lda_transform"], rtol=1e-6)
    assert est.model_.opts.n_components == 3 and "k" not in est.model_.opts
    est.set_params(warm_start=True).fit(X)  # trains on under today's names
    assert est.n_passes_done_ == 4


def test_top_words_with_weights_and_summary(corpus):
    est = MAKERS["online"]().fit(corpus.X)
    words = est.top_words(3)
    pairs = est.top_words(3, with_weights=True)
    assert [[w for w, _ in row] for row in pairs] == words
    for t, row in enumerate(pairs):
        weights = [p for _, p in row]
        assert weights == sorted(weights, reverse=True)
        assert weights[0] == pytest.approx(est.components_[t].max())
    text = est.summary()
    assert text.startswith("LDA(n_components=4, batch_size=50, n_passes=3)") or \
        text.splitlines()[0] == "LDA(batch_size=50, n_components=4, n_passes=3)"
    assert "4 topics x 120 words" in text and "n_passes_done_  3" in text
    assert "not fitted" in LDAGibbs().summary()


def test_perplexity_is_documented_as_document_completion():
    for meth in (LDA.perplexity, LDA.score):
        doc = meth.__doc__
        assert "ocument completion" in doc or "ocument-completion" in doc
    assert "scikit-learn" in LDA.perplexity.__doc__ and "gensim" in LDA.perplexity.__doc__


def test_n_jobs_limits_the_kernels_to_one_thread(corpus):
    """With n_jobs=1 every adaptive kernel call runs serially, so none is timed; without
    it the kernels time both versions (bidlab.kern.adaptive.decisions)."""
    import numba

    from bidlab.kern import adaptive

    if adaptive.get_policy() != "adaptive" or numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs the adaptive policy and at least two numba threads")
    adaptive.reset()
    MAKERS["online"](n_jobs=1).fit(corpus.X)
    assert adaptive.decisions() == {}
    MAKERS["online"]().fit(corpus.X)
    assert adaptive.decisions() != {}
