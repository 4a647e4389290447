"""SQL over pools: every pool of a lake as Spark views, for ``zync query``.

For each pool ``P`` of the lake:

``P``
    its records as the typed pool record ``seqno, kafka, key, value``: key and value parsed
    with the types recorded for each topic (Avro writer schemas, Kafka Connect schemas,
    JSON samples or a shaper's output), merged over the pool's topics, so
    ``SELECT value.after.ID FROM P`` works;
``P_deadletters``
    its dead letters: ``seqno, kafka, stage, error, key_bytes, value_bytes``;
``P_markers``
    (staging pools) the ETL completion markers: ``seqno, etl, rule, topic, partition,
    offset, status``.

The lake's tables (:mod:`engine.lake.lake_tables`, kept by the apply loop) are there too, by
name, as tables of the session's catalog (:mod:`engine.lake.table_views`): Delta's own
time travel, ``DESCRIBE HISTORY`` and ``table_changes`` work on them as on any Delta
table. ``tables_at`` reads some at chosen versions (``zync query --as-of-staging``), and
``pool_at`` a pool at a chosen version with them.

A pool name with characters SQL identifiers cannot hold (``-``) is registered with them
replaced by ``_`` (``raw-2024`` → ``raw_2024``). Delta tables of the lake that are not
pools are skipped, with the reason in :attr:`Catalog.skipped`.

``as_of`` (time travel) reads every pool at that Delta version; a pool that has no such
version (yet) is skipped with a note, so a query over the pools that do still runs.

Delta's own SQL works on pools by the names the user sees:

* ``P VERSION AS OF 3`` / ``P TIMESTAMP AS OF '2026-11-23 10:00:00'`` (also on
  ``P_deadletters`` and ``P_markers``): the typed view of that version
  (:mod:`engine.lake.timetravel`), several versions of a pool in one query if need be;
* ``DESCRIBE HISTORY P [LIMIT n]`` and ``DESCRIBE DETAIL P``: run on the pool's Delta
  table (``delta.`<uri>```), ``P`` being the pool name (``raw-2024``) or its view name.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.errors import ZyncError
from engine.lake import delta
from engine.lake.lake_tables import lake_tables
from engine.lake.pool_errors import PoolError
from engine.lake.pool_record import IS_DEADLETTER, IS_MARKER
from engine.lake.pools import STAGING, Lake, Pool
from engine.lake.sqltext import Kind, SqlTextError, quote_name, tokens
from engine.lake.table_views import TableView, drop_versioned, register_tables
from engine.lake.timetravel import (
    TimeTravelError,
    Travel,
    find_travels,
    internal_name,
    readable,
    resolve_version,
    rewrite,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEADLETTERS = "_deadletters"
MARKERS = "_markers"


class QueryError(ZyncError):
    """The query cannot run (bad SQL, unknown pool, missing version); one line."""


@dataclass(frozen=True)
class PoolView:
    pool: str
    view: str
    version: int
    kind: str
    views: tuple[str, ...]


@dataclass
class Catalog:
    """What :func:`register_pools` registered and what it skipped (with reasons), and the
    versions a query's time-travel references registered (``travels``)."""

    views: list[PoolView] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    travels: list[PoolView] = field(default_factory=list)
    tables: list[TableView] = field(default_factory=list)

    def names(self) -> list[str]:
        return [name for v in self.views for name in v.views] + [t.name for t in self.tables]


def view_name(pool: str) -> str:
    """The SQL name of a pool's view: the pool name with ``-`` (and any other character
    an identifier cannot hold) replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", pool)


def sql_names(pools: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Every SQL name (lower case) a pool answers to, with its pool and view suffix: the
    view names and the pool name itself (```raw-2024``` written with backticks)."""
    names: dict[str, tuple[str, str]] = {}
    for pool in pools:
        for suffix in ("", DEADLETTERS, MARKERS):
            names[(view_name(pool) + suffix).lower()] = (pool, suffix)
        names.setdefault(pool.lower(), (pool, ""))
    return names


