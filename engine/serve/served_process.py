"""What one process serves: its pipeline's name, its loops, an observer for the console's
snapshots, the demo's controls when it runs the demo, and what it said (journals).

:class:`ServedProcess` is all the API knows of a process: ``zync run`` gives it a
pipeline's services, ``zync from-kafka`` and ``zync to-kafka`` one service each, the
console's engine its pipeline, observer and demo. Loops are looked up by name when asked
(the console's engine builds its pipeline after the API is up). The observer's snapshots
are taken on demand and kept :data:`SNAPSHOT_AGE` seconds, one at a time per kind, so
many readers cost what one does.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from engine.serve.health import WEDGED_AFTER, LoopFacts, gather
from engine.serve.journal import Journal, JournalHandler

if TYPE_CHECKING:
    from engine.etl.result import PassResult
    from engine.observe.observer import Observer
    from engine.observe.reports import DeadLetter, EtlReport, TopicsReport
    from engine.observe.tables_view import TablesReport
    from engine.services.service import Service, ServiceDetail

#: Seconds an observer snapshot is served again before a new one is taken.
SNAPSHOT_AGE = 1.0

T = TypeVar("T")


class DemoControls(Protocol):
    """The invoice demo's controls (``zync demo``): publish the next batch."""

    def next_batch(self) -> str: ...
    def batches_left(self) -> int: ...
    def batches_total(self) -> int: ...


class ControlError(Exception):
    """A control request that cannot be done: ``status`` (404, 409) and one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Kept:
    """One kind of snapshot, taken by one caller at a time and kept a moment."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.at = 0.0
        self.value: Any = None


