"""``--min_df`` / ``--max_df``: the document-frequency bounds on the words kept from text,
declared once for every command that reads text (``bidlab demo``, ``bidlab train``)."""

from __future__ import annotations

import argparse

__all__ = ["add_word_bounds", "document_frequency"]


def document_frequency(text: str) -> int | float:
    """A document-frequency bound as ``CountVectorizer`` takes it: a count (``2``) or a
    fraction of the documents (``0.95``, ``1.0``).

    Examples
    --------
    >>> document_frequency("2"), document_frequency("0.95")
    (2, 0.95)
    """
    try:
        value = float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        value = -1
    if value < 0 or (isinstance(value, float) and value > 1.0):
        raise argparse.ArgumentTypeError(
            f"must be a count (e.g. 1) or a fraction in [0, 1] (e.g. 1.0); got {text!r}")
    return value


def add_word_bounds(parser: argparse.ArgumentParser, applies_to: str) -> None:
    """Declare ``--min_df`` and ``--max_df`` (default None: the text loader's 2 and 0.95);
    ``applies_to`` names the inputs they bound in the help (e.g. "text files only").

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_word_bounds(p, "text files only")
    >>> p.parse_args(["--min_df", "1"]).min_df
    1
    """
    parser.add_argument("--min_df", type=document_frequency, default=None,
                        metavar="N|FRACTION", help=f"{applies_to}: keep a word in at least "
                        "this many documents (or this fraction of them; default 2)")
    parser.add_argument("--max_df", type=document_frequency, default=None,
                        metavar="N|FRACTION", help=f"{applies_to}: drop a word in more than "
                        "this fraction of the documents (or this many; default 0.95)")
