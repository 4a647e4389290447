"""The ``debezium`` envelope: each output record as a Debezium change event.

The Kafka key is the output key; the value mirrors the value of Debezium's change
events (``before``, ``after``, ``source``, ``op``, ``ts_ms``):

* ``op`` ``c`` for the first image of a key (or an image after a delete), ``before``
  null; ``u`` for a later image, ``before`` the key's previous image in staging;
* a tombstone output (null value) gives ``op`` ``d``, ``before`` the key's last image
  (null when the key had none), ``after`` null, followed by a Kafka tombstone for the
  key, as Debezium's ``tombstones.on.delete`` does (a record without a key gives no
  tombstone);
* ``source`` names zync (``connector`` ``zync``, ``version`` its version), the staging
  pool (``name``), the pool's Delta version the event was read at (``pool_version``) and
  the output's pool offset (``offset``); ``ts_ms`` is when zync made the event.

Formats: Avro (the value schema is a record named ``Envelope`` in a namespace derived
from the topic, as Debezium's ``<prefix>.<schema>.<table>.Envelope``; ``before`` and
``after`` are nullable ``Value`` records of the output value type, ``source`` a record
``zync.Source``; registered under ``<topic>-key`` and ``<topic>-value``), Connect JSON
(``{schema, payload}``, the same shape as Debezium's JsonConverter) and JSON (the
payload alone).

Previous images come from staging (:mod:`~engine.deliver.envelopes.images`). Every
message carries its position (``zync.offset``; ``zync.step`` 0 for the event, 1 for
the tombstone) and the pool's identity; records are read and built in offset order, in
transactions of at most ``batch_records`` records.
"""

from __future__ import annotations

import json
import struct
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from engine import __version__
from engine.deliver.envelopes.base import Envelope, Parts, Send
from engine.deliver.envelopes.images import Images
from engine.deliver.errors import DeliveryError
from engine.deliver.positions import HEADER_OFFSET, HEADER_STEP, Headers, Position
from engine.deliver.rows import Batch, Rows
from engine.kafka.codecs.avro_binary import zigzag_long
from engine.kafka.codecs.formats import Format
from engine.kafka.typemap.from_spark import avro_name, spark_to_avro, spark_to_connect

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

    from engine.deliver.transactions import Transactions

EVENT, TOMBSTONE = 0, 1
CONNECTOR = "zync"
SOURCE_NAMESPACE = "zync"

#: One message to make: (partition, offset, step, key text, before, after, op).
Change = tuple[int, int, int, "str | None", "str | None", "str | None", str]


class DebeziumEnvelope(Envelope):
    """``{before, after, source, op, ts_ms}`` change events, and tombstones after deletes."""

    name = "debezium"

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.message_prefix = b""  # Avro wire header / Connect schema of the events
        self.latest = Images()
        self.read_version = 0  # the staging version being delivered (source.pool_version)

    def images(self) -> Iterable[str]:
        return self.latest.values()

    def resume(self, found: Mapping[int, Position | None]) -> None:
        # from the lowest position: every partition is delivered up to it; the ledger
        # leaves out what a partition already holds
        ledger = self.parts.ledger
        lowest = ledger.lowest()
        self.next_offset = lowest if ledger.complete() and lowest is not None else 0

    def register(self, key_type: DataType | None, value_type: DataType | None) -> None:
        key_codec, _ = self.codecs()
        topic = self.parts.topic
        namespace = avro_namespace(topic)
        self.message_prefix = b""
        if self.parts.format is Format.AVRO:
            schemas = self.schemas()
            if key_codec.avro is not None:
                key_codec.schema_id = schemas.register(f"{topic}-key", key_codec.avro_schema)
            if value_type is not None:
                schema = debezium_schema(namespace, spark_to_avro(value_type, "Value"))
                schema_id = schemas.register(f"{topic}-value", schema)
                self.message_prefix = struct.pack(">bI", 0, schema_id)
        elif self.parts.format is Format.CONNECT_JSON:
            value = None if value_type is None else spark_to_connect(value_type)
            schema = debezium_connect_schema(namespace, value)
            self.message_prefix = (
                b'{"schema":' + json.dumps(schema, separators=(",", ":")).encode() + b',"payload":'
            )

    def deliver(self, since: int, version: int, stop: threading.Event, send: Send) -> bool:
        self.read_version = version
        for table in self._tables(since, version):
            for chunk in self.slices(self.take_rows(table)):
                if stop.is_set():
                    return False  # the transaction in flight is done; the rest waits
                started = time.monotonic()
                send(chunk, self.make_batch(chunk), started)
        return True

    def _tables(self, since: int, version: int) -> Iterator[pa.Table]:
        reader = self.parts.reader
        if since < 0:
            self.latest.load(self.parts, self.next_offset)
            yield from reader.snapshot_tables(self.next_offset)
            return
        changes = reader.changes(since + 1, version)
        yield changes.filter(pc.greater_equal(changes.column("offset"), self.next_offset))

    def build(self, rows: Rows) -> Batch:
        """The change event of each record (and a tombstone after a delete) not delivered
        yet."""
        ledger = self.parts.ledger
        moves = self.latest.moves()  # applied once the messages are built
        plan: list[Change] = []
        for offset, key, value in zip(
            rows.offsets, rows.keys.to_pylist(), rows.values.to_pylist(), strict=True
        ):
            before = moves.move(key, value)
            partition = ledger.partition_of(key, offset)
            if value is not None:
                op = "c" if before is None else "u"
                plan.append((partition, offset, EVENT, key, before, value, op))
                continue
            plan.append((partition, offset, EVENT, key, before, None, "d"))
            if key is not None:
                plan.append((partition, offset, TOMBSTONE, key, None, None, ""))
        plan = [c for c in plan if not ledger.delivered(c[0], c[1], c[2])]
        key_codec, _ = self.codecs()
        keys = key_codec.encode([c[3] for c in plan])
        values = self._values(plan)
        moves.apply()
        return Batch(
            [c[1] for c in plan],
            keys,
            values,
            partitions=[c[0] for c in plan],
            steps=[c[2] for c in plan],
        )

    def _values(self, plan: Sequence[Change]) -> list[bytes | None]:
        events = [c for c in plan if c[2] == EVENT]
        stamp = int(time.time() * 1000)
        if self.parts.format is Format.AVRO:
            made = iter(self._avro_events(events, stamp))
        else:
            made = iter(self._json_events(events, stamp))
        return [next(made) if c[2] == EVENT else None for c in plan]

    def _avro_events(self, events: Sequence[Change], stamp: int) -> list[bytes]:
        _, value_codec = self.codecs()
        if not events:
            return []
        if value_codec.avro is None or not self.message_prefix:
            raise DeliveryError(
                f"{self.parts.topic}: the staging pool records no value type for the topic "
                "(use --format json)"
            )
        texts = [c[4] for c in events] + [c[5] for c in events]
        bodies = value_codec.bodies(texts)
        befores, afters = bodies[: len(events)], bodies[len(events) :]
        head = self.message_prefix
        source = _avro_string(__version__) + _avro_string(CONNECTOR)
        source += _avro_string(self.parts.identity.name) + zigzag_long(self.read_version)
        tail = b"\x02" + zigzag_long(stamp)
        return [
            head
            + _avro_optional(before)
            + _avro_optional(after)
            + source
            + zigzag_long(c[1])
            + _avro_string(c[6])
            + tail
            for c, before, after in zip(events, befores, afters, strict=True)
        ]

    def _json_events(self, events: Sequence[Change], stamp: int) -> list[bytes]:
        source = json.dumps(
            {
                "version": __version__,
                "connector": CONNECTOR,
                "name": self.parts.identity.name,
                "pool_version": self.read_version,
            },
            separators=(",", ":"),
        )[:-1]
        connect = self.parts.format is Format.CONNECT_JSON
        prefix, suffix = (self.message_prefix, b"}") if connect else (b"", b"")
        return [
            prefix
            + (
                f'{{"before":{c[4] or "null"},"after":{c[5] or "null"},'
                f'"source":{source},"offset":{c[1]}}},"op":"{c[6]}","ts_ms":{stamp}}}'
            ).encode()
            + suffix
            for c in events
        ]

    def write(self, batch: Batch, out: Transactions) -> None:
        """Every message carries its position (offset and step) and the pool's identity."""
        assert batch.steps is not None
        for value, key, offset, partition, step in zip(
            batch.values,
            batch.keys,
            batch.offsets,
            batch.partition_list(),
            batch.steps,
            strict=True,
        ):
            headers: Headers = {
                HEADER_OFFSET: b"%d" % offset,
                HEADER_STEP: b"%d" % step,
                **self.identity,
            }
            out.send(value, key, partition, headers)


