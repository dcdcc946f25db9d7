"""KMeans: ``labels_`` equal ``predict`` on the training rows and ties go to the lowest of
equal centres; BayesNet: evidence the network makes (nearly) impossible."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from bidlab.models import KMeans
from bidlab.models.bayesnet import BayesNet, Network
from bidlab.models.bayesnet.bif import read_bif
from bidlab.models.bayesnet.exact import exact_marginals


def _offset_rows(seed: int, n: int, d: int, dtype: type = np.float32) -> np.ndarray:
    # far from the origin: the GEMM formula's rounding is then far above the gaps between
    # near-tied distances, so two computations of them disagree on many rows
    return (np.random.default_rng(seed).random((n, d)) + 100.0).astype(dtype)


@pytest.mark.parametrize(("d", "k", "algorithm", "bounds"), [
    (2, 5, "lloyd", True), (40, 8, "lloyd", True), (40, 8, "lloyd", False),
    (40, 8, "minibatch", True), (8, 30, "lloyd", True), (3, 3, "lloyd", True)])
def test_kmeans_labels_equal_predict_in_float32(d: int, k: int, algorithm: str,
                                                bounds: bool) -> None:
    for seed in range(3):
        X = _offset_rows(seed, 3000, d)
        km = KMeans(k, random_state=seed, algorithm=algorithm, bounds=bounds, max_iter=30,
                    batch_size=512).fit(X)
        np.testing.assert_array_equal(km.labels_, km.predict(X))
        assert km.inertia_ == -km.score(X)
        # transform's distances come from another product: its argmin may round a near-tie
        # the other way (as scikit-learn's), but not by more than that rounding
        D = km.transform(X).astype(np.float64) ** 2
        gap = D[np.arange(len(X)), km.labels_] - D.min(axis=1)
        assert gap.max() <= 1e-5 * (X.astype(np.float64) ** 2).sum(axis=1).max()


def test_kmeans_fit_learner_and_partial_fit_labels_equal_predict() -> None:
    X = _offset_rows(0, 3000, 40)
    km = KMeans(8, random_state=0, max_iter=20)
    lrn, finish = km.fit_learner(X)
    lrn.fit(progress=None)
    finish()
    np.testing.assert_array_equal(km.labels_, km.predict(X))
    mb = KMeans(8, random_state=0, algorithm="minibatch", batch_size=500)
    for _ in range(3):
        mb.partial_fit(X)
        np.testing.assert_array_equal(mb.labels_, mb.predict(X))
        assert mb.inertia_ == -mb.score(X)


def _coincident_fit(dtype: type, algorithm: str) -> KMeans:
    """k = 9 centres on 3 distinct rows: equal centres at 0, 3, 6 and 8 (and 1, 4, 7).
    Whole numbers, so each cluster's mean is its row to the bit."""
    P = np.random.default_rng(1).integers(10, 20, (3, 16)).astype(dtype)
    X = np.repeat(P, 20, axis=0)
    init = P[[0, 1, 2, 0, 1, 2, 0, 1, 0]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return KMeans(9, init=init, algorithm=algorithm, max_iter=5, batch_size=16).fit(X)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
def test_kmeans_ties_between_equal_centres_go_to_the_lowest_index(dtype: type,
                                                                  algorithm: str) -> None:
    km = _coincident_fit(dtype, algorithm)
    C = km.cluster_centers_
    first = np.array([int(np.flatnonzero((C == C[j]).all(axis=1))[0]) for j in range(9)])
    assert (first != np.arange(9)).any()  # some centres coincide
    rng = np.random.default_rng(2)
    Xn = (rng.random((2000, 16)) * 10.0 + 10.0).astype(dtype)
    labels = km.predict(Xn)
    np.testing.assert_array_equal(first[labels], labels)  # never a later equal centre
    np.testing.assert_array_equal(km.transform(Xn).argmin(axis=1), labels)
    np.testing.assert_array_equal(first[km.labels_], km.labels_)
    np.testing.assert_array_equal(km.predict(np.repeat(C, 3, axis=0)),
                                  np.repeat(first, 3))


# -- BayesNet: nearly impossible evidence -------------------------------------------------

def _stuck_net(pa: float) -> Network:
    """a (P(a=1) = pa) -> b -> c, each a copy of its parent but for 1e-9; e has a and c as
    parents and is 1 with probability 1e-12 unless a = c = 1. Given e = 1 the posterior
    holds a = b = c = 1, a state the prior draws (a = 1 once in 1 / pa) rarely reach and
    single moves from a = b = c = 0 cannot leave."""
    eps = 1e-9
    copy = np.array([[1 - eps, eps], [eps, 1 - eps]])
    e = np.array([[1 - 1e-12, 1e-12]] * 3 + [[0.5, 0.5]])
    return Network(["a", "b", "c", "e"], [["0", "1"]] * 4, [[], [0], [1], [0, 2]],
                   [np.array([[1 - pa, pa]]), copy, copy.copy(), e])


def test_bayesnet_warns_when_the_chains_are_stuck_where_the_evidence_is_nearly_impossible(
        ) -> None:
    net = _stuck_net(1e-6)
    exact = exact_marginals(net, {"e": "1"})
    assert exact[0][1] > 0.99
    bn = BayesNet(net, n_chains=200, n_samples=100, burn_in=20, random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"e='1' is nearly impossible where the "
                      r"chains are.*1e-12 given \{'a': '0', 'c': '0'\}"):
        m = bn.infer({"e": "1"})
    # what the warning is about: the chains agree (R-hat and mcse_ see nothing) and miss
    # the posterior's mode
    assert m["a"]["1"] < 0.01 and bn.rhat_ < 1.01 and bn.mcse_ < 1e-3
    assert bn.evidence_support_ <= 1e-12


def test_bayesnet_does_not_warn_when_the_chains_explain_the_evidence() -> None:
    net = _stuck_net(1e-3)  # the start's draws reach a = 1: the chains find the mode
    bn = BayesNet(net, n_chains=200, n_samples=100, burn_in=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = bn.infer({"e": "1"})
    exact = exact_marginals(net, {"e": "1"})
    assert m["a"]["1"] == pytest.approx(exact[0][1], abs=1e-6)
    assert bn.evidence_support_ == pytest.approx(0.5)


def test_bayesnet_warns_on_evidence_contradicting_a_near_deterministic_row(
        shared_data: Path) -> None:
    """asia with ``either`` = tub or lung made nearly (not exactly) deterministic: the
    evidence either = no with tub = yes has probability ~1e-12, not zero, so nothing
    raises; infer says so. Ordinary evidence on the same network does not warn."""
    net = read_bif(shared_data / "bnlearn" / "asia.bif.gz")
    v = net.index("either")
    cpts = [t.copy() for t in net.cpts]
    cpts[v] = np.where(cpts[v] == 0.0, 1e-12, cpts[v] - 1e-12)
    near = Network(net.names, net.states, net.parents, cpts)
    evidence = {"either": "no", "tub": "yes"}
    exact = exact_marginals(near, evidence)
    bn = BayesNet(near, n_chains=100, n_samples=50, burn_in=10, random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"either='no' is nearly impossible"):
        m = bn.infer(evidence)
    assert m["lung"]["yes"] == pytest.approx(exact[net.index("lung")][0], abs=0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        bn.infer({"xray": "yes", "dysp": "yes", "asia": "yes"})
    assert bn.evidence_support_ > 1e-3


def test_bayesnet_rhat_is_infinite_when_chains_never_leave_their_modes() -> None:
    """a -> b -> c, each a copy of its parent but for 1e-12: (a, b) is drawn as one unit
    and c alone, so no chain ever moves between all-0 and all-1. The weighted start holds
    both modes (the marginals are about right) but each chain's marginal stays fixed, so
    R-hat, the between-chain over the within-chain spread, is infinite, not 1."""
    cp = np.array([[1 - 1e-12, 1e-12], [1e-12, 1 - 1e-12]])
    net = Network(["a", "b", "c"], [["0", "1"]] * 3, [[], [0], [1]],
                  [np.array([[0.5, 0.5]]), cp, cp.copy()])
    bn = BayesNet(net, n_chains=200, n_samples=50, burn_in=5, random_state=0)
    m = bn.infer()
    assert 0.3 < m["c"]["1"] < 0.7
    assert bn.rhat_ == np.inf
    # a network whose chains move: R-hat stays finite and near 1
    mixing = Network(["a", "b", "c"], [["0", "1"]] * 3, [[], [0], [1]],
                     [np.array([[0.5, 0.5]]), np.array([[0.8, 0.2], [0.3, 0.7]]),
                      np.array([[0.6, 0.4], [0.1, 0.9]])])
    bn = BayesNet(mixing, n_chains=200, n_samples=50, burn_in=5, random_state=0)
    bn.infer({"c": "1"})
    assert 0.99 < bn.rhat_ < 1.1
