"""The operations console: one Textual app, built by :func:`make_app` for the CLI, the
demo and the tests.

All engine work runs in thread workers (``@work(thread=True, ...)``) that post past-tense
messages (:mod:`zync_tui.console.messages`); the event loop only updates widgets. The
app wires its parts and routes keys and messages to them: the main screen's widgets are
:mod:`zync_tui.console.layout`; the polls and what their snapshots show,
:mod:`zync_tui.console.snapshots` (each kind of poll re-arms itself when the previous one
has finished: :mod:`zync_tui.console.polls`); the control keys' work (loops, ETL pass,
demo batches), :mod:`zync_tui.console.control`. Keys are declared in
:mod:`zync_tui.console.keys`, the command palette's actions in
:mod:`zync_tui.console.palette`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Concatenate, ParamSpec

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from engine.api import one_line
from zync_tui.console import format as fmt
from zync_tui.console import keys
from zync_tui.console import messages as m
from zync_tui.console.backend import EngineBackend, EngineSettings
from zync_tui.console.control import Control
from zync_tui.console.heap import Heap
from zync_tui.console.hosted import EngineProcess
from zync_tui.console.keys import CONTROL_ACTIONS, ROUTED, TYPED, help_keys
from zync_tui.console.layout import MainLayout
from zync_tui.console.palette import console_commands
from zync_tui.console.remote import ApiBackend
from zync_tui.console.screens.deadletters import DeadLettersScreen
from zync_tui.console.screens.help import HelpScreen
from zync_tui.console.screens.record import RecordScreen
from zync_tui.console.snapshots import Snapshots
from zync_tui.console.views import Backend
from zync_tui.console.widgets.log import LogPanel
from zync_tui.console.widgets.panels import Panels
from zync_tui.console.widgets.records import RecordsPanel
from zync_tui.console.widgets.status import StatusBar

P = ParamSpec("P")


def _quiet(handler: Callable[Concatenate[ZyncConsole, P], None]) -> Callable[Concatenate[ZyncConsole, P], None]:
    """A message handler that does nothing once the main screen is gone (shutting down)."""

    def wrapper(self: ZyncConsole, /, *args: P.args, **kwargs: P.kwargs) -> None:
        try:
            handler(self, *args, **kwargs)
        except NoMatches:
            if self.is_running and self.screen_stack and self.screen_stack[0].is_attached:
                raise

    functools.update_wrapper(wrapper, handler)
    return wrapper


class ZyncConsole(App[None]):
    """The zync console. Build it with :func:`make_app`."""

    CSS_PATH = "app.tcss"
    TITLE = "zync"
    BINDINGS = keys.BINDINGS
    #: nothing takes the focus by itself: the keys go to the panel in view (only the
    #: filter, while typed, has the focus)
    AUTO_FOCUS = None

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
        self.heap = Heap()  # settled once the first snapshots are in
        self.main = MainLayout(self, clock)
        self._w = self.main.find
        self.snapshots = Snapshots(
            self, backend, self._w, heap=self.heap, interval=interval, log_interval=log_interval, clock=clock
        )
        self.polls = self.snapshots.schedule
        self.busy = self.polls.busy
        self.polled = self.polls.polled
        self.poll_count = self.polls.count
        self.control = Control(
            self, backend, self._w, ready=lambda: self.ready, refresh=self.action_refresh,
            busy=self.busy, clock=clock,
        )

    def compose(self) -> ComposeResult:
        yield from self.main.compose()  # zync_tui.console.layout

    def on_mount(self) -> None:
        self.title = self.backend.title
        self.main.mounted(self.backend)
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
        self.main.engine_started(self.backend, self.control.demo_note())
        self.polls.refresh()

    @_quiet
    def on_engine_failed(self, message: m.EngineFailed) -> None:
        self.main.engine_failed(message.error)
        self.notify(message.error, title="engine failed to start", severity="error", timeout=10)

    # -- polls (never overlapping): zync_tui.console.snapshots ------------------------------

    @_quiet
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Failures of any worker are shown, in words; polls re-arm whatever happened."""
        group = event.worker.group
        state = event.state
        if state not in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        error = one_line(event.worker.error) if event.worker.error else "failed"
        if group.startswith("poll-"):
            self.snapshots.ended(group.removeprefix("poll-"), error if state is WorkerState.ERROR else None)
        elif state is WorkerState.ERROR and group != "engine":
            self.main.log_error("console", f"{group}: {error}")
            self.notify(error, title=group, severity="error")

    @on(m.TopicsRefreshed)
    @on(m.LoopsRefreshed)
    @on(m.TablesRefreshed)
    @on(m.EtlRefreshed)
    @on(m.LogDrained)
    @_quiet
    def _snapshot_arrived(self, message: m.Snapshot) -> None:
        self.snapshots.show(message)

    # -- panels ---------------------------------------------------------------------------

    def action_panel(self, panel: str) -> None:
        self._w(Panels).show(panel)

    # the tables' keys go to the active table of the panel in view (tables take no focus)

    def action_filter(self) -> None:
        self._w(Panels).filter()

    def action_clear_filter(self) -> None:
        self._w(Panels).clear_filter()

    def action_sort(self, reverse: bool = False) -> None:
        self._w(Panels).table().cycle_sort(reverse)  # the line under the table says how

    def action_cursor(self, how: str, step: int) -> None:
        self._w(Panels).cursor(how, step)

    def action_select_row(self) -> None:
        self._w(Panels).table().select()

    def action_next_table(self) -> None:
        self._w(Panels).next_table(typing=isinstance(self.focused, Input))

    def on_records_panel_opened(self, message: RecordsPanel.Opened) -> None:
        r = message.record
        title = f"{r.status} record {r.topic}[{r.partition}]@{r.offset} · rule {r.rule}"
        self.push_screen(RecordScreen(title, dict(r.full_record)))

    def on_log_panel_opened(self, message: LogPanel.Opened) -> None:
        e = message.entry
        title = f"{e.severity} {e.source} at {fmt.clock(e.at)} UTC"
        self.push_screen(RecordScreen(title, {"source": e.source, "message": e.message}))

    def action_help(self) -> None:
        notes = "Read-only: start, stop and ETL passes are disabled." if self.backend.read_only else ""
        self.push_screen(HelpScreen(help_keys(read_only=self.backend.read_only, demo=self.backend.demo is not None), notes))

    def action_dead_letters(self) -> None:
        self.push_screen(DeadLettersScreen(self.backend))

    def action_refresh(self) -> None:
        if self.ready:
            self.polls.refresh()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Control actions do not exist in a read-only console; `n` only in the demo;
        while a filter is typed, its keys are letters (the footer does not offer them)."""
        if action in CONTROL_ACTIONS and self.backend.read_only:
            return False
        if action in TYPED and isinstance(self.focused, Input):
            return False
        if action in ROUTED and self.screen is not self.screen_stack[0]:
            return False
        return not (action == "next_batch" and self.backend.demo is None)

    # -- control (refused when read-only): zync_tui.console.control ------------------------

    @property
    def pass_running(self) -> bool:
        return self.control.pass_running

    @property
    def last_pass(self) -> str | None:
        return self.control.last_pass

    def action_toggle_loop(self, name: str) -> None:
        self.control.toggle(name)

    def action_start_all(self) -> None:
        self.control.all_loops("start")

    def action_stop_all(self) -> None:
        self.control.all_loops("stop")

    def action_etl_pass(self) -> None:
        self.control.etl_pass()

    def action_next_batch(self) -> None:
        self.control.next_batch()

    @_quiet
    def on_loop_changed(self, message: m.LoopChanged) -> None:
        self.control.loop_changed(message)

    @_quiet
    def on_etl_pass_finished(self, message: m.EtlPassFinished) -> None:
        self.control.pass_finished(message)

    @_quiet
    def on_batch_published(self, message: m.BatchPublished) -> None:
        self.control.batch_published(message)

    # -- command palette and shutdown ---------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from console_commands(self)

    async def action_quit(self) -> None:
        self._w(StatusBar).set_note("stopping the loops…")
        self.polls.stop()
        self.exit()

    def on_unmount(self) -> None:
        self.polls.stop()
        self.heap.thaw()


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
    in_process: bool = False,
    attach: list[str] | None = None,
    token: str | None = None,
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
    The engine runs in a child process the console starts and stops, below the screen's
    CPU priority (:class:`~zync_tui.console.hosted.EngineProcess`), and the console
    speaks its API (:class:`~zync_tui.console.remote.ApiBackend`); ``in_process``: in
    the console's own process instead (a test sharing its SparkSession). ``attach``:
    no engine of its own — the console shows running zync processes (Unix sockets or
    URLs; ``token`` for those over TCP).
    """
    if backend is None and attach:
        backend = ApiBackend(list(attach), token=token, read_only=read_only, clock=clock or time.time)
    if backend is None:
        settings = EngineSettings(
            config_path=Path(config) if config is not None else None,
            lake_root=lake,
            kafka_overrides=dict(kafka or {}),
            registry_overrides=dict(registry or {}),
            read_only=read_only,
            demo=demo,
            start_stack=start_stack,
            autostart=autostart,
            spark_master=spark_master,
            clock=clock or time.time,
        )
        if in_process:
            backend = EngineBackend(settings)
        else:
            hosted = EngineProcess(settings)
            backend = ApiBackend(
                [str(hosted.socket)], read_only=read_only, demo=demo, hosted=hosted,
                clock=clock or time.time,
            )  # fmt: skip
    return ZyncConsole(backend, interval=interval, clock=clock or time.time)
