"""The operations console: one Textual app, built by :func:`make_app` for the CLI, the
demo and the tests.

All engine work runs in thread workers (``@work(thread=True, ...)``) that post past-tense
messages (:mod:`zync_tui.console.messages`); the event loop only updates widgets. Each
kind of poll (topics, loops, ETL, log) re-arms itself when the previous one has finished
(:mod:`zync_tui.console.polls`). Keys are declared in :mod:`zync_tui.console.keys`, the
command palette's actions in :mod:`zync_tui.console.palette`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar, overload

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Footer, TabPane
from textual.worker import Worker, WorkerState

from engine.api import one_line
from zync_tui.console import keys
from zync_tui.console import messages as m
from zync_tui.console.backend import (
    LOOP_TITLES,
    LOOPS,
    Backend,
    EngineBackend,
    EngineSettings,
    LogEntry,
    pass_outcome,
)
from zync_tui.console.keys import CONTROL_ACTIONS, KEYS, PANEL_TITLES, applies
from zync_tui.console.palette import console_commands
from zync_tui.console.polls import PollSchedule
from zync_tui.console.screens.deadletters import DeadLettersScreen
from zync_tui.console.screens.help import HelpScreen
from zync_tui.console.screens.record import RecordScreen
from zync_tui.console.widgets.etl import EtlPanel
from zync_tui.console.widgets.log import LogPanel
from zync_tui.console.widgets.loops import LoopsPanel
from zync_tui.console.widgets.panels import Panels
from zync_tui.console.widgets.records import RecordsPanel
from zync_tui.console.widgets.status import StatusBar
from zync_tui.console.widgets.topics import TopicsPanel

P = ParamSpec("P")
W = TypeVar("W", bound=Widget)


def _quiet(handler: Callable[Concatenate[ZyncConsole, P], None]) -> Callable[Concatenate[ZyncConsole, P], None]:
    """A message handler that does nothing once the main screen is gone (shutting down)."""

    @functools.wraps(handler)
    def wrapper(self: ZyncConsole, *args: P.args, **kwargs: P.kwargs) -> None:
        try:
            handler(self, *args, **kwargs)
        except NoMatches:
            if self.is_running and self.screen_stack and self.screen_stack[0].is_attached:
                raise

    return wrapper


class ZyncConsole(App[None]):
    """The zync console. Build it with :func:`make_app`."""

    CSS_PATH = "app.tcss"
    TITLE = "zync"
    BINDINGS = keys.BINDINGS

    def __init__(
        self,
        backend: Backend,
        *,
        interval: float = 1.0,
        log_interval: float = 0.5,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.clock = clock
        self.interval = interval
        self.log_interval = log_interval
        self.ready = False
        self.polls = PollSchedule(
            self._run_poll,
            lambda delay, callback, name: self.set_timer(delay, callback, name=name),
            lambda: self.is_running,
            interval=interval,
            log_interval=log_interval,
        )
        self.busy = self.polls.busy
        self.polled = self.polls.polled
        self.poll_count = self.polls.count
        self.pass_running = False
        self._pass_started = 0.0
        self._pass_timer: Timer | None = None
        self.last_pass: str | None = None

    # -- layout -------------------------------------------------------------------------

    @overload
    def _w(self, selector: type[W]) -> W: ...
    @overload
    def _w(self, selector: str, expect_type: type[W]) -> W: ...
    @overload
    def _w(self, selector: str) -> Widget: ...

    def _w(self, selector: str | type[W], expect_type: type[W] | None = None) -> Widget:
        """A widget of the main screen (also while a modal screen is on top)."""
        if not self.screen_stack:
            raise NoMatches(f"no screen: {selector}")
        base = self.screen_stack[0]
        if isinstance(selector, str) and expect_type is not None:
            return base.query_one(selector, expect_type)
        return base.query_one(selector)

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Panels(id="panels", initial="topics"):
            with TabPane(PANEL_TITLES["topics"], id="topics"):
                yield TopicsPanel(id="topics-panel")
            with TabPane(PANEL_TITLES["loops"], id="loops"):
                yield LoopsPanel(id="loops-panel")
            with TabPane(PANEL_TITLES["etl"], id="etl"):
                yield EtlPanel(id="etl-panel")
            with TabPane(PANEL_TITLES["pending"], id="pending"):
                yield RecordsPanel("pending", id="pending-panel")
            with TabPane(PANEL_TITLES["expired"], id="expired"):
                yield RecordsPanel("expired", id="expired-panel")
            with TabPane(PANEL_TITLES["log"], id="log"):
                yield LogPanel(id="log-panel")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.title = self.backend.title
        status = self._w(StatusBar)
        status.set_title(self.backend.title, self.backend.read_only)
        status.set_note("starting the engine…")
        self._w(LoopsPanel).set_read_only(self.backend.read_only)
        self._w(Panels).focus_table("topics")
        self.set_up_engine()

    # -- engine set-up ------------------------------------------------------------------

    @work(thread=True, exclusive=True, exit_on_error=False, group="engine")
    def set_up_engine(self) -> None:
        try:
            notes = self.backend.start()
        except Exception as exc:  # noqa: BLE001 - shown, never a crash
            self.post_message(m.EngineFailed(one_line(exc)))
            return
        self.post_message(m.EngineStarted(notes))

    @_quiet
    def on_engine_started(self, message: m.EngineStarted) -> None:
        self.ready = True
        self.title = self.backend.title
        status = self._w(StatusBar)
        status.set_title(self.backend.title, self.backend.read_only)
        status.set_note(self._demo_note())
        self.polls.refresh()

    @_quiet
    def on_engine_failed(self, message: m.EngineFailed) -> None:
        self._w(StatusBar).set_note(f"engine failed to start: {message.error}")
        self._w(LogPanel).add([_entry("ERROR", "console", f"engine failed to start: {message.error}", self.clock())])
        self.notify(message.error, title="engine failed to start", severity="error", timeout=10)

    def _demo_note(self) -> str:
        if not self.backend.demo:
            return ""
        left = self.backend.batches_left()
        total = self.backend.batches_total()
        return f"n: send batch {total - left + 1}/{total}" if left else "all batches sent"

    # -- polls (never overlapping) --------------------------------------------------------

    def _run_poll(self, poll: str) -> None:
        {"topics": self.poll_topics, "loops": self.poll_loops, "etl": self.poll_etl, "log": self.poll_log}[poll]()

    @work(thread=True, exclusive=True, exit_on_error=False, group="poll-topics")
    def poll_topics(self) -> None:
        self.post_message(m.TopicsRefreshed(self.backend.topics()))

    @work(thread=True, exclusive=True, exit_on_error=False, group="poll-loops")
    def poll_loops(self) -> None:
        self.post_message(m.LoopsRefreshed(self.backend.loops()))

    @work(thread=True, exclusive=True, exit_on_error=False, group="poll-etl")
    def poll_etl(self) -> None:
        self.post_message(m.EtlRefreshed(self.backend.etl()))

    @work(thread=True, exclusive=True, exit_on_error=False, group="poll-log")
    def poll_log(self) -> None:
        self.post_message(m.LogDrained(self.backend.drain_log()))

    @_quiet
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Failures of any worker are shown, in words; polls re-arm whatever happened."""
        group = event.worker.group
        state = event.state
        if state not in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        error = one_line(event.worker.error) if event.worker.error else "failed"
        if group.startswith("poll-"):
            poll = group.removeprefix("poll-")
            if state is WorkerState.ERROR:
                self._fault(poll, f"{poll} snapshot failed: {error}")
            self.polls.ended(poll)
        elif state is WorkerState.ERROR and group != "engine":
            self._w(LogPanel).add([_entry("ERROR", "console", f"{group}: {error}", self.clock())])
            self.notify(error, title=group, severity="error")

    def _fault(self, where: str, error: str | None) -> None:
        self._w(LogPanel).fault(where, error, self.clock())

    @_quiet
    def on_topics_refreshed(self, message: m.TopicsRefreshed) -> None:
        report = message.report
        self._w(TopicsPanel).show(report)
        status = self._w(StatusBar)
        status.set_part("Kafka", "DOWN" if report.kafka_error else "ok")
        status.set_part("registry", "DOWN" if report.registry_error else "ok")
        status.set_part("lake", "MISSING" if report.lake_error else "ok")
        self._fault("kafka", report.kafka_error)
        self._fault("registry", report.registry_error)
        self._fault("lake", report.lake_error)

    @_quiet
    def on_loops_refreshed(self, message: m.LoopsRefreshed) -> None:
        self._w(LoopsPanel).show(message.loops)
        for loop in message.loops:
            self._fault(loop.name, f"{loop.name} failed: {loop.error}" if loop.state == "failed" else None)

    @_quiet
    def on_etl_refreshed(self, message: m.EtlRefreshed) -> None:
        report = message.report
        self._w(EtlPanel).show(report)
        self._w("#pending-panel", RecordsPanel).show(list(report.pending), report.error)
        self._w("#expired-panel", RecordsPanel).show(list(report.expired), report.error)
        self._fault("etl snapshot", report.error)

    @_quiet
    def on_log_drained(self, message: m.LogDrained) -> None:
        self._w(LogPanel).add(message.entries)

    # -- panels ---------------------------------------------------------------------------

    def action_panel(self, panel: str) -> None:
        self._w(Panels).show(panel)

    def action_filter(self) -> None:
        panel = self._w(Panels).records_panel()
        if panel is None:
            self.notify("/ filters the Pending and Expired tables (4, 5)")
            return
        panel.focus_filter()

    def action_clear_filter(self) -> None:
        panel = self._w(Panels).records_panel()
        if panel is not None:
            panel.clear_filter()

    def action_sort(self, reverse: bool = False) -> None:
        self.notify(self._w(Panels).sort(reverse), timeout=2)

    def on_records_panel_opened(self, message: RecordsPanel.Opened) -> None:
        r = message.record
        title = f"{r.status} record {r.topic}[{r.partition}]@{r.offset} · rule {r.rule}"
        self.push_screen(RecordScreen(title, dict(r.envelope)))

    def action_help(self) -> None:
        notes = "Read-only: start, stop and ETL passes are disabled." if self.backend.read_only else ""
        shown = [
            (k.where, k.key, k.what)
            for k in KEYS
            if applies(k, read_only=self.backend.read_only, demo=self.backend.demo)
        ]
        self.push_screen(HelpScreen(shown, notes))

    def action_dead_letters(self) -> None:
        self.push_screen(DeadLettersScreen(self.backend))

    def action_refresh(self) -> None:
        if self.ready:
            self.polls.refresh()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Control actions do not exist in a read-only console; `n` only in the demo."""
        if action in CONTROL_ACTIONS and self.backend.read_only:
            return False
        return not (action == "next_batch" and not self.backend.demo)

    # -- control (refused when read-only) -------------------------------------------------

    def _refuse_read_only(self, what: str) -> bool:
        if self.backend.read_only:
            self.notify(f"read-only console: {what} is disabled", severity="warning")
            return True
        return False

    def action_toggle_loop(self, name: str) -> None:
        if self._refuse_read_only(f"starting or stopping {name}"):
            return
        loops = self._w(LoopsPanel).loops
        loop = next((loop for loop in loops if loop.name == name), None)
        action: m.LoopAction = "stop" if loop is not None and loop.state in ("running", "starting") else "start"
        self.control_loop(name, action)

    def action_start_all(self) -> None:
        if not self._refuse_read_only("starting loops"):
            for name in LOOPS:
                self.control_loop(name, "start")

    def action_stop_all(self) -> None:
        if not self._refuse_read_only("stopping loops"):
            for name in LOOPS:
                self.control_loop(name, "stop")

    def control_loop(self, name: str, action: m.LoopAction) -> None:
        self.notify(f"{action}ing {LOOP_TITLES.get(name, name)}…", timeout=2)
        self._control(name, action)

    @work(thread=True, exit_on_error=False, group="control")
    def _control(self, name: str, action: m.LoopAction) -> None:
        try:
            if action == "start":
                self.backend.start_loop(name)
            else:
                self.backend.stop_loop(name)
        except Exception as exc:  # noqa: BLE001 - shown in words
            self.post_message(m.LoopChanged(name, action, one_line(exc)))
            return
        self.post_message(m.LoopChanged(name, action))

    @_quiet
    def on_loop_changed(self, message: m.LoopChanged) -> None:
        title = LOOP_TITLES.get(message.loop, message.loop)
        if message.error:
            self.notify(message.error, title=f"cannot {message.action} {title}", severity="error")
            self._w(LogPanel).add([_entry("ERROR", message.loop, f"{message.action}: {message.error}", self.clock())])
        else:
            self.notify(f"{title} {'started' if message.action == 'start' else 'stopped'}", timeout=2)
        self.action_refresh()

    def action_etl_pass(self) -> None:
        if self._refuse_read_only("running an ETL pass"):
            return
        if not self.ready:
            self.notify("the engine is still starting", severity="warning")
            return
        if self.pass_running:
            self.notify("an ETL pass is already running", severity="warning")
            return
        self.pass_running = True
        self._pass_started = time.monotonic()
        self._w(LoopsPanel).show_pass("ETL pass: running…")
        self._pass_timer = self.set_interval(1.0, self._tick_pass, name="pass-elapsed")
        self.run_etl_pass()

    @_quiet
    def _tick_pass(self) -> None:
        elapsed = time.monotonic() - self._pass_started
        self._w(LoopsPanel).show_pass(f"ETL pass: running… {elapsed:.0f}s")

    @work(thread=True, exclusive=True, exit_on_error=False, group="etl-pass")
    def run_etl_pass(self) -> None:
        started = time.monotonic()
        self.post_message(m.EtlPassStarted())
        try:
            result = self.backend.run_etl_pass()
        except Exception as exc:  # noqa: BLE001 - shown in words
            self.post_message(m.EtlPassFinished(error=one_line(exc), seconds=time.monotonic() - started))
            return
        self.post_message(m.EtlPassFinished(result, seconds=time.monotonic() - started))

    @_quiet
    def on_etl_pass_finished(self, message: m.EtlPassFinished) -> None:
        self.pass_running = False
        if self._pass_timer is not None:
            self._pass_timer.stop()
            self._pass_timer = None
        if message.error:
            text = f"ETL pass failed: {message.error}"
            self.notify(message.error, title="ETL pass failed", severity="error")
        else:
            summary = pass_outcome(message.result).summary()
            text = f"ETL pass: {summary} ({message.seconds:.1f}s)"
            self.notify(summary, title="ETL pass done")
        self.last_pass = text
        self._w(LoopsPanel).show_pass(text)
        self.action_refresh()

    # -- the demo -------------------------------------------------------------------------

    def action_next_batch(self) -> None:
        if not self.backend.demo:
            return
        if not self.ready:
            self.notify("the demo is still starting", severity="warning")
            return
        if "demo" in self.busy:
            self.notify("still publishing the previous batch", severity="warning")
            return
        if not self.backend.batches_left():
            self.notify("all demo batches are published")
            return
        self.busy.add("demo")
        self._w(StatusBar).set_note("publishing…")
        self.publish_batch()

    @work(thread=True, exclusive=True, exit_on_error=False, group="demo")
    def publish_batch(self) -> None:
        try:
            text = self.backend.next_batch()
        except Exception as exc:  # noqa: BLE001 - shown in words
            self.post_message(m.BatchPublished("", one_line(exc)))
            return
        self.post_message(m.BatchPublished(text))

    @_quiet
    def on_batch_published(self, message: m.BatchPublished) -> None:
        self.busy.discard("demo")
        self._w(StatusBar).set_note(self._demo_note())
        if message.error:
            self.notify(message.error, title="cannot publish the batch", severity="error")
        else:
            self.notify(message.text, title="demo")
        self.action_refresh()

    # -- command palette and shutdown ---------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from console_commands(self)

    async def action_quit(self) -> None:
        self._w(StatusBar).set_note("stopping the loops…")
        self.polls.stop()
        self.exit()

    def on_unmount(self) -> None:
        self.polls.stop()


def _entry(severity: str, source: str, message: str, at: float | None = None) -> LogEntry:
    return LogEntry(time.time() if at is None else at, severity, source, message)


def make_app(
    config: str | Path | None = None,
    *,
    lake: str | Path | None = None,
    read_only: bool = False,
    demo: bool = False,
    kafka: Mapping[str, object] | None = None,
    registry: Mapping[str, object] | None = None,
    start_stack: bool = True,
    autostart: bool = True,
    spark_master: str | None = None,
    backend: Backend | None = None,
    interval: float = 1.0,
    clock: Callable[[], float] | None = None,
) -> ZyncConsole:
    """The console, wired to the engine: the one factory for the CLI, the demo and the tests.

    ``config``: an ETL configuration (its inputs, outputs and loops are shown; None shows
    what the lake holds). ``lake``: the lake root (default ``$ZYNC_LAKE`` or
    ``~/.zync/lake``). ``kafka``/``registry``: profile overrides (``bootstrap_servers``,
    ``url``…) on top of ``~/.zync``. ``demo``: the invoice scenario (``start_stack=False``
    uses the configured broker and registry instead of starting the embedded ones).
    ``autostart``: start the loops once the engine is set up (never when ``read_only``).
    ``spark_master``: where Spark work runs (default: ``$ZYNC_SPARK_MASTER``,
    ``~/.zync/spark.json``, else ``local[*]``).
    ``backend``: a ready-made backend (tests); the other engine arguments are then ignored.
    """
    if backend is None:
        settings = EngineSettings(
            config_path=Path(config) if config is not None else None,
            lake_root=Path(lake) if lake is not None else None,
            kafka_overrides=dict(kafka or {}),
            registry_overrides=dict(registry or {}),
            read_only=read_only,
            demo=demo,
            start_stack=start_stack,
            autostart=autostart,
            spark_master=spark_master,
            clock=clock or time.time,
        )
        backend = EngineBackend(settings)
    return ZyncConsole(backend, interval=interval, clock=clock or time.time)
