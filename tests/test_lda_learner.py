"""LDA on the live learner: background training, live options, temperatures, observers."""

from __future__ import annotations

import gc
import time

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

import bidlab as bl
from bidlab import backend
from bidlab.datasets import synthetic_lda_corpus
from bidlab.models import LDA, LDAGibbs


@pytest.fixture(scope="module")
def planted():
    return synthetic_lda_corpus(n_docs=1000, n_words=300, k=5, doc_len=(80, 160), alpha=0.1,
                                seed=0)


def _min_cosine(truth, found):
    a = truth / np.linalg.norm(truth, axis=1, keepdims=True)
    b = found / np.linalg.norm(found, axis=1, keepdims=True)
    sim = a @ b.T
    r, c = linear_sum_assignment(-sim)
    return sim[r, c].min()


@pytest.mark.parametrize("make", [
    lambda: LDA(5, n_passes=5, batch_size=100),
    lambda: LDA(5, "batch", n_passes=15, batch_size=250),
    lambda: LDAGibbs(5, 20, n_passes=4, batch_size=100),
], ids=["online", "batch", "gibbs"])
def test_learner_trains_each_method(planted, make):
    est = make()
    lr = est.learner(planted.X, val_every=4)
    lr.fit(progress=None)
    assert lr.state == "done" and len(lr.summaries) == lr.opts.n_passes
    assert _min_cosine(planted.topics, est.components_) > 0.9
    h = lr.history()
    val = h["score"][h["val"]]
    assert val.size > 0 and np.isfinite(val).all() and (val > -np.log(300)).all()
    assert lr.model.modelmats[0].shape == (5, 300), "topics are the model matrix's rows"


def test_live_gibbs_temperatures_and_options_allocate_nothing(planted):
    est = LDAGibbs(5, 10, n_passes=10_000, batch_size=100)
    lr = est.learner(planted.X, val_every=0)
    lr.start()
    try:
        while lr.step < 25:  # past the first pass: every container exists
            time.sleep(0.005)
        lr.pause(wait=True)
        gc.collect()  # entries of earlier tests' dead containers are not this test's count
        allocs, misses = backend.allocations.snapshot()[0], bl.cache_stats()["misses"]
        entries = bl.cache_stats()["entries"]
        lr.resume()
        at = lr.step
        lr.set_temperature(3.0, topic=1, word=4)
        lr.set_temperature(2.0, topic=2)
        lr.set_temperature(1.5, word=7)
        lr.opts.alpha = 0.2
        lr.opts.nsamps = 12.0
        while lr.step < at + 15:
            time.sleep(0.005)
        lr.pause(wait=True)
        assert backend.allocations.snapshot()[0] == allocs, "a live change allocated"
        assert bl.cache_stats()["misses"] == misses and bl.cache_stats()["entries"] == entries
        T = lr.temperature
        assert T[1, 4] == 3.0 and T[2, 7] == 1.5 and (np.delete(T[2], 7) == 2.0).all()
        assert T[0, 7] == 1.5 and T[0, 0] == 1.0
        log = lr.temperature_log
        assert [(e["topic"], e["word"], e["value"]) for e in log] == [
            (1, 4, 3.0), (2, None, 2.0), (None, 7, 1.5)]
        assert all(e["batch"] >= at and {"pass", "index"} <= set(e) for e in log)
        model = est.model_
        assert lr.model is model, "the learner trains the estimator's own model"
        assert model.opts.alpha == 0.2 and float(model.alpha_m) == pytest.approx(0.2)
        assert model.opts.nsamps == 12.0 and est.nsamps_ == 12.0
        assert est.alpha == 0.1 and est.nsamps == 10, "the estimator's parameters stay"
    finally:
        lr.stop()
    assert lr.state == "stopped"
    lr.set_temperature(5.0, topic=0, word=0)  # idle: applied at once
    assert lr.temperature[0, 0] == 5.0


def test_observers_get_topics_and_pause_resume_stop(planted):
    est = LDA(5, n_passes=10_000, batch_size=100)
    lr = est.learner(planted.X)
    seen = []
    lr.observe(lambda snap: seen.append(snap.views["topics"].copy()), rate=50,
               views={"topics": lambda model: model.topicsT().T})
    lr.start()
    try:
        while lr.step < 30 or not seen:
            time.sleep(0.005)
        lr.pause(wait=True)
        assert lr.state == "paused"
        step = lr.step
        time.sleep(0.05)
        assert lr.step == step, "a paused learner does not train"
        lr.resume()
        while lr.step < step + 5:
            time.sleep(0.005)
    finally:
        lr.stop()
    topics = seen[-1]
    assert topics.shape == (5, 300) and np.allclose(topics.sum(axis=1), 1.0, atol=1e-4)


def test_temperature_can_be_set_right_after_start():
    from bidlab.datasets import synthetic_lda_corpus
    from bidlab.models import LDAGibbs

    X = synthetic_lda_corpus(n_docs=200, n_words=80, k=3, seed=2).X
    lrn = LDAGibbs(n_components=3, n_passes=2, random_state=0).learner(X)
    assert lrn.model.initialised  # made by learner(), before any thread runs
    lrn.start()
    lrn.set_temperature(3.0, topic=1, word=2)
    lrn.join()
    assert lrn.state == "done"
    assert float(lrn.temperature[1, 2]) == 3.0
