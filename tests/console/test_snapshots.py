"""Pictures of every screen at fixed sizes (pytest-textual-snapshot).

The data come from the fake engine with a fixed clock, so every picture is the same on
every run: no ports, PIDs or wall-clock times. Regenerate after a deliberate change with
`pytest tests/console/test_snapshots.py --snapshot-update` and look at the report.
"""

from __future__ import annotations

import pytest

from tests.console.conftest import fake_app, polled
from tests.console.fakes import FakeBackend, WideBackend

WIDE = (100, 30)
SMALL = (80, 24)


async def _ready(pilot) -> None:
    await polled(pilot)
    await pilot.pause(0.2)


def _keys(*keys: str):
    async def run_before(pilot) -> None:
        await _ready(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause(0.05)
        await pilot.pause(0.2)

    return run_before


@pytest.mark.parametrize("size", [WIDE, SMALL], ids=["100x30", "80x24"])
@pytest.mark.parametrize(
    "keys",
    [("1",), ("2",), ("3",), ("4",), ("5",), ("6",)],
    ids=["topics", "loops", "etl", "pending", "expired", "log"],
)
def test_panels(snap_compare, size, keys) -> None:
    assert snap_compare(fake_app(demo=True), terminal_size=size, run_before=_keys(*keys))


@pytest.mark.parametrize(
    "keys",
    [("question_mark",), ("4", "enter"), ("d",)],
    ids=["help", "record", "dead-letters"],
)
def test_modal_screens(snap_compare, keys) -> None:
    assert snap_compare(fake_app(demo=True), terminal_size=SMALL, run_before=_keys(*keys))


def test_read_only_loops(snap_compare) -> None:
    assert snap_compare(fake_app(read_only=True), terminal_size=SMALL, run_before=_keys("2"))


def test_broker_down(snap_compare) -> None:
    backend = FakeBackend(kafka_down=True)
    backend.failing["etl"] = "Spark job aborted: executor lost"
    assert snap_compare(fake_app(backend), terminal_size=SMALL, run_before=_keys("1"))


def test_no_color(snap_compare, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    backend = FakeBackend(kafka_down=True)
    backend.failing["etl"] = "Spark job aborted: executor lost"
    assert snap_compare(fake_app(backend), terminal_size=SMALL, run_before=_keys("2"))


def test_wide_topics_filtered_and_sorted(snap_compare) -> None:
    """200 tables' topics at 80×24, filtered to t01x and sorted by lag, descending."""
    keys = ("slash", "t", "0", "1", "enter", *"s" * 7, "S")
    assert snap_compare(fake_app(WideBackend(200)), terminal_size=SMALL, run_before=_keys(*keys))
