"""Cached results are kept per scope: each thread's by default, a learner's across its
runs. Two threads computing the same operation on the same matrices at once (a notebook
reading a model while its learner trains it) must never write into one container."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import bidlab as bl
from bidlab.mat.cache import CACHE, caching_scope


def _in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_two_threads_get_containers_of_their_own():
    B = bl.Mat(np.arange(9.0).reshape(3, 3))

    def product():
        with bl.caching():
            return B @ B

    with bl.caching():
        mine = B @ B
        assert (B @ B) is mine  # the thread's own loop still allocates once
    theirs = _in_thread(product)
    assert theirs is not mine
    np.testing.assert_array_equal(theirs.numpy(), mine.numpy())


def test_a_result_kept_by_one_thread_is_not_rewritten_by_another():
    # NMF.transform keeps a result computed from H for its loop while the learner, in its
    # own thread, steps H in place and computes the same again: a shared container
    # changed under it.
    rng = np.random.default_rng(0)
    H = bl.Mat(rng.random((4, 30)))
    want = H.numpy() * 3.0

    def reader():
        with bl.caching():
            return H * 3.0

    kept = _in_thread(reader)
    with bl.caching():
        H.data *= 2.0  # the learner's step
        stepped = H * 3.0
    np.testing.assert_allclose(stepped.numpy(), 2.0 * want)
    np.testing.assert_allclose(kept.numpy(), want)  # the reader's result as it computed it


def test_a_scope_given_is_kept_across_threads_and_nested_blocks():
    with bl.caching(scope=("learner", 1)):
        assert caching_scope() == ("learner", 1)
        with bl.caching():  # a model's own block inside a learner keeps its scope
            assert caching_scope() == ("learner", 1)
        got = _in_thread(lambda: caching_scope())
        assert got != ("learner", 1)  # another thread: its own
    assert caching_scope() == threading.get_ident()


def test_a_learners_second_run_reuses_its_first_runs_containers():
    from bidlab.models.glm import GLM

    rng = np.random.default_rng(1)
    X = rng.random((200, 5))
    y = (X[:, 0] > 0.5).astype(float)
    lrn = GLM(n_passes=1, batch_size=50, tol=None).learner(X, y)
    lrn.fit()
    entries = len(CACHE)
    before = bl.cache_stats()["allocations"]
    lrn.set(n_passes=2)
    lrn.start()  # a new run in a thread of its own: the learner's scope, the same keys
    lrn.join()
    assert bl.cache_stats()["allocations"] == before
    assert len(CACHE) == entries



def test_a_scope_that_cannot_key_results_is_refused_at_once():
    with pytest.raises(TypeError, match=r"scope=.* must be hashable; got a list"):
        with bl.caching(scope=[1]):
            pass
    assert caching_scope() == threading.get_ident()  # nothing left switched
