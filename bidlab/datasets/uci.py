"""UCI "Bag of Words" loader: ``docword.NAME.txt[.gz]`` + ``vocab.NAME.txt``.

Format (https://archive.ics.uci.edu/ml/datasets/Bag+of+Words): three header lines ``D``
(documents), ``W`` (vocabulary size), ``NNZ`` (number of triples), then ``NNZ`` lines
``docID wordID count``, 1-based. ``vocab.NAME.txt`` holds one word per line, line i being
wordID i. The triples are parsed in one vectorised ``np.loadtxt`` call (KOS, 353k lines, in
well under a second) and checked against the header.

Reading is bounded (:mod:`bidlab._bounded_io`): a FIFO or device is refused before it is
opened, gzip content stops at a decompressed-size cap, and the header's D, W and NNZ are
checked against the memory budget before the body is read (a header with W = 10^12 is
refused rather than building 10^12 word names).
"""

from __future__ import annotations

import codecs
import io
import os
import re
from pathlib import Path

import numpy as np

from bidlab._bounded_io import check_budget, open_data, read_data, require_regular, stat_path
from bidlab.datasets.corpus import Corpus, counts_csr
from bidlab.datasets.paths import resolve_shared

_DOCWORD = re.compile(r"^docword\.(?P<name>.+)\.txt(\.gz)?$")
_HEADER = ("D (number of documents)", "W (vocabulary size)", "NNZ (number of triples)")
_NAME_BYTES = 64  # a generated word name "w123" as a Python str in a list
_COLUMN_BYTES = 8  # one float64 per word: the least a model over the vocabulary holds
_TRIPLE_BYTES = 3 * 8 + 4 + 8  # the int64 triple, then its CSR index and float64 value
_INT64_MAX = int(np.iinfo(np.int64).max)


def read_maybe_gzip(path: Path, max_decompressed: int | None = None) -> bytes:
    """The bytes of ``path`` (a regular file), gunzipped when it starts with the gzip magic
    number; the decompressed size is capped (``max_decompressed``, see
    :mod:`bidlab._bounded_io`)."""
    return read_data(path, max_decompressed)


def check_header_budget(source: Path | str, D: int, W: int, NNZ: int, *,
                        names: bool = False, memory_budget: int | None = None) -> None:
    """Refuse a docword header whose D, W and NNZ would need more than the memory budget
    (the triples and their CSR matrix, its row pointers, one float64 per word and, with
    ``names``, the generated word names ``w1 .. wW``)."""
    need = {"NNZ": NNZ * _TRIPLE_BYTES, "D": (D + 1) * 8,
            "W": W * (_COLUMN_BYTES + (_NAME_BYTES if names else 0))}
    big = max(need, key=need.get)
    check_budget(source, f"the header D={D}, W={W}, NNZ={NNZ} (mostly for {big})",
                 sum(need.values()), memory_budget,
                 "check the header's three lines against the data")


def _find_file(folder: Path, stem: str) -> Path | None:
    for candidate in (folder / stem, folder / f"{stem}.gz"):
        if candidate.is_file():
            return candidate
    return None


def _locate(path: Path, name: str | None) -> tuple[Path, str]:
    """The docword file and the collection name, from a folder or an explicit file."""
    if path.is_dir():
        if name is None:
            names = sorted({m["name"] for p in path.iterdir() if (m := _DOCWORD.match(p.name))})
            if len(names) != 1:
                found = "none" if not names else ", ".join(names)
                raise FileNotFoundError(
                    f"{path}: expected exactly one docword.NAME.txt[.gz] file, found {found}; "
                    "pass name='kos' (for docword.kos.txt) or the docword file itself"
                )
            name = names[0]
        docword = _find_file(path, f"docword.{name}.txt")
        if docword is None:
            raise FileNotFoundError(
                f"{path}: expected docword.{name}.txt or docword.{name}.txt.gz (UCI bag of "
                "words), found neither"
            )
        return docword, name
    try:
        stat_path(path)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path} not found: pass a UCI bag-of-words folder or its docword.NAME.txt[.gz] file"
        ) from None
    require_regular(path, "UCI docword file")
    m = _DOCWORD.match(path.name)
    return path, name if name is not None else (m["name"] if m else path.name.split(".")[0])


