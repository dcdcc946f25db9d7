"""BayesNet: BIF files, colouring, Gibbs marginals against exact enumeration, evidence,
clear errors, files and pickles."""

from __future__ import annotations

import gzip
import pickle

import numpy as np
import pytest

from bidlab.datasets.paths import find_shared_data_dir
from bidlab.kern import adaptive
from bidlab.models import BayesNet, load
from bidlab.models.bayesnet import BayesNetError, Network, read_bif, write_bif
from bidlab.models.bayesnet.bif import format_bif, parse_bif
from bidlab.models.bayesnet.colouring import moral_graph
from bidlab.models.bayesnet.exact import exact_marginals
from bidlab.models.bayesnet.sampler import GibbsChains
from bidlab.models.bayesnet.tables import Tables

_SHARED = find_shared_data_dir()
BNLEARN = None if _SHARED is None else _SHARED / "bnlearn"
needs_data = pytest.mark.skipif(BNLEARN is None or not BNLEARN.is_dir(),
                                reason="shared data folder with bnlearn/ not found")

# evidence for each small network: a child observed (the posterior differs from the prior)
EVIDENCE = {
    "asia": {"xray": "yes", "smoke": "no"},
    "cancer": {"Dyspnoea": "True", "Xray": "positive"},
    "earthquake": {"MaryCalls": "True"},
    "sachs": {"Erk": "HIGH", "PKA": "LOW"},
    "survey": {"T": "train", "S": "F"},
}

TINY = """network tiny { }
variable A { type discrete [ 2 ] { y, n }; }
variable B { type discrete [ 3 ] { lo, mid, hi }; property weight = 2; }
probability ( A ) { table 0.25, 0.75; }
probability ( B | A ) {
  // a comment
  (y) 0.1, 0.2, 0.7;
  (n) 0.5, 0.25, 0.25;
}
"""


def net_of(name: str) -> Network:
    return read_bif(BNLEARN / f"{name}.bif.gz")


