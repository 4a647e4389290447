"""Pending and Expired: input records waiting (or given up on), filterable and sortable.

There may be tens of thousands (a backlog whose right-hand rows have not come): each
row's cells are made only when it is drawn, and its columns keep their widths.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import Static

from engine.api import RecordRow
from zync_tui.console import format as fmt
from zync_tui.console.listing import Column, Row, Source
from zync_tui.console.widgets.filter_line import FilterLine
from zync_tui.console.widgets.table_panel import TablePanel
from zync_tui.console.widgets.tables import LiveTable
from zync_tui.console.widgets.text import say

COLUMNS = [
    Column("topic", "topic", 16),
    Column("p", "p", 3, ">"),
    Column("offset", "offset", 9, ">"),
    Column("key", "key", 22),
    Column("rule", "rule", 14),
    Column("age", "age", 7, ">"),
]


def key(r: RecordRow) -> str:
    return f"{r.etl}:{r.topic}:{r.partition}:{r.offset}"


def _cells(r: RecordRow) -> tuple[str, ...]:
    return (
        fmt.middle(r.topic, 16),
        str(r.partition),
        fmt.num(r.offset),
        fmt.short(r.key, 22),
        fmt.short(r.rule, 14),
        fmt.seconds(r.age_seconds),
    )


def rows(records: Sequence[RecordRow]) -> list[Row]:
    """The table's rows (made in the console's preparer thread; cells when drawn)."""
    return [
        Row(key(r), functools.partial(_cells, r), (r.topic, r.partition, r.offset, r.key, r.rule, r.age_seconds),
            f"{r.topic} {r.partition} {r.offset} {r.key} {r.rule}")
        for r in records
    ]


class RecordsPanel(TablePanel):
    """A table of :class:`engine.api.RecordRow` (pending or expired)."""

    @dataclass
    class Opened(Message):
        """Enter on a row: show its full record."""

        record: RecordRow

    def __init__(self, status: str, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.status = status
        self.records: Sequence[RecordRow] = ()
        self.error: str | None = None
        self._by_key: dict[str, RecordRow] | None = None

    def compose(self) -> ComposeResult:
        yield LiveTable(COLUMNS, noun=f"{self.status} records", id=f"{self.status}-table")
        yield FilterLine()
        yield Static("", id=f"{self.status}-detail", classes="detail", markup=False)

    def show(self, records: Sequence[RecordRow], error: str | None = None) -> None:
        """New records from a poll."""
        self.records = records
        self.error = error
        self._by_key = None
        self.query_one(LiveTable).give(Source(lambda: rows(records)))
        self.due()

    def present(self) -> None:
        hint = "Enter shows a full record" if self.records else ""
        say(self.query_one(f"#{self.status}-detail", Static), f"⚠ {self.error}\n{hint}" if self.error else hint)

    def on_live_table_selected(self, event: LiveTable.Selected) -> None:
        event.stop()
        record = self.record_for(event.key)
        if record is not None:
            self.post_message(self.Opened(record))

    def record_for(self, found: str | None) -> RecordRow | None:
        if self._by_key is None:
            self._by_key = {key(r): r for r in self.records}
        return self._by_key.get(found or "")
