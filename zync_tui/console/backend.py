"""The console's engine side: everything its workers call, with no Textual in sight.

:class:`EngineBackend` holds the engine objects the console shows — an
:class:`engine.observe.observer.Observer` for snapshots, the :class:`engine.services.Pipeline`
whose loops it starts and stops, and, for ``zync demo``, the :class:`engine.demo.Demo`
driver. Every method may block (Kafka, Delta, Spark) and is called from a thread worker,
never from the event loop. Failures come back as exceptions with one-line messages, or
as words inside the snapshots; the console shows them and keeps going.

Tests give the app a fake with the same methods (see ``tests/console``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from engine.errors import one_line

LOOPS = ("from-kafka", "etl", "to-kafka")
LOOP_TITLES = {"from-kafka": "from-kafka", "etl": "ETL", "to-kafka": "to-kafka"}


@dataclass(frozen=True)
class LoopView:
    """One loop as the console shows it."""

    name: str
    state: str  # running, stopped, failed, starting, stopping, unavailable
    version: int | None = None
    committed_at: float | None = None
    records: int | None = None
    rate: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class PassOutcome:
    """What one ETL pass did."""

    consumed: int | None = None
    outputs: int | None = None
    expired: int | None = None
    pending: int | None = None
    version: int | None = None
    nothing_new: bool = False
    text: str = ""

    def summary(self) -> str:
        if self.text:
            return self.text
        from engine.etl.result import counts_line  # deferred: engine.etl loads pyarrow and delta-rs

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
    demo: bool

    def start(self) -> list[str]: ...
    def topics(self) -> Any: ...
    def etl(self) -> Any: ...
    def loops(self) -> list[LoopView]: ...
    def dead_letters(self) -> list[Any]: ...
    def start_loop(self, name: str) -> None: ...
    def stop_loop(self, name: str) -> None: ...
    def run_etl_pass(self) -> PassOutcome: ...
    def next_batch(self) -> str: ...
    def batches_left(self) -> int: ...
    def batches_total(self) -> int: ...
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


# --------------------------------------------------------------------------- adapters


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    for name in names:
        if isinstance(obj, dict) and name in obj:
            return obj[name]
        if hasattr(obj, name):
            value = getattr(obj, name)
            return value() if callable(value) and name in ("state",) and not isinstance(value, str) else value
    return default


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if hasattr(value, "timestamp"):
        return float(value.timestamp())
    return None


def loop_view(name: str, status: Any) -> LoopView:
    """A :class:`LoopView` from a service's status (read by attribute or key)."""
    state = _get(status, "state", "status", default="unknown")
    state = str(getattr(state, "value", state)).lower()
    commit = _get(status, "last_commit", default=None)
    version = _get(commit, "version", default=None) if commit is not None else None
    at = _get(commit, "at", "time", "committed_at", "timestamp", default=None) if commit is not None else None
    records = _get(commit, "records", "rows", default=None) if commit is not None else None
    if version is None:
        version = _get(status, "last_version", "version", default=None)
    if at is None:
        at = _get(status, "last_commit_at", "last_commit_time", default=None)
    if records is None:
        records = _get(status, "last_records", "last_commit_records", default=None)
    rate = _get(status, "rate", "records_per_second", default=None)
    error = _get(status, "last_error", "error", default=None)
    return LoopView(
        name=name,
        state=state,
        version=version if isinstance(version, int) else None,
        committed_at=_epoch(at),
        records=records if isinstance(records, int) else None,
        rate=float(rate) if isinstance(rate, int | float) else None,
        error=str(error).splitlines()[0] if error else None,
    )


def pass_outcome(result: Any) -> PassOutcome:
    """A :class:`PassOutcome` from whatever an ETL pass returns."""
    if result is None:
        return PassOutcome(nothing_new=True)
    if isinstance(result, PassOutcome):
        return result

    def total(*names: str) -> int | None:
        value = _get(result, *names, default=None)
        if isinstance(value, dict):
            return sum(int(v) for v in value.values())
        if isinstance(value, int):
            return value
        if isinstance(value, Sequence) and not isinstance(value, str):
            return len(value)
        return None

    consumed = total("consumed", "inputs", "consumed_by_topic")
    outputs = total("outputs", "output", "outputs_by_topic")
    expired = total("expired")
    pending = total("pending", "still_pending")
    version = _get(result, "version", "staging_version", default=None)
    nothing = bool(_get(result, "nothing_new", default=False)) or (
        consumed == 0 and not outputs and not expired and version is None
    )
    return PassOutcome(
        consumed=consumed,
        outputs=outputs,
        expired=expired,
        pending=pending,
        version=version if isinstance(version, int) else None,
        nothing_new=nothing,
    )


# --------------------------------------------------------------------------- the real one


@dataclass
class EngineSettings:
    """Where the console's engine points (built by the CLI, the demo and the tests)."""

    config_path: Path | None = None
    lake_root: Path | None = None
    kafka_overrides: dict[str, Any] = field(default_factory=dict)
    registry_overrides: dict[str, Any] = field(default_factory=dict)
    read_only: bool = False
    demo: bool = False
    #: for the demo: start the embedded stack (False: use the configured Kafka/registry)
    start_stack: bool = True
    #: start the loops once set up (never in a read-only console)
    autostart: bool = True
    spark_master: str | None = None
    clock: Callable[[], float] = time.time


