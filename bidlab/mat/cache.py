"""The result-container cache: BIDMat's ``newOrCheckFMat(nr, nc, out, guid, opHash)``.

When caching is on (see :func:`caching`), every matrix operation asks this cache for its
result container under a key made of the operator's name, its operands' GUIDs, the
arguments that fix the result's shape and any Python scalar values. The first step of a
minibatch loop allocates; every later step finds the same containers and writes into them,
so the loop allocates nothing. A hit returns the *same* ``Mat`` object, GUID included,
so keys of downstream operations are stable from one minibatch to the next.

The switch is per thread (a training thread can cache while the notebook's thread does
not); the store is shared by all threads and guarded by a lock.

Policy when a byte limit is set (:func:`cache_limit`): after an insertion pushes the bytes
held over the limit, the least recently used entries are evicted (never the one just
inserted) until the total fits again. Evicted containers stay valid for whoever still
holds them; the cache just forgets them. Entries keyed on a matrix that has been garbage
collected can never be hit again and are dropped automatically; so are a learner's (its
scope's) once the learner is collected.

A derived sparse result holds its pattern root (the operand it was computed from), so the
store keeps only a weak reference to it; the strong one lives on that root (its
``_pinned`` dict). A minibatch SMat the caller drops is then collected together with the
results derived from it, and its entries go, instead of the store keeping it alive.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from bidlab import _forksafe, backend

_state = threading.local()


def caching_enabled() -> bool:
    """True when the calling thread has caching switched on."""
    return getattr(_state, "enabled", False)


def caching_scope() -> Hashable:
    """The scope the calling thread's cached results are kept under (see :func:`caching`)."""
    scope = getattr(_state, "scope", None)
    return threading.get_ident() if scope is None else scope


def active_scope() -> Hashable | None:
    """The calling thread's cache scope while caching is on, else None (what each
    operation reads: one lookup)."""
    return getattr(_state, "active", None)


def _switch(enabled: bool) -> None:
    _state.enabled = enabled
    _state.active = caching_scope() if enabled else None


@contextmanager
def caching(enabled: bool = True, scope: Hashable | None = None) -> Iterator[None]:
    """Switch result caching on (or off) for the calling thread inside a ``with`` block.

    A result is cached under its operands' GUIDs, so a loop allocates only on its first
    step when each step refills the same matrices (``copy_from``, ``<<=``; a
    :class:`bidlab.learn.MemorySource` refills one minibatch matrix); a new matrix each
    step is a new key, and a new result.

    Results are kept per ``scope``: by default the calling thread, so two threads that
    compute the same operation on the same matrices at once (a notebook reading a model
    while its learner trains it) never write into one container. A learner passes a scope
    of its own, so its runs, each in a thread of its own, share their containers.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, bidlab
    >>> user = bidlab.Mat(np.ones((4, 3), np.float32))      # k x documents
    >>> mm = bidlab.Mat(np.ones((4, 5), np.float32))        # k x words
    >>> batch = bidlab.SMat(sp.eye(3, 5, format="csr", dtype=np.float32))  # docs x words
    >>> results = []
    >>> with bidlab.caching():
    ...     for step in range(3):
    ...         _ = batch.copy_from(sp.eye(3, 5, k=step, format="csr", dtype=np.float32))
    ...         results.append(bidlab.sddmm(user, mm, batch))   # allocates at step 0 only
    >>> results[0] is results[1] is results[2]
    True
    """
    previous, previous_scope = caching_enabled(), getattr(_state, "scope", None)
    if scope is not None:
        try:
            hash(scope)
        except TypeError:
            raise TypeError(f"caching(scope=...) keys the cached results, so it must be "
                            f"hashable; got a {type(scope).__name__}: pass e.g. a tuple or "
                            "a string") from None
        _state.scope = scope
    _switch(enabled)
    try:
        yield
    finally:
        _state.scope = previous_scope
        _switch(previous)


def set_caching(enabled: bool) -> None:
    """Switch caching on or off for the calling thread (the non-``with`` form)."""
    _switch(bool(enabled))


def _nbytes(container: Any) -> int:
    return int(getattr(container, "nbytes", 0))


def _owner(container: Any) -> Any:
    """The pattern root a derived sparse result holds (None for anything else)."""
    return getattr(container, "_root", None)


