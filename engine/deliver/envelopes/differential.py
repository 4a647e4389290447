"""The ``differential`` envelope (Materialize CDCv2-style).

Every staging commit (Delta version) that holds records of the topic is one **time**.
Each record yields updates, then each time is closed by a progress message. Kafka key:
the record's key for updates, none for progress messages. Kafka value (Avro record
``<topic>_message``; JSON and Connect JSON carry the same fields)::

    {"update": {"record": {"key": K, "value": V}, "time": T, "diff": D},
     "progress": null}
    {"update": null, "progress": {"time": T, "count": N}}

* a record whose key had an image before (the latest non-tombstone value of that key in
  staging) yields ``diff -1`` for that old image (``zync.step`` 0), then, unless it is a
  tombstone, ``diff +1`` for its own value (``zync.step`` 1);
* after the updates of time T, every partition receives ``progress {time: T, count: N}``
  with N the number of updates of T in that partition (``zync.step`` 2, ``zync.offset``
  the last pool offset of T);
* an update of time T is never produced after T's progress message, across crashes too:
  positions (``zync.offset``, ``zync.step``) only grow within a partition, and a time is
  never cut across transactions (a transaction holds whole times, as many as fit in
  ``batch_records`` records; a larger time is a transaction of its own).

A consumer that sums ``diff`` per record over every time up to the latest time closed on
every partition holds the topic's current table: one row (key, value) per live key.
Times are Delta versions, read through delta-rs's change data feed (``load_cdf``): they
stay available as long as the pool's Delta log does. Every message carries its position
headers (``zync.offset``, ``zync.step``, ``zync.time``) and the pool's identity.

The ``materialize`` envelope (:mod:`~engine.deliver.envelopes.materialize`) is this one
with Materialize's own message format.
"""

from __future__ import annotations

import itertools
import json
import struct
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from engine.deliver.envelopes.base import Envelope, Parts, Send
from engine.deliver.envelopes.images import Images
from engine.deliver.errors import DeliveryError
from engine.deliver.positions import (
    HEADER_OFFSET,
    HEADER_STEP,
    HEADER_TIME,
    Headers,
    Position,
)
from engine.deliver.rows import Batch, Rows
from engine.kafka.codecs.avro_binary import zigzag_long
from engine.kafka.codecs.formats import Format
from engine.kafka.typemap.from_spark import avro_name, spark_to_connect

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

    from engine.deliver.transactions import Transactions

RETRACT, INSERT, PROGRESS = 0, 1, 2

#: One message to make: (partition, offset, step, time, key text, image text or None,
#: diff or count).
Update = tuple[int, int, int, int, "str | None", "str | None", int]


