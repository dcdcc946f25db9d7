"""ARCHITECTURE.md names only what exists: every file and folder of its tree, every
backticked path (globs must match something) and every dotted ``bidlab.x.y`` name.

Only what the document names is checked, so adding files never breaks this test; renaming
or deleting one the document names does, until the document follows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "ARCHITECTURE.md"

_EXT = r"(?:py|cu|cuh|ts|ipynb|md|json|toml|css)"
_FILE = re.compile(rf"(?<![\w./$-])((?:[\w*-]+/)*[\w*-]+\.{_EXT})\b")
_BACKTICK = re.compile(r"`([^`\n]+)`")
_PATHLIKE = re.compile(rf"^(?:[\w.*-]+/)+[\w.*-]*$|^[\w*-]+(?:/[\w*-]+)*\.{_EXT}$")
_DOTTED = re.compile(r"(?<![\w.])bidlab(?:\.[A-Za-z_]\w*)+")


def _exists(rel: str, bases: tuple[Path, ...]) -> bool:
    """``rel`` (a path, maybe a glob) exists under one of ``bases``."""
    for base in bases:
        if any(c in rel for c in "*?["):
            if any(base.glob(rel.rstrip("/"))):
                return True
        elif (base / rel).exists():
            return True
    return False


def tree_paths(text: str) -> Iterator[tuple[int, str]]:
    """(line, repo path) for each entry of the first code block (the tree) and each file
    its description names, resolved against the entry's folder."""
    block = text.split("```", 2)[1]
    first_line = text[: text.index("```")].count("\n") + 1
    stack: list[tuple[int, str]] = []  # (indent, folder path)
    folder = ""
    for offset, line in enumerate(block.splitlines()):
        lineno = first_line + offset
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        head, _, description = line.strip().partition(" ")
        entry = re.fullmatch(r"[\w.-]+/?", head) and indent < 18  # not a continuation line
        if entry:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            parent = stack[-1][1] if stack else ""
            path = parent + head
            yield lineno, path
            if head.endswith("/"):
                stack.append((indent, path))
                folder = path
            else:
                folder = parent
        else:
            description = line
        for match in _FILE.finditer(description):
            name = match.group(1)
            yield lineno, name if "/" in name and _exists(name, (REPO,)) else folder + name


def backticked_paths(text: str) -> Iterator[tuple[int, str]]:
    """(line, path) for each backticked word that looks like a repo path."""
    for lineno, line in enumerate(text.splitlines(), 1):
        for match in _BACKTICK.finditer(line):
            word = match.group(1).strip()
            if _PATHLIKE.match(word) and not word.startswith("."):
                yield lineno, word


def dotted_names(text: str) -> Iterator[tuple[int, str]]:
    """(line, name) for each ``bidlab.x.y`` the document mentions."""
    for lineno, line in enumerate(text.splitlines(), 1):
        for match in _DOTTED.finditer(line):
            yield lineno, match.group(0)


def _module_file(dotted: str) -> Path | None:
    """The source file of a bidlab module (``bidlab.widgets`` is ``widgets/``), or None."""
    parts = dotted.split(".")
    if parts[:2] == ["bidlab", "widgets"]:
        base = REPO / "widgets" / Path(*parts[2:]) if len(parts) > 2 else REPO / "widgets"
    else:
        base = REPO / Path(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def name_exists(dotted: str) -> bool:
    """A module, or a name a module defines or imports (looked up in its source)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        source = _module_file(".".join(parts[:cut]))
        if source is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        text = source.read_text(encoding="utf-8")
        return re.search(rf"\b{re.escape(rest[0])}\b", text) is not None and len(rest) == 1
    return False


def _missing(text: str) -> list[str]:
    out = []
    for lineno, path in tree_paths(text):
        if not _exists(path, (REPO,)):
            out.append(f"ARCHITECTURE.md:{lineno}: the tree names {path}, which does not exist")
    for lineno, path in backticked_paths(text):
        if not _exists(path, (REPO, REPO / "bidlab")):
            out.append(f"ARCHITECTURE.md:{lineno}: `{path}` does not exist")
    for lineno, name in dotted_names(text):
        if not name_exists(name):
            out.append(f"ARCHITECTURE.md:{lineno}: {name} names no module or attribute")
    return out


def test_every_path_and_name_the_document_gives_exists():
    missing = _missing(DOC.read_text(encoding="utf-8"))
    assert not missing, "ARCHITECTURE.md is out of date:\n" + "\n".join(missing)


def test_the_document_names_the_main_parts():
    """The checks above see the tree (a parser that found nothing would pass vacuously)."""
    text = DOC.read_text(encoding="utf-8")
    tree = {p for _, p in tree_paths(text)}
    assert {"bidlab/", "bidlab/mat/", "bidlab/mat/ops.py", "bidlab/learn/learner.py",
            "kernels/", "widgets/", "tests/"} <= tree, sorted(tree)
    assert "kern/cpu.py" in {p for _, p in backticked_paths(text)}
    assert "bidlab.learn.register_model" in {n for _, n in dotted_names(text)}


@pytest.mark.parametrize("text, expected", [
    ("```\nbidlab/\n  mat/   nothing.py, dense.py\n```\n",
     ["the tree names bidlab/mat/nothing.py"]),
    ("```\nkernels/   CUDA (*.cu, include/*.cuh)\n```\n", ["the tree names kernels/include/*.cuh"]),
    ("```\nbidlab/\n```\nsee `kern/gone.py` and `kernels/*.cu`\n", ["`kern/gone.py`"]),
    ("```\nbidlab/\n```\nuse bidlab.learn.updaters.Minibatch or bidlab.learn.Learner\n",
     ["bidlab.learn.updaters.Minibatch names no"]),
])
def test_the_checker_finds_stale_names(text: str, expected: list[str]):
    missing = _missing(text)
    assert len(missing) == len(expected), missing
    for want, got in zip(expected, missing, strict=True):
        assert want in got, (want, got)


def test_the_forty_line_example_model_runs_and_does_what_it_says():
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("### A new model in 40 lines"):]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    lines = [ln for ln in code.splitlines() if ln.strip()]
    assert len(lines) <= 45, f"the example has {len(lines)} lines"
    ns: dict = {}
    exec(compile(code, "ARCHITECTURE.md", "exec"), ns)  # noqa: S102 - the project's own doc
    X, model = ns["X"], ns["lrn"].model
    np.testing.assert_allclose(model.modelmats[0].data, X.mean(0, keepdims=True), rtol=1e-12)
    # the distances were taken in pass 2, to pass 1's mean (the same mean): every row, by id
    want = ((X - X.mean(0)) ** 2).sum(1, keepdims=True)
    np.testing.assert_allclose(model.dist.values.data, want, rtol=1e-12)
    names = {n for n in ("Model", "Learner", "Batch", "RowState") if n in code}
    assert len(names) <= 8
