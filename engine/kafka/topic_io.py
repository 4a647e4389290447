"""Whole-topic operations for the CLI and the demo: watermarks, a topic's records, sending
encoded records, the librdkafka version.

Each opens its own client from a :class:`~engine.settings.kafka.KafkaProfile` and closes
it before returning, so callers hold profiles and plain data (:class:`TopicMessage`,
:class:`SendReport`), never a Kafka client or a librdkafka message.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import confluent_kafka
from confluent_kafka import KafkaError, Message, TopicPartition

from engine.kafka.clients import consumer, producer, topic_partitions
from engine.kafka.watermarks import watermarks
from engine.settings.kafka import KafkaProfile


def librdkafka_version() -> str:
    """The version of the librdkafka the Kafka clients run on."""
    return str(confluent_kafka.libversion()[0])


def topic_watermarks(
    profile: KafkaProfile, topic: str, partitions: list[int] | None = None, timeout: float = 10.0
) -> dict[int, tuple[int, int]]:
    """Low and high watermark of each of ``partitions`` (default: all) of ``topic``."""
    if partitions is None:
        partitions = topic_partitions(profile, topic, timeout)
    kafka = consumer(profile)
    try:
        return watermarks(kafka, topic, partitions, timeout)
    finally:
        kafka.close()


@dataclass(frozen=True)
class TopicMessage:
    """One record read from a topic: where it sits, its key and value bytes."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def read_topic(
    profile: KafkaProfile, topic: str, parts: list[int], timeout: float = 5.0
) -> list[TopicMessage]:
    """The committed records of ``parts`` of ``topic`` (read_committed), from each
    partition's start, until the topic has been quiet for a second or ``timeout`` passed."""
    kafka = consumer(profile, extra={"isolation.level": "read_committed"})
    rows: list[TopicMessage] = []
    try:
        marks = watermarks(kafka, topic, parts)
        if all(high <= low for low, high in marks.values()):
            return []
        kafka.assign([TopicPartition(topic, p, marks[p][0]) for p in parts])
        # Tansu's high watermark can stop short of the log's end
        # (docs/design.md#the-embedded-stack): read until the topic has been quiet
        # for a moment instead of up to the watermark.
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - quiet_since < 1.0:
            message = kafka.poll(0.2)
            if message is None or message.error():
                continue
            quiet_since = time.monotonic()
            rows.append(
                TopicMessage(message.partition() or 0, message.offset() or 0,
                             message.key(), message.value())
            )
    finally:
        kafka.close()
    return rows


@dataclass(frozen=True)
class OutgoingRecord:
    """An encoded record to send: its topic, key and value bytes, and Kafka timestamp in
    milliseconds (0: the producer's now)."""

    topic: str
    key: bytes | None
    value: bytes | None
    timestamp_ms: int = 0


@dataclass
class SendReport:
    """What the broker did not take: librdkafka's error texts, records unacknowledged."""

    errors: list[str] = field(default_factory=list)
    unacknowledged: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors and not self.unacknowledged


def send(profile: KafkaProfile, records: Iterable[OutgoingRecord], flush_timeout: float = 30.0) -> SendReport:
    """Send ``records`` in order (an idempotent producer) and wait up to ``flush_timeout``
    seconds for the broker to acknowledge them."""
    kafka = producer(profile)
    report = SendReport()

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            report.errors.append(error.str())

    topic = None
    for record in records:
        if topic is not None and record.topic != topic:
            kafka.poll(0)
        topic = record.topic
        kafka.produce(record.topic, key=record.key, value=record.value, on_delivery=delivered,
                      timestamp=record.timestamp_ms)
    kafka.poll(0)
    report.unacknowledged = kafka.flush(flush_timeout)
    return report
