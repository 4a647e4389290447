"""Log: what the loops and the console did, newest first, with severity; faults are
logged once when they appear, and again when they recover."""

from __future__ import annotations

from collections import deque

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from zync_tui.console import format as fmt
from zync_tui.console.backend import LogEntry
from zync_tui.console.widgets.tables import LiveTable

COLUMNS = [("at", "at (UTC)"), ("severity", "severity"), ("source", "source"), ("message", "message")]
CAPACITY = 500


class LogPanel(Vertical):
    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.entries: deque[tuple[int, LogEntry]] = deque(maxlen=CAPACITY)
        self._serial = 0
        #: the current fault of each part (Kafka, a loop, a snapshot…), None when fine
        self.faults: dict[str, str | None] = {}

    def compose(self) -> ComposeResult:
        yield LiveTable(COLUMNS, id="log-table", follow_top=True)
        yield Static("", id="log-detail", classes="detail", markup=False)

    def on_data_table_row_highlighted(self, event: LiveTable.RowHighlighted) -> None:
        key = event.row_key.value if event.row_key is not None else None
        for serial, e in self.entries:
            if str(serial) == key:
                self.query_one("#log-detail", Static).update(f"{e.severity} {e.source}: {e.message}")
                return

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
        rows = []
        for serial, e in reversed(self.entries):
            severity = {"WARNING": "WARN"}.get(e.severity, e.severity)
            rows.append((str(serial), (fmt.clock(e.at), severity, fmt.short(e.source, 12), e.message), None))
        if self.is_mounted:
            self.query_one(LiveTable).set_rows(rows)
