"""Delta tables: written through delta-rs, read by Spark through delta-spark.

Commits that carry several ``txn`` app ids at once (from-kafka batches; the ETL's one
commit of outputs, markers and cursors) are made with delta-rs, which gives the two
guards exactly-once needs: "commit only if still at version V" and "fail when another
writer changed one of my app ids". Spark reads a pool with Delta's own reader
(``format("delta")`` at a pinned version), so deletion vectors, column mapping, data
skipping and files a user's OPTIMIZE rewrote are Delta's business; zync never lists
Parquet files for Spark (docs/design.md#readers-and-writers).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction

from engine.lake.location import Location, parse_location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "CommitConflict",
    "CommitFailedError",
    "DeltaError",
    "TableNotFoundError",
    "WrittenFile",
    "arrow_schema",
    "commit_arrow",
    "commit_files",
    "remove_files",
    "spark_output",
    "write_files",
    "written_file",
    "live_files",
    "open_table",
    "read_spark",
    "spark_schema",
]


class CommitConflict(RuntimeError):
    """The table moved past the version a commit was planned on, or another writer
    changed one of the commit's app transactions concurrently."""


@dataclass(frozen=True)
class CommitResult:
    version: int
    rows: int


def open_table(uri: str | Path | Location, version: int | None = None) -> DeltaTable:
    """Open the Delta table at ``uri`` (raises ``TableNotFoundError`` when there is none);
    an S3 location brings its storage options."""
    where = uri if isinstance(uri, Location) else parse_location(uri)
    return DeltaTable(where.uri, version=version, storage_options=where.storage_options())


def arrow_schema(table: DeltaTable) -> pa.Schema:
    """The table's schema as a pyarrow schema."""
    return pa.schema(table.schema().to_arrow())


def spark_schema(schema: pa.Schema) -> StructType:
    """A pyarrow schema as the Spark StructType that reads the same Parquet files."""
    # deferred: pyspark
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def live_files(table: DeltaTable, predicate: str | None = None) -> list[str]:
    """The Parquet files of the table's current snapshot, from the Delta log.

    ``predicate`` (SQL over columns, e.g. ``"seqno > 100"``) prunes files by their
    min/max statistics: every file that may hold a matching row is kept, so callers
    still filter rows.
    """
    if predicate:
        try:
            return list(table.file_uris(file_pruning_predicate=predicate))
        except DeltaError:
            # delta-rs cannot prune on every predicate (``deadletter IS NULL``: "Predicate
            # references unknown column" for struct columns); pruning only ever narrows
            # the list, so all live files is a correct answer
            pass
    return list(table.file_uris())


def parquet_dataset(where: Location, uris: Sequence[str], schema: pa.Schema) -> Any:
    """A ``pyarrow.dataset`` over data files delta-rs listed (``file_uris``), read through
    the location's file system (so an S3 lake's settings apply)."""
    import pyarrow.dataset as ds  # deferred: pyarrow.dataset is slow to import

    fs, paths = where.arrow_paths(list(uris))
    return ds.dataset(paths, schema=schema, format="parquet", filesystem=fs)


