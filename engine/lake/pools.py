"""Pools: the Delta tables of a lake, with exactly-once positions and seqnos.

A lake is a directory or an ``s3://`` prefix (:mod:`engine.lake.location`); each pool is
a Delta table in ``<lake>/<name>`` with the rows of :mod:`engine.lake.pool_record` (and, in
a staging pool, ``avro``). Its description says its kind as JSON (``{"zync": {"kind":
"raw"|"staging", "format": 2}}``); the Spark type of each topic's key and value, which is
how SQL sees typed structs over the JSON text the rows hold, is in type files the table
property ``zync.types`` names (:mod:`engine.lake.topic_types`).

Positions live in the Delta log itself, as ``txn`` actions committed with the data:

* ``zync.in/<topic>/<partition>`` → last Kafka offset this pool holds (from-kafka);
* ``zync.seqno`` → the last seqno assigned, so concurrent writers cannot hand out the
  same seqno twice (their commits conflict on it, and the loser re-plans).

Other loops (ETL, to-kafka) keep their own app ids next to these, see
:meth:`Pool.app_version`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from engine.lake import appends, delta, pool_types, spark_rows, upgrade
from engine.lake.appends import SEQNO_APP, AppendResult, ingest_app
from engine.lake.commit_guard import CommitGuard
from engine.lake.location import Location, parse_location
from engine.lake.pool_errors import PoolError, PoolNotFound
from engine.lake.pool_record import (
    STAGING_TABLE_SCHEMA,
    TABLE_SCHEMA,
    rows_for,
)
from engine.lake.topic_types import (
    TopicTypes,
    TypeFiles,
    pool_description,
)
from engine.lake.txns import TxnVersions

if TYPE_CHECKING:
    import pyarrow.dataset as ds
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

RAW = "raw"
STAGING = "staging"
KINDS = (RAW, STAGING)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,127}$")


class Lake:
    """A directory or an ``s3://`` prefix holding pools."""

    def __init__(self, root: str | Path | Location) -> None:
        self.location = root if isinstance(root, Location) else parse_location(root)
        self.guard = CommitGuard(self.location)
        if not self.location.is_local:
            # deferred: engine.spark loads nothing heavy, but the lake needs it only here
            from engine.spark import use_object_storage

            use_object_storage(self.location.settings)

    def __repr__(self) -> str:
        return f"Lake({self.location.uri!r})"

    @property
    def root(self) -> Path:
        """The lake's directory (a local lake only; see :attr:`location`)."""
        return self.location.path

    def pool_location(self, name: str) -> Location:
        if not _NAME.match(name):
            raise PoolError(
                f"invalid pool name {name!r}: use letters, digits, '_' and '-', "
                "starting with a letter or '_'"
            )
        return self.location.join(name)

    def pool_path(self, name: str) -> Path:
        """A pool's directory (a local lake only; see :meth:`pool_location`)."""
        return self.pool_location(name).path

    def exists(self, name: str) -> bool:
        where = self.pool_location(name)
        self.guard.check_access()
        return DeltaTable.is_deltatable(where.uri, storage_options=where.storage_options())

    def pool_names(self) -> list[str]:
        """Names of the Delta tables directly under the lake root (pools or not)."""
        if self.location.is_local and not self.location.path.is_dir():
            return []
        self.guard.check_access()
        return [
            name
            for name in self.location.child_names()
            if self.location.join(name, "_delta_log").exists()
        ]

    def create_pool(self, name: str, kind: str = RAW, *, exist_ok: bool = False) -> Pool:
        """Create an empty pool (or open it when ``exist_ok`` and it is one)."""
        if kind not in KINDS:
            raise PoolError(f"unknown pool kind {kind!r}: use one of {', '.join(KINDS)}")
        where = self.pool_location(name)
        if self.exists(name):
            if exist_ok:
                return self.open_pool(name)
            raise PoolError(f"pool {name!r} already exists in {self.location}")
        self.guard.require_safe_commits()
        try:
            where.make_dirs()
        except OSError as exc:
            raise PoolError(f"cannot create pool {name!r} at {where}: {exc.strerror}") from exc
        try:
            DeltaTable.create(
                where.uri,
                schema=STAGING_TABLE_SCHEMA if kind == STAGING else TABLE_SCHEMA,
                mode="error",
                name=name,
                description=pool_description(kind),
                storage_options=where.storage_options(),
            )
        except Exception as exc:  # another creator won the race
            if exist_ok and self.exists(name):
                return self.open_pool(name)
            raise PoolError(f"cannot create pool {name!r}: {exc}") from exc
        return self.open_pool(name)

    def open_pool(self, name: str) -> Pool:
        """Open an existing pool, checking that the table is a zync pool."""
        where = self.pool_location(name)
        self.guard.check_access()
        try:
            table = delta.open_table(where)
        except TableNotFoundError:
            known = ", ".join(self.pool_names()) or "none"
            raise PoolNotFound(
                f"no pool {name!r} in lake {self.location} (pools: {known}); "
                f"create it with `zync pool create {name}`"
            ) from None
        pool = Pool(name, where, table, self.guard)
        upgrade.upgrade(pool.table, staging=pool.kind == STAGING)  # an earlier zync's pool
        if pool.meta.legacy:
            pool.move_legacy_types()
        return pool

    def drop_pool(self, name: str) -> None:
        self.pool_location(name).remove_tree()


