"""Input records as Spark sees them in a rule: the pool record (``seqno, kafka, key,
value``) with key and value JSON text parsed into the topic's Spark types, and values
turned back into JSON text on the executors.

A topic's types (:data:`TopicTypes`) come from its raw pool's metadata; None means not
known yet (no value ingested), and the text stays a string.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from engine.etl.sql import ident, quote
from engine.lake.delta import spark_schema
from engine.lake.pool_record import POOL_SCHEMA
from engine.sparktypes import merge_spark_types

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

TopicTypes = tuple["DataType | None", "DataType | None"]


def kafka_type() -> StructType:
    return spark_schema(POOL_SCHEMA)["kafka"].dataType  # type: ignore[return-value]


def typed_record_schema(types: TopicTypes) -> StructType:
    """The typed pool record: ``seqno, kafka, key, value`` with the topic's types."""
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


def parse_json_sql(expr: str, data_type: DataType | None) -> str:
    """SQL parsing the JSON text ``expr`` into ``data_type`` (what
    :func:`engine.sparktypes.parse_json_column` does as a Column); the text as it is
    when the type is unknown. The type goes in as its JSON form, which ``from_json``
    reads whatever the field names."""
    # deferred: pyspark
    from pyspark.sql import types as T

    if data_type is None:
        return expr
    if isinstance(data_type, T.StructType | T.ArrayType | T.MapType):
        return f"from_json({expr}, {quote(data_type.json())}, map('mode', 'PERMISSIVE'))"
    scalar = f"""get_json_object(concat('{{"v":', {expr}, '}}'), '$.v')"""
    if isinstance(data_type, T.StringType):
        return scalar
    return f"CAST({scalar} AS {data_type.simpleString()})"


def typed_sql(types: TopicTypes) -> str:
    """``seqno, kafka, key, value`` with key/value JSON text parsed into the types."""
    key_type, value_type = types
    return (
        f"seqno, kafka, {parse_json_sql('key', key_type)} AS key, "
        f"{parse_json_sql('value', value_type)} AS value"
    )


def json_text_sql(expr: str, data_type: DataType | None) -> str:
    """SQL for the JSON text of ``expr`` (NULL stays NULL: a tombstone); what
    :func:`engine.sparktypes.json_text` does as a Column."""
    # deferred: pyspark
    from pyspark.sql import types as T

    if data_type is None or isinstance(data_type, T.NullType):
        return "CAST(NULL AS STRING)"
    keep_nulls = "map('ignoreNullFields', 'false')"  # a NULL field is written as null
    if isinstance(data_type, T.StructType | T.ArrayType | T.MapType):
        return f"to_json({expr}, {keep_nulls})"
    # a scalar: its JSON inside {"v":...}, the wrapper cut off (5 characters before it,
    # one after)
    wrapped = f"to_json(named_struct('v', {expr}), {keep_nulls})"
    return (
        f"CASE WHEN {expr} IS NULL THEN NULL "
        f"ELSE substring({wrapped}, 6, length({wrapped}) - 6) END"
    )


def avro_bodies_sql(
    key_type: DataType | None,
    value_type: DataType | None,
    written: TopicTypes | None = None,
) -> str:
    """SQL for an output's ``avro`` column (:data:`engine.lake.pool_record.AVRO_TYPE`): its
    key and value as Avro bodies, written by Spark's ``to_avro`` (docs/design.md#staged-avro)
    with the schema to-kafka derives from the type ``written`` records for the output
    topic (the merge of the types its rules write; default: the rule's own), and that
    schema's fingerprint. A part is NULL when its type is unknown, Spark's Avro writer
    does not take the recorded type, or the rule's values cannot be carried into it
    unchanged (:func:`conform_sql`)."""
    # deferred: pyspark types
    from engine.kafka.typemap.from_spark import (
        avro_fingerprint,
        spark_to_avro,
        spark_writes_avro,
    )

    parts = {}
    for index, (name, data_type) in enumerate((("key", key_type), ("value", value_type))):
        target = written[index] if written is not None else data_type
        expr = None
        if data_type is not None and target is not None and spark_writes_avro(target):
            expr = conform_sql(name, data_type, target)
        if expr is None or target is None:
            parts[name] = ("CAST(NULL AS STRING)", "CAST(NULL AS BINARY)")
            continue
        schema = spark_to_avro(target, name)
        parts[name] = (
            quote(avro_fingerprint(schema)),
            f"to_avro({expr}, {quote(json.dumps(schema, separators=(',', ':')))})",
        )
    return (
        f"named_struct('key_schema', {parts['key'][0]}, 'value_schema', {parts['value'][0]}, "
        f"'key', {parts['key'][1]}, 'value', {parts['value'][1]})"
    )


def conform_sql(expr: str, source: DataType, target: DataType, depth: int = 0) -> str | None:
    """SQL for ``expr`` (of type ``source``) as a value of ``target``, a type merged from
    ``source`` and others (:func:`engine.sparktypes.merge_spark_types`): struct fields
    ``source`` lacks are NULL, integers widen, integers and decimals become the wider
    number. None when a value could come out other than the JSON text reads in
    ``target`` (a float made double, a conflict merged to string)."""
    from pyspark.sql import types as T  # deferred: pyspark

    if source == target:
        return expr
    if isinstance(source, T.StructType) and isinstance(target, T.StructType):
        have = {f.name: f for f in source.fields}
        if not set(have) <= set(target.names):
            return None
        fields = []
        for field in target.fields:
            inner = have.get(field.name)
            if inner is None:
                value = f"CAST(NULL AS {spark_ddl(field.dataType)})"
            else:
                converted = conform_sql(
                    f"{expr}.{ident(field.name)}", inner.dataType, field.dataType, depth
                )
                if converted is None:
                    return None
                value = converted
            fields.append(f"{quote(field.name)}, {value}")
        return f"CASE WHEN {expr} IS NULL THEN NULL ELSE named_struct({', '.join(fields)}) END"
    if isinstance(source, T.ArrayType) and isinstance(target, T.ArrayType):
        item = f"__zx{depth}"
        converted = conform_sql(item, source.elementType, target.elementType, depth + 1)
        return None if converted is None else f"transform({expr}, {item} -> {converted})"
    if isinstance(source, T.MapType) and isinstance(target, T.MapType):
        if source.keyType != target.keyType:
            return None
        key, item = f"__zk{depth}", f"__zx{depth}"
        converted = conform_sql(item, source.valueType, target.valueType, depth + 1)
        if converted is None:
            return None
        return f"transform_values({expr}, ({key}, {item}) -> {converted})"
    integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    numbers = (*integral, T.DecimalType)
    if (isinstance(source, integral) and isinstance(target, (*integral, T.DoubleType))) or (
        isinstance(source, numbers) and isinstance(target, T.DecimalType)
    ):
        return f"CAST({expr} AS {spark_ddl(target)})"
    return None


def spark_ddl(data_type: DataType) -> str:
    """``data_type`` as Spark SQL writes a type, struct field names quoted."""
    from pyspark.sql import types as T  # deferred: pyspark

    if isinstance(data_type, T.StructType):
        fields = ", ".join(f"{ident(f.name)}: {spark_ddl(f.dataType)}" for f in data_type.fields)
        return f"struct<{fields}>"
    if isinstance(data_type, T.ArrayType):
        return f"array<{spark_ddl(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"map<{spark_ddl(data_type.keyType)}, {spark_ddl(data_type.valueType)}>"
    return data_type.simpleString()


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
