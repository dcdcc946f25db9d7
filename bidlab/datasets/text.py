"""Raw-text corpora: a folder (or ``.tar[.gz]``) of one-document-per-file text.

Layout as in 20 Newsgroups: ``[split/]<label>/<doc>``. A document's label is the name of
the folder that holds it, and ``subset="train"`` keeps the documents whose top folder is
``train`` or ends in ``-train`` / ``_train`` / ``.train``. Archives are read member by
member with :mod:`tarfile`; nothing is extracted to disk. Counting is scikit-learn's
``CountVectorizer``; pass ``vocabulary=train.vocab`` to count a test split in the training
split's columns. Each document is decoded as UTF-8 where it is valid UTF-8, else as
Latin-1 (``encoding="auto"``, the default; ``encoding=`` names one codec for all).

Reading is bounded (:mod:`bidlab._bounded_io`): a FIFO, device or socket in a folder (or
given as the path) is refused by its type before anything is opened, and an archive's
members are read only while their decompressed end lies within the decompressed-size cap
(``max_decompressed=`` or ``$BIDLAB_MAX_DECOMPRESSED``; default 4 GiB or the memory
budget, whichever is smaller), so a small archive declaring a 3 GB member is refused by
its header; a gzip file in a folder is read decompressed, up to the same cap.
"""

from __future__ import annotations

import os
import stat
import tarfile
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path, PurePosixPath

import numpy as np

from bidlab._bounded_io import (
    InputTooLargeError,
    format_bytes,
    max_decompressed,
    read_data,
    require_regular,
    stat_path,
)
from bidlab.datasets.corpus import Corpus, canonical_csr
from bidlab.datasets.formats import looks_binary

DEFAULT_TOKEN_PATTERN = r"(?u)\b\w\w+\b"
_ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")


