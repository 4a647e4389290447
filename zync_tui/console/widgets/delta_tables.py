"""The tables the apply loop keeps (`tables:` of the configuration), under the loops:
each table's Delta version, rows, the staging version it reflects against the staging
pool's newest (its lag), when it was last applied and its last error.

The rows come from :meth:`engine.api.Observer.tables` with the apply loop's own status
laid over them (the console's backend does that), as one :class:`engine.api.TablesReport`:
a snapshot like any other, so the section does not care how it travelled. It is hidden
while there is no table to show.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from engine.api import TableSnapshot, TablesReport
from zync_tui.console import format as fmt
from zync_tui.console.listing import Column, Row, Source
from zync_tui.console.widgets.tables import LiveTable

COLUMNS = [
    Column("table", "table", 24),
    Column("kind", "kind"),
    Column("version", "version", align=">"),
    Column("rows", "rows", align=">"),
    Column("applied", "staging applied/newest"),
    Column("lag", "lag"),
    Column("at", "applied at (UTC)"),
    Column("error", "last error"),
]


def cells(table: TableSnapshot) -> tuple[str, ...]:
    applied = "-" if table.applied is None else str(table.applied)
    staged = "-" if table.staged is None else str(table.staged)
    lag = table.lag
    return (
        table.name,
        "history" if table.history else "current",
        "-" if table.version is None else f"v{table.version}",
        fmt.num(table.rows),
        f"{applied} / {staged}",
        "-" if lag is None else ("caught up" if lag <= 0 else f"{lag} version{'s' if lag != 1 else ''}"),
        fmt.clock(table.applied_at),
        fmt.short(table.error, 30) or "-",
    )


def rows(report: TablesReport) -> list[Row]:
    """The table's rows (made in the console's preparer thread)."""
    made = [
        Row(t.name, cells(t), (t.name, t.history, t.version, t.rows, t.applied, t.lag, t.applied_at, t.error))
        for t in report.tables
    ]
    if report.error:
        made.append(Row("", ("-", "-", "-", "-", "-", "-", "-", fmt.short(report.error, 30)), ()))
    return made


class TablesSection(Vertical):
    """The tables, under the Loops panel's loops (hidden when there are none)."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.report: TablesReport | None = None

    def compose(self) -> ComposeResult:
        yield Static(
            "Tables (apply loop; y starts and stops it)",
            id="tables-title",
            classes="hint",
            markup=False,
        )
        yield LiveTable(COLUMNS, noun="tables", id="tables-table")

    def on_mount(self) -> None:
        self.display = False

    def show(self, report: TablesReport) -> None:
        self.report = report
        self.display = bool(report.tables or report.error)
        self.query_one(LiveTable).give(Source(lambda: rows(report)))
