"""Topics: per topic and partition, Kafka watermarks, the lake's offset, lag, rate, dead letters."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline, Static

from engine.api import TopicSnapshot, TopicsReport
from zync_tui.console import format as fmt
from zync_tui.console.widgets.tables import LiveTable

COLUMNS = [
    ("topic", "topic"),
    ("p", "p"),
    ("dir", "dir"),
    ("low", "low"),
    ("high", "high"),
    ("lake", "lake"),
    ("lag", "lag"),
    ("lag_t", "lag t"),
    ("src", "src"),
    ("rate", "rate"),
    ("trend", "trend"),
    ("dead", "dead"),
]


#: Output envelopes as the ``dir`` column shows them (the detail line spells them out).
ENVELOPE_SHORT = {"jdbc": "jdbc", "differential": "diff", "materialize": "mz", "debezium": "dbz"}


def _high(t: TopicSnapshot) -> int | None:
    """The topic's end, in the unit of the ``lake`` column: for an input Kafka's high
    watermark; for an output the next pool offset to deliver (its last delivered + 1) —
    an output's own watermark counts the transactions' markers, not records."""
    if t.direction == "in":
        return t.high
    return None if t.delivered_offset is None else t.delivered_offset + 1


def _direction(t: TopicSnapshot) -> str:
    """``in``, or for an output the envelope it is delivered in (``jdbc``, ``dbz``...):
    narrow enough for 80 columns; the detail line spells it out."""
    if t.direction == "in" or t.envelope is None:
        return t.direction
    return ENVELOPE_SHORT.get(t.envelope, t.envelope)


class TopicsPanel(Vertical):
    """The Topics panel. ``d`` browses dead letters (an app binding)."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.report: TopicsReport | None = None

    def compose(self) -> ComposeResult:
        yield Static("waiting for the first snapshot…", id="topics-notice", classes="notice", markup=False)
        yield LiveTable(COLUMNS, id="topics-table")
        yield Static("", id="topics-detail", classes="detail", markup=False)
        yield Sparkline([], id="topics-spark")

    def show(self, report: TopicsReport) -> None:
        self.report = report
        notice = self.query_one("#topics-notice", Static)
        errors = list(report.errors)
        notice.update("\n".join(f"⚠ {e}" for e in errors) if errors else "")
        notice.set_class(bool(errors), "fault")
        notice.display = bool(errors) or not report.topics
        if not errors and not report.topics:
            notice.update("no topics yet: nothing in the lake and no ETL configuration inputs")
        rows = []
        for t in report.topics:
            key = f"{t.direction}:{t.topic}:{t.partition}"
            cells = (
                fmt.short(t.topic, 13),
                str(t.partition),
                _direction(t),
                fmt.num(t.low),
                fmt.num(_high(t)),
                fmt.num(t.lake_offset),
                fmt.num(t.lag_records),
                fmt.seconds(t.lag_seconds),
                fmt.seconds(t.source_lag_seconds),
                fmt.rate(t.rate),
                fmt.sparkline(t.history, 5),
                str(t.dead_letters),
            )
            sort = (t.topic, t.partition, t.direction, t.low, t.high, t.lake_offset, t.lag_records,
                    t.lag_seconds, t.source_lag_seconds, t.rate, sum(t.history[-8:]), t.dead_letters)
            rows.append((key, cells, sort))
        self.query_one(LiveTable).set_rows(rows)
        self.show_detail()

    def selected(self) -> TopicSnapshot | None:
        if self.report is None:
            return None
        key = self.query_one(LiveTable).highlighted_key()
        for t in self.report.topics:
            if f"{t.direction}:{t.topic}:{t.partition}" == key:
                return t
        return None

    def show_detail(self) -> None:
        t = self.selected()
        detail = self.query_one("#topics-detail", Static)
        spark = self.query_one("#topics-spark", Sparkline)
        if t is None:
            detail.update("")
            spark.data = []
            spark.display = False
            return
        if t.direction == "in":
            arrow = "→ lake pool"
        else:
            carried = f" ({t.staged})" if t.staged and t.staged != t.topic else ""
            arrow = f"in the {t.envelope} envelope ← staging pool{carried}"
        dead = f" · {t.dead_letters} dead letters (d to browse)" if t.dead_letters else " · no dead letters"
        text = f"{t.topic}[{t.partition}] {arrow} {t.pool} · rate {fmt.rate(t.rate)}{dead}"
        if t.direction != "in":
            text += (
                f"\nstaged up to pool offset {fmt.num(t.lake_offset)}, delivered up to "
                f"{fmt.num(t.delivered_offset)} · Kafka's high watermark {fmt.num(t.high)} "
                "(its transaction markers included)"
            )
        if t.error and (self.report is None or t.error not in self.report.errors):
            text += f"\n⚠ {t.error}"
        detail.update(text)
        spark.data = list(t.history)
        spark.display = any(v > 0 for v in t.history)  # a flat line says nothing

    def on_data_table_row_highlighted(self, event: LiveTable.RowHighlighted) -> None:
        self.show_detail()
