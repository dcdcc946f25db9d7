"""LDA's online step is the spine's shared updater: the same models as Hoffman's schedule.

Online variational LDA and SAME Gibbs LDA move their topics by ``m <- (1 - rho) m + rho u``
with ``rho_t = (tau0 + t)^-kappa`` times the minibatch's share of a full one (a short last
minibatch takes a partial step). :class:`HoffmanReference` below is that schedule written
out on its own; each model trained by its default updater must match the model trained by
the reference, update for update, on a fixed seed (with a short minibatch in every pass and
non-default ``tau0`` / ``kappa``, changed live too).
"""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.datasets import synthetic_lda_corpus
from bidlab.learn import Learner, Option, Updater
from bidlab.models import LDA, LDAGibbs
from bidlab.models.lda.gibbs import LDAGibbsModel
from bidlab.models.lda.vb import LDAModel


class HoffmanReference(Updater):
    """rho_t = (tau0 + t)^-kappa * step_weight; ``m <- (1 - rho) m + rho u`` unless the
    model takes the step itself (``blend``)."""

    OPTIONS = (Option("tau0", float, 1.0, "delay", low=0.0),
               Option("kappa", float, 0.7, "forgetting rate", low=0.0))

    def update(self, step: int) -> None:
        rho = (self.opts.tau0 + self.t + 1) ** (-self.opts.kappa) * self.model.step_weight
        if not self.model.blend(rho):
            for i in self.mats:
                m, u = self.model.modelmats[i].data, self.model.updatemats[i].data
                m[...] = (1.0 - rho) * m + rho * u
        self.t += 1


@pytest.fixture(scope="module")
def corpus():
    return synthetic_lda_corpus(n_docs=230, n_words=120, k=4, doc_len=(30, 60), alpha=0.1,
                                seed=3).X.astype(np.float64)


MODELS = {"vb": lambda: LDAModel(n_components=4, random_state=0, dtype=np.float64),
          "gibbs": lambda: LDAGibbsModel(n_components=4, random_state=0, nsamps=10.0,
                                         dtype=np.float64)}


def _train(make, X, updater, **options):
    model = make()
    model.prepare(X, n_passes=3)
    # 230 documents in minibatches of 50: every pass ends with a short one (30 documents)
    lrn = Learner(model, X, updater, batch_size=50, n_passes=3, val_every=0, **options)
    lrn.fit(progress=None)
    return model, lrn


@pytest.mark.parametrize("kind", list(MODELS))
@pytest.mark.parametrize("options", [{}, {"tau0": 6.0, "kappa": 0.9}])
def test_the_default_updater_takes_hoffmans_steps(corpus, kind, options):
    make = MODELS[kind]
    model, lrn = _train(make, corpus, None, **options)
    ref, _ = _train(make, corpus, HoffmanReference(), **options)
    assert model.n_batches == ref.n_batches == 15
    np.testing.assert_allclose(model.components(), ref.components(), rtol=1e-9, atol=1e-12)
    assert lrn.updater.t == 15
    for name, value in options.items():
        assert lrn.opts.get(name) == value


@pytest.mark.parametrize("kind", list(MODELS))
def test_a_live_schedule_change_matches_the_reference(corpus, kind):
    make = MODELS[kind]
    results = []
    for updater in (None, HoffmanReference()):
        model = make()
        model.prepare(corpus, n_passes=2)
        lrn = Learner(model, corpus, updater, batch_size=50, n_passes=1, val_every=0)
        lrn.fit(progress=None)
        lrn.set(kappa=0.55, tau0=3.0, n_passes=2)
        lrn.fit(progress=None)
        results.append(model.components())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
def test_the_estimators_schedule_parameters_reach_their_updater(corpus, cls):
    est = cls(4, n_passes=1, batch_size=50, tau0=5.0, kappa=0.8, random_state=0)
    lrn = est.learner(corpus)
    assert lrn.opts.tau0 == 5.0 and lrn.opts.kappa == 0.8
    lrn.fit(progress=None)
    assert est.updater_.t == est.n_batches_ == 5


def test_gibbs_default_minibatch_caps_its_tokens():
    """Long documents get fewer per default minibatch (about 16,384 tokens, at least 8
    documents); short ones keep 64; an explicit batch_size is taken as given."""
    long_docs = synthetic_lda_corpus(n_docs=40, n_words=500, k=3, doc_len=(1500, 2500),
                                     seed=0).X
    short = synthetic_lda_corpus(n_docs=200, n_words=500, k=3, seed=0).X
    assert long_docs.sum() / 40 > 16384 / 8 * 0.9 and short.sum() / 200 < 16384 / 64
    runs = {(name, b): LDAGibbs(3, n_passes=1, batch_size=b, random_state=0).fit(X).n_batches_
            for name, X in (("long", long_docs), ("short", short)) for b in (None, 20)}
    assert runs == {("long", None): 5, ("long", 20): 2, ("short", None): 4, ("short", 20): 10}
