"""The snapshots an :class:`engine.observe.observer.Observer` returns: frozen values the
console renders and a script can print.

Lag, per topic and partition (:class:`TopicSnapshot`, see :mod:`engine.observe.lag`):
``lag_records`` (records in Kafka after the last offset the lake holds), ``lag_seconds``
(in Kafka time) and ``source_lag_seconds`` (in Debezium's source time).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

IN = "in"  # Kafka → lake (from-kafka)
OUT = "out"  # lake → Kafka (to-kafka)


@dataclass(frozen=True)
class TopicSnapshot:
    """One topic partition as the lake and Kafka see it."""

    topic: str
    partition: int
    pool: str | None
    direction: str = IN
    low: int | None = None
    high: int | None = None
    lake_offset: int | None = None
    lag_records: int | None = None
    lag_seconds: float | None = None
    source_lag_seconds: float | None = None
    rate: float | None = None
    history: tuple[float, ...] = ()
    dead_letters: int = 0
    error: str | None = None
    #: Outputs: the envelope to-kafka delivers in, and the staging topic carried.
    envelope: str | None = None
    staged: str | None = None
    #: Outputs: the last pool offset delivered to the topic (read from its tail), the
    #: same unit as ``lake_offset`` (the last staged): ``high`` stays Kafka's own.
    delivered_offset: int | None = None


@dataclass(frozen=True)
class TopicsReport:
    """Every topic partition the pipeline reads or writes, and what could not be seen."""

    taken_at: float
    topics: tuple[TopicSnapshot, ...] = ()
    kafka_error: str | None = None
    registry_error: str | None = None
    lake_error: str | None = None

    @property
    def errors(self) -> list[str]:
        return [e for e in (self.lake_error, self.kafka_error, self.registry_error) if e]


@dataclass(frozen=True)
class DeadLetter:
    """A record from-kafka could not decode or shape, kept in its pool."""

    pool: str
    topic: str
    partition: int
    offset: int
    stage: str | None
    error: str | None
    key_bytes: bytes | None
    value_bytes: bytes | None
    seqno: int | None = None

    def full_record(self) -> dict[str, Any]:
        """The dead letter as JSON-able data (bytes shown as text when they are UTF-8)."""
        return {
            "pool": self.pool,
            "kafka": {"topic": self.topic, "partition": self.partition, "offset": self.offset},
            "seqno": self.seqno,
            "stage": self.stage,
            "error": self.error,
            "key_bytes": _show_bytes(self.key_bytes),
            "value_bytes": _show_bytes(self.value_bytes),
        }


@dataclass(frozen=True)
class EtlSnapshot:
    """One ETL rule and one of its input partitions."""

    etl: str
    rule: str
    topic: str
    partition: int
    cursor: int | None
    processed: int
    pending: int
    expired: int


@dataclass(frozen=True)
class RecordRow:
    """A pending or expired input record, with its full record."""

    etl: str
    topic: str
    partition: int
    offset: int
    key: str
    rule: str
    age_seconds: float | None
    status: str
    full_record: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EtlReport:
    """The ETL's positions and waiting records, from one staging snapshot."""

    taken_at: float
    rows: tuple[EtlSnapshot, ...] = ()
    pending: tuple[RecordRow, ...] = ()
    expired: tuple[RecordRow, ...] = ()
    staging_version: int | None = None
    error: str | None = None


def _show_bytes(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.hex()

