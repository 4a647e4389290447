"""Loops: from-kafka, ETL, to-kafka and apply — state, where each runs, last commit, rate,
last error — and, under them, the tables the apply loop keeps."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.widgets import Static

from zync_tui.console import format as fmt
from zync_tui.console.listing import Column, Row, Source
from zync_tui.console.views import LOOP_TITLES, LoopView
from zync_tui.console.widgets.delta_tables import TablesSection
from zync_tui.console.widgets.filter_line import FilterLine
from zync_tui.console.widgets.table_panel import TablePanel
from zync_tui.console.widgets.tables import LiveTable
from zync_tui.console.widgets.text import say

COLUMNS = [
    Column("loop", "loop"),
    Column("state", "state"),
    Column("where", "where"),
    Column("version", "commit", align=">"),
    Column("at", "at (UTC)"),
    Column("records", "records", align=">"),
    Column("rate", "rate", align=">"),
    Column("error", "last error"),
]
KEYS = {"from-kafka": "f", "etl": "e", "to-kafka": "t", "apply": "y"}


def rows(loops: Sequence[LoopView], read_only: bool) -> list[Row]:
    """The loops table's rows (made in the console's preparer thread)."""
    made = []
    for loop in loops:
        key = "" if read_only else f"[{KEYS.get(loop.name, '?')}] "
        cells = (
            key + LOOP_TITLES.get(loop.name, loop.name),
            loop.state.upper() if loop.state in ("failed", "unreachable") else loop.state,
            _where(loop, 12),
            "-" if loop.version is None else f"v{loop.version}",
            fmt.clock(loop.committed_at),
            fmt.num(loop.records),
            fmt.rate(loop.rate),
            fmt.short(loop.error, 20) or "-",
        )
        sort = (loop.name, loop.state, loop.host, loop.version, loop.committed_at, loop.records, loop.rate, loop.error)
        made.append(Row(loop.name, cells, sort))
    return made


class LoopsPanel(TablePanel):
    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.loops: list[LoopView] = []
        self.read_only = False
        self.read_only_reason: str | None = None

    def compose(self) -> ComposeResult:
        yield LiveTable(COLUMNS, noun="loops", id="loops-table")
        yield TablesSection(id="tables-section")
        yield FilterLine()
        yield Static("", id="loops-detail", classes="detail", markup=False)
        yield Static("ETL pass: none run from this console yet", id="loops-pass", classes="detail", markup=False)
        yield Static("", id="loops-keys", classes="hint", markup=False)

    def on_mount(self) -> None:
        self._keys_hint()
        self.query_one(TablesSection).query_one(LiveTable).active = False  # Tab: the tables

    def _keys_hint(self) -> None:
        hint = self.query_one("#loops-keys", Static)
        if self.read_only:
            why = f" ({self.read_only_reason})" if self.read_only_reason else ""
            hint.update(f"read-only{why}: starting, stopping and ETL passes are disabled")
        else:
            hint.update("f e t: start/stop a loop · a: all on · x: all off · p: ETL pass now")

    def set_read_only(self, read_only: bool, reason: str | None = None) -> None:
        self.read_only = read_only
        self.read_only_reason = reason
        if self.is_mounted:
            self._keys_hint()

    def show(self, loops: list[LoopView]) -> None:
        self.loops = loops
        read_only = self.read_only
        self.query_one("#loops-table", LiveTable).give(Source(lambda: rows(loops, read_only)))
        self.due()

    def present(self) -> None:
        self.show_detail()

    def show_detail(self) -> None:
        key = self.query_one("#loops-table", LiveTable).highlighted_key()
        loop = next((x for x in self.loops if x.name == key), None)
        detail = self.query_one("#loops-detail", Static)
        if loop is None:
            say(detail, "")
            return
        text = f"{LOOP_TITLES.get(loop.name, loop.name)} is {loop.state}"
        if loop.host is not None:
            text += f" on {loop.host}, pid {loop.pid}"
        if loop.version is not None:
            text += f"; last commit v{loop.version} at {fmt.clock(loop.committed_at)} ({fmt.num(loop.records)} records)"
        if loop.error:
            text += f"\nlast error: {loop.error}"
        say(detail, text)

    def show_pass(self, text: str) -> None:
        say(self.query_one("#loops-pass", Static), text)

    def changed(self, table: LiveTable) -> None:
        if table.id == "loops-table":
            self.show_detail()


def _where(loop: LoopView, width: int) -> str:
    """``host:pid``, cut to ``width`` from the host's end (the pid always shows)."""
    if loop.host is None:
        return "-"
    pid = f":{loop.pid}"
    return fmt.short(loop.host, max(1, width - len(pid))) + pid
