"""A pipeline: from-kafka, ETL, to-kafka and apply for one ETL configuration, in one
process.

:class:`Pipeline` builds the services from the configuration's inputs, outputs and
tables (the apply loop only when it has ``tables:``), creates its missing pools, starts
the loops downstream first and stops them upstream first; a from-kafka commit wakes the
ETL loop at once, and an ETL commit to-kafka and the apply loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from engine.services.apply import ApplyService
from engine.services.deliver import ToKafkaService
from engine.services.etl import ETL_INTERVAL, EtlService
from engine.services.ingest import FromKafkaService
from engine.services.outputs import config_outputs
from engine.services.service import (
    FAILED,
    Service,
    ServiceDetail,
    ServiceError,
    ServiceEvent,
    ServiceStatus,
)
from engine.settings.errors import NotConfiguredError
from engine.settings.kafka import KafkaProfile, load_kafka_profile
from engine.settings.registry import RegistryProfile, load_registry_profile
from engine.spark import SparkSource, spark_factory

if TYPE_CHECKING:
    from engine.ingest.options import IngestOptions
    from engine.lake.pools import Lake

#: Any of a pipeline's services, as :attr:`Pipeline.services` lists them.
AnyService: TypeAlias = Service[ServiceDetail]



class Pipeline:
    """from-kafka, ETL and to-kafka for one ETL configuration, in one process.

    ``kafka`` / ``registry``: connection profiles (None: loaded from the zync home and
    environment). ``spark``: a SparkSession or a factory of one (None: the process's
    session). ``format``: the output topics' format (None: avro when a registry is
    configured, else json). ``envelope``: every output's envelope (None: each output's
    own, from the configuration). ``take_over``: to-kafka takes over output topics
    last written by another staging pool. ``outputs``: the output topics to-kafka
    delivers (None: every output of the configuration; a topic that is not one is a
    :class:`ServiceError`). ``on_event`` receives every service's events.
    """

    def __init__(
        self,
        config_path: str | Path,
        lake: Lake,
        *,
        kafka: KafkaProfile | None = None,
        registry: RegistryProfile | None = None,
        spark: SparkSource = None,
        etl_interval: float = ETL_INTERVAL,
        format: str | None = None,  # noqa: A002 - the option's name
        envelope: str | None = None,
        take_over: bool = False,
        partitions: int = 1,
        replication: int = 1,
        outputs: Iterable[str] | None = None,
        ingest_options: IngestOptions | None = None,
        versions_per_commit: int | None = None,
        create_pools: bool = True,
        on_event: Callable[[ServiceEvent], None] | None = None,
    ) -> None:
        from engine.etl.config_file import load_config  # deferred: engine.etl loads deltalake

        self.config_path = Path(config_path)
        self.config = load_config(self.config_path)
        self.lake = lake
        self.kafka = kafka or load_kafka_profile()
        if registry is None:
            try:
                registry = load_registry_profile()
            except NotConfiguredError:
                registry = None
        self.registry = registry
        self.create_pools = create_pools
        chosen = format or ("avro" if registry is not None else "json")
        spark_source = spark_factory(spark)
        self.etl = EtlService(
            self.config,
            lake,
            spark=spark_source,
            interval=etl_interval,
            on_commit=lambda _result: self._staged(),
        )
        self.from_kafka = FromKafkaService(
            [(i.topic, i.pool) for i in self.config.inputs],
            lake,
            kafka=self.kafka,
            registry=registry,
            options=ingest_options,
            spark=spark_source,
            on_commit=lambda _info: self.etl.wake(),
        )
        delivered = config_outputs(self.config)
        if outputs is not None:
            wanted = list(dict.fromkeys(outputs))
            known = [o.topic for o in delivered]
            for topic in wanted:
                if topic not in known:
                    raise ServiceError(
                        f"output {topic!r} is not an output of {self.config_path} "
                        f"(outputs: {', '.join(known)})"
                    )
            delivered = [o for o in delivered if o.topic in wanted]
        from engine.deliver.delivery_options import DeliveryOptions  # deferred: the codecs' modules

        self.to_kafka = ToKafkaService(
            delivered,
            lake,
            DeliveryOptions(
                kafka=self.kafka,
                registry=registry,
                format=chosen,
                take_over=take_over,
                partitions=partitions,
                replication=replication,
                wait_for_pool=True,
            ),
            envelope=envelope,
        )
        self.apply: ApplyService | None = None
        if self.config.tables:
            self.apply = ApplyService(
                self.config, lake, versions_per_commit=versions_per_commit
            )
        if on_event is not None:
            for service in self.services.values():
                service.add_listener(on_event)

    def __repr__(self) -> str:
        return f"Pipeline({self.config.name!r}, {self.lake!r})"

    def _staged(self) -> None:
        """The ETL committed to staging: deliver and apply it now."""
        self.to_kafka.wake()
        if self.apply is not None:
            self.apply.wake()

    @property
    def services(self) -> dict[str, AnyService]:
        """The loops by name: ``from-kafka``, ``etl``, ``to-kafka`` and, for a
        configuration with tables, ``apply``."""
        found: dict[str, AnyService] = {
            "from-kafka": self.from_kafka, "etl": self.etl, "to-kafka": self.to_kafka
        }
        if self.apply is not None:
            found["apply"] = self.apply
        return found

    def add_listener(self, listener: Callable[[ServiceEvent], None]) -> None:
        for service in self.services.values():
            service.add_listener(listener)

    def prepare(self) -> list[str]:
        """Create the configuration's pools that do not exist yet; returns notes."""
        from engine.lake.pools import RAW, STAGING  # deferred: deltalake

        notes: list[str] = []
        if not self.create_pools:
            return notes
        wanted = {i.pool: RAW for i in self.config.inputs}
        wanted.update({o.pool: STAGING for o in self.config.outputs})
        for name, kind in wanted.items():
            if not self.lake.exists(name):
                self.lake.create_pool(name, kind, exist_ok=True)
                notes.append(f"created {kind} pool {name!r} in {self.lake.location}")
        return notes

    def start(self, only: Iterable[str] | None = None) -> None:
        """Start the loops (all, or those named in ``only``: ``from-kafka``, ``etl``,
        ``to-kafka``, ``apply``), downstream first so nothing waits on a loop not started
        yet."""
        wanted = set(self.services) if only is None else set(only)
        unknown = wanted - set(self.services)
        if unknown == {"apply"}:
            raise ServiceError(
                f"{self.config.source} has no `tables:`, so there is no apply loop to run"
            )
        if unknown:
            raise ServiceError(
                f"unknown loop {sorted(unknown)[0]!r}: use {', '.join(self.services)}"
            )
        self.prepare()
        # the loops import pyspark's types as their threads start, and two threads (or a
        # loop and the API's) importing them at once may meet Python's import-lock
        # deadlock check: "deadlock detected by _ModuleLock('pyspark.sql.types')" left a
        # console with no loops. Imported here, in one thread, before any loop starts.
        import pyspark.sql.types  # noqa: F401

        for name in ("apply", "to-kafka", "etl", "from-kafka"):
            if name in wanted:
                self.services[name].start()

    def stop(self, timeout: float | None = 120.0) -> None:
        """Stop every loop, upstream first; each finishes its commit in flight."""
        for service in (self.from_kafka, self.etl, self.to_kafka, self.apply):
            if service is not None:
                service.stop(timeout)

    def status(self) -> dict[str, ServiceStatus[ServiceDetail]]:
        return {name: service.status() for name, service in self.services.items()}

    @property
    def running(self) -> bool:
        return any(service.running for service in self.services.values())

    def failed(self) -> Mapping[str, str]:
        """Services that failed, with their error."""
        return {
            name: status.last_error or "failed"
            for name, status in self.status().items()
            if status.state == FAILED
        }
