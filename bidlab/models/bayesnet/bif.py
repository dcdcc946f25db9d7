"""Reading and writing BIF (Bayesian Interchange Format) files, plain or gzip.

The grammar read is the one of the standard repositories (bnlearn, pgmpy)::

    network NAME { property ...; }
    variable X { type discrete [ 3 ] { low, mid, high }; property ...; }
    probability ( X | P1, P2 ) { (a, b) 0.1, 0.2, 0.7; ... default 0.3, 0.3, 0.4; }
    probability ( Y ) { table 0.4, 0.6; }

``//`` and ``/* */`` comments are skipped, ``property`` lines ignored. A name may be
quoted (``"light on"``); the older ``probability ( X P1 P2 )`` form lists the parents
without ``|``. A ``table`` of a variable with parents lists the probabilities with the
child's state varying slowest and the parents' configurations (in row-major order, the
last parent fastest) within it, as BIF and pgmpy have it: ``table`` of ``X | P`` is
``P(x0|p0), P(x0|p1), P(x1|p0), P(x1|p1)``. Files are read through
:mod:`bidlab._bounded_io` (regular files only, decompression capped).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bidlab._bounded_io import check_budget, read_data
from bidlab.learn.save_target import check_writable
from bidlab.models.bayesnet.network import BayesNetError, Network

__all__ = ["read_bif", "parse_bif", "write_bif", "format_bif"]

# a quoted name, a comment (not inside quotes), punctuation, or a word
_TOKEN = re.compile(r'"[^"]*"|//[^\n]*|/\*.*?\*/|[{}()\[\];,|]|(?:[^\s{}()\[\];,|"/]|/(?![/*]))+',
                    re.S)
_WORD = re.compile(r'(?:[^\s{}()\[\];,|"/]|/(?![/*]))+')
#: BIF text (a variable block and a probability block), told from a path
_TEXT = (re.compile(r"\bvariable\s+[^{}]*\{"), re.compile(r"\bprobability\s*\("))


def _unquote(tok: str) -> str:
    return tok[1:-1] if len(tok) >= 2 and tok[0] == tok[-1] == '"' else tok


def _quoted(name: str) -> str:
    """``name`` as a BIF word, in quotes unless it reads back as one word."""
    return name if _WORD.fullmatch(name) else f'"{name}"'


class _Tokens:
    def __init__(self, text: str, where: str) -> None:
        self.toks = [t for t in _TOKEN.findall(text) if not t.startswith(("//", "/*"))]
        self.i = 0
        self.where = where

    def fail(self, what: str) -> BayesNetError:
        near = " ".join(self.toks[max(0, self.i - 4): self.i + 4])
        return BayesNetError(f"{self.where}: not valid BIF: {what} (near '{near}')")

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def next(self) -> str:
        if self.i >= len(self.toks):
            raise self.fail("the file ends early")
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, tok: str) -> None:
        got = self.next()
        if got != tok:
            raise self.fail(f"expected '{tok}', got '{got}'")

    def body(self) -> Iterator[str]:
        """The first token of each statement of a ``{ ... }`` body, up to its closing
        brace (the caller reads the rest of each statement)."""
        self.expect("{")
        while (t := self.next()) != "}":
            yield t

    def skip_statement(self) -> None:
        while self.next() != ";":
            pass

    def skip_block(self) -> None:
        self.expect("{")
        depth = 1
        while depth:
            t = self.next()
            depth += (t == "{") - (t == "}")

    def name(self) -> str:
        """The next token as a name (quotes removed)."""
        return _unquote(self.next())

    def name_list(self, close: str) -> list[str]:
        out: list[str] = []
        while True:
            t = self.next()
            if t == close:
                return out
            if t != ",":
                out.append(_unquote(t))

    def numbers(self) -> list[float]:
        out: list[float] = []
        while True:
            t = self.next()
            if t == ";":
                return out
            if t == ",":
                continue
            try:
                out.append(float(t))
            except ValueError:
                raise self.fail(f"'{t}' is not a probability") from None


def parse_bif(text: str, where: str = "BIF text") -> Network:
    """The :class:`Network` a BIF text describes (see the module doc).

    Examples
    --------
    >>> net = parse_bif('''variable A { type discrete [ 2 ] { y, n }; }
    ... probability ( A ) { table 0.3, 0.7; }''')
    >>> net.names, net.cpts[0].tolist()
    (['A'], [[0.3, 0.7]])
    """
    tk = _Tokens(text.removeprefix("\ufeff"), where)  # a byte-order mark (Windows editors)
    net_name = "unknown"
    names: list[str] = []
    states: list[list[str]] = []
    probs: list[tuple[str, list[str], Any]] = []
    while tk.peek() is not None:
        kw = tk.next()
        if kw == "network":
            net_name = tk.name()
            tk.skip_block()
        elif kw == "variable":
            names.append(tk.name())
            states.append(_variable_body(tk, names[-1]))
        elif kw == "probability":
            probs.append(_probability(tk))
        else:
            raise tk.fail(f"unexpected '{kw}' (expected network, variable or probability)")
    index = {n: i for i, n in enumerate(names)}
    if len(index) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise BayesNetError(f"{where}: variable {dup!r} is declared twice: rename one")
    parents: list[list[int] | None] = [None] * len(names)
    tables: list[Any] = [None] * len(names)
    for child, pnames, body in probs:
        for nm in (child, *pnames):
            if nm not in index:
                raise BayesNetError(f"{where}: the probability block of {child!r} names "
                                    f"{nm!r}, which no 'variable' block declares")
        v = index[child]
        if parents[v] is not None:
            raise BayesNetError(f"{where}: {child!r} has two probability blocks: keep one")
        parents[v] = [index[p] for p in pnames]
        tables[v] = _table(where, child, states[v], [states[index[p]] for p in pnames], body)
    missing = [names[v] for v in range(len(names)) if parents[v] is None]
    if missing:
        raise BayesNetError(f"{where}: no probability block for {', '.join(missing[:8])}: "
                            "every variable needs its table")
    try:
        return Network(names, states, parents, tables, net_name)  # type: ignore[arg-type]
    except BayesNetError as exc:
        raise BayesNetError(f"{where}: {exc}") from None


def _variable_body(tk: _Tokens, name: str) -> list[str]:
    states: list[str] | None = None
    for t in tk.body():
        if t == "type":
            if tk.next() != "discrete":
                raise tk.fail(f"variable {name!r} is not discrete (only discrete variables "
                              "are supported)")
            tk.expect("[")
            k = tk.next()
            tk.expect("]")
            tk.expect("{")
            states = tk.name_list("}")
            tk.expect(";")
            if not k.isdigit() or int(k) != len(states):
                raise tk.fail(f"variable {name!r} declares [ {k} ] states but lists "
                              f"{len(states)}")
        else:
            tk.skip_statement()
    if states is None:
        raise tk.fail(f"variable {name!r} has no 'type discrete' line")
    return states


def _probability(tk: _Tokens) -> tuple[str, list[str], Any]:
    tk.expect("(")
    child = tk.name()
    pnames: list[str] = []
    t = tk.next()
    if t in ("|", ","):
        pnames = tk.name_list(")")
    elif t != ")":  # the older form, ( X P1 P2 ): the parents follow without '|'
        if t in ("(", "{", "}", "[", "]", ";"):
            raise tk.fail(f"expected '|' or ')' after {child!r}")
        pnames = [_unquote(t), *tk.name_list(")")]
    rows: list[tuple[list[str], list[float]]] = []
    table: list[float] | None = None
    default: list[float] | None = None
    for t in tk.body():
        if t == "table":
            table = tk.numbers()
        elif t == "default":
            default = tk.numbers()
        elif t == "(":
            rows.append((tk.name_list(")"), tk.numbers()))
        else:
            tk.skip_statement()
    return child, pnames, (table, rows, default)


def _table(where: str, child: str, st: list[str], pst: list[list[str]], body: Any) -> Any:
    table, rows, default = body
    k = len(st)
    n_cfg = math.prod(len(s) for s in pst)  # exact: no wrap
    if table is not None and rows:
        raise BayesNetError(f"{where}: the probabilities of {child!r} give both a table and "
                            "rows: keep one of the two")
    if table is not None:
        t = np.asarray(table, dtype=np.float64)
        if t.size != n_cfg * k:
            return t  # Network says how many entries it needs
        return t.reshape(k, n_cfg).T  # the child's state varies slowest (module doc)
    check_budget(where, f"the table of {child!r} ({n_cfg:,} parent configurations x {k} "
                 "states)", n_cfg * k * 8, fix="check its parents and their states")
    out = np.full((n_cfg, k), np.nan)
    if default is not None:
        if len(default) != k:
            raise BayesNetError(f"{where}: the default row of {child!r} has {len(default)} "
                                f"values for {k} states")
        out[:] = default
    strides = np.ones(len(pst), dtype=np.int64)
    for i in range(len(pst) - 2, -1, -1):
        strides[i] = strides[i + 1] * len(pst[i + 1])
    seen: set[int] = set()
    for cfg, vals in rows:
        if len(cfg) != len(pst):
            raise BayesNetError(f"{where}: a row of {child!r} names {len(cfg)} parent states "
                                f"for {len(pst)} parents")
        r = 0
        for j, s in enumerate(cfg):
            if s not in pst[j]:
                raise BayesNetError(f"{where}: a row of {child!r} names state {s!r}, which "
                                    f"its parent {j + 1} does not have ({', '.join(pst[j])})")
            r += pst[j].index(s) * int(strides[j])
        if len(vals) != k:
            raise BayesNetError(f"{where}: row ({', '.join(cfg)}) of {child!r} has "
                                f"{len(vals)} values for {k} states")
        if r in seen:
            raise BayesNetError(f"{where}: row ({', '.join(cfg)}) of {child!r} is given "
                                "twice: keep one")
        seen.add(r)
        out[r] = vals
    if np.isnan(out).any():
        r = int(np.flatnonzero(np.isnan(out).any(axis=1))[0])
        raise BayesNetError(f"{where}: the table of {child!r} has no row for parent "
                            f"configuration {r}: list every configuration or give a default")
    return out


def read_bif(path: str | os.PathLike, max_decompressed: int | None = None) -> Network:
    """Read a BIF file (plain or gzip, told by content) into a :class:`Network`.

    Examples
    --------
    >>> from bidlab.datasets.paths import find_shared_data_dir
    >>> folder = find_shared_data_dir()
    >>> if folder is not None:
    ...     net = read_bif(folder / "bnlearn" / "asia.bif.gz")
    ...     assert net.n_vars == 8
    """
    if isinstance(path, str) and all(r.search(path) for r in _TEXT) and \
            not os.path.exists(path):
        raise BayesNetError("read_bif takes the path of a BIF file, and this is BIF text: "
                            "read the text with bidlab.models.bayesnet.bif.parse_bif(text) "
                            "and give the Network it returns (BayesNet(network=net))")
    raw = read_data(path, max_decompressed, what="BIF file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return parse_bif(text, where=str(path))


def _num(x: float) -> str:
    return repr(float(x))


def format_bif(net: Network) -> str:
    """The BIF text of ``net`` (:func:`parse_bif` reads it back to the same network).

    Examples
    --------
    >>> net = parse_bif('variable A { type discrete [ 2 ] { y, n }; } '
    ...                 'probability ( A ) { table 0.3, 0.7; }')
    >>> parse_bif(format_bif(net)).cpts[0].tolist()
    [[0.3, 0.7]]
    """
    for name in [net.name, *net.names, *(x for st in net.states for x in st)]:
        if '"' in name:
            raise BayesNetError(f"the name {name!r} holds a double quote, which BIF cannot "
                                "write (names are quoted with it): rename it first")
    q = _quoted
    out = [f"network {q(net.name)} {{", "}"]
    for v, nm in enumerate(net.names):
        st = [q(x) for x in net.states[v]]
        out += [f"variable {q(nm)} {{", f"  type discrete [ {len(st)} ] {{ {', '.join(st)} }};",
                "}"]
    for v, nm in enumerate(net.names):
        ps = net.parents[v]
        head = q(nm) if not ps else f"{q(nm)} | {', '.join(q(net.names[p]) for p in ps)}"
        out.append(f"probability ( {head} ) {{")
        t = net.cpts[v]
        if not ps:
            out.append(f"  table {', '.join(_num(x) for x in t[0])};")
        else:
            for r in range(t.shape[0]):
                cfg = ", ".join(q(x) for x in net.config_states(v, r))
                out.append(f"  ({cfg}) {', '.join(_num(x) for x in t[r])};")
        out.append("}")
    return "\n".join(out) + "\n"


def write_bif(net: Network, path: str | os.PathLike) -> Path:
    """Write ``net`` as a BIF file (gzip when ``path`` ends in ``.gz``); returns the path.

    Examples
    --------
    >>> import tempfile, os
    >>> net = parse_bif('variable A { type discrete [ 2 ] { y, n }; } '
    ...                 'probability ( A ) { table 0.3, 0.7; }')
    >>> p = write_bif(net, os.path.join(tempfile.mkdtemp(), "a.bif"))
    >>> read_bif(p).cpts[0].tolist()
    [[0.3, 0.7]]
    """
    import gzip

    path = Path(path)
    check_writable(path)
    data = format_bif(net).encode("utf-8")
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path
