"""How numbers, times and states read in the console (plain text: fine with NO_COLOR)."""

from __future__ import annotations

import time as _time
from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"


def num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def seconds(value: float | None) -> str:
    """``0s``, ``45s``, ``3m 20s``, ``2h 5m``, ``1d 4h``; ``-`` when unknown."""
    if value is None:
        return "-"
    total = int(round(value))
    if total < 60:
        return f"{total}s" if value >= 1 or value == 0 else f"{value:.1f}s"
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    shown = [f"{n}{unit}" for n, unit in parts if n][:2]
    return " ".join(shown)


def rate(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 10_000:
        return f"{value / 1000:.0f}k/s"
    if value >= 100:
        return f"{value:.0f}/s"
    return f"{value:.1f}/s"


def clock(at: float | None) -> str:
    """A wall-clock time ``HH:MM:SS`` (UTC), or ``-``."""
    if at is None:
        return "-"
    return _time.strftime("%H:%M:%S", _time.gmtime(at))


def buckets(values: Sequence[float], count: int) -> list[float]:
    """``values`` squeezed into ``count`` buckets (each the largest of its values), so a
    burst stays visible for the whole history, not only for its own poll."""
    values = list(values)
    if len(values) <= count:
        return values
    size = len(values) / count
    return [max(values[int(i * size) : max(int((i + 1) * size), int(i * size) + 1)]) for i in range(count)]


def sparkline(values: Sequence[float], width: int = 8) -> str:
    """``values`` as ``width`` block characters (blank when there are none)."""
    shown = buckets(values, width)
    if not shown:
        return ""
    top = max(shown)
    if top <= 0:
        return BARS[0] * len(shown)
    return "".join(BARS[min(len(BARS) - 1, int(v / top * (len(BARS) - 1)))] for v in shown)


def short(text: str | None, width: int) -> str:
    if not text:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def middle(text: str | None, width: int) -> str:
    """``text`` cut in its middle to ``width``, its end kept longer than its start:
    ``dbser…ntory.t000`` — the tables of one database differ at their ends."""
    if not text:
        return ""
    if len(text) <= width:
        return text
    if width < 4:
        return short(text, width)
    head = (width - 1) // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]
