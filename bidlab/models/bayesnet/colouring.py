"""Moralisation and a balanced greedy colouring: the blocks of nodes drawn together.

Two variables may be drawn at the same time in a Gibbs sweep when neither is in the other's
Markov blanket (parents, children, the children's other parents): exactly when they are not
adjacent in the moral graph. A proper colouring of the moral graph therefore splits the
variables into blocks that are each drawn at once. The greedy colouring visits the
variables by decreasing degree and gives each the least-used colour that none of its
neighbours holds (a new colour only when every existing one is taken), so the blocks come
out few and of similar sizes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["moral_graph", "greedy_colouring", "colour_blocks", "colour_blocks_of"]


def moral_graph(parents: list[list[int]]) -> list[set[int]]:
    """The moral graph's neighbour sets: parent-child links undirected, co-parents joined.

    Examples
    --------
    >>> sorted(moral_graph([[], [], [0, 1]])[0])
    [1, 2]
    """
    n = len(parents)
    adj: list[set[int]] = [set() for _ in range(n)]
    for v, ps in enumerate(parents):
        for p in ps:
            adj[v].add(p)
            adj[p].add(v)
        for i, a in enumerate(ps):
            for b in ps[i + 1:]:
                adj[a].add(b)
                adj[b].add(a)
    return adj


def greedy_colouring(adj: list[set[int]]) -> np.ndarray:
    """A proper colouring of the graph ``adj`` (int64 colour per node), balanced greedily.

    Examples
    --------
    >>> greedy_colouring([{1}, {0, 2}, {1}]).tolist()
    [1, 0, 1]
    """
    n = len(adj)
    colour = np.full(n, -1, dtype=np.int64)
    sizes: list[int] = []
    for v in sorted(range(n), key=lambda u: (-len(adj[u]), u)):
        taken = {int(colour[u]) for u in adj[v] if colour[u] >= 0}
        free = [c for c in range(len(sizes)) if c not in taken]
        if free:
            c = min(free, key=lambda c: (sizes[c], c))
        else:
            c = len(sizes)
            sizes.append(0)
        colour[v] = c
        sizes[c] += 1
    return colour


def colour_blocks(parents: list[list[int]]) -> list[np.ndarray]:
    """The variables split into blocks that may be drawn together (one per colour).

    Examples
    --------
    >>> [b.tolist() for b in colour_blocks([[], [0], [1]])]
    [[1], [0, 2]]
    """
    return colour_blocks_of(moral_graph(parents))


def colour_blocks_of(adj: list[set[int]]) -> list[np.ndarray]:
    """The nodes of graph ``adj`` split into blocks, one per colour of
    :func:`greedy_colouring`.

    Examples
    --------
    >>> [b.tolist() for b in colour_blocks_of([{1}, {0}])]
    [[0], [1]]
    """
    colour = greedy_colouring(adj)
    k = int(colour.max()) + 1 if colour.size else 0
    return [np.flatnonzero(colour == c).astype(np.int64) for c in range(k)]
