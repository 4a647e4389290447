"""Asking Kafka and the Schema Registry what a snapshot needs, within a timeout.

:class:`KafkaProbe` holds one consumer (dropped and made again after an error), asks for
the topics' partition counts and watermarks, checks that the registry answers, and reads
records back: the first record at an offset, or every record from an offset to the end
of its partition — to find a partition's real last offset (:meth:`KafkaProbe.tail`) and
records' times (the Kafka timestamp, and Debezium's ``source.ts_ms`` in the decoded
value). Both are cached: records never change.

Every failure is returned in words (or raised for the caller to word), never hidden.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.errors import one_line
from engine.kafka.codecs.detect import sniff
from engine.kafka.codecs.formats import Format
from engine.kafka.registry_client import RegistrySchemas

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message

    from engine.kafka.codecs.decoder import RecordDecoder
    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile

#: (Kafka timestamp in s, Debezium source.ts_ms) of one record.
Times = tuple[float | None, int | None]


def ts_seconds(value: Any) -> float | None:
    """A Kafka timestamp (``(type, ms)`` from confluent-kafka) in seconds."""
    if isinstance(value, tuple):
        kind, ms = value
        return None if kind == 0 or ms is None or ms < 0 else ms / 1000.0
    return None


def source_ts_ms(value: Any) -> int | None:
    """Debezium's ``source.ts_ms`` in a decoded change-event value, or None."""
    if isinstance(value, Mapping):
        payload = value.get("payload") if "payload" in value and "schema" in value else value
        if isinstance(payload, Mapping):
            source = payload.get("source")
            if isinstance(source, Mapping):
                ts = source.get("ts_ms")
                if isinstance(ts, int | float) and not isinstance(ts, bool):
                    return int(ts)
    return None


