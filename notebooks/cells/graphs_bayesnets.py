"""The cells of ``06_graphs_bayesnets.ipynb``: PageRank on a graph, then a Bayesian
network's marginals by blocked Gibbs sampling, with evidence set by a click."""

from __future__ import annotations

from .common import DATA_PARAM, LOAD_DATA, WAIT, WAIT_NOTE, WAIT_PARAM

CELLS: list[tuple[str, str]] = [
    ("markdown", "# Graphs and Bayesian networks, live\n\nPageRank on the wiki-Vote graph "
     "(one sparse mat-vec per pass, the L1 change per iteration on the dashboard), then "
     "the alarm network: every variable's marginal by blocked Gibbs sampling, with "
     "evidence set by a click on a bar while the chains run."),
    ("code", DATA_PARAM + "\nNCHAINS = 300    # Gibbs chains sampled at once\n"
     "NSAMPLES = 400   # kept sweeps" + WAIT_PARAM),
    ("code", LOAD_DATA),
    ("code", '''import numpy as np
import scipy.sparse as sp

from bidlab.datasets.graphs import load_snap_edges

folder = data_dir("snap-wiki-vote")
if folder is not None:
    g = load_snap_edges(folder / "wiki-Vote.txt")
    A, labels = g.A, g.ids
else:  # a random directed graph of 2,000 vertices
    rng = np.random.default_rng(0)
    A = sp.random(2000, 2000, density=0.005, format="csr", random_state=rng)
    labels = np.arange(2000)
print(f"{A.shape[0]:,} vertices, {A.nnz:,} edges")'''),
    ("code", '''from bidlab.widgets import Dashboard

from bidlab.models import PageRank

pr = PageRank(tol=1e-10, max_iter=200)
learner = pr.learner(A)
Dashboard(learner)   # the score curve is the L1 change of each iteration'''),
    ("code", "learner.start()"),
    ("markdown", WAIT_NOTE),
    ("code", WAIT),
    ("code", '''print(f"{pr.n_iter_} iterations, converged: {pr.converged_}")
print("top 10 vertices:")
for vertex, score in pr.top(10, labels=labels):
    print(f"  {vertex!s:>8}  {score:.5f}")'''),
    ("markdown", "## The alarm network\n\nEach bar is a state's posterior marginal "
     "(Rao-Blackwellised, over all chains). Click a bar to clamp that variable to that "
     "state from the next sweep on, click it again to clear it: the chains keep "
     "running, burn in again, and the bars move to the new posterior."),
    ("code", '''from bidlab.models import BayesNet
from bidlab.models.bayesnet import Network

folder = data_dir("bnlearn")
if folder is not None:
    bn = BayesNet.from_bif(folder / "alarm.bif.gz", n_chains=NCHAINS, burn_in=50,
                           n_samples=NSAMPLES, random_state=0)
    SHOW = ["HYPOVOLEMIA", "LVFAILURE", "STROKEVOLUME", "CO", "BP", "HRBP"]
    CLICK = "BP = LOW"
else:  # rain -> wet grass <- sprinkler
    net = Network(["rain", "sprinkler", "wet"], [["no", "yes"]] * 3, [[], [], [0, 1]],
                  [np.array([[0.8, 0.2]]), np.array([[0.6, 0.4]]),
                   np.array([[0.99, 0.01], [0.1, 0.9], [0.2, 0.8], [0.01, 0.99]])])
    bn = BayesNet(net, n_chains=NCHAINS, burn_in=50, n_samples=NSAMPLES, random_state=0)
    SHOW, CLICK = ["rain", "sprinkler", "wet"], "wet = yes"
print(bn.network_)'''),
    ("code", '''from bidlab.widgets import BayesNetView

learner = bn.learner()
view = BayesNetView(learner, variables=SHOW)
view'''),
    ("code", '''learner.start()
before = learner.model.marginals()
# what a click on the bar does (the same call the bar's click handler makes)
view.click(view.source.data["label"].index(CLICK))
print("evidence from the next sweep on:", learner.model.chains.evidence)'''),
    ("markdown", WAIT_NOTE),
    ("code", "finished" + WAIT.split("\n\n\nfinished", 1)[1]),
    ("code", '''model = learner.model
after = model.marginals()
net = bn.network_
print(f"evidence {model.chains.evidence}; {model.chains.kept} sweeps kept since it was set; "
      f"max R-hat {model.chains.rhat():.3f}, marginals within about "
      f"{2 * model.chains.mcse():.3f} (2 Monte-Carlo standard errors)")
print(f"{'variable':<14} {'state':<8} {'before':>7} {'after':>7}")
for name in SHOW:
    v = net.index(name)
    for s, state in enumerate(net.states[v]):
        print(f"{name:<14} {state:<8} {before[v][s]:>7.3f} {after[v][s]:>7.3f}")
print(f"PageRank above: {pr.n_iter_} iterations, converged: {pr.converged_}, top vertex "
      f"{pr.top(1, labels=labels)[0][0]}")'''),
]
