"""The to-kafka service: one continuous :class:`engine.deliver.loop.Delivery` per output
(:class:`engine.deliver.loop.DeliveryOutput`, all with one
:class:`engine.deliver.delivery_options.DeliveryOptions`), each in its own thread inside the service's.

A delivery's events become the service's (``delivered`` ones are counted as commits);
the first delivery that fails stops the others and fails the service. ``detail`` is the
tuple of every delivery's :class:`engine.deliver.status_board.DeliveryStatus`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
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

if TYPE_CHECKING:

    from engine.deliver.delivery_options import DeliveryOptions
    from engine.deliver.loop import Delivery, DeliveryOutput
    from engine.deliver.status_board import DeliveryEvent, DeliveryStatus
    from engine.lake.pools import Lake


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
        options: DeliveryOptions,
        *,
        envelope: str | None = None,
        on_event: Callable[[ServiceEvent], None] | None = None,
    ) -> None:
        super().__init__(on_event=on_event)
        self.outputs = list(outputs)
        self.lake = lake
        self.options = options
        self.envelope = envelope
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
        from engine.deliver.deliveries import deliveries_of, run_deliveries
        from engine.deliver.loop import heartbeat_of

        self._deliveries = deliveries_of(self.lake, self.outputs, self.options, self.envelope)
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
