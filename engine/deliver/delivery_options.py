"""What to-kafka is asked to do, apart from which outputs: one :class:`DeliveryOptions`
for every output a delivery runs (the counterpart of from-kafka's IngestOptions)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile

#: Outputs one process delivers at most: each holds a Kafka producer, and confluent-kafka's
#: binding takes one of the process's 1,024 thread-local keys per client (the 1,012th
#: client fails); the rest is kept for the clients deliveries open while they start.
MOST_OUTPUTS = 900
#: Records per Kafka transaction (a transaction also never spans a partial read).
BATCH_RECORDS = 100_000
#: How often the staging pool's Delta log is polled in continuous mode, in seconds.
POLL_INTERVAL = 0.2


@dataclass(frozen=True)
class DeliveryOptions:
    """How :class:`~engine.deliver.loop.Delivery` delivers each output.

    * ``kafka``/``registry``: where to (the registry is needed by the avro format);
    * ``format``: ``avro``, ``connect-json`` or ``json``;
    * ``take_over``: deliver even to a topic another staging pool wrote last, a recreated
      one, or one whose committed position expired (docs/design.md#where-delivery-stands);
    * ``shaper``: a ``.sql`` file or SQL text reshaping each record (Spark, from ``spark``);
    * ``partitions``/``replication``: of an output topic this delivery creates;
    * ``poll_interval``: seconds between looks at the staging pool's log when nothing
      wakes the delivery; ``batch_records``: records per Kafka transaction at most;
    * ``wait_for_pool``: a missing staging pool is waited for (continuous mode) rather
      than an error.
    """

    kafka: KafkaProfile
    registry: RegistryProfile | None = None
    format: str = "avro"
    take_over: bool = False
    shaper: str | Path | None = None
    partitions: int = 1
    replication: int = 1
    poll_interval: float = POLL_INTERVAL
    batch_records: int = BATCH_RECORDS
    spark: Callable[[], SparkSession] | None = None
    wait_for_pool: bool = False
