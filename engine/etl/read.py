"""What a pass reads: the input records above the cursors, this ETL's markers above
them, and the *candidates* — the records no marker covers.

Per raw pool only the files that may hold rows with ``seqno >= floor`` are read (Delta
statistics); markers only from staging files with ``seqno >= marker-floor``
(:mod:`engine.etl.cursors`). The candidates are the fresh records minus the done ones (an
anti-join, the markers broadcast), as SQL text for the pass's statement. pyspark is
imported inside the functions (deferred: importing the engine does not load Spark).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from engine.etl import markers as mk
from engine.etl.cursors import Positions, cursor_filter
from engine.etl.etl_pools import EtlPools
from engine.lake import delta

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

def above_floors(pools: EtlPools, positions: Positions) -> bool:
    """Whether a raw pool has a file at or above its floor (read from the loaded
    snapshots: no Spark)."""
    return any(pools.raw(name).last_seqno() >= positions.floor(name) for name in pools.config.raw_pools)


def fresh_records(pools: EtlPools, positions: Positions) -> DataFrame | None:
    """Rows of the input topics above the cursors, from raw files with
    ``seqno >= floor`` only (None: no such file)."""
    # deferred: pyspark
    from pyspark.sql import functions as F

    config = pools.config
    parts = []
    for pool_name in config.raw_pools:
        raw = pools.raw(pool_name)
        floor = positions.floor(pool_name)
        if raw.last_seqno() < floor:
            continue
        topics = [i.topic for i in config.inputs if i.pool == pool_name]
        predicate = f"seqno >= {floor}"
        df = delta.read_spark(pools.spark, raw.table, predicate)
        df = df.where(
            f"{predicate} AND marker IS NULL AND {cursor_filter(positions.cursors, topics)}"
        )
        parts.append(
            df.select(
                F.lit(pool_name).alias("pool"),
                "seqno",
                "kafka",
                "key",
                "value",
                F.col("deadletter").isNotNull().alias("__dead"),
            )
        )
    if not parts:
        return None
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


def candidates_sql(fresh: str, done: str | None, *, small: bool) -> str:
    """A SELECT of the records of the view ``fresh`` (not dead letters) that no marker
    of the view ``done`` (``topic, partition, offset``; None: no markers) covers."""
    columns = "f.pool, f.seqno, f.kafka, f.key, f.value"
    if done is None:
        return f"SELECT {columns} FROM {fresh} f WHERE NOT f.__dead"
    hint = f"/*+ BROADCAST({done}) */ " if small else ""
    return (
        f"SELECT {hint}{columns} FROM {fresh} f LEFT ANTI JOIN {done} "
        f"ON f.kafka.topic = {done}.topic AND f.kafka.partition = {done}.partition "
        f"AND f.kafka.offset = {done}.offset WHERE NOT f.__dead"
    )


def candidates_arrow(rows: pa.Table, done: pa.Table) -> pa.Table:
    """What :func:`candidates_sql` selects, on the driver: the records of ``rows``
    (:data:`engine.etl.window.FRESH_SCHEMA`, a warm pass's few rows) that are not dead
    letters and that no marker of ``done`` covers, as ``pool, seqno, kafka, key, value``.

    A warm pass hands Spark these as one small local relation that every topic's part of
    the statement filters directly: Spark's optimiser evaluates a local relation's
    projections at planning time, before it pushes filters down, and a statement whose
    hundreds of parts each projected every row of a shared CTE first held hundreds of
    copies of the pass's input at once (a 2 GB driver ran out of memory at 200 topics of
    4,000 wide rows)."""
    import pyarrow.compute as pc  # deferred: pyarrow.compute loads on use

    dead = pc.fill_null(rows.column("__dead"), False)
    live = rows.filter(pc.invert(dead)).select(["pool", "seqno", "kafka", "key", "value"])
    if done.num_rows == 0 or live.num_rows == 0:
        return live
    kafka = live.column("kafka")
    keys = pa.table(
        {
            "__i": pa.array(range(live.num_rows), pa.int64()),
            "topic": pc.struct_field(kafka, "topic"),
            "partition": pc.struct_field(kafka, "partition"),
            "offset": pc.struct_field(kafka, "offset"),
        }
    )
    covered = done.select(["topic", "partition", "offset"]).cast(keys.select([1, 2, 3]).schema)
    kept = keys.join(covered, keys=["topic", "partition", "offset"], join_type="left anti")
    indices = kept.column("__i").combine_chunks()
    return live.take(pc.take(indices, pc.sort_indices(indices)))  # in their order


def register_input_views(
    spark: SparkSession, fresh: DataFrame, done: pa.Table, names: tuple[str, str]
) -> tuple[str, str | None, Callable[[], None]]:
    """``fresh`` and ``done`` as temp views named ``names`` (no done view when there
    are no markers), and a callable that drops them."""
    fresh_view, done_view = names
    fresh.createOrReplaceTempView(fresh_view)
    registered = [fresh_view]
    if done.num_rows:
        keys = done.select(["topic", "partition", "offset"])
        spark.createDataFrame(keys).createOrReplaceTempView(done_view)
        registered.append(done_view)

    def drop() -> None:
        for view in registered:
            spark.catalog.dropTempView(view)

    return fresh_view, done_view if done.num_rows else None, drop


@contextlib.contextmanager
def input_views(
    spark: SparkSession, fresh: DataFrame, done: pa.Table, names: tuple[str, str]
) -> Iterator[tuple[str, str | None]]:
    """:func:`register_input_views` for the block's duration."""
    fresh_view, done_view, drop = register_input_views(spark, fresh, done, names)
    try:
        yield fresh_view, done_view
    finally:
        drop()


def done_markers(pools: EtlPools, positions: Positions) -> pa.Table:
    """This ETL's markers above the cursors (no Spark job when no staging file can
    hold one)."""
    if pools.staging.last_seqno() < positions.marker_floor:
        return mk.DONE_SCHEMA.empty_table()
    df = mk.done_above(
        pools.spark,
        pools.staging,
        pools.config.name,
        positions.cursors,
        pools.config.input_topics,
        positions.marker_floor,
    )
    return df.toArrow().select(mk.DONE_SCHEMA.names).cast(mk.DONE_SCHEMA)
