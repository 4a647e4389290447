"""Positions: where a record sits in the delivery order, the headers that carry it, and
reading the last delivered position back from the topic's tail.

Records carry their position in headers: ``zync.offset`` (the pool offset, decimal
ASCII) and, for the differential envelope, ``zync.step`` and ``zync.time``. The last
message of each transaction in each partition also carries ``zync.last``. A jdbc
transaction of more than :data:`ANCHOR_EVERY` messages in a partition puts them only on
its *anchors* (the first, the last and every :data:`ANCHOR_EVERY`-th message): the
messages between two anchors are the next records of that partition, one by one.

On start the position is read back **from the topic itself** (:func:`read_positions`):
the tail of each partition is consumed (read_committed) up to its end; the last record
with the header and the number of records after it give that partition's last delivered
position. Records before our first anchor (data that was there before) are ignored, and
so are records after an anchor marked ``zync.last`` (someone else's). Nothing assumes
offset arithmetic (transaction markers occupy offsets) nor trusts the high watermark
alone; when the last records of a partition carry no header, the window grows backwards.
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

#: jdbc: in a transaction with more messages than this in a partition, only every
#: this many (and the first and the last) carry the position headers; in a smaller one,
#: every message does.
ANCHOR_EVERY = 1_000
#: Records read back from the end of each partition at first to find the position.
TAIL_WINDOW = 4 * ANCHOR_EVERY

#: Message headers as confluent_kafka takes them (by name).
Headers = dict[str, str | bytes | None]
#: Message headers as confluent_kafka gives them back (pairs, or by name).
HeadersRead = Sequence[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None]


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
            return cls(offset, step, None if stamp is None else int(stamp), HEADER_LAST in values)
        except ValueError:
            return None

    def headers(self) -> list[tuple[str, bytes]]:
        out = [(HEADER_OFFSET, b"%d" % self.offset)]
        if self.time is not None:
            out.append((HEADER_STEP, b"%d" % self.step))
            out.append((HEADER_TIME, b"%d" % self.time))
        return out


def anchor_headers(offset: int, last: bool) -> Headers:
    """The position headers of a jdbc anchor message."""
    if last:
        return {HEADER_OFFSET: b"%d" % offset, HEADER_LAST: b"1"}
    return {HEADER_OFFSET: b"%d" % offset}


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
    # deferred: confluent_kafka (librdkafka)
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
            open_parts: set[int | None] = set(todo)
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
                    if position is not None:
                        best[part] = position
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
                    found[p] = replace(position, after=after[p])
                else:
                    found[p] = position
            todo = again
    finally:
        reader.close()
    return found
