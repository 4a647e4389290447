"""The engine's snapshots on the console's main screen: fetched by the polls, shown by
the panels.

Each kind of poll (topics, loops, ETL, log) fetches its snapshot in a thread worker of
the app (group ``poll-NAME``), which posts it as a past-tense message
(:mod:`zync_tui.console.messages`); the app hands the message back here to be shown: the
status bar's parts, the panels, and what went wrong as fault lines in the Log panel. When
to poll again is :class:`~zync_tui.console.polls.PollSchedule`'s.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import App

from engine.api import EtlReport, TopicsReport
from zync_tui.console import messages as m
from zync_tui.console.heap import Heap
from zync_tui.console.layout import ScreenWidgets
from zync_tui.console.polls import POLLS, PollSchedule
from zync_tui.console.views import Backend
from zync_tui.console.widgets.delta_tables import TablesSection
from zync_tui.console.widgets.etl import EtlPanel
from zync_tui.console.widgets.log import LogPanel
from zync_tui.console.widgets.loops import LoopsPanel
from zync_tui.console.widgets.records import RecordsPanel
from zync_tui.console.widgets.status import StatusBar
from zync_tui.console.widgets.topics import TopicsPanel


class Snapshots:
    """Polls the engine (never overlapping) and shows each snapshot that comes back."""

    def __init__(
        self,
        app: App[None],
        backend: Backend,
        widgets: ScreenWidgets,
        *,
        heap: Heap,
        interval: float,
        log_interval: float,
        clock: Callable[[], float],
    ) -> None:
        self.app = app
        self.backend = backend
        self.widgets = widgets
        self.heap = heap  # settled once every poll has delivered
        self.clock = clock
        self.schedule = PollSchedule(
            self._fetch,
            lambda delay, callback, name: app.set_timer(delay, callback, name=name),
            lambda: app.is_running,
            interval=interval,
            log_interval=log_interval,
        )
        self._shown: dict[str, object] = {}  # the last snapshot of each kind shown

    # -- fetching (in thread workers) -----------------------------------------------------

    def _fetch(self, poll: str) -> None:
        fetch = {"topics": self._topics, "loops": self._loops, "etl": self._etl, "log": self._log}[poll]
        self.app.run_worker(
            fetch, name=f"poll_{poll}", group=f"poll-{poll}", thread=True, exclusive=True, exit_on_error=False
        )

    def _topics(self) -> None:
        self.app.post_message(m.TopicsRefreshed(self.backend.topics()))

    def _loops(self) -> None:
        self.app.post_message(m.LoopsRefreshed(self.backend.loops()))
        self.app.post_message(m.TablesRefreshed(self.backend.tables()))

    def _etl(self) -> None:
        self.app.post_message(m.EtlRefreshed(self.backend.etl()))

    def _log(self) -> None:
        self.app.post_message(m.LogDrained(self.backend.drain_log()))

    def ended(self, poll: str, error: str | None) -> None:
        """``poll``'s worker ended (``error``: how it failed): the next one is armed."""
        if error is not None:
            self.fault(poll, f"{poll} snapshot failed: {error}")
        self.schedule.ended(poll)
        if set(POLLS) <= self.schedule.polled:
            self.heap.settle()
            self.app.call_after_refresh(self.heap.tidy)  # once what it brought is drawn

    # -- showing them (on the event loop) ---------------------------------------------------

    def fault(self, where: str, error: str | None) -> None:
        self.widgets(LogPanel).fault(where, error, self.clock())

    def show(self, message: m.Snapshot) -> None:
        """What ``message``'s snapshot says, on the panels and the status bar."""
        match message:
            case m.TopicsRefreshed(report):
                self._topics_shown(report)
            case m.LoopsRefreshed(loops):
                self.widgets(LoopsPanel).show(loops)
                for loop in loops:
                    self.fault(loop.name, f"{loop.name} failed: {loop.error}" if loop.state == "failed" else None)
            case m.TablesRefreshed(report):
                self.widgets(TablesSection).show(report)
                self.fault("tables", report.error)
            case m.EtlRefreshed(report):
                self._etl_shown(report)
            case m.LogDrained(entries):
                self.widgets(LogPanel).add(entries)

    def _topics_shown(self, report: TopicsReport) -> None:
        if report is self._shown.get("topics"):
            return  # the engine sent nothing new (engine/serve/client.py): nothing to redraw
        self._shown["topics"] = report
        self.widgets(TopicsPanel).show(report)
        status = self.widgets(StatusBar)
        status.set_part("Kafka", "DOWN" if report.kafka_error else "ok")
        status.set_part("registry", "DOWN" if report.registry_error else "ok")
        status.set_part("lake", "MISSING" if report.lake_error else "ok")
        self.fault("kafka", report.kafka_error)
        self.fault("registry", report.registry_error)
        self.fault("lake", report.lake_error)

    def _etl_shown(self, report: EtlReport) -> None:
        if report is self._shown.get("etl"):
            return  # nothing new
        self._shown["etl"] = report
        self.widgets(EtlPanel).show(report)
        self.widgets("#pending-panel", RecordsPanel).show(report.pending, report.error)
        self.widgets("#expired-panel", RecordsPanel).show(report.expired, report.error)
        self.fault("etl snapshot", report.error)
