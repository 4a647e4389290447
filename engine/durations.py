"""The one duration grammar, for ETL configuration (``expire-after``) and command flags.

A duration is one or more parts, each a number and a unit, written together:
``250ms``, ``30s``, ``5m``, ``1h``, ``2d``, ``1w``, ``1h30m``, ``1.5s``. Units: ``ms``,
``s``, ``m``, ``h``, ``d``, ``w``; case and spaces do not matter.

Two readers share it:

* :func:`parse_seconds` (command flags): float seconds; zero is allowed and a bare
  number is seconds (``2`` → 2.0);
* :func:`parse_timedelta` (ETL configuration): a positive :class:`~datetime.timedelta`;
  a unit is required.

Each reader has its formatter: :func:`format_seconds` (short, for messages: ``1.5s``,
``250ms``, ``1h30m``) and :func:`format_timedelta` (the largest unit that divides the
value exactly: ``90m``, ``2h``).
"""

from __future__ import annotations

import re
from datetime import timedelta

UNIT_SECONDS: dict[str, float] = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}
_UNITS = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _compact(text: str) -> str:
    return text.strip().lower().replace(" ", "")


def _parts(spec: str) -> list[tuple[float, str]] | None:
    """``[(number, unit), ...]`` when the compact ``spec`` is a duration, else None."""
    pos = 0
    parts: list[tuple[float, str]] = []
    for match in _PART.finditer(spec):
        if match.start() != pos:
            break
        parts.append((float(match.group(1)), match.group(2)))
        pos = match.end()
    if not spec or pos != len(spec):
        return None
    return parts


def parse_seconds(text: str) -> float:
    """Seconds in ``text`` (a bare number is seconds); ``ValueError`` with a one-line
    message if it is not a duration."""
    spec = _compact(text)
    if _NUMBER.fullmatch(spec):
        return float(spec)
    parts = _parts(spec)
    if parts is None:
        raise ValueError(
            f"{text!r} is not a duration: use a number with a unit, e.g. 250ms, 30s, 5m, 1h, 1h30m"
        )
    return sum((number * UNIT_SECONDS[unit] for number, unit in parts), 0.0)


def parse_timedelta(text: object) -> timedelta:
    """``"15m"`` → 15 minutes. A unit is required and the duration must be positive;
    ``ValueError`` says what is wrong."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ValueError(f"expected a duration such as 30s, 15m or 1h, got {text!r}")
    if isinstance(text, int | float):
        raise ValueError(f"duration {text!r} has no unit: write e.g. {text}s or {text}m")
    parts = _parts(_compact(text))
    if parts is None:
        raise ValueError(
            f"invalid duration {text!r}: use a number and a unit (ms, s, m, h, d, w), "
            "e.g. 30s, 15m, 1h or 1h30m"
        )
    total = sum((number * _UNITS[unit] for number, unit in parts), timedelta())
    if total <= timedelta():
        raise ValueError(f"duration {text!r} must be positive")
    return total


def format_seconds(seconds: float) -> str:
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


def format_timedelta(value: timedelta) -> str:
    """15 minutes → ``"15m"`` (the largest units that divide it exactly)."""
    micros = int(value / timedelta(microseconds=1))
    if micros % 1000:
        return f"{micros}us"
    ms = micros // 1000
    for unit, size in (
        ("w", 604_800_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"
