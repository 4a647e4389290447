"""Log: what the loops and the console did, newest first, with severity; faults are
logged once when they appear, and again when they recover. Enter opens a line whole: at
80×24 the detail under the table holds three lines, and a loop's error can be longer (the
end of it is often what to do)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import Static

from zync_tui.console import format as fmt
from zync_tui.console.listing import Column, Row, Source
from zync_tui.console.views import LogEntry
from zync_tui.console.widgets.filter_line import FilterLine
from zync_tui.console.widgets.table_panel import TablePanel
from zync_tui.console.widgets.tables import LiveTable
from zync_tui.console.widgets.text import say

COLUMNS = [
    Column("at", "at (UTC)"),
    Column("severity", "severity"),
    Column("source", "source", 12),
    Column("message", "message", 200),
]
CAPACITY = 500


def rows(entries: Sequence[tuple[int, LogEntry]]) -> list[Row]:
    """The table's rows, newest first (made in the console's preparer thread)."""
    made = []
    for serial, e in reversed(entries):
        severity = {"WARNING": "WARN"}.get(e.severity, e.severity)
        cells = (fmt.clock(e.at), severity, fmt.short(e.source, 12), fmt.short(e.message, 200))
        made.append(Row(str(serial), cells, (e.at, severity, e.source, e.message), None))
    return made


class LogPanel(TablePanel):
    @dataclass
    class Opened(Message):
        """Enter on a line: show it whole."""

        entry: LogEntry

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.entries: deque[tuple[int, LogEntry]] = deque(maxlen=CAPACITY)
        self._serial = 0
        #: the current fault of each part (Kafka, a loop, a snapshot…), None when fine
        self.faults: dict[str, str | None] = {}

    def compose(self) -> ComposeResult:
        yield LiveTable(COLUMNS, noun="log lines", follow_top=True, id="log-table")
        yield FilterLine()
        yield Static("", id="log-detail", classes="detail", markup=False)

    def on_mount(self) -> None:
        self._give()

    def _give(self) -> None:
        kept = list(self.entries)
        self.query_one(LiveTable).give(Source(lambda: rows(kept)))

    def changed(self, table: LiveTable) -> None:
        e = self._entry(table.highlighted_key())
        if e is not None:
            say(self.query_one("#log-detail", Static), f"{e.severity} {e.source}: {e.message}")

    def on_live_table_selected(self, event: LiveTable.Selected) -> None:
        event.stop()
        e = self._entry(event.key)
        if e is not None:
            self.post_message(self.Opened(e))

    def _entry(self, key: str | None) -> LogEntry | None:
        for serial, e in self.entries:
            if str(serial) == key:
                return e
        return None

    def fault(self, where: str, error: str | None, at: float) -> None:
        """``where``'s fault (None: none): logged when it appears or changes, and its
        recovery."""
        before = self.faults.get(where)
        self.faults[where] = error
        if error and error != before:
            self.add([LogEntry(at, "ERROR", where, error)])
        elif before and not error:
            self.add([LogEntry(at, "INFO", where, "recovered")])

    def add(self, entries: list[LogEntry]) -> None:
        if not entries:
            return
        for entry in entries:
            self._serial += 1
            self.entries.append((self._serial, entry))
        if self.is_mounted:
            self._give()
