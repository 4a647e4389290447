"""Input records as Spark sees them in a rule: the pool envelope (``seqno, kafka, key,
value``) with key and value JSON text parsed into the topic's Spark types, and values
turned back into JSON text on the executors.

A topic's types (:data:`TopicTypes`) come from its raw pool's metadata; None means not
known yet (no value ingested), and the text stays a string.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from engine.lake.delta import spark_schema
from engine.lake.envelope import POOL_SCHEMA
from engine.sparktypes import merge_spark_types, parse_json_column

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType

TopicTypes = tuple["DataType | None", "DataType | None"]


def kafka_type() -> StructType:
    return spark_schema(POOL_SCHEMA)["kafka"].dataType  # type: ignore[return-value]


def envelope_schema(types: TopicTypes) -> StructType:
    """The typed envelope: ``seqno, kafka, key, value`` with the topic's types."""
    from pyspark.sql import types as T  # deferred: pyspark

    key_type, value_type = types
    return T.StructType(
        [
            T.StructField("seqno", T.LongType(), False),
            T.StructField("kafka", kafka_type(), True),
            T.StructField("key", key_type or T.StringType(), True),
            T.StructField("value", value_type or T.StringType(), True),
        ]
    )


def typed_columns(types: TopicTypes) -> list[Column]:
    """``seqno, kafka, key, value`` with key/value JSON text parsed into the types."""
    from pyspark.sql import functions as F  # deferred: pyspark

    key_type, value_type = types
    return [
        F.col("seqno"),
        F.col("kafka"),
        parse_json_column(F.col("key"), key_type).alias("key"),
        parse_json_column(F.col("value"), value_type).alias("value"),
    ]


def envelope_struct(types: TopicTypes) -> Column:
    from pyspark.sql import functions as F  # deferred: pyspark

    return F.struct(*typed_columns(types))


def json_text(column: Column, data_type: DataType) -> Column:
    """JSON text of a column on the executors (NULL stays NULL: a tombstone)."""
    from pyspark.sql import functions as F  # deferred: pyspark
    from pyspark.sql import types as T  # deferred: pyspark

    if isinstance(data_type, T.NullType):
        return F.lit(None).cast("string")
    keep_nulls = {"ignoreNullFields": "false"}  # a NULL column is written as null
    if isinstance(data_type, T.StructType | T.ArrayType | T.MapType):
        return F.to_json(column, keep_nulls)
    wrapped = F.to_json(F.struct(column.alias("v")), keep_nulls)
    return F.when(column.isNull(), F.lit(None).cast("string")).otherwise(
        F.regexp_extract(wrapped, r'^\{"v":(.*)\}$', 1)
    )


def merge_types(types: Sequence[TopicTypes]) -> TopicTypes:
    """One key type and one value type that every topic's records parse into."""
    key: DataType | None = None
    value: DataType | None = None
    for k, v in types:
        key = k if key is None else (key if k is None else merge_spark_types(key, k))
        value = v if value is None else (value if v is None else merge_spark_types(value, v))
    return key, value


def value_known(types: Mapping[str, TopicTypes], topic: str) -> bool:
    """Whether the raw pool knows the topic's value type (some non-null value was
    ingested). Rules over a topic whose values are not typed yet are only parsed, and
    its records (null values only: tombstones) match no rule."""
    return types.get(topic, (None, None))[1] is not None


