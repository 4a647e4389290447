"""A query's result as plain Python: JSON lines, or columns and rows of text.

:func:`query_result` runs :func:`engine.lake.query.query` and hands back a
:class:`QueryResult`: what the catalog skipped (known before any row is read) and the rows
on demand, collected by Spark inside the engine. A Spark error while the rows are read is
a :class:`~engine.lake.query.QueryError` with Spark's first line, so ``zync query`` shows
one line and holds no DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from engine.lake.query import QueryError, query

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from engine.lake.pools import Lake

T = TypeVar("T")


@dataclass(frozen=True)
class QueryTable:
    """A result as text: column names and rows, nested values as JSON, binary as base64,
    NULL as None."""

    columns: list[str]
    rows: list[list[str | None]]


class QueryResult:
    """The result of one query: the pools and tables skipped (with reasons), then the rows
    as JSON lines (:meth:`json_lines`) or as text (:meth:`table`), read when asked."""

    def __init__(self, frame: DataFrame, skipped: Mapping[str, str]) -> None:
        self._frame = frame
        self.skipped: dict[str, str] = dict(skipped)

    def json_lines(self) -> list[str]:
        """One JSON object per row, every column present (null included)."""
        from pyspark.sql import functions as F  # deferred: pyspark

        frame = self._frame
        return _read(
            lambda: [
                row["j"]
                for row in frame.select(
                    F.to_json(F.struct("*"), {"ignoreNullFields": "false"}).alias("j")
                ).collect()
            ]
        )

    def table(self) -> QueryTable:
        """Every column as text: nested values as JSON, NULL stays None."""

        def read() -> QueryTable:
            text = _as_text(self._frame)
            names = text.columns
            return QueryTable(names, [[r[i] for i in range(len(names))] for r in text.collect()])

        return _read(read)


def query_result(
    spark: SparkSession,
    lake: Lake,
    sql: str,
    *,
    as_of: int | None = None,
    tables_at: Mapping[str, int] | None = None,
    pool_at: tuple[str, int] | None = None,
    limit: int | None = None,
) -> QueryResult:
    """Run ``sql`` over the lake's pools and tables (see :func:`engine.lake.query.query`),
    at most ``limit`` rows of it."""
    frame, catalog = query(spark, lake, sql, as_of=as_of, tables_at=tables_at, pool_at=pool_at)
    if limit is not None:
        frame = frame.limit(limit)
    return QueryResult(frame, catalog.skipped)


def _read(read: Callable[[], T]) -> T:
    """``read()``; a Spark error meanwhile as a :class:`QueryError` of its first line."""
    try:
        return read()
    except Exception as exc:
        from pyspark.errors import PySparkException  # deferred: pyspark

        if isinstance(exc, PySparkException):
            raise QueryError(str(exc).strip().splitlines()[0]) from None
        raise


def _as_text(df: DataFrame) -> DataFrame:
    """Every column as text: nested values as JSON, NULL stays NULL."""
    # deferred: pyspark
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StructType

    cols = []
    for field in df.schema.fields:
        col = F.col(f"`{field.name}`")
        if isinstance(field.dataType, StructType | ArrayType | MapType):
            col = F.to_json(col)
        elif isinstance(field.dataType, BinaryType):
            col = F.base64(col)
        cols.append(col.cast("string").alias(field.name))
    return df.select(*cols)
