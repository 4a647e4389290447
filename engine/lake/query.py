"""SQL over pools: every pool of a lake as Spark views, for ``zync query``.

For each pool ``P`` of the lake:

``P``
    its records as the typed envelope ``seqno, kafka, key, value``: key and value parsed
    with the types recorded for each topic (Avro writer schemas, Kafka Connect schemas,
    JSON samples or a shaper's output), merged over the pool's topics, so
    ``SELECT value.after.ID FROM P`` works;
``P_deadletters``
    its dead letters: ``seqno, kafka, stage, error, key_bytes, value_bytes``;
``P_markers``
    (staging pools) the ETL completion markers: ``seqno, etl, rule, topic, partition,
    offset, status``.

A pool name with characters SQL identifiers cannot hold (``-``) is registered with them
replaced by ``_`` (``raw-2024`` → ``raw_2024``). Delta tables of the lake that are not
pools are skipped, with the reason in :attr:`Catalog.skipped`.

``as_of`` (time travel) reads every pool at that Delta version; a pool that has no such
version (yet) is skipped with a note, so a query over the pools that do still runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.errors import ZyncError
from engine.lake.envelope import IS_DEADLETTER, IS_MARKER
from engine.lake.pools import STAGING, Lake, PoolError

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
    """What :func:`register_pools` registered and what it skipped (with reasons)."""

    views: list[PoolView] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def names(self) -> list[str]:
        return [name for v in self.views for name in v.views]


def view_name(pool: str) -> str:
    """The SQL name of a pool's view: the pool name with ``-`` (and any other character
    an identifier cannot hold) replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", pool)


def register_pools(
    spark: SparkSession,
    lake: Lake,
    *,
    as_of: int | None = None,
    pools: list[str] | None = None,
) -> Catalog:
    """Register every pool (or the named ones) of ``lake`` as temporary views."""
    from pyspark.sql import functions as F

    catalog = Catalog()
    names = pools if pools is not None else lake.pool_names()
    for name in names:
        try:
            pool = lake.open_pool(name)
        except PoolError as exc:
            if pools is not None:
                raise QueryError(str(exc)) from None
            catalog.skipped[name] = str(exc)
            continue
        version = pool.version
        if as_of is not None:
            if as_of < 0 or as_of > pool.version:
                catalog.skipped[name] = (
                    f"pool {name!r} has no version {as_of} (its versions are 0 to {pool.version})"
                )
                continue
            version = as_of
        try:
            records = pool.records(spark, version=as_of)
        except Exception as exc:  # noqa: BLE001 - e.g. a version vacuumed away
            catalog.skipped[name] = f"pool {name!r} at version {version}: {exc}"
            continue
        base = view_name(name)
        records.createOrReplaceTempView(base)
        views = [base]
        all_rows = pool.read(spark, version=as_of)
        all_rows.where(IS_DEADLETTER).select(
            "seqno",
            "kafka",
            F.col("deadletter.stage").alias("stage"),
            F.col("deadletter.error").alias("error"),
            F.col("deadletter.key_bytes").alias("key_bytes"),
            F.col("deadletter.value_bytes").alias("value_bytes"),
        ).createOrReplaceTempView(base + DEADLETTERS)
        views.append(base + DEADLETTERS)
        if pool.kind == STAGING:
            all_rows.where(IS_MARKER).select("seqno", "marker.*").createOrReplaceTempView(
                base + MARKERS
            )
            views.append(base + MARKERS)
        catalog.views.append(PoolView(name, base, version, pool.kind, tuple(views)))
    for name in catalog.skipped:  # no stale view from an earlier registration
        for suffix in ("", DEADLETTERS, MARKERS):
            spark.catalog.dropTempView(view_name(name) + suffix)
    return catalog


def query(
    spark: SparkSession, lake: Lake, sql: str, *, as_of: int | None = None
) -> tuple[DataFrame, Catalog]:
    """Run ``sql`` over the lake's pools; returns the (lazy) result and the catalog.

    Raises :class:`QueryError` with Spark's first line for SQL that does not analyze,
    naming a skipped pool when the query refers to one.
    """
    from pyspark.errors import AnalysisException

    catalog = register_pools(spark, lake, as_of=as_of)
    try:
        return spark.sql(sql), catalog
    except AnalysisException as exc:
        message = str(getattr(exc, "desc", None) or exc).strip().splitlines()[0]
        for name, reason in catalog.skipped.items():
            if re.search(rf"`?{re.escape(view_name(name))}`?", message):
                raise QueryError(f"{message} — {reason}") from None
        known = ", ".join(catalog.names()) or "none"
        if "TABLE_OR_VIEW_NOT_FOUND" in message:
            message += f" (views: {known})"
        raise QueryError(message) from None
