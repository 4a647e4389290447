"""The ``jdbc`` envelope (the default): each record's key and value as the ETL made
them, for a Kafka Connect JDBC sink. A NULL value is a tombstone (the sink deletes the
row). Avro schemas are derived from the Spark types recorded in the pool and registered
under ``<topic>-key`` and ``<topic>-value``.

Messages carry the position header ``zync.offset``: all of them in a transaction of up
to :data:`~engine.deliver.positions.ANCHOR_EVERY` messages per partition (what
continuous delivery makes), only the anchors in a larger one (a catch-up). A pass
streams: the first transaction is small (:data:`~engine.deliver.staging_reader.FIRST_TRANSACTION`)
so that producing starts while the rest is still read and encoded. A catch-up in Avro
reads the records without their JSON texts when the ETL's bodies ship
(docs/design.md#staged-avro) — with the key's text alone to several partitions, since it
picks the partition — and reads the texts back only for a table whose bodies do not all
ship.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.deliver.encode import staged_bodies
from engine.deliver.envelopes.base import Envelope, Send
from engine.deliver.positions import ANCHOR_EVERY, Headers, Position, anchor_headers
from engine.deliver.rows import Batch, Rows
from engine.deliver.staging_reader import FIRST_TRANSACTION
from engine.deliver.stream import produce_ahead
from engine.kafka.codecs.formats import Format

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

    from engine.deliver.transactions import Transactions

#: Rows not delivered yet, with their partition: one for all, or one each.
Selected = tuple[Rows, int | None, list[int] | None]


class JdbcEnvelope(Envelope):
    """Key and value as staged; anchors carry the positions."""

    name = "jdbc"
    counts_after = True

    def resume(self, found: Mapping[int, Position | None]) -> None:
        ledger = self.parts.ledger
        lowest = ledger.lowest()
        self.next_offset = lowest + 1 if ledger.complete() and lowest is not None else 0

    def register(self, key_type: DataType | None, value_type: DataType | None) -> None:
        if self.parts.format is not Format.AVRO:
            return
        schemas = self.schemas()
        topic = self.parts.topic
        for codec, subject in zip(self.codecs(), (f"{topic}-key", f"{topic}-value"), strict=True):
            if codec.avro is not None:
                codec.schema_id = schemas.register(subject, codec.avro_schema)

    def deliver(self, since: int, version: int, stop: threading.Event, send: Send) -> bool:
        return produce_ahead(
            self._chunks(since, version),
            self._select,
            self._encode,
            self.make_batch,
            send,
            stop,
            self.parts.topic,
        )

    def build(self, rows: Rows) -> Batch:
        return self._encode(self._select(rows))

    def _chunks(self, since: int, version: int) -> Iterator[Rows]:
        """The records to deliver up to ``version``, checked contiguous, in chunks of at
        most ``batch_records`` (a transaction each), read as they are needed."""
        reader = self.parts.reader
        if since < 0:
            texts = not self._may_ship()
            keys = len(self.parts.ledger.partitions) > 1  # the key's text picks the partition
            tables: Iterator[pa.Table] = reader.snapshot_tables(
                self.next_offset, texts=texts, keys=keys
            )
            if not texts:
                tables = (self._texts_unless_shipped(t) for t in tables)
        else:
            changes = reader.changes(since + 1, version)
            tables = iter(
                [changes.filter(pc.greater_equal(changes.column("offset"), self.next_offset))]
            )
        sizes = self._ramp()
        for table in tables:
            yield from self.slices(self.take_rows(table), sizes)

    def _may_ship(self) -> bool:
        """Whether a catch-up may read the records without their JSON texts (with the
        key's alone, which picks the partition, to several partitions): Avro, no shaper,
        both parts typed. A table whose bodies do not all ship gets its texts then
        (:meth:`_texts_unless_shipped`)."""
        keys, values = self.codecs()
        return (
            self.parts.shaper.sql is None and keys.avro is not None and values.avro is not None
        )

    def _texts_unless_shipped(self, table: pa.Table) -> pa.Table:
        """``table`` (read without ``value``, and maybe ``key``) with its texts added,
        unless every key and value body in it ships as it is (:meth:`PartCodec.ships`)."""
        if "value" in table.column_names:  # a pool without the avro column
            return table
        avro = table.column("avro") if "avro" in table.column_names else None
        keys, values = self.codecs()
        if keys.ships(staged_bodies(avro, "key")) and values.ships(staged_bodies(avro, "value")):
            return table
        ordered = table.sort_by("offset")
        if "key" in ordered.column_names:
            ordered = ordered.drop_columns(["key"])
        texts = self.parts.reader.texts(ordered.column("offset").to_pylist())
        return ordered.append_column("key", texts.column("key")).append_column(
            "value", texts.column("value")
        )

    def _ramp(self) -> Iterator[int]:
        """Transaction sizes of a pass: small at first, so that producing starts while
        the next records are still read and encoded, then ``batch_records``."""
        yield min(FIRST_TRANSACTION, self.parts.batch_records)
        while True:
            yield self.parts.batch_records

    def _select(self, rows: Rows) -> Selected:
        """The records of ``rows`` not delivered yet, with their partition (one for all,
        or one each). Called once per record, in offset order."""
        ledger = self.parts.ledger
        if len(ledger.partitions) == 1:
            partition = ledger.partitions[0]
            last = ledger.last.get(partition)
            skip = 0 if last is None else bisect.bisect_right(rows.offsets, last[0])
            if skip:
                rows = rows.slice(skip, len(rows))
            return rows, partition, None
        partitions = ledger.partitions_of_texts(rows.partition_keys, rows.offsets)
        if ledger.claims_none_from(rows.offsets[0]):  # past what was delivered: all go
            return rows, None, partitions
        keep = [
            i
            for i, (p, o) in enumerate(zip(partitions, rows.offsets, strict=True))
            if not ledger.claim(p, o)
        ]
        if len(keep) != len(rows):
            rows = rows.take(keep)
            partitions = [partitions[i] for i in keep]
        return rows, None, partitions

    def _encode(self, selected: Selected) -> Batch:
        rows, partition, partitions = selected
        keys, values = self.codecs()
        texts = rows.texts
        key_bytes = keys.shipped(staged_bodies(rows.avro, "key"), texts and texts[0])
        value_bytes = values.shipped(staged_bodies(rows.avro, "value"), texts and texts[1])
        return Batch(
            rows.offsets,
            keys.encode(rows.keys) if key_bytes is None else key_bytes,
            values.encode(rows.values) if value_bytes is None else value_bytes,
            partition=partition,
            partitions=partitions,
            anchors=None if partitions is None else _anchors(partitions),
        )

    def write(self, batch: Batch, out: Transactions) -> None:
        if batch.partition is not None:
            _write_one_partition(batch, out, self.identity)
        else:
            _write_partitioned(batch, out, self.identity)


def _write_one_partition(batch: Batch, out: Transactions, identity: Headers) -> None:
    """To one partition: the hot loop. Only anchors (every ANCHOR_EVERY-th message, and
    the first and last) carry headers: headers cost as much as the rest of a produce
    call."""
    assert batch.partition is not None
    produce, send = out.producer.produce, out.send
    topic, partition = out.topic, batch.partition
    values, keys, offsets = batch.values, batch.keys, batch.offsets
    count = len(offsets)
    if count <= ANCHOR_EVERY:  # a small transaction: every message says where it is
        for i, (value, key, offset) in enumerate(zip(values, keys, offsets, strict=True)):
            send(value, key, partition, anchor_headers(offset, i == count - 1, identity))
        return
    for start in range(0, count, ANCHOR_EVERY):
        stop = min(start + ANCHOR_EVERY, count)
        send(
            values[start],
            keys[start],
            partition,
            anchor_headers(offsets[start], start == count - 1, identity),
        )
        plain_stop = stop - 1 if stop == count else stop
        for value, key in zip(
            values[start + 1 : plain_stop], keys[start + 1 : plain_stop], strict=True
        ):
            try:
                produce(topic, value, key, partition=partition)
            except BufferError:
                send(value, key, partition, None)
        if stop == count and count - 1 > start:
            send(values[-1], keys[-1], partition, anchor_headers(offsets[-1], True, identity))


def _write_partitioned(batch: Batch, out: Transactions, identity: Headers) -> None:
    """To several partitions: in each, every ANCHOR_EVERY-th message and the last carry
    the position headers (all of them when the partition gets ANCHOR_EVERY or fewer);
    the messages between two anchors go in a tight loop."""
    produce, send = out.producer.produce, out.send
    topic = out.topic
    partitions = batch.partition_list()
    anchors, lasts = batch.anchors or _anchors(partitions)  # worked out when encoded
    values, keys, offsets = batch.values, batch.keys, batch.offsets
    start = 0
    for anchor in [*anchors, len(partitions)]:
        for value, key, partition in zip(
            values[start:anchor], keys[start:anchor], partitions[start:anchor], strict=True
        ):
            try:
                produce(topic, value, key, partition=partition)
            except BufferError:
                send(value, key, partition, None)
        if anchor < len(partitions):
            headers = anchor_headers(offsets[anchor], anchor in lasts, identity)
            send(values[anchor], keys[anchor], partitions[anchor], headers)
        start = anchor + 1


def _anchors(partitions: Sequence[int]) -> tuple[list[int], set[int]]:
    """The indexes of the messages that carry position headers, in order, and of each
    partition's last message (an anchor too); found by Arrow, not message by message."""
    column = pa.array(partitions, pa.int32())
    anchors: set[int] = set()
    lasts: set[int] = set()
    for partition in pc.unique(column).to_pylist():
        indexes = pc.indices_nonzero(pc.equal(column, partition))
        lasts.add(indexes[-1].as_py())
        if len(indexes) > ANCHOR_EVERY:
            indexes = indexes.take(pa.array(range(0, len(indexes), ANCHOR_EVERY)))
        anchors.update(indexes.to_pylist())
    anchors |= lasts
    return sorted(anchors), lasts


ENVELOPE = JdbcEnvelope