def test_parse_tiny_and_round_trip(tmp_path):
    net = parse_bif(TINY)
    assert net.name == "tiny" and net.names == ["A", "B"] and net.parents == [[], [0]]
    assert net.cpts[1].tolist() == [[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]
    for name in ("t.bif", "t.bif.gz"):
        back = read_bif(write_bif(net, tmp_path / name))
        assert back.names == net.names and back.states == net.states
        assert all(np.array_equal(a, b) for a, b in zip(back.cpts, net.cpts, strict=True))
    assert gzip.decompress((tmp_path / "t.bif.gz").read_bytes()).decode() == format_bif(net)


@needs_data
@pytest.mark.parametrize("name", ["alarm", "child", "insurance", "hailfinder", "water", "asia"])
def test_bnlearn_networks_round_trip(name, tmp_path):
    net = net_of(name)
    back = read_bif(write_bif(net, tmp_path / f"{name}.bif"))
    assert back.names == net.names and back.parents == net.parents
    assert all(np.array_equal(a, b) for a, b in zip(back.cpts, net.cpts, strict=True))
    # the units of one block are independent: none writes a variable another one reads
    t = Tables.of(net)

    def members(u):
        m = {int(t.unit_a[u]), *t.det_idx[t.det_ptr[u]:t.det_ptr[u + 1]].tolist()}
        return m | ({int(t.unit_b[u])} if t.unit_b[u] >= 0 else set())

    def reads(u):
        f = t.fac_idx[t.fac_ptr[u]:t.fac_ptr[u + 1]].tolist()
        return set(f) | {p for x in f for p in net.parents[x]}

    for c in range(t.n_blocks):
        block = t.blk_units[t.blk_ptr[c]:t.blk_ptr[c + 1]].tolist()
        for a in block:
            assert all(not (members(a) & reads(b)) for b in block if b != a)
    assert moral_graph(net.parents)[0] is not None
    drawn = set(t.unit_a.tolist()) | set(np.flatnonzero(t.is_det).tolist())
    assert sorted(t.blk_units.tolist()) == list(range(t.unit_a.size))
    assert drawn == set(range(net.n_vars))


def test_bif_with_a_cycle_is_refused():
    text = TINY.replace("probability ( A ) { table 0.25, 0.75; }",
                        "probability ( A | B ) { (lo) 0.5, 0.5; (mid) 0.5, 0.5; "
                        "(hi) 0.5, 0.5; }")
    with pytest.raises(BayesNetError, match="cycle through the variables A, B"):
        parse_bif(text)


def test_rows_not_summing_to_one_are_refused_with_the_tolerance():
    with pytest.raises(BayesNetError, match=r"sums to 1.1, not 1 within the tolerance 0.001"):
        parse_bif(TINY.replace("(y) 0.1, 0.2, 0.7", "(y) 0.2, 0.2, 0.7"))
    net = parse_bif(TINY.replace("(y) 0.1, 0.2, 0.7", "(y) 0.1, 0.2, 0.6999"))
    assert net.cpts[1][0].sum() == pytest.approx(1.0, abs=1e-15)  # renormalised


def test_malformed_bif_names_the_problem():
    with pytest.raises(BayesNetError, match="no probability block for B"):
        parse_bif(TINY.split("probability ( B")[0])
    with pytest.raises(BayesNetError, match="names state 'x'"):
        parse_bif(TINY.replace("(n) 0.5", "(x) 0.5"))
    with pytest.raises(BayesNetError, match="declares \\[ 4 \\] states but lists 3"):
        parse_bif(TINY.replace("[ 3 ]", "[ 4 ]"))


def test_unknown_names_in_evidence():
    bn = BayesNet(parse_bif(TINY), n_chains=10, n_samples=2, burn_in=1, random_state=0)
    with pytest.raises(BayesNetError, match="unknown variable 'C': the network's variables "
                       "are A, B"):
        bn.infer({"C": "y"})
    with pytest.raises(BayesNetError, match="unknown state 'top' of 'B': its states are "
                       "lo, mid, hi"):
        bn.infer({"B": "top"})


@needs_data
def test_evidence_of_probability_zero():
    bn = BayesNet(net_of("asia"), n_chains=20, n_samples=2, burn_in=1, random_state=0)
    # 'either' is lung OR tub: lung = yes with either = no is impossible
    with pytest.raises(BayesNetError, match="has probability zero under the network"):
        bn.infer({"lung": "yes", "either": "no"})
    with pytest.raises(BayesNetError, match="probability zero"):
        exact_marginals(bn.network_, {"lung": "yes", "either": "no"})


def _max_error(net: Network, est: list[np.ndarray], ev: dict) -> float:
    exact = exact_marginals(net, ev)
    return max(float(np.abs(a - b).max()) for a, b in zip(exact, est, strict=True))


@needs_data
@pytest.mark.parametrize("name", sorted(EVIDENCE))
def test_marginals_match_exact_enumeration(name):
    net = net_of(name)
    bn = BayesNet(net, n_chains=1000, burn_in=100, n_samples=400, random_state=7)
    out = bn.infer(EVIDENCE[name])
    assert _max_error(net, bn.marginals_, EVIDENCE[name]) <= 0.01
    assert bn.rhat_ < 1.3
    v, s = next(iter(EVIDENCE[name].items()))
    assert out[v][s] == 1.0
    assert sum(out[net.names[0]].values()) == pytest.approx(1.0)


@needs_data
def test_evidence_set_and_cleared_between_sweeps():
    net = net_of("cancer")
    ch = GibbsChains(net, np.full((2000, net.n_vars), -1, np.int32), seed=3)
    so = ch.t.state_off
    ch.burn_in = 50
    for ev in ({"Xray": "positive"}, None, {"Dyspnoea": "True", "Smoker": "True"}):
        ch.set_evidence(ev)  # same chains, no restart: burn in, then keep
        for _ in range(250):
            ch.sweep()
        assert ch.kept == 200
        est = [ch.marginals()[so[v]:so[v + 1]] for v in range(net.n_vars)]
        assert _max_error(net, est, ev) <= 0.01


@needs_data
def test_live_learner_takes_evidence_at_the_next_sweep():
    bn = BayesNet(net_of("earthquake"), n_chains=300, burn_in=5, n_samples=20,
                  random_state=1)
    lrn = bn.learner()
    lrn.fit(progress=None)
    model = lrn.model
    model.set_evidence({"Alarm": "True"})
    assert model.chains.ev.max() == -1  # pending until the next sweep
    lrn.set(n_passes=lrn.opts.n_passes + 30)
    lrn.fit(progress=None)
    assert model.chains.evidence == {"Alarm": "True"} and model.chains.kept == 25
    assert model.marginals()[net_index(bn, "Alarm")][0] == 1.0


def net_index(bn: BayesNet, name: str) -> int:
    return bn.network_.index(name)


@needs_data
@pytest.mark.parametrize("name", ["alarm", "child", "water"])
def test_table_steps_give_every_candidates_table_entry(name):
    """``fac_step_a`` / ``fac_step_b``: a unit's table entry for any pair of candidate
    states is the entry at its current states moved by the steps (the sampler's fast
    path reads the conditional this way instead of re-walking each table's parents)."""
    net = net_of(name)
    t = Tables.of(net)
    rng = np.random.default_rng(0)

    def entry(x, f):
        ps = net.parents[f]
        cfg = 0
        for q, pv in enumerate(ps):
            cfg += int(x[pv]) * int(t.par_stride[t.par_ptr[f] + q])
        return int(t.off[f] + cfg * t.card[f] + x[f])

    checked = 0
    for _ in range(5):
        x = np.array([rng.integers(k) for k in t.card])
        for u in range(t.unit_a.size):
            va, vb = int(t.unit_a[u]), int(t.unit_b[u])
            fs = range(t.fac_ptr[u], t.fac_ptr[u + 1])
            y = x.copy()
            for sa in range(t.card[va]):
                for sb in range(t.card[vb] if vb >= 0 else 1):
                    y[va] = sa
                    if vb >= 0:
                        y[vb] = sb
                    for e in fs:
                        f = int(t.fac_idx[e])
                        moved = (entry(x, f) + (sa - x[va]) * t.fac_step_a[e]
                                 + ((sb - x[vb]) * t.fac_step_b[e] if vb >= 0 else 0))
                        assert moved == entry(y, f), (name, u, f)
                        checked += 1
    assert checked > 100


@needs_data
@pytest.mark.parametrize("name", ["alarm", "child", "hailfinder"])
def test_tabled_conditionals_draw_the_same_bits(name, monkeypatch):
    """Units whose full conditional is tabled (``MAX_CONDITIONAL_ENTRIES``) draw exactly
    what the per-draw products give, with evidence and after the tables change."""
    from bidlab.models.bayesnet import tables

    net = net_of(name)
    obs = np.full((40, net.n_vars), -1, np.int32)
    obs[::3, 1] = 0  # some rows clamp a variable (a unit's partner, in some networks)
    ev = {net.names[net.n_vars - 1]: net.states[net.n_vars - 1][0]}
    results = []
    for limit in (0, tables.MAX_CONDITIONAL_ENTRIES):
        monkeypatch.setattr(tables, "MAX_CONDITIONAL_ENTRIES", limit)
        ch = GibbsChains(net, obs, m_max=2, seed=5)
        assert (ch.t.cond_ptr >= 0).any() == (limit > 0)
        ch.set_evidence(ev)
        for _ in range(20):
            ch.sweep(m_active=2)
        first = ch.X.copy()
        # new tables of the same structure (as learning's M-step sets them)
        flat = 0.5 * net.flat_tables()[0] + 0.5 * net.uniform().flat_tables()[0]
        ch.set_tables(net.with_tables(flat))
        for _ in range(5):
            ch.sweep(m_active=2)
        results.append((first, ch.X.copy()))
    assert np.array_equal(results[0][0], results[1][0])
    assert np.array_equal(results[0][1], results[1][1])


def test_tables_are_built_once_per_network_and_never_shared():
    """``Tables.of`` keeps a network's layout, hands each sampler arrays of its own for
    what sampling changes, and rebuilds when the network's tables hold other values."""
    net = parse_bif(TINY)
    a, b = Tables.of(net), Tables.of(net)
    assert a.unit_a is b.unit_a  # the layout is built once
    assert a.cpt is not b.cpt and a.cond is not b.cond
    a.cpt[:] = 0.0  # a learner's new tables in one sampler
    assert b.cpt.sum() > 0 and Tables.of(net).cpt.sum() > 0
    net.cpts[1][0] = [0.6, 0.2, 0.2]  # a table changed in place: built afresh
    c = Tables.of(net)
    assert c.unit_a is not a.unit_a
    assert np.array_equal(c.cpt, net.flat_tables()[0])


@needs_data
def test_draws_do_not_depend_on_thread_count():
    results = []
    for mode in ("serial", "parallel"):
        with adaptive.policy(mode):
            bn = BayesNet(net_of("alarm"), n_chains=300, burn_in=5, n_samples=10,
                          random_state=11)
            bn.infer({"HRBP": "HIGH"})
            results.append((np.concatenate(bn.marginals_), bn.model_.chains.X.copy()))
    assert np.array_equal(results[0][1], results[1][1])
    assert np.array_equal(results[0][0], results[1][0])


@needs_data
@pytest.mark.parametrize("name", ["alarm", "asia"])  # without / with deterministic units
def test_sweep_pieces_ranges_and_the_no_determinism_form_draw_the_same_bits(name):
    from bidlab.kern import bn_gibbs

    net = net_of(name)
    t = Tables.of(net)
    ch = GibbsChains(net, np.full((50, net.n_vars), -1, np.int32), m_max=2, seed=3)
    ch.activate(2)
    rb = np.zeros((100, t.n_states))
    bad = np.zeros(100, np.uint8)

    def sweep(X, dets, ranges=None):
        tables = (t.cpt, t.off, t.card, *t.parents, t.unit_a, t.unit_b, t.fac_ptr, t.fac_idx,
                  t.fac_step_a, t.fac_step_b, *dets, t.blk_ptr, t.blk_units, t.cond,
                  t.cond_ptr, t.mb_ptr, t.mb_idx, t.mb_stride, np.uint64(77), rb,
                  t.state_off, True, bad)
        head = (X, ch.obs, ch.ev, 50, 2, 0, 50)
        if ranges is None:
            bn_gibbs.sweep(100 * net.n_vars, *head, *tables)
        else:
            for lo, hi in ranges:
                bn_gibbs._sweep_rows(*head, lo, hi, *tables)
        return X, rb.copy()

    start = ch.X.copy()
    full = (t.det_ptr, t.det_idx)
    whole = sweep(start.copy(), full)
    assert (t.det_idx.size > 0) == (t.dets[0] is not None)
    for dets, ranges in [(full, [(0, 100)]), (full, [(0, 7), (7, 60), (60, 100)]),
                         (t.dets, None)]:
        X, marg = sweep(start.copy(), dets, ranges)
        np.testing.assert_array_equal(X, whole[0])
        np.testing.assert_array_equal(marg, whole[1])
    assert not np.array_equal(whole[0], start)  # the sweep drew


@needs_data
def test_pickle_and_safe_file(tmp_path):
    bn = BayesNet.from_bif(BNLEARN / "survey.bif.gz", n_chains=50, burn_in=2, n_samples=5,
                           random_state=0)
    bn.infer({"T": "car"})
    for other in (pickle.loads(pickle.dumps(bn)), load(bn.save(tmp_path / "bn.bidlab"))):
        assert isinstance(other, BayesNet)
        assert other.marginal("E") == bn.marginal("E")
        assert other.network_.names == bn.network_.names
        other.infer({"T": "train"})  # a loaded estimator runs again
    assert "network" in bn.summary()


def _follows(prior: float) -> Network:
    """A (P(A=1) = ``prior``) and B, a copy of A (a deterministic variable)."""
    return Network(["A", "B"], [["0", "1"], ["0", "1"]], [[], [0]],
                   [np.array([[1.0 - prior, prior]]), np.array([[1.0, 0.0], [0.0, 1.0]])])


def test_evidence_on_a_deterministic_variable_reaches_the_chains():
    """B = A: evidence B = 1 forces A = 1, even when A = 1 is rare (no draw of the chains'
    first pool has it), whether given to infer or to a live learner's running chains."""
    net = _follows(1e-4)
    bn = BayesNet(net, n_chains=100, n_samples=20, burn_in=5, random_state=0)
    m = bn.infer({"B": "1"})
    assert m["A"] == {"0": 0.0, "1": 1.0} and m["B"] == {"0": 0.0, "1": 1.0}
    assert (bn.model_.chains.X == 1).all()
    lrn = BayesNet(net, n_chains=100, n_samples=20, burn_in=5, random_state=0).learner()
    lrn.fit(progress=None)
    assert (lrn.model.chains.X == 0).all()  # no evidence yet: A = 1 is rare
    lrn.model.set_evidence({"B": "1"})
    lrn.set(n_passes=lrn.opts.n_passes + 10)
    lrn.fit(progress=None)
    assert (lrn.model.chains.X == 1).all() and lrn.model.marginals()[0].tolist() == [0.0, 1.0]


def test_new_evidence_on_a_deterministic_variable_is_written_into_observed_rows():
    """Rows with observations (learning's rows) that contradict new evidence through a
    deterministic variable are drawn again rather than kept."""
    net = Network(["A", "B", "C"], [["0", "1"], ["0", "1"], ["0", "1"]], [[], [0], []],
                  [np.array([[0.7, 0.3]]), np.array([[1.0, 0.0], [0.0, 1.0]]),
                   np.array([[0.5, 0.5]])])
    obs = np.full((200, 3), -1, np.int32)
    obs[:, 2] = 0
    ch = GibbsChains(net, obs, seed=0)
    ch.sweep()
    assert (ch.X[:, 1] == 0).any()
    ch.set_evidence({"B": "1"})
    ch.sweep()
    assert (ch.X[:, :2] == 1).all() and (ch.X[:, 2] == 0).all()


def test_impossible_evidence_on_a_deterministic_variable_is_refused():
    bn = BayesNet(_follows(0.0), n_chains=10, n_samples=5, burn_in=1, random_state=0)
    with pytest.raises(BayesNetError, match="has probability zero under the network"):
        bn.infer({"B": "1"})


@needs_data
@pytest.mark.parametrize("seed", [3, 6])  # one chain whose first pool missed either = yes
def test_one_chain_with_evidence_on_a_deterministic_variable(seed):
    bn = BayesNet.from_bif(BNLEARN / "asia.bif.gz", n_chains=1, n_samples=300, burn_in=50,
                           random_state=seed)
    m = bn.infer({"either": "yes"})  # either = lung OR tub; P(lung = yes | it) = 0.848
    X, net = bn.model_.chains.X, bn.network_
    assert X[0, net.index("lung")] == 0 or X[0, net.index("tub")] == 0  # index 0: "yes"
    assert m["lung"]["yes"] > 0.3
