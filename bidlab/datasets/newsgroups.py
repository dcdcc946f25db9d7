"""20 Newsgroups (bydate split) from the shared rebuilt tarball, and tf-idf features for GLMs.

``remove=("headers", "footers", "quotes")`` strips the parts that make the task easy (the
newsgroup name in headers, signatures, quoted replies), with the same rules as
scikit-learn's ``fetch_20newsgroups``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp

from bidlab.datasets.corpus import Corpus, canonical_csr
from bidlab.datasets.paths import resolve_shared
from bidlab.datasets.text import load_text_folder

ARCHIVE = "20news-bydate-rebuilt.tar.gz"
_QUOTE_LINE = re.compile(r"(writes in|writes:|wrote:|says:|said:|^In article|^Quoted from|^\||^>)")
_REMOVABLE = ("headers", "footers", "quotes")


def strip_headers(text: str) -> str:
    """Drop the RFC-822 header block: everything up to the first blank line."""
    return text.partition("\n\n")[2]


def strip_quotes(text: str) -> str:
    """Drop quoted lines (``>``, ``|``) and the "X writes:" lines that introduce them."""
    return "\n".join(line for line in text.split("\n") if not _QUOTE_LINE.search(line))


def strip_footer(text: str) -> str:
    """Drop a trailing signature: everything after the last line made only of dashes."""
    lines = text.strip().split("\n")
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip().strip("-") == "":
            break
    return "\n".join(lines[:i]) if i > 0 else text


def _remover(remove: Iterable[str]):
    remove = (remove,) if isinstance(remove, str) else tuple(remove)
    unknown = set(remove) - set(_REMOVABLE)
    if unknown:
        raise ValueError(
            f"remove= accepts {_REMOVABLE}, got {sorted(unknown)} "
            "(e.g. remove=('headers', 'footers', 'quotes'))"
        )
    if not remove:
        return None

    def preprocess(text: str) -> str:
        if "headers" in remove:
            text = strip_headers(text)
        if "footers" in remove:
            text = strip_footer(text)
        if "quotes" in remove:
            text = strip_quotes(text)
        return text

    return preprocess


def load_20newsgroups(
    shared: str | os.PathLike | None = None,
    subset: str = "train",
    *,
    remove: Iterable[str] = (),
    categories: Iterable[str] | None = None,
    **vectorizer_options,
) -> Corpus:
    """20 Newsgroups (bydate) as a labelled word-count :class:`Corpus`.

    Parameters
    ----------
    shared
        the shared data folder (default: :func:`shared_data_dir`).
    subset
        ``"train"`` (11,314 docs), ``"test"`` (7,532) or ``"all"``.
    remove
        any of ``"headers"``, ``"footers"``, ``"quotes"``.
    categories
        keep only these newsgroups (labels index their sorted order).
    **vectorizer_options
        passed to :func:`load_text_folder` (``min_df``,
        ``vocabulary=train.vocab`` for the test split, ...); ``encoding`` defaults to
        ``"latin-1"`` here, the posts' encoding, as in scikit-learn's
        ``fetch_20newsgroups``.
    """
    if subset not in ("train", "test", "all"):
        raise ValueError(f"subset must be 'train', 'test' or 'all', got {subset!r}")
    preprocess = _remover(remove)
    archive = resolve_shared(shared, "20newsgroups-bydate") / ARCHIVE
    if not archive.is_file():
        raise FileNotFoundError(f"{archive} not found: expected the rebuilt bydate tarball")
    if categories is not None:
        categories = sorted([categories] if isinstance(categories, str) else categories)
        vectorizer_options.setdefault("label_names", categories)
    vectorizer_options.setdefault("encoding", "latin-1")  # the 1993 posts' encoding
    return load_text_folder(
        archive,
        subset=None if subset == "all" else subset,
        categories=categories,
        preprocess=preprocess,
        name=f"20newsgroups[{subset}]",
        **vectorizer_options,
    )


def newsgroups_tfidf(
    train: Corpus | sp.spmatrix,
    test: Corpus | sp.spmatrix | None = None,
    *,
    sublinear_tf: bool = True,
    norm: str | None = "l2",
    smooth_idf: bool = True,
    dtype: np.dtype | type = np.float32,
) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
    """Tf-idf features ``(Xtr, Xte)`` with idf fitted on the training counts only.

    ``sublinear_tf`` uses 1 + log(tf); rows are L2-normalised by default, the usual input
    for logistic/softmax GLMs on text. ``test`` must have the training vocabulary
    (``load_20newsgroups(subset="test", vocabulary=train.vocab)``).
    """
    from sklearn.feature_extraction.text import TfidfTransformer  # lazy: slow to import

    Xtr = train.X if isinstance(train, Corpus) else train
    Xte = test.X if isinstance(test, Corpus) else test
    if Xte is not None and Xte.shape[1] != Xtr.shape[1]:
        raise ValueError(
            f"test has {Xte.shape[1]} columns but train has {Xtr.shape[1]}: count the test "
            "split with the training vocabulary (vocabulary=train.vocab)"
        )
    tfidf = TfidfTransformer(sublinear_tf=sublinear_tf, norm=norm, smooth_idf=smooth_idf)
    out_tr = canonical_csr(tfidf.fit_transform(Xtr), dtype)
    out_te = None if Xte is None else canonical_csr(tfidf.transform(Xte), dtype)
    return out_tr, out_te
