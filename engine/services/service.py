"""A service: a loop in a thread with start / stop / status, and what it reports.

Every service runs in its own thread (:meth:`Service.start`), stops cleanly
(:meth:`Service.stop` lets the loop finish the commit or transaction in flight) and
answers :meth:`Service.status` from any thread with a :class:`ServiceStatus` snapshot:
``state`` (``stopped``, ``starting``, ``running``, ``stopping``, ``failed``), the last
:class:`Commit`, a recent rate, the last error, and ``detail``, the wrapped loop's own
snapshot (:data:`ServiceDetail`: :class:`engine.ingest.stats.IngestStats`, the last
:class:`engine.etl.result.PassResult`, a tuple of
:class:`engine.deliver.status_board.DeliveryStatus`, a tuple of
:class:`engine.apply.loop.TableStatus`).

Listeners (``on_event``) receive a :class:`ServiceEvent` per thing that happened — a
commit, a pass, a delivery, an error — whose ``message`` is one line of words: `zync run`
prints them, the console shows them; its ``fields`` say the same for machines (JSON logs).
Listeners are called from the services' threads.

Each service also has a :class:`~engine.heartbeat.Heartbeat` its loop beats (liveness), and
declares what an operator reads of it (:meth:`Service.report`: its detail as JSON, its
metric readings, the dependencies it reached): the API of :mod:`engine.serve` knows no loop
by name, so a new loop is served by declaring its own report.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeAlias, TypeVar

from engine.errors import ZyncError, one_line
from engine.heartbeat import Heartbeat, HeartbeatReading
from engine.services.report import EventHistogram, LoopReport

if TYPE_CHECKING:
    from engine.apply.loop import TableStatus
    from engine.deliver.status_board import DeliveryStatus
    from engine.etl.result import PassResult
    from engine.ingest.stats import IngestStats

ServiceState: TypeAlias = Literal["stopped", "starting", "running", "stopping", "failed"]

STOPPED: Final = "stopped"
STARTING: Final = "starting"
RUNNING: Final = "running"
STOPPING: Final = "stopping"
FAILED: Final = "failed"
#: Every state, in a loop's life order.
STATES: Final = (STOPPED, STARTING, RUNNING, STOPPING, FAILED)

#: Seconds over which a service's rate is averaged.
RATE_WINDOW = 10.0

#: A service's ``detail``: from-kafka's stats, the ETL's last pass, to-kafka's deliveries,
#: the apply loop's tables.
ServiceDetail: TypeAlias = (
    "IngestStats | PassResult | tuple[DeliveryStatus, ...] | tuple[TableStatus, ...] | None"
)


#: The type of a service's ``detail`` (each service fixes it).
D = TypeVar("D", covariant=True)


class ServiceError(ZyncError):
    """A service cannot be built or started; the message says why."""


@dataclass(frozen=True)
class Commit:
    """A service's last commit: a Delta version (from-kafka, ETL) or a Kafka transaction
    (to-kafka, ``version`` = the staging version delivered)."""

    version: int | None
    at: float
    records: int
    where: str = ""


@dataclass(frozen=True)
class ServiceEvent:
    """Something a service did; ``message`` is one line for a status display."""

    service: str
    kind: str  # started | stopped | failed | commit | pass | delivered | waiting | error |
    # unreachable | back (an outage of Kafka or the Schema Registry began, ended) | ...
    message: str
    at: float
    #: what happened, for machines (a commit's pool, version and records, ...)
    fields: Mapping[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(self.at))
        return f"{stamp} {self.service:<10} {self.message}"


@dataclass(frozen=True)
class ServiceStatus(Generic[D]):
    """A snapshot of one service."""

    name: str
    state: ServiceState
    started_at: float | None = None
    last_commit: Commit | None = None
    commits: int = 0
    records: int = 0
    rate: float = 0.0
    last_error: str | None = None
    detail: D | None = None
    #: errors since the process started: failures and problems the loop survived
    errors: int = 0
    heartbeat: HeartbeatReading | None = None

    @property
    def running(self) -> bool:
        return self.state in (STARTING, RUNNING, STOPPING)


class Service(Generic[D]):
    """A loop in a thread. Subclasses implement :meth:`_run` (return when ``stop`` is
    set, after finishing the work in flight) and report with :meth:`_committed` and
    :meth:`_event`."""

    name = "service"
    #: Histograms its events feed (the API's /metrics, engine/serve).
    histograms: tuple[EventHistogram, ...] = ()
    #: Modules :meth:`start` imports in the caller's thread before the loop's starts.
    imports_first: tuple[str, ...] = ()

    def __init__(self, *, on_event: Callable[[ServiceEvent], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._state: ServiceState = STOPPED
        self._started_at: float | None = None
        self._last_commit: Commit | None = None
        self._commits = 0
        self._records = 0
        self._recent: deque[tuple[float, int]] = deque()
        self._error: str | None = None
        self._errors = 0
        self._exception: BaseException | None = None
        self.heartbeat = Heartbeat(self.name)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._listeners: list[Callable[[ServiceEvent], None]] = [on_event] if on_event else []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._state})"

    # -- control ------------------------------------------------------------------------

    def add_listener(self, listener: Callable[[ServiceEvent], None]) -> None:
        self._listeners.append(listener)

    def start(self) -> None:
        """Start the loop in a thread (nothing happens when it already runs)."""
        for module in self.imports_first:
            # heavy modules the loop imports late, imported here in the caller's thread:
            # two loops importing pyspark at once can find it partly initialized
            # ("cannot import name 'SQLContext' from partially initialized module")
            importlib.import_module(module)
        with self._lock:
            if self.running:
                return
            self._stop = threading.Event()
            self._state = STARTING
            self._error = None
            self._started_at = time.time()
            self._thread = threading.Thread(
                target=self._main, name=f"zync-{self.name}", daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float | None = 120.0) -> None:
        """Ask the loop to finish what it is doing and stop; waits up to ``timeout``."""
        with self._lock:
            thread = self._thread
            if thread is not None and thread.is_alive() and self._state != FAILED:
                self._state = STOPPING
        self._stop.set()
        self._wake()
        if thread is None or thread is threading.current_thread():
            return
        if thread is threading.main_thread():  # run() in a command's thread: it goes on
            deadline = None if timeout is None else time.monotonic() + timeout
            while self.running and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.05)
            return
        thread.join(timeout)

    def run(self, stop: threading.Event | None = None) -> None:
        """Run the loop in the calling thread until ``stop`` is set (a command's main
        thread); raises what stopped it. :meth:`status` and the API see it as usual."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                raise ServiceError(f"{self.name} is already running")
            self._stop = stop or threading.Event()
            self._state = STARTING
            self._error = None
            self._started_at = time.time()
            self._thread = threading.current_thread()
        self._main()
        if self._exception is not None:
            raise self._exception

    def join(self, timeout: float | None = None) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive() and self._state in (STARTING, RUNNING, STOPPING)

    def status(self) -> ServiceStatus[D]:
        now = time.time()
        with self._lock:
            while self._recent and self._recent[0][0] < now - RATE_WINDOW:
                self._recent.popleft()
            recent = sum(n for _, n in self._recent)
            state = self._state
            if (
                state in (RUNNING, STARTING, STOPPING)
                and not self.running
                and self._thread is not None
            ):
                state = STOPPED
            return ServiceStatus(
                name=self.name,
                state=state,
                started_at=self._started_at,
                last_commit=self._last_commit,
                commits=self._commits,
                records=self._records,
                rate=recent / RATE_WINDOW,
                last_error=self._error,
                detail=self._detail(),
                errors=self._errors,
                heartbeat=self.heartbeat.reading() if state in (STARTING, RUNNING) else None,
            )

    def report(self, status: ServiceStatus[D]) -> LoopReport:
        """What an operator reads of the loop besides its status (the API's status
        document and metrics, engine/serve): its detail as JSON, its metric readings,
        the dependencies it reached and why it cannot work now. Each loop declares its own."""
        return LoopReport()

    # -- for subclasses -----------------------------------------------------------------

    def _run(self, stop: threading.Event) -> None:
        raise NotImplementedError

    def _detail(self) -> D | None:
        return None

    def _wake(self) -> None:
        """Called by :meth:`stop`: interrupt a wait of the loop."""

    def _running(self) -> None:
        with self._lock:
            if self._state == STARTING:
                self._state = RUNNING

    def _committed(self, version: int | None, records: int, where: str = "") -> None:
        now = time.time()
        with self._lock:
            self._last_commit = Commit(version, now, records, where)
            self._commits += 1
            self._records += records
            self._recent.append((now, records))

    def _failed_softly(self, message: str | None) -> None:
        """Record (or clear, with None) an error the loop survives."""
        with self._lock:
            if message is not None and message != self._error:
                self._errors += 1
            self._error = message

    def _event(self, kind: str, message: str, **fields: Any) -> None:
        event = ServiceEvent(self.name, kind, message, time.time(), fields)
        for listener in list(self._listeners):
            with contextlib.suppress(Exception):  # a listener never stops a loop
                listener(event)

    def _main(self) -> None:
        self._exception = None
        self.heartbeat.start()
        self._event("started", "started")
        try:
            self._run(self._stop)
        except BaseException as exc:  # noqa: BLE001 - kept in the status
            message = one_line(exc, typed=True)
            with self._lock:
                self._state = FAILED
                self._error = message
                self._errors += 1
                self._exception = exc
            self._event("failed", f"failed: {message}", error=message)
            return
        with self._lock:
            self._state = STOPPED
        self._event("stopped", "stopped")
