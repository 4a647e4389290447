"""A pool's rows on the Spark side: written by the executors, read as the typed pool record.

:func:`write_files` writes a DataFrame of records as Parquet files with exactly the pool's
row schema into a new directory of the pool (committed later, see
:meth:`engine.lake.pools.Pool.commit_rows`); :func:`typed_pool_records` parses the JSON text
of keys and values into the topic's Spark types; :func:`spark_types_of` merges the types
a pool records for its topics.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pyarrow as pa

from engine.lake import delta
from engine.lake.pool_record import AVRO_TYPE, DEADLETTER_TYPE, IS_RECORD, MARKER_TYPE
from engine.sparktypes import load_type, merge_optional, parse_json_column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from engine.lake.location import Location
    from engine.lake.pools import Pool
    from engine.lake.topic_types import TopicTypes


def write_files(pool: Location, df: DataFrame, label: str) -> list[delta.WrittenFile]:
    """Write ``df`` (columns ``seqno, kafka, key, value`` and, for a staging pool that
    has the column, ``avro``: records, every one with its seqno and ``kafka`` struct) as
    Parquet files into ``<pool>/<label>-<uuid>``, from the Spark executors (through s3a
    on an S3 lake), without committing them."""
    # deferred: pyspark
    from pyspark.sql import functions as F

    # timestamps as every Delta reader expects them (Spark's default, INT96, is legacy)
    df.sparkSession.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    directory = f"{label}-{uuid.uuid4()}"
    # NOT NULL where the pool's schema says so (Spark writes that into the files:
    # Delta readers refuse to read a nullable file column as a non-null one)
    rows = df.select(
        F.coalesce(F.col("seqno").cast("long"), F.lit(0).cast("long")).alias("seqno"),
        F.struct(
            F.coalesce(F.col("kafka.topic").cast("string"), F.lit("")).alias("topic"),
            F.coalesce(F.col("kafka.partition").cast("int"), F.lit(0)).alias("partition"),
            F.coalesce(F.col("kafka.offset").cast("long"), F.lit(0).cast("long")).alias("offset"),
            F.col("kafka.timestamp").cast("timestamp").alias("timestamp"),
        ).alias("kafka"),
        F.col("key").cast("string"),
        F.col("value").cast("string"),
        F.lit(None).cast(_spark_ddl(DEADLETTER_TYPE)).alias("deadletter"),
        F.lit(None).cast(_spark_ddl(MARKER_TYPE)).alias("marker"),
        *[F.col(c).cast(_spark_ddl(AVRO_TYPE)).alias(c) for c in ("avro",) if c in df.columns],
    )
    rows.write.option("compression", "snappy").parquet(pool.join(directory).spark_uri)
    return delta.spark_output(pool, directory)


def typed_pool_records(
    df: DataFrame, key_type: DataType | None, value_type: DataType | None
) -> DataFrame:
    """``seqno, kafka, key, value`` of pool rows, key and value parsed into the types."""
    # deferred: pyspark
    from pyspark.sql import functions as F

    return df.select(
        "seqno",
        "kafka",
        parse_json_column(F.col("key"), key_type).alias("key"),
        parse_json_column(F.col("value"), value_type).alias("value"),
    )


def spark_types_of(types: Iterable[TopicTypes]) -> tuple[DataType | None, DataType | None]:
    """The Spark types of keys and values, merged over the given topics' types."""
    key: DataType | None = None
    value: DataType | None = None
    for t in types:
        key = merge_optional(key, load_type(t.key))
        value = merge_optional(value, load_type(t.value))
    # a field only ever null so far is NullType: Spark reads it as NULL, and types it
    # once a value arrives (docs/design.md#pools-and-their-records)
    return key, value


def _spark_ddl(type_: pa.DataType) -> str:
    """A pyarrow struct type as Spark DDL (for typed NULL columns)."""
    return delta.spark_schema(pa.schema([pa.field("x", type_)]))["x"].dataType.simpleString()


def pool_records(
    pool: Pool,
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
        where += f" AND kafka.topic = '{sql_string(topic)}'"
    if predicate:
        where += f" AND ({predicate})"
    df = pool.read(spark, predicate=where, version=version)
    return typed_pool_records(df, *pool.spark_types(topic))


def sql_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
