"""BayesNet's inputs and files: crafted saved networks refused naming the field, a loaded
file that never opens the path it names, sampling seeds, data values that are neither
states nor missing, and numeric state names that are ambiguous."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from test_bayesnet import TINY

from bidlab.models import BayesNet, load
from bidlab.models.bayesnet import BayesNetError, Network, read_bif
from bidlab.models.bayesnet.bif import parse_bif


def _crafted(src, dst, change):
    """A copy of the saved BayesNet ``src`` whose network's state ``change(state, arrays)``
    edits (the JSON fields, and the arrays they name)."""
    from bidlab.learn.checkpoint import load_checkpoint, save_checkpoint

    ck = load_checkpoint(src)
    meta = {k: v for k, v in ck.meta.items() if k not in ("format", "version", "written")}
    arrays = dict(ck.arrays)
    change(meta["root"]["state"]["$dict"]["network"]["state"]["$dict"], arrays)
    save_checkpoint(dst, arrays, meta)
    return dst


def _set_table(v, table):
    def change(state, arrays):
        arrays[state["cpts"][v]["$array"]] = np.array(table)
    return change


@pytest.mark.parametrize("change, message", [
    (_set_table(0, [[-0.5, 1.5]]), r"network\.cpts\[0\]: the table of 'A' holds negative"),
    (_set_table(0, [[2.5, 2.5]]), r"network\.cpts\[0\]: row 0 .* sums to 5"),
    (_set_table(1, [[0.5, 0.5, 0.0]]), r"network\.cpts\[1\]: the table of 'B' has 3 entries"),
    (lambda s, a: s["parents"].__setitem__(1, [10**6]),
     r"network\.parents\[1\]: variable 'B' has invalid parents"),
    (lambda s, a: s["parents"].__setitem__(0, [1]), r"network\.parents: .* has a cycle"),
    (lambda s, a: s["states"].__setitem__(0, ["y", "n", "maybe"]),
     r"network\.cpts\[0\]: the table of 'A' has 2 entries; it needs 1 .* x 3 states"),
    (lambda s, a: s.__setitem__("names", "AB"), r"network\.names: must be a list of strings"),
    (lambda s, a: s.pop("cpts"), r"network\.cpts: missing"),
])
def test_a_crafted_network_in_a_file_is_refused(tmp_path, change, message):
    from bidlab.learn.checkpoint import CheckpointError

    bn = BayesNet(parse_bif(TINY), n_chains=10, n_samples=2, burn_in=1, random_state=0)
    good = bn.save(tmp_path / "bn.bidlab")
    crafted = _crafted(good, tmp_path / "crafted.bidlab", change)
    with pytest.raises(CheckpointError, match="BayesNet." + message):
        load(crafted)


def test_a_loaded_network_computes_its_order_again(tmp_path):
    bn = BayesNet(parse_bif(TINY), n_chains=10, n_samples=2, burn_in=1, random_state=0)
    good = bn.save(tmp_path / "bn.bidlab")
    crafted = _crafted(good, tmp_path / "crafted.bidlab",
                       lambda s, a: s.__setitem__("_order", [0, 10**7]))
    other = load(crafted)
    assert other.network.order == [0, 1]
    assert other.infer({"A": "y"})["B"]["hi"] > 0.5  # P(B = hi | A = y) = 0.7


def test_sample_follows_random_state():
    """scikit-learn's rule: fresh draws without a random_state anywhere; the estimator's
    random_state, or the call's, gives the same rows every time."""
    net = parse_bif(TINY)
    free = BayesNet(net)
    assert not np.array_equal(free.sample(500), free.sample(500))
    np.testing.assert_array_equal(free.sample(500, random_state=5),
                                  free.sample(500, random_state=5))
    seeded = BayesNet(net, random_state=7)
    np.testing.assert_array_equal(seeded.sample(500), seeded.sample(500))
    np.testing.assert_array_equal(seeded.sample(500), free.sample(500, random_state=7))
    assert not np.array_equal(seeded.sample(500), free.sample(500, random_state=8))
    with pytest.raises(ValueError, match="random_state must be None, an int"):
        free.sample(5, random_state="x")


def test_marginal_before_infer_says_to_call_infer():
    from sklearn.exceptions import NotFittedError

    bn = BayesNet(parse_bif(TINY))
    with pytest.raises(NotFittedError, match=r"call infer\(evidence\) first"):
        bn.marginal("A")


def test_a_loaded_bayesnet_never_opens_the_path_its_file_names(tmp_path, shared_data):
    """An unfitted BayesNet saved with a BIF path as its network: loaded (or unpickled),
    it refuses to read that path until the caller gives the network again."""
    path = str(shared_data / "bnlearn" / "asia.bif.gz")
    bn = BayesNet(path, n_chains=50, n_samples=50, burn_in=10, random_state=0)
    bn.save(tmp_path / "unfitted.bidlab")
    for loaded in (load(tmp_path / "unfitted.bidlab"), pickle.loads(pickle.dumps(bn))):
        with pytest.raises(ValueError, match="does not open paths read from files"):
            loaded.infer({})
        loaded.set_params(network=path)
        assert set(loaded.infer({})) == set(read_bif(path).names)


def test_data_values_that_are_not_states_or_missing_are_refused(shared_data):
    """Only -1 and NaN mean missing: -5 or inf in a row is a mistake, named, not a gap."""
    bn = BayesNet.from_bif(shared_data / "bnlearn" / "asia.bif.gz", n_passes=1, random_state=0)
    rows = bn.sample(20, random_state=1).astype(np.float64)
    for bad in (-5.0, np.inf, -np.inf):
        X = rows.copy()
        X[3, 2] = bad
        with pytest.raises(ValueError, match=r"row 3 gives .* the value .*-1 or NaN where"):
            bn.fit(X)
        with pytest.raises(ValueError, match=r"row 3 gives"):
            bn.log_likelihood(X)
    X = rows.copy()
    X[3, 2], X[4, 1] = -1, np.nan
    bn.fit(X)  # missing entries are fine


def test_an_int_that_names_another_state_than_its_index_is_ambiguous():
    """States named by numbers (link's 1..4, munin's 5..0): evidence X=1 could be the
    state '1' or index 1; it is refused, naming both, rather than read silently."""
    net = Network(["X", "Y"], [["1", "2", "3"], ["0", "1"]], [[], [0]],
                  [np.array([0.2, 0.3, 0.5]),
                   np.array([[0.9, 0.1], [0.5, 0.5], [0.1, 0.9]])])
    with pytest.raises(BayesNetError, match=r"state 1 of 'X' is ambiguous.*X='1' or X='2'"):
        net.state_index(0, 1)
    assert net.state_index(0, "1") == 0 and net.state_index(0, 3) == 2  # only a name fits
    assert net.state_index(1, 1) == 1  # '0', '1': index and name agree
    bn = BayesNet(net, n_chains=50, n_samples=50, burn_in=10, random_state=0)
    with pytest.raises(BayesNetError, match="ambiguous"):
        bn.infer({"X": 2})
    assert set(bn.infer({"X": "2"})["Y"]) == {"0", "1"}