class DifferentialEnvelope(Envelope):
    """Updates ``{record, time, diff}`` and progress ``{time, count}`` per staging commit."""

    name = "differential"

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.message_prefix = b""  # Avro wire header / Connect schema of the messages
        self.latest = Images()  # the latest image per key
        self.resume_time = 0  # the oldest time not closed everywhere

    def images(self) -> Iterable[str]:
        return self.latest.values()

    def resume(self, found: Mapping[int, Position | None]) -> None:
        """From the oldest time not closed on every partition: a partition whose last
        message is its time's progress has closed that time."""
        known = [
            (pos.time or 0) + (pos.step == PROGRESS)
            for pos in found.values()
            if pos is not None
        ]
        self.resume_time = min(known) if self.parts.ledger.complete() and known else 0

    def register(self, key_type: DataType | None, value_type: DataType | None) -> None:
        key_codec, value_codec = self.codecs()
        topic = self.parts.topic
        if self.parts.format is Format.AVRO:
            schemas = self.schemas()
            if key_codec.avro is not None:
                key_codec.schema_id = schemas.register(f"{topic}-key", key_codec.avro_schema)
            if value_codec.avro is not None:
                message = differential_schema(topic, key_codec.avro_schema, value_codec.avro_schema)
                message_id = schemas.register(f"{topic}-value", message)
                self.message_prefix = struct.pack(">bI", 0, message_id)
        elif self.parts.format is Format.CONNECT_JSON:
            schema = differential_connect_schema(
                None if key_type is None else spark_to_connect(key_type),
                None if value_type is None else spark_to_connect(value_type),
            )
            self.message_prefix = (
                b'{"schema":' + json.dumps(schema, separators=(",", ":")).encode() + b',"payload":'
            )

    def deliver(self, since: int, version: int, stop: threading.Event, send: Send) -> bool:
        rows = self._read(since, version)
        for chunk in self.time_slices(rows):
            if stop.is_set():
                return False  # the transaction in flight is done; the rest waits
            started = time.monotonic()
            batch = self.make_batch(chunk)
            send(chunk, batch, started)
        return True

    def stamp(self, rows: Rows) -> tuple[int | None, int | None]:
        """The last time of ``rows``: a transaction holds whole times."""
        assert rows.times is not None
        return rows.times[-1], None

    def time_slices(self, rows: Rows) -> Iterator[Rows]:
        """``rows`` in transactions of whole times: as many as fit in ``batch_records``
        records, a larger time alone."""
        assert rows.times is not None
        limit = self.parts.batch_records
        sizes: list[int] = []
        current = 0
        for _, group in itertools.groupby(rows.times):
            length = sum(1 for _ in group)
            if current and current + length > limit:
                sizes.append(current)
                current = 0
            current += length
        if current:
            sizes.append(current)
        return self.slices(rows, iter(sizes))

    def _read(self, since: int, version: int) -> Rows:
        reader = self.parts.reader
        if since < 0:
            # whole times from the oldest one not closed everywhere, so that progress
            # counts cover every update of a time
            oldest = self.resume_time
            changes = reader.changes(oldest, version, alone=True)  # a resume: its own
            changes = changes.filter(pc.greater_equal(changes.column("time"), oldest))
            if changes.num_rows:
                first = int(pc.min(changes.column("offset")).as_py())
            else:
                staged = reader.snapshot()
                first = int(pc.max(staged.column("offset")).as_py()) + 1 if staged.num_rows else 0
            self.latest.load(self.parts, first)
            self.next_offset = first
        else:
            changes = reader.changes(since + 1, version)
        changes = changes.filter(pc.greater_equal(changes.column("offset"), self.next_offset))
        return self.take_rows(changes, with_times=True)

    def build(self, rows: Rows) -> Batch:
        """Updates of each record, and after the last record of a time, its progress on
        every partition; already delivered positions left out."""
        assert rows.times is not None
        key_codec, _ = self.codecs()
        ledger = self.parts.ledger
        plan: list[Update] = []
        moves = self.latest.moves()  # applied to the images once encoded
        counts: dict[int, int] = {}
        times = rows.times
        total = len(rows)
        for i, (offset, key, value) in enumerate(
            zip(rows.offsets, rows.keys.to_pylist(), rows.values.to_pylist(), strict=True)
        ):
            moment = times[i]
            partition = ledger.partition_of(key, offset)
            previous = moves.move(key, value)
            if previous is not None:
                plan.append((partition, offset, RETRACT, moment, key, previous, -1))
                counts[partition] = counts.get(partition, 0) + 1
            if value is not None:
                plan.append((partition, offset, INSERT, moment, key, value, 1))
                counts[partition] = counts.get(partition, 0) + 1
            if i + 1 == total or times[i + 1] != moment:
                for p in ledger.partitions:
                    plan.append((p, offset, PROGRESS, moment, None, None, counts.get(p, 0)))
                counts = {}
        plan = [u for u in plan if not ledger.delivered(u[0], u[1], u[2])]
        updates = [u for u in plan if u[2] != PROGRESS]
        keys = iter(key_codec.encode([u[4] for u in updates]))
        values = iter(self._update_values(updates))
        key_bytes: list[bytes | None] = []
        value_bytes: list[bytes | None] = []
        for u in plan:
            if u[2] == PROGRESS:
                key_bytes.append(None)
                value_bytes.append(self._progress_value(u[3], u[6]))
            else:
                key_bytes.append(next(keys))
                value_bytes.append(next(values))
        moves.apply()
        return Batch(
            [u[1] for u in plan],
            key_bytes,
            value_bytes,
            partitions=[u[0] for u in plan],
            steps=[u[2] for u in plan],
            times=[u[3] for u in plan],
        )

    def _update_values(self, updates: Sequence[Update]) -> list[bytes]:
        key_codec, value_codec = self.codecs()
        if not updates:
            return []
        topic = self.parts.topic
        if self.parts.format is Format.AVRO:
            if value_codec.avro is None:
                raise DeliveryError(
                    f"{topic}: the staging pool records no value type for the topic "
                    "(use --format json)"
                )
            keys = [u[4] for u in updates]
            key_bodies: list[bytes | None]
            if key_codec.avro is not None:
                key_bodies = key_codec.bodies(keys)
            elif any(k is not None for k in keys):
                raise DeliveryError(
                    f"{topic}: the staging pool records no key type for the topic "
                    "(use --format json)"
                )
            else:
                key_bodies = [None] * len(keys)
            value_bodies = value_codec.bodies([u[5] for u in updates])
            head = self.message_prefix
            return [
                head
                + b"\x02"
                + (b"\x00" if k is None else b"\x02" + k)
                + (v or b"")
                + zigzag_long(u[3])
                + zigzag_long(u[6])
                + b"\x00"
                for u, k, v in zip(updates, key_bodies, value_bodies, strict=True)
            ]
        connect = self.parts.format is Format.CONNECT_JSON
        prefix, suffix = (self.message_prefix, b"}") if connect else (b"", b"")
        return [
            prefix
            + (
                f'{{"update":{{"record":{{"key":{"null" if u[4] is None else u[4]},"value":{u[5]}}},'
                f'"time":{u[3]},"diff":{u[6]}}},"progress":null}}'
            ).encode()
            + suffix
            for u in updates
        ]

    def _progress_value(self, moment: int, count: int) -> bytes:
        if self.parts.format is Format.AVRO:
            return self.message_prefix + b"\x00\x02" + zigzag_long(moment) + zigzag_long(count)
        text = f'{{"update":null,"progress":{{"time":{moment},"count":{count}}}}}'.encode()
        if self.parts.format is Format.CONNECT_JSON:
            return self.message_prefix + text + b"}"
        return text

    def time_headers(self, moment: int) -> Headers:
        """Headers every message of time ``moment`` carries besides its position."""
        return self.identity

    def write(self, batch: Batch, out: Transactions) -> None:
        """Every message carries its position (offset, step and time) and the pool's
        identity."""
        assert batch.steps is not None
        assert batch.times is not None
        for value, key, offset, partition, step, moment in zip(
            batch.values,
            batch.keys,
            batch.offsets,
            batch.partition_list(),
            batch.steps,
            batch.times,
            strict=True,
        ):
            headers: Headers = {
                HEADER_OFFSET: b"%d" % offset,
                HEADER_STEP: b"%d" % step,
                HEADER_TIME: b"%d" % moment,
                **self.time_headers(moment),
            }
            out.send(value, key, partition, headers)


