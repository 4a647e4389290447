"""Sizes on the command line: ``64MiB``, ``64MB``, ``64m`` or ``1000`` (bytes) in, and
``1.5 GiB`` out (binary units both ways)."""

from __future__ import annotations

import re

import typer

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(i?b)?\s*$", re.I)


def parse_size(text: str) -> int:
    """``"64MiB"``/``"64MB"``/``"64m"``/``"1000"`` → bytes (binary units)."""
    match = _SIZE.match(text)
    if not match:
        raise typer.BadParameter(f"{text!r} is not a size: use e.g. 1000, 512KiB, 64MiB, 1GiB")
    unit = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[match.group(2).lower()]
    return int(float(match.group(1)) * unit)


def format_size(n: int | None) -> str:
    """Bytes in words: ``512 B``, ``1.5 KiB``, ``64.0 MiB`` (``-`` when unknown)."""
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
