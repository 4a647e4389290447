"""Delta tables through delta-rs, read by Spark.

Delta's JVM jars cannot be had here, so the Delta log is read and written with
delta-rs (DESIGN.md, decision 1). Spark reads the Parquet files of a snapshot, and
the list of those files always comes from the Delta log (never from a directory
listing, which would see removed and uncommitted files). Results are committed back
through delta-rs, so the tables stay standard Delta for any other reader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "CommitConflict",
    "CommitFailedError",
    "DeltaError",
    "TableNotFoundError",
    "arrow_schema",
    "commit_arrow",
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


def open_table(uri: str | Path, version: int | None = None) -> DeltaTable:
    """Open the Delta table at ``uri`` (raises ``TableNotFoundError`` when there is none)."""
    return DeltaTable(str(uri), version=version)


def arrow_schema(table: DeltaTable) -> pa.Schema:
    """The table's schema as a pyarrow schema."""
    return pa.schema(table.schema().to_arrow())


def spark_schema(schema: pa.Schema) -> StructType:
    """A pyarrow schema as the Spark StructType that reads the same Parquet files."""
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


def read_spark(
    spark: SparkSession, table: DeltaTable, predicate: str | None = None
) -> DataFrame:
    """A DataFrame over the table's live files (pruned by ``predicate`` statistics).

    The rows are not filtered by ``predicate``: apply it to the DataFrame when exact
    results are needed. A table with no files gives an empty DataFrame of its schema.
    """
    schema = spark_schema(arrow_schema(table))
    files = live_files(table, predicate)
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*files)


def commit_arrow(
    uri: str | Path | DeltaTable,
    data: pa.Table,
    *,
    mode: str = "append",
    app_transactions: Mapping[str, int] | None = None,
    expect_version: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    schema_mode: str | None = None,
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
    if expect_version is not None and isinstance(uri, DeltaTable):
        if uri.version() != expect_version:
            raise CommitConflict(
                f"table is at version {uri.version()}, the commit was planned on {expect_version}"
            )
    try:
        write_deltalake(
            uri,
            data,
            mode=mode,  # type: ignore[arg-type]
            commit_properties=props,
            schema_mode=schema_mode,  # type: ignore[arg-type]
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


def file_stats(table: DeltaTable, columns: Sequence[str]) -> pa.Table:
    """Per live file: path, num_records and min/max of ``columns`` (flattened names)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    wanted = ["path", "num_records", "size_bytes"]
    for column in columns:
        wanted += [f"min.{column}", f"max.{column}"]
    return actions.select([name for name in wanted if name in actions.column_names])
