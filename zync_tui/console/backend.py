"""The console's engine side: everything its workers call, with no Textual in sight.

:class:`EngineBackend` holds the engine objects the console shows — an
:class:`engine.api.Observer` for snapshots, the :class:`engine.api.Pipeline` whose loops
it starts and stops, and, for ``zync demo``, the :class:`demo.scenario.Demo` driver.
Every method may block (Kafka, Delta, Spark) and is called from a thread worker, never
from the event loop. Failures come back as exceptions with one-line messages, or as words
inside the snapshots; the console shows them and keeps going.

What the console needs from it (:class:`~zync_tui.console.views.Backend`) and the
values it shows are in :mod:`zync_tui.console.views`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from demo.scenario import Demo
from engine.api import (
    AnyService,
    ConfigError,
    DeadLetter,
    EtlConfig,
    EtlReport,
    KafkaProfile,
    Lake,
    Observer,
    PassResult,
    Pipeline,
    RegistryProfile,
    ServedProcess,
    ServiceEvent,
    TablesReport,
    TableStatus,
    TopicsReport,
    get_spark,
    load_config,
    load_kafka_profile,
    load_registry_profile,
    load_spark_settings,
    one_line,
    resolve_lake,
    run_pass,
    with_apply_status,
)
from zync_tui.console.views import (
    APPLY,
    LOOPS,
    LogBook,
    LogEntry,
    LoopState,
    LoopView,
    loop_view,
    pass_outcome,
)

if TYPE_CHECKING:
    from engine.api import Spark as SparkSession

# --------------------------------------------------------------------------- the real one


@dataclass
class EngineSettings:
    """Where the console's engine points (built by the CLI, the demo and the tests)."""

    config_path: Path | None = None
    #: the lake (a directory or ``s3://BUCKET/PREFIX``; None: the configured one)
    lake_root: str | Path | None = None
    #: profile keys (``bootstrap_servers``, ``url``…) over ~/.zync and ZYNC_* variables
    kafka_overrides: Mapping[str, object] = field(default_factory=dict)
    registry_overrides: Mapping[str, object] = field(default_factory=dict)
    read_only: bool = False
    demo: bool = False
    #: for the demo: start the embedded stack (False: use the configured Kafka/registry)
    start_stack: bool = True
    #: start the loops once set up (never in a read-only console)
    autostart: bool = True
    spark_master: str | None = None
    clock: Callable[[], float] = time.time


@dataclass
class _Profiles:
    """The connection profiles the console found, or why it has none."""

    kafka: KafkaProfile | None = None
    registry: RegistryProfile | None = None
    kafka_error: str | None = None
    registry_error: str | None = None


