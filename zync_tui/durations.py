"""Durations on the command line: ``250ms``, ``30s``, ``5m``, ``1h``, ``1d``, ``1h30m``.

A bare number is seconds (``1.5`` → 1.5 s). :func:`parse_duration` returns seconds as a
float; :func:`duration_option` is the ``parser=`` for a typer option.
"""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def parse_duration(text: str) -> float:
    """Seconds in ``text``; raises ``ValueError`` with a one-line message if it is not one."""
    spec = text.strip().lower().replace(" ", "")
    if _NUMBER.fullmatch(spec):
        return float(spec)
    pos, total = 0, 0.0
    for match in _PART.finditer(spec):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not spec or pos != len(spec):
        raise ValueError(
            f"{text!r} is not a duration: use a number with a unit, e.g. 250ms, 30s, 5m, 1h, 1h30m"
        )
    return total


def format_duration(seconds: float) -> str:
    """A short form of ``seconds`` for messages (``1.5s``, ``250ms``, ``5m``, ``1h30m``)."""
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    if seconds < 60 or seconds % 60:
        return f"{seconds:g}s"
    minutes = int(seconds // 60)
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return f"{minutes}m"
    return f"{hours}h{minutes}m" if minutes else f"{hours}h"


def duration_option(text: str | float) -> float:
    """``parser=`` for a typer option taking a duration; bad text becomes a usage error.

    Typer hands a numeric default through as a number: it is taken as seconds.
    """
    import typer

    if isinstance(text, int | float):
        return float(text)
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
