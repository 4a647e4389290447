"""Pending and Expired: input records waiting (or given up on), filterable and sortable."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Static

from engine.api import RecordRow
from zync_tui.console import format as fmt
from zync_tui.console.widgets.tables import LiveTable

#: The most records the table shows (the first in its order); the filter searches all.
SHOWN = 500

COLUMNS = [
    ("topic", "topic"),
    ("p", "p"),
    ("offset", "offset"),
    ("key", "key"),
    ("rule", "rule"),
    ("age", "age"),
]


def _cells(r: RecordRow) -> tuple[str, ...]:
    return (
        fmt.short(r.topic, 16),
        str(r.partition),
        fmt.num(r.offset),
        fmt.short(r.key, 22),
        fmt.short(r.rule, 14),
        fmt.seconds(r.age_seconds),
    )


class RecordsPanel(Vertical):
    """A table of :class:`engine.api.RecordRow` (pending or expired)."""

    @dataclass
    class Opened(Message):
        """Enter on a row: show its full record."""

        record: RecordRow

    def __init__(self, status: str, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.status = status
        self.records: list[RecordRow] = []
        self.filter_text = ""
        self.error: str | None = None
        self._stale = False

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter (/ to type, Esc to clear): topic, key, rule…", id=f"{self.status}-filter")
        yield LiveTable(COLUMNS, limit=SHOWN, id=f"{self.status}-table")
        yield Static("", id=f"{self.status}-detail", classes="detail", markup=False)

    def show(self, records: list[RecordRow], error: str | None = None) -> None:
        """New records from a poll: shown now if the panel is in view, else when it
        comes into view (:meth:`flush`)."""
        self.records = list(records)
        self.error = error
        if self.query_one(LiveTable).in_view():
            self._fill()
        else:
            self._stale = True

    def flush(self) -> None:
        """Show the records a poll brought while the panel was out of view."""
        if self._stale:
            self._fill()

    def refill(self) -> None:
        """Give the table its rows again (its sort changed)."""
        self._fill()

    def _matches(self, r: RecordRow) -> bool:
        if not self.filter_text:
            return True
        needle = self.filter_text.lower()
        hay = f"{r.topic} {r.partition} {r.offset} {r.key} {r.rule}".lower()
        return all(word in hay for word in needle.split())

    def _fill(self) -> None:
        """The table's rows: every match when the table sorts (the first SHOWN of the
        sorted matches are shown), else the first SHOWN matches only."""
        self._stale = False
        table = self.query_one(LiveTable)
        shown = [r for r in self.records if self._matches(r)] if self.filter_text else self.records
        rows = []
        for r in shown if table.sort_column is not None else shown[:SHOWN]:
            key = f"{r.etl}:{r.topic}:{r.partition}:{r.offset}"
            sort = (r.topic, r.partition, r.offset, r.key, r.rule, r.age_seconds)
            rows.append((key, functools.partial(_cells, r), sort))
        table.set_rows(rows)
        detail = self.query_one(f"#{self.status}-detail", Static)
        total = len(self.records)
        text = f"{len(shown)} of {total} {self.status} records" if self.filter_text else f"{total} {self.status} records"
        if len(shown) > SHOWN:
            text += f" (the first {SHOWN} shown: / filters)"
        if total:
            text += " · Enter shows the record · s sorts · S reverses"
        if self.error:
            text = f"⚠ {self.error}\n{text}"
        detail.update(text)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.filter_text = event.value.strip()
        self._fill()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one(LiveTable).focus()

    def on_data_table_row_selected(self, event: LiveTable.RowSelected) -> None:
        event.stop()
        record = self.record_for(event.row_key.value)
        if record is not None:
            self.post_message(self.Opened(record))

    def record_for(self, key: str | None) -> RecordRow | None:
        for r in self.records:
            if f"{r.etl}:{r.topic}:{r.partition}:{r.offset}" == key:
                return r
        return None

    def focus_filter(self) -> None:
        self.query_one(Input).focus()

    def clear_filter(self) -> None:
        self.query_one(Input).value = ""
        self.filter_text = ""
        self._fill()
        self.query_one(LiveTable).focus()
