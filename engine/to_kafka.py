"""to-kafka: deliver a staging pool's output records to a Kafka topic, exactly once.

A staging pool holds, per output topic, records at contiguous pool offsets 0, 1, 2, ...
(``kafka.offset``, written by the ETL). :class:`Delivery` produces them to the topic in
offset order and keeps doing so (``continuous``) as new staging commits arrive.

Exactly once, across kill -9 at any moment
------------------------------------------
* Records carry their position in headers: ``zync.offset`` (the pool offset, decimal
  ASCII) and, for the differential envelope, ``zync.step`` and ``zync.time`` (below).
  The last message of each transaction in each partition also carries ``zync.last``.
  Differential messages all carry them, and so do jdbc messages of transactions of up to
  :data:`ANCHOR_EVERY` messages per partition (what continuous delivery makes). In a
  larger jdbc transaction (a catch-up) only *anchors* do: the first and the last message
  in each partition and every :data:`ANCHOR_EVERY`-th in between — a header costs a
  produce call as much as the rest of it, and the records between two anchors are
  known: they are the next records of that partition, one by one.
* On start the position is read back **from the topic itself**: the tail of each
  partition is consumed (read_committed) up to its end; the last record with the header
  and the number of records after it give that partition's last delivered position.
  Records before our first anchor (data that was there before) are ignored, and so are
  records after an anchor marked ``zync.last`` (someone else's). Nothing assumes offset
  arithmetic (transaction markers occupy offsets) nor trusts the high watermark alone;
  when the last records of a partition carry no header, the window grows backwards.
* Each record's partition is a pure function of its key (CRC-32 of the key's JSON text
  modulo the partition count; records without a key go by pool offset), so after a
  restart every record is skipped or produced by comparing its position with *its*
  partition's last position. This stays exactly once even on a broker that shows the
  records of aborted transactions to read_committed consumers (the embedded Tansu does):
  whatever a consumer can see counts as delivered, per partition, and the rest follows.
  (Records someone else writes into the topic between our anchors while a transaction
  is cut short would be counted as ours: the output topic belongs to to-kafka.)
* Records are produced in Kafka transactions by a transactional producer whose
  ``transactional.id`` is derived from the topic, so a restarted process fences the
  zombie of a killed one (its open transaction is aborted before the tail is read). A
  second to-kafka on the same topic is refused at once on this machine (an ``flock`` on
  ``<zync home>/locks/``) and fenced by Kafka from another host.

Reading and throughput
----------------------
The first pass reads the snapshot's files in commit order (a reader thread, streamed);
later passes read only the versions committed since, through the Delta log's change data
feed (``load_cdf``). While one transaction (at most ``batch_records`` records) is
produced, the next ones are read and encoded in other threads: Avro through Arrow and
polars (:class:`AvroPart`), JSON and Connect JSON as Arrow string operations. The first
transaction of a pass is small (:data:`FIRST_TRANSACTION`), so producing starts while
the rest is still being read and encoded.

Envelopes
---------
``jdbc`` (default)
    The record's key and value as the ETL made them, for a Kafka Connect JDBC sink: a
    NULL value is a tombstone (the sink deletes the row). Avro schemas are derived from
    the Spark types recorded in the pool and registered under ``<topic>-key`` and
    ``<topic>-value``.

``differential`` (Materialize CDCv2-style)
    Every staging commit (Delta version) that holds records of the topic is one
    **time**. Each record yields updates, then each time is closed by a progress
    message. Kafka key: the record's key for updates, none for progress messages. Kafka
    value (Avro record ``<topic>_message``; JSON and Connect JSON carry the same
    fields)::

        {"update": {"record": {"key": K, "value": V}, "time": T, "diff": D},
         "progress": null}
        {"update": null, "progress": {"time": T, "count": N}}

    * a record whose key had an image before (the latest non-tombstone value of that
      key in staging) yields ``diff -1`` for that old image (``zync.step`` 0), then,
      unless it is a tombstone, ``diff +1`` for its own value (``zync.step`` 1);
    * after the updates of time T, every partition receives ``progress {time: T,
      count: N}`` with N the number of updates of T in that partition (``zync.step``
      2, ``zync.offset`` the last pool offset of T);
    * an update of time T is never produced after T's progress message, across crashes
      too: positions (``zync.offset``, ``zync.step``) only grow within a partition.

    A consumer that sums ``diff`` per record over every time up to the latest time
    closed on every partition holds the topic's current table: one row (key, value)
    per live key. Times are Delta versions, read through delta-rs's change data feed
    (``load_cdf``): they stay available as long as the pool's Delta log does.

Formats: ``avro`` (Confluent wire format, schemas in the registry), ``connect-json``
(``{schema, payload}``, schemas from the same Spark types) and ``json`` (the JSON text).

A ``shaper`` is a Spark SQL SELECT over the view ``records`` (the topic's typed records:
``seqno, kafka, key, value``) that reshapes each record before delivery. Its result must
have columns ``kafka`` (unchanged: it carries the record's position), ``key`` and
``value``; it may drop records, not multiply them.
"""

from __future__ import annotations

import base64
import bisect
import datetime as dt
import decimal
import enum
import fcntl
import gc
import hashlib
import io
import json
import os
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ZyncError
from engine.kafka.avro import zigzag_long
from engine.kafka.formats import Format

if TYPE_CHECKING:
    from confluent_kafka import Producer
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType

    from engine.config import KafkaProfile, RegistryProfile
    from engine.lake.pools import Lake, Pool

HEADER_OFFSET = "zync.offset"
HEADER_STEP = "zync.step"
HEADER_TIME = "zync.time"
HEADER_LAST = "zync.last"

RETRACT, INSERT, PROGRESS = 0, 1, 2

#: Records per Kafka transaction (a transaction also never spans a partial read).
BATCH_RECORDS = 100_000
#: How often the staging pool's Delta log is polled in continuous mode, in seconds.
POLL_INTERVAL = 0.2
#: jdbc: in a transaction with more messages than this in a partition, only every
#: this many (and the first and the last) carry the position headers; in a smaller one,
#: every message does.
ANCHOR_EVERY = 1_000
#: Records in the first transaction of a pass (the next ones grow to ``batch_records``).
FIRST_TRANSACTION = 8_192
#: Threads encoding the next transactions while one is produced.
ENCODERS = 1
#: Transactions encoded (or being encoded) ahead of the one being produced.
ENCODE_AHEAD = ENCODERS + 1
#: Records read back from the end of each partition at first to find the position.
TAIL_WINDOW = 4 * ANCHOR_EVERY
TXN_TIMEOUT = 60.0


class Envelope(enum.Enum):
    JDBC = "jdbc"
    DIFFERENTIAL = "differential"

    @classmethod
    def parse(cls, text: str) -> Envelope:
        wanted = text.strip().lower()
        for envelope in cls:
            if envelope.value == wanted:
                return envelope
        raise ValueError(f"unknown envelope {text!r}: use jdbc or differential")


class DeliveryError(ZyncError):
    """to-kafka cannot go on; the message says why and what to do."""


class DeliveryBusy(DeliveryError):
    """Another to-kafka is delivering to the same topic."""


class DeliveryFenced(DeliveryError):
    """Another producer with the same transactional id took over the topic."""


class TypeMismatch(DeliveryError):
    """Staged JSON holds a field the topic's recorded type does not have."""


class _MetadataVersion(Exception):
    """The change data feed cannot start at a version holding a metaData action."""


# --------------------------------------------------------------------------------------
# Positions


@dataclass(frozen=True, order=True)
class Position:
    """Where a record sits in the delivery order: pool offset, then step.

    ``step`` is 0 for jdbc records; for the differential envelope 0 (retraction),
    1 (insertion) or 2 (progress). ``time`` is the differential time (Delta version).
    """

    offset: int
    step: int = 0
    time: int | None = field(default=None, compare=False)
    #: the record closed its transaction in its partition (``zync.last`` header)
    last: bool = field(default=False, compare=False)
    #: messages after this one in the partition (read back: they carry no header)
    after: int = field(default=0, compare=False)

    @classmethod
    def from_headers(cls, headers: Sequence[tuple[str, bytes | None]] | None) -> Position | None:
        if not headers:
            return None
        values = {name: value for name, value in headers if value is not None}
        raw = values.get(HEADER_OFFSET)
        if raw is None:
            return None
        try:
            offset = int(raw)
            step = int(values.get(HEADER_STEP, b"0"))
            stamp = values.get(HEADER_TIME)
            return cls(offset, step, None if stamp is None else int(stamp), HEADER_LAST in values)
        except ValueError:
            return None

    def headers(self) -> list[tuple[str, bytes]]:
        out = [(HEADER_OFFSET, b"%d" % self.offset)]
        if self.time is not None:
            out.append((HEADER_STEP, b"%d" % self.step))
            out.append((HEADER_TIME, b"%d" % self.time))
        return out