def _avro_string(text: str) -> bytes:
    data = text.encode("utf-8")
    return zigzag_long(len(data)) + data


def _avro_optional(body: bytes | None) -> bytes:
    """A ``["null", X]`` union: branch 0 (null) or branch 1 and X's body."""
    return b"\x00" if body is None else b"\x02" + body


def avro_namespace(topic: str) -> str:
    """An Avro namespace from a topic name: its dot-separated parts made valid names
    (``shop.public.Invoices`` stays, as Debezium's topics and namespaces go)."""
    return ".".join(avro_name(part) for part in topic.split("."))


def debezium_schema(namespace: str, value: Any) -> dict[str, Any]:
    """The Avro schema of the change events of ``namespace`` (from the topic), ``value``
    being the output value's Avro schema (a record named ``Value``)."""
    if isinstance(value, dict) and value.get("type") == "record":
        value = {**value, "connect.name": f"{namespace}.Value"}
        later: Any = f"{namespace}.Value"
    else:
        later = value
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": namespace,
        "fields": [
            {"name": "before", "type": ["null", value], "default": None},
            {"name": "after", "type": ["null", later], "default": None},
            {"name": "source", "type": SOURCE_SCHEMA},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
        ],
        "connect.name": f"{namespace}.Envelope",
    }


SOURCE_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Source",
    "namespace": SOURCE_NAMESPACE,
    "fields": [
        {"name": "version", "type": "string"},
        {"name": "connector", "type": "string"},
        {"name": "name", "type": "string"},
        {"name": "pool_version", "type": "long"},
        {"name": "offset", "type": "long"},
    ],
    "connect.name": f"{SOURCE_NAMESPACE}.Source",
}


def debezium_connect_schema(namespace: str, value: dict[str, Any] | None) -> dict[str, Any]:
    """The Kafka Connect schema of the change events (as Debezium's JsonConverter
    writes it); ``value`` is the output value's Connect schema (None: unknown)."""
    row = {**(value or {"type": "string"}), "optional": True}
    if row.get("type") == "struct":
        row["name"] = f"{namespace}.Value"
    source = {
        "type": "struct",
        "fields": [
            {"type": "string", "optional": False, "field": "version"},
            {"type": "string", "optional": False, "field": "connector"},
            {"type": "string", "optional": False, "field": "name"},
            {"type": "int64", "optional": False, "field": "pool_version"},
            {"type": "int64", "optional": False, "field": "offset"},
        ],
        "optional": False,
        "name": f"{SOURCE_NAMESPACE}.Source",
        "field": "source",
    }
    return {
        "type": "struct",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            source,
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
        "optional": False,
        "name": f"{namespace}.Envelope",
    }


ENVELOPE = DebeziumEnvelope
