"""The documented import direction holds: models -> learn -> kern, mat -> backend; widgets ->
bidlab, never the reverse; nothing in the package reaches into tests/; and no two bidlab
modules import each other, directly or round a longer cycle.

Every module under ``bidlab/`` and ``widgets/`` (installed as ``bidlab.widgets``) is parsed
with :mod:`ast`; every static import counts, module-level or inside a function (a lazy
import is still a dependency). Each import is resolved to the module it names (relative
imports included; ``from bidlab import backend`` is ``bidlab.backend``) and checked against
:data:`MAY_IMPORT`. A failure lists every violation as ``file:line: what``, or every import
cycle as ``a -> b -> a`` with the line of each import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

#: The layers below the applications, and the bidlab layers each may import. ``root`` is
#: ``import bidlab`` / ``from bidlab import Mat``: the package's front door re-exports the
#: matrix core, so it counts as part of ``mat`` for the layers above it. ``base`` is the
#: backend and the process-wide helpers it sits beside.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "base": frozenset({"base"}),
    "kern": frozenset({"base", "kern"}),
    "mat": frozenset({"base", "kern", "mat"}),
    "learn": frozenset({"base", "kern", "mat", "root", "learn", "io"}),
    "models": frozenset({"base", "kern", "mat", "root", "learn", "models", "io"}),
    # loaders and generators: numpy / scipy / scikit-learn only (bidlab/datasets/__init__.py)
    # and the bounded file reading they share with the learner layer
    "datasets": frozenset({"datasets", "io"}),
    # bounded, safe reading of data files (standard library and numpy only)
    "io": frozenset({"io"}),
}
BASE = {"bidlab.backend", "bidlab._threads", "bidlab._source_checkout", "bidlab._forksafe"}
IO = {"bidlab._bounded_io"}
#: Everything else (lab, bench, cli, demo, the package root and any new top-level module)
#: is an application: it may import any bidlab layer, and no layer above may import it.
APP = "app"
WIDGETS = "widgets"


def layer(module: str) -> str:
    """The layer of a dotted bidlab module name."""
    if module == "bidlab":
        return "root"
    if module in BASE:
        return "base"
    if module in IO:
        return "io"
    part = module.split(".")[1]
    if part == "widgets":
        return WIDGETS
    return part if part in MAY_IMPORT else APP


@dataclass(frozen=True)
class Source:
    path: Path  # the file
    module: str  # its dotted name once installed
    is_package: bool  # an __init__.py


def sources(root: Path) -> Iterator[Source]:
    """Every module of ``root/bidlab`` and ``root/widgets`` (as ``bidlab.widgets``)."""
    for base, prefix in ((root / "bidlab", ("bidlab",)), (root / "widgets", ("bidlab",
                                                                            "widgets"))):
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("").parts
            parts = prefix + rel
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            yield Source(path, ".".join(parts), is_package)


def _module_exists(root: Path, dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[:2] == ["bidlab", "widgets"]:
        base = root / "widgets" / Path(*parts[2:]) if len(parts) > 2 else root / "widgets"
    else:
        base = root / Path(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports(src: Source, root: Path) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every static import in ``src``."""
    tree = ast.parse(src.path.read_text(encoding="utf-8"), filename=str(src.path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = src.module.split(".") if src.is_package else src.module.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield node.lineno, full if _module_exists(root, full) else base


def _tests_modules(root: Path) -> set[str]:
    """Top-level names a module could import from tests/ (when tests/ is on sys.path)."""
    tests = root / "tests"
    return {"tests", *(p.stem for p in tests.glob("*.py"))} if tests.is_dir() else {"tests"}


def _sys_path_edits(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Calls and assignments that change ``sys.path`` (or add a site dir)."""

    def is_sys_path(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "path"
                and isinstance(node.value, ast.Name) and node.value.id == "sys")

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if is_sys_path(f.value):
                yield node.lineno, f"sys.path.{f.attr}(...)"
            elif f.attr == "addsitedir":
                yield node.lineno, "site.addsitedir(...)"
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                t = t.value if isinstance(t, ast.Subscript) else t
                if is_sys_path(t):
                    yield node.lineno, "assigns to sys.path"


def violations(root: Path) -> list[str]:
    """Every import against the documented direction, as ``file:line: message``."""
    found = []
    tests_names = _tests_modules(root)
    for src in sources(root):
        where = src.path.relative_to(root)
        mine = layer(src.module)
        for line, target in imports(src, root):
            top = target.split(".")[0]
            if top in tests_names:
                found.append(f"{where}:{line}: {src.module} imports {target} from tests/ "
                             "(the package must not depend on the test suite)")
                continue
            if top == "widgets":
                found.append(f"{where}:{line}: {src.module} imports {target}; the package "
                             "is bidlab.widgets")
                continue
            if top != "bidlab":
                continue
            theirs = layer(target)
            if theirs == WIDGETS and mine != WIDGETS:
                found.append(f"{where}:{line}: {src.module} ({mine}) imports {target}: "
                             "widgets -> bidlab, never bidlab -> widgets")
            elif mine in MAY_IMPORT and theirs not in MAY_IMPORT[mine]:
                allowed = ", ".join(sorted(MAY_IMPORT[mine]))
                found.append(f"{where}:{line}: {src.module} ({mine}) imports {target} "
                             f"({theirs}); {mine} may import only {allowed}")
        tree = ast.parse(src.path.read_text(encoding="utf-8"))
        for line, what in _sys_path_edits(tree):
            found.append(f"{where}:{line}: {src.module} {what}: the package must not change "
                         "the import path (to reach tests/ or anything else)")
    return found


def test_the_package_follows_the_import_direction():
    found = violations(REPO)
    assert not found, (f"{len(found)} import(s) against the direction models -> learn -> "
                       "kern, mat -> backend; widgets -> bidlab:\n" + "\n".join(found))


def test_every_layer_is_present():
    """The layer map matches the tree (a renamed package would silently escape checks)."""
    seen = {layer(s.module) for s in sources(REPO)}
    assert set(MAY_IMPORT) | {"base", "root", WIDGETS, APP} <= seen


def import_graph(root: Path) -> dict[str, dict[str, str]]:
    """module -> {imported bidlab module: "file:line" of the first such import}.

    Lazy imports count (a function that imports a module still needs it). An import of a
    package's submodule is an edge to the submodule only: the parent package's
    ``__init__`` runs first in any case, and does not make a cycle.
    """
    graph: dict[str, dict[str, str]] = {}
    modules = list(sources(root))
    names = {s.module for s in modules}
    for src in modules:
        edges = graph.setdefault(src.module, {})
        where = src.path.relative_to(root)
        for line, target in imports(src, root):
            if target in names and target != src.module and target not in edges:
                edges[target] = f"{where}:{line}"
    return graph


def import_cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` through each group of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:  # a shortest way back to the group's first module
        start = min(group)
        paths = {start: [start]}
        queue = [start]
        while queue:
            v = queue.pop(0)
            for w in sorted(graph[v]):
                if w == start:
                    cycles.append(paths[v] + [start])
                    queue = []
                    break
                if w in group and w not in paths:
                    paths[w] = paths[v] + [w]
                    queue.append(w)
    return sorted(cycles)


def describe_cycle(graph: dict[str, dict[str, str]], cycle: list[str]) -> str:
    """``a -> b -> a`` and, per step, where the import is."""
    steps = [f"  {a} -> {b} ({graph[a][b]})" for a, b in zip(cycle[:-1], cycle[1:], strict=True)]
    return " -> ".join(cycle) + "\n" + "\n".join(steps)


def test_no_import_cycles():
    """bidlab's modules import each other in one direction only, counting lazy imports."""
    graph = import_graph(REPO)
    cycles = import_cycles(graph)
    assert not cycles, (f"{len(cycles)} import cycle(s) among bidlab modules:\n"
                        + "\n".join(describe_cycle(graph, c) for c in cycles))


def test_the_matrix_core_is_layered():
    """Inside bidlab.mat the containers know nothing of the operations on them."""
    graph = import_graph(REPO)
    for module in ("bidlab.mat.cache", "bidlab.mat.dense", "bidlab.mat.sparse"):
        assert "bidlab.mat.ops" not in graph[module], (module, graph[module])
        assert "bidlab.mat.methods" not in graph[module], (module, graph[module])


def test_the_cycle_finder_names_each_cycle(tmp_path: Path):
    _write(tmp_path, "bidlab/__init__.py", "")
    _write(tmp_path, "bidlab/mat/__init__.py", "from bidlab.mat.dense import Mat\n")
    _write(tmp_path, "bidlab/mat/dense.py", "def f():\n    from bidlab.mat import ops\n")
    _write(tmp_path, "bidlab/mat/ops.py", "from bidlab.mat.sparse import SMat\n")
    _write(tmp_path, "bidlab/mat/sparse.py", "from . import dense\n")
    _write(tmp_path, "bidlab/learn/__init__.py", "")
    _write(tmp_path, "bidlab/learn/a.py", "import bidlab.learn.b\n")
    _write(tmp_path, "bidlab/learn/b.py", "from bidlab.learn import a\n")
    _write(tmp_path, "bidlab/learn/c.py", "from bidlab.learn import a, b\n")  # no cycle
    graph = import_graph(tmp_path)
    cycles = import_cycles(graph)
    assert cycles == [["bidlab.learn.a", "bidlab.learn.b", "bidlab.learn.a"],
                      ["bidlab.mat.dense", "bidlab.mat.ops", "bidlab.mat.sparse",
                       "bidlab.mat.dense"]]
    text = describe_cycle(graph, cycles[1])
    assert "bidlab.mat.dense -> bidlab.mat.ops (bidlab/mat/dense.py:2)" in text


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def tiny_tree(tmp_path: Path) -> Path:
    """A small package with one violation of each kind and some allowed imports."""
    for pkg in ("bidlab", "bidlab/kern", "bidlab/mat", "bidlab/learn", "bidlab/models",
                "bidlab/bench", "bidlab/datasets", "widgets"):
        _write(tmp_path, f"{pkg}/__init__.py", "")
    _write(tmp_path, "bidlab/backend.py", "import numpy\n")
    _write(tmp_path, "bidlab/kern/cpu.py", "from bidlab import backend\n"
           "def f():\n    from bidlab.learn import thing\n")
    _write(tmp_path, "bidlab/mat/ops.py", "from bidlab import kern\nfrom ..models import x\n")
    _write(tmp_path, "bidlab/learn/a.py", "import bidlab as bl\nfrom . import b\n"
           "from bidlab.mat import Mat\n")
    _write(tmp_path, "bidlab/learn/b.py", "import bidlab.models.glm\n")
    _write(tmp_path, "bidlab/models/glm.py", "from bidlab.learn import a\nimport bidlab.widgets\n")
    _write(tmp_path, "bidlab/datasets/x.py", "from bidlab.mat import Mat\n")
    _write(tmp_path, "bidlab/bench/dash.py", "import sys\nsys.path.insert(0, 'tests')\n"
           "import browser_harness\nfrom bidlab.models import glm\n")
    _write(tmp_path, "widgets/view.py", "from bidlab.learn import a\nfrom . import other\n"
           "import tests.helpers\n")
    _write(tmp_path, "widgets/other.py", "")
    _write(tmp_path, "tests/browser_harness.py", "")
    return tmp_path


def test_the_checker_finds_each_kind_of_violation(tiny_tree: Path):
    found = violations(tiny_tree)
    expected = [
        "bidlab/kern/cpu.py:3: bidlab.kern.cpu (kern) imports bidlab.learn (learn)",
        "bidlab/mat/ops.py:2: bidlab.mat.ops (mat) imports bidlab.models (models)",
        "bidlab/learn/b.py:1: bidlab.learn.b (learn) imports bidlab.models.glm (models)",
        "bidlab/models/glm.py:2: bidlab.models.glm (models) imports bidlab.widgets",
        "bidlab/datasets/x.py:1: bidlab.datasets.x (datasets) imports bidlab.mat (mat)",
        "bidlab/bench/dash.py:2: bidlab.bench.dash sys.path.insert(...)",
        "bidlab/bench/dash.py:3: bidlab.bench.dash imports browser_harness from tests/",
        "widgets/view.py:3: bidlab.widgets.view imports tests.helpers from tests/",
    ]
    for line in expected:
        assert any(f.startswith(line) for f in found), (line, found)
    assert len(found) == len(expected), found  # the allowed imports are not reported
