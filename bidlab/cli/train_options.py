"""What ``bidlab train`` accepts: its arguments, its help, and reading ``--name value``.

:func:`add_arguments` declares the command's own arguments; every model and learner
option comes as an extra ``--name value`` pair, read here against the option tables (an
estimator's ``PARAMS``, a plain model's, updater's and mixins' ``OPTIONS``, the learner's)
by each option's :class:`~bidlab.learn.Option` row, so a bad value reads the same as in
Python, and an unknown name gets the nearest known ones. The help texts (``bidlab train
--help`` and ``bidlab train MODEL --help``) are built from the same tables. Kept apart
from :mod:`bidlab.cli.train`, which loads the data and runs the learner, so that what can
be given is in one place.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import math
from typing import Any

__all__ = ["add_arguments", "describe_models", "help_text"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``bidlab train``'s own arguments (model and learner options come as extras)."""
    from bidlab.cli.word_bounds import add_word_bounds

    parser.add_argument("model", nargs="?", help="model name (bidlab train --help lists them)")
    parser.add_argument("--data", metavar="PATH", help="data file or folder; its format is "
                        "read from its content")
    add_word_bounds(parser, "text folders and archives only")
    parser.add_argument("--checkpoint", default=None, metavar="PATH",
                        help="checkpoint file: written at pass ends, resumed when present")
    parser.add_argument("--restart", action="store_true",
                        help="ignore an existing checkpoint and start from scratch")
    parser.add_argument("--save", default=None, metavar="PATH",
                        help="write the fitted estimator here when training ends")
    parser.add_argument("--holdout", type=_fraction, default=None, metavar="FRACTION",
                        help="an estimator is scored at the end on this fraction of the rows "
                        "(at most 10,000, the same rows on a resumed run), held out of "
                        "training (default: 0.1, but 0 for a ratings file, whose rows are "
                        "users the factors must cover; 0 trains on every row)")
    parser.add_argument("--progress", choices=["auto", "text", "lines", "none"], default="auto",
                        help="on stderr: a bar and pass lines (auto, text), pass lines only "
                        "(lines; also what a stream that is not a terminal gets), or none")
    parser.add_argument("--coherence", default=None,
                        choices=["u_mass", "c_uci", "c_npmi", "c_v"],
                        help="topic models: print this coherence of the topics after each "
                        "pass (on the training documents)")
    parser.add_argument("--ranks", type=_rank_count, default=None, metavar="N",
                        help="train on N MPI ranks (mpiexec; needs bidlab[mpi])")
    parser.add_argument("-h", "--help", action="store_true",
                        help="show the models, or with a model its options")


def _rank_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of MPI ranks >= 1 (1: no "
                                         f"MPI); got {text!r}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1); got {text!r}")
    return value


# ================================================================== the model registry
def _registry() -> tuple[dict[str, Any], str | None]:
    """The registered models, and why :mod:`bidlab.models` failed to import (or None)."""
    from bidlab.learn.model import MODELS

    problem = None
    try:
        import bidlab.models  # noqa: F401  (each model registers itself on import)
    except Exception as exc:  # reported with the list of what did register
        problem = f"{type(exc).__name__}: {exc}"
    return MODELS, problem


def _is_estimator(factory: Any) -> bool:
    return isinstance(factory, type) and callable(getattr(factory, "learner", None))


def _needs_targets(est: Any) -> bool:
    """scikit-learn's tag: does ``fit`` require y?"""
    try:
        return bool(est.__sklearn_tags__().target_tags.required)
    except AttributeError:
        return False


def _summary(factory: Any) -> str:
    """The first line of the factory's docstring."""
    doc = inspect.getdoc(factory) or ""
    return doc.strip().splitlines()[0] if doc.strip() else "(no description)"


def describe_models(models: dict[str, Any]) -> list[str]:
    """One line per registered model: name and the first line of its docstring."""
    width = max((len(n) for n in models), default=0)
    return [f"  {name:<{width}}  {_summary(models[name])}" for name in sorted(models)]


def _data_help() -> list[str]:
    from bidlab.datasets.sniff import FORMATS

    return ["--data PATH is recognised by its content, not its name:",
            *(f"  {name:<12}  {text}" for name, text in FORMATS.items())]


def _usage(name: str) -> list[str]:
    """The usage lines of ``bidlab train NAME`` (NAME: ``MODEL`` for the overview)."""
    pad = " " * len(f"usage: bidlab train {name} ")
    return [f"usage: bidlab train {name} --data PATH [--checkpoint PATH] [--restart] "
            "[--save PATH]", f"{pad}[--holdout FRACTION] [--progress auto|text|lines|none] "
            "[--NAME VALUE ...]"]


def _command_help() -> list[str]:
    """The command's own arguments (``--data``, ``--holdout``, ...) as argparse shows them:
    the same declarations as the parser's, so the help cannot leave one out."""
    parser = argparse.ArgumentParser(prog="bidlab train", add_help=False,
                                     usage=argparse.SUPPRESS)
    add_arguments(parser)
    options = parser.format_help().strip().split("\n\n")[-1].splitlines()[1:]
    return ["", "command options:", *options]


def _overview(models: dict[str, Any], problem: str | None) -> str:
    lines = [*_usage("MODEL"), "",
             "Trains a model with progress and checkpoints; `bidlab train MODEL --help` "
             "lists its options.", "", "models:", *describe_models(models)]
    if problem:
        lines += ["", f"(bidlab.models could not be imported, so its models are missing: "
                      f"{problem})"]
    return "\n".join([*lines, *_command_help(), "", *_data_help()])


