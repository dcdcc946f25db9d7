"""The commands the JupyterLab panel sends on the ``bidlab.learners`` comm, checked.

A command is a JSON object ``{"action": "pause" | "resume" | "stop" | "refresh",
"learner": name | None, "request": id}`` (``labextension/src/protocol.ts``). Anything else
that reaches the comm -- ``None``, a list, a message without content, a field of the wrong
type or longer than :data:`MAX_FIELD` characters -- becomes a :class:`Command` carrying an
error that names the problem, so the bridge answers it instead of raising inside the comm
callback. Error texts never quote a rejected value at length: what comes back stays small
whatever was sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bidlab.lab.snapshot import ACTIONS

__all__ = ["MAX_FIELD", "COMMANDS", "Command", "parse_command", "message_data"]

#: The longest ``action``, ``learner`` or ``request`` string accepted (characters).
MAX_FIELD = 1024

#: Every ``action`` the panel may send: the learner commands and ``refresh``.
COMMANDS = (*ACTIONS, "refresh")

_SHAPE = ('{"action": one of ' + ", ".join(repr(c) for c in COMMANDS)
          + ', "learner": a name or null, "request": a string}')


@dataclass(frozen=True)
class Command:
    """One checked panel command.

    Attributes
    ----------
    action
        the command, one of :data:`COMMANDS`; None when it was missing or invalid.
    learner
        the learner's name, None for "every learner" (or when invalid).
    request
        the request id to echo in the reply ("" when missing or invalid).
    error
        what was wrong with the message and how to fix it; None when it is valid.
    """

    action: str | None
    learner: str | None
    request: str
    error: str | None = None


def _kind(value: Any) -> str:
    """A short description of a rejected value: its type, and its length for strings."""
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    return type(value).__name__ if value is not None else "null"


def _field(data: dict[str, Any], key: str, required: bool, nullable: bool,
           problems: list[str]) -> str | None:
    """``data[key]`` when it is a string of at most MAX_FIELD characters (or None where
    ``nullable``); else None, with the problem appended to ``problems``."""
    if key not in data:
        if required:
            problems.append(f"{key!r} is missing")
        return None
    value = data[key]
    if value is None and nullable:
        return None
    if isinstance(value, str) and len(value) <= MAX_FIELD:
        return value
    expected = f"a string of at most {MAX_FIELD} characters" + (" or null" if nullable else "")
    problems.append(f"{key!r} must be {expected}; got {_kind(value)}")
    return None


def parse_command(data: Any) -> Command:
    """Check one command from the panel; never raises.

    Parameters
    ----------
    data
        the ``data`` of a ``comm_msg`` (any JSON value, or anything at all).

    Returns
    -------
    Command
        The command; its ``error`` is None when the message is a valid command, else a
        sentence naming every problem and the expected shape.
    """
    if not isinstance(data, dict):
        return Command(None, None, "", f"a bidlab.learners command must be a JSON object "
                                       f"{_SHAPE}; got {_kind(data)}")
    problems: list[str] = []
    action = _field(data, "action", required=True, nullable=False, problems=problems)
    if action is not None and action not in COMMANDS:
        problems.append(f"unknown command {action!r}; expected one of {ACTIONS} or 'refresh'")
        action = None
    # "refresh" needs nothing else; a learner command must say which learner(s) it is for
    needs_all = action != "refresh"
    learner = _field(data, "learner", required=needs_all, nullable=True, problems=problems)
    request = _field(data, "request", required=needs_all, nullable=False, problems=problems)
    error = None
    if problems:
        error = "; ".join(problems) + f" (a command is {_SHAPE})"
    return Command(action, learner, request or "", error)


def message_data(msg: Any) -> Any:
    """The ``content.data`` of a comm message, or None when it has none; never raises."""
    content = msg.get("content") if isinstance(msg, dict) else None
    return content.get("data") if isinstance(content, dict) else None
