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
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import pyarrow.compute as pc

from engine.deliver.envelopes.base import Envelope, Parts, Send
from engine.deliver.envelopes.differential_messages import (
    Update,
    differential_connect_schema,
    differential_schema,
    progress_value,
    update_values,
)
from engine.deliver.envelopes.images import Images
from engine.deliver.positions import (
    HEADER_OFFSET,
    HEADER_STEP,
    HEADER_TIME,
    Headers,
    Position,
)
from engine.deliver.rows import Batch, Rows
from engine.kafka.codecs.formats import Format
from engine.kafka.typemap.from_spark import spark_to_connect

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

    from engine.deliver.transactions import Transactions

RETRACT, INSERT, PROGRESS = 0, 1, 2



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
        topic, fmt = self.parts.topic, self.parts.format
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
        values = iter(
            update_values(topic, fmt, self.codecs(), self.message_prefix, updates)
        )
        key_bytes: list[bytes | None] = []
        value_bytes: list[bytes | None] = []
        for u in plan:
            if u[2] == PROGRESS:
                key_bytes.append(None)
                value_bytes.append(progress_value(fmt, self.message_prefix, u[3], u[6]))
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


ENVELOPE = DifferentialEnvelope
