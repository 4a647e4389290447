"""What the console shows of the engine's loops, passes and log, and what it needs from
an engine (:class:`Backend`): plain values with no Textual and no engine process in
sight. :class:`~zync_tui.console.backend.EngineBackend` is the engine in this process;
:mod:`~zync_tui.console.remote` one reached over the API; tests give a fake
(``tests/console``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias

from engine.api import (
    DeadLetter,
    DemoControls,
    EtlReport,
    PassResult,
    ServiceDetail,
    ServiceState,
    ServiceStatus,
    TablesReport,
    TopicsReport,
    counts_line,
)

LOOPS = ("from-kafka", "etl", "to-kafka")
LOOP_TITLES = {"from-kafka": "from-kafka", "etl": "ETL", "to-kafka": "to-kafka", "apply": "apply"}
#: The loop of a configuration with tables (shown only then).
APPLY = "apply"

#: A loop's state as the Loops panel shows it: a service's, or why there is none.
LoopState: TypeAlias = ServiceState | Literal["not run", "unavailable", "unknown", "unreachable"]


@dataclass(frozen=True)
class LoopView:
    """One loop as the console shows it."""

    name: str
    state: LoopState
    version: int | None = None
    committed_at: float | None = None
    records: int | None = None
    rate: float | None = None
    error: str | None = None
    #: where the loop runs (its process's host and pid), when the console knows
    host: str | None = None
    pid: int | None = None


@dataclass(frozen=True)
class PassOutcome:
    """What one ETL pass did, in the console's totals."""

    consumed: int | None = None
    outputs: int | None = None
    expired: int | None = None
    pending: int | None = None
    version: int | None = None
    nothing_new: bool = False

    def summary(self) -> str:
        return counts_line(
            self.consumed, self.outputs, self.expired, self.pending, self.version,
            nothing_new=self.nothing_new,
        )


@dataclass(frozen=True)
class LogEntry:
    at: float
    severity: str  # DEBUG INFO WARNING ERROR
    source: str
    message: str


class Backend(Protocol):
    """What the console needs from the engine (the real one or a test's fake)."""

    title: str
    read_only: bool
    #: why the console is read-only (None: it is not, or it was asked to be)
    read_only_reason: str | None

    @property
    def demo(self) -> DemoControls | None:
        """The demo's batches of change events (``zync demo``: its `n` key), else None."""

    def start(self) -> list[str]: ...
    def topics(self) -> TopicsReport: ...
    def etl(self) -> EtlReport: ...
    def loops(self) -> list[LoopView]: ...
    def tables(self) -> TablesReport: ...
    def dead_letters(self) -> list[DeadLetter]: ...
    def start_loop(self, name: str) -> None: ...
    def stop_loop(self, name: str) -> None: ...
    def run_etl_pass(self) -> PassResult: ...
    def drain_log(self) -> list[LogEntry]: ...
    def close(self) -> None: ...


# --------------------------------------------------------------------------- log capture


class LogBook(logging.Handler):
    """Collects the engine's log records (``engine.*`` loggers) for the Log panel."""

    def __init__(self, clock: Callable[[], float] = time.time, capacity: int = 2000) -> None:
        super().__init__(level=logging.INFO)
        self.clock = clock
        self._entries: deque[LogEntry] = deque(maxlen=capacity)
        self._lock_entries = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not break logging
            message = str(record.msg)
        source = record.name.removeprefix("engine.")
        self.add(record.levelname, source, message.splitlines()[0] if message else "")

    def add(self, severity: str, source: str, message: str, at: float | None = None) -> None:
        with self._lock_entries:
            self._entries.append(LogEntry(self.clock() if at is None else at, severity, source, message))

    def drain(self) -> list[LogEntry]:
        with self._lock_entries:
            out = list(self._entries)
            self._entries.clear()
        return out


# --------------------------------------------------------------------------- views


def loop_view(name: str, status: ServiceStatus[ServiceDetail]) -> LoopView:
    """A :class:`LoopView` from a service's status."""
    commit = status.last_commit
    return LoopView(
        name=name,
        state=status.state,
        version=commit.version if commit is not None else None,
        committed_at=commit.at if commit is not None else None,
        records=commit.records if commit is not None else None,
        rate=status.rate,
        error=status.last_error.splitlines()[0] if status.last_error else None,
    )


def pass_outcome(result: PassResult | None) -> PassOutcome:
    """A :class:`PassOutcome` from what an ETL pass returned (None: no pass)."""
    if result is None:
        return PassOutcome(nothing_new=True)
    return PassOutcome(
        consumed=sum(result.consumed.values()),
        outputs=sum(result.outputs.values()),
        expired=sum(result.expired.values()),
        pending=sum(result.pending.values()),
        version=result.staging_version,
        nothing_new=result.nothing_new,
    )