class EngineBackend:
    """The console's engine: snapshots through an :class:`engine.api.Observer`, loops
    through an :class:`engine.api.Pipeline`, the demo through :mod:`demo.scenario`."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.read_only = settings.read_only
        self.read_only_reason: str | None = None
        self.title = "zync demo" if settings.demo else "zync"
        self.log = LogBook(settings.clock)
        #: how :meth:`start` goes, for the API (engine.api.ServedProcess ``setup``)
        self.setup: dict[str, object] = {"state": "starting", "notes": [], "error": None}
        self._served: ServedProcess | None = None
        self.observer: Observer | None = None
        self.pipeline: Pipeline | None = None
        self.driver: Demo | None = None
        self.config: EtlConfig | None = None
        self._services: dict[str, AnyService] = {}
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
        try:
            notes = self._start()
        except Exception as exc:
            self.setup = {"state": "failed", "notes": [], "error": one_line(exc)}
            raise
        self.setup = {"state": "done", "notes": notes, "error": None}
        if self._served is not None:  # the Log panel of a console reading the API
            for note in notes:
                self._served.events.note(note, loop="console")
        return notes

    def served(self) -> ServedProcess:
        """What the console's engine process serves (engine.api.serve): its loops,
        observer, the demo's controls, how its set-up goes."""
        read_only = "a read-only console's engine runs no loops" if self.read_only else None
        self._served = ServedProcess(
            self.config.name if self.config is not None else "console",
            "console",
            loops=lambda: dict(self._services),
            observer=lambda: self.observer,
            listings=True,
            demo=lambda: self if self.driver is not None else None,
            control_note=lambda: read_only,
            setup=lambda: dict(self.setup),
            note=lambda: self._pipeline_error,
        )
        return self._served

    def _start(self) -> list[str]:
        self._attach_log()
        notes: list[str] = []
        s = self.settings
        if s.demo and s.start_stack:
            self.driver = Demo(lake_root=s.lake_root, start_stack=True)
            notes.extend(self.driver.prepare())  # starts the stack, writes the profiles
        profiles = self._load_profiles(notes)
        if s.demo and self.driver is None:
            if profiles.kafka is None or profiles.registry is None:
                raise RuntimeError(
                    profiles.kafka_error or profiles.registry_error or "the demo needs Kafka and a registry"
                )
            self.driver = Demo(
                lake_root=s.lake_root, start_stack=False, kafka=profiles.kafka, registry=profiles.registry
            )
            notes.extend(self.driver.prepare())
        if self.driver is not None:
            s.config_path = self.driver.config_path
            lake = self.driver.lake
        else:
            lake = Lake(resolve_lake(s.lake_root))
        etls: list[EtlConfig] = []
        if s.config_path is not None:
            self.config = load_config(s.config_path)
            etls.append(self.config)
            self.title = f"{self.title} · {self.config.name}"
        self.observer = Observer(
            lake,
            kafka=profiles.kafka,
            registry=profiles.registry,
            etls=etls,
            spark=self._spark,
            clock=s.clock,
            kafka_error=profiles.kafka_error,
            registry_error=profiles.registry_error,
        )
        notes.append(f"lake {lake.location}")
        self._set_up_loops(lake, profiles, notes)
        for note in notes:
            self.log.add("INFO", "console", note)
        return notes

    def _load_profiles(self, notes: list[str]) -> _Profiles:
        """The Kafka and registry profiles; a missing or broken one becomes words (and the
        warnings loading them raised, e.g. an exposed credentials file, become notes)."""
        s = self.settings
        found = _Profiles()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                found.kafka = load_kafka_profile(s.kafka_overrides or None)
            except ConfigError as exc:
                found.kafka_error = str(exc)
            try:
                found.registry = load_registry_profile(s.registry_overrides or None)
            except ConfigError as exc:
                found.registry_error = str(exc)
        notes.extend(f"warning: {w.message}" for w in caught)
        return found

    def _set_up_loops(self, lake: Lake, profiles: _Profiles, notes: list[str]) -> None:
        """Build the pipeline (unless read-only or nothing to run) and, when asked,
        start its loops; why there are none is kept for the Loops panel."""
        s = self.settings
        if s.read_only:
            self._pipeline_error = "a read-only console runs no loops (it only watches)"
        elif s.config_path is not None and profiles.kafka is not None:
            try:
                self.pipeline = Pipeline(
                    s.config_path, lake, kafka=profiles.kafka, registry=profiles.registry, spark=self._spark
                )
                self._services = self.pipeline.services
                self.pipeline.add_listener(self._on_event)
            except Exception as exc:  # noqa: BLE001 - shown on the Loops panel
                self._pipeline_error = f"cannot set the loops up: {one_line(exc)}"
                notes.append(self._pipeline_error)
        elif s.config_path is None:
            self._pipeline_error = "no ETL configuration given: loops are not available"
        else:
            self._pipeline_error = f"loops are not available: {profiles.kafka_error}"
        if s.autostart and not s.read_only and self.pipeline is not None:
            try:
                self.pipeline.start()  # creates missing pools, starts downstream first
                notes.append("loops started: " + ", ".join(self._services))
            except Exception as exc:  # noqa: BLE001 - shown on the Loops panel
                notes.append(f"cannot start the loops: {one_line(exc)}")

    def _on_event(self, event: ServiceEvent) -> None:
        """A service's event for the Log panel."""
        severity = "ERROR" if event.kind in ("failed", "error") else "INFO"
        self.log.add(severity, event.service, event.message, event.at)

    def _spark(self) -> SparkSession:
        return get_spark(load_spark_settings(self.settings.spark_master))

    def _observer(self) -> Observer:
        if self.observer is None:
            raise RuntimeError("the engine is not set up yet")
        return self.observer

    # -- snapshots ------------------------------------------------------------------------

    def topics(self) -> TopicsReport:
        return self._observer().topics()

    def etl(self) -> EtlReport:
        return self._observer().etl()

    def dead_letters(self) -> list[DeadLetter]:
        return self._observer().dead_letters()

    def tables(self) -> TablesReport:
        """The observer's tables, with what the apply loop knows laid over them (the
        staging versions it found nothing in for a table, its last error)."""
        report = self._observer().tables()
        apply = self._services.get(APPLY)
        if apply is None:
            return report
        try:
            detail = apply.status().detail
        except Exception:  # noqa: BLE001 - the loop's view is a bonus
            return report
        statuses = detail if isinstance(detail, tuple) else ()
        return with_apply_status(report, [s for s in statuses if isinstance(s, TableStatus)])

    def loops(self) -> list[LoopView]:
        views = []
        for name in (*LOOPS, APPLY) if APPLY in self._services else LOOPS:
            service = self._services.get(name)
            if service is None:
                state: LoopState = "not run" if self.read_only else "unavailable"
                views.append(LoopView(name, state, error=self._pipeline_error))
                continue
            try:
                views.append(loop_view(name, service.status()))
            except Exception as exc:  # noqa: BLE001
                views.append(LoopView(name, "unknown", error=f"status failed: {one_line(exc)}"))
        return views

    # -- control --------------------------------------------------------------------------

    def _service(self, name: str) -> AnyService:
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

    def run_etl_pass(self) -> PassResult:
        if self.read_only:
            raise PermissionError("read-only console: running an ETL pass is disabled")
        if not self._pass_lock.acquire(blocking=False):
            raise RuntimeError("an ETL pass is already running")
        try:
            if self.pipeline is not None:
                return self.pipeline.etl.run_pass()  # the service logs the pass itself
            if self.config is None:
                raise RuntimeError("no ETL configuration loaded")
            result = run_pass(self.config, self._observer().lake, spark=self._spark())
            self.log.add("INFO", "etl", f"pass: {pass_outcome(result).summary()}")
            return result
        finally:
            self._pass_lock.release()

    # -- the demo -------------------------------------------------------------------------

    @property
    def demo(self) -> EngineBackend | None:
        """A demo's engine publishes its batches itself (:class:`DemoControls`)."""
        return self if self.settings.demo else None

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
        for name in (APPLY, *reversed(LOOPS)):
            service = self._services.get(name)
            if service is not None:
                with contextlib.suppress(Exception):  # shutting down anyway
                    service.stop()
        if self.observer is not None:
            self.observer.close()
        if self._attached:
            logging.getLogger("engine").removeHandler(self.log)
            self._attached = False
