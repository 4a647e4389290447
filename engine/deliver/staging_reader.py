"""Reading staging: the topic's records in a staging pool, as Arrow tables of
``offset, key, value`` (JSON texts), ``avro`` (the Avro bodies the ETL wrote, when the
pool has the column) and, from the change feed, ``time``.

The first pass reads the snapshot's files in commit order (streamed); later passes read
only the versions committed since, through the Delta log's change data feed
(``load_cdf``), read once for every output of the pool (:mod:`~engine.deliver.feed`).
Previous images (the latest value of each key) come from the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.deliver.errors import DeliveryError
from engine.deliver.feed import StagingFeed, record_columns

if TYPE_CHECKING:
    from engine.lake.pools import Pool

#: Records in the first transaction of a pass (the next ones grow to ``batch_records``).
FIRST_TRANSACTION = 8_192


class StagingReader:
    """Reads the records of ``topic`` in a staging pool (never its markers or dead
    letters)."""

    def __init__(
        self, pool: Pool, topic: str, *, batch_records: int, feed: StagingFeed | None = None
    ) -> None:
        self.pool = pool
        self.topic = topic
        self.batch_records = batch_records
        #: reads the changes of versions: shared by the outputs of one pool, or this
        #: reader's own
        self.feed = feed if feed is not None else StagingFeed([topic], pool=pool)

    def record_condition(self) -> pc.Expression:
        # marker rows have no kafka struct: the topic test leaves them out; a dead letter
        # always names its stage (testing one leaf reads much less than the struct)
        return (pc.field("kafka", "topic") == self.topic) & pc.field(
            "deadletter", "stage"
        ).is_null()

    def snapshot_tables(
        self, low: int, *, texts: bool = True, keys: bool = False
    ) -> Iterator[pa.Table]:
        """The topic's records with ``offset >= low`` in the loaded snapshot, streamed in
        tables of about ``batch_records`` rows; without ``texts``, from a pool with the
        ``avro`` column, only ``offset, avro`` (:meth:`texts` reads the rest), and the
        key's text too with ``keys``. Files are read in seqno order (commit order),
        which is offset order for the ETL's commits; when it is not (compacted files),
        the rest is read whole and sorted."""
        # deferred: deltalake
        from engine.lake.delta import arrow_schema, parquet_dataset

        table = self.pool.table
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
        condition = self.record_condition()
        if low > 0:
            condition = condition & (offset >= low)
        schema = arrow_schema(table)
        scanner = parquet_dataset(self.pool.location, uris, schema).scanner(
            columns=record_columns(schema, texts=texts, keys=keys),
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

    def snapshot(self, *, low: int | None = None, below: int | None = None) -> pa.Table:
        """Records of the topic in the loaded snapshot with ``low <= offset < below``,
        as columns offset, key, value."""
        offset = pc.field("kafka", "offset")
        condition = self.record_condition()
        if low is not None:
            condition = condition & (offset >= low)
        if below is not None:
            condition = condition & (offset < below)
        dataset = self.pool.dataset()
        return dataset.to_table(
            columns={"offset": offset, "key": pc.field("key"), "value": pc.field("value")},
            filter=condition,
        )

    def texts(self, offsets: list[int]) -> pa.Table:
        """``key, value`` (JSON texts) of the records at ``offsets`` (ascending), in that
        order, from the loaded snapshot."""
        found = self.snapshot(low=offsets[0], below=offsets[-1] + 1)
        found = found.filter(pc.is_in(found.column("offset"), pa.array(offsets, pa.int64())))
        found = found.sort_by("offset")
        if found.column("offset").to_pylist() != offsets:
            raise DeliveryError(
                f"pool {self.pool.name!r}, topic {self.topic!r}: the records at offsets "
                f"{offsets[0]}..{offsets[-1]} changed while they were read"
            )
        return found.select(["key", "value"])

    def last_offset(self) -> int | None:
        """The largest pool offset of the topic's records in the loaded snapshot (None:
        none); reads the offset column only."""
        table = self.pool.dataset().to_table(
            columns={"offset": pc.field("kafka", "offset")}, filter=self.record_condition()
        )
        if not table.num_rows:
            return None
        return int(pc.max(table.column("offset")).as_py())

    def changes(self, first: int, last: int, *, alone: bool = False) -> pa.Table:
        """Records of the topic added by versions ``first..last``, with their version
        (column ``time``), from the Delta log's change data feed (read once for every
        output of the pool that shares the :attr:`feed`; ``alone``: for this topic
        only, a range no other output reads)."""
        return self.feed.changes(self.topic, first, last, alone=alone)


def latest_images(table: pa.Table) -> dict[str, str]:
    """The latest image (non-null value) of every key among the rows of ``table``
    (columns offset, key, value)."""
    import polars as pl  # deferred: polars is slow to import

    if not table.num_rows:
        return {}
    frame = pl.from_arrow(table.select(["offset", "key", "value"]))
    assert isinstance(frame, pl.DataFrame)
    latest = frame.sort("offset").unique(subset=["key"], keep="last")
    latest = latest.filter(pl.col("value").is_not_null() & pl.col("key").is_not_null())
    return dict(zip(latest["key"].to_list(), latest["value"].to_list(), strict=True))
