"""ETL: per rule and input topic/partition — cursor, processed, pending, expired."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.widgets import Static

from engine.api import EtlReport, EtlSnapshot
from zync_tui.console import format as fmt
from zync_tui.console.listing import Column, Row, Source
from zync_tui.console.widgets.filter_line import FilterLine
from zync_tui.console.widgets.table_panel import TablePanel
from zync_tui.console.widgets.tables import LiveTable
from zync_tui.console.widgets.text import say

COLUMNS = [
    Column("rule", "rule", 18),
    Column("topic", "input topic", 16),
    Column("p", "p", align=">"),
    Column("cursor", "cursor", align=">"),
    Column("processed", "processed", align=">"),
    Column("pending", "pending", align=">"),
    Column("expired", "expired", align=">"),
]


def rows(snapshots: Sequence[EtlSnapshot]) -> list[Row]:
    """The table's rows (made in the console's preparer thread)."""
    return [
        Row(
            f"{r.etl}:{r.rule}:{r.topic}:{r.partition}",
            (
                fmt.short(r.rule, 18),
                fmt.middle(r.topic, 16),
                str(r.partition),
                fmt.num(r.cursor),
                fmt.num(r.processed),
                fmt.num(r.pending),
                fmt.num(r.expired),
            ),
            (r.rule, r.topic, r.partition, r.cursor, r.processed, r.pending, r.expired),
            f"{r.rule} {r.topic} {r.partition}",
        )
        for r in snapshots
    ]


class EtlPanel(TablePanel):
    def compose(self) -> ComposeResult:
        yield Static("waiting for the first snapshot…", id="etl-notice", classes="notice", markup=False)
        yield LiveTable(COLUMNS, noun="rule inputs", id="etl-table")
        yield FilterLine()
        yield Static("", id="etl-detail", classes="detail", markup=False)

    report: EtlReport | None = None

    def show(self, report: EtlReport) -> None:
        self.report = report
        snapshots = report.rows
        self.query_one(LiveTable).give(Source(lambda: rows(snapshots)))
        self.due()

    def present(self) -> None:
        report = self.report
        if report is None:
            return
        notice = self.query_one("#etl-notice", Static)
        say(notice, f"⚠ {report.error}" if report.error else "")
        notice.set_class(bool(report.error), "fault")
        notice.display = bool(report.error)
        version = "-" if report.staging_version is None else f"v{report.staging_version}"
        say(
            self.query_one("#etl-detail", Static),
            f"staging {version} · {len(report.pending):,} pending · {len(report.expired):,} expired "
            "(4 and 5 list them)",
        )
