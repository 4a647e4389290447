"""The console on running processes (``zync tui --attach``), with a fake engine: a console
read-only for a reason says it and refuses control; a loop whose process is gone shows as
unreachable, where it ran and since when. (The real thing, two `zync run --only`
processes and one killed: tests/integration/test_serve.py.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.console.conftest import fake_app, fresh, polled, until
from tests.console.fakes import FakeBackend
from tests.console.test_console import SIZE, cells, text_of
from zync_tui.console.views import LoopView

pytestmark = pytest.mark.anyio

WHY = "http://ops-2:9464 is reached over TCP without a token ($ZYNC_CONTROL_TOKEN)"


async def test_a_console_read_only_for_a_reason_says_it_and_refuses_control() -> None:
    backend = FakeBackend(read_only=True)
    backend.read_only_reason = WHY
    app = fake_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        await pilot.press("2", "f", "p")
        await pilot.pause()
        assert backend.calls == ["start"]  # the engine set up; no loop or pass asked for
        assert f"read-only ({WHY})" in text_of(app, "#loops-keys")


class GoneBackend(FakeBackend):
    """to-kafka's process stopped answering at 03:01:40."""

    def loops(self) -> list[LoopView]:
        views = super().loops()
        return [
            replace(v, state="unreachable", error="unix:/run/x.sock unreachable since 03:01:40")
            if v.name == "to-kafka" else v
            for v in views
        ]  # fmt: skip


async def test_a_loop_whose_process_is_gone_shows_unreachable_and_where_it_ran() -> None:
    app = fake_app(GoneBackend())
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        await pilot.press("2")
        await fresh(pilot, "loops")
        rows = {row[0].split("] ")[-1]: row for row in cells(app, "loops")}
        assert rows["to-kafka"][1] == "UNREACHABLE"
        assert rows["to-kafka"][2] == "ops-2:4242"
        assert rows["from-kafka"][1] == "running"
        await pilot.press("down", "down")
        await until(pilot, lambda: "unreachable since 03:01:40" in text_of(app, "#loops-detail"))
        assert "on ops-2, pid 4242" in text_of(app, "#loops-detail")
