"""Loops: from-kafka, ETL, to-kafka and apply — state, where each runs, last commit, rate,
last error — and, under them, the tables the apply loop keeps."""

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
    ("where", "where"),
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
        self.read_only_reason: str | None = None

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
        rows = []
        for loop in loops:
            key = "" if self.read_only else f"[{KEYS.get(loop.name, '?')}] "
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
        if loop.host is not None:
            text += f" on {loop.host}, pid {loop.pid}"
        if loop.version is not None:
            text += f"; last commit v{loop.version} at {fmt.clock(loop.committed_at)} ({fmt.num(loop.records)} records)"
        if loop.error:
            text += f"\nlast error: {loop.error}"
        detail.update(text)

    def show_pass(self, text: str) -> None:
        self.query_one("#loops-pass", Static).update(text)

    def on_data_table_row_highlighted(self, event: LiveTable.RowHighlighted) -> None:
        self.show_detail()


def _where(loop: LoopView, width: int) -> str:
    """``host:pid``, cut to ``width`` from the host's end (the pid always shows)."""
    if loop.host is None:
        return "-"
    pid = f":{loop.pid}"
    return fmt.short(loop.host, max(1, width - len(pid))) + pid
