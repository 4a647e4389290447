"""Read a topic as decoded records: what ``zync consume`` does, as a library.

:func:`consume` yields one dict per Kafka record, in the shape pools use::

    {"kafka": {"topic", "partition", "offset", "timestamp"}, "key": ..., "value": ...}

``key`` and ``value`` are JSON-able (see :mod:`engine.kafka.codecs.formats`); ``timestamp`` is
milliseconds since the epoch (None when the broker gave none).

Where to start: the beginning of every partition, a given offset, the end (only new
records: the default, from the broker's high watermark), or a consumer group's committed
position (``group``; offsets of the records handed out are committed as it goes, so the
group resumes after them).

Formats: ``auto`` (the default) looks at each record (:func:`engine.kafka.codecs.detect.sniff`):
magic byte 0 and a schema registry → Confluent Avro; a ``{"schema", "payload"}`` object →
Kafka Connect JSON; anything else → JSON (for keys, text that is not JSON is taken as a plain string, as keys often are).
A fixed format (``avro``, ``connect-json``, ``json``) decodes exactly that.

A record that cannot be decoded does not stop the stream: it is reported as a
:class:`BadRecord` (topic, partition, offset, which part, why) to ``on_error`` and
skipped; with ``strict`` it raises :class:`UndecodableRecord` instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from engine.errors import ZyncError
from engine.kafka.codecs import avro, connect_json, plain_json
from engine.kafka.codecs.decoder import RecordDecoder
from engine.kafka.codecs.detect import sniff
from engine.kafka.codecs.errors import DecodeError
from engine.kafka.codecs.formats import Format, SchemaLookup
from engine.settings.kafka import KafkaProfile

AUTO = "auto"
BEGINNING = "beginning"
END = "end"

#: Seconds each poll waits, so a stop request or Ctrl-C is seen quickly.
POLL_SECONDS = 0.2
#: How long a consumer group may take to hand out partitions before we give up, on top
#: of ``exit_after`` (only when ``exit_after`` is set; otherwise we wait as asked).
GROUP_JOIN_SECONDS = 60.0


class UndecodableRecord(ZyncError):
    """A record could not be decoded and the consumer was asked to be strict."""

    def __init__(self, bad: BadRecord) -> None:
        super().__init__(str(bad))
        self.bad = bad


class ConsumeError(ZyncError):
    """Kafka reported an error that stops consumption."""


@dataclass(frozen=True)
class BadRecord:
    """A record whose key or value could not be decoded."""

    topic: str
    partition: int
    offset: int
    part: str  # "key" or "value"
    error: DecodeError

    def __str__(self) -> str:
        return (
            f"cannot decode the {self.part} of topic {self.topic} partition {self.partition} "
            f"offset {self.offset}: {self.error}"
        )


@dataclass(frozen=True)
class ConsumeOptions:
    """What to read and when to stop."""

    topic: str
    start: str | int = END  # BEGINNING, END, or an offset (in every chosen partition)
    group: str | None = None
    partitions: tuple[int, ...] | None = None  # None: all
    max_records: int | None = None
    exit_after: float | None = None  # seconds without a new record
    value_format: str = AUTO  # AUTO or a Format value
    key_format: str = AUTO
    strict: bool = False
    timeout: float = 10.0  # reaching the broker


class PartDecoder:
    """Decodes keys or values in one format, or detecting it record by record (``auto``)."""

    def __init__(self, fmt: str, lookup: SchemaLookup | None, *, part: str = "value") -> None:
        self.part = part
        self.auto = fmt == AUTO
        self.format = None if self.auto else Format.parse(fmt)
        self.lookup = lookup
        self._avro = RecordDecoder(Format.AVRO, lookup) if lookup is not None else None
        self._fixed = (
            RecordDecoder(self.format, lookup)
            if self.format is not None and self.format is not Format.AVRO
            else None
        )

    def decode(self, data: bytes | None) -> Any:
        if data is None:
            return None
        sniffed = sniff(data) if self.auto else None
        if self.format is Format.AVRO or sniffed is Format.AVRO:
            return self._decode_avro(data)
        if self._fixed is not None:
            return self._fixed.decode(data)
        # auto: Connect JSON envelope, else plain JSON (else, for keys, text)
        try:
            value = plain_json.decode(data)
        except DecodeError:
            if self.part == "key":
                try:
                    return bytes(data).decode("utf-8")
                except UnicodeDecodeError:
                    pass
            raise
        if (
            sniffed is Format.CONNECT_JSON
            and isinstance(value, dict)
            and set(value) == {"schema", "payload"}
        ):
            return connect_json.decode(data, root=self.part).payload
        return value

    def _decode_avro(self, data: bytes) -> Any:
        if self._avro is None:
            schema_id, _ = avro.split(data)
            raise DecodeError(
                "unknown-schema-id",
                f"Confluent Avro (magic byte 0, schema id {schema_id}) but no Schema Registry "
                "is configured: set --registry-url or ZYNC_REGISTRY_URL",
            )
        return self._avro.decode(data)


def _start_offset(start: str | int) -> int:
    from confluent_kafka import OFFSET_END  # deferred: librdkafka

    from engine.kafka.clients import FIRST_OFFSET

    if start == BEGINNING:  # the consumer's auto.offset.reset is then earliest
        return FIRST_OFFSET
    if start == END:
        return int(OFFSET_END)
    if isinstance(start, int) and start >= 0:
        return start
    raise ValueError(f"start must be {BEGINNING!r}, {END!r} or an offset >= 0, not {start!r}")


def consume(
    profile: KafkaProfile,
    options: ConsumeOptions,
    *,
    schemas: SchemaLookup | None = None,
    on_error: Callable[[BadRecord], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Generator[dict[str, Any]]:
    """Decoded records of ``options.topic`` until ``max_records``, ``exit_after`` idle
    seconds, or ``should_stop()``; forever otherwise.

    Raises :class:`~engine.kafka.clients.KafkaUnavailable` (broker unreachable within
    ``options.timeout``), :class:`~engine.kafka.clients.TopicNotFound`,
    :class:`UndecodableRecord` (strict), :class:`ConsumeError`, and
    :class:`~engine.kafka.registry_client.RegistryUnavailable` when an Avro schema is needed and
    the registry cannot be reached. The consumer is closed when the iterator ends or is
    closed (also on Ctrl-C).
    """
    from engine.kafka.clients import consumer, topic_partitions  # deferred: librdkafka

    start = _start_offset(options.start)  # check before connecting
    if options.group and isinstance(options.start, int):
        raise ValueError("an offset and a consumer group do not go together")
    all_partitions = topic_partitions(profile, options.topic, options.timeout)
    chosen = list(options.partitions) if options.partitions is not None else all_partitions
    missing = sorted(set(chosen) - set(all_partitions))
    if missing:
        raise ConsumeError(
            f"topic {options.topic} has partitions 0-{len(all_partitions) - 1}, "
            f"not {', '.join(map(str, missing))}"
        )
    keys = PartDecoder(options.key_format, schemas, part="key")
    values = PartDecoder(options.value_format, schemas, part="value")
    return _records(profile, options, chosen, start, keys, values, on_error, should_stop, consumer)


def _records(
    profile: KafkaProfile,
    options: ConsumeOptions,
    partitions: list[int],
    start: int,
    keys: PartDecoder,
    values: PartDecoder,
    on_error: Callable[[BadRecord], None] | None,
    should_stop: Callable[[], bool] | None,
    make_consumer: Any,
) -> Generator[dict[str, Any]]:
    from confluent_kafka import KafkaError, TopicPartition  # deferred: librdkafka

    from engine.kafka.clients import look_at_cluster  # deferred: librdkafka
    from engine.kafka.watermarks import FIRST_FETCH_GRACE, fetched_watermarks

    assigned = options.group is None
    idle_since = time.monotonic()
    started = assigned_at = idle_since
    answered = False  # every partition read has answered a fetch (or the grace is over)

    def on_assign(_consumer: Any, _partitions: Any) -> None:
        nonlocal assigned, idle_since, assigned_at, answered
        assigned = True
        idle_since = assigned_at = time.monotonic()
        answered = False

    if options.group:
        kafka = make_consumer(
            profile,
            group=options.group,
            extra={
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 1000,
                "auto.offset.reset": "earliest" if options.start == BEGINNING else "latest",
            },
        )
        kafka.subscribe([options.topic], on_assign=on_assign)
    else:
        kafka = make_consumer(profile)
        look_at_cluster(kafka)  # else it fetches nothing before its next scan
        kafka.assign([TopicPartition(options.topic, p, start) for p in partitions])
    count = 0
    try:
        while options.max_records is None or count < options.max_records:
            if should_stop is not None and should_stop():
                return
            wanted = 500 if options.max_records is None else min(500, options.max_records - count)
            batch = kafka.consume(num_messages=wanted, timeout=POLL_SECONDS)
            now = time.monotonic()
            if not batch:
                if options.exit_after is not None:
                    if assigned and not answered:
                        # a partition not fetched from yet may hold records: no exit until
                        # every one answered before an empty poll (a fetch response sets
                        # the watermark a moment before its records reach the queue)
                        read = [(tp.topic, tp.partition) for tp in kafka.assignment()]
                        answered = (
                            len(fetched_watermarks(kafka, read)) == len(read)
                            or now - assigned_at >= FIRST_FETCH_GRACE
                        )
                    elif assigned and now - idle_since >= options.exit_after:
                        return
                    if not assigned and now - started >= options.exit_after + GROUP_JOIN_SECONDS:
                        raise ConsumeError(
                            f"consumer group {options.group} got no partitions of "
                            f"{options.topic} within {options.exit_after + GROUP_JOIN_SECONDS:g}s"
                        )
                continue
            idle_since = now
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    if error.fatal() or error.code() in (
                        KafkaError.UNKNOWN_TOPIC_OR_PART,
                        KafkaError.TOPIC_AUTHORIZATION_FAILED,
                        KafkaError._UNKNOWN_TOPIC,
                    ):
                        raise ConsumeError(f"reading {options.topic}: {error.str()}")
                    continue  # transient: librdkafka retries by itself
                count += 1
                record = _decode(message, keys, values, options.strict, on_error)
                if record is not None:
                    yield record
                if options.group:
                    kafka.store_offsets(message=message)
                if options.max_records is not None and count >= options.max_records:
                    return
    finally:
        kafka.close()


def _decode(
    message: Any,
    keys: PartDecoder,
    values: PartDecoder,
    strict: bool,
    on_error: Callable[[BadRecord], None] | None,
) -> dict[str, Any] | None:
    from confluent_kafka import TIMESTAMP_NOT_AVAILABLE  # deferred: librdkafka

    decoded: dict[str, Any] = {}
    for part, decoder, data in (("key", keys, message.key()), ("value", values, message.value())):
        try:
            decoded[part] = decoder.decode(data)
        except DecodeError as exc:
            bad = BadRecord(message.topic(), message.partition(), message.offset(), part, exc)
            if strict:
                raise UndecodableRecord(bad) from None
            if on_error is not None:
                on_error(bad)
            return None
    kind, timestamp = message.timestamp()
    return {
        "kafka": {
            "topic": message.topic(),
            "partition": message.partition(),
            "offset": message.offset(),
            "timestamp": None if kind == TIMESTAMP_NOT_AVAILABLE else timestamp,
        },
        "key": decoded["key"],
        "value": decoded["value"],
    }


def dumps(record: dict[str, Any]) -> str:
    """One record as a compact JSON line (non-ASCII kept as is)."""
    return plain_json.dumps(record)
