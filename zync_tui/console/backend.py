"""The console's engine side: everything its workers call, with no Textual in sight.

:class:`EngineBackend` reads and controls the engine objects the console shows — an
:class:`engine.api.Observer` for snapshots, the :class:`engine.api.Pipeline` whose loops
it starts and stops, and, for ``zync demo``, the :class:`demo.scenario.Demo` driver —
which :class:`~zync_tui.console.assembly.EngineAssembly` puts together. Every method may block (Kafka, Delta, Spark) and is called from a thread worker, never
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from demo.scenario import Demo
from engine.api import (
    AnyService,
    DeadLetter,
    EtlConfig,
    EtlReport,
    Observer,
    PassResult,
    ServedProcess,
    TablesReport,
    TableStatus,
    TopicsReport,
    get_spark,
    load_spark_settings,
    one_line,
    run_pass,
    with_apply_status,
)
from zync_tui.console.assembly import EngineAssembly
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
        #: the engine's objects (observer, pipeline, demo driver), made by :meth:`start`
        self.assembly = EngineAssembly(settings, self.log, self._spark)
        self._pass_lock = threading.Lock()
        self._attached = False

    @property
    def driver(self) -> Demo | None:
        return self.assembly.driver

    @property
    def config(self) -> EtlConfig | None:
        return self.assembly.config

    # -- set-up (in a worker) -----------------------------------------------------------

    def _attach_log(self) -> None:
        if not self._attached:
            logger = logging.getLogger("engine")
            logger.addHandler(self.log)
            if logger.level == logging.NOTSET or logger.level > logging.INFO:
                logger.setLevel(logging.INFO)
            self._attached = True

    def start(self) -> list[str]:
        """Put the engine together (:meth:`EngineAssembly.assemble`), its log captured and
        how it goes kept for the API. Returns notes for the log."""
        self._attach_log()
        try:
            notes = self.assembly.assemble()
        except Exception as exc:
            self.setup = {"state": "failed", "notes": [], "error": one_line(exc)}
            raise
        finally:
            if self.config is not None:
                self.title = f"{self.title} · {self.config.name}"
        for note in notes:
            self.log.add("INFO", "console", note)
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
            loops=lambda: dict(self.assembly.services),
            observer=lambda: self.assembly.observer,
            listings=True,
            demo=lambda: self if self.assembly.driver is not None else None,
            control_note=lambda: read_only,
            setup=lambda: dict(self.setup),
            note=lambda: self.assembly.pipeline_error,
        )
        return self._served

    def _spark(self) -> SparkSession:
        return get_spark(load_spark_settings(self.settings.spark_master))

    def _observer(self) -> Observer:
        if self.assembly.observer is None:
            raise RuntimeError("the engine is not set up yet")
        return self.assembly.observer

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
        apply = self.assembly.services.get(APPLY)
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
        for name in (*LOOPS, APPLY) if APPLY in self.assembly.services else LOOPS:
            service = self.assembly.services.get(name)
            if service is None:
                state: LoopState = "not run" if self.read_only else "unavailable"
                views.append(LoopView(name, state, error=self.assembly.pipeline_error))
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
        service = self.assembly.services.get(name)
        if service is None:
            raise RuntimeError(self.assembly.pipeline_error or f"no {name} loop in this pipeline")
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
            if self.assembly.pipeline is not None:
                return self.assembly.pipeline.etl.run_pass()  # the service logs the pass itself
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
        if self.assembly.driver is None:
            raise RuntimeError("not a demo: there are no batches to publish")
        text = self.assembly.driver.publish_next()
        self.log.add("INFO", "demo", text)
        return text

    def batches_left(self) -> int:
        return self.assembly.driver.batches_left() if self.assembly.driver is not None else 0

    def batches_total(self) -> int:
        return len(self.assembly.driver.batch_paths()) if self.assembly.driver is not None else 0

    def drain_log(self) -> list[LogEntry]:
        return self.log.drain()

    def close(self) -> None:
        for name in (APPLY, *reversed(LOOPS)):
            service = self.assembly.services.get(name)
            if service is not None:
                with contextlib.suppress(Exception):  # shutting down anyway
                    service.stop()
        if self.assembly.observer is not None:
            self.assembly.observer.close()
        if self._attached:
            logging.getLogger("engine").removeHandler(self.log)
            self._attached = False
