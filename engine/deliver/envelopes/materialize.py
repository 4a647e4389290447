"""The ``materialize`` envelope: Materialize's CDCv2 format (``ENVELOPE MATERIALIZE``).

Each Kafka message value is the top-level Avro union of Materialize's documentation
(namespace ``com.materialize.cdc``), registered under ``<topic>-value``::

    [{"type": "array", "items": record update {data: <the output record, named data>,
                                               time: long, diff: long}},
     record progress {lower: array<long>, upper: array<long>,
                      counts: array<record counts {time: long, count: long}>}]

It is the differential envelope (:mod:`~engine.deliver.envelopes.differential`: times,
images, resuming) with Materialize's messages. Every staging commit holding records of
the topic is one time T (its Delta version), never cut across transactions. Within T
the changes are consolidated: each record retracts its key's previous image (diff -1)
and inserts its value (+1); equal data (the same Avro bytes) add up and zero sums
vanish, so each (data, T) has at most one diff. Each update is one message (an array of
one), keyed by the output key of the record that last changed its data and in that
key's partition. After T's updates every partition receives
``progress {lower: [L], upper: [T + 1], counts: [{time: T, count: N}]}`` (``counts``
empty when N is 0): N counts T's updates in the whole topic and L is the previous
statement's upper bound (0 for the first), so the statements tile the times from 0 as
Materialize's reader needs, and any partition's copy is a true statement.

Positions: an update sits at the offset of the record that last changed its data (step 0
for a retraction, 1 for an insertion), a progress message at T's last offset (step 2):
positions grow within a partition, so no update of T follows T's progress, across
crashes too. Messages also carry ``zync.lower`` (L), from which a restart in the middle
of T rebuilds T's statement. Avro only: Materialize reads this format from Avro.
"""

from __future__ import annotations

import itertools
import json
import struct
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.deliver.envelopes.base import Parts
from engine.deliver.envelopes.differential import (
    INSERT,
    PROGRESS,
    RETRACT,
    DifferentialEnvelope,
)
from engine.deliver.errors import DeliveryError
from engine.deliver.positions import HEADER_LOWER, Headers, Position
from engine.deliver.rows import Batch, Rows
from engine.kafka.codecs.avro_binary import zigzag_long
from engine.kafka.codecs.formats import Format
from engine.kafka.typemap.from_spark import spark_to_avro

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

NAMESPACE = "com.materialize.cdc"

#: One consolidated update: (offset, step) of the record that last changed its data,
#: that record's key text, the data's Avro body and the diff.
Update = tuple[int, int, "str | None", bytes, int]
#: One message: (partition, offset, step, time, key text, value bytes).
Message = tuple[int, int, int, int, "str | None", bytes]


