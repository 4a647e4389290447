"""The outputs a range of staging versions added to one topic, as to-kafka reads them.

:class:`StagingChanges` reads the records (never markers or dead letters) of one output
topic that staging versions ``first..last`` added, from the Delta log's change data feed
(delta-rs ``load_cdf``), with the version and time of the commit that added each: the
columns ``offset, key, value`` (JSON texts), ``version`` and ``time``, in offset order.
As in :mod:`engine.deliver.staging_reader`, a version holding a metaData action (the pool's
creation, a change of its recorded types), where delta-rs' feed cannot start, is read by
comparing its file list with the previous version's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ZyncError
from engine.lake import delta
from engine.lake.change_feed import ChangeFeedError, MetadataVersion, inserted_records

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from engine.lake.pools import Pool

TIME = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema(
    [
        ("offset", pa.int64()),
        ("key", pa.string()),
        ("value", pa.string()),
        ("version", pa.int64()),
        ("time", TIME),
    ]
)


class StagingReadError(ZyncError):
    """The staging pool's changes cannot be read (e.g. files removed by VACUUM)."""


class StagingChanges:
    """Reads what staging versions added to one output topic."""

    def __init__(self, pool: Pool, topic: str) -> None:
        self.pool = pool
        self.topic = topic

    def read(self, first: int, last: int) -> pa.Table:
        """The topic's records added by versions ``first..last`` (:data:`SCHEMA`)."""
        parts = []
        version = first
        while version <= last:
            try:
                parts.append(self._feed(version, last))
                break
            except MetadataVersion:
                parts.append(self._version_rows(version))
                version += 1
        rows = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        return rows.sort_by("offset")

    def _feed(self, first: int, last: int) -> pa.Table:
        topic = self.topic.replace("\\", "\\\\").replace("'", "\\'")
        columns = ["kafka", "key", "value", "_commit_version", "_commit_timestamp"]

        def shaped(table: pa.Table) -> pa.Table:
            return pa.table(
                {
                    "offset": pc.struct_field(table.column("kafka"), "offset").cast(pa.int64()),
                    "key": table.column("key").cast(pa.string()),
                    "value": table.column("value").cast(pa.string()),
                    "version": table.column("_commit_version").cast(pa.int64()),
                    "time": _utc(table.column("_commit_timestamp")),
                }
            )

        try:
            where = f"kafka.topic = '{topic}'"
            return inserted_records(self.pool, first, last, where, columns, shaped)
        except ChangeFeedError as exc:
            raise StagingReadError(str(exc)) from None

    def _version_rows(self, version: int) -> pa.Table:
        """Records of the topic in the files that ``version`` added."""
        snapshot = self.pool.snapshot(version)
        before = set(self.pool.snapshot(version - 1).file_uris()) if version > 0 else set()
        added = [uri for uri in snapshot.file_uris() if uri not in before]
        if not added:
            return SCHEMA.empty_table()
        condition = (pc.field("kafka", "topic") == self.topic) & pc.field(
            "deadletter", "stage"
        ).is_null()
        dataset = delta.parquet_dataset(self.pool.location, added, delta.arrow_schema(snapshot))
        rows = dataset.to_table(
            columns={"offset": pc.field("kafka", "offset"), "key": pc.field("key"),
                     "value": pc.field("value")},
            filter=condition,
        )
        at = commit_time(snapshot)
        return pa.table(
            {
                "offset": rows.column("offset").cast(pa.int64()),
                "key": rows.column("key"),
                "value": rows.column("value"),
                "version": pa.array([version] * rows.num_rows, pa.int64()),
                "time": pa.array([at] * rows.num_rows, TIME),
            },
            schema=SCHEMA,
        )


def commit_time(snapshot: DeltaTable) -> datetime:
    """When the version a snapshot is at was committed."""
    entries = snapshot.history(1)
    stamp = entries[0].get("timestamp") if entries else None
    return datetime.fromtimestamp((stamp or 0) / 1000, UTC)


def _utc(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """delta-rs gives the commit time without a zone (it is UTC): say so."""
    if pa.types.is_timestamp(column.type) and column.type.tz is None:
        return pc.assume_timezone(column.cast(pa.timestamp("us")), "UTC")
    return column.cast(TIME)
