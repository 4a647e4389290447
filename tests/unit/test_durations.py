"""engine.durations in seconds, and its typer adapter zync_tui.durations."""

from __future__ import annotations

import pytest
import typer

from engine.durations import format_seconds, parse_seconds
from zync_tui.durations import duration_option


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("250ms", 0.25),
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1d", 86400.0),
        ("1h30m", 5400.0),
        ("1m30s", 90.0),
        ("1.5s", 1.5),
        ("2", 2.0),
        ("0.5", 0.5),
        (" 10S ", 10.0),
        ("0s", 0.0),
    ],
)
def test_parses(text: str, seconds: float) -> None:
    assert parse_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "5x", "m5", "-1s", "1h 30", "1.s", "5 minutes", "1e3"])
def test_refuses_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a duration: use .* e\.g\. 250ms, 30s, 5m"):
        parse_seconds(text)


def test_typer_parser_turns_mistakes_into_usage_errors() -> None:
    assert duration_option("5m") == 300.0
    with pytest.raises(typer.BadParameter, match="'soon' is not a duration"):
        duration_option("soon")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.25, "250ms"), (1.5, "1.5s"), (30, "30s"), (300, "5m"), (3600, "1h"), (5400, "1h30m"), (90, "90s")],
)
def test_formats(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


def test_duration_option_takes_a_numeric_default_as_seconds() -> None:
    from zync_tui.durations import duration_option

    assert duration_option(1.0) == 1.0
    assert duration_option("250ms") == 0.25


def test_one_grammar_for_flags_and_etl_configuration() -> None:
    from datetime import timedelta

    from engine.durations import parse_timedelta

    assert parse_seconds("1w") == 604800.0
    assert parse_timedelta("1W") == timedelta(weeks=1)
    assert parse_timedelta("1h 30m") == timedelta(minutes=90)
