"""ETL: per rule and input topic/partition — cursor, processed, pending, expired."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from engine.api import EtlReport
from zync_tui.console import format as fmt
from zync_tui.console.widgets.tables import LiveTable

COLUMNS = [
    ("rule", "rule"),
    ("topic", "input topic"),
    ("p", "p"),
    ("cursor", "cursor"),
    ("processed", "processed"),
    ("pending", "pending"),
    ("expired", "expired"),
]


class EtlPanel(Vertical):
    def compose(self) -> ComposeResult:
        yield Static("waiting for the first snapshot…", id="etl-notice", classes="notice", markup=False)
        yield LiveTable(COLUMNS, id="etl-table")
        yield Static("", id="etl-detail", classes="detail", markup=False)

    def show(self, report: EtlReport) -> None:
        notice = self.query_one("#etl-notice", Static)
        notice.update(f"⚠ {report.error}" if report.error else "")
        notice.set_class(bool(report.error), "fault")
        notice.display = bool(report.error)
        rows = []
        for r in report.rows:
            key = f"{r.etl}:{r.rule}:{r.topic}:{r.partition}"
            cells = (
                fmt.short(r.rule, 18),
                fmt.short(r.topic, 16),
                str(r.partition),
                fmt.num(r.cursor),
                fmt.num(r.processed),
                fmt.num(r.pending),
                fmt.num(r.expired),
            )
            rows.append((key, cells, (r.rule, r.topic, r.partition, r.cursor, r.processed, r.pending, r.expired)))
        self.query_one(LiveTable).set_rows(rows)
        version = "-" if report.staging_version is None else f"v{report.staging_version}"
        waiting = len(report.pending)
        gone = len(report.expired)
        self.query_one("#etl-detail", Static).update(
            f"staging {version} · {waiting} pending · {gone} expired (4 and 5 list them)"
        )