def _parse_header(lines: list[bytes], source: Path) -> tuple[int, int, int]:
    values = []
    for i, what in enumerate(_HEADER):
        text = lines[i].removeprefix(codecs.BOM_UTF8).strip() if i < len(lines) else b""
        try:
            value = int(text)
        except ValueError:
            raise ValueError(
                f"{source}: malformed header: line {i + 1} should be {what} as one integer, "
                f"found {text[:40].decode('latin-1')!r}"
            ) from None
        if value < 0:
            raise ValueError(f"{source}: malformed header: line {i + 1} ({what}) is {value} < 0")
        values.append(value)
    return values[0], values[1], values[2]


def _first_bad_line(body: bytes) -> tuple[int, str, str]:
    """1-based line number (within the body), text and problem (or "") of the first line
    not 3 integers in the int64 range."""
    for i, line in enumerate(body.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 3 or not all(re.fullmatch(rb"[+-]?\d+", f) for f in fields):
            return i, line[:60].decode("latin-1"), ""
        if any(abs(int(f)) > _INT64_MAX for f in fields):
            return i, line[:60].decode("latin-1"), f" (a number past {_INT64_MAX})"
    return 0, "", ""


def parse_docword(raw: bytes, source: Path | str = "<docword>", *,
                  memory_budget: int | None = None) -> tuple[int, int, np.ndarray]:
    """Parse UCI docword text into ``(D, W, triples)``; ``triples`` is NNZ x 3, 1-based.

    Checks the header against the data: the triple count must equal NNZ, IDs must lie in
    1..D and 1..W and counts must be >= 0, and against ``memory_budget`` (see
    :func:`check_header_budget`). Errors name the file and line.
    """
    source = Path(source)
    parts = raw.removeprefix(codecs.BOM_UTF8).split(b"\n", 3)
    D, W, NNZ = _parse_header(parts[:3], source)
    check_header_budget(source, D, W, NNZ, memory_budget=memory_budget)
    body = parts[3] if len(parts) == 4 else b""
    if not body.strip():
        triples = np.zeros((0, 3), dtype=np.int64)
    else:
        try:
            triples = np.loadtxt(io.BytesIO(body), dtype=np.int64, ndmin=2)
        except ValueError as e:
            line, text, why = _first_bad_line(body)
            where = f"line {line + 3}: {text!r}{why}" if line else str(e)
            raise ValueError(
                f"{source}: malformed data at {where}; expected 'docID wordID count' "
                "(three integers) on each line after the 3-line header"
            ) from None
    if len(triples) != NNZ:
        raise ValueError(
            f"{source}: header says NNZ={NNZ} triples but the file holds {len(triples)}; "
            "the file is truncated or the header is wrong"
        )
    for col, (label, hi) in enumerate((("document ID", D), ("word ID", W))):
        ids = triples[:, col]
        bad = np.flatnonzero((ids < 1) | (ids > hi))
        if bad.size:
            r = int(bad[0])
            raise ValueError(
                f"{source}: line {r + 4}: {label} {int(ids[r])} is out of range 1..{hi} "
                f"(header says {'D' if col == 0 else 'W'}={hi})"
            )
    negative = np.flatnonzero(triples[:, 2] < 0)
    if negative.size:
        r = int(negative[0])
        raise ValueError(
            f"{source}: line {r + 4}: negative count {int(triples[r, 2])} for document "
            f"{int(triples[r, 0])}, word {int(triples[r, 1])}; counts must be >= 0"
        )
    return D, W, triples


def read_vocab(path: Path, expected: int | None = None,
               max_decompressed: int | None = None) -> list[str]:
    """One word per line (UTF-8, a byte-order mark dropped, else Latin-1); checks the count
    when ``expected`` is given."""
    raw = read_maybe_gzip(path, max_decompressed)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    # only line ends split (str.splitlines also splits at \x85, \x0c, \u2028, ..., which
    # a Latin-1 or UTF-8 word may hold, and would shift every later word)
    words = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    while words and not words[-1].strip():
        words.pop()
    words = [w.strip() for w in words]
    if expected is not None and len(words) != expected:
        raise ValueError(
            f"{path}: vocabulary has {len(words)} words but the docword header says "
            f"W={expected}; the two files do not belong together"
        )
    return words


def load_uci_bow(
    path: str | os.PathLike,
    name: str | None = None,
    *,
    vocab: str | os.PathLike | bool | None = None,
    dtype: np.dtype | type = np.float32,
    max_decompressed: int | None = None,
    memory_budget: int | None = None,
) -> Corpus:
    """Load a UCI bag-of-words collection as a :class:`Corpus` (documents x vocabulary).

    Parameters
    ----------
    path
        a folder holding ``docword.NAME.txt[.gz]`` and ``vocab.NAME.txt[.gz]``, or the
        docword file itself (plain or gzip).
    name
        the collection name (``"kos"``) when the folder holds several.
    vocab
        the vocabulary file (a folder raises IsADirectoryError); default:
        ``vocab.NAME.txt[.gz]`` beside the docword file.
        ``False`` skips it and names the words ``w1 .. wW``.
    dtype
        dtype of the count matrix.
    max_decompressed
        cap on the bytes a gzip file may expand to (default 4 GiB or the
        memory budget, whichever is smaller; ``$BIDLAB_MAX_DECOMPRESSED``).
    memory_budget
        what the header's D, W and NNZ may ask for (default a quarter of
        the machine's memory; ``$BIDLAB_MEMORY_BUDGET``), checked before the body is read.

    Notes
    -----

    Document i of the file is row i-1 and ``doc_ids`` holds the 1-based UCI IDs.
    """
    docword, name = _locate(Path(path), name)
    with open_data(docword, max_decompressed) as f:
        try:
            head = [f.readline(64) for _ in range(3)]
            try:
                header = _parse_header(head, docword)
            except ValueError:
                header = None  # malformed: parse_docword below says where
            if header is not None:  # before the body is read
                check_header_budget(docword, *header, names=vocab is False,
                                    memory_budget=memory_budget)
            raw = b"".join(head) + f.read()
        except (OSError, EOFError) as e:
            raise ValueError(f"{docword}: corrupt gzip data ({e}); re-download the file") from e
    D, W, triples = parse_docword(raw, docword, memory_budget=memory_budget)
    if vocab is False:
        words = [f"w{j}" for j in range(1, W + 1)]
    else:
        if vocab is None or vocab is True:
            vocab_path = _find_file(docword.parent, f"vocab.{name}.txt")
            if vocab_path is None:
                raise FileNotFoundError(
                    f"{docword.parent}: expected vocab.{name}.txt (one word per line, {W} lines) "
                    f"beside {docword.name}; pass vocab=PATH, or vocab=False for w1..w{W}"
                )
        else:
            vocab_path = Path(vocab)
            if vocab_path.is_dir():
                inside = _find_file(vocab_path, f"vocab.{name}.txt")
                hint = f"; pass vocab={str(inside)!r}" if inside is not None else ""
                raise IsADirectoryError(
                    f"vocabulary file {vocab_path} is a folder, not a file (expected {W} "
                    f"words, one per line){hint}"
                )
            if not vocab_path.is_file():
                raise FileNotFoundError(
                    f"vocabulary file {vocab_path} not found (expected {W} words, one per line)"
                )
        words = read_vocab(vocab_path, expected=W, max_decompressed=max_decompressed)
    X = counts_csr(triples[:, 0] - 1, triples[:, 1] - 1, triples[:, 2], (D, W), dtype)
    X.eliminate_zeros()
    return Corpus(X=X, vocab=words, doc_ids=np.arange(1, D + 1), name=name)


def load_kos(
    shared: str | os.PathLike | None = None, dtype: np.dtype | type = np.float32
) -> Corpus:
    """The KOS blog corpus (D=3430, W=6906, 467,714 tokens) from the shared data folder.

    Examples
    --------
    >>> from bidlab.datasets import load_kos
    >>> corpus = load_kos()  # doctest: +SKIP
    >>> corpus.X.shape  # doctest: +SKIP
    (3430, 6906)
    """
    return load_uci_bow(resolve_shared(shared, "uci-kos"), "kos", dtype=dtype)