class ServedProcess:
    """What the API of one process serves (see the module's docstring)."""

    def __init__(
        self,
        pipeline: str,
        role: str,
        *,
        loops: Callable[[], Mapping[str, Service[ServiceDetail]]],
        observer: Callable[[], Observer | None] | None = None,
        listings: bool = False,
        demo: Callable[[], DemoControls | None] | None = None,
        wedged_after: float = WEDGED_AFTER,
        control_note: Callable[[], str | None] | None = None,
        setup: Callable[[], Mapping[str, Any]] | None = None,
        note: Callable[[], str | None] | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.role = role
        self._loops = loops
        self._observer = observer or (lambda: None)
        self.listings = listings
        self._demo = demo or (lambda: None)
        self.wedged_after = wedged_after
        #: why this process refuses control, if it does (a read-only console's engine)
        self.control_note = control_note or (lambda: None)
        #: how the process's own set-up goes (the console's engine: state, notes, error)
        self.setup = setup or (lambda: {"state": "done", "notes": [], "error": None})
        #: why loops are missing, if they are (no configuration, no Kafka profile, ...)
        self.note = note or (lambda: None)
        self.started_at = time.time()
        self.pid = os.getpid()
        self.host = socket.gethostname()
        self.events = Journal()
        self.log = Journal()
        self._handler = JournalHandler(self.log)
        self._seen: dict[int, Service[ServiceDetail]] = {}
        self._hooks: list[Callable[[Service[ServiceDetail]], None]] = []
        self._kept: dict[str, _Kept] = {}
        self._lock = threading.Lock()
        self._asked_pass = threading.Lock()

    # -- what runs here -------------------------------------------------------------------

    def loops(self) -> Mapping[str, Service[ServiceDetail]]:
        found = self._loops()
        new = []
        with self._lock:
            for service in found.values():  # a loop built late: its events too
                if id(service) not in self._seen:
                    self._seen[id(service)] = service
                    new.append(service)
            hooks = list(self._hooks)
        for service in new:
            service.add_listener(self.events.event)
            for hook in hooks:
                hook(service)
        return found

    def on_loop(self, hook: Callable[[Service[ServiceDetail]], None]) -> None:
        """Call ``hook`` once for each loop: those seen so far, and each new one."""
        with self._lock:
            self._hooks.append(hook)
            seen = list(self._seen.values())
        for service in seen:
            hook(service)
        self.loops()

    def facts(self) -> list[LoopFacts]:
        return gather(self.loops())

    def observer(self) -> Observer | None:
        return self._observer()

    def demo(self) -> DemoControls | None:
        return self._demo()

    def attach_log(self) -> None:
        """The engine's log lines (``engine.*``, INFO and up) into :attr:`log`."""
        logger = logging.getLogger("engine")
        if self._handler not in logger.handlers:
            logger.addHandler(self._handler)
            if logger.level == logging.NOTSET or logger.level > logging.INFO:
                logger.setLevel(logging.INFO)

    def detach_log(self) -> None:
        logging.getLogger("engine").removeHandler(self._handler)

    # -- snapshots, kept a moment -----------------------------------------------------------

    def _snapshot(self, kind: str, take: Callable[[], T], age: float = SNAPSHOT_AGE) -> T:
        with self._lock:
            kept = self._kept.setdefault(kind, _Kept())
        with kept.lock:
            if kept.value is None or time.monotonic() - kept.at > age:
                kept.value = take()
                kept.at = time.monotonic()
            return kept.value  # type: ignore[no-any-return]

    def topics(self) -> TopicsReport | None:
        observer = self.observer()
        return None if observer is None else self._snapshot("topics", observer.topics)

    def etl(self) -> EtlReport | None:
        observer = self.observer()
        if observer is None:
            return None
        return self._snapshot("etl", lambda: observer.etl(listings=self.listings))

    def dead_letters(self) -> list[DeadLetter] | None:
        observer = self.observer()
        return None if observer is None else self._snapshot("dead", observer.dead_letters, 2.0)

    def tables(self) -> TablesReport | None:
        """The observer's tables, with this process's apply loop's view laid over them."""
        # deferred: only a status that asks for the tables loads the apply loop's modules
        from engine.apply.loop import TableStatus
        from engine.observe.tables_view import with_apply_status

        observer = self.observer()
        if observer is None:
            return None
        report = self._snapshot("tables", observer.tables)
        apply = self.loops().get("apply")
        detail = apply.status().detail if apply is not None else None
        if isinstance(detail, tuple):
            report = with_apply_status(report, [s for s in detail if isinstance(s, TableStatus)])
        return report

    # -- control ----------------------------------------------------------------------------

    def _refused(self) -> None:
        note = self.control_note()
        if note:
            raise ControlError(403, note)

    def service(self, loop: str) -> Service[ServiceDetail]:
        loops = self.loops()
        service = loops.get(loop)
        if service is None:
            runs = ", ".join(loops) or "no loop"
            raise ControlError(404, f"unknown loop {loop!r}: this process runs {runs}")
        return service

    def control(self, loop: str, action: str, timeout: float | None = None) -> str:
        """Start or stop ``loop``; its state after."""
        service = self.service(loop)
        self._refused()
        if action == "start":
            service.start()
        else:
            service.stop(120.0 if timeout is None else timeout)
        self.events.note(f"{action} asked through the API", loop=loop)
        return service.status().state

    def run_pass(self) -> PassResult:
        """One ETL pass now, by this process's ETL loop."""
        from engine.services.etl import EtlService  # deferred: engine.etl loads deltalake

        loops = self.loops()
        etl = next((s for s in loops.values() if isinstance(s, EtlService)), None)
        if etl is None:
            raise ControlError(404, "this process runs no etl loop")
        self._refused()
        if not self._asked_pass.acquire(blocking=False):
            raise ControlError(409, "an ETL pass asked for is already running")
        try:
            return etl.run_pass()  # waits for a pass of the loop in flight
        finally:
            self._asked_pass.release()

    def next_batch(self) -> str:
        demo = self.demo()
        if demo is None:
            raise ControlError(404, "not a demo: there are no batches to publish")
        if not demo.batches_left():
            raise ControlError(409, "all demo batches are published")
        text = demo.next_batch()
        self.events.note(text, loop="demo")
        return text