# ==================================================================== option tables
def _owned(spec: Any, owner: str) -> Any:
    from bidlab.learn.options import Option

    return spec if spec.owner == owner else Option(**{**spec.__dict__, "owner": owner})


def _plain_model_table() -> dict[str, Any]:
    """``bidlab train``'s own options for a plain Model (estimators bring their own)."""
    from bidlab.learn.options import Option
    from bidlab.learn.updaters import UPDATERS

    owner = "bidlab train"
    return {o.name: o for o in (
        Option("batch_size", int, 1000, "rows per minibatch", low=1, owner=owner),
        Option("updater", str, None, "how the model moves (default: the model's choice, "
               "else adagrad)", choices=tuple(UPDATERS), none_ok=True, owner=owner),
        Option("shuffle", bool, False, "shuffle the rows (and shards) each pass", owner=owner),
        Option("device", str, "cpu", "where the model trains", choices=("cpu", "gpu"),
               owner=owner),
    )}


def _learner_table(exclude: set[str]) -> dict[str, Any]:
    from bidlab.learn.learner import Learner
    from bidlab.learn.options import Option

    table = {s.name: s for s in Learner.option_table() if s.name != "checkpoint"}
    if "batch_size" not in exclude:
        table["batch_size"] = Option("batch_size", int, None, "rows per minibatch (None: the "
                                     "model's choice)", low=1, none_ok=True, owner="Learner")
    return table


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(_show(v) for v in value)
    if isinstance(value, type):  # a dtype such as numpy.float32: as it is typed
        return value.__name__
    return repr(value) if isinstance(value, str) else str(value)


def _table_lines(title: str, specs: list[Any]) -> list[str]:
    """One option per two lines: ``--name  doc`` and its default and allowed values."""
    if not specs:
        return ["", title, "  (none declared)"]
    width = max(len(s.name) for s in specs) + 2
    lines = ["", title]
    for s in specs:
        lines.append(f"  --{s.name:<{width}}{s.doc}")
        lines.append(f"    {'':<{width}}default {_show(s.default)}; {s.allowed()}")
    return lines


def help_text(name: str, factory: Any, tables: list[tuple[str, dict[str, Any]]]) -> str:
    """``bidlab train NAME --help``: usage, description and every option table."""
    lines = [*_usage(name), "", f"{name}: {_summary(factory)}", "",
             "Options are --name value (dashes or underscores; --name=value; vectors as "
             "0.1,0.2;", "a bare --flag means True)."]
    for title, table in tables:
        lines += _table_lines(title, list(table.values()))
    return "\n".join([*lines, *_command_help(), "", *_data_help()])


# ================================================================= parsing the extras
def _unknown(name: str, known: list[str], model: str) -> str:
    near = difflib.get_close_matches(name, known, n=3)
    hint = f" Did you mean {', '.join(repr(n) for n in near)}?" if near else ""
    return (f"unknown option {name!r}.{hint} `bidlab train {model} --help` lists the "
            f"options (known: {', '.join(sorted(known))}).")


def _parse_extra(extra: list[str], tables: list[dict[str, Any]], model: str
                 ) -> list[dict[str, Any]]:
    """``--name value`` pairs -> one dict of parsed values per table (a name may be in
    several: it is parsed by the first and goes to each)."""
    from bidlab.learn.options import OptionError

    out: list[dict[str, Any]] = [{} for _ in tables]
    known = sorted({n for t in tables for n in t})
    i = 0
    while i < len(extra):
        tok = extra[i]
        if not tok.startswith("--") or tok == "--":
            raise OptionError(f"unexpected argument {tok!r}: options are --name value (the "
                              "model name comes first: bidlab train MODEL ...)")
        name, eq, inline = tok[2:].partition("=")
        name = name.replace("-", "_")
        owners = [k for k, t in enumerate(tables) if name in t]
        if not owners:
            raise OptionError(_unknown(name, known, model))
        spec = tables[owners[0]][name]
        if eq:
            text = inline
        elif spec.type is bool and (i + 1 >= len(extra) or extra[i + 1].startswith("--")):
            text = "true"
        else:
            if i + 1 >= len(extra):
                raise OptionError(f"option --{name} needs a value ({spec.allowed()})")
            i += 1
            text = extra[i]
        value = _parse_value(spec, text)
        for k in owners:
            out[k][name] = value
        i += 1
    return out


def _parse_value(spec: Any, text: str) -> Any:
    """Command-line text -> a checked value: :meth:`Option.parse` for the plain types; for
    an option with its own test, the first reading it accepts (None, int, float, a
    comma-separated list, the text)."""
    import ast

    from bidlab.learn.options import OptionError

    basic = spec.type in (bool, int, float, str, "path")
    try:
        return spec.parse(text)
    except OptionError:
        if basic and spec.test is None:
            raise
    candidates: list[Any] = [None] if text.lower() == "none" else []
    for conv in (int, float, ast.literal_eval):
        try:
            candidates.append(conv(text))
        except (ValueError, SyntaxError, TypeError):
            pass
    if "," in text:
        candidates.append([t.strip() for t in text.split(",")])
    candidates.append(text)
    for value in candidates:
        try:
            return spec.check(value)
        except OptionError:
            continue
    raise spec.error(text)


def _updater_name(extra: list[str]) -> str | None:
    for i, tok in enumerate(extra):
        name, eq, inline = tok.partition("=")
        if name in ("--updater",):
            return inline if eq else (extra[i + 1] if i + 1 < len(extra) else None)
    return None
