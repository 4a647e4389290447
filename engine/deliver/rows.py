"""The rows to deliver and the messages made of them.

:class:`Rows` are staging rows of one topic in offset order; a :class:`Batch` is the
messages one Kafka transaction produces, column by column.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from engine.deliver.errors import DeliveryError

_T = TypeVar("_T")


@dataclass
class Rows:
    """Staging rows of one topic in offset order: offsets (and times) as Python lists,
    key and value JSON texts as Arrow arrays (encoded in batches, never copied whole),
    and the Avro bodies the ETL wrote (:data:`engine.lake.pool_record.AVRO_TYPE`; None when
    the rows have none: an older pool, or a shaper's result).

    Rows whose bodies are shipped as they are may come without their texts (read
    without ``key, value``: ``texts`` is None); :attr:`keys` and :attr:`values` then
    raise, and nothing may ask for them. Read with the key's text alone (which picks
    the partition), that is :attr:`key_texts`."""

    offsets: list[int]
    texts: tuple[pa.ChunkedArray, pa.ChunkedArray] | None
    times: list[int] | None = None
    avro: pa.ChunkedArray | None = None
    key_texts: pa.ChunkedArray | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def keys(self) -> pa.ChunkedArray:
        return self._texts()[0]

    @property
    def values(self) -> pa.ChunkedArray:
        return self._texts()[1]

    @property
    def partition_keys(self) -> pa.ChunkedArray:
        """The keys' JSON texts, which pick the records' partitions."""
        if self.texts is None and self.key_texts is not None:
            return self.key_texts
        return self.keys

    def _texts(self) -> tuple[pa.ChunkedArray, pa.ChunkedArray]:
        if self.texts is None:
            raise DeliveryError("internal: rows read without their JSON texts were asked for them")
        return self.texts

    @classmethod
    def from_arrow(cls, table: pa.Table, with_times: bool = False) -> Rows:
        table = in_offset_order(table)
        names = table.column_names
        texts = key_texts = None
        if "value" in names:
            texts = (table.column("key"), table.column("value"))
        elif "key" in names:
            key_texts = table.column("key")
        return cls(
            table.column("offset").to_pylist(),
            texts,
            table.column("time").to_pylist() if with_times else None,
            table.column("avro") if "avro" in names else None,
            key_texts,
        )

    def slice(self, start: int, stop: int) -> Rows:
        stop = min(stop, len(self.offsets))
        count = stop - start
        texts = self.texts and (self.keys.slice(start, count), self.values.slice(start, count))
        return Rows(
            self.offsets[start:stop],
            texts,
            None if self.times is None else self.times[start:stop],
            None if self.avro is None else self.avro.slice(start, count),
            None if self.key_texts is None else self.key_texts.slice(start, count),
        )

    def take(self, index: list[int]) -> Rows:
        picked = pa.array(index, pa.int64())
        texts = self.texts and (self.keys.take(picked), self.values.take(picked))
        return Rows(
            [self.offsets[i] for i in index],
            texts,
            None if self.times is None else [self.times[i] for i in index],
            None if self.avro is None else self.avro.take(picked),
            None if self.key_texts is None else self.key_texts.take(picked),
        )


@dataclass
class Batch:
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
    #: the bytes of the values, counted once (:meth:`value_bytes`)
    _value_bytes: int | None = field(default=None, repr=False, compare=False)
    #: which messages carry position headers, when the envelope works that out ahead
    #: of producing (the jdbc envelope to several partitions)
    anchors: tuple[list[int], set[int]] | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.offsets)

    def value_bytes(self) -> int:
        """The bytes of the messages' values (tombstones count 0): counted where the
        batch is encoded, off the producing thread."""
        if self._value_bytes is None:
            self._value_bytes = sum(map(len, filter(None, self.values)))
        return self._value_bytes

    def partition_list(self) -> list[int]:
        if self.partitions is not None:
            return self.partitions
        assert self.partition is not None
        return [self.partition] * len(self.offsets)

    def positions(self) -> Iterator[tuple[int, int, int]]:
        """(partition, offset, step) of each message."""
        steps = self.steps if self.steps is not None else [0] * len(self.offsets)
        return zip(self.partition_list(), self.offsets, steps, strict=True)

    def keep(self, index: list[int]) -> Batch:
        def pick(values: list[_T] | None) -> list[_T] | None:
            return None if values is None else [values[i] for i in index]

        return Batch(
            [self.offsets[i] for i in index],
            [self.keys[i] for i in index],
            [self.values[i] for i in index],
            self.partition,
            pick(self.partitions),
            pick(self.steps),
            pick(self.times),
        )


def in_offset_order(table: pa.Table) -> pa.Table:
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
