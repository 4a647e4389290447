"""Topics: per topic and partition, Kafka watermarks, the lake's offset, lag, rate, dead letters."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.widgets import Sparkline, Static

from engine.api import TopicSnapshot, TopicsReport
from zync_tui.console import format as fmt
from zync_tui.console.listing import Column, Row, Source
from zync_tui.console.widgets.filter_line import FilterLine
from zync_tui.console.widgets.table_panel import TablePanel
from zync_tui.console.widgets.tables import LiveTable
from zync_tui.console.widgets.text import say

COLUMNS = [
    Column("topic", "topic", 16),
    Column("p", "p", align=">"),
    Column("dir", "dir"),
    Column("low", "low", align=">"),
    Column("high", "high", align=">"),
    Column("lake", "lake", align=">"),
    Column("lag", "lag", align=">"),
    Column("lag_t", "lag t", align=">"),
    Column("src", "src", align=">"),
    Column("rate", "rate", align=">"),
    Column("trend", "trend"),
    Column("dead", "dead", align=">"),
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


def key(t: TopicSnapshot) -> str:
    return f"{t.direction}:{t.topic}:{t.partition}"


def rows(topics: Sequence[TopicSnapshot]) -> list[Row]:
    """The table's rows (made in the console's preparer thread)."""
    made = []
    for t in topics:
        cells = (
            fmt.middle(t.topic, 16),
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
        sort = (t.topic, t.partition, t.direction, t.low, _high(t), t.lake_offset, t.lag_records,
                t.lag_seconds, t.source_lag_seconds, t.rate, sum(t.history[-8:]), t.dead_letters)
        text = f"{t.topic} {t.partition} {t.direction} {t.envelope or ''} {t.pool or ''}"
        made.append(Row(key(t), cells, sort, text))
    return made


class TopicsPanel(TablePanel):
    """The Topics panel. ``d`` browses dead letters (an app binding)."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.report: TopicsReport | None = None
        self._by_key: dict[str, TopicSnapshot] | None = None

    def compose(self) -> ComposeResult:
        yield Static("waiting for the first snapshot…", id="topics-notice", classes="notice", markup=False)
        yield LiveTable(COLUMNS, noun="topic partitions", id="topics-table")
        yield FilterLine()
        yield Static("", id="topics-detail", classes="detail", markup=False)
        yield Sparkline([], id="topics-spark")

    def show(self, report: TopicsReport) -> None:
        self.report = report
        self._by_key = None
        topics = report.topics
        self.query_one(LiveTable).give(Source(lambda: rows(topics)))
        self.due()

    def present(self) -> None:
        if self.report is None:
            return
        notice = self.query_one("#topics-notice", Static)
        errors = list(self.report.errors)
        if errors:
            say(notice, "\n".join(f"⚠ {e}" for e in errors))
        elif not self.report.topics:
            say(notice, "no topics yet: nothing in the lake and no ETL configuration inputs")
        notice.set_class(bool(errors), "fault")
        notice.display = bool(errors) or not self.report.topics

    def selected(self) -> TopicSnapshot | None:
        if self.report is None:
            return None
        if self._by_key is None:
            self._by_key = {key(t): t for t in self.report.topics}
        return self._by_key.get(self.query_one(LiveTable).highlighted_key() or "")

    def show_detail(self) -> None:
        t = self.selected()
        detail = self.query_one("#topics-detail", Static)
        spark = self.query_one("#topics-spark", Sparkline)
        if t is None:
            say(detail, "")
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
        say(detail, text)
        spark.data = list(t.history)
        spark.display = any(v > 0 for v in t.history)  # a flat line says nothing

    def changed(self, table: LiveTable) -> None:
        self.show_detail()