def read_positions(
    kafka: KafkaProfile,
    topic: str,
    partitions: Sequence[int],
    *,
    window: int = TAIL_WINDOW,
    timeout: float = 60.0,
) -> dict[int, Position | None]:
    """The last delivered position in each partition, read from the topic's tail.

    Consumes (read_committed) the last records of each partition up to its end and keeps
    the last record with the ``zync.offset`` header, with the number of records after it
    (``Position.after``, 0 when that record closed its transaction: what follows is not
    ours); when none has the header, reads a window four times larger, down to the start
    of the partition.
    """
    from confluent_kafka import KafkaException, TopicPartition

    from engine.kafka.clients import consumer, watermarks

    found: dict[int, Position | None] = {}
    deadline = time.monotonic() + timeout
    reader = consumer(kafka, extra={"enable.partition.eof": True})
    try:
        marks = watermarks(reader, topic, list(partitions))
        windows = {p: window for p in partitions}
        todo = {p for p in partitions}
        while todo:
            starts = {}
            for p in sorted(todo):
                low, high = marks[p]
                if high <= low:
                    found[p] = None
                    continue
                starts[p] = max(low, high - windows[p])
            todo = set(starts)
            if not todo:
                break
            best: dict[int, Position | None] = {p: None for p in todo}
            after = {p: 0 for p in todo}
            open_parts = set(todo)
            reader.assign([TopicPartition(topic, p, starts[p]) for p in sorted(todo)])
            while open_parts:
                if time.monotonic() > deadline:
                    raise DeliveryError(
                        f"could not read the end of topic {topic!r} within {timeout:g}s "
                        "to find where delivery stopped; is the broker healthy?"
                    )
                try:
                    messages = reader.consume(10_000, 0.5)
                except KafkaException as exc:
                    raise DeliveryError(
                        f"cannot read topic {topic!r}: {exc.args[0].str()}"
                    ) from None
                for message in messages:
                    p = message.partition()
                    error = message.error()
                    if error is not None:
                        if error.code() == error._PARTITION_EOF:
                            open_parts.discard(p)
                            continue
                        if error.fatal() or not error.retriable():
                            raise DeliveryError(f"cannot read topic {topic!r}: {error.str()}")
                        continue
                    position = Position.from_headers(message.headers())
                    if position is not None:
                        best[p] = position
                        after[p] = 0
                    elif best.get(p) is not None:
                        after[p] += 1
            reader.unassign()
            again = set()
            for p in todo:
                low, _ = marks[p]
                position = best[p]
                if position is None and starts[p] > low:
                    windows[p] *= 4
                    again.add(p)
                elif position is not None and not position.last and after[p]:
                    found[p] = replace(position, after=after[p])
                else:
                    found[p] = position
            todo = again
    finally:
        reader.close()
    return found


# --------------------------------------------------------------------------------------
# One delivery per topic on this machine


def lock_path(kafka: KafkaProfile, topic: str, home: Path | None = None) -> Path:
    from engine.config import zync_home

    digest = hashlib.sha1(f"{kafka.bootstrap_servers}\0{topic}".encode()).hexdigest()[:12]
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in topic)[:80]
    return (home or zync_home()) / "locks" / f"to-kafka-{safe}-{digest}.lock"


@contextmanager
def topic_lock(kafka: KafkaProfile, topic: str, owner: str) -> Iterator[Path]:
    """Hold the machine-wide lock of delivering to ``topic``; :class:`DeliveryBusy` if
    another process (or thread) holds it."""
    path = lock_path(kafka, topic)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            with suppress(OSError):
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
            who = f" ({holder})" if holder else ""
            raise DeliveryBusy(
                f"another zync to-kafka is delivering to topic {topic!r}{who}; "
                "stop it first (one delivery per topic)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, {owner}\n".encode(), 0)
        _held_locks.add(str(path))
        try:
            yield path
        finally:
            _held_locks.discard(str(path))
            with suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# flock is per open file description: a second Delivery in the same process would get
# its own and be refused, which is what we want; this set only serves messages.
_held_locks: set[str] = set()


# --------------------------------------------------------------------------------------
# Encoding


