"""Errors as snapshots show them: the first line of the message, at most 300 characters."""

from __future__ import annotations


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first if len(first) <= 300 else first[:297] + "..."
