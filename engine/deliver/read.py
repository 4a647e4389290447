"""Reading staging: the topic's records in a staging pool, as Arrow tables of
``offset, key, value`` (JSON texts), ``avro`` (the Avro bodies the ETL wrote, when the
pool has the column) and, from the change feed, ``time``.

The first pass reads the snapshot's files in commit order (streamed); later passes read
only the versions committed since, through the Delta log's change data feed
(``load_cdf``). Previous images (the latest value of each key) come from the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.deliver.errors import DeliveryError
from engine.lake.pool_record import AVRO_FIELD, AVRO_TYPE

if TYPE_CHECKING:
    from engine.lake.pools import Pool

#: Records in the first transaction of a pass (the next ones grow to ``batch_records``).
FIRST_TRANSACTION = 8_192


class _MetadataVersion(Exception):
    """The change data feed cannot start at a version holding a metaData action."""


class StagingReader:
    """Reads the records of ``topic`` in a staging pool (never its markers or dead
    letters)."""

    def __init__(self, pool: Pool, topic: str, *, batch_records: int) -> None:
        self.pool = pool
        self.topic = topic
        self.batch_records = batch_records

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
            columns=_record_columns(schema, texts=texts, keys=keys),
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

    def changes(self, first: int, last: int) -> pa.Table:
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
        if not parts:  # no version: nothing added
            return self._rows_schema().empty_table()
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _change_feed(self, first: int, last: int) -> pa.Table:
        from engine.lake.delta import arrow_schema  # deferred: deltalake

        try:
            avro = _has_avro(arrow_schema(self.pool.table))
            reader = self.pool.table.load_cdf(
                starting_version=first,
                ending_version=last,
                predicate=f"kafka.topic = '{_sql_string(self.topic)}'",
                columns=[
                    "kafka",
                    "key",
                    "value",
                    *(["avro"] if avro else []),
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
                f"cannot read the changes of pool {self.pool.name!r} (versions {first}.."
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
                **({"avro": table.column("avro").cast(AVRO_TYPE)} if avro else {}),
                "time": table.column("_commit_version").cast(pa.int64()),
            }
        )
        return rows.filter(keep)

    def _rows_schema(self) -> pa.Schema:
        """The columns of the changes read: those of the newest table's rows."""
        from engine.lake.delta import arrow_schema  # deferred: deltalake

        avro = _has_avro(arrow_schema(self.pool.table))
        return pa.schema(
            [
                ("offset", pa.int64()),
                ("key", pa.string()),
                ("value", pa.string()),
                *([("avro", AVRO_TYPE)] if avro else []),
                ("time", pa.int64()),
            ]
        )

    def _version_rows(self, version: int) -> pa.Table:
        """Records of the topic in the files that ``version`` added."""
        # deferred: deltalake
        from engine.lake.delta import arrow_schema, parquet_dataset

        table = self.pool.snapshot(version)
        before = set(self.pool.snapshot(version - 1).file_uris()) if version > 0 else set()
        added = [uri for uri in table.file_uris() if uri not in before]
        schema = self._rows_schema()
        avro = "avro" in schema.names
        if not added:
            return schema.empty_table()
        table_schema = arrow_schema(table)
        dataset = parquet_dataset(self.pool.location, added, table_schema)
        rows = dataset.to_table(
            columns=_record_columns(table_schema), filter=self.record_condition()
        )
        if avro and "avro" not in rows.column_names:  # a version before the upgrade
            rows = rows.append_column("avro", pa.nulls(rows.num_rows, AVRO_TYPE))
        return rows.append_column(
            "time", pa.array([version] * rows.num_rows, type=pa.int64())
        ).cast(schema)


def _has_avro(schema: pa.Schema) -> bool:
    return AVRO_FIELD.name in schema.names


def _record_columns(
    schema: pa.Schema, *, texts: bool = True, keys: bool = False
) -> dict[str, pc.Expression]:
    """What a record read projects: ``offset, key, value`` and, from a staging pool
    that has it, ``avro`` (the Avro bodies the ETL wrote); without ``texts`` (and with
    ``avro``), not ``key, value`` (but ``key`` with ``keys``)."""
    columns = {"offset": pc.field("kafka", "offset")}
    if texts or not _has_avro(schema):
        columns |= {"key": pc.field("key"), "value": pc.field("value")}
    elif keys:
        columns["key"] = pc.field("key")
    if _has_avro(schema):
        columns["avro"] = pc.field("avro")
    return columns


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


def _sql_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
