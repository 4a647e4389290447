"""`zync dev up|down` write the engine's timeouts out (so `zync --help` does not import
the engine): they must stay the engine's."""

from __future__ import annotations

from engine.local.processes import STOP_TIMEOUT as DEV_STOP_TIMEOUT
from engine.local.stack import READY_TIMEOUT as DEV_READY_TIMEOUT
from zync_tui.commands import dev


def test_dev_command_timeouts_are_the_engines() -> None:
    assert (dev.READY_TIMEOUT, dev.STOP_TIMEOUT) == (DEV_READY_TIMEOUT, DEV_STOP_TIMEOUT)
