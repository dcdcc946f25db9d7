"""bidlab.gil: a training thread announces GIL-free stretches; helper threads wait for them.

Also: the LDAGibbs training thread announces its E-step, and a dashboard pump and the
observers' publisher start their Python work at those announcements.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from bidlab import gil


def test_wait_returns_at_the_next_announcement_of_that_thread():
    ready, go = threading.Event(), threading.Event()
    idents: list[int] = []

    def worker() -> None:
        idents.append(threading.get_ident())
        gil.announce_gil_free()  # known from now on
        ready.set()
        go.wait(5)
        time.sleep(0.05)
        gil.announce_gil_free()

    t = threading.Thread(target=worker)
    t.start()
    assert ready.wait(5)
    ident = idents[0]
    assert gil.announcements(ident) == 1
    go.set()
    t0 = time.perf_counter()
    assert gil.wait_gil_free(ident, 5.0)
    waited = time.perf_counter() - t0
    assert 0.03 < waited < 2.0, waited  # it waited for the second announcement
    assert gil.announcements(ident) == 2
    t.join()
    # no new announcement: a bounded wait that times out
    t0 = time.perf_counter()
    assert not gil.wait_gil_free(ident, 0.05)
    assert time.perf_counter() - t0 >= 0.04
    gil.forget(ident)
    assert gil.announcements(ident) == 0


def test_no_wait_for_threads_that_never_announce():
    t0 = time.perf_counter()
    assert not gil.wait_gil_free(None, 1.0)
    assert not gil.wait_gil_free(-12345, 1.0)  # never announced
    assert time.perf_counter() - t0 < 0.1


def _learner(n_docs=400):
    from bidlab.datasets import synthetic_lda_corpus
    from bidlab.models import LDAGibbs

    corpus = synthetic_lda_corpus(n_docs=n_docs, n_words=300, k=4, seed=0)
    return LDAGibbs(k=4, nsamps=5, batch_size=32, random_state=0).learner(corpus.X, n_passes=10_000)


def test_lda_gibbs_training_thread_announces_every_e_step():
    lr = _learner()
    lr.start()
    try:
        t0 = time.monotonic()
        while (lr.thread_ident is None or lr.step < 5) and time.monotonic() - t0 < 60:
            time.sleep(0.01)
        ident = lr.thread_ident
        assert ident is not None
        lr.pause(wait=True)
        s0, a0 = lr.step, gil.announcements(ident)
        lr.resume()
        assert gil.wait_gil_free(ident, 10.0)
        time.sleep(0.3)
        lr.pause(wait=True)
        said = gil.announcements(ident) - a0
        rec = lr.record.as_dict()
        new = rec["step"] >= s0
        trained = int((new & ~rec["val"]).sum())  # validation minibatches do not sample
        assert trained > 0 and said == trained, (said, trained, int(new.sum()))
    finally:
        lr.stop()
    assert lr.thread_ident is None
    assert gil.announcements(ident) == 0  # forgotten when the thread ended


def test_observers_deliver_at_an_announced_stretch_and_in_any_case():
    """The publisher waits (bounded) for the training thread's E-step before calling
    back; snapshots keep coming, and a final one arrives after the thread ended."""
    lr = _learner()
    got: list[tuple[int, str]] = []
    lr.observe(lambda s: got.append((s.step, s.state)), rate=20,
               views={"topics": 0})
    lr.start()
    time.sleep(1.5)
    lr.stop()
    lr.observers.wait_idle(5)
    steps = [s for s, st in got if st == "running"]
    assert len(steps) >= 10 and steps == sorted(steps)
    assert got[-1][1] == "stopped"
    assert lr.observers.align_wait > 0


def test_pump_renders_views_at_announced_stretches():
    pytest = __import__("pytest")
    pytest.importorskip("ipywidgets")
    from bidlab.widgets._pump import Pump, View

    lr = _learner()
    pump = Pump(lr, rate=10)
    seen: list[float] = []
    pump.attach(View("probe", lambda snap: seen.append(time.perf_counter())))
    lr.start()
    try:
        time.sleep(1.5)
    finally:
        lr.stop()
        pump.close()
    assert pump.ticks >= 8 and len(seen) >= 8
    assert pump.aligned >= 0.8 * pump.ticks, (pump.aligned, pump.ticks)
    gaps = np.diff(seen)
    assert gaps.max() < 0.5  # the clock still drives the ticks


def test_alignment_can_be_switched_off_by_environment(monkeypatch):
    from bidlab.learn.observers import ObserverHub

    assert gil.align_wait() == gil.ALIGN_WAIT > 0
    monkeypatch.setenv("BIDLAB_GIL_ALIGN", "0")
    assert gil.align_wait() == 0.0
    assert ObserverHub("t").align_wait == 0.0