class EngineBackend:
    """The console's engine: snapshots through :mod:`engine.observe`, loops through
    :mod:`engine.services`, the demo through :mod:`engine.demo`."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.read_only = settings.read_only
        self.demo = settings.demo
        self.title = "zync demo" if settings.demo else "zync"
        self.log = LogBook(settings.clock)
        self.observer: Any = None
        self.pipeline: Any = None
        self.driver: Any = None
        self.config: Any = None
        self._services: dict[str, Any] = {}
        self._pipeline_error: str | None = None
        self._pass_lock = threading.Lock()
        self._attached = False

    # -- set-up (in a worker) -----------------------------------------------------------

    def _attach_log(self) -> None:
        if not self._attached:
            logger = logging.getLogger("engine")
            logger.addHandler(self.log)
            if logger.level == logging.NOTSET or logger.level > logging.INFO:
                logger.setLevel(logging.INFO)
            self._attached = True

    def start(self) -> list[str]:
        """Load profiles and configuration, open the lake, build the loops; for the demo,
        start the embedded stack and create the pools first. Returns notes for the log."""
        import warnings

        from engine.lake.pools import Lake
        from engine.observe.observer import Observer
        from engine.settings.errors import ConfigError
        from engine.settings.kafka import load_kafka_profile
        from engine.settings.lake import lake_path
        from engine.settings.registry import load_registry_profile

        self._attach_log()
        notes: list[str] = []
        s = self.settings
        kafka = registry = None
        kafka_error = registry_error = None
        if s.demo and s.start_stack:
            from demo.scenario import Demo

            self.driver = Demo(lake_root=s.lake_root, start_stack=True)
            notes.extend(self.driver.prepare())  # starts the stack, writes the profiles
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                kafka = load_kafka_profile(s.kafka_overrides or None)
            except ConfigError as exc:
                kafka_error = str(exc)
            try:
                registry = load_registry_profile(s.registry_overrides or None)
            except ConfigError as exc:
                registry_error = str(exc)
        notes.extend(f"warning: {w.message}" for w in caught)
        if s.demo and self.driver is None:
            from demo.scenario import Demo

            if kafka is None or registry is None:
                raise RuntimeError(kafka_error or registry_error or "the demo needs Kafka and a registry")
            self.driver = Demo(lake_root=s.lake_root, start_stack=False, kafka=kafka, registry=registry)
            notes.extend(self.driver.prepare())
        if self.driver is not None:
            s.config_path = self.driver.config_path
            s.lake_root = self.driver.lake.root
        lake_root = s.lake_root or lake_path()
        lake = Lake(lake_root)
        etls = []
        if s.config_path is not None:
            from engine.etl.config import load_config

            self.config = load_config(s.config_path)
            etls.append(self.config)
            self.title = f"{self.title} · {self.config.name}"
        self.observer = Observer(
            lake,
            kafka=kafka,
            registry=registry,
            etls=etls,
            spark=self._spark,
            clock=s.clock,
            kafka_error=kafka_error,
            registry_error=registry_error,
        )
        notes.append(f"lake {lake.root}")
        if s.read_only:
            self._pipeline_error = "a read-only console runs no loops (it only watches)"
        elif s.config_path is not None and kafka is not None:
            try:
                self.pipeline = self._build_pipeline(s.config_path, lake, kafka, registry)
                self._services = self._find_services(self.pipeline)
                if hasattr(self.pipeline, "add_listener"):
                    self.pipeline.add_listener(self._on_event)
            except Exception as exc:  # noqa: BLE001 - shown on the Loops panel
                self._pipeline_error = f"cannot set the loops up: {one_line(exc)}"
                notes.append(self._pipeline_error)
        elif s.config_path is None:
            self._pipeline_error = "no ETL configuration given: loops are not available"
        else:
            self._pipeline_error = f"loops are not available: {kafka_error}"
        if s.autostart and not s.read_only and self._services:
            try:
                if hasattr(self.pipeline, "start"):
                    self.pipeline.start()  # creates missing pools, starts downstream first
                else:
                    for name in reversed(LOOPS):
                        self._services[name].start()
                notes.append("loops started: " + ", ".join(self._services))
            except Exception as exc:  # noqa: BLE001 - shown on the Loops panel
                notes.append(f"cannot start the loops: {one_line(exc)}")
        for note in notes:
            self.log.add("INFO", "console", note)
        return notes

    def _on_event(self, event: Any) -> None:
        """A service's event (``engine.services.ServiceEvent``) for the Log panel."""
        kind = getattr(event, "kind", "")
        severity = "ERROR" if kind in ("failed", "error") else "INFO"
        self.log.add(severity, getattr(event, "service", "?"), getattr(event, "message", str(event)), getattr(event, "at", None))

    def _spark(self) -> Any:
        from engine.settings.spark import load_spark_settings
        from engine.spark import get_spark

        return get_spark(load_spark_settings(self.settings.spark_master))

    def _build_pipeline(self, config_path: Path, lake: Any, kafka: Any, registry: Any) -> Any:
        try:
            from engine.services.pipeline import Pipeline
        except ImportError as exc:
            raise RuntimeError(f"engine.services is not available ({exc})") from None
        import inspect

        params = inspect.signature(Pipeline).parameters
        kwargs: dict[str, Any] = {}
        for name, value in (("kafka", kafka), ("registry", registry), ("spark", self._spark)):
            if name in params:
                kwargs[name] = value
        return Pipeline(config_path, lake, **kwargs)

    @staticmethod
    def _find_services(pipeline: Any) -> dict[str, Any]:
        found: dict[str, Any] = {}
        services = getattr(pipeline, "services", None)
        if callable(services):
            services = services()
        if isinstance(services, dict):
            found.update(services)
        elif services:
            for service in services:
                found[getattr(service, "name", type(service).__name__)] = service
        for name, attrs in (
            ("from-kafka", ("from_kafka", "ingest")),
            ("etl", ("etl",)),
            ("to-kafka", ("to_kafka", "delivery")),
        ):
            if name not in found:
                for attr in attrs:
                    if getattr(pipeline, attr, None) is not None:
                        found[name] = getattr(pipeline, attr)
                        break
        return {name: found[name] for name in LOOPS if name in found}

    # -- snapshots ------------------------------------------------------------------------

    def topics(self) -> Any:
        """The observer's topics, with the delivery lag of output topics from to-kafka."""
        report = self.observer.topics()
        service = self._services.get("to-kafka")
        if service is None:
            return report
        try:
            detail = service.status().detail or ()
        except Exception:  # noqa: BLE001 - the lag is a bonus
            return report
        delivered = {getattr(d, "topic", None): d for d in detail if hasattr(d, "lag")}
        if not delivered:
            return report
        import dataclasses

        rows = tuple(
            dataclasses.replace(t, lag_records=delivered[t.topic].lag)
            if t.direction == "out" and t.topic in delivered
            else t
            for t in report.topics
        )
        return dataclasses.replace(report, topics=rows)

    def etl(self) -> Any:
        return self.observer.etl()

    def dead_letters(self) -> list[Any]:
        return self.observer.dead_letters()

    def loops(self) -> list[LoopView]:
        views = []
        for name in LOOPS:
            service = self._services.get(name)
            if service is None:
                state = "not run" if self.read_only else "unavailable"
                views.append(LoopView(name, state, error=self._pipeline_error))
                continue
            try:
                views.append(loop_view(name, service.status()))
            except Exception as exc:  # noqa: BLE001
                views.append(LoopView(name, "unknown", error=f"status failed: {one_line(exc)}"))
        return views

    # -- control --------------------------------------------------------------------------

    def _service(self, name: str) -> Any:
        if self.read_only:
            raise PermissionError("read-only console: starting and stopping loops is disabled")
        service = self._services.get(name)
        if service is None:
            raise RuntimeError(self._pipeline_error or f"no {name} loop in this pipeline")
        return service

    def start_loop(self, name: str) -> None:
        self._service(name).start()  # the service logs "started" itself

    def stop_loop(self, name: str) -> None:
        self._service(name).stop()

    def run_etl_pass(self) -> PassOutcome:
        if self.read_only:
            raise PermissionError("read-only console: running an ETL pass is disabled")
        if not self._pass_lock.acquire(blocking=False):
            raise RuntimeError("an ETL pass is already running")
        try:
            service = self._services.get("etl")
            result: Any = None
            for method in ("run_once", "run_pass", "pass_now", "trigger"):
                fn = getattr(service, method, None) if service is not None else None
                if callable(fn):
                    result = fn()
                    break
            else:
                if self.config is None:
                    raise RuntimeError("no ETL configuration loaded")
                from engine.etl.run import run_pass

                result = run_pass(self.config, self.observer.lake, spark=self._spark())
                self.log.add("INFO", "etl", f"pass: {pass_outcome(result).summary()}")
            return pass_outcome(result)
        finally:
            self._pass_lock.release()

    # -- the demo -------------------------------------------------------------------------

    def next_batch(self) -> str:
        if self.driver is None:
            raise RuntimeError("not a demo: there are no batches to publish")
        text = self.driver.publish_next()
        self.log.add("INFO", "demo", text)
        return text

    def batches_left(self) -> int:
        return self.driver.batches_left() if self.driver is not None else 0

    def batches_total(self) -> int:
        return len(self.driver.batch_paths()) if self.driver is not None else 0

    def drain_log(self) -> list[LogEntry]:
        return self.log.drain()

    def close(self) -> None:
        for name in reversed(LOOPS):
            service = self._services.get(name)
            if service is not None:
                with contextlib.suppress(Exception):  # shutting down anyway
                    service.stop()
        if self.observer is not None:
            self.observer.close()
        if self._attached:
            logging.getLogger("engine").removeHandler(self.log)
            self._attached = False