def is_archive(path: Path) -> bool:
    """True for a tar file (plain, gzip, bz2 or xz), by its name (``.tar``, ``.tar.gz``,
    ``.tgz``, ``.tar.bz2``, ``.tar.xz``) or, whatever the name, by its content."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
    except OSError:
        return False
    return path.name.lower().endswith(_ARCHIVE_SUFFIXES) or tarfile.is_tarfile(path)


def _in_subset(parts: tuple[str, ...], subset: str | None) -> bool:
    if subset is None:
        return True
    top = parts[0]
    return len(parts) > 1 and (
        top == subset or any(top.endswith(sep + subset) for sep in ("-", "_", "."))
    )


def _visible(parts: tuple[str, ...]) -> bool:
    return bool(parts) and not any(p.startswith(".") or p == "__MACOSX" for p in parts)


def _iter_folder(root: Path, subset: str | None,
                 cap: int | None = None) -> Iterator[tuple[tuple[str, ...], bytes]]:
    for path in sorted(p for p in root.rglob("*") if p.exists() and not p.is_dir()):
        parts = path.relative_to(root).parts
        if _visible(parts) and _in_subset(parts, subset):
            require_regular(path, "document")  # a FIFO would block open() forever
            yield parts, read_data(path, cap, "document")  # a .gz file decompressed


def _iter_tar(path: Path, subset: str | None,
              cap: int | None = None) -> Iterator[tuple[tuple[str, ...], bytes]]:
    members: list[tuple[tuple[str, ...], bytes]] = []
    limit = max_decompressed(cap)
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                end = member.offset_data + member.size
                if end > limit:  # from the header, before the member is read or skipped
                    raise InputTooLargeError(
                        f"{path}: member {member.name!r} ({format_bytes(member.size)}) ends "
                        f"{format_bytes(end)} into the archive's decompressed content, past "
                        f"the decompressed-size cap of {format_bytes(limit)}; if the data is "
                        "genuine, raise the cap with max_decompressed=BYTES or "
                        "$BIDLAB_MAX_DECOMPRESSED=SIZE")
                if not member.isfile():
                    continue
                parts = tuple(p for p in PurePosixPath(member.name).parts if p not in (".", "/"))
                if _visible(parts) and _in_subset(parts, subset):
                    f = tar.extractfile(member)
                    if f is not None:
                        members.append((parts, f.read()))
    except tarfile.TarError as e:
        raise ValueError(f"{path}: not a readable tar archive ({e})") from e
    except (FileNotFoundError, PermissionError):
        raise
    except (EOFError, zlib.error, OSError) as e:
        last = "/".join(members[-1][0]) if members else "none"
        raise ValueError(f"{path}: the archive is truncated or corrupt after {len(members)} "
                         f"documents (last read: {last}; {type(e).__name__}: {e}); "
                         "fetch or copy it again") from e
    members.sort(key=lambda item: item[0])
    yield from members


def _top_folders(path: Path) -> list[str]:
    if path.is_dir():
        return sorted(p.name for p in path.iterdir() if p.is_dir())
    try:
        with tarfile.open(path, "r:*") as tar:
            return sorted({PurePosixPath(m.name).parts[0] for m in tar
                           if len(PurePosixPath(m.name).parts) > 1})
    except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
        raise ValueError(f"{path}: the archive is truncated or corrupt ({type(e).__name__}: "
                         f"{e}); fetch or copy it again") from e


def read_text_documents(
    path: str | os.PathLike,
    *,
    subset: str | None = None,
    categories: Iterable[str] | None = None,
    encoding: str = "auto",
    max_decompressed: int | None = None,
) -> tuple[list[str], list[str], list[str | None]]:
    """Read every file of a folder or tar archive: ``(texts, doc_ids, label_strings)``.

    Documents come in sorted path order; a document's label is its parent folder (None
    for files at the top level). ``categories`` keeps only those labels. A gzip file in a
    folder (``doc.txt.gz``, told by its content) is read decompressed. A binary file (a
    NUL byte in its first 4 KiB: an ``.npz``, an image, another compressed file) is not a
    document: it is skipped with a warning naming it. ``encoding="auto"`` (the default)
    decodes each document as UTF-8 when it is valid UTF-8 (a byte-order mark dropped),
    else as Latin-1, which decodes any bytes; any other codec name decodes every document
    with that codec.
    ``max_decompressed`` caps how far into an archive's decompressed content members are
    read, and what a gzip file in a folder may expand to (see the module docstring).
    """
    path = Path(path)
    try:
        is_dir = stat.S_ISDIR(stat_path(path).st_mode)
    except FileNotFoundError:
        is_dir = exists = False
    else:
        exists = True
        if not is_dir:
            require_regular(path, "text archive")
    if is_archive(path):
        items: Iterable = _iter_tar(path, subset, max_decompressed)
    elif is_dir:
        items = _iter_folder(path, subset, max_decompressed)
    elif exists:
        raise ValueError(
            f"{path} is a single file, not a folder of text files or a .tar/.tar.gz of them: "
            "put the documents in a folder, one per file (sub-folders name the labels), "
            "and pass the folder"
        )
    else:
        raise FileNotFoundError(
            f"{path} not found: expected a folder of text files or a .tar/.tar.gz of them"
        )
    if isinstance(categories, str):  # one label, not its letters
        categories = [categories]
    wanted = None if categories is None else set(categories)
    texts, ids, labels, binary = [], [], [], []
    for parts, raw in items:
        label = parts[-2] if len(parts) > 1 else None
        if wanted is not None and label not in wanted:
            continue
        name = "/".join(parts)
        if looks_binary(raw):
            binary.append(name)
            continue
        try:
            texts.append(_decode(raw, encoding))
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{path}: {name} is not valid {encoding} ({e}); pass encoding='auto' "
                "(UTF-8 where valid, else Latin-1) or encoding='latin-1', which decodes any "
                "bytes"
            ) from None
        ids.append(name)
        labels.append(label)
    skipped = (f"{len(binary)} binary file{'s' if len(binary) > 1 else ''} "
               f"({', '.join(binary[:3])}{', ...' if len(binary) > 3 else ''})")
    if binary and texts:
        warnings.warn(f"{path}: skipped {skipped}: not text documents", stacklevel=2)
    if not texts:
        what = f"in {path}" + (f" (skipped {skipped})" if binary else "")
        if subset is not None:
            what += f" under a top folder named {subset!r} (or ending in -{subset})"
        if wanted is not None:
            what += f" with labels {sorted(wanted)}"
        tops = _top_folders(path)
        raise ValueError(
            f"no text files found {what}; top-level folders there: "
            f"{', '.join(tops) if tops else 'none'}"
        )
    return texts, ids, labels


def _decode(raw: bytes, encoding: str) -> str:
    """``raw`` as text: ``encoding="auto"`` reads UTF-8 (a byte-order mark dropped), else
    Latin-1 (which decodes any bytes)."""
    if encoding != "auto":
        return raw.decode(encoding)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _encode_labels(
    labels: list[str | None], label_names: Sequence[str] | None, source: Path
) -> tuple[np.ndarray | None, list[str] | None]:
    if any(label is None for label in labels):
        return None, None
    names = sorted(set(labels)) if label_names is None else list(label_names)
    index = {name: i for i, name in enumerate(names)}
    unknown = sorted(set(labels) - index.keys())
    if unknown:
        raise ValueError(
            f"{source}: documents labelled {unknown} are not in label_names "
            f"({len(names)} names: {names[:5]}...); pass the full list or categories="
        )
    return np.fromiter((index[label] for label in labels), np.int64, len(labels)), names


def load_text_folder(
    path: str | os.PathLike,
    *,
    subset: str | None = None,
    categories: Iterable[str] | None = None,
    min_df: int | float = 2,
    max_df: int | float = 0.95,
    max_features: int | None = None,
    stop_words: str | list[str] | None = "english",
    lowercase: bool = True,
    encoding: str = "auto",
    token_pattern: str = DEFAULT_TOKEN_PATTERN,
    vocabulary: Sequence[str] | None = None,
    label_names: Sequence[str] | None = None,
    preprocess: Callable[[str], str] | None = None,
    dtype: np.dtype | type = np.float32,
    name: str | None = None,
    max_decompressed: int | None = None,
) -> Corpus:
    """Load a folder or tar archive of text files as a word-count :class:`Corpus`.

    Parameters
    ----------
    path
        a folder, or a ``.tar``/``.tar.gz`` file, of one document per file.
    subset
        keep only documents under a top folder ``subset`` (or ``*-subset``).
    categories
        keep only documents whose parent folder is one of these (or this one name).
    min_df, max_df, max_features, stop_words, lowercase, token_pattern
        as in
        scikit-learn's ``CountVectorizer`` (ignored for pruning when ``vocabulary`` is
        given). The default ``token_pattern`` is scikit-learn's, ``(?u)\\b\\w\\w+\\b``:
        runs of two or more letters, digits or underscores, so numbers (``1993``) and
        runs such as ``___`` are words too unless ``min_df`` / ``max_df`` drop them;
        ``token_pattern=r"(?u)\\b(?=\\w*[^\\W\\d_])\\w\\w+\\b"`` keeps only the words that
        hold a letter.
    encoding
        text encoding of the files: ``"auto"`` (default) reads each document as UTF-8
        where it is valid UTF-8, else as Latin-1 (which decodes any bytes, so no file
        stops the load); a codec name (``"utf-8"``, ``"latin-1"``, ...) reads every
        document with it, and a document that is not valid in it is an error naming it.
    vocabulary
        fixed column words, e.g. ``train.vocab`` to count a test split the same.
    label_names
        fixed label order, e.g. ``train.label_names`` (default: sorted names).
    preprocess
        applied to each document's text before tokenising (e.g. strip headers).
    dtype
        dtype of the count matrix.
    name
        the corpus name (default: the file or folder name).
    max_decompressed
        cap on how far into an archive's decompressed content members
        are read (default 4 GiB or the memory budget, whichever is smaller;
        ``$BIDLAB_MAX_DECOMPRESSED``).

    Notes
    -----

    Labels are the parent folder names, encoded as indices into ``label_names``; ``doc_ids``
    are the paths relative to ``path``.
    """
    from sklearn.feature_extraction.text import CountVectorizer  # lazy: sklearn is slow to import

    source = Path(path)
    texts, ids, label_strings = read_text_documents(
        source, subset=subset, categories=categories, encoding=encoding,
        max_decompressed=max_decompressed,
    )
    if preprocess is not None:
        texts = [preprocess(t) for t in texts]
    vectorizer = CountVectorizer(
        min_df=min_df,
        max_df=max_df,
        max_features=max_features,
        stop_words=stop_words,
        lowercase=lowercase,
        token_pattern=token_pattern,
        vocabulary=None if vocabulary is None else list(vocabulary),
        dtype=np.int64,
    )
    try:
        X = vectorizer.fit_transform(texts)
    except ValueError as e:
        if vocabulary is not None:  # min_df / max_df play no part then
            raise ValueError(
                f"{source}: cannot count {len(texts)} documents in the given vocabulary "
                f"({e}); pass vocabulary= as a non-empty list of distinct words, e.g. "
                "train.vocab"
            ) from e
        raise ValueError(
            f"{source}: could not build a vocabulary from {len(texts)} documents ({e}); "
            f"for a small corpus lower min_df (here {min_df!r}; e.g. 1) and raise max_df "
            f"(here {max_df!r}; e.g. 1.0)"
        ) from e
    labels, names = _encode_labels(label_strings, label_names, source)
    if name is None:
        name = source.name + (f"[{subset}]" if subset else "")
    return Corpus(
        X=canonical_csr(X, dtype),
        vocab=vectorizer.get_feature_names_out().tolist(),
        labels=labels,
        label_names=names,
        doc_ids=np.array(ids),
        name=name,
    )