class ResultCache:
    """Process-wide store of result containers keyed by (op, operand GUIDs, args)."""

    def __init__(self) -> None:
        self._lock = _forksafe.lock(self, "_lock", threading.RLock)
        self._store: OrderedDict[Hashable, Any] = OrderedDict()
        self._keys_by_guid: dict[int, set[Hashable]] = {}
        self._guids_by_key: dict[Hashable, tuple[int, ...]] = {}
        self._held: dict[int, Hashable] = {}  # id(container) -> its key, while cached
        self._sizes: dict[Hashable, tuple[int, int]] = {}  # key -> (id, bytes counted)
        self._watched: set[int] = set()
        self.limit_bytes: int | None = None
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.bytes_held = 0

    # -- lookup ---------------------------------------------------------------------------
    def get(self, key: Hashable, fits: Callable[[Any], bool]) -> Any | None:
        """The container cached under ``key`` if ``fits(container)``; counts a hit."""
        with self._lock:
            found = self._store.get(key)
            if type(found) is weakref.ref:  # a derived sparse result, pinned on its root
                found = found()
            if found is None or not fits(found):
                return None
            self._store.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: Hashable, container: Any, operands: tuple[Any, ...]) -> None:
        """Remember ``container`` under ``key``; ``operands`` are watched for collection."""
        with self._lock:
            if key in self._store:
                self._drop(key)
            owner = _owner(container)
            if owner is None:
                self._store[key] = container
            else:  # held by its root, so the store does not keep the root alive
                self._store[key] = weakref.ref(container)
                if owner._pinned is None:
                    owner._pinned = {}
                owner._pinned[key] = container
            self._held[id(container)] = key
            self._sizes[key] = (id(container), _nbytes(container))
            self.bytes_held += self._sizes[key][1]
            self.misses += 1
            guids = []
            for op in operands:
                guid = self._watch(op, key)
                if guid is not None:
                    guids.append(guid)
            self._guids_by_key[key] = tuple(guids)
            self._enforce_limit(keep=key)

    def resized(self, container: Any, old_nbytes: int, new_nbytes: int) -> None:
        """Account for a sparse container that grew in place (counted only while it is
        cached), then hold the byte limit again."""
        with self._lock:
            key = self._held.get(id(container))
            found = self._store.get(key) if key is not None else None
            if type(found) is weakref.ref:
                found = found()
            if found is not container:
                return
            self.bytes_held += new_nbytes - old_nbytes
            self._sizes[key] = (id(container), self._sizes[key][1] + new_nbytes - old_nbytes)
            self._enforce_limit(keep=key)

    # -- bookkeeping ----------------------------------------------------------------------
    def _watch(self, operand: Any, key: Hashable) -> int | None:
        guid = getattr(operand, "guid", None)
        if guid is None:
            return None
        self._keys_by_guid.setdefault(guid, set()).add(key)
        if guid not in self._watched:
            self._watched.add(guid)
            weakref.finalize(operand, self._forget_guid, guid)
        return guid

    def _drop(self, key: Hashable) -> None:
        """Remove one entry and every index that names it."""
        old = self._store.pop(key, None)
        if type(old) is weakref.ref:
            old = old()  # None once collected together with its root
            if old is not None and old._root._pinned is not None:
                old._root._pinned.pop(key, None)
        ident, nbytes = self._sizes.pop(key, (None, 0))
        self.bytes_held -= nbytes
        if ident is not None and self._held.get(ident) == key:
            del self._held[ident]
        for guid in self._guids_by_key.pop(key, ()):
            keys = self._keys_by_guid.get(guid)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._keys_by_guid[guid]

    def _forget_guid(self, guid: int) -> None:
        with self._lock:
            self._watched.discard(guid)
            for key in list(self._keys_by_guid.get(guid, ())):
                self._drop(key)
            self._keys_by_guid.pop(guid, None)

    def forget_scope(self, scope: Hashable) -> int:
        """Drop every entry cached under ``scope`` (see :func:`caching`); return how many.

        A learner's finalizer calls it: its containers are keyed on its own scope, so once
        it is collected they can never be hit again, yet their operands (the model's
        matrices, which outlive it) would keep them cached.
        """
        with self._lock:
            gone = [key for key in list(self._store)  # a copy: a finalizer may drop too
                    if type(key) is tuple and len(key) == 2 and key[0] == scope]
            for key in gone:
                self._drop(key)
            return len(gone)

    def _enforce_limit(self, keep: Hashable) -> None:
        if self.limit_bytes is None:
            return
        while self.bytes_held > self.limit_bytes and len(self._store) > 1:
            key = next(iter(self._store))
            if key == keep:
                self._store.move_to_end(key)
                key = next(iter(self._store))
                if key == keep:
                    break
            self._drop(key)
            self.evictions += 1

    def clear(self) -> None:
        """Forget every cached container (they stay valid for whoever still holds them)."""
        with self._lock:
            pinned = [ref() for ref in self._store.values() if type(ref) is weakref.ref]
            self._store.clear()
            self._sizes.clear()
            self._keys_by_guid.clear()
            self._guids_by_key.clear()
            self._held.clear()
            self.bytes_held = 0
            for found in pinned:  # unpinned last: a root freed now finds nothing to drop
                if found is not None:
                    found._root._pinned = None

    def stats(self) -> dict[str, int | None]:
        """Hits, misses, entries, bytes held, evictions, limit and the core's allocations."""
        count, nbytes = backend.allocations.snapshot()
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "entries": len(self._store),
                "bytes_held": self.bytes_held,
                "evictions": self.evictions,
                "limit_bytes": self.limit_bytes,
                "allocations": count,
                "bytes_allocated": nbytes,
            }

    def __len__(self) -> int:
        return len(self._store)


CACHE = ResultCache()


def cache_stats() -> dict[str, int | None]:
    """Statistics of the process-wide result cache (see :class:`ResultCache`)."""
    return CACHE.stats()


def clear_cache() -> None:
    """Empty the result cache; the next step of a loop allocates again."""
    CACHE.clear()


def cache_limit(nbytes: int | None) -> None:
    """Cap the bytes held by the cache (None: no cap). Least recently used entries go first."""
    if nbytes is not None and (not isinstance(nbytes, int) or nbytes < 0):
        raise ValueError(f"cache_limit takes a byte count >= 0 or None; got {nbytes!r}")
    with CACHE._lock:
        CACHE.limit_bytes = nbytes
        if nbytes is not None:
            CACHE._enforce_limit(keep=None)
