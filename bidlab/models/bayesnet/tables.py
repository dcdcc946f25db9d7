"""A network as the flat arrays the sampling kernels read (:mod:`bidlab.kern.bn_gibbs`)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace

import numpy as np

from bidlab import _forksafe
from bidlab.models.bayesnet.colouring import colour_blocks_of
from bidlab.models.bayesnet.network import Network

__all__ = ["Tables", "COUPLED", "MAX_JOINT_STATES", "MAX_CONDITIONAL_ENTRIES"]

#: a child whose table rows' largest entries average at least this is drawn with its parent
COUPLED = 0.9
#: the most joint states of a unit of two variables
MAX_JOINT_STATES = 36
#: a unit's full conditional is tabled (one row per state of the variables its tables also
#: read) when the table has at most this many entries
MAX_CONDITIONAL_ENTRIES = 1 << 14

_CACHE: weakref.WeakKeyDictionary[Network, tuple[int, Tables]] = weakref.WeakKeyDictionary()
_CACHE_LOCK = _forksafe.lock(__name__, "_CACHE_LOCK")


@dataclass
class Tables:
    """Flat, kernel-ready view of a :class:`Network` (see :mod:`bidlab.kern.bn_gibbs`).

    Examples
    --------
    >>> import numpy as np
    >>> net = Network(["a", "b"], [["0", "1"], ["0", "1"]], [[], [0]],
    ...               [np.array([[0.5, 0.5]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
    >>> t = Tables.of(net)
    >>> t.off.tolist(), t.n_blocks, t.unit_b.tolist()
    ([0, 2, 6], 2, [-1, -1])
    """

    cpt: np.ndarray
    off: np.ndarray
    card: np.ndarray
    par_ptr: np.ndarray
    par_idx: np.ndarray
    par_stride: np.ndarray
    unit_a: np.ndarray
    unit_b: np.ndarray
    fac_ptr: np.ndarray
    fac_idx: np.ndarray
    fac_step_a: np.ndarray  # per factor of a unit: how far its flat index moves per state
    fac_step_b: np.ndarray  # of the unit's first / second variable (0: not in the table)
    det_ptr: np.ndarray
    det_idx: np.ndarray
    is_det: np.ndarray
    blk_ptr: np.ndarray
    blk_units: np.ndarray
    order: np.ndarray
    state_off: np.ndarray  # where each variable's states start in a marginals row
    # tabled full conditionals (see :meth:`refresh`): unit u's rows start at cond_ptr[u]
    # (-1: not tabled), indexed by the states of mb_idx[mb_ptr[u]:mb_ptr[u + 1]] with
    # strides mb_stride, each row the unit's joint states' unnormalised probabilities
    cond_ptr: np.ndarray
    mb_ptr: np.ndarray
    mb_idx: np.ndarray
    mb_stride: np.ndarray
    cond: np.ndarray

    @classmethod
    def of(cls, net: Network) -> Tables:
        """The tables of ``net``, with arrays of their own for what sampling changes
        (``cpt``, ``cond``). Built once per network while its tables hold the same values
        (an inference call builds a sampler each time; the layout costs milliseconds)."""
        cpt = net.flat_tables()[0]
        with _CACHE_LOCK:
            limit, kept = _CACHE.get(net, (None, None))
        if (kept is None or limit != MAX_CONDITIONAL_ENTRIES
                or not np.array_equal(kept.cpt, cpt)):
            kept = cls._build(net)
            with _CACHE_LOCK:
                _CACHE[net] = (MAX_CONDITIONAL_ENTRIES, kept)
        return replace(kept, cpt=kept.cpt.copy(), cond=kept.cond.copy())

    @classmethod
    def _build(cls, net: Network) -> Tables:
        cpt, off = net.flat_tables()
        card = net.cards
        n = net.n_vars
        par_ptr = np.zeros(n + 1, np.int64)
        par_idx: list[int] = []
        par_stride: list[int] = []
        for v, ps in enumerate(net.parents):
            par_idx += ps
            par_stride += _row_major_strides(card, ps)
            par_ptr[v + 1] = len(par_idx)
        kids = net.children()
        is_det = np.array([bool(ps) and bool(np.all(t.max(axis=1) == 1.0))
                           for ps, t in zip(net.parents, net.cpts, strict=True)])
        rank = {v: q for q, v in enumerate(net.order)}

        def closure(vs: list[int]) -> list[int]:
            d: list[int] = []
            todo = [c for v in vs for c in kids[v] if is_det[c]]
            while todo:
                c = todo.pop()
                if c not in d and c not in vs:
                    d.append(c)
                    todo += [g for g in kids[c] if is_det[g]]
            return sorted(d, key=rank.__getitem__)

        units = [(v, _partner(net, v, kids, is_det)) for v in range(n)
                 if not (is_det[v] and net.parents[v])]
        dets: list[list[int]] = []
        facs: list[list[int]] = []
        writes: list[set[int]] = []
        for a, b in units:
            members = [a] if b < 0 else [a, b]
            d = closure(members)
            w = set(members) | set(d)
            f = w | {c for x in w for c in kids[x]}
            dets.append(d)
            facs.append(sorted(f))
            writes.append(w)
        fac_ptr, fac_idx = _csr(facs)
        step_a = _steps(net, par_ptr, par_stride, units, facs, 0)
        step_b = _steps(net, par_ptr, par_stride, units, facs, 1)
        det_ptr, det_idx = _csr(dets)
        blocks = colour_blocks_of(_conflicts(net.parents, writes, facs))
        blk_ptr = np.zeros(len(blocks) + 1, np.int64)
        np.cumsum([b.size for b in blocks], out=blk_ptr[1:])
        state_off = np.zeros(n + 1, np.int64)
        np.cumsum(card, out=state_off[1:])
        i64 = np.int64
        cond_ptr, mb_ptr, mb_idx, mb_stride, size = _blankets(net, units, dets, facs)
        t = cls(cpt, off, card.astype(i64), par_ptr, np.asarray(par_idx, i64),
                np.asarray(par_stride, i64),
                np.array([a for a, _ in units], i64), np.array([b for _, b in units], i64),
                fac_ptr, fac_idx, step_a, step_b, det_ptr, det_idx,
                is_det.astype(np.uint8), blk_ptr,
                np.concatenate(blocks).astype(i64) if blocks else np.zeros(0, i64),
                np.asarray(net.order, i64), state_off, cond_ptr, mb_ptr, mb_idx, mb_stride,
                np.zeros(size))
        t.refresh()
        return t

    def refresh(self) -> None:
        """Recompute the tabled full conditionals from ``cpt`` (after the tables change).

        Each entry is the product the sampler would form for that row's state, in the
        same order, so a tabled draw is the same draw to the last bit."""
        from bidlab.kern import bn_gibbs

        if self.cond.size:
            bn_gibbs.conditionals(self.cond, self.cond_ptr, self.mb_ptr, self.mb_idx,
                                  self.mb_stride, self.cpt, self.off, self.card,
                                  *self.parents, self.unit_a, self.unit_b, self.fac_ptr,
                                  self.fac_idx, self.fac_step_a, self.fac_step_b)

    @property
    def n_blocks(self) -> int:
        return int(self.blk_ptr.shape[0] - 1)

    @property
    def n_states(self) -> int:
        return int(self.state_off[-1])

    @property
    def dets(self) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
        """``(det_ptr, det_idx)`` as the sweep takes them: ``(None, None)`` when no unit has
        deterministic descendants (the sweep is then compiled without that path)."""
        return (self.det_ptr, self.det_idx) if self.det_idx.size else (None, None)

    @property
    def parents(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.par_ptr, self.par_idx, self.par_stride


def _csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, np.int64)
    np.cumsum([len(x) for x in lists], out=ptr[1:])
    flat = [u for x in lists for u in x]
    return ptr, np.asarray(flat, np.int64)


def _steps(net: Network, par_ptr: np.ndarray, par_stride: list[int],
           units: list[tuple[int, int]], facs: list[list[int]], which: int) -> np.ndarray:
    """For every (unit, table) pair of ``facs``: the change of the table's flat index when
    the unit's variable ``which`` (0: its first, 1: its partner) goes up by one state."""
    out: list[int] = []
    for unit, fs in zip(units, facs, strict=True):
        v = unit[which]
        for f in fs:
            if f == v:
                out.append(1)
            elif v >= 0 and v in net.parents[f]:
                q = int(par_ptr[f]) + net.parents[f].index(v)
                out.append(int(par_stride[q]) * int(net.cards[f]))
            else:
                out.append(0)
    return np.asarray(out, np.int64)


def _row_major_strides(card: np.ndarray, vs: list[int]) -> list[int]:
    """Each variable's stride in the row-major index of the states of ``vs`` (last
    fastest)."""
    out = [0] * len(vs)
    step = 1
    for q in range(len(vs) - 1, -1, -1):
        out[q] = step
        step *= int(card[vs[q]])
    return out


def _blankets(net: Network, units: list[tuple[int, int]], dets: list[list[int]],
              facs: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                              np.ndarray, int]:
    """Which units get a tabled full conditional, the variables indexing it (every variable
    the unit's tables read except its own), their strides, and the entries in all."""
    cards = net.cards
    cond_ptr = np.full(len(units), -1, np.int64)
    mb_ptr = np.zeros(len(units) + 1, np.int64)
    idx: list[int] = []
    strides: list[int] = []
    size = 0
    for u, ((a, b), d, fs) in enumerate(zip(units, dets, facs, strict=True)):
        blanket = sorted(({x for f in fs for x in (f, *net.parents[f])}) - {a, b})
        joint = int(cards[a]) * (int(cards[b]) if b >= 0 else 1)
        rows = 1
        for x in blanket:
            rows *= int(cards[x])
        if not d and rows * joint <= MAX_CONDITIONAL_ENTRIES:
            cond_ptr[u] = size
            size += rows * joint
            idx += blanket
            strides += _row_major_strides(cards, blanket)
        mb_ptr[u + 1] = len(idx)
    return (cond_ptr, mb_ptr, np.asarray(idx, np.int64), np.asarray(strides, np.int64),
            size)


def _partner(net: Network, v: int, kids: list[list[int]], is_det: np.ndarray) -> int:
    """The child drawn jointly with ``v``: the one whose table ties it to its parents most
    (mean of each row's largest entry at least :data:`COUPLED`), or -1."""
    best, strength = -1, COUPLED
    for c in kids[v]:
        k = len(net.states[v]) * len(net.states[c])
        if is_det[c] or k > MAX_JOINT_STATES:
            continue
        m = float(net.cpts[c].max(axis=1).mean())
        if m >= strength:
            best, strength = c, m
    return best


def _conflicts(parents: list[list[int]], writes: list[set[int]],
               facs: list[list[int]]) -> list[set[int]]:
    """Units that may not be drawn at once: one writes a variable the other reads (a
    variable of one of its tables) or writes."""
    reads = [set(f) | {p for x in f for p in parents[x]} for f in facs]
    writers: dict[int, list[int]] = {}
    readers: dict[int, list[int]] = {}
    for u, w in enumerate(writes):
        for x in w:
            writers.setdefault(x, []).append(u)
    for u, rd in enumerate(reads):
        for x in rd:
            readers.setdefault(x, []).append(u)
    adj: list[set[int]] = [set() for _ in writes]
    for x, ws in writers.items():
        for a in ws:
            for b in readers.get(x, ()):
                if a != b:
                    adj[a].add(b)
                    adj[b].add(a)
    return adj