def _read_long(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


_MARKER = bytes.fromhex("a75a1903fe8871019c11ee5302d06b7f")
_MARKER_FIELD = "__zync_split"


def _marker_field(header: bytes) -> tuple[bytes, bytes]:
    """The value of the marker field (16 marker bytes, then ``header``) and the bytes
    that start every record in the container: its encoding as a ``["null", "bytes"]``
    field (branch 1, length, bytes) without the trailing ``header``. Splitting a block
    on them leaves ``header`` + body for each record."""
    value = _MARKER + header
    return value, b"\x02" + zigzag_long(len(value)) + _MARKER


def _container_bodies(data: bytes, count: int, pattern: bytes) -> list[bytes] | None:
    """What follows ``pattern`` in each record of an uncompressed Avro container whose
    records all start with it, or None when the split does not give ``count`` parts."""
    view = memoryview(data)
    if bytes(view[:4]) != b"Obj\x01":
        return None
    pos = 4
    while True:  # the metadata map
        n, pos = _read_long(view, pos)
        if n == 0:
            break
        if n < 0:
            _, pos = _read_long(view, pos)
            n = -n
        for _ in range(n):
            size, pos = _read_long(view, pos)
            pos += size
            size, pos = _read_long(view, pos)
            pos += size
    pos += 16  # sync marker
    bodies: list[bytes] = []
    while pos < len(data):
        records, pos = _read_long(view, pos)
        size, pos = _read_long(view, pos)
        block = data[pos : pos + size]
        pos += size + 16
        parts = block.split(pattern)
        if parts[0] != b"" or len(parts) != records + 1:
            return None
        del parts[0]
        bodies.extend(parts)
    return bodies if len(bodies) == count else None


def _text_buffer(texts: pa.Array) -> pa.Buffer:
    """The bytes of a string array without nulls: its values, one after the other."""
    width = pa.int64() if pa.types.is_large_string(texts.type) else pa.int32()
    offsets = pa.Array.from_buffers(
        width, len(texts) + 1, [None, texts.buffers()[1]], offset=texts.offset
    )
    first, last = offsets[0].as_py(), offsets[len(texts)].as_py()
    return texts.buffers()[2].slice(first, last - first)


def _strings(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One string array (a batch's values are copied together here, in the encoder)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if texts.type != pa.string():
        texts = texts.cast(pa.string())
    return texts


def _json_converter(data_type: DataType, where: str = "value") -> Callable[[Any], Any] | None:
    """A function making a JSON value of ``data_type`` Avro-ready for fastavro, or None
    when it already is. A struct value with a field the type lacks raises
    :class:`TypeMismatch` (Avro would drop it silently)."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        convs = [
            (f.name, _json_converter(f.dataType, f"{where}.{f.name}")) for f in data_type.fields
        ]
        names = [f.name for f in data_type.fields]
        known = frozenset(names)

        def record(value: Any) -> Any:
            if not isinstance(value, dict):
                return value
            if not known.issuperset(value):
                extra = sorted(set(value) - known)[0]
                raise TypeMismatch(
                    f"{where}: the staged JSON has a field {extra!r} that the type recorded "
                    "in the pool does not have, so it would be lost in Avro; the ETL must "
                    "record its output types before committing outputs"
                )
            out = {name: value.get(name) for name in names}
            for name, conv in convs:
                if conv is not None and out[name] is not None:
                    out[name] = conv(out[name])
            return out

        return record
    if isinstance(data_type, T.ArrayType):
        item = _json_converter(data_type.elementType, f"{where}[]")
        if item is None:
            return None
        return lambda v: [None if x is None else item(x) for x in v] if isinstance(v, list) else v
    if isinstance(data_type, T.MapType):
        inner = _json_converter(data_type.valueType, f"{where}{{}}")
        if inner is None:
            return None
        return lambda v: (
            {k: (None if x is None else inner(x)) for k, x in v.items()}
            if isinstance(v, dict)
            else v
        )
    if isinstance(data_type, T.DecimalType):
        quantum = decimal.Decimal(1).scaleb(-data_type.scale)
        return lambda v: decimal.Decimal(str(v)).quantize(quantum)
    if isinstance(data_type, T.DateType):
        return lambda v: dt.date.fromisoformat(v) if isinstance(v, str) else v
    if isinstance(data_type, T.TimestampType | T.TimestampNTZType):

        def timestamp(v: Any) -> Any:
            if not isinstance(v, str):
                return v
            parsed = dt.datetime.fromisoformat(v)
            if isinstance(data_type, T.TimestampType) and parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.UTC)
            return parsed

        return timestamp
    if isinstance(data_type, T.BinaryType):
        return lambda v: base64.b64decode(v) if isinstance(v, str) else v
    if isinstance(data_type, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return lambda v: int(v) if isinstance(v, float) and v.is_integer() else v
    if isinstance(data_type, T.StringType):
        return lambda v: v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
    return None


#: Records of a batch whose JSON is checked field by field against the recorded type
#: (all of a smaller batch, an even sample of a larger one).
STRICT_SAMPLE = 2_000


class AvroPart:
    """Encodes JSON texts of one Spark type as Avro, batch by batch.

    Batches of struct values take a fast path in Rust: polars parses the batch
    (newline-delimited JSON, with the exact type) and writes it as an Avro container
    whose records start with a marker field (16 random bytes, then the wire header); the
    container's blocks are split on the marker, leaving wire header + body for each
    record (a record's encoding is the concatenation of its fields'). The writer schema
    polars used is compared with ours once, so the bytes are exactly what fastavro would
    write; Arrow's strict JSON reader
    checks that the texts hold no field the type lacks (every record of a batch of up to
    :data:`STRICT_SAMPLE` records, an even sample of a larger one). Any other type, or a
    batch the fast path refuses, is encoded by fastavro record by record.
    """

    def __init__(self, data_type: DataType, name: str) -> None:
        import fastavro

        from engine.kafka.spark_schemas import spark_to_arrow, spark_to_avro

        self.data_type = data_type
        self.name = name
        self.schema = spark_to_avro(data_type, name)
        self.parsed = fastavro.parse_schema(self.schema, named_schemas={})
        self._convert = _json_converter(data_type, name)
        arrow = spark_to_arrow(data_type)
        self._arrow = pa.schema(list(arrow)) if isinstance(arrow, pa.StructType) else None
        self._fast: bool | None = None if self._arrow is not None else False
        self._polars: Any = None

    def encode(
        self, texts: pa.Array | Sequence[str | None], header: bytes = b""
    ) -> list[bytes | None]:
        """``header`` + the Avro body of each JSON text (None stays None)."""
        if not isinstance(texts, pa.Array | pa.ChunkedArray):
            texts = pa.array(texts, pa.string())
        texts = _strings(texts)
        present = texts if texts.null_count == 0 else pc.drop_null(texts)
        bodies = None
        if self._fast is not False and len(present) >= 64:
            bodies = self._fast_bodies(present, header)
        if bodies is None:
            raw = self._fastavro_bodies(present.to_pylist())
            bodies = [header + body for body in raw] if header else raw
        if texts.null_count == 0:
            return bodies  # type: ignore[return-value]
        found = iter(bodies)
        return [next(found) if valid else None for valid in texts.is_valid().to_pylist()]

    def _fast_bodies(self, texts: pa.Array, header: bytes) -> list[bytes] | None:
        import polars as pl

        from engine.kafka.spark_schemas import avro_shape

        self._check_fields(texts)
        lines = pc.binary_join_element_wise(texts, "", "\n")
        if self._polars is None:
            assert self._arrow is not None
            frame = pl.from_arrow(self._arrow.empty_table())
            assert isinstance(frame, pl.DataFrame)
            self._polars = frame.schema
        try:
            frame = pl.read_ndjson(io.BytesIO(_text_buffer(lines)), schema=self._polars)
            if frame.height != len(texts):
                return None
            marker, pattern = _marker_field(header)
            frame = frame.select(pl.lit(marker, dtype=pl.Binary).alias(_MARKER_FIELD), pl.all())
            buf = io.BytesIO()
            frame.write_avro(buf, compression="uncompressed")
        except Exception:  # noqa: BLE001 - polars refuses: fastavro says which record is wrong
            return None
        container = buf.getvalue()
        if self._fast is None:
            import fastavro

            writer = fastavro.reader(io.BytesIO(container)).writer_schema
            writer = {**writer, "fields": writer["fields"][1:]}
            self._fast = avro_shape(writer) == avro_shape(self.schema)
            if not self._fast:
                return None
        return _container_bodies(container, len(texts), pattern)

    def _check_fields(self, texts: pa.Array) -> None:
        """:class:`TypeMismatch` when the texts hold a field the type does not have."""
        import pyarrow.json as pj

        if len(texts) > STRICT_SAMPLE:
            step = len(texts) / STRICT_SAMPLE
            texts = texts.take(pa.array([int(i * step) for i in range(STRICT_SAMPLE)], pa.int64()))
        lines = pc.binary_join_element_wise(texts, "", "\n")
        options = pj.ParseOptions(explicit_schema=self._arrow, unexpected_field_behavior="error")
        try:
            pj.read_json(pa.BufferReader(_text_buffer(lines)), parse_options=options)
        except pa.ArrowInvalid as exc:
            if "unexpected field" in str(exc):
                raise TypeMismatch(
                    f"{self.name}: the staged JSON holds a field that the type recorded in "
                    "the pool does not have, so it would be lost in Avro; the ETL must "
                    "record its output types before committing outputs"
                ) from None
            # anything else: the encoders say which record is wrong

    def _fastavro_bodies(self, texts: Sequence[str]) -> list[bytes]:
        import fastavro

        out = []
        convert, parsed = self._convert, self.parsed
        paused = gc.isenabled()
        gc.disable()
        try:
            for text in texts:
                value = json.loads(text)
                if convert is not None:
                    value = convert(value)
                buf = io.BytesIO()
                try:
                    fastavro.schemaless_writer(buf, parsed, value)
                except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds
                    raise DeliveryError(
                        f"{self.name}: cannot encode {text[:120]} with the Avro schema "
                        f"derived from the pool's recorded type: {exc}"
                    ) from None
                out.append(buf.getvalue())
        finally:
            if paused:
                gc.enable()
        return out


class PartCodec:
    """Encodes the keys or the values of one topic in one format (JSON text → bytes)."""

    def __init__(self, fmt: Format, data_type: DataType | None, name: str) -> None:
        self.format = fmt
        self.data_type = data_type
        self.name = name
        self.schema_id: int | None = None
        self.avro: AvroPart | None = None
        self._connect_prefix = ""
        if fmt is Format.AVRO and data_type is not None:
            self.avro = AvroPart(data_type, name)
        elif fmt is Format.CONNECT_JSON:
            from engine.kafka.spark_schemas import spark_to_connect

            schema = None if data_type is None else spark_to_connect(data_type, name=name)
            self._connect_prefix = (
                '{"schema":' + json.dumps(schema, separators=(",", ":")) + ',"payload":'
            )

    @property
    def avro_schema(self) -> Any:
        return None if self.avro is None else self.avro.schema

    def encode(self, texts: pa.Array | Sequence[str | None]) -> list[bytes | None]:
        """Wire bytes of each JSON text (None stays None)."""
        if not isinstance(texts, pa.Array | pa.ChunkedArray):
            texts = pa.array(texts, pa.string())
        texts = _strings(texts)
        if self.format is Format.JSON:
            return texts.cast(pa.binary()).to_pylist()  # type: ignore[no-any-return]
        if self.format is Format.CONNECT_JSON:
            wrapped = pc.binary_join_element_wise(self._connect_prefix, texts, "}", "")
            return wrapped.cast(pa.binary()).to_pylist()  # type: ignore[no-any-return]
        if texts.null_count == len(texts):
            return [None] * len(texts)
        if self.avro is None or self.schema_id is None:
            raise DeliveryError(
                f"{self.name}: no Avro schema: the staging pool records no type for these "
                "records (use --format json)"
            )
        return self.avro.encode(texts, struct.pack(">bI", 0, self.schema_id))

    def bodies(self, texts: pa.Array | Sequence[str | None]) -> list[bytes | None]:
        """Avro bodies (no header) of each JSON text (None stays None)."""
        assert self.avro is not None
        return self.avro.encode(texts)


def differential_schema(topic: str, key: Any, value: Any) -> dict[str, Any]:
    """The Avro schema of differential messages for Avro key and value schemas."""
    from engine.kafka.spark_schemas import avro_name

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


# --------------------------------------------------------------------------------------
# Events and status


@dataclass(frozen=True)
class DeliveryEvent:
    """Something a delivery did, for a status line (``message`` is that line)."""

    kind: str  # started | delivered | caught-up | waiting | stopped | failed
    topic: str
    message: str
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    version: int | None = None
    at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class DeliveryStatus:
    """A snapshot of one delivery, for the console.

    ``staged_offset``: the largest pool offset staged for the topic (None: nothing yet);
    ``delivered_offset``: the largest pool offset delivered (None: nothing yet);
    ``lag``: records staged but not delivered; ``rate``: records/s of the last batch.
    """

    topic: str
    pool: str
    envelope: str
    format: str
    state: str = "starting"  # starting | catching-up | delivering | idle | stopped | failed
    partitions: int | None = None
    staged_offset: int | None = None
    delivered_offset: int | None = None
    version: int | None = None
    records_delivered: int = 0
    last_produce_time: float | None = None
    rate: float | None = None
    last_error: str | None = None

    @property
    def lag(self) -> int | None:
        if self.staged_offset is None:
            return None
        delivered = -1 if self.delivered_offset is None else self.delivered_offset
        return max(0, self.staged_offset - delivered)


# --------------------------------------------------------------------------------------
# The rows to deliver


@dataclass
class _Rows:
    """Staging rows of one topic in offset order: offsets (and times) as Python lists,
    key and value JSON texts as Arrow arrays (encoded in batches, never copied whole)."""

    offsets: list[int]
    keys: pa.ChunkedArray
    values: pa.ChunkedArray
    times: list[int] | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    @classmethod
    def from_arrow(cls, table: pa.Table, with_times: bool = False) -> _Rows:
        table = _in_offset_order(table)
        return cls(
            table.column("offset").to_pylist(),
            table.column("key"),
            table.column("value"),
            table.column("time").to_pylist() if with_times else None,
        )

    def slice(self, start: int, stop: int) -> _Rows:
        stop = min(stop, len(self.offsets))
        return _Rows(
            self.offsets[start:stop],
            self.keys.slice(start, stop - start),
            self.values.slice(start, stop - start),
            None if self.times is None else self.times[start:stop],
        )

    def take(self, index: list[int]) -> _Rows:
        picked = pa.array(index, pa.int64())
        return _Rows(
            [self.offsets[i] for i in index],
            self.keys.take(picked),
            self.values.take(picked),
            None if self.times is None else [self.times[i] for i in index],
        )


@dataclass
class _Batch:
    """Messages to produce in one transaction, column by column. ``partition`` is set
    when every message goes to that partition; ``steps``/``times`` only for the
    differential envelope."""

    offsets: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    partition: int | None = None
    partitions: list[int] | None = None
    steps: list[int] | None = None
    times: list[int] | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    def partition_list(self) -> list[int]:
        if self.partitions is not None:
            return self.partitions
        assert self.partition is not None
        return [self.partition] * len(self.offsets)

    def positions(self) -> Iterator[tuple[int, int, int]]:
        """(partition, offset, step) of each message."""
        steps = self.steps if self.steps is not None else [0] * len(self.offsets)
        return zip(self.partition_list(), self.offsets, steps, strict=True)

    def keep(self, index: list[int]) -> _Batch:
        def pick(values: list[Any] | None) -> list[Any] | None:
            return None if values is None else [values[i] for i in index]

        return _Batch(
            [self.offsets[i] for i in index],
            [self.keys[i] for i in index],
            [self.values[i] for i in index],
            self.partition,
            pick(self.partitions),
            pick(self.steps),
            pick(self.times),
        )


def _in_offset_order(table: pa.Table) -> pa.Table:
    """``table`` sorted by offset, in one chunk. Files hold their rows in order, so the
    record batches are put in the order of their first offset (cheap) before the rows
    are sorted (moving every value) only if that did not suffice."""
    if table.num_rows < 2:
        return table
    batches = [b for b in table.to_batches() if b.num_rows]
    batches.sort(key=lambda b: b.column("offset")[0].as_py())
    table = pa.Table.from_batches(batches, schema=table.schema)
    offsets = table.column("offset")
    if not pc.all(pc.greater(offsets.slice(1), offsets.slice(0, table.num_rows - 1))).as_py():
        table = table.sort_by([("offset", "ascending")])
    return table


def _sql_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


# --------------------------------------------------------------------------------------
# The delivery loop


class Delivery:
    """Delivers one topic of a staging pool to Kafka, exactly once.

    ``run()`` delivers what is staged and returns; with ``continuous=True`` it keeps
    polling the pool's Delta log (every ``poll_interval`` seconds) until ``stop`` is
    set, then finishes the transaction in flight and returns. ``status()`` may be
    called from any thread.
    """

    def __init__(
        self,
        lake: Lake,
        pool: str,
        topic: str,
        *,
        kafka: KafkaProfile,
        registry: RegistryProfile | None = None,
        format: Format | str = Format.AVRO,  # noqa: A002 - the option's name
        envelope: Envelope | str = Envelope.JDBC,
        shaper: str | Path | None = None,
        partitions: int = 1,
        replication: int = 1,
        poll_interval: float = POLL_INTERVAL,
        batch_records: int = BATCH_RECORDS,
        spark: Callable[[], SparkSession] | None = None,
        wait_for_pool: bool = False,
    ) -> None:
        self.lake = lake
        self.pool_name = pool
        self.topic = topic
        self.kafka = kafka
        self.registry = registry
        try:
            self.format = Format.parse(format) if isinstance(format, str) else format
            self.envelope = Envelope.parse(envelope) if isinstance(envelope, str) else envelope
        except ValueError as exc:
            raise DeliveryError(str(exc)) from None
        self.shaper_sql = _load_shaper(shaper)
        self.partitions_wanted = partitions
        self.replication = replication
        self.poll_interval = poll_interval
        self.batch_records = batch_records
        self.wait_for_pool = wait_for_pool
        self._spark_factory = spark
        if self.format is Format.AVRO and registry is None:
            raise DeliveryError(
                "the avro format needs a Schema Registry: run `zync dev up` or configure "
                "one, or use --format json"
            )
        self._status_lock = threading.Lock()
        self._status = DeliveryStatus(
            topic=topic, pool=pool, envelope=self.envelope.value, format=self.format.value
        )
        self._on_event: Callable[[DeliveryEvent], None] | None = None
        # the state of a run
        self._pool: Pool | None = None
        self._producer: Producer | None = None
        self._partitions: list[int] = []
        self._last: dict[int, tuple[int, int]] = {}  # partition -> (offset, step) delivered
        self._after: dict[int, int] = {}  # partition -> records delivered after _last (jdbc)
        self._read_version = -1  # staging version read up to (-1: read the snapshot)
        self._next_offset = 0  # first pool offset not read yet
        self._types: tuple[str | None, str | None] | None = None
        self._key_codec: PartCodec | None = None
        self._value_codec: PartCodec | None = None
        self._message_prefix = b""  # differential: Avro wire header / Connect schema
        self._images: dict[str, str] = {}  # differential: latest image per key
        self._resume_time = 0  # differential: the oldest time not closed everywhere
        self._widened: tuple[DataType | None, DataType | None] = (None, None)
        self._schemas: Any = None

    def __repr__(self) -> str:
        return (
            f"Delivery({self.pool_name!r} -> {self.topic!r}, {self.envelope.value}, "
            f"{self.format.value})"
        )

    @property
    def transactional_id(self) -> str:
        """Derived from the topic: a restarted delivery fences the previous one."""
        return f"zync-to-kafka-{self.topic}"

    # -- public -------------------------------------------------------------------------

    def status(self) -> DeliveryStatus:
        with self._status_lock:
            return self._status

    def run(
        self,
        stop: threading.Event | None = None,
        on_event: Callable[[DeliveryEvent], None] | None = None,
        *,
        continuous: bool = False,
    ) -> DeliveryStatus:
        """Deliver what is staged (and, when ``continuous``, what gets staged until
        ``stop`` is set); returns the final status. Raises :class:`DeliveryError`."""
        stop = stop or threading.Event()
        self._on_event = on_event
        try:
            with topic_lock(self.kafka, self.topic, f"pool {self.pool_name}"):
                self._run(stop, continuous)
        except Exception as exc:
            text = str(exc) if isinstance(exc, ZyncError) else f"{type(exc).__name__}: {exc}"
            self._set(state="failed", last_error=text)
            self._emit("failed", f"{self.topic}: {text}")
            raise
        finally:
            self._close()
        self._set(state="stopped")
        self._emit("stopped", f"{self.topic}: stopped after pool offset {self._delivered_text()}")
        return self.status()

    # -- the loop -----------------------------------------------------------------------

    def _run(self, stop: threading.Event, continuous: bool) -> None:
        self._pool = self._open_pool(stop, continuous)
        if self._pool is None:
            return
        self._open_kafka()
        self._recover()
        while not stop.is_set():
            version = self._pool.refresh()
            if version != self._read_version:
                self._deliver_to(version, stop)
                continue
            if not continuous:
                break
            if self.status().state != "idle":
                self._set(state="idle")
                self._emit(
                    "caught-up",
                    f"{self.topic}: caught up after pool offset {self._delivered_text()} "
                    f"(staging version {version})",
                    version=version,
                )
            stop.wait(self.poll_interval)

    def _open_pool(self, stop: threading.Event, continuous: bool) -> Pool | None:
        from engine.lake.pools import PoolError

        announced = False
        while True:
            try:
                pool = self.lake.open_pool(self.pool_name)
            except PoolError as exc:
                if not (continuous and self.wait_for_pool):
                    raise DeliveryError(str(exc)) from None
                if not announced:
                    self._emit("waiting", f"{self.topic}: waiting for pool {self.pool_name!r}")
                    announced = True
                if stop.wait(1.0):
                    return None
                continue
            if pool.kind != "staging":
                raise DeliveryError(
                    f"pool {self.pool_name!r} is a {pool.kind} pool: to-kafka delivers the "
                    "outputs of a staging pool"
                )
            return pool

    def _open_kafka(self) -> None:
        from confluent_kafka import KafkaException

        from engine.kafka.clients import ensure_topic, producer

        partitions, created = ensure_topic(
            self.kafka, self.topic, partitions=self.partitions_wanted, replication=self.replication
        )
        self._partitions = partitions
        self._set(partitions=len(partitions))
        self._producer = producer(
            self.kafka,
            transactional_id=self.transactional_id,
            extra={"transaction.timeout.ms": int(TXN_TIMEOUT * 1000)},
        )
        try:
            # fences the previous incarnation and completes its open transaction
            self._producer.init_transactions(TXN_TIMEOUT)
        except KafkaException as exc:
            raise DeliveryError(
                f"cannot start a transactional producer for topic {self.topic!r}: "
                f"{exc.args[0].str()}"
            ) from None
        self._emit(
            "started",
            f"{self.topic}: topic {'created' if created else 'found'} with {len(partitions)} "
            f"partition(s); delivering pool {self.pool_name!r} "
            f"({self.envelope.value} envelope, {self.format.value})",
        )

    def _recover(self) -> None:
        """Read the last delivered positions back from the topic."""
        found = read_positions(self.kafka, self.topic, self._partitions)
        self._take_positions(found)
        complete = len(self._last) == len(self._partitions)
        if self.envelope is Envelope.JDBC:
            self._next_offset = min(o for o, _ in self._last.values()) + 1 if complete else 0
        else:
            known = [pos.time or 0 for pos in found.values() if pos is not None]
            self._resume_time = min(known) if complete and known else 0
        self._read_version = -1
        delivered = max((o for o, _ in self._last.values()), default=None)
        self._set(delivered_offset=delivered)
        where = "from the start" if delivered is None else f"after pool offset {delivered}"
        self._emit("resumed", f"{self.topic}: delivering {where} (position read from the topic)")

    def _take_positions(self, found: dict[int, Position | None]) -> None:
        """Positions read back from the topic. jdbc records between two anchors carry no
        header: with one partition the count after the last anchor gives the position at
        once; with several, the next records of each partition are claimed one by one
        (:meth:`_claim`) until the count is used up."""
        self._last = {}
        self._after = {}
        for partition, position in found.items():
            if position is None:
                continue
            after = position.after if self.envelope is Envelope.JDBC else 0
            if len(self._partitions) == 1:
                self._last[partition] = (position.offset + after, position.step)
            else:
                self._last[partition] = (position.offset, position.step)
                if after:
                    self._after[partition] = after

    def _delivered_text(self) -> str:
        delivered = self.status().delivered_offset
        return "-" if delivered is None else str(delivered)

    # -- reading staging ----------------------------------------------------------------

    def _deliver_to(self, version: int, stop: threading.Event) -> None:
        """Deliver every record of the topic committed up to ``version``."""
        self._check_types()
        if self.envelope is Envelope.JDBC:
            done = self._deliver_stream(self._jdbc_chunks(version), version, stop)
        else:
            rows = self._read_differential(version)
            done = True
            for chunk in self._slices(rows):
                if stop.is_set():
                    done = False  # the transaction in flight is done; the rest waits
                    break
                self._send(chunk, self._make_batch(chunk), version, time.monotonic())
        if done:
            self._read_version = version
            self._set(version=version)

    def _slices(self, rows: _Rows, sizes: Iterator[int] | None = None) -> Iterator[_Rows]:
        """``rows`` in transactions of at most ``batch_records`` (staged offset noted),
        or of the ``sizes`` given."""
        if not len(rows):
            return
        staged = rows.offsets[-1]
        current = self.status().staged_offset
        self._set(
            staged_offset=staged if current is None else max(current, staged),
            state="catching-up" if len(rows) > self.batch_records else "delivering",
        )
        start = 0
        while start < len(rows):
            size = self.batch_records if sizes is None else next(sizes)
            yield rows.slice(start, start + size)
            start += size

    def _jdbc_chunks(self, version: int) -> Iterator[_Rows]:
        """The records to deliver up to ``version``, checked contiguous, in chunks of at
        most ``batch_records`` (a transaction each), read as they are needed."""
        if self._read_version < 0:
            tables: Iterator[pa.Table] = self._snapshot_tables(self._next_offset)
        else:
            changes = self._read_changes(self._read_version + 1, version)
            tables = iter(
                [changes.filter(pc.greater_equal(changes.column("offset"), self._next_offset))]
            )
        sizes = self._ramp()
        for table in tables:
            rows = _Rows.from_arrow(self._shape(table))
            self._check_contiguous(rows)
            if len(rows):
                self._next_offset = rows.offsets[-1] + 1
            yield from self._slices(rows, sizes)

    def _ramp(self) -> Iterator[int]:
        """Transaction sizes of a pass: small at first, so that producing starts while
        the next records are still read and encoded, then ``batch_records``."""
        size = min(FIRST_TRANSACTION, self.batch_records)
        while True:
            yield size
            size = min(size * 4, self.batch_records)

    def _deliver_stream(self, chunks: Iterator[_Rows], version: int, stop: threading.Event) -> bool:
        """Produce each chunk in a transaction while the next ones are read (a reader
        thread) and encoded (two encoder threads: Arrow and polars release the GIL).
        False when stopped before the end."""
        import queue
        from collections import deque
        from concurrent.futures import Future, ThreadPoolExecutor

        ready: queue.Queue[Any] = queue.Queue(maxsize=ENCODE_AHEAD)
        quit_reading = threading.Event()
        end = object()

        def put(item: Any) -> None:
            while not quit_reading.is_set():
                try:
                    ready.put(item, timeout=0.2)
                    return
                except queue.Full:
                    continue

        def read() -> None:
            try:
                for chunk in chunks:
                    if quit_reading.is_set():
                        return
                    put((chunk, self._jdbc_select(chunk)))
                put(end)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                put(exc)

        reader = threading.Thread(target=read, name=f"zync-read-{self.topic}", daemon=True)
        reader.start()
        inflight: deque[tuple[_Rows, Future[_Batch]]] = deque()
        with ThreadPoolExecutor(
            max_workers=ENCODERS, thread_name_prefix=f"zync-encode-{self.topic}"
        ) as pool:
            try:
                finished = False
                while True:
                    while not finished and len(inflight) < ENCODE_AHEAD:
                        item = ready.get()
                        if item is end:
                            finished = True
                        elif isinstance(item, BaseException):
                            raise item
                        else:
                            chunk, selected = item
                            inflight.append((chunk, pool.submit(self._jdbc_encode, *selected)))
                    if not inflight:
                        return True
                    started = time.monotonic()
                    chunk, future = inflight.popleft()
                    try:
                        batch = future.result()
                    except TypeMismatch:
                        batch = self._make_batch(chunk)  # typed from the data, then again
                    if stop.is_set():
                        return False  # the transaction in flight is done; the rest waits
                    self._send(chunk, batch, version, started)
            finally:
                quit_reading.set()
                for _, future in inflight:
                    future.cancel()

    def _snapshot_tables(self, low: int) -> Iterator[pa.Table]:
        """The topic's records with ``offset >= low`` in the loaded snapshot, streamed in
        tables of about ``batch_records`` rows. Files are read in seqno order (commit
        order), which is offset order for the ETL's commits; when it is not (compacted
        files), the rest is read whole and sorted."""
        assert self._pool is not None
        import pyarrow.dataset as ds

        from engine.lake.delta import arrow_schema

        table = self._pool.table
        uris = table.file_uris()
        found = pa.table(table.get_add_actions(flatten=True))
        columns = ["path", "modification_time"]
        if "min.seqno" in found.column_names and found.column("min.seqno").null_count == 0:
            columns.append("min.seqno")  # a commit's files (one per Spark task): by seqno
        actions = found.select(columns).to_pylist()
        if len(actions) == len(uris) and all(
            u.endswith(a["path"]) for u, a in zip(uris, actions, strict=True)
        ):
            order = sorted(
                range(len(uris)),
                key=lambda i: (
                    actions[i].get("min.seqno", 0),
                    actions[i]["modification_time"],
                    uris[i],
                ),
            )
            uris = [uris[i] for i in order]
        if not uris:
            return
        offset = pc.field("kafka", "offset")
        condition = self._record_condition()
        if low > 0:
            condition = condition & (offset >= low)
        scanner = ds.dataset(uris, schema=arrow_schema(table), format="parquet").scanner(
            columns={"offset": offset, "key": pc.field("key"), "value": pc.field("value")},
            filter=condition,
            batch_size=64 * 1024,
        )
        batches = scanner.to_batches()
        expected = low
        pending: list[pa.RecordBatch] = []
        size = 0
        for batch in batches:
            if not batch.num_rows:
                continue
            pending.append(batch)
            size += batch.num_rows
            if size < (self.batch_records if expected != low else FIRST_TRANSACTION):
                continue  # the first transaction of a pass is small: it goes sooner
            chunk = pa.Table.from_batches(pending)
            pending, size = [], 0
            offsets = chunk.column("offset")
            first, last = offsets[0].as_py(), offsets[-1].as_py()
            in_order = (
                first == expected
                and last - first + 1 == chunk.num_rows
                and pc.all(
                    pc.greater(offsets.slice(1), offsets.slice(0, chunk.num_rows - 1))
                ).as_py()
            )
            if not in_order:
                rest = [chunk.to_batches(), *([b] for b in batches)]
                yield pa.Table.from_batches(
                    [b for group in rest for b in group], schema=chunk.schema
                )
                return
            expected = last + 1
            yield chunk
        if pending:
            yield pa.Table.from_batches(pending)

    def _check_contiguous(self, rows: _Rows) -> None:
        if not len(rows) or self.shaper_sql is not None:
            return
        first, last = rows.offsets[0], rows.offsets[-1]
        if first != self._next_offset or last - first + 1 != len(rows):
            raise DeliveryError(
                f"pool {self.pool_name!r}, topic {self.topic!r}: pool offsets are not "
                f"contiguous (expected {self._next_offset}, found {len(rows)} records "
                f"{first}..{last}); was the staging pool changed by something other than the ETL?"
            )

    def _record_condition(self) -> Any:
        # marker rows have no kafka struct: the topic test leaves them out; a dead letter
        # always names its stage (testing one leaf reads much less than the struct)
        return (pc.field("kafka", "topic") == self.topic) & pc.field(
            "deadletter", "stage"
        ).is_null()

    def _read_snapshot(self, *, low: int | None = None, below: int | None = None) -> pa.Table:
        """Records of the topic in the loaded snapshot with ``low <= offset < below``,
        as columns offset, key, value."""
        assert self._pool is not None
        offset = pc.field("kafka", "offset")
        condition = self._record_condition()
        if low is not None:
            condition = condition & (offset >= low)
        if below is not None:
            condition = condition & (offset < below)
        dataset = self._pool.table.to_pyarrow_dataset()
        return dataset.to_table(
            columns={"offset": offset, "key": pc.field("key"), "value": pc.field("value")},
            filter=condition,
        )

    def _read_changes(self, first: int, last: int) -> pa.Table:
        """Records of the topic added by versions ``first..last``, with their version
        (column ``time``), from the Delta log's change data feed.

        delta-rs refuses a feed that starts at a version holding a metaData action
        (table creation, a change of the pool's recorded types): such a version is read
        by comparing its file list with the previous version's instead.
        """
        parts = []
        version = first
        while version <= last:
            try:
                parts.append(self._change_feed(version, last))
                break
            except _MetadataVersion:
                parts.append(self._version_rows(version))
                version += 1
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _change_feed(self, first: int, last: int) -> pa.Table:
        assert self._pool is not None
        try:
            reader = self._pool.table.load_cdf(
                starting_version=first,
                ending_version=last,
                predicate=f"kafka.topic = '{_sql_string(self.topic)}'",
                columns=[
                    "kafka",
                    "key",
                    "value",
                    "deadletter",
                    "marker",
                    "_change_type",
                    "_commit_version",
                ],
            )
            table = pa.RecordBatchReader.from_stream(reader).read_all()
        except Exception as exc:  # noqa: BLE001 - delta-rs raises several kinds
            if "does not have change data enabled" in str(exc):
                raise _MetadataVersion from None
            raise DeliveryError(
                f"cannot read the changes of pool {self.pool_name!r} (versions {first}.."
                f"{last}) from its Delta log: {exc}"
            ) from None
        keep = pc.and_(
            pc.and_(pc.is_null(table.column("marker")), pc.is_null(table.column("deadletter"))),
            pc.equal(table.column("_change_type").cast(pa.string()), "insert"),
        )
        rows = pa.table(
            {
                "offset": pc.struct_field(table.column("kafka"), "offset").cast(pa.int64()),
                "key": table.column("key").cast(pa.string()),
                "value": table.column("value").cast(pa.string()),
                "time": table.column("_commit_version").cast(pa.int64()),
            }
        )
        return rows.filter(keep)

    def _version_rows(self, version: int) -> pa.Table:
        """Records of the topic in the files that ``version`` added."""
        assert self._pool is not None
        import pyarrow.dataset as ds

        from engine.lake.delta import arrow_schema

        table = self._pool.snapshot(version)
        before = set(self._pool.snapshot(version - 1).file_uris()) if version > 0 else set()
        added = [uri for uri in table.file_uris() if uri not in before]
        schema = pa.schema(
            [
                ("offset", pa.int64()),
                ("key", pa.string()),
                ("value", pa.string()),
                ("time", pa.int64()),
            ]
        )
        if not added:
            return schema.empty_table()
        dataset = ds.dataset(added, schema=arrow_schema(table), format="parquet")
        rows = dataset.to_table(
            columns={
                "offset": pc.field("kafka", "offset"),
                "key": pc.field("key"),
                "value": pc.field("value"),
            },
            filter=self._record_condition(),
        )
        return rows.append_column(
            "time", pa.array([version] * rows.num_rows, type=pa.int64())
        ).cast(schema)

    def _read_differential(self, version: int) -> _Rows:
        if self._read_version < 0:
            # whole times from the oldest one not closed everywhere, so that progress
            # counts cover every update of a time
            since = self._resume_time
            changes = self._read_changes(since, version)
            changes = changes.filter(pc.greater_equal(changes.column("time"), since))
            if changes.num_rows:
                first = int(pc.min(changes.column("offset")).as_py())
            else:
                staged = self._read_snapshot()
                first = int(pc.max(staged.column("offset")).as_py()) + 1 if staged.num_rows else 0
            self._images = self._load_images(first)
            self._next_offset = first
        else:
            changes = self._read_changes(self._read_version + 1, version)
        changes = changes.filter(pc.greater_equal(changes.column("offset"), self._next_offset))
        rows = _Rows.from_arrow(self._shape(changes), with_times=True)
        self._check_contiguous(rows)
        if len(rows):
            self._next_offset = rows.offsets[-1] + 1
        return rows

    def _load_images(self, before: int) -> dict[str, str]:
        """The latest image (non-null value) of every key among records before ``before``."""
        if before <= 0:
            return {}
        import polars as pl

        table = self._shape(self._read_snapshot(below=before))
        if not table.num_rows:
            return {}
        frame = pl.from_arrow(table.select(["offset", "key", "value"]))
        assert isinstance(frame, pl.DataFrame)
        latest = frame.sort("offset").unique(subset=["key"], keep="last")
        latest = latest.filter(pl.col("value").is_not_null() & pl.col("key").is_not_null())
        return dict(zip(latest["key"].to_list(), latest["value"].to_list(), strict=True))

    # -- types and schemas ----------------------------------------------------------------

    def _check_types(self) -> None:
        """(Re)build the codecs when the types of the topic's records changed."""
        if self.shaper_sql is not None and self._types is not None:
            return
        key_type, value_type = self._spark_types()
        current = (
            None if key_type is None else key_type.json(),
            None if value_type is None else value_type.json(),
        )
        if current == self._types:
            return
        self._types = current
        self._build_codecs(key_type, value_type)

    def _spark_types(self) -> tuple[DataType | None, DataType | None]:
        assert self._pool is not None
        if self.format is Format.JSON and self.shaper_sql is None:
            return None, None
        if self.shaper_sql is not None:
            schema = self._shaped_frame(0, -1).schema
            return schema["key"].dataType, schema["value"].dataType
        key_type, value_type = (None, None)
        if self._pool.topic_types(self.topic) is not None:
            key_type, value_type = self._pool.spark_types(self.topic)
        extra_key, extra_value = self._widened
        return _add_missing(key_type, extra_key), _add_missing(value_type, extra_value)

    def _widen(self, rows: _Rows) -> bool:
        """Type the fields staged JSON holds but the recorded type lacks from the JSON
        itself (a type recorded late); True when that changed the types."""
        from engine.kafka.types import json_value_to_spark

        values = [json.loads(t) for t in rows.values.to_pylist() if t is not None]
        values += [json.loads(t) for t in self._images.values()]
        keys = [json.loads(t) for t in rows.keys.to_pylist() if t is not None]
        before = self._spark_types()
        extra_key, extra_value = self._widened
        if keys:
            extra_key = _add_missing(extra_key, json_value_to_spark(keys))
        if values:
            extra_value = _add_missing(extra_value, json_value_to_spark(values))
        self._widened = (extra_key, extra_value)
        after = self._spark_types()
        if after == before:
            return False
        added = sorted(_field_names(after[1]) - _field_names(before[1]))
        added += sorted(f"key.{n}" for n in _field_names(after[0]) - _field_names(before[0]))
        self._emit(
            "types",
            f"{self.topic}: staged records hold field(s) the pool's recorded type lacks "
            f"({', '.join(added) or 'nested'}); typed from the staged JSON",
        )
        self._check_types()
        return True

    def _build_codecs(self, key_type: DataType | None, value_type: DataType | None) -> None:
        from engine.kafka.spark_schemas import avro_name, spark_to_connect

        base = avro_name(self.topic)
        self._key_codec = PartCodec(self.format, key_type, f"{base}_key")
        self._value_codec = PartCodec(self.format, value_type, f"{base}_value")
        differential = self.envelope is Envelope.DIFFERENTIAL
        if self.format is Format.AVRO:
            schemas = self._registry()
            if self._key_codec.avro is not None:
                self._key_codec.schema_id = schemas.register(
                    f"{self.topic}-key", self._key_codec.avro_schema
                )
            if self._value_codec.avro is not None and not differential:
                self._value_codec.schema_id = schemas.register(
                    f"{self.topic}-value", self._value_codec.avro_schema
                )
            if self._value_codec.avro is not None and differential:
                message = differential_schema(
                    self.topic, self._key_codec.avro_schema, self._value_codec.avro_schema
                )
                message_id = schemas.register(f"{self.topic}-value", message)
                self._message_prefix = struct.pack(">bI", 0, message_id)
        elif self.format is Format.CONNECT_JSON and differential:
            schema = differential_connect_schema(
                None if key_type is None else spark_to_connect(key_type),
                None if value_type is None else spark_to_connect(value_type),
            )
            self._message_prefix = (
                b'{"schema":' + json.dumps(schema, separators=(",", ":")).encode() + b',"payload":'
            )

    def _registry(self) -> Any:
        if self._schemas is None:
            from engine.kafka.schemas import RegistrySchemas

            assert self.registry is not None
            self._schemas = RegistrySchemas(self.registry)
        return self._schemas

    # -- shaper -------------------------------------------------------------------------

    def _spark(self) -> SparkSession:
        if self._spark_factory is not None:
            return self._spark_factory()
        from engine.spark import get_spark

        return get_spark()

    def _shaped_frame(self, low: int, high: int) -> Any:
        """The shaper's result over the topic's records with ``low <= offset <= high``
        (an empty range gives the result's schema)."""
        assert self._pool is not None
        assert self.shaper_sql is not None
        from pyspark.sql import functions as F

        from engine.lake.delta import spark_schema
        from engine.lake.envelope import POOL_SCHEMA
        from engine.lake.pools import parse_json_column

        spark = self._spark()
        offset = pc.field("kafka", "offset")
        rows = self._pool.table.to_pyarrow_dataset().to_table(
            columns=["seqno", "kafka", "key", "value"],
            filter=self._record_condition() & (offset >= low) & (offset <= high),
        )
        schema = pa.schema([POOL_SCHEMA.field(name) for name in ("seqno", "kafka", "key", "value")])
        rows = rows.cast(schema)
        frame = (
            spark.createDataFrame(rows)
            if rows.num_rows
            else spark.createDataFrame([], spark_schema(schema))
        )
        key_type, value_type = self._pool.spark_types(self.topic)
        records = frame.select(
            "seqno",
            "kafka",
            parse_json_column(F.col("key"), key_type).alias("key"),
            parse_json_column(F.col("value"), value_type).alias("value"),
        )
        records.createOrReplaceTempView("records")
        try:
            result = spark.sql(self.shaper_sql)
            result.schema  # noqa: B018 - analyses the query now
        except Exception as exc:  # noqa: BLE001 - Spark analysis errors
            text = str(exc).strip()
            first = text.splitlines()[0] if text else type(exc).__name__
            raise DeliveryError(f"the shaper does not run over `records`: {first}") from None
        missing = [c for c in ("kafka", "key", "value") if c not in result.columns]
        if missing:
            raise DeliveryError(
                "the shaper's SELECT must return the columns kafka (unchanged), key and "
                f"value; missing: {', '.join(missing)}"
            )
        return result

    def _shape(self, table: pa.Table) -> pa.Table:
        """Rows (offset, key, value[, time]) reshaped by the shaper, if there is one."""
        if self.shaper_sql is None or not table.num_rows:
            return table
        from pyspark.sql import functions as F

        from engine.etl.envelopes import json_text

        low = pc.min(table.column("offset")).as_py()
        high = pc.max(table.column("offset")).as_py()
        result = self._shaped_frame(low, high)
        schema = result.schema
        shaped = result.select(
            F.col("kafka.offset").alias("offset"),
            json_text(F.col("key"), schema["key"].dataType).alias("key"),
            json_text(F.col("value"), schema["value"].dataType).alias("value"),
        ).toArrow()
        offsets = shaped.column("offset").to_pylist()
        if len(set(offsets)) != len(offsets):
            raise DeliveryError("the shaper gave more than one row for a record (at most one)")
        wanted = pc.is_in(shaped.column("offset"), value_set=table.column("offset"))
        shaped = (
            shaped.filter(wanted)
            .select(["offset", "key", "value"])
            .cast(pa.schema([("offset", pa.int64()), ("key", pa.string()), ("value", pa.string())]))
        )
        if "time" in table.column_names:
            times = dict(
                zip(
                    table.column("offset").to_pylist(),
                    table.column("time").to_pylist(),
                    strict=True,
                )
            )
            moments = [times[o] for o in shaped.column("offset").to_pylist()]
            shaped = shaped.append_column("time", pa.array(moments, type=pa.int64()))
        return shaped

    # -- producing ----------------------------------------------------------------------

    def _partition_of(self, key: str | None, offset: int) -> int:
        count = len(self._partitions)
        if count == 1:
            return self._partitions[0]
        if key is None:
            return offset % count
        return zlib.crc32(key.encode("utf-8")) % count

    def _delivered(self, partition: int, offset: int, step: int = 0) -> bool:
        last = self._last.get(partition)
        return last is not None and (offset, step) <= last

    def _claim(self, partition: int, offset: int) -> bool:
        """Whether jdbc record ``offset`` of ``partition`` was delivered; called once per
        record in offset order (it uses up the count read after the last anchor)."""
        if self._delivered(partition, offset):
            return True
        if self._after.get(partition):
            self._after[partition] -= 1
            self._last[partition] = (offset, 0)
            return True
        return False

    def _make_batch(self, rows: _Rows) -> _Batch:
        """The messages of ``rows``; fields the recorded type lacks are typed from the
        staged JSON (once) instead of being lost."""
        try:
            return self._batch(rows)
        except TypeMismatch:
            if self.shaper_sql is not None or not self._widen(rows):
                raise
            return self._batch(rows)

    def _send(self, rows: _Rows, batch: _Batch, version: int, started: float) -> None:
        """Produce ``batch`` (the messages of ``rows``) in a transaction and report."""
        produced = self._transact(batch)
        elapsed = max(time.monotonic() - started, 1e-6)
        last = rows.offsets[-1]
        status = self.status()
        delivered = status.delivered_offset
        self._set(
            delivered_offset=last if delivered is None else max(last, delivered),
            records_delivered=status.records_delivered + produced,
            last_produce_time=time.time() if produced else status.last_produce_time,
            rate=len(rows) / elapsed,
            last_error=None,
        )
        self._emit(
            "delivered",
            f"{self.topic}: delivered pool offsets {rows.offsets[0]}..{last} as "
            f"{produced} message(s) (staging version {version}, {len(rows) / elapsed:,.0f} records/s)",
            records=produced,
            first_offset=rows.offsets[0],
            last_offset=last,
            version=version,
        )

    def _batch(self, rows: _Rows) -> _Batch:
        if self.envelope is Envelope.JDBC:
            return self._jdbc_batch(rows)
        return self._differential_batch(rows)

    def _jdbc_batch(self, rows: _Rows) -> _Batch:
        return self._jdbc_encode(*self._jdbc_select(rows))

    def _jdbc_select(self, rows: _Rows) -> tuple[_Rows, int | None, list[int] | None]:
        """The records of ``rows`` not delivered yet, with their partition (one for all,
        or one each). Called once per record, in offset order."""
        if len(self._partitions) == 1:
            partition = self._partitions[0]
            last = self._last.get(partition)
            skip = 0 if last is None else bisect.bisect_right(rows.offsets, last[0])
            if skip:
                rows = rows.slice(skip, len(rows))
            return rows, partition, None
        partitions = [
            self._partition_of(k, o)
            for k, o in zip(rows.keys.to_pylist(), rows.offsets, strict=True)
        ]
        keep = [
            i
            for i, (p, o) in enumerate(zip(partitions, rows.offsets, strict=True))
            if not self._claim(p, o)
        ]
        if len(keep) != len(rows):
            rows = rows.take(keep)
            partitions = [partitions[i] for i in keep]
        return rows, None, partitions

    def _jdbc_encode(
        self, rows: _Rows, partition: int | None, partitions: list[int] | None
    ) -> _Batch:
        assert self._key_codec is not None
        assert self._value_codec is not None
        return _Batch(
            rows.offsets,
            self._key_codec.encode(rows.keys),
            self._value_codec.encode(rows.values),
            partition=partition,
            partitions=partitions,
        )

    def _differential_batch(self, rows: _Rows) -> _Batch:
        """Updates of each record, and after the last record of a time, its progress on
        every partition; already delivered positions left out."""
        assert rows.times is not None
        assert self._key_codec is not None
        # (partition, offset, step, time, key text, image text or None, diff or count)
        plan: list[tuple[int, int, int, int, str | None, str | None, int]] = []
        images = self._images
        changed: dict[str, str | None] = {}  # applied to the images once encoded
        counts: dict[int, int] = {}
        times = rows.times
        total = len(rows)
        for i, (offset, key, value) in enumerate(
            zip(rows.offsets, rows.keys.to_pylist(), rows.values.to_pylist(), strict=True)
        ):
            moment = times[i]
            partition = self._partition_of(key, offset)
            previous = None
            if key is not None:
                previous = changed[key] if key in changed else images.get(key)
                changed[key] = value
            if previous is not None:
                plan.append((partition, offset, RETRACT, moment, key, previous, -1))
                counts[partition] = counts.get(partition, 0) + 1
            if value is not None:
                plan.append((partition, offset, INSERT, moment, key, value, 1))
                counts[partition] = counts.get(partition, 0) + 1
            if i + 1 == total or times[i + 1] != moment:
                for p in self._partitions:
                    plan.append((p, offset, PROGRESS, moment, None, None, counts.get(p, 0)))
                counts = {}
        plan = [u for u in plan if not self._delivered(u[0], u[1], u[2])]
        updates = [u for u in plan if u[2] != PROGRESS]
        keys = iter(self._key_codec.encode([u[4] for u in updates]))
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
        for key, value in changed.items():
            if value is None:
                images.pop(key, None)
            else:
                images[key] = value
        return _Batch(
            [u[1] for u in plan],
            key_bytes,
            value_bytes,
            partitions=[u[0] for u in plan],
            steps=[u[2] for u in plan],
            times=[u[3] for u in plan],
        )

    def _update_values(
        self, updates: Sequence[tuple[int, int, int, int, str | None, str | None, int]]
    ) -> list[bytes]:
        assert self._key_codec is not None
        assert self._value_codec is not None
        if not updates:
            return []
        if self.format is Format.AVRO:
            if self._value_codec.avro is None:
                raise DeliveryError(
                    f"{self.topic}: the staging pool records no value type for the topic "
                    "(use --format json)"
                )
            keys = [u[4] for u in updates]
            if self._key_codec.avro is not None:
                key_bodies = self._key_codec.bodies(keys)
            elif any(k is not None for k in keys):
                raise DeliveryError(
                    f"{self.topic}: the staging pool records no key type for the topic "
                    "(use --format json)"
                )
            else:
                key_bodies = [None] * len(keys)
            value_bodies = self._value_codec.bodies([u[5] for u in updates])
            head = self._message_prefix
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
        connect = self.format is Format.CONNECT_JSON
        prefix, suffix = (self._message_prefix, b"}") if connect else (b"", b"")
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
        if self.format is Format.AVRO:
            return self._message_prefix + b"\x00\x02" + zigzag_long(moment) + zigzag_long(count)
        text = f'{{"update":null,"progress":{{"time":{moment},"count":{count}}}}}'.encode()
        if self.format is Format.CONNECT_JSON:
            return self._message_prefix + text + b"}"
        return text

    def _transact(self, batch: _Batch) -> int:
        """Produce ``batch`` in one transaction. On an abortable error: abort, read the
        positions back from the topic, produce what is still missing."""
        from confluent_kafka import KafkaException

        for _ in range(5):
            if not len(batch):
                return 0
            try:
                self._produce(batch)
            except KafkaException as exc:
                error = exc.args[0]
                if error.fatal() or "fenc" in error.str().lower():
                    raise DeliveryFenced(
                        f"topic {self.topic!r}: another to-kafka took over the topic "
                        f"(transactional id {self.transactional_id!r}): {error.str()}"
                    ) from None
                if not (error.txn_requires_abort() or error.retriable()):
                    raise DeliveryError(f"topic {self.topic!r}: {error.str()}") from None
                self._set(last_error=error.str())
                self._emit(
                    "retrying", f"{self.topic}: transaction failed ({error.str()}); retrying"
                )
                with suppress(KafkaException):
                    assert self._producer is not None
                    self._producer.abort_transaction(TXN_TIMEOUT)
                self._take_positions(read_positions(self.kafka, self.topic, self._partitions))
                claim = (
                    self._delivered
                    if self.envelope is Envelope.DIFFERENTIAL
                    else (lambda p, o, _step: self._claim(p, o))
                )
                batch = batch.keep(
                    [i for i, (p, o, st) in enumerate(batch.positions()) if not claim(p, o, st)]
                )
                continue
            if batch.partition is not None:
                steps = batch.steps
                self._last[batch.partition] = (batch.offsets[-1], 0 if steps is None else steps[-1])
            else:
                for p, o, st in batch.positions():
                    self._last[p] = (o, st)  # positions grow within a partition
            return len(batch)
        raise DeliveryError(f"topic {self.topic!r}: gave up after 5 failed transactions")

    def _produce(self, batch: _Batch) -> None:
        assert self._producer is not None
        producer = self._producer
        paused = gc.isenabled()
        gc.disable()  # a million short-lived dicts, no cycles: the collector only costs
        try:
            producer.begin_transaction()
            self._produce_all(batch)
        finally:
            if paused:
                gc.enable()
        producer.commit_transaction(TXN_TIMEOUT)

    def _produce_all(self, batch: _Batch) -> None:
        if batch.steps is not None:
            self._produce_differential(batch)
        elif batch.partition is not None:
            self._produce_one_partition(batch)
        else:
            self._produce_partitioned(batch)

    def _produce_one_partition(self, batch: _Batch) -> None:
        """jdbc to one partition: the hot loop. Only anchors (every ANCHOR_EVERY-th
        message, and the first and last) carry headers: headers cost as much as the
        rest of a produce call."""
        assert self._producer is not None
        assert batch.partition is not None
        produce = self._producer.produce
        topic, partition = self.topic, batch.partition
        values, keys, offsets = batch.values, batch.keys, batch.offsets
        count = len(offsets)
        if count <= ANCHOR_EVERY:  # a small transaction: every message says where it is
            for i, (value, key, offset) in enumerate(zip(values, keys, offsets, strict=True)):
                self._send_one(topic, value, key, partition, _anchor(offset, i == count - 1))
            return
        for start in range(0, count, ANCHOR_EVERY):
            stop = min(start + ANCHOR_EVERY, count)
            self._send_one(
                topic,
                values[start],
                keys[start],
                partition,
                _anchor(offsets[start], start == count - 1),
            )
            plain_stop = stop - 1 if stop == count else stop
            for value, key in zip(
                values[start + 1 : plain_stop], keys[start + 1 : plain_stop], strict=True
            ):
                try:
                    produce(topic, value, key, partition=partition)
                except BufferError:
                    self._send_one(topic, value, key, partition, None)
            if stop == count and count - 1 > start:
                self._send_one(topic, values[-1], keys[-1], partition, _anchor(offsets[-1], True))

    def _produce_partitioned(self, batch: _Batch) -> None:
        assert self._producer is not None
        produce = self._producer.produce
        topic = self.topic
        partitions = batch.partition_list()
        last_of: dict[int, int] = {}
        sizes: dict[int, int] = {}
        for i, partition in enumerate(partitions):
            last_of[partition] = i
            sizes[partition] = sizes.get(partition, 0) + 1
        dense = {p for p, n in sizes.items() if n <= ANCHOR_EVERY}
        seen: dict[int, int] = {}
        for i, (value, key, offset, partition) in enumerate(
            zip(batch.values, batch.keys, batch.offsets, partitions, strict=True)
        ):
            n = seen.get(partition, 0)
            seen[partition] = n + 1
            last = last_of[partition] == i
            if n % ANCHOR_EVERY == 0 or last or partition in dense:
                self._send_one(topic, value, key, partition, _anchor(offset, last))
                continue
            try:
                produce(topic, value, key, partition=partition)
            except BufferError:
                self._send_one(topic, value, key, partition, None)

    def _produce_differential(self, batch: _Batch) -> None:
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
            headers = {
                HEADER_OFFSET: b"%d" % offset,
                HEADER_STEP: b"%d" % step,
                HEADER_TIME: b"%d" % moment,
            }
            self._send_one(self.topic, value, key, partition, headers)

    def _send_one(self, topic: str, value: Any, key: Any, partition: int, headers: Any) -> None:
        """Produce one message, waiting for room in the local queue if need be."""
        assert self._producer is not None
        while True:
            try:
                self._producer.produce(topic, value, key, partition=partition, headers=headers)
                return
            except BufferError:
                self._producer.poll(0.05)

    def _close(self) -> None:
        if self._producer is not None:
            with suppress(Exception):
                self._producer.flush(10)
            self._producer = None

    # -- status helpers -----------------------------------------------------------------

    def _set(self, **changes: Any) -> None:
        with self._status_lock:
            self._status = replace(self._status, **changes)

    def _emit(self, kind: str, message: str, **details: Any) -> None:
        if self._on_event is not None:
            self._on_event(DeliveryEvent(kind=kind, topic=self.topic, message=message, **details))


def _anchor(offset: int, last: bool) -> dict[str, bytes]:
    """The position headers of a jdbc anchor message."""
    if last:
        return {HEADER_OFFSET: b"%d" % offset, HEADER_LAST: b"1"}
    return {HEADER_OFFSET: b"%d" % offset}


def _add_missing(base: DataType | None, extra: DataType | None) -> DataType | None:
    """``base`` with the struct fields only ``extra`` has appended (nullable), nested
    structs and arrays of structs included; ``base``'s own types are kept."""
    from pyspark.sql import types as T

    if base is None:
        return extra
    if extra is None:
        return base
    if isinstance(base, T.StructType) and isinstance(extra, T.StructType):
        theirs = {f.name: f for f in extra.fields}
        fields = [
            T.StructField(
                f.name,
                _add_missing(f.dataType, theirs[f.name].dataType) or f.dataType,
                f.nullable,
                f.metadata,
            )
            if f.name in theirs
            else f
            for f in base.fields
        ]
        known = {f.name for f in base.fields}
        fields += [
            T.StructField(f.name, f.dataType, True) for f in extra.fields if f.name not in known
        ]
        return T.StructType(fields)
    if isinstance(base, T.ArrayType) and isinstance(extra, T.ArrayType):
        element = _add_missing(base.elementType, extra.elementType) or base.elementType
        return T.ArrayType(element, base.containsNull)
    return base


def _field_names(data_type: DataType | None) -> set[str]:
    from pyspark.sql import types as T

    return set(data_type.fieldNames()) if isinstance(data_type, T.StructType) else set()


def _load_shaper(shaper: str | Path | None) -> str | None:
    """The shaper's SQL: the text of a ``.sql`` file (or SQL given as is)."""
    if shaper is None:
        return None
    text = str(shaper)
    if isinstance(shaper, Path) or text.strip().endswith(".sql"):
        path = Path(shaper)
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise DeliveryError(f"{path}: cannot read the shaper: {exc.strerror}") from None
    return text


def deliver_outputs(
    lake: Lake,
    outputs: Sequence[tuple[str, str]],
    *,
    stop: threading.Event | None = None,
    on_event: Callable[[DeliveryEvent], None] | None = None,
    continuous: bool = False,
    **options: Any,
) -> list[DeliveryStatus]:
    """Run one :class:`Delivery` per (pool, topic), each in its own thread, until all
    return (or ``stop``); raises the first failure after stopping the others."""
    stop = stop or threading.Event()
    deliveries = [Delivery(lake, pool, topic, **options) for pool, topic in outputs]
    errors: list[BaseException] = []

    def work(delivery: Delivery) -> None:
        try:
            delivery.run(stop, on_event, continuous=continuous)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            stop.set()

    threads = [
        threading.Thread(target=work, args=(d,), name=f"to-kafka {d.topic}", daemon=True)
        for d in deliveries
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)
    if errors:
        raise errors[0]
    return [d.status() for d in deliveries]


__all__ = [
    "BATCH_RECORDS",
    "HEADER_OFFSET",
    "HEADER_STEP",
    "HEADER_TIME",
    "Delivery",
    "DeliveryBusy",
    "DeliveryError",
    "DeliveryEvent",
    "DeliveryFenced",
    "DeliveryStatus",
    "Envelope",
    "Position",
    "TypeMismatch",
    "deliver_outputs",
    "differential_schema",
    "lock_path",
    "read_positions",
    "topic_lock",
]
