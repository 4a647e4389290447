"""Loops: from-kafka, ETL, to-kafka and apply — state, last commit, rate, last error —
and, under them, the tables the apply loop keeps."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from zync_tui.console import format as fmt
from zync_tui.console.backend import LOOP_TITLES, LoopView
from zync_tui.console.widgets.delta_tables import TablesSection
from zync_tui.console.widgets.tables import LiveTable

COLUMNS = [
    ("loop", "loop"),
    ("state", "state"),
    ("version", "commit"),
    ("at", "at (UTC)"),
    ("records", "records"),
    ("rate", "rate"),
    ("error", "last error"),
]
KEYS = {"from-kafka": "f", "etl": "e", "to-kafka": "t", "apply": "y"}


class LoopsPanel(Vertical):
    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.loops: list[LoopView] = []
        self.read_only = False

    def compose(self) -> ComposeResult:
        yield LiveTable(COLUMNS, id="loops-table")
        yield TablesSection(id="tables-section")
        yield Static("", id="loops-detail", classes="detail", markup=False)
        yield Static("ETL pass: none run from this console yet", id="loops-pass", classes="detail", markup=False)
        yield Static("", id="loops-keys", classes="hint", markup=False)

    def on_mount(self) -> None:
        self._keys_hint()

    def _keys_hint(self) -> None:
        hint = self.query_one("#loops-keys", Static)
        if self.read_only:
            hint.update("read-only: starting, stopping and ETL passes are disabled")
        else:
            hint.update("f e t: start/stop a loop · a: all on · x: all off · p: ETL pass now")

    def set_read_only(self, read_only: bool) -> None:
        self.read_only = read_only
        if self.is_mounted:
            self._keys_hint()

    def show(self, loops: list[LoopView]) -> None:
        self.loops = loops
        rows = []
        for loop in loops:
            key = "" if self.read_only else f"[{KEYS.get(loop.name, '?')}] "
            cells = (
                key + LOOP_TITLES.get(loop.name, loop.name),
                loop.state.upper() if loop.state == "failed" else loop.state,
                "-" if loop.version is None else f"v{loop.version}",
                fmt.clock(loop.committed_at),
                fmt.num(loop.records),
                fmt.rate(loop.rate),
                fmt.short(loop.error, 20) or "-",
            )
            rows.append((loop.name, cells, None))
        self.query_one(LiveTable).set_rows(rows)
        self.show_detail()

    def show_detail(self) -> None:
        key = self.query_one(LiveTable).highlighted_key()
        loop = next((x for x in self.loops if x.name == key), None)
        detail = self.query_one("#loops-detail", Static)
        if loop is None:
            detail.update("")
            return
        text = f"{LOOP_TITLES.get(loop.name, loop.name)} is {loop.state}"
        if loop.version is not None:
            text += f"; last commit v{loop.version} at {fmt.clock(loop.committed_at)} ({fmt.num(loop.records)} records)"
        if loop.error:
            text += f"\nlast error: {loop.error}"
        detail.update(text)

    def show_pass(self, text: str) -> None:
        self.query_one("#loops-pass", Static).update(text)

    def on_data_table_row_highlighted(self, event: LiveTable.RowHighlighted) -> None:
        self.show_detail()
