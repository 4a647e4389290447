"""Helpers for console tests: build the app through its one factory, wait on conditions."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.console.fakes import T0, FakeBackend
from zync_tui.console.app import ZyncConsole, make_app
from zync_tui.console.polls import POLLS


@pytest.fixture
def anyio_backend() -> str:
    """Console tests run on asyncio (Textual's loop), through anyio's pytest plugin."""
    return "asyncio"


def fake_app(backend: FakeBackend | None = None, **kwargs: Any) -> ZyncConsole:
    """The console over a fake engine, with a fixed clock (deterministic pictures)."""
    return make_app(backend=backend or FakeBackend(**kwargs), interval=0.1, clock=lambda: T0)


async def until(pilot: Any, predicate: Callable[[], bool], limit: float = 10.0, what: str = "") -> None:
    """Let the app run until ``predicate`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {limit}s waiting for {what or predicate}")
        await pilot.pause(0.02)


async def polled(pilot: Any, polls: tuple[str, ...] = POLLS, limit: float = 10.0) -> None:
    """Wait until every poll has delivered at least once (and its workers are idle)."""
    app = pilot.app
    await until(pilot, lambda: set(polls) <= app.polled, limit, f"first polls {polls}")
    await pilot.pause()


async def fresh(pilot: Any, poll: str = "topics", limit: float = 10.0) -> None:
    """Wait until a poll that started after now has delivered."""
    app = pilot.app
    target = app.poll_count[poll] + 2
    await until(pilot, lambda: app.poll_count[poll] >= target, limit, f"a fresh {poll} poll")
    await pilot.pause()
