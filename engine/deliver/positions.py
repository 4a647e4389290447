"""Positions: where a record sits in the delivery order, the headers that carry it, and
reading the last delivered position back from the topic's tail (the weaker of the two
places a position is kept; the stronger is the committed position,
:mod:`~engine.deliver.committed`).

Records carry their position in headers: ``zync.offset`` (the pool offset, decimal
ASCII), ``zync.step`` for envelopes that make several messages of a record, and
``zync.time`` (with ``zync.lower`` for ``materialize``) for those that go by staging
commit. Positioned messages also name the staging pool they come from
(:class:`PoolIdentity`: ``zync.pool.id``, the Delta table id, and ``zync.pool``, its
name), so that a tail written by another pool is noticed
(:mod:`~engine.deliver.ownership`). The last message of each jdbc transaction in each
partition also carries ``zync.last``. A jdbc transaction of more than
:data:`ANCHOR_EVERY` messages in a partition puts them only on its *anchors* (the first,
the last and every :data:`ANCHOR_EVERY`-th message): the messages between two anchors
are the next records of that partition, one by one.

On start the tail is read back (:func:`read_positions`), beside the committed position:
the tail of each partition is consumed (read_committed) up to its end; the last record
with the header and the number of records after it give that partition's last delivered
position. Records before our first anchor (data that was there before) are ignored, and
so are records after an anchor marked ``zync.last`` (someone else's). Nothing assumes
offset arithmetic (transaction markers occupy offsets) nor trusts the high watermark
alone; when the last records of a partition carry no header, the window grows backwards.
Retention and compaction only remove records, so the tail can be behind or empty, never
ahead; :mod:`~engine.deliver.ownership` says when it stands in for the committed
position.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from engine.deliver.errors import DeliveryError

if TYPE_CHECKING:
    from engine.settings.kafka import KafkaProfile

HEADER_OFFSET = "zync.offset"
HEADER_STEP = "zync.step"
HEADER_TIME = "zync.time"
HEADER_LAST = "zync.last"
HEADER_LOWER = "zync.lower"
HEADER_POOL_ID = "zync.pool.id"
HEADER_POOL = "zync.pool"

#: jdbc: in a transaction with more messages than this in a partition, only every
#: this many (and the first and the last) carry the position headers; in a smaller one,
#: every message does.
ANCHOR_EVERY = 1_000
#: Records read back from the end of each partition at first to find the position.
TAIL_WINDOW = 4 * ANCHOR_EVERY
#: Seconds one read of a batch of records waits (librdkafka returns a batch when it is
#: full or when this has passed, end of partition or not): short, so that reading a
#: short tail back does not wait.
READ_WAIT = 0.05
#: The settings of a consumer reading a short tail back: it says when it reached the end
#: of a partition, and the broker answers a fetch at once (not after its usual wait for
#: more records).
TAIL_READER = {"enable.partition.eof": True, "fetch.wait.max.ms": 10}
#: The largest step: ``(offset, LAST_STEP)`` covers every message made of pool offset
#: ``offset`` (differential and materialize: the progress message; larger than any
#: jdbc or debezium step).
LAST_STEP = 2

#: Message headers as confluent_kafka takes them (by name).
Headers = dict[str, str | bytes | None]
#: Message headers as confluent_kafka gives them back (pairs, or by name).
HeadersRead = Sequence[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None]


@dataclass(frozen=True)
class PoolIdentity:
    """The staging pool a delivery reads: its Delta table id (stable while the table
    lives; a recreated pool gets a new one) and its name."""

    id: str
    name: str

    def headers(self) -> Headers:
        return {HEADER_POOL_ID: self.id.encode(), HEADER_POOL: self.name.encode()}


@dataclass(frozen=True, order=True)
class Position:
    """Where a record sits in the delivery order: pool offset, then step.

    ``step`` is 0 for jdbc records; differential and materialize: 0 (retraction),
    1 (insertion) or 2 (progress); debezium: 0 (the change event), 1 (the tombstone
    after a delete). ``time`` is the staging commit (Delta version) of time-based
    envelopes, ``lower`` the lower bound of that time's materialize progress statement.
    ``pool_id``/``pool_name`` name the staging pool that wrote it (None: a message of a
    zync older than these headers); ``timestamp`` is the message's Kafka timestamp (ms).
    """

    offset: int
    step: int = 0
    time: int | None = field(default=None, compare=False)
    #: the record closed its transaction in its partition (``zync.last`` header)
    last: bool = field(default=False, compare=False)
    #: messages after this one in the partition (read back: they carry no header)
    after: int = field(default=0, compare=False)
    lower: int | None = field(default=None, compare=False)
    pool_id: str | None = field(default=None, compare=False)
    pool_name: str | None = field(default=None, compare=False)
    timestamp: int | None = field(default=None, compare=False)
    #: the Kafka offset of the last message this position accounts for (read back)
    at: int | None = field(default=None, compare=False)

    @classmethod
    def from_headers(cls, headers: HeadersRead | None) -> Position | None:
        if not headers:
            return None
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        values = {name: value for name, value in pairs if value is not None}
        raw = values.get(HEADER_OFFSET)
        if raw is None:
            return None
        try:
            offset = int(raw)
            step = int(values.get(HEADER_STEP, b"0"))
            stamp = values.get(HEADER_TIME)
            lower = values.get(HEADER_LOWER)
            return cls(
                offset,
                step,
                None if stamp is None else int(stamp),
                HEADER_LAST in values,
                lower=None if lower is None else int(lower),
                pool_id=_text(values.get(HEADER_POOL_ID)),
                pool_name=_text(values.get(HEADER_POOL)),
            )
        except ValueError:
            return None

    @property
    def writer(self) -> str:
        """The pool that wrote it, for messages."""
        if self.pool_id is None:
            return "a zync that did not name its pool"
        return f"staging pool {self.pool_name!r} (table id {self.pool_id})"


def _text(raw: str | bytes | None) -> str | None:
    if raw is None:
        return None
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


def anchor_headers(offset: int, last: bool, identity: Headers) -> Headers:
    """The position headers of a jdbc anchor message (``identity``: the pool's)."""
    if last:
        return {HEADER_OFFSET: b"%d" % offset, HEADER_LAST: b"1", **identity}
    return {HEADER_OFFSET: b"%d" % offset, **identity}


@dataclass(frozen=True)
class Tail:
    """What the end of each partition says: the last delivered position read back
    (None: none there) and the partition's low and high watermarks."""

    positions: dict[int, Position | None]
    marks: dict[int, tuple[int, int]]


def read_positions(
    kafka: KafkaProfile,
    topic: str,
    partitions: Sequence[int],
    *,
    window: int = TAIL_WINDOW,
    timeout: float = 60.0,
) -> Tail:
    """The last delivered position in each partition, read from the topic's tail.

    Consumes (read_committed) the last records of each partition up to its end and keeps
    the last record with the ``zync.offset`` header, with the number of records after it
    (``Position.after``, 0 when that record closed its transaction: what follows is not
    ours); when none has the header, reads a window four times larger, down to the start
    of the partition. ``Position.at`` is the Kafka offset of the last record it accounts
    for.
    """
    # deferred: confluent_kafka (librdkafka)
    from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaException, TopicPartition

    from engine.kafka.clients import consumer
    from engine.kafka.watermarks import watermarks

    found: dict[int, Position | None] = {}
    deadline = time.monotonic() + timeout
    reader = consumer(kafka, extra=TAIL_READER)
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
            last_at = {p: -1 for p in todo}
            open_parts: set[int | None] = set(todo)
            reader.assign([TopicPartition(topic, p, starts[p]) for p in sorted(todo)])
            while open_parts:
                if time.monotonic() > deadline:
                    raise DeliveryError(
                        f"could not read the end of topic {topic!r} within {timeout:g}s "
                        "to find where delivery stopped; is the broker healthy?"
                    )
                try:
                    messages = reader.consume(10_000, READ_WAIT)
                except KafkaException as exc:
                    raise DeliveryError(
                        f"cannot read topic {topic!r}: {exc.args[0].str()}"
                    ) from None
                for message in messages:
                    part = message.partition()
                    error = message.error()
                    if error is not None:
                        if error.code() == error._PARTITION_EOF:
                            open_parts.discard(part)
                            continue
                        if error.fatal() or not error.retriable():
                            raise DeliveryError(f"cannot read topic {topic!r}: {error.str()}")
                        continue
                    assert part is not None  # a record always comes from a partition
                    position = Position.from_headers(message.headers())
                    at = message.offset()
                    if at is not None:
                        last_at[part] = at
                    if position is not None:
                        kind, stamp = message.timestamp()
                        if kind != TIMESTAMP_NOT_AVAILABLE:
                            position = replace(position, timestamp=stamp)
                        best[part] = replace(position, at=at)
                        after[part] = 0
                    elif best.get(part) is not None:
                        after[part] += 1
            reader.unassign()
            again = set()
            for p in todo:
                low, _ = marks[p]
                position = best[p]
                if position is None and starts[p] > low:
                    windows[p] *= 4
                    again.add(p)
                elif position is not None and not position.last and after[p]:
                    found[p] = replace(position, after=after[p], at=last_at[p])
                else:
                    found[p] = position
            todo = again
    finally:
        reader.close()
    return Tail(found, marks)
