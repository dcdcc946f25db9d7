"""One spelling per flag across ``bidlab demo``, ``train`` and ``lab``; old ones still work.

The commands take scikit-learn's names, as the estimators do: ``--n_passes``,
``--random_state``, ``--n_components``. Spellings that earlier versions accepted are kept
as deprecated aliases: they work, and each use prints one warning line on stderr naming
the flag to use instead.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["DEPRECATED_FLAGS", "DeprecatedAlias", "add_deprecated_aliases", "rename_extra"]

#: old flag name -> the name to use (dashes or underscores are the same flag).
DEPRECATED_FLAGS: dict[str, str] = {
    "passes": "n_passes",
    "seed": "random_state",
}


def _warn(prog: str, old: str, new: str) -> None:
    print(f"{prog}: warning: --{old} is deprecated and will be removed; use --{new}",
          file=sys.stderr)


class DeprecatedAlias(argparse.Action):
    """An argparse action: store the value under the new flag's ``dest`` and warn once."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "",
                 **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        old = (option_string or self.option_strings[0]).lstrip("-")
        _warn(parser.prog, old, self.new)
        setattr(namespace, self.dest, values)


def add_deprecated_aliases(parser: argparse.ArgumentParser, **types: Any) -> None:
    """Accept each deprecated spelling of a flag ``parser`` declares under its new name.

    ``types`` maps the new names to their value types (``n_passes=int``); the alias is
    hidden from ``--help``.

    Examples
    --------
    >>> p = argparse.ArgumentParser(prog="demo")
    >>> _ = p.add_argument("--n_passes", type=int)
    >>> add_deprecated_aliases(p, n_passes=int)
    >>> p.parse_args(["--passes", "3"]).n_passes  # warns on stderr
    3
    """
    for old, new in DEPRECATED_FLAGS.items():
        if new in types:
            parser.add_argument(f"--{old}", dest=new, type=types[new], action=DeprecatedAlias,
                                new=new, help=argparse.SUPPRESS)


def rename_extra(extra: list[str], prog: str) -> list[str]:
    """``--name value`` pairs with each deprecated name replaced by its new one (and a
    warning line on stderr); for commands that read their options as extras.

    Examples
    --------
    >>> rename_extra(["--seed=3", "--lrate", "0.1"], "bidlab train")  # warns on stderr
    ['--random_state=3', '--lrate', '0.1']
    """
    out = []
    for tok in extra:
        if tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            new = DEPRECATED_FLAGS.get(name.replace("-", "_"))
            if new is not None:
                _warn(prog, name, new)
                tok = f"--{new}{eq}{value}"
        out.append(tok)
    return out
