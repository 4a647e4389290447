"""The command palette's console actions (Ctrl+P): every key's action, found by name.

Control actions are absent from a read-only console, the demo's only from the demo.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from textual.app import SystemCommand

from zync_tui.console.keys import PANEL_TITLES, PANELS
from zync_tui.console.views import LOOP_TITLES, Backend


class ConsoleActions(Protocol):
    """The app's actions the palette offers."""

    backend: Backend

    def action_panel(self, panel: str) -> None: ...
    def action_help(self) -> None: ...
    def action_refresh(self) -> None: ...
    def action_dead_letters(self) -> None: ...
    def action_filter(self) -> None: ...
    def action_sort(self, reverse: bool = False) -> None: ...
    def action_toggle_loop(self, name: str) -> None: ...
    def action_start_all(self) -> None: ...
    def action_stop_all(self) -> None: ...
    def action_etl_pass(self) -> None: ...
    def action_next_batch(self) -> None: ...


def console_commands(app: ConsoleActions) -> Iterator[SystemCommand]:
    """The console's own palette commands (Textual adds its system ones)."""
    for i, panel in enumerate(PANELS):
        name = PANEL_TITLES[panel][2:]
        yield SystemCommand(f"Show {name}", f"Switch to the {name} panel (key {i + 1})", _bind(app.action_panel, panel))
    yield SystemCommand("Help: keys", "List every key (?)", app.action_help)
    yield SystemCommand("Refresh now", "Poll the engine now (r)", app.action_refresh)
    yield SystemCommand("Browse dead letters", "Records from-kafka could not decode (d)", app.action_dead_letters)
    yield SystemCommand("Filter records", "Filter the Pending or Expired table (/)", app.action_filter)
    yield SystemCommand("Sort records", "Sort the current table by the next column (s)", app.action_sort)
    if not app.backend.read_only:
        for name, key in (("from-kafka", "f"), ("etl", "e"), ("to-kafka", "t"), ("apply", "y")):
            title = LOOP_TITLES[name]
            yield SystemCommand(f"Start/stop {title}", f"Toggle the {title} loop ({key})", _bind(app.action_toggle_loop, name))
        yield SystemCommand("Start all loops", "from-kafka, ETL, to-kafka and apply (a)", app.action_start_all)
        yield SystemCommand("Stop all loops", "from-kafka, ETL, to-kafka and apply (x)", app.action_stop_all)
        yield SystemCommand("Run one ETL pass now", "Run a pass and show what it did (p)", app.action_etl_pass)
    if app.backend.demo is not None:
        yield SystemCommand("Publish next demo batch", "Send the next invoices batch to Kafka (n)", app.action_next_batch)


def _bind(fn: Callable[[str], None], arg: str) -> Callable[[], None]:
    return lambda: fn(arg)
