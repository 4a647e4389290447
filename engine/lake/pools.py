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
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import TableNotFoundError

from engine.lake import appends, delta, spark_rows, upgrade
from engine.lake.appends import MAX_COMMIT_ATTEMPTS, SEQNO_APP, AppendResult, ingest_app
from engine.lake.commit_guard import CommitGuard
from engine.lake.location import Location, parse_location
from engine.lake.pool_errors import NotAPool, PoolError, PoolNotFound
from engine.lake.pool_record import (
    IS_RECORD,
    STAGING_TABLE_SCHEMA,
    TABLE_SCHEMA,
    fit_rows,
    rows_for,
    shape_problems,
    with_seqno,
)
from engine.lake.topic_types import (
    TYPES_PROPERTY,
    PoolMeta,
    TopicTypes,
    TypeFiles,
    merge_topic_types,
    pool_description,
    read_meta,
)
from engine.lake.txns import TxnVersions

if TYPE_CHECKING:
    import pyarrow.dataset as ds
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

RAW = "raw"
STAGING = "staging"
KINDS = (RAW, STAGING)
CHECKPOINT_EVERY = 100
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
        self._type_files = TypeFiles(self.location)
        self.meta = _pool_meta(self.location, table, self._type_files)
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
            self.meta = self._read_meta()
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
        """Merge topic types into the pool's; True when that changed them.

        Types only grow (struct fields are merged), so recording them before the data
        commit that needs them is safe even if that commit is then retried or lost. A
        concurrent change of the pool's metadata is merged again; any other failure
        stops at once (:class:`PoolError`, naming the pool and the cause)."""
        if merge_topic_types(self.meta.types, types) == self.meta.types:
            return False
        self.guard.require_safe_commits()
        for _ in range(MAX_COMMIT_ATTEMPTS):
            # merge into the newest types: another writer may have widened the same
            # topic's since this snapshot, and its widening must not be lost
            self.refresh()
            merged = merge_topic_types(self.meta.types, types)
            if merged == self.meta.types:
                return False
            try:
                self._commit_types(merged, op="types")
            except delta.CommitFailedError:
                continue  # another writer changed the metadata meanwhile: merge again
            return True
        raise PoolError(
            f"pool {self.name!r}: gave up recording types after {MAX_COMMIT_ATTEMPTS} "
            "concurrent changes of its metadata"
        )

    def move_legacy_types(self) -> None:
        """Move the types an earlier zync kept in the table's description into type
        files (two metadata commits: the files' index, then the description). Best
        effort, as :func:`engine.lake.upgrade.upgrade`: a pool that cannot take the
        commits is read as before, and the next open tries again."""
        legacy = self.meta
        try:
            self.guard.require_safe_commits()
            if legacy.types:
                self._commit_types(legacy.types, op="upgrade")
            self.table.alter.set_table_description(
                pool_description(self.kind),
                commit_properties=CommitProperties(
                    custom_metadata={"zync.op": "upgrade", "zync.upgrade": "type-files"}
                ),
            )
        except (PoolError, delta.DeltaError, OSError):
            pass
        self.refresh()
        self.meta = self._read_meta()

    def _commit_types(self, types: Mapping[str, TopicTypes], *, op: str) -> None:
        """Write the type files of ``types`` and commit their index as the pool's
        (raises ``CommitFailedError`` when another writer changed the metadata first)."""
        try:
            index = self._type_files.save(types)
        except OSError as exc:
            raise PoolError(f"pool {self.name!r}: cannot write its type files: {exc}") from exc
        try:
            self.table.alter.set_table_properties(
                {TYPES_PROPERTY: index},
                raise_if_not_exists=False,
                commit_properties=CommitProperties(custom_metadata={"zync.op": op}),
            )
        except delta.CommitFailedError:
            raise
        except delta.DeltaError as exc:
            raise PoolError(f"pool {self.name!r}: cannot record its topics' types: {exc}") from exc
        self.refresh()
        self.meta = self._read_meta()  # the commit moved `table` itself: refresh saw no change

    def _read_meta(self) -> PoolMeta:
        try:
            meta = read_meta(self.table, self._type_files, self.meta)
        except (OSError, ValueError, KeyError) as exc:
            raise PoolError(f"pool {self.name!r}: cannot read its type files: {exc}") from exc
        return meta or self.meta

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
        version. Raises :class:`engine.lake.delta.CommitConflict` when the pool moved on
        (re-plan).

        ``files`` are Parquet files already written into the pool's directory (by Spark
        executors, :meth:`write_spark`) holding the seqnos right after the pool's last
        one; ``rows`` get the seqnos after theirs, and everything is one Delta commit.
        Files of a commit that conflicts are deleted. An ``avro`` column is kept when
        the table has one (:attr:`row_schema`), and dropped otherwise."""
        rows = fit_rows(rows, self.row_schema)
        self.guard.require_safe_commits()
        if self.version != expect_version:
            self.table = delta.open_table(self.location, version=expect_version)
        first = self.last_seqno() + 1 + sum(f.rows for f in files)
        last = first + rows.num_rows - 1
        txns = dict(app_transactions or {})
        if last >= self.last_seqno() + 1:
            txns[SEQNO_APP] = last
        if not files:
            delta.commit_arrow(
                self.table,
                with_seqno(rows, first),
                app_transactions=txns,
                expect_version=expect_version,
                metadata=metadata,
            )
        else:
            files = list(files)
            if rows.num_rows:
                files += delta.write_files(self.location, with_seqno(rows, first))
            try:
                delta.commit_files(
                    self.table,
                    files,
                    app_transactions=txns,
                    expect_version=expect_version,
                    metadata=metadata,
                )
            except delta.CommitConflict:
                delta.remove_files(self.location, files)
                raise
        self.committed(expect_version, txns)
        if self.version % CHECKPOINT_EVERY == 0:
            self.table.create_checkpoint()  # keeps loading and committing cheap
        return self.version

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
        """Records (not dead letters or markers) as the typed pool record
        ``seqno, kafka, key, value``: key and value parsed into the topic's Spark type
        (or, for all topics, a type merged over them)."""
        where = IS_RECORD
        if topic is not None:
            where += f" AND kafka.topic = '{_sql_string(topic)}'"
        if predicate:
            where += f" AND ({predicate})"
        df = self.read(spark, predicate=where, version=version)
        return spark_rows.typed_pool_records(df, *self.spark_types(topic))

    def spark_types(self, topic: str | None = None) -> tuple[DataType | None, DataType | None]:
        """The Spark types of keys and values of one topic, or merged over all topics."""
        if topic is None:
            return spark_rows.spark_types_of(self.meta.types.values())
        found = self.meta.types.get(topic)
        return spark_rows.spark_types_of([found] if found else [])


def _pool_meta(location: Location, table: DeltaTable, files: TypeFiles) -> PoolMeta:
    """The zync metadata of a Delta table, or :class:`NotAPool` saying what is missing."""
    try:
        meta = read_meta(table, files)
    except (OSError, ValueError, KeyError) as exc:
        raise PoolError(f"pool at {location}: cannot read its type files: {exc}") from exc
    problems = shape_problems(delta.arrow_schema(table))
    if meta is None:
        problems.insert(0, "its description has no zync metadata")
    if problems or meta is None:
        raise NotAPool(f"{location} is a Delta table but not a zync pool: " + "; ".join(problems))
    return meta


def _sql_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