class Pool:
    """One Delta table of the lake. Keep one object per pool and :meth:`refresh` it."""

    def __init__(
        self,
        name: str,
        location: Location | Path | str,
        table: DeltaTable,
        guard: CommitGuard | None = None,
    ) -> None:
        self.name = name
        self.location = location if isinstance(location, Location) else parse_location(location)
        self.table = table
        self.guard = guard or CommitGuard(self.location)
        self.type_files = TypeFiles.of(self.location)
        self.meta = pool_types.pool_meta(self.location, table, self.type_files)
        self._txns = TxnVersions()

    def __repr__(self) -> str:
        return f"Pool({self.name!r}, kind={self.meta.kind}, version={self.version})"

    @property
    def uri(self) -> str:
        return self.location.uri

    @property
    def path(self) -> Path:
        """The pool's directory (a local lake only; see :attr:`location`)."""
        return self.location.path

    @property
    def kind(self) -> str:
        return self.meta.kind

    @property
    def version(self) -> int:
        return self.table.version()

    @property
    def row_schema(self) -> pa.Schema:
        """The rows this pool's table takes (:func:`~engine.lake.pool_record.rows_for`)."""
        return rows_for([f.name for f in self.table.schema().fields])

    def refresh(self) -> int:
        """Catch up with commits made since the table was loaded; returns the version."""
        before = self.table.version()
        self.table.update_incremental()
        if self.table.version() != before:
            self.meta = pool_types.read_meta_of(self)
        return self.table.version()

    def latest_version(self) -> int:
        """The newest version in the Delta log, without loading it (cheap poll)."""
        return self.refresh()

    # -- positions --------------------------------------------------------------------

    def app_version(self, app_id: str) -> int | None:
        """The version stored for a Delta txn app id in the loaded snapshot."""
        return self._txns.get(self.table, app_id)

    def position(self, topic: str, partition: int) -> int | None:
        """The last offset of (topic, partition) this pool holds, or None."""
        return self.app_version(ingest_app(topic, partition))

    def last_seqno(self) -> int:
        """The last seqno assigned in this pool (-1 before the first record)."""
        value = self.app_version(SEQNO_APP)
        return -1 if value is None else value

    # -- types ------------------------------------------------------------------------

    def topic_types(self, topic: str) -> TopicTypes | None:
        return self.meta.types.get(topic)

    def record_types(self, types: Mapping[str, TopicTypes]) -> bool:
        """Merge topic types into the pool's; True when that changed them
        (:func:`engine.lake.pool_types.record_types`)."""
        return pool_types.record_types(self, types)

    def move_legacy_types(self) -> None:
        """Move the types an earlier zync kept in the description into type files
        (:func:`engine.lake.pool_types.move_legacy_types`)."""
        pool_types.move_legacy_types(self)

    # -- writing ----------------------------------------------------------------------

    def append_records(
        self,
        rows: pa.Table,
        positions: Mapping[tuple[str, int], int],
        *,
        starts: Mapping[tuple[str, int], int] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> AppendResult:
        """Append ingested rows and their positions in one commit, exactly once
        (:func:`engine.lake.appends.append_records`)."""
        return appends.append_records(self, rows, positions, starts=starts, metadata=metadata)

    def committed(self, planned_on: int, txns: Mapping[str, int]) -> None:
        """After this object's own commit on version ``planned_on``, which wrote
        ``txns``: load the new snapshot, keeping what is known of the txns."""
        self._txns.committed(planned_on, self.refresh(), txns)

    def commit_rows(
        self,
        rows: pa.Table,
        *,
        expect_version: int,
        app_transactions: Mapping[str, int] | None = None,
        metadata: Mapping[str, Any] | None = None,
        files: Sequence[delta.WrittenFile] = (),
    ) -> int:
        """Commit rows only if the pool is still at ``expect_version``; returns the new
        version (:func:`engine.lake.appends.commit_rows`)."""
        return appends.commit_rows(
            self, rows, expect_version=expect_version, app_transactions=app_transactions,
            metadata=metadata, files=files,
        )  # fmt: skip

    def write_spark(self, df: DataFrame, label: str = "spark") -> list[delta.WrittenFile]:
        """Write ``df`` (:func:`engine.lake.spark_rows.write_files`) as Parquet files
        into a new directory of the pool's (``<label>-<uuid>``), from the Spark
        executors, without committing them (see :meth:`commit_rows`). The lake must be
        on storage the executors and this process share (a shared file system, or S3)."""
        return spark_rows.write_files(self.location, df, label)

    # -- reading ----------------------------------------------------------------------

    def files(self, predicate: str | None = None) -> list[str]:
        return delta.live_files(self.table, predicate)

    def dataset(self, predicate: str | None = None) -> ds.Dataset:
        """The loaded snapshot's :meth:`files` (pruned by ``predicate``: callers still
        filter rows) as a pyarrow dataset. Not delta-rs' ``to_pyarrow_dataset``: on S3 it
        reads through a Python file system whose threads can abort the process at exit
        (bench/RESULTS.md, "S3: an abort at exit")."""
        return delta.parquet_dataset(self.location, self.files(predicate), delta.arrow_schema(self.table))

    def snapshot(self, version: int | None = None) -> DeltaTable:
        return self.table if version is None else delta.open_table(self.location, version=version)

    def read(
        self, spark: SparkSession, *, predicate: str | None = None, version: int | None = None
    ) -> DataFrame:
        """Every row of the snapshot (all kinds, JSON text), rows filtered by ``predicate``
        (Delta skips the files whose statistics rule it out)."""
        return delta.read_spark(spark, self.snapshot(version), predicate)

    def records(
        self,
        spark: SparkSession,
        topic: str | None = None,
        *,
        predicate: str | None = None,
        version: int | None = None,
    ) -> DataFrame:
        """Records (not dead letters or markers) as typed pool records
        (:func:`engine.lake.spark_rows.pool_records`)."""
        return spark_rows.pool_records(self, spark, topic, predicate=predicate, version=version)

    def spark_types(self, topic: str | None = None) -> tuple[DataType | None, DataType | None]:
        """The Spark types of keys and values of one topic, or merged over all topics."""
        if topic is None:
            return spark_rows.spark_types_of(self.meta.types.values())
        found = self.meta.types.get(topic)
        return spark_rows.spark_types_of([found] if found else [])
