"""The base of every error zync reports to a user as one line, and that one line."""

from __future__ import annotations


class ZyncError(Exception):
    """An error whose message says, in one line, what went wrong and what to do."""


def one_line(exc: BaseException, *, typed: bool = False, limit: int | None = None) -> str:
    """The first line of ``exc``'s message, or its class name when the message is empty.

    ``typed``: prefix the class name (``"KeyError: 'x'"``) unless ``exc`` is a
    :class:`ZyncError`, whose message is written for users as it is. ``limit``: cut a
    longer line to that many characters, ending in ``...``.
    """
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    name = type(exc).__name__
    if not first:
        line = name
    elif typed and not isinstance(exc, ZyncError):
        line = f"{name}: {first}"
    else:
        line = first
    if limit is not None and len(line) > limit:
        return line[: limit - 3] + "..."
    return line