class KafkaProbe:
    """Kafka and the registry as snapshots see them (None profiles: not configured,
    and ``kafka_error``/``registry_error`` say why)."""

    def __init__(
        self,
        kafka: KafkaProfile | None,
        registry: RegistryProfile | None,
        *,
        timeout: float,
        kafka_error: str | None = None,
        registry_error: str | None = None,
    ) -> None:
        self.kafka = kafka
        self.registry = registry
        self.timeout = timeout
        self._kafka_config_error = kafka_error
        self._registry_config_error = registry_error
        self._consumer: Consumer | None = None
        self._decoder: RecordDecoder | None = None
        self._ts_cache: dict[tuple[str, int, int], Times] = {}
        self._tail_cache: dict[tuple[str, int, int], int] = {}

    # -- the consumer ---------------------------------------------------------------------

    def consumer(self) -> Consumer:
        if self._consumer is None:
            # deferred, like every heavy import of engine.observe (confluent-kafka here)
            from engine.kafka.clients import consumer

            assert self.kafka is not None
            self._consumer = consumer(
                self.kafka,
                extra={"socket.timeout.ms": str(int(self.timeout * 1000)), "isolation.level": "read_uncommitted"},
            )
        return self._consumer

    def drop(self) -> None:
        """Close the consumer (after an error: the next call makes a new one)."""
        if self._consumer is not None:
            with contextlib.suppress(Exception):  # closing a broken client
                self._consumer.close()
            self._consumer = None

    # -- questions ------------------------------------------------------------------------

    def partitions(self) -> tuple[dict[str, int] | None, str | None]:
        """``{topic: partition count}`` of the cluster, or None and why not."""
        if self.kafka is None:
            return None, self._kafka_config_error or "no Kafka configured"
        from engine.kafka.clients import check_reachable  # deferred (confluent-kafka)

        try:
            return check_reachable(self.kafka, timeout=self.timeout), None
        except Exception as exc:  # noqa: BLE001 - shown in words
            self.drop()
            return None, one_line(exc, limit=300)

    def registry_check(self) -> str | None:
        """Why the registry cannot be used, or None when it answers."""
        if self.registry is None:
            return self._registry_config_error
        import httpx  # deferred, like every heavy import of engine.observe

        try:
            response = httpx.get(
                self.registry.url.rstrip("/") + "/subjects",
                timeout=self.timeout,
                auth=self.registry.basic_auth(),
            )
        except Exception as exc:  # noqa: BLE001 - shown in words
            return f"cannot reach Schema Registry at {self.registry.url}: {one_line(exc, limit=300)}"
        if response.status_code != 200:
            return f"Schema Registry at {self.registry.url} answered {response.status_code}"
        return None

    def watermarks(self, topic: str, parts: list[int]) -> tuple[dict[int, tuple[int, int]], str | None]:
        """(low, high) per partition, or nothing and why not."""
        from engine.kafka.watermarks import watermarks  # deferred (confluent-kafka)

        try:
            return watermarks(self.consumer(), topic, parts, timeout=self.timeout), None
        except Exception as exc:  # noqa: BLE001 - shown in words
            self.drop()
            return {}, one_line(exc, limit=300)

    # -- records --------------------------------------------------------------------------

    def decode_value(self, data: bytes | None) -> Any:
        """A Kafka value as JSON-able data, whatever its format (None if it cannot be)."""
        if data is None:
            return None
        from engine.kafka.codecs.decoder import RecordDecoder  # deferred: fastavro

        try:
            if sniff(data) is Format.AVRO:
                if self.registry is None:
                    return None
                if self._decoder is None:
                    self._decoder = RecordDecoder(
                        Format.AVRO, RegistrySchemas(self.registry, timeout=self.timeout)
                    )
                return self._decoder.decode(data)
            return RecordDecoder(Format.JSON).decode(data)
        except Exception:  # noqa: BLE001 - lag in source time is best effort
            return None

    def read_from(self, topic: str, partition: int, offset: int, *, to_end: bool) -> list[Message]:
        """Messages of one partition from ``offset``: the first one, or (``to_end``) every
        one until the partition's end (a poll that brings nothing)."""
        from confluent_kafka import TopicPartition  # deferred (confluent-kafka)

        kafka = self.consumer()
        kafka.assign([TopicPartition(topic, partition, offset)])
        found: list[Message] = []
        deadline = time.monotonic() + self.timeout
        try:
            while time.monotonic() < deadline:
                message = kafka.poll(0.3 if found else min(1.0, self.timeout))
                if message is None:
                    if found:
                        break
                    continue
                if message.error():
                    break
                got = message.offset()
                if message.topic() != topic or message.partition() != partition or got is None or got < offset:
                    continue
                found.append(message)
                if not to_end:
                    break
        finally:
            kafka.unassign()
        return found

    def times(self, message: Message) -> Times:
        return ts_seconds(message.timestamp()), source_ts_ms(self.decode_value(message.value()))

    def record_times(self, topic: str, partition: int, offset: int) -> Times:
        """(Kafka timestamp in s, Debezium source.ts_ms) of one record; cached."""
        key = (topic, partition, offset)
        cached = self._ts_cache.get(key)
        if cached is not None:
            return cached
        found = self.read_from(topic, partition, offset, to_end=False)
        times = self.times(found[0]) if found else (None, None)
        if found:
            self._remember(key, times)
        return times

    def _remember(self, key: tuple[str, int, int], times: Times) -> None:
        if len(self._ts_cache) > 10_000:
            self._ts_cache.clear()
        self._ts_cache[key] = times

    def tail(self, topic: str, partition: int, low: int, high: int) -> int:
        """The partition's last offset. Tansu can report the base offset of the last batch
        as the high watermark (docs/design.md#the-embedded-stack), so the tail is read from
        ``high - 1`` to the end once per reported watermark, and remembered."""
        key = (topic, partition, high)
        cached = self._tail_cache.get(key)
        if cached is not None:
            return cached
        if high <= low:
            return high - 1
        found = self.read_from(topic, partition, high - 1, to_end=True)
        last = high - 1
        for message in found:
            offset = message.offset()
            assert offset is not None  # a consumed message has one
            self._remember((topic, partition, offset), self.times(message))
            last = max(last, offset)
        if found:
            self._tail_cache[key] = last
        return last