def rows_from(table: DeltaTable, column: str, value: int) -> int:
    """How many rows the files that may hold ``column >= value`` have, from the Delta
    log's statistics (no data read; a file without statistics counts whole)."""
    import pyarrow.compute as pc  # deferred: only estimates need it

    actions = pa.table(table.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return 0
    counts = actions.column("num_records")
    stat = f"max.{column}"
    if stat in actions.column_names:
        may_hold = pc.fill_null(pc.greater_equal(actions.column(stat), value), True)
        counts = counts.filter(may_hold)
    return int(pc.sum(counts).as_py() or 0)


def read_spark(
    spark: SparkSession, table: DeltaTable, predicate: str | None = None
) -> DataFrame:
    """A DataFrame over the table's snapshot (the version ``table`` is at), read by
    delta-spark; rows filtered by ``predicate`` (Spark SQL), which Delta also uses to
    skip files by their statistics."""
    df = (
        spark.read.format("delta")
        .option("versionAsOf", table.version())
        .load(spark_path(table.table_uri))
    )
    return df.where(predicate) if predicate else df


def spark_path(uri: str) -> str:
    """A table URI as Spark's file systems take it (``file:///x`` for local paths,
    ``s3a://`` for ``s3://``: Hadoop's S3 file system)."""
    if uri.startswith("s3://"):
        return "s3a://" + uri.removeprefix("s3://").rstrip("/")
    if "://" in uri:
        return uri
    return Path(uri).resolve().as_uri()


def commit_arrow(
    uri: str | Path | DeltaTable,
    data: pa.Table,
    *,
    mode: Literal["append", "error", "ignore"] = "append",
    app_transactions: Mapping[str, int] | None = None,
    expect_version: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    schema_mode: Literal["merge", "overwrite"] | None = None,
) -> None:
    """Commit ``data`` to the Delta table through delta-rs, in one Delta commit.

    ``app_transactions`` maps Delta ``txn`` app ids to versions stored in the same
    commit (exactly-once positions). With ``expect_version`` the commit is made only if
    the table is still at that version when it is planned and committed
    (``max_commit_retries=0``); otherwise :class:`CommitConflict` is raised. A commit
    whose app transaction another writer changed concurrently raises it too.
    """
    txns = [Transaction(app_id, version) for app_id, version in (app_transactions or {}).items()]
    props = CommitProperties(
        custom_metadata=dict(metadata or {}),
        app_transactions=txns or None,
        max_commit_retries=0 if expect_version is not None else None,
    )
    if (
        expect_version is not None
        and isinstance(uri, DeltaTable)
        and uri.version() != expect_version
    ):
        raise CommitConflict(
            f"table is at version {uri.version()}, the commit was planned on {expect_version}"
        )
    if any(column.num_chunks > 1 for column in data.columns):
        # delta-rs writes the record batches of a table in parallel, so their rows can
        # land in a file in another order; a pool's readers take rows in file order as
        # commit order when they can (engine.deliver.staging_reader), so the table goes as one
        data = data.combine_chunks()
    try:
        write_deltalake(
            uri,
            data,
            mode=mode,
            commit_properties=props,
            schema_mode=schema_mode,
        )
    except CommitFailedError as exc:
        raise CommitConflict(str(exc)) from exc
    except DeltaError as exc:
        if "Concurrent transaction" in str(exc) or "concurrent" in str(exc).lower():
            raise CommitConflict(str(exc)) from exc
        raise


def spark_to_arrow(df: DataFrame, schema: pa.Schema | None = None) -> pa.Table:
    """Collect a Spark result as Arrow (cast to ``schema`` when given) for a commit."""
    table = df.toArrow()
    if schema is not None:
        table = table.select(schema.names).cast(schema)
    return table


# ----------------------------------------------------------------------------------------
# Files written by Spark executors (or the driver), committed by the driver

#: String statistics are cut to this many characters (as delta-rs does): the minimum's
#: prefix is still a lower bound; the maximum's last kept character is raised by one.
STATS_STRING_PREFIX = 64


@dataclass(frozen=True)
class WrittenFile:
    """A Parquet file written into a table's directory, not yet in its Delta log."""

    path: str  # relative to the table root, as Delta add actions name files
    size: int
    modification_time: int  # milliseconds since the epoch
    stats: str  # Delta statistics JSON
    rows: int

    def add_action(self) -> AddAction:
        return AddAction(self.path, self.size, {}, self.modification_time, True, self.stats)


def written_file(root: str | Path | Location, path: str) -> WrittenFile:
    """A Parquet file in the table directory ``root`` (``path`` relative to it), with
    the Delta statistics its footer gives, shaped as delta-rs writes them: row count,
    null count of every leaf column, min/max of integer and string columns (strings cut
    to :data:`STATS_STRING_PREFIX`), and an object (maybe empty) for every struct column
    — a struct missing from ``minValues`` would make delta-rs' Arrow dataset think
    every filter on it fails."""
    # deferred: pyarrow.parquet, loaded on use
    import pyarrow.parquet as pq

    fs, base = _where(root).filesystem()
    full = f"{base}/{path}"
    with fs.open_input_file(full) as handle:
        meta = pq.read_metadata(handle)
        size = handle.size()
    nulls: dict[str, int] = {}
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    unbounded: set[str] = set()
    for group in range(meta.num_row_groups):
        row_group = meta.row_group(group)
        for index in range(row_group.num_columns):
            column = row_group.column(index)
            name = column.path_in_schema
            stats = column.statistics
            if stats is None or not stats.has_null_count:
                unbounded.add(name)
                continue
            kind = stats.logical_type.type
            if column.physical_type == "BYTE_ARRAY" and kind != "STRING":
                continue  # binary (dead letters' raw bytes): no statistics in Delta
            nulls[name] = nulls.get(name, 0) + stats.null_count
            if not stats.has_min_max:
                continue  # only NULLs in this row group
            if column.physical_type not in ("INT32", "INT64", "BYTE_ARRAY") or kind not in (
                "NONE", "INT", "STRING"
            ):
                unbounded.add(name)
                continue
            lo, hi = stats.min, stats.max
            low[name] = lo if name not in low else min(low[name], lo)
            high[name] = hi if name not in high else max(high[name], hi)
    for name, value in list(high.items()):
        if isinstance(value, str) and len(value) > STATS_STRING_PREFIX:
            kept = value[:STATS_STRING_PREFIX]
            last = ord(kept[-1]) + 1
            if last > 0x10FFFF or 0xD800 <= last <= 0xDFFF:
                unbounded.add(name)
            else:
                high[name] = kept[:-1] + chr(last)
    for name, value in list(low.items()):
        if isinstance(value, str):
            low[name] = value[:STATS_STRING_PREFIX]

    def nest(values: Mapping[str, Any], skip: set[str]) -> dict[str, Any]:
        out = _struct_skeleton(meta.schema.to_arrow_schema())
        for name, value in values.items():
            if name in skip:
                continue
            *parents, leaf = name.split(".")
            node = out
            for parent in parents:
                node = node.setdefault(parent, {})
            node[leaf] = value
        return out

    stats_json = json.dumps(
        {
            "numRecords": meta.num_rows,
            "minValues": nest(low, unbounded),
            "maxValues": nest(high, unbounded),
            "nullCount": nest(nulls, set()),
        },
        separators=(",", ":"),
    )
    info = fs.get_file_info(full)
    mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else int(time.time() * 1000)
    return WrittenFile(path, size, mtime, stats_json, meta.num_rows)


def _where(root: str | Path | Location) -> Location:
    return root if isinstance(root, Location) else parse_location(root)


def _struct_skeleton(schema: pa.Schema | pa.StructType) -> dict[str, Any]:
    """An empty object for every struct column (nested ones inside theirs)."""
    return {
        field.name: _struct_skeleton(field.type)
        for field in schema
        if pa.types.is_struct(field.type)
    }


def write_files(root: str | Path | Location, table: pa.Table) -> list[WrittenFile]:
    """Write ``table`` as one Parquet file directly in the table directory ``root``
    (named like delta-rs names its files). Nothing is committed: see
    :func:`commit_files`."""
    # deferred: pyarrow.parquet, loaded on use
    import pyarrow.parquet as pq

    if not table.num_rows:
        return []
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    fs, base = _where(root).filesystem()
    pq.write_table(table, f"{base}/{name}", compression="snappy", filesystem=fs)
    return [written_file(root, name)]


def spark_output(root: str | Path | Location, directory: str) -> list[WrittenFile]:
    """The Parquet files a Spark job wrote into ``root/directory`` (``DataFrame.write``
    from the executors; the directory is on storage the driver sees), ready for
    :func:`commit_files`. Spark's bookkeeping files (``_SUCCESS``, ``.crc``) and empty
    files are removed."""
    import pyarrow.fs as pafs  # deferred: loaded on use

    fs, base = _where(root).filesystem()
    selector = pafs.FileSelector(f"{base}/{directory}", allow_not_found=True, recursive=True)
    written = []
    for info in sorted(fs.get_file_info(selector), key=lambda i: i.path):
        if info.type != pafs.FileType.File:
            continue
        name = info.path.rsplit("/", 1)[-1]
        relative = info.path[len(base) + 1 :]
        if not name.endswith(".parquet") or name.startswith((".", "_")) or "/_" in relative:
            fs.delete_file(info.path)
            continue
        found = written_file(root, relative)
        if found.rows:
            written.append(found)
        else:
            fs.delete_file(info.path)
    return written


def remove_files(root: str | Path | Location, files: Iterable[WrittenFile]) -> None:
    """Delete written files that were not committed (best effort: ``pool vacuum``
    removes whatever is left over), and local directories they leave empty."""
    where = _where(root)
    fs, base = where.filesystem()
    for written in files:
        try:
            fs.delete_file(f"{base}/{written.path}")
            if where.is_local:
                parent = (where.path / written.path).parent
                if parent != where.path and not any(parent.iterdir()):
                    parent.rmdir()
        except OSError:
            pass


def commit_files(
    table: DeltaTable,
    files: Sequence[WrittenFile],
    *,
    app_transactions: Mapping[str, int] | None = None,
    expect_version: int,
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Add ``files`` (already in the table's directory) to the table in one Delta commit
    with ``app_transactions``, only if the table is still at ``expect_version``;
    otherwise :class:`CommitConflict` (the files are then still uncommitted)."""
    if table.version() != expect_version:
        raise CommitConflict(
            f"table is at version {table.version()}, the commit was planned on {expect_version}"
        )
    txns = [Transaction(app_id, version) for app_id, version in (app_transactions or {}).items()]
    props = CommitProperties(
        custom_metadata=dict(metadata or {}),
        app_transactions=txns or None,
        max_commit_retries=0,
    )
    try:
        table.create_write_transaction(
            [f.add_action() for f in files],
            "append",
            table.schema(),
            commit_properties=props,
        )
    except CommitFailedError as exc:
        raise CommitConflict(str(exc)) from exc
    except DeltaError as exc:
        if "concurrent" in str(exc).lower():
            raise CommitConflict(str(exc)) from exc
        raise
