"""A lake's tables in Spark SQL, by name, for ``zync query`` (docs/design.md#tables).

Unlike a pool (a typed view over a row log), a table is SQL-ready as it is, so each is
registered as a table of the session's own catalog, located at its Delta table:
Delta's SQL then works on it by name — ``invoices VERSION AS OF 3``,
``DESCRIBE HISTORY invoices``, ``table_changes('invoices', 2, 5)`` (its Change Data
Feed). This needs Spark's in-memory catalog (zync's sessions use it): with a Hive
metastore configured, tables are not registered there (it would outlive the session);
``delta.`<uri>``` still reads them.

A table read at a chosen version (``zync query --as-of-staging``) is a temporary view of
that version instead, dropped again once the query is planned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.lake import delta
from engine.lake.sqltext import quote_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.lake.location import Location

#: Tables this process registered, by name: their location (a moved table is registered
#: again).
_registered: dict[str, str] = {}


@dataclass(frozen=True)
class TableView:
    """A table as a query sees it: ``version`` None is its newest."""

    name: str
    location: str
    version: int | None


def register_tables(
    spark: SparkSession,
    tables: Mapping[str, Location],
    at: Mapping[str, int] | None = None,
) -> tuple[list[TableView], dict[str, str]]:
    """Register ``tables`` by name (``at``: those read at a version, as temporary
    views); returns what was registered and, by name, what was not and why."""
    views, skipped = [], {}
    in_memory = spark.conf.get("spark.sql.catalogImplementation", "in-memory") == "in-memory"
    for name, where in sorted(tables.items()):
        path = delta.spark_path(where.uri)
        if at is not None and name in at:
            spark.read.format("delta").option("versionAsOf", at[name]).load(path).createOrReplaceTempView(name)
            views.append(TableView(name, where.uri, at[name]))
            continue
        spark.catalog.dropTempView(name)
        if not in_memory:
            skipped[name] = (
                "tables are not registered in a Hive metastore: read "
                f"delta.`{path}` instead"
            )
            continue
        exists = spark.catalog.tableExists(name)
        if not exists or _registered.get(name) != path:
            # (Delta reads a table's newest version at each query: nothing to refresh)
            if exists and spark.catalog.getTable(name).tableType == "EXTERNAL":
                spark.sql(f"DROP TABLE {quote_name(name)}")  # external: the files stay
            if not spark.catalog.tableExists(name):
                location = path.replace("'", "\\'")
                spark.sql(f"CREATE TABLE {quote_name(name)} USING delta LOCATION '{location}'")
            _registered[name] = path
        views.append(TableView(name, where.uri, None))
    return views, skipped


def drop_versioned(spark: SparkSession, views: list[TableView]) -> None:
    """Drop the temporary views of tables read at a version."""
    for view in views:
        if view.version is not None:
            spark.catalog.dropTempView(view.name)
