"""The invoice scenario's outputs where they land: in the Staging pool and on the topic.

:class:`ScenarioOutputs` reads the ``NewInvoices`` records the ETL staged (through
delta-rs) and those to-kafka delivered (decoded: Avro through the registry, JSON as is),
as JSON-able data: what ``zync demo --no-tui`` waits for and reports.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from engine.api import (
    Format,
    KafkaProfile,
    Lake,
    RecordDecoder,
    RegistrySchemas,
    ZyncError,
    read_topic,
    sniff_format,
    staged_outputs,
    topic_partitions,
)

STAGING_POOL = "Staging"
OUTPUT_TOPIC = "NewInvoices"


class ScenarioOutputs:
    """The scenario's outputs on one lake and broker; ``registry`` gives the registry
    client that decodes Avro records (made when first needed)."""

    def __init__(
        self, lake: Lake, kafka: KafkaProfile | None, registry: Callable[[], RegistrySchemas]
    ) -> None:
        self.lake = lake
        self.kafka = kafka
        self.registry = registry

    def in_staging(self, topic: str = OUTPUT_TOPIC) -> list[dict[str, Any]]:
        """The output records of ``topic`` in Staging, by offset (through delta-rs)."""
        if not self.lake.exists(STAGING_POOL):
            return []
        return [
            {
                "offset": r.offset,
                "key": json.loads(r.key) if r.key else None,
                "value": json.loads(r.value) if r.value else None,
            }
            for r in staged_outputs(self.lake.open_pool(STAGING_POOL), topic)
        ]

    def on_topic(self, topic: str = OUTPUT_TOPIC, timeout: float = 5.0) -> list[dict[str, Any]]:
        """The records on the Kafka topic, decoded (key and value as JSON-able data)."""
        assert self.kafka is not None
        try:
            parts = topic_partitions(self.kafka, topic, timeout=timeout)
        except ZyncError:
            return []
        decoder = RecordDecoder(Format.AVRO, self.registry())
        json_decoder = RecordDecoder(Format.JSON)

        def decode(data: bytes | None) -> Any:
            if data is None:
                return None
            try:
                avro = sniff_format(data) is Format.AVRO
                return decoder.decode(data) if avro else json_decoder.decode(data)
            except ZyncError:
                return data.decode("utf-8", "replace")

        return [
            {
                "partition": m.partition,
                "offset": m.offset,
                "key": decode(m.key),
                "value": decode(m.value),
            }
            for m in read_topic(self.kafka, topic, parts, timeout)
        ]
