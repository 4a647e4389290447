"""The to-kafka service: one continuous :class:`engine.deliver.loop.Delivery` per output
(:class:`engine.deliver.loop.Output`), each in its own thread inside the service's.

A delivery's events become the service's (``delivered`` ones are counted as commits);
the first delivery that fails stops the others and fails the service. ``detail`` is the
tuple of every delivery's :class:`engine.deliver.status_board.DeliveryStatus`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from engine.services.report import (
    KAFKA,
    RECORDS_OUT,
    Dependency,
    LoopReport,
    Metric,
    Reading,
    as_json,
    readings,
)
from engine.services.service import RUNNING, Service, ServiceEvent, ServiceStatus
from engine.spark import SparkSource, spark_factory

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.deliver.loop import Delivery, DeliveryOutput
    from engine.deliver.status_board import DeliveryEvent, DeliveryStatus
    from engine.lake.pools import Lake
    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile


BYTES_OUT = Metric(
    "bytes_out_total", "counter", "Bytes of the message values to-kafka produced, per topic."
)
DELIVERY_LAG = Metric(
    "delivery_lag_records",
    "gauge",
    "Records staged for an output and not delivered yet: staged - delivered pool offset.",
)
STAGED = Metric("delivery_staged_offset", "gauge", "The last pool offset staged for an output.")
DELIVERED = Metric(
    "delivery_delivered_offset", "gauge", "The last pool offset delivered to an output's topic."
)


class ToKafkaService(Service["tuple[DeliveryStatus, ...]"]):
    """Continuous delivery of each output to Kafka, one thread each; each in its own
    envelope unless ``envelope`` names one for all."""

    name = "to-kafka"

    def __init__(
        self,
        outputs: Iterable[DeliveryOutput],
        lake: Lake,
        *,
        kafka: KafkaProfile,
        registry: RegistryProfile | None = None,
        format: str = "avro",  # noqa: A002 - the option's name
        envelope: str | None = None,
        take_over: bool = False,
        partitions: int = 1,
        replication: int = 1,
        shaper: str | Path | None = None,
        spark: SparkSource = None,
        poll_interval: float | None = None,
        batch_records: int | None = None,
        wait_for_pool: bool = True,
        on_event: Callable[[ServiceEvent], None] | None = None,
    ) -> None:
        super().__init__(on_event=on_event)
        self.outputs = list(outputs)
        self.lake = lake
        self.kafka = kafka
        self.registry = registry
        self.format = format
        self.envelope = envelope
        self.take_over = take_over
        self.partitions = partitions
        self.replication = replication
        self.shaper = shaper
        self._spark: Callable[[], SparkSession] | None = (
            spark_factory(spark) if shaper is not None else None
        )
        self.poll_interval = poll_interval  # None: the delivery's default
        self.batch_records = batch_records  # None: the delivery's default
        self.wait_for_pool = wait_for_pool  # False: a missing staging pool fails the loop
        self._deliveries: list[Delivery] = []

    def deliveries(self) -> list[Delivery]:
        return list(self._deliveries)

    def wake(self) -> None:
        """The staging pool has a new commit (this process's ETL made it): look now
        instead of at the next poll."""
        for delivery in self._deliveries:
            delivery.wake()

    _wake = wake

    def _detail(self) -> tuple[DeliveryStatus, ...]:
        return tuple(d.status() for d in self._deliveries)

    def _run(self, stop: threading.Event) -> None:
        # deferred: the delivery loop loads the codecs, confluent_kafka and deltalake
        from engine.deliver.loop import (
            POLL_INTERVAL,
            deliveries_of,
            heartbeat_of,
            run_deliveries,
        )

        extra = {} if self.batch_records is None else {"batch_records": self.batch_records}
        self._deliveries = deliveries_of(
            self.lake,
            self.outputs,
            self.envelope,
            kafka=self.kafka,
            registry=self.registry,
            format=self.format,
            take_over=self.take_over,
            partitions=self.partitions,
            replication=self.replication,
            shaper=self.shaper,
            spark=self._spark,
            poll_interval=POLL_INTERVAL if self.poll_interval is None else self.poll_interval,
            wait_for_pool=self.wait_for_pool,
            **extra,
        )
        for delivery in self._deliveries:
            self.heartbeat.adopt(heartbeat_of(delivery))
        self._running()
        run_deliveries(self._deliveries, stop, self._delivery_event, continuous=True)

    def _delivery_event(self, event: DeliveryEvent) -> None:
        if event.kind == "delivered":
            self._committed(event.version, event.records, event.topic)
        if event.kind == "failed":
            return  # the service reports the failure itself
        if event.kind in ("unreachable", "back"):  # an outage of Kafka began or ended
            self._failed_softly(event.message if event.kind == "unreachable" else None)
        fields: dict[str, object] = {"topic": event.topic}
        if event.kind == "delivered":
            fields.update(
                records=event.records, first_offset=event.first_offset,
                last_offset=event.last_offset, version=event.version,
            )  # fmt: skip
        if event.kind in ("unreachable", "back"):
            fields["dependency"] = KAFKA
        self._event(event.kind, event.message, **fields)

    def report(self, status: ServiceStatus[tuple[DeliveryStatus, ...]]) -> LoopReport:
        deliveries = status.detail or ()
        found: list[Reading | None] = []
        not_ready = []
        for d in deliveries:
            found += [
                RECORDS_OUT.at(d.records_delivered, topic=d.topic),
                BYTES_OUT.at(d.bytes_delivered, topic=d.topic),
                DELIVERY_LAG.at(d.lag, output=d.topic),
                STAGED.at(d.staged_offset, output=d.topic),
                DELIVERED.at(d.delivered_offset, output=d.topic),
            ]
            if d.state == "starting" and status.state == RUNNING:
                not_ready.append(f"to-kafka: {d.topic} has not reached Kafka and its pool yet")
        down = [d.last_error or d.topic for d in deliveries if d.unreachable_since is not None]
        if down:
            kafka = Dependency(KAFKA, False, down[0])
        else:
            reached = bool(deliveries) and all(d.state != "starting" for d in deliveries)
            kafka = Dependency(KAFKA, True if reached else None)
        return LoopReport(
            detail={"deliveries": as_json(deliveries)},
            readings=readings(*found),
            dependencies=(kafka,),
            not_ready=tuple(not_ready),
        )
