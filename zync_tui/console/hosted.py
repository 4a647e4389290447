"""The console's engine in a child process the console owns, below the screen's priority.

The loops (from-kafka, the ETL, to-kafka, apply), the observer and Spark's Python side are
Python threads; in the console's process they share the interpreter lock and the cores
with the screen, and a key waits for them (bench/console_latency.py). :class:`EngineProcess`
runs :class:`~zync_tui.console.backend.EngineBackend` in a child process instead, at a
lower CPU priority (``nice`` :data:`ENGINE_NICENESS`, which the JVMs it starts inherit),
and forwards every :class:`~zync_tui.console.backend.Backend` call to it with the same
arguments and the same (picklable) results. The engine still gets every cycle the screen
does not want; when a key comes, the screen goes first.

The child is a :mod:`multiprocessing` manager's server (started with ``spawn``: no copy
of the console's threads): each console thread that calls gets its own connection and a
thread on the other side, so a long ETL pass does not hold up the polls. An error comes
back as :class:`EngineFailure` with the engine's message. The child stops its loops and
exits when :meth:`EngineProcess.close` says so, and by itself when the console's process
is gone (killed: nothing else would stop the loops and the demo's stack).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from multiprocessing.managers import BaseManager
from typing import Any, cast

from engine.api import DeadLetter, EtlReport, PassResult, TablesReport, TopicsReport
from zync_tui.console.backend import EngineBackend, EngineSettings, LogEntry, LoopView

#: How much lower the engine's CPU priority is than the console's (``nice``).
ENGINE_NICENESS = 10
#: How often the child looks whether the console's process is still there.
PARENT_CHECK = 1.0


class EngineFailure(RuntimeError):
    """An engine call failed in the engine's process; the message is the engine's."""


class _HostedEngine:
    """Lives in the child: the console's :class:`EngineBackend`, its errors made into
    :class:`EngineFailure` (an engine exception may not survive pickling)."""

    def __init__(self, settings: EngineSettings) -> None:
        self.engine = EngineBackend(settings)
        _LIVE.append(self)

    def start(self) -> tuple[list[str], str]:
        """The engine's notes and the title it chose (the configuration's name)."""
        notes = self.call("start")
        return cast("list[str]", notes), self.engine.title

    def call(self, method: str, *args: object) -> Any:
        try:
            return getattr(self.engine, method)(*args)
        except Exception as exc:  # noqa: BLE001 - sent back in words
            raise EngineFailure(str(exc).strip() or type(exc).__name__) from None

    def close(self) -> None:
        if self in _LIVE:
            _LIVE.remove(self)
        self.engine.close()


#: The engines of this (child) process, for the watch on the console's process.
_LIVE: list[_HostedEngine] = []


def _set_up_child(parent: int) -> None:
    """In the child, before it serves: lower its priority, and stop the engines and
    exit once the console's process is gone."""
    with contextlib.suppress(OSError):  # not allowed here: the same priority, then
        os.nice(ENGINE_NICENESS)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK)
        for hosted in list(_LIVE):
            with contextlib.suppress(Exception):  # exiting anyway
                hosted.close()
        os._exit(0)

    threading.Thread(target=watch, name="zync-console-watch", daemon=True).start()


class _Engines(BaseManager):
    """The child process's server."""


_Engines.register("Engine", _HostedEngine)


class EngineProcess:
    """A :class:`~zync_tui.console.backend.Backend` whose engine runs in a child process."""

    def __init__(self, settings: EngineSettings) -> None:
        self.read_only = settings.read_only
        self.demo = settings.demo
        self.title = "zync demo" if settings.demo else "zync"
        self._settings = settings
        self._closed = False
        self._engine: Any = None
        # the child is started here, before the app runs: Textual replaces sys.stdout and
        # sys.stderr while it runs, and multiprocessing passes their descriptors on
        self._manager = _Engines(ctx=multiprocessing.get_context("spawn"))
        self._manager.start(initializer=_set_up_child, initargs=(os.getpid(),))
        # the server's process: BaseManager keeps it, without a public name
        self._process: multiprocessing.process.BaseProcess = self._manager._process  # type: ignore[attr-defined]
        self.pid = self._process.pid

    def start(self) -> list[str]:
        """Set the engine up in its process, as :meth:`EngineBackend.start` does."""
        if self._closed:
            raise EngineFailure("the engine has been stopped")
        if self._engine is None:
            try:
                self._engine = self._manager.Engine(self._settings)  # type: ignore[attr-defined]  # registered above
            except (OSError, EOFError) as exc:
                raise EngineFailure(f"cannot reach the engine's process: {exc}") from None
        notes, self.title = self._engine.start()
        return cast("list[str]", notes)

    def _call(self, method: str, *args: object) -> Any:
        if self._engine is None:
            raise EngineFailure("the engine is not set up yet")
        if self._closed:
            raise EngineFailure("the engine has been stopped")
        try:
            return self._engine.call(method, *args)
        except (OSError, EOFError) as exc:  # the pipe to the child
            if self.running_child():
                raise EngineFailure(f"cannot reach the engine's process: {exc}") from None
            raise EngineFailure(
                f"the engine's process has ended (exit code {self._process.exitcode}); its "
                "output is in the console's log"
            ) from None

    def topics(self) -> TopicsReport:
        return cast("TopicsReport", self._call("topics"))

    def etl(self) -> EtlReport:
        return cast("EtlReport", self._call("etl"))

    def loops(self) -> list[LoopView]:
        return cast("list[LoopView]", self._call("loops"))

    def tables(self) -> TablesReport:
        return cast("TablesReport", self._call("tables"))

    def dead_letters(self) -> list[DeadLetter]:
        return cast("list[DeadLetter]", self._call("dead_letters"))

    def start_loop(self, name: str) -> None:
        self._call("start_loop", name)

    def stop_loop(self, name: str) -> None:
        self._call("stop_loop", name)

    def run_etl_pass(self) -> PassResult:
        return cast("PassResult", self._call("run_etl_pass"))

    def next_batch(self) -> str:
        return cast("str", self._call("next_batch"))

    def batches_left(self) -> int:
        return cast("int", self._call("batches_left"))

    def batches_total(self) -> int:
        return cast("int", self._call("batches_total"))

    def drain_log(self) -> list[LogEntry]:
        return cast("list[LogEntry]", self._call("drain_log"))

    def running_child(self) -> bool:
        """Whether the engine's process is there."""
        return bool(self._process.is_alive())

    def close(self) -> None:
        """Stop the loops (each finishes its commit in flight), then the child."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._engine is not None and self.running_child():
                with contextlib.suppress(Exception):  # the child is stopped below either way
                    self._engine.close()
        finally:
            self._manager.shutdown()