def register_views(spark: SparkSession, pool: Pool, base: str, version: int | None) -> list[str]:
    """Register the views of ``pool`` at ``version`` (None: the loaded snapshot) under
    ``base``: the typed records, ``<base>_deadletters`` and, for a staging pool,
    ``<base>_markers``. Returns their names."""
    # deferred: pyspark
    from pyspark.sql import functions as F

    pool.records(spark, version=version).createOrReplaceTempView(base)
    all_rows = pool.read(spark, version=version)
    all_rows.where(IS_DEADLETTER).select(
        "seqno",
        "kafka",
        F.col("deadletter.stage").alias("stage"),
        F.col("deadletter.error").alias("error"),
        F.col("deadletter.key_bytes").alias("key_bytes"),
        F.col("deadletter.value_bytes").alias("value_bytes"),
    ).createOrReplaceTempView(base + DEADLETTERS)
    views = [base, base + DEADLETTERS]
    if pool.kind == STAGING:
        all_rows.where(IS_MARKER).select("seqno", "marker.*").createOrReplaceTempView(
            base + MARKERS
        )
        views.append(base + MARKERS)
    return views


def register_pools(
    spark: SparkSession,
    lake: Lake,
    *,
    as_of: int | None = None,
    pools: list[str] | None = None,
    leave: Collection[str] = (),
    pool_at: tuple[str, int] | None = None,
) -> Catalog:
    """Register every pool (or the named ones) of ``lake`` as temporary views, but the
    Delta tables named in ``leave`` (the lake's tables); ``pool_at`` reads one pool at a
    version."""
    catalog = Catalog()
    names = pools if pools is not None else [n for n in lake.pool_names() if n not in leave]
    for name in names:
        try:
            pool = lake.open_pool(name)
        except PoolError as exc:
            if pools is not None:
                raise QueryError(str(exc)) from None
            catalog.skipped[name] = str(exc)
            continue
        version = pool.version
        if pool_at is not None and pool_at[0] == name:
            version = pool_at[1]
        elif as_of is not None:
            if as_of < 0 or as_of > pool.version:
                catalog.skipped[name] = (
                    f"pool {name!r} has no version {as_of} (its versions are 0 to {pool.version})"
                )
                continue
            version = as_of
        base = view_name(name)
        try:
            views = register_views(spark, pool, base, None if version == pool.version else version)
        except Exception as exc:  # noqa: BLE001 - e.g. a version vacuumed away
            catalog.skipped[name] = f"pool {name!r} at version {version}: {exc}"
            continue
        catalog.views.append(PoolView(name, base, version, pool.kind, tuple(views)))
    for name in catalog.skipped:  # no stale view from an earlier registration
        for suffix in ("", DEADLETTERS, MARKERS):
            spark.catalog.dropTempView(view_name(name) + suffix)
    return catalog


def register_travels(
    spark: SparkSession, lake: Lake, travels: Sequence[Travel], catalog: Catalog
) -> list[str]:
    """Register a typed view of the version each reference names (once per pool and
    version); returns the view name to put in each reference's place."""
    registered: dict[tuple[str, int], PoolView] = {}
    chosen = []
    for travel in travels:
        try:
            pool = lake.open_pool(travel.pool)
        except PoolError as exc:
            raise QueryError(str(exc)) from None
        if travel.suffix == MARKERS and pool.kind != STAGING:
            raise QueryError(f"pool {pool.name!r} is a {pool.kind} pool: it has no markers")
        version = resolve_version(spark, pool, travel)
        key = (pool.name, version)
        if key not in registered:
            base = internal_name(view_name(pool.name), version)
            views = register_views(spark, pool, base, version)
            registered[key] = PoolView(pool.name, base, version, pool.kind, tuple(views))
            catalog.travels.append(registered[key])
        chosen.append(registered[key].view + travel.suffix)
    return chosen


# ----------------------------------------------------------------------------------------
# DESCRIBE HISTORY | DETAIL


