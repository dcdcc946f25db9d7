"""The chains of a blocked Gibbs sampler: state, evidence, sweeps and marginal estimates.

:class:`GibbsChains` owns the int32 state matrix (rows = chains, or ``m`` replicas of each
observation when learning), the evidence, and the running sums of the Rao-Blackwellised
marginals (each free variable's normalised full conditional, averaged over kept sweeps:
lower variance than counting draws). Evidence may change between any two sweeps: rows
whose state becomes impossible under the new evidence are drawn afresh from the network
(ancestral sampling with the evidence clamped, retried), the marginal sums restart and the
burn-in runs again. Evidence that few ancestral draws agree with after ``init_tries``
rounds gets starts from smoothed tables (:mod:`~bidlab.models.bayesnet.rare_start`); only
evidence none of those reach is reported as having probability zero.

Inference chains start (and, when the evidence changes, start again) from ancestral draws
resampled by their likelihood of the evidence, so that modes a near-deterministic table
keeps chains in are held by about the right share of the chains; the sweep counter, the
options and the learner go on.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from bidlab.kern import bn_gibbs
from bidlab.kern.random import stream_key
from bidlab.models.bayesnet.anneal_start import anneal_rows
from bidlab.models.bayesnet.network import BayesNetError, Network, evidence_vector
from bidlab.models.bayesnet.rare_start import agreeing_draws
from bidlab.models.bayesnet.tables import Tables

__all__ = ["GibbsChains"]

_INIT_STEP = 1 << 40  # init draws use sweep keys far from the sweeps'
POOL = 16  # ancestral draws per chain when the chains start from the evidence


def _pool_size(n: int) -> int:
    """The ancestral draws a start of ``n`` chains resamples from."""
    return min(POOL * n, max(n, 200_000))


class GibbsChains:
    """Chains (or replicated observations) of a blocked Gibbs sampler over ``net``.

    Parameters
    ----------
    net
        the network.
    obs
        int32 (n_obs, n_vars) clamped values of each observation, -1 where free.
    m_max
        replicas of each observation kept (rows = ``m_max * n_obs``).
    seed
        the key of every random stream.
    init_tries
        rounds of ancestral draws before evidence counts as impossible.
    device
        ``"cpu"``, or ``"gpu"``: each sweep's kernel on the GPU (the same draws;
        :mod:`bidlab.models.bayesnet.device`).

    Examples
    --------
    >>> import numpy as np
    >>> net = Network(["a", "b"], [["0", "1"], ["0", "1"]], [[], [0]],
    ...               [np.array([[0.5, 0.5]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
    >>> ch = GibbsChains(net, np.full((500, 2), -1, np.int32), seed=1)
    >>> ch.set_evidence({"b": "1"})
    >>> ch.burn_in = 50
    >>> for _ in range(300):
    ...     ch.sweep()
    >>> bool(abs(ch.marginals()[1] - 0.4 / 0.45) < 0.02)   # P(a=1 | b=1)
    True
    """

    def __init__(self, net: Network, obs: np.ndarray, m_max: int = 1, seed: int = 0,
                 init_tries: int = 1000, device: str = "cpu") -> None:
        if device not in ("cpu", "gpu"):
            raise ValueError(f"GibbsChains: device must be 'cpu' or 'gpu'; got {device!r}")
        self._gpu = None
        if device == "gpu":
            from bidlab.models.bayesnet.device import DeviceSweeps

            self._gpu = DeviceSweeps()
        self.device = device
        self.net = net
        self.t = Tables.of(net)
        self.obs = np.ascontiguousarray(obs, dtype=np.int32)
        self.n_obs = int(self.obs.shape[0])
        self.m_max = int(m_max)
        self.seed = int(seed)
        self.init_tries = int(init_tries)
        self.X = np.zeros((self.m_max * self.n_obs, net.n_vars), np.int32)
        self.ev = np.full(net.n_vars, -1, np.int32)
        self._pending: np.ndarray | None = None
        self.sweeps = 0  # sweeps since the start
        self.since_evidence = 0  # sweeps since the evidence last changed
        self.m_init = 0  # replicas drawn so far
        n_rows = self.n_obs if self.m_max == 1 else 0
        self.cur = np.zeros((n_rows, self.t.n_states))
        self.rb = np.zeros_like(self.cur)
        self.rb2 = np.zeros_like(self.cur)
        self._sq = np.zeros_like(self.cur)  # scratch of squares (sweeps and mcse, locked)
        self._rows = np.arange(n_rows)
        self._ones = np.ones(n_rows)  # column sums as products (numpy's axis-0 sums buffer)
        self._col = np.zeros(self.t.n_states)
        self._col2 = np.zeros(self.t.n_states)
        self.kept = 0
        self.burn_in = 0  # sweeps after an evidence change before marginals are kept
        self.thin = 1
        self._bad = np.zeros(self.X.shape[0], np.uint8)
        self._lj = np.zeros(self.X.shape[0])
        self._lock = threading.RLock()  # a sweep, or a check of new evidence, at a time
        self._pool: tuple[np.ndarray, int, np.ndarray, np.ndarray] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    # -- evidence -------------------------------------------------------------------------
    def set_evidence(self, evidence: dict[str, Any] | None) -> None:
        """Evidence for the next sweep on (checked now, applied then). Running chains also
        check now, between two sweeps, that some start agrees with it: evidence of
        probability zero raises :class:`BayesNetError` here and leaves the chains (and a
        learner sweeping them) as they were."""
        ev = evidence_vector(self.net, evidence)
        with self._lock:
            if self.m_init and self.chains_only and not np.array_equal(ev, self.ev):
                self._start_pool(ev)
            self._pending = ev

    def _apply_evidence(self) -> None:
        ev, self._pending = self._pending, None
        if ev is None or np.array_equal(ev, self.ev):
            self._pool = None  # a checked start it no longer needs
            return
        old = self.ev
        self.ev = ev
        try:
            if self.m_init and self.chains_only:
                self._weighted_start()
            elif self.m_init:
                self._repair(np.arange(self.m_init * self.n_obs, dtype=np.int64))
        except BayesNetError:
            self.ev = old
            raise
        self.reset_estimates()
        self.since_evidence = 0

    def reset_estimates(self) -> None:
        """Forget the marginal sums (a new burn-in follows)."""
        self.rb[...] = 0.0
        self.rb2[...] = 0.0
        self.kept = 0

    @property
    def evidence(self) -> dict[str, str]:
        pending = self._pending  # read once: a sweep may take it meanwhile
        ev = self.ev if pending is None else pending
        return {self.net.names[v]: self.net.states[v][ev[v]] for v in np.flatnonzero(ev >= 0)}

    # -- state ----------------------------------------------------------------------------
    def set_tables(self, net: Network) -> None:
        """Sample from new tables of the same structure (learning's M-step)."""
        self.net = net
        self.t.cpt = net.flat_tables()[0]
        self.t.refresh()
        if self._gpu is not None:
            self._gpu.tables_changed()

    def _log_joint(self, rows: np.ndarray) -> np.ndarray:
        t = self.t
        out = np.empty(rows.shape[0])
        bn_gibbs.log_joint(out.size * t.card.size, self.X[rows], t.cpt, t.off, t.card,
                           *t.parents, out)
        return out

    def _clamp(self, rows: np.ndarray) -> None:
        """Write the evidence and the observations' clamped values into ``rows`` of the
        state (the sweeps draw only free variables: a clamped one keeps what it holds)."""
        X = self.X
        held = np.flatnonzero(self.ev >= 0)
        if held.size:
            X[np.ix_(rows, held)] = self.ev[held]
        if not self.chains_only:
            x = X[rows]
            o = self.obs[rows % self.n_obs]
            X[rows] = np.where((o >= 0) & (self.ev[None, :] < 0), o, x)

    def _repair(self, rows: np.ndarray) -> None:
        """Draw ``rows`` afresh until each has a positive probability under the tables,
        the evidence and the observations (live rows first get the clamped values: a row
        that then has probability zero is drawn afresh; observations that no draw
        completes are placed by :func:`~bidlab.models.bayesnet.anneal_start.anneal_rows`).
        A row of observations with nothing free (learning from a complete row) is its
        clamped values whatever the tables give them: no draw could change it, and the
        M-step counts it as it is."""
        t = self.t
        if not self.chains_only:
            self._clamp(rows)
            free = (self.obs[rows % self.n_obs] < 0) & (self.ev[None, :] < 0)
            rows = rows[free.any(axis=1)]
        if self.m_init:
            if self.chains_only:
                self._clamp(rows)
            todo = rows[np.isneginf(self._log_joint(rows))]
        else:
            todo = rows
        for attempt in range(self.init_tries):
            if todo.size == 0:
                return
            key = np.uint64(stream_key(self.seed, _INIT_STEP + self.sweeps * 1024 + attempt))
            bn_gibbs.forward_fill(todo.size * t.card.size, self.X, todo, self.obs, self.ev,
                                  self.n_obs, t.order, t.cpt, t.off, t.card, *t.parents, key)
            todo = todo[np.isneginf(self._log_joint(todo))]
        if todo.size and not self.chains_only:  # observations: annealed sweeps find them
            todo = anneal_rows(self, todo)
        if todo.size:
            self._zero_probability(int(todo[0] % self.n_obs), draws=self.init_tries)

    def _zero_probability(self, i: int, evidence: np.ndarray | None = None, *,
                          draws: int) -> None:
        """Raise the error for clamped values (the evidence, ``evidence`` or the chains',
        with observation ``i``'s) that none of ``draws`` ancestral draws (``init_tries``
        rounds) agreed with: they may also be merely too unlikely for that many."""
        e = self.ev if evidence is None else evidence
        ev = {self.net.names[v]: self.net.states[v][e[v]] for v in np.flatnonzero(e >= 0)}
        seen = {self.net.names[v]: self.net.states[v][self.obs[i, v]]
                for v in np.flatnonzero(self.obs[i] >= 0)}
        what = f"the evidence {ev}" if ev else "observation"
        raise BayesNetError(
            f"{what}{f' with row {i} {seen}' if seen else ''} has probability zero "
            f"under the network, or too small for sampling to start from: none of "
            f"{draws:,} ancestral draws agreed with it. Remove or change a clamped value; "
            f"if it is merely very unlikely, raise init_tries (BayesNet(init_tries=...), "
            f"now {self.init_tries}: rounds of draws)")

    @property
    def chains_only(self) -> bool:
        """Rows are chains (one replica, nothing observed per row): inference."""
        return self.m_max == 1 and not (self.obs >= 0).any()

    def _weighted_start(self) -> None:
        """Start the chains from the posterior's rough shape: ancestral draws with the
        evidence clamped (``POOL`` per chain), resampled by their likelihood of the
        evidence (systematic resampling). Chains that a near-deterministic table keeps in
        one mode then hold the modes in about the right proportions. When fewer draws of
        the pool than chains agree with the evidence (a rare cause of a deterministic
        variable), up to ``init_tries`` more rounds of one draw per chain look for more,
        then smoothed tables' draws or annealed sweeps
        (:mod:`~bidlab.models.bayesnet.rare_start`); none at all means the evidence has
        probability zero."""
        n = self.n_obs
        P, lw = self._start_pool(self.ev)
        self._pool = None  # used: its memory goes
        top = lw.max()
        w = np.exp(lw - top)
        c = np.cumsum(w / w.sum())
        u = (np.random.default_rng([self.seed, self.sweeps]).random() + np.arange(n)) / n
        self.X[:n] = P[np.minimum(np.searchsorted(c, u), P.shape[0] - 1)]

    def _start_pool(self, ev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The draws :meth:`_weighted_start` resamples under evidence ``ev`` at this sweep,
        and their log-likelihoods (raises when none agrees with it). Kept for that sweep:
        a check of new evidence draws the pool its start then uses."""
        kept = self._pool
        if kept is not None and kept[1] == self.sweeps and np.array_equal(kept[0], ev):
            return kept[2], kept[3]
        n = self.n_obs
        P, lw = self._likelihood_draws(_pool_size(n), _INIT_STEP - 1 - self.sweeps, ev)
        if np.count_nonzero(np.isfinite(lw)) < n:  # rare evidence: more draws, or others
            P, lw = agreeing_draws(self, n, ev, (P, lw), 2 * _INIT_STEP + self.sweeps * 1024)
        self._pool = (ev.copy(), self.sweeps, P, lw)
        return P, lw

    def _likelihood_draws(self, size: int, step: int,
                          ev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``size`` ancestral draws with the evidence ``ev`` clamped (the streams of sweep
        key ``step``) and each one's log-likelihood of it (``-inf``: disagrees)."""
        t = self.t
        P = np.zeros((size, t.card.size), np.int32)
        free = np.full((1, t.card.size), -1, np.int32)
        key = np.uint64(stream_key(self.seed, step))
        bn_gibbs.forward_fill(P.size, P, np.arange(size, dtype=np.int64), free, ev, 1,
                              t.order, t.cpt, t.off, t.card, *t.parents, key)
        lw = np.zeros(size)
        with np.errstate(divide="ignore"):
            for v in np.flatnonzero(ev >= 0):
                cfg = np.zeros(size, np.int64)
                for q in range(t.par_ptr[v], t.par_ptr[v + 1]):
                    cfg += P[:, t.par_idx[q]].astype(np.int64) * t.par_stride[q]
                lw += np.log(t.cpt[t.off[v] + cfg * t.card[v] + ev[v]])
        return P, lw

    def activate(self, m: int) -> None:
        """Make replicas ``0..m-1`` live: new ones start as copies of replica 0. The first
        call takes pending evidence first, so the chains start from it."""
        m = min(int(m), self.m_max)
        with self._lock:
            self._activate(m)

    def _activate(self, m: int) -> None:
        if self.m_init == 0:
            if self._pending is not None:
                self._apply_evidence()
            if self.chains_only:
                self._weighted_start()
            else:
                self._repair(np.arange(self.n_obs, dtype=np.int64))
            self.m_init = 1
        n = self.n_obs
        while self.m_init < m:
            j = self.m_init
            self.X[j * n:(j + 1) * n] = self.X[:n]
            self.m_init += 1

    def sweep(self, m_active: int = 1, record: bool | None = None, lo: int = 0,
              hi: int | None = None) -> None:
        """One sweep of every block over observations ``lo..hi`` of ``m_active`` replicas;
        ``record`` adds the Rao-Blackwellised marginals to the sums (chains only); None:
        when ``burn_in`` sweeps have passed since the evidence changed, every ``thin``-th."""
        with self._lock:
            self._sweep(m_active, record, lo, hi)

    def _sweep(self, m_active: int, record: bool | None, lo: int, hi: int | None) -> None:
        if self._pending is not None:
            self._apply_evidence()
        if record is None:
            k = self.since_evidence - self.burn_in
            record = k >= 0 and k % self.thin == 0
        self.activate(m_active)
        t = self.t
        hi = self.n_obs if hi is None else int(hi)
        record = bool(record) and self.cur.shape[0] > 0
        key = np.uint64(stream_key(self.seed, self.sweeps))
        self._bad[...] = 0
        m = int(m_active)
        if self._gpu is not None:
            self._gpu.sweep(self, m, int(lo), hi, key, record)
        else:
            bn_gibbs.sweep(m * (hi - lo) * t.card.size, self.X, self.obs, self.ev, self.n_obs,
                           m, int(lo), hi, t.cpt, t.off, t.card, *t.parents, t.unit_a,
                           t.unit_b, t.fac_ptr, t.fac_idx, t.fac_step_a, t.fac_step_b,
                           *t.dets, t.blk_ptr, t.blk_units, t.cond, t.cond_ptr, t.mb_ptr,
                           t.mb_idx, t.mb_stride, key, self.cur, t.state_off, record,
                           self._bad)
        if self._bad.any():  # tables changed under a row (learning): draw it afresh
            self._repair(np.flatnonzero(self._bad).astype(np.int64))
        self.sweeps += 1
        self.since_evidence += 1
        if record:
            self._clamped_marginals()
            self.rb += self.cur
            np.multiply(self.cur, self.cur, out=self._sq)
            self.rb2 += self._sq
            self.kept += 1

    def _clamped_marginals(self) -> None:
        so = self.t.state_off
        rows = self._rows
        for v in np.flatnonzero(self.t.is_det):  # drawn with their parents: their value
            self.cur[:, so[v]:so[v + 1]] = 0.0
            self.cur[rows, so[v] + self.X[: rows.shape[0], v]] = 1.0
        for v in np.flatnonzero(self.ev >= 0):
            self.cur[:, so[v]:so[v + 1]] = 0.0
            self.cur[:, so[v] + self.ev[v]] = 1.0

    # -- estimates ------------------------------------------------------------------------
    def marginals(self) -> np.ndarray:
        """The Rao-Blackwellised marginal of every state (n_states,), averaged over chains
        and kept sweeps (the last draws' frequencies before any sweep was kept)."""
        if self.kept == 0:
            so, card = self.t.state_off, self.t.card
            out = np.zeros(self.t.n_states)
            X = self.X[: max(self.m_init, 1) * self.n_obs]
            for v in range(card.shape[0]):
                out[so[v]:so[v + 1]] = np.bincount(X[:, v], minlength=card[v]) / X.shape[0]
            return out
        return self.rb.sum(axis=0) / (self.kept * self.rb.shape[0])

    def mcse(self) -> float:
        """The largest Monte-Carlo standard error of a state's marginal: the spread of the
        chains' own means (independent chains, so their autocorrelation is inside each
        mean) over the square root of their number; NaN before a kept sweep or with 1
        chain."""
        n, m = self.kept, self.rb.shape[0]
        if n < 1 or m < 2:
            return float("nan")
        # the spread of the chains' sums, from their column sums and sums of squares (the
        # kept scratch: checked every pass with tol; numpy's broadcast ops take a buffer)
        with self._lock:  # (the scratch is the sweeps')
            s1 = np.dot(self._ones, self.rb, out=self._col)
            s2 = np.dot(self._ones, np.multiply(self.rb, self.rb, out=self._sq),
                        out=self._col2)
            np.multiply(s1, s1, out=s1)
            s1 /= m
            np.subtract(s2, s1, out=s2)
            var = max(float(s2.max()), 0.0) / (m - 1)
        return float(np.sqrt(var) / n / np.sqrt(m))

    def rhat(self) -> float:
        """The largest potential scale reduction factor (Gelman-Rubin R-hat) over all
        states' Rao-Blackwellised marginals; NaN before 2 kept sweeps or with 1 chain;
        inf when the chains hold a state's marginal fixed at different values (they never
        move between the modes they started in)."""
        n, m = self.kept, self.rb.shape[0]
        if n < 2 or m < 2:
            return float("nan")
        mean = self.rb / n
        w = np.maximum(self.rb2 / n - mean * mean, 0.0) * (n / (n - 1))
        W = w.mean(axis=0)
        B = n * mean.var(axis=0, ddof=1)
        ok = W > 1e-10
        if bool(np.any(~ok & (B > 1e-10 * n))):
            return float("inf")
        if not ok.any():
            return 1.0
        var = (n - 1) / n * W[ok] + B[ok] / n
        return float(np.sqrt(var / W[ok]).max())

    def log_joint_mean(self, m_active: int = 1) -> float:
        """Mean log P(state) over the live rows (learning's training score)."""
        rows = np.arange(max(1, m_active) * self.n_obs, dtype=np.int64)
        return float(self._log_joint(rows).mean())
