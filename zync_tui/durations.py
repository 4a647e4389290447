"""Durations on the command line, as a typer option (the grammar is
:mod:`engine.durations`: ``250ms``, ``30s``, ``5m``, ``1h``, ``1d``, ``1w``, ``1h30m``, or a
bare number of seconds)."""

from __future__ import annotations


def duration_option(text: str | float) -> float:
    """``parser=`` for a typer option taking a duration; bad text becomes a usage error.

    Typer hands a numeric default through as a number: it is taken as seconds.
    """
    import typer

    from engine.api import parse_seconds  # deferred: keeps `zync --help` fast

    if isinstance(text, int | float):
        return float(text)
    try:
        return parse_seconds(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
