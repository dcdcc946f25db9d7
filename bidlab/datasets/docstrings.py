"""A real corpus built on the spot, offline: the docstrings of Python's standard library.

:func:`load_stdlib_docstrings` reads the source files of the running interpreter's
standard library with :mod:`ast` (nothing is imported or executed, nothing downloaded),
collects the docstrings of each module, class and function, and counts their words with
scikit-learn's ``CountVectorizer`` (letters only, English stop words and the words every
docstring uses removed). One document per module or top-level class: its own docstring and
those of the functions and methods inside it. The topics it yields are ones a Python user
recognises (sockets and connections, dates and times, email messages and headers, files
and paths, threads and locks, ...), which makes it the default corpus of ``bidlab demo``
where the shared UCI KOS data set is absent.
"""

from __future__ import annotations

import ast
import os
import sysconfig
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bidlab.datasets.corpus import Corpus, canonical_csr

__all__ = ["DOCSTRING_STOP_WORDS", "load_stdlib_docstrings", "stdlib_docstrings"]

#: Words almost every docstring uses, removed on top of scikit-learn's English stop words.
DOCSTRING_STOP_WORDS = frozenset("""
    return returns returned none true false default object objects argument arguments arg
    args kwargs value values function functions method methods class classes self given use
    used using set instance optional raise raises raised call calls called new type string
    str int bool list dict tuple specified specify note example examples deprecated version
    added changed python module modules attribute attributes parameter parameters keyword
    just like way need needs make makes does doesn don won isn ignored passed pass case
    cases implementation implemented subclass subclasses override overridden method
""".split())

_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__",
              "lib2to3", "idlelib", "turtledemo", "ensurepip", "config-3"}


def _source_files(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith(
            ("config-", ".")))
        for name in sorted(files):
            if name.endswith(".py") and not name.startswith("test_"):
                yield Path(folder) / name


def _doc(node: ast.AST) -> str:
    try:
        return ast.get_docstring(node, clean=False) or ""  # type: ignore[arg-type]
    except TypeError:
        return ""


def _inner_docs(node: ast.AST) -> list[str]:
    return [_doc(n) for n in ast.walk(node)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def _file_documents(path: Path, root: Path) -> Iterator[tuple[str, str]]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in old docstrings
            tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, OSError):
        return
    parts = path.relative_to(root).with_suffix("").parts
    module = ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)
    module_text = [_doc(tree)]
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            yield f"{module}.{node.name}", "\n".join(_inner_docs(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            module_text.append(_doc(node))
    yield module, "\n".join(module_text)


def stdlib_docstrings(root: str | os.PathLike | None = None,
                      min_chars: int = 200) -> tuple[list[str], list[str]]:
    """The standard library's docstrings as documents: ``(names, texts)``.

    Parameters
    ----------
    root : path, optional
        The standard library folder (default: ``sysconfig.get_paths()["stdlib"]``).
    min_chars : int
        Documents with fewer characters of docstring are left out.

    Returns
    -------
    names, texts : list of str
        One entry per module (its docstring and its functions') or top-level class (its
        docstring and its methods'), e.g. ``"json.decoder.JSONDecoder"``.

    Examples
    --------
    >>> names, texts = stdlib_docstrings()
    >>> len(names) > 500 and "json" in names
    True
    """
    base = Path(root if root is not None else sysconfig.get_paths()["stdlib"])
    if not base.is_dir():
        raise FileNotFoundError(f"{base} is not a folder: pass the standard library's folder "
                                "as root=")
    names, texts = [], []
    for path in _source_files(base):
        for name, text in _file_documents(path, base):
            if len(text) >= min_chars:
                names.append(name)
                texts.append(text)
    if not names:
        raise FileNotFoundError(f"no Python source with docstrings under {base} (an "
                                "interpreter installed without its .py files?)")
    return names, texts


def load_stdlib_docstrings(root: str | os.PathLike | None = None, *, min_df: int = 5,
                           max_df: float = 0.25, min_tokens: int = 20,
                           dtype: np.dtype | type = np.float32) -> Corpus:
    """The standard library's docstrings as a bag-of-words :class:`Corpus`.

    Parameters
    ----------
    root : path, optional
        The standard library folder (default: the running interpreter's).
    min_df, max_df : int, float
        ``CountVectorizer``'s bounds: a word kept must be in at least ``min_df`` documents
        and in at most a ``max_df`` fraction of them.
    min_tokens : int
        Documents with fewer counted words than this are left out.
    dtype : numpy dtype
        The counts' type.

    Returns
    -------
    Corpus
        Documents x vocabulary counts, ``doc_ids`` the module or class names, ``name``
        ``"python-stdlib-docstrings"``. Words are lower-case letters only (3 or more),
        without scikit-learn's English stop words and :data:`DOCSTRING_STOP_WORDS`.

    Examples
    --------
    >>> c = load_stdlib_docstrings()
    >>> c.X.shape[0] > 300 and "socket" in c.vocab
    True
    """
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer

    names, texts = stdlib_docstrings(root)
    vec = CountVectorizer(lowercase=True, token_pattern=r"(?u)\b[a-zA-Z]{3,}\b",
                          stop_words=sorted(ENGLISH_STOP_WORDS | DOCSTRING_STOP_WORDS),
                          min_df=min_df, max_df=max_df, dtype=np.dtype(dtype))
    X = canonical_csr(vec.fit_transform(texts), dtype)
    keep = np.flatnonzero(np.asarray(X.sum(axis=1)).ravel() >= min_tokens)
    return Corpus(X[keep], list(vec.get_feature_names_out()),
                  doc_ids=np.asarray(names, dtype=object)[keep],
                  name="python-stdlib-docstrings")
