"""How the console's engine is put together: the connection profiles (a missing or
broken one becomes words, not a crash), for ``zync demo`` the embedded stack and its
pools, the ETL configuration, the lake's :class:`engine.api.Observer`, and the
:class:`engine.api.Pipeline` whose loops the console starts and stops.

:class:`EngineAssembly` keeps what it made, part by part as it goes (a set-up that fails
half-way keeps the parts it made), and why the loops are missing when they are; the
console's backend (:class:`~zync_tui.console.backend.EngineBackend`) reads and controls
them. Everything here may block (Kafka, Delta, Spark): it runs in a thread worker.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from demo.scenario import TAKE_OVER, Demo
from engine.api import (
    AnyService,
    ConfigError,
    EtlConfig,
    KafkaProfile,
    Lake,
    Observer,
    Pipeline,
    RegistryProfile,
    ServiceEvent,
    load_config,
    load_kafka_profile,
    load_registry_profile,
    one_line,
    resolve_lake,
)
from zync_tui.console.views import LogBook

if TYPE_CHECKING:
    from engine.api import Spark as SparkSession
    from zync_tui.console.backend import EngineSettings


@dataclass
class _Profiles:
    """The connection profiles the console found, or why it has none."""

    kafka: KafkaProfile | None = None
    registry: RegistryProfile | None = None
    kafka_error: str | None = None
    registry_error: str | None = None


class EngineAssembly:
    """The console's engine objects, made by :meth:`assemble` (see the module's docstring)."""

    def __init__(self, settings: EngineSettings, log: LogBook, spark: Callable[[], SparkSession]) -> None:
        self.settings = settings
        self.log = log
        self.spark = spark
        self.observer: Observer | None = None
        self.pipeline: Pipeline | None = None
        self.driver: Demo | None = None
        self.config: EtlConfig | None = None
        self.services: dict[str, AnyService] = {}
        #: why there are no loops (None: there are)
        self.pipeline_error: str | None = None

    def assemble(self) -> list[str]:
        """Load profiles and configuration, open the lake, build the loops; for the demo,
        start the embedded stack and create the pools first. Returns notes for the log."""
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
        self.observer = Observer(
            lake,
            kafka=profiles.kafka,
            registry=profiles.registry,
            etls=etls,
            spark=self.spark,
            clock=s.clock,
            kafka_error=profiles.kafka_error,
            registry_error=profiles.registry_error,
        )
        notes.append(f"lake {lake.location}")
        self._set_up_loops(lake, profiles, notes)
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
            self.pipeline_error = "a read-only console runs no loops (it only watches)"
        elif s.config_path is not None and profiles.kafka is not None:
            try:
                self.pipeline = Pipeline(
                    s.config_path,
                    lake,
                    kafka=profiles.kafka,
                    registry=profiles.registry,
                    spark=self.spark,
                    take_over=self.driver is not None and TAKE_OVER,
                )
                self.services = self.pipeline.services
                self.pipeline.add_listener(self._on_event)
            except Exception as exc:  # noqa: BLE001 - shown on the Loops panel
                self.pipeline_error = f"cannot set the loops up: {one_line(exc)}"
                notes.append(self.pipeline_error)
        elif s.config_path is None:
            self.pipeline_error = "no ETL configuration given: loops are not available"
        else:
            self.pipeline_error = f"loops are not available: {profiles.kafka_error}"
        if s.autostart and not s.read_only and self.pipeline is not None:
            try:
                self.pipeline.start()  # creates missing pools, starts downstream first
                notes.append("loops started: " + ", ".join(self.services))
            except Exception as exc:  # noqa: BLE001 - shown on the Loops panel
                notes.append(f"cannot start the loops: {one_line(exc)}")

    def _on_event(self, event: ServiceEvent) -> None:
        """A service's event for the Log panel."""
        severity = "ERROR" if event.kind in ("failed", "error") else "INFO"
        self.log.add(severity, event.service, event.message, event.at)