def route_describe(
    sql: str, lake: Lake, pools: Sequence[str], tables: Collection[str] = ()
) -> str | None:
    """``DESCRIBE HISTORY|DETAIL <pool>`` rewritten to run on the pool's Delta table;
    None for any other statement (a qualified name, a path or a table of ``tables`` is
    left to Spark)."""
    words = tokens(sql)
    while words and words[-1].text == ";":
        words.pop()
    if len(words) < 3 or not (
        words[0].is_word("DESC", "DESCRIBE") and words[1].is_word("HISTORY", "DETAIL")
    ):
        return None
    end = len(words)
    limit = ""
    if words[1].is_word("HISTORY") and end >= 5 and words[end - 2].is_word("LIMIT"):
        end -= 2
        limit = " " + sql[words[end].start : words[-1].end]
    name_words = words[2:end]
    if len(name_words) == 1 and name_words[0].kind is Kind.QUOTED:
        name = name_words[0].name
    elif all(w.kind in (Kind.WORD, Kind.NUMBER) or w.text == "-" for w in name_words):
        name = sql[name_words[0].start : name_words[-1].end]  # raw-2024: words and '-'
    else:
        return None
    target = sql_names(pools).get(name.lower())
    if target is None and name.lower() in {t.lower() for t in tables}:
        return None
    if target is None:
        raise QueryError(
            f"no pool {name!r} in lake {lake.location} (pools: {', '.join(pools) or 'none'})"
        )
    try:
        pool = lake.open_pool(target[0])
    except PoolError as exc:
        raise QueryError(str(exc)) from None
    table = quote_name(delta.spark_path(pool.uri))
    return f"DESCRIBE {words[1].text.upper()} delta.{table}{limit}"


# ----------------------------------------------------------------------------------------


def query(
    spark: SparkSession,
    lake: Lake,
    sql: str,
    *,
    as_of: int | None = None,
    tables_at: Mapping[str, int] | None = None,
    pool_at: tuple[str, int] | None = None,
) -> tuple[DataFrame, Catalog]:
    """Run ``sql`` over the lake's pools and tables; returns the (lazy) result and the
    catalog. ``as_of`` reads every pool at that version; ``tables_at`` some tables and
    ``pool_at`` one pool at the versions given.

    Raises :class:`QueryError` with Spark's first line for SQL that does not analyze,
    naming a skipped pool when the query refers to one, and for a time-travel reference
    or DESCRIBE that names no pool or a version the pool does not have.
    """
    names = lake.pool_names()
    tables = lake_tables(lake, names)
    pools = [name for name in names if name not in tables]
    catalog = Catalog()
    try:
        described = route_describe(sql, lake, pools, tables)
        if described is not None:
            catalog.tables, catalog.skipped = register_tables(spark, tables)
            return _run(spark, described, catalog), catalog
        travels = find_travels(sql, sql_names(pools), leave={t.lower() for t in tables})
    except SqlTextError:
        travels = []  # an unclosed literal or comment: Spark says where
    except TimeTravelError as exc:
        raise QueryError(str(exc)) from None
    catalog = register_pools(spark, lake, as_of=as_of, leave=tables, pool_at=pool_at)
    catalog.tables, skipped = register_tables(spark, tables, tables_at)
    catalog.skipped.update(skipped)
    if travels:
        try:
            sql = rewrite(sql, travels, register_travels(spark, lake, travels, catalog))
        except TimeTravelError as exc:
            raise QueryError(str(exc)) from None
    try:
        return _run(spark, sql, catalog), catalog
    finally:
        for view in catalog.travels:  # the result holds its plan: the names can go
            for name in view.views:
                spark.catalog.dropTempView(name)
        drop_versioned(spark, catalog.tables)


def _run(spark: SparkSession, sql: str, catalog: Catalog) -> DataFrame:
    # deferred: pyspark
    from pyspark.errors import AnalysisException

    try:
        return spark.sql(sql)
    except AnalysisException as exc:
        message = readable(str(getattr(exc, "desc", None) or exc).strip().splitlines()[0])
        for name, reason in catalog.skipped.items():
            if re.search(rf"`?{re.escape(view_name(name))}`?", message):
                raise QueryError(f"{message} — {reason}") from None
        known = ", ".join(catalog.names()) or "none"
        if "TABLE_OR_VIEW_NOT_FOUND" in message:
            message += f" (views: {known})"
        raise QueryError(message) from None
