"""A network as the flat arrays the sampling kernels read (:mod:`bidlab.kern.bn_gibbs`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bidlab.models.bayesnet.colouring import colour_blocks_of, moral_graph
from bidlab.models.bayesnet.network import Network

__all__ = ["Tables"]


@dataclass
class Tables:
    """Flat, kernel-ready view of a :class:`Network` (see :mod:`bidlab.kern.bn_gibbs`).

    Examples:
        >>> import numpy as np
        >>> net = Network(["a", "b"], [["0", "1"], ["0", "1"]], [[], [0]],
        ...               [np.array([[0.5, 0.5]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
        >>> t = Tables.of(net)
        >>> t.off.tolist(), t.n_blocks
        ([0, 2, 6], 2)
    """

    cpt: np.ndarray
    off: np.ndarray
    card: np.ndarray
    par_ptr: np.ndarray
    par_idx: np.ndarray
    par_stride: np.ndarray
    fac_ptr: np.ndarray
    fac_idx: np.ndarray
    det_ptr: np.ndarray
    det_idx: np.ndarray
    is_det: np.ndarray
    blk_ptr: np.ndarray
    blk_nodes: np.ndarray
    order: np.ndarray
    state_off: np.ndarray  # where each variable's states start in a marginals row

    @classmethod
    def of(cls, net: Network) -> Tables:
        cpt, off = net.flat_tables()
        card = net.cards
        n = net.n_vars
        par_ptr = np.zeros(n + 1, np.int64)
        par_idx: list[int] = []
        par_stride: list[int] = []
        for v, ps in enumerate(net.parents):
            st = 1
            strides = [0] * len(ps)
            for q in range(len(ps) - 1, -1, -1):
                strides[q] = st
                st *= int(card[ps[q]])
            par_idx += ps
            par_stride += strides
            par_ptr[v + 1] = len(par_idx)
        kids = net.children()
        is_det = np.array([bool(ps) and bool(np.all(t.max(axis=1) == 1.0))
                           for ps, t in zip(net.parents, net.cpts, strict=True)])
        rank = {v: q for q, v in enumerate(net.order)}
        dets: list[list[int]] = []
        facs: list[list[int]] = []
        for v in range(n):
            d: list[int] = []
            todo = [c for c in kids[v] if is_det[c]]
            while todo:
                c = todo.pop()
                if c not in d:
                    d.append(c)
                    todo += [g for g in kids[c] if is_det[g]]
            d.sort(key=rank.__getitem__)
            f = {c for u in (v, *d) for c in kids[u]} | set(d)
            f.discard(v)
            dets.append(d)
            facs.append(sorted(f))
        fac_ptr, fac_idx = _csr(facs)
        det_ptr, det_idx = _csr(dets)
        blocks = colour_blocks_of(_touching(net.parents, dets, facs))
        blk_ptr = np.zeros(len(blocks) + 1, np.int64)
        np.cumsum([b.size for b in blocks], out=blk_ptr[1:])
        state_off = np.zeros(n + 1, np.int64)
        np.cumsum(card, out=state_off[1:])
        i64 = np.int64
        return cls(cpt, off, card.astype(i64), par_ptr, np.asarray(par_idx, i64),
                   np.asarray(par_stride, i64), fac_ptr, fac_idx, det_ptr, det_idx,
                   is_det.astype(np.uint8), blk_ptr,
                   np.concatenate(blocks).astype(i64) if blocks else np.zeros(0, i64),
                   np.asarray(net.order, i64), state_off)

    @property
    def n_blocks(self) -> int:
        return int(self.blk_ptr.shape[0] - 1)

    @property
    def n_states(self) -> int:
        return int(self.state_off[-1])

    @property
    def parents(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.par_ptr, self.par_idx, self.par_stride


def _csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, np.int64)
    np.cumsum([len(x) for x in lists], out=ptr[1:])
    flat = [u for x in lists for u in x]
    return ptr, np.asarray(flat, np.int64)


def _touching(parents: list[list[int]], dets: list[list[int]],
              facs: list[list[int]]) -> list[set[int]]:
    """The moral graph, widened so that two variables whose draws read or write a common
    variable (through deterministic descendants) are neighbours."""
    adj = moral_graph(parents)
    for v in range(len(parents)):
        reach = set(dets[v]) | set(facs[v])
        for u in list(reach):
            reach |= set(parents[u])
        reach.discard(v)
        for u in reach:
            adj[v].add(u)
            adj[u].add(v)
    return adj