class MaterializeEnvelope(DifferentialEnvelope):
    """Consolidated ``update`` arrays and ``progress`` statements, one time per commit."""

    name = "materialize"
    formats = (Format.AVRO,)

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.lower = 0  # the lower bound of the next time's progress statement
        self.lower_of: dict[int, int] = {}  # the lower bound of each time being written

    def resume(self, found: Mapping[int, Position | None]) -> None:
        """The next statement's lower bound: that of the time resumed at (its messages
        say it), or, past a time closed everywhere, the upper bound of that time's."""
        super().resume(found)
        lowers = [
            p.lower
            for p in found.values()
            if p is not None and p.time == self.resume_time and p.lower is not None
        ]
        if lowers:
            self.lower = lowers[0]
        else:
            self.lower = self.resume_time  # 0, or the time after one closed everywhere

    def register(self, key_type: DataType | None, value_type: DataType | None) -> None:
        key_codec, _ = self.codecs()
        topic = self.parts.topic
        schemas = self.schemas()
        if key_codec.avro is not None:
            key_codec.schema_id = schemas.register(f"{topic}-key", key_codec.avro_schema)
        if value_type is None:
            self.message_prefix = b""
            return
        data = spark_to_avro(value_type, "data")
        if not isinstance(data, dict) or data.get("type") != "record":
            raise DeliveryError(
                f"{topic}: the materialize envelope needs record values (Materialize's "
                f"`data` is a record); the staged values are {value_type.simpleString()}"
            )
        schema_id = schemas.register(f"{topic}-value", json.dumps(materialize_schema(data)))
        self.message_prefix = struct.pack(">bI", 0, schema_id)

    def build(self, rows: Rows) -> Batch:
        """The consolidated updates of each time of ``rows`` (whole times), then its
        progress on every partition; already delivered positions left out."""
        assert rows.times is not None
        if not self.message_prefix:
            raise DeliveryError(
                f"{self.parts.topic}: the staging pool records no value type for the topic "
                "(the materialize envelope needs one)"
            )
        ledger = self.parts.ledger
        moves = self.latest.moves()  # applied once the messages are built
        keys, values = rows.keys.to_pylist(), rows.values.to_pylist()
        messages: list[Message] = []
        lower, lowers = self.lower, {}
        for moment, group in itertools.groupby(range(len(rows)), key=rows.times.__getitem__):
            indexes = list(group)
            net: Counter[str] = Counter()
            touched: dict[str, tuple[int, int, str | None]] = {}
            for i in indexes:
                offset, key, value = rows.offsets[i], keys[i], values[i]
                previous = moves.move(key, value)
                if previous == value:
                    continue
                if previous is not None:
                    net[previous] -= 1
                    touched[previous] = (offset, RETRACT, key)
                if value is not None:
                    net[value] += 1
                    touched[value] = (offset, INSERT, key)
            updates = self._consolidate(net, touched)
            for offset, step, key, body, diff in updates:
                partition = ledger.partition_of(key, offset)
                messages.append((partition, offset, step, moment, key, self._update(body, moment, diff)))
            progress = self._progress(lower, moment, len(updates))
            last = rows.offsets[indexes[-1]]
            messages.extend((p, last, PROGRESS, moment, None, progress) for p in ledger.partitions)
            lowers[moment] = lower
            lower = moment + 1
        messages = [m for m in messages if not ledger.delivered(m[0], m[1], m[2])]
        key_bytes = self.codecs()[0].encode([m[4] for m in messages])
        moves.apply()
        self.lower, self.lower_of = lower, lowers
        return Batch(
            [m[1] for m in messages],
            key_bytes,
            [m[5] for m in messages],
            partitions=[m[0] for m in messages],
            steps=[m[2] for m in messages],
            times=[m[3] for m in messages],
        )

    def _consolidate(
        self, net: Counter[str], touched: Mapping[str, tuple[int, int, str | None]]
    ) -> list[Update]:
        """One update per distinct data (Avro bytes) whose diffs do not cancel out, in
        position order."""
        texts = [text for text, diff in net.items() if diff]
        if not texts:
            return []
        _, value_codec = self.codecs()
        merged: dict[bytes, tuple[int, tuple[int, int], str | None]] = {}
        for text, body in zip(texts, value_codec.bodies(texts), strict=True):
            assert body is not None
            offset, step, key = touched[text]
            diff, where, who = merged.get(body, (0, (offset, step), key))
            if (offset, step) >= where:
                where, who = (offset, step), key
            merged[body] = (diff + net[text], where, who)
        updates = [
            (where[0], where[1], who, body, diff)
            for body, (diff, where, who) in merged.items()
            if diff
        ]
        return sorted(updates, key=lambda u: (u[0], u[1]))

    def _update(self, body: bytes, moment: int, diff: int) -> bytes:
        """Union branch 0: an array of one update {data, time, diff}."""
        return (
            self.message_prefix
            + b"\x00\x02"
            + body
            + zigzag_long(moment)
            + zigzag_long(diff)
            + b"\x00"
        )

    def _progress(self, lower: int, moment: int, count: int) -> bytes:
        """Union branch 1: progress {lower: [lower], upper: [moment + 1], counts}."""
        counts = b"\x02" + zigzag_long(moment) + zigzag_long(count) + b"\x00" if count else b"\x00"
        return (
            self.message_prefix
            + b"\x02"
            + b"\x02"
            + zigzag_long(lower)
            + b"\x00"
            + b"\x02"
            + zigzag_long(moment + 1)
            + b"\x00"
            + counts
        )

    def stamp(self, rows: Rows) -> tuple[int | None, int | None]:
        """The last time of ``rows`` and the lower bound of its progress statement."""
        moment, _ = super().stamp(rows)
        assert moment is not None
        return moment, self.lower_of[moment]

    def time_headers(self, moment: int) -> Headers:
        return {**self.identity, HEADER_LOWER: b"%d" % self.lower_of[moment]}


def materialize_schema(data: dict[str, Any]) -> list[Any]:
    """Materialize's CDCv2 Avro schema around ``data``, the output record's Avro schema
    (a record named ``data``, in the namespace of ``update``)."""
    counts = {
        "type": "record",
        "name": "counts",
        "fields": [{"name": "time", "type": "long"}, {"name": "count", "type": "long"}],
    }
    return [
        {
            "type": "array",
            "items": {
                "type": "record",
                "name": "update",
                "namespace": NAMESPACE,
                "fields": [
                    {"name": "data", "type": data},
                    {"name": "time", "type": "long"},
                    {"name": "diff", "type": "long"},
                ],
            },
        },
        {
            "type": "record",
            "name": "progress",
            "namespace": NAMESPACE,
            "fields": [
                {"name": "lower", "type": {"type": "array", "items": "long"}},
                {"name": "upper", "type": {"type": "array", "items": "long"}},
                {"name": "counts", "type": {"type": "array", "items": counts}},
            ],
        },
    ]


ENVELOPE = MaterializeEnvelope
