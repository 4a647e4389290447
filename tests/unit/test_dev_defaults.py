"""`zync dev up|down` write the engine's timeouts out (so `zync --help` does not import
the engine): they must stay the engine's."""

from __future__ import annotations

from engine.api import DEV_READY_TIMEOUT, DEV_STOP_TIMEOUT
from zync_tui.commands import dev


def test_dev_command_timeouts_are_the_engines() -> None:
    assert (dev.READY_TIMEOUT, dev.STOP_TIMEOUT) == (DEV_READY_TIMEOUT, DEV_STOP_TIMEOUT)
