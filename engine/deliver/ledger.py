"""What is delivered, per partition, and which partition each record goes to.

Each record's partition is a pure function of its key (CRC-32 of the key's JSON text
modulo the partition count; records without a key go by pool offset), so after a
restart every record is skipped or produced by comparing its position with *its*
partition's last position. This stays exactly once even on a broker that shows the
records of aborted transactions to read_committed consumers (the embedded Tansu does):
whatever a consumer can see counts as delivered, per partition, and the rest follows.
(Records someone else writes into the topic between our anchors while a transaction is
cut short would be counted as ours: the output topic belongs to to-kafka.)
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

import pyarrow as pa

from engine.deliver.positions import LAST_STEP, Position
from engine.deliver.rows import Batch


class Ledger:
    """The last delivered (offset, step) of each partition of the topic.

    With ``counts_after`` (jdbc), records read back after a partition's last anchor carry
    no header: with one partition their count gives the position at once; with several,
    the next records of each partition are claimed one by one (:meth:`claim`) until the
    count is used up.
    """

    def __init__(self, partitions: Sequence[int], *, counts_after: bool) -> None:
        self.partitions = list(partitions)
        self.counts_after = counts_after
        self.last: dict[int, tuple[int, int]] = {}  # partition -> (offset, step) delivered
        self.after: dict[int, int] = {}  # partition -> records delivered after `last`

    def take(self, found: Mapping[int, Position | None]) -> None:
        """Positions read back (judged by :mod:`~engine.deliver.ownership`)."""
        self.last = {}
        self.after = {}
        for partition, position in found.items():
            if position is None:
                continue
            after = position.after if self.counts_after else 0
            if len(self.partitions) == 1:
                self.last[partition] = (position.offset + after, position.step)
            else:
                self.last[partition] = (position.offset, position.step)
                if after:
                    self.after[partition] = after

    def complete(self) -> bool:
        """Every partition holds a position."""
        return len(self.last) == len(self.partitions)

    def lowest(self) -> int | None:
        return min((o for o, _ in self.last.values()), default=None)

    def highest(self) -> int | None:
        return max((o for o, _ in self.last.values()), default=None)

    def partition_of(self, key: str | None, offset: int) -> int:
        return self.partitions_of([key], [offset])[0]

    def partitions_of(self, keys: Sequence[str | None], offsets: Sequence[int]) -> list[int]:
        """The partition of each record (key JSON text, pool offset): CRC-32 of the key
        modulo the partition count, by offset without a key; one loop for them all."""
        count = len(self.partitions)
        if count == 1:
            return [self.partitions[0]] * len(offsets)
        crc32 = zlib.crc32
        return [
            offset % count if key is None else crc32(key.encode("utf-8")) % count
            for key, offset in zip(keys, offsets, strict=True)
        ]

    def partitions_of_texts(self, keys: pa.ChunkedArray, offsets: Sequence[int]) -> list[int]:
        """:meth:`partitions_of` for the keys' JSON texts as Arrow strings: their bytes
        hashed as they are when none is NULL."""
        count = len(self.partitions)
        if count == 1 or keys.null_count:
            return self.partitions_of(keys.to_pylist(), offsets)
        crc32 = zlib.crc32
        return [crc32(key) % count for key in keys.cast(pa.binary()).to_pylist()]

    def claims_none_from(self, offset: int) -> bool:
        """Whether :meth:`claim` is False for every record from pool offset ``offset``
        on: no partition has delivered past it or has records read back after its last
        anchor left to claim."""
        return not any(self.after.values()) and all(o < offset for o, _ in self.last.values())

    def delivered(self, partition: int, offset: int, step: int = 0) -> bool:
        last = self.last.get(partition)
        return last is not None and (offset, step) <= last

    def claim(self, partition: int, offset: int, step: int = 0) -> bool:
        """Whether the record at ``offset`` (``step``) of ``partition`` was delivered;
        called once per record in offset order (it uses up the count read after the last
        anchor)."""
        if self.delivered(partition, offset, step):
            return True
        if self.after.get(partition):
            self.after[partition] -= 1
            self.last[partition] = (offset, step)
            return True
        return False

    def unclaimed(self, batch: Batch) -> Batch:
        """The messages of ``batch`` not delivered (after positions were read back)."""
        return batch.keep(
            [i for i, (p, o, st) in enumerate(batch.positions()) if not self.claim(p, o, st)]
        )

    def note(self, batch: Batch, through: int | None = None) -> None:
        """``batch`` was committed, and with it every record up to pool offset
        ``through`` is delivered (:meth:`standing`)."""
        self.last = self.standing(batch, through)

    def standing(self, batch: Batch | None, through: int | None) -> dict[int, tuple[int, int]]:
        """Each partition's last delivered (offset, step) once ``batch`` is committed:
        with it every record up to pool offset ``through`` is delivered, whichever
        partition its key sends it to (so every partition stands at least at
        ``(through, LAST_STEP)``)."""
        last = dict(self.last)
        if batch is not None and len(batch):
            if batch.partition is not None:
                steps = batch.steps
                last[batch.partition] = (batch.offsets[-1], 0 if steps is None else steps[-1])
            else:
                last |= _last_positions(batch, len(self.partitions))
        if through is not None:
            floor = (through, LAST_STEP)
            for p in self.partitions:
                current = last.get(p)
                if current is None or current < floor:
                    last[p] = floor
        return last


def _last_positions(batch: Batch, partitions: int) -> dict[int, tuple[int, int]]:
    """The last (offset, step) of each partition in ``batch`` (positions grow within a
    partition), found from its end: as soon as each of ``partitions`` partitions has
    been seen."""
    found: dict[int, tuple[int, int]] = {}
    parts, offsets, steps = batch.partition_list(), batch.offsets, batch.steps
    for i in range(len(parts) - 1, -1, -1):
        partition = parts[i]
        if partition not in found:
            found[partition] = (offsets[i], 0 if steps is None else steps[i])
            if len(found) == partitions:
                break
    return found