def differential_schema(topic: str, key: Any, value: Any) -> dict[str, Any]:
    """The Avro schema of differential messages for Avro key and value schemas."""
    base = avro_name(topic)
    key_schema = key if key is not None else "string"
    value_schema = value if value is not None else "string"
    return {
        "type": "record",
        "name": f"{base}_message",
        "namespace": "zync.differential",
        "fields": [
            {
                "name": "update",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": f"{base}_update",
                        "fields": [
                            {
                                "name": "record",
                                "type": {
                                    "type": "record",
                                    "name": f"{base}_record",
                                    "fields": [
                                        {
                                            "name": "key",
                                            "type": ["null", key_schema],
                                            "default": None,
                                        },
                                        {"name": "value", "type": value_schema},
                                    ],
                                },
                            },
                            {"name": "time", "type": "long"},
                            {"name": "diff", "type": "long"},
                        ],
                    },
                ],
                "default": None,
            },
            {
                "name": "progress",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": f"{base}_progress",
                        "fields": [
                            {"name": "time", "type": "long"},
                            {"name": "count", "type": "long"},
                        ],
                    },
                ],
                "default": None,
            },
        ],
    }


def differential_connect_schema(key: Any, value: Any) -> dict[str, Any]:
    """The Kafka Connect schema of differential messages."""
    key_schema = {**(key or {"type": "string"}), "optional": True}
    value_schema = {**(value or {"type": "string"}), "optional": False}
    return {
        "type": "struct",
        "name": "zync.differential.Message",
        "optional": False,
        "fields": [
            {
                "field": "update",
                "type": "struct",
                "optional": True,
                "fields": [
                    {
                        "field": "record",
                        "type": "struct",
                        "optional": False,
                        "fields": [
                            {**key_schema, "field": "key"},
                            {**value_schema, "field": "value"},
                        ],
                    },
                    {"field": "time", "type": "int64", "optional": False},
                    {"field": "diff", "type": "int64", "optional": False},
                ],
            },
            {
                "field": "progress",
                "type": "struct",
                "optional": True,
                "fields": [
                    {"field": "time", "type": "int64", "optional": False},
                    {"field": "count", "type": "int64", "optional": False},
                ],
            },
        ],
    }


ENVELOPE = DifferentialEnvelope
