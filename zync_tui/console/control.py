"""What the console's control keys do to the engine: start or stop a loop, run one ETL
pass now, publish the demo's next batch.

Each runs in a thread worker of the app (never in the event loop) and ends with a
past-tense message (:mod:`zync_tui.console.messages`), which the app hands back here to
be shown. One ETL pass and one demo batch at a time; a read-only console refuses every
control, in words.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable

from textual.app import App
from textual.css.query import NoMatches
from textual.timer import Timer

from engine.api import one_line
from zync_tui.console import messages as m
from zync_tui.console.layout import ScreenWidgets
from zync_tui.console.views import LOOP_TITLES, LOOPS, Backend, LogEntry, pass_outcome
from zync_tui.console.widgets.log import LogPanel
from zync_tui.console.widgets.loops import LoopsPanel
from zync_tui.console.widgets.status import StatusBar


class Control:
    """The control keys' work (loops, ETL pass, demo batches) and what is shown of it."""

    def __init__(
        self,
        app: App[None],
        backend: Backend,
        widgets: ScreenWidgets,
        *,
        ready: Callable[[], bool],
        refresh: Callable[[], None],
        busy: set[str],
        clock: Callable[[], float],
    ) -> None:
        self.app = app
        self.backend = backend
        self.widgets = widgets
        self._ready = ready
        self._refresh = refresh
        self.busy = busy  # "demo" while a batch is being published
        self.clock = clock
        self.pass_running = False
        self.last_pass: str | None = None
        self._pass_started = 0.0
        self._pass_timer: Timer | None = None

    def _refused(self, what: str) -> bool:
        if self.backend.read_only:
            reason = getattr(self.backend, "read_only_reason", None)
            why = f" ({reason})" if reason else ""
            self.app.notify(f"read-only console{why}: {what} is disabled", severity="warning")
            return True
        return False

    def _log_error(self, source: str, message: str) -> None:
        self.widgets(LogPanel).add([LogEntry(self.clock(), "ERROR", source, message)])

    # -- loops ----------------------------------------------------------------------------

    def toggle(self, name: str) -> None:
        """Stop the loop when it runs (or starts), else start it."""
        if self._refused(f"starting or stopping {name}"):
            return
        loop = next((loop for loop in self.widgets(LoopsPanel).loops if loop.name == name), None)
        action: m.LoopAction = "stop" if loop is not None and loop.state in ("running", "starting") else "start"
        self.loop(name, action)

    def all_loops(self, action: m.LoopAction) -> None:
        if not self._refused(f"{'starting' if action == 'start' else 'stopping'} loops"):
            shown = [loop.name for loop in self.widgets(LoopsPanel).loops]
            for name in shown or LOOPS:  # apply too, when the pipeline has it
                self.loop(name, action)

    def loop(self, name: str, action: m.LoopAction) -> None:
        self.app.notify(f"{action}ing {LOOP_TITLES.get(name, name)}…", timeout=2)
        work = functools.partial(self._control, name, action)
        self.app.run_worker(work, thread=True, exit_on_error=False, group="control")

    def _control(self, name: str, action: m.LoopAction) -> None:
        try:
            if action == "start":
                self.backend.start_loop(name)
            else:
                self.backend.stop_loop(name)
        except Exception as exc:  # noqa: BLE001 - shown in words
            self.app.post_message(m.LoopChanged(name, action, one_line(exc)))
            return
        self.app.post_message(m.LoopChanged(name, action))

    def loop_changed(self, message: m.LoopChanged) -> None:
        title = LOOP_TITLES.get(message.loop, message.loop)
        if message.error:
            self.app.notify(message.error, title=f"cannot {message.action} {title}", severity="error")
            self._log_error(message.loop, f"{message.action}: {message.error}")
        else:
            self.app.notify(f"{title} {'started' if message.action == 'start' else 'stopped'}", timeout=2)
        self._refresh()

    # -- the ETL pass -----------------------------------------------------------------------

    def etl_pass(self) -> None:
        """Run one ETL pass now (refused while one runs); its time shows while it runs."""
        if self._refused("running an ETL pass"):
            return
        if not self._ready():
            self.app.notify("the engine is still starting", severity="warning")
            return
        if self.pass_running:
            self.app.notify("an ETL pass is already running", severity="warning")
            return
        self.pass_running = True
        self._pass_started = time.monotonic()
        self.widgets(LoopsPanel).show_pass("ETL pass: running…")
        self._pass_timer = self.app.set_interval(1.0, self._tick_pass, name="pass-elapsed")
        self.app.run_worker(self._run_pass, thread=True, exclusive=True, exit_on_error=False, group="etl-pass")

    def _tick_pass(self) -> None:
        elapsed = time.monotonic() - self._pass_started
        with contextlib.suppress(NoMatches):  # the app is closing: nothing to show it on
            self.widgets(LoopsPanel).show_pass(f"ETL pass: running… {elapsed:.0f}s")

    def _run_pass(self) -> None:
        started = time.monotonic()
        self.app.post_message(m.EtlPassStarted())
        try:
            result = self.backend.run_etl_pass()
        except Exception as exc:  # noqa: BLE001 - shown in words
            self.app.post_message(m.EtlPassFinished(error=one_line(exc), seconds=time.monotonic() - started))
            return
        self.app.post_message(m.EtlPassFinished(result, seconds=time.monotonic() - started))

    def pass_finished(self, message: m.EtlPassFinished) -> None:
        self.pass_running = False
        if self._pass_timer is not None:
            self._pass_timer.stop()
            self._pass_timer = None
        if message.error:
            text = f"ETL pass failed: {message.error}"
            self.app.notify(message.error, title="ETL pass failed", severity="error")
        else:
            summary = pass_outcome(message.result).summary()
            text = f"ETL pass: {summary} ({message.seconds:.1f}s)"
            self.app.notify(summary, title="ETL pass done")
        self.last_pass = text
        self.widgets(LoopsPanel).show_pass(text)
        self._refresh()

    # -- the demo -------------------------------------------------------------------------

    def demo_note(self) -> str:
        """What `n` does next, for the status bar (empty outside the demo)."""
        demo = self.backend.demo
        if demo is None:
            return ""
        left = demo.batches_left()
        total = demo.batches_total()
        return f"n: send batch {total - left + 1}/{total}" if left else "all batches sent"

    def next_batch(self) -> None:
        """Publish the demo's next batch (one at a time)."""
        demo = self.backend.demo
        if demo is None:
            return
        if not self._ready():
            self.app.notify("the demo is still starting", severity="warning")
            return
        if "demo" in self.busy:
            self.app.notify("still publishing the previous batch", severity="warning")
            return
        if not demo.batches_left():
            self.app.notify("all demo batches are published")
            return
        self.busy.add("demo")
        self.widgets(StatusBar).set_note("publishing…")
        self.app.run_worker(self._publish, thread=True, exclusive=True, exit_on_error=False, group="demo")

    def _publish(self) -> None:
        try:
            demo = self.backend.demo
            if demo is None:
                raise RuntimeError("not a demo: there are no batches to publish")
            text = demo.next_batch()
        except Exception as exc:  # noqa: BLE001 - shown in words
            self.app.post_message(m.BatchPublished("", one_line(exc)))
            return
        self.app.post_message(m.BatchPublished(text))

    def batch_published(self, message: m.BatchPublished) -> None:
        self.busy.discard("demo")
        self.widgets(StatusBar).set_note(self.demo_note())
        if message.error:
            self.app.notify(message.error, title="cannot publish the batch", severity="error")
        else:
            self.app.notify(message.text, title="demo")
        self._refresh()
