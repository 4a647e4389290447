"""What a pass reads: the input records above the cursors, this ETL's markers above
them, and the *candidates* — the records no marker covers.

Per raw pool only the files that may hold rows with ``seqno >= floor`` are read (Delta
statistics); markers only from staging files with ``seqno >= marker-floor``
(:mod:`engine.etl.cursors`). The candidates are the fresh records minus the done ones:
a set filter when there are few markers, else a broadcast anti-join. pyspark is
imported inside the functions (deferred: importing the engine does not load Spark).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.etl import markers as mk
from engine.etl.cursors import Positions, cursor_filter
from engine.etl.pools import EtlPools
from engine.lake import delta

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Up to this many done markers above the cursors are excluded with a set filter.
DONE_AS_SET = 20_000


def fresh_records(pools: EtlPools, positions: Positions) -> DataFrame | None:
    """Rows of the input topics above the cursors, from raw files with
    ``seqno >= floor`` only (None: no such file)."""
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


def candidates(spark: SparkSession, fresh: DataFrame, done: pa.Table) -> DataFrame:
    """The input records of ``fresh`` that no marker above the cursors covers: a
    set filter when the done side is small, else a broadcast anti-join."""
    from pyspark.sql import functions as F

    records = fresh.where(~F.col("__dead"))
    if done.num_rows == 0:
        return records
    key = F.concat_ws(
        "\x01",
        F.col("kafka.topic"),
        F.col("kafka.partition").cast("string"),
        F.col("kafka.offset").cast("string"),
    )
    keys = pc.binary_join_element_wise(
        done.column("topic"),
        done.column("partition").cast(pa.string()),
        done.column("offset").cast(pa.string()),
        "\x01",
    )
    if done.num_rows <= DONE_AS_SET:
        return records.where(~key.isin(keys.to_pylist()))
    side = spark.createDataFrame(pa.table({"__k": keys}))
    return records.join(F.broadcast(side), key == F.col("__k"), "left_anti")


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
