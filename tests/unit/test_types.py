"""Spark types for Avro, Kafka Connect and plain JSON schemas, and their round trip."""

from __future__ import annotations

import decimal
import io
import json
import math
import random
from typing import Any

import fastavro
import pytest
from pyspark.sql import types as T

from engine.kafka.codecs import connect_json
from engine.kafka.codecs.avro import AvroSchema
from engine.kafka.typemap.to_spark import (
    avro_nullable,
    avro_to_spark,
    connect_to_spark,
    json_value_to_spark,
)
from engine.sparktypes import merge_spark_types
from tests.fixtures.debezium import (
    AVRO_KEY_SCHEMA,
    AVRO_VALUE_SCHEMA,
    CONNECT_VALUE_SCHEMA,
    events,
    to_connect_payload,
)


def _field(struct: T.DataType, *path: str) -> T.StructField:
    assert isinstance(struct, T.StructType)
    current = struct[path[0]]
    for name in path[1:]:
        assert isinstance(current.dataType, T.StructType)
        current = current.dataType[name]
    return current


def test_debezium_avro_envelope() -> None:
    dtype = avro_to_spark(json.dumps(AVRO_VALUE_SCHEMA))
    assert isinstance(dtype, T.StructType)
    assert dtype.fieldNames() == ["before", "after", "source", "op", "ts_ms", "transaction"]
    after = _field(dtype, "after")
    assert after.nullable
    assert _field(dtype, "after", "ID").dataType == T.IntegerType()
    assert not _field(dtype, "after", "ID").nullable
    assert _field(dtype, "after", "amount").dataType == T.DecimalType(10, 2)
    assert _field(dtype, "after", "created_at").dataType == T.LongType()
    assert _field(dtype, "before").dataType == after.dataType  # `Value` reference resolved
    assert _field(dtype, "source", "snapshot").dataType == T.StringType()
    assert _field(dtype, "source", "snapshot").nullable
    assert _field(dtype, "transaction", "total_order").dataType == T.LongType()
    assert avro_to_spark(AVRO_KEY_SCHEMA) == T.StructType(
        [T.StructField("ID", T.IntegerType(), False)]
    )


def test_parsed_schema_maps_the_same() -> None:
    assert avro_to_spark(AvroSchema(AVRO_VALUE_SCHEMA).parsed) == avro_to_spark(AVRO_VALUE_SCHEMA)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ("string", T.StringType()),
        ("long", T.LongType()),
        ("int", T.IntegerType()),
        ("float", T.FloatType()),
        ("double", T.DoubleType()),
        ("boolean", T.BooleanType()),
        ("bytes", T.StringType()),
        ("null", T.StringType()),
        (["null", "long"], T.LongType()),
        (["null", "long", "string"], T.StringType()),
        ({"type": "enum", "name": "E", "symbols": ["A"]}, T.StringType()),
        ({"type": "fixed", "name": "F", "size": 4}, T.StringType()),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3},
            T.DecimalType(9, 3),
        ),
        ({"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 3}, T.StringType()),
        (
            {"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 12},
            T.DecimalType(12, 0),
        ),
        ({"type": "long", "logicalType": "timestamp-millis"}, T.LongType()),
        ({"type": "int", "logicalType": "date"}, T.IntegerType()),
        ({"type": "string", "logicalType": "uuid"}, T.StringType()),
        ({"type": "array", "items": ["null", "int"]}, T.ArrayType(T.IntegerType(), True)),
        ({"type": "array", "items": "int"}, T.ArrayType(T.IntegerType(), False)),
        ({"type": "map", "values": "double"}, T.MapType(T.StringType(), T.DoubleType(), False)),
    ],
)
def test_avro_types(schema: Any, expected: T.DataType) -> None:
    assert avro_to_spark(schema) == expected


def test_avro_recursion_and_namespaces() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "namespace": "a.b",
        "fields": [
            {"name": "v", "type": "long"},
            {"name": "next", "type": ["null", "Node"]},
            {
                "name": "other",
                "type": [
                    "null",
                    {"type": "record", "name": "x.Leaf", "fields": [{"name": "q", "type": "int"}]},
                ],
            },
            {"name": "again", "type": ["null", "x.Leaf"]},
        ],
    }
    dtype = avro_to_spark(node)
    assert _field(dtype, "next").dataType == T.StringType()
    assert _field(dtype, "again").dataType == _field(dtype, "other").dataType
    assert avro_nullable(["null", "x"])
    assert not avro_nullable("long")
    with pytest.raises(ValueError, match="unknown Avro type"):
        avro_to_spark({"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]})


def test_connect_types() -> None:
    dtype = connect_to_spark(CONNECT_VALUE_SCHEMA)
    assert _field(dtype, "after", "ID").dataType == T.IntegerType()
    assert _field(dtype, "after", "amount").dataType == T.DecimalType(10, 2)
    assert _field(dtype, "after").nullable
    assert not _field(dtype, "op").nullable
    schema = {
        "type": "struct",
        "fields": [
            {"type": "int8", "field": "a"},
            {"type": "int16", "field": "b"},
            {"type": "float", "field": "c"},
            {"type": "float64", "field": "d"},
            {"type": "bytes", "field": "e"},
            {"type": "array", "items": {"type": "string", "optional": True}, "field": "f"},
            {"type": "map", "keys": {"type": "int32"}, "values": {"type": "boolean"}, "field": "g"},
        ],
    }
    assert [f.dataType for f in connect_to_spark(schema).fields] == [
        T.ByteType(),
        T.ShortType(),
        T.FloatType(),
        T.DoubleType(),
        T.StringType(),
        T.ArrayType(T.StringType(), True),
        T.MapType(T.StringType(), T.BooleanType(), False),
    ]
    assert connect_to_spark(None) == T.StringType()


def test_json_value_inference() -> None:
    dtype = json_value_to_spark(
        [
            {"a": 1, "b": "x", "c": [1], "d": None, "e": {"x": 1}},
            {"a": 2.5, "b": 3, "c": [], "e": {"y": True}, "f": []},
            None,
        ]
    )
    assert dtype == T.StructType(
        [
            T.StructField("a", T.DoubleType(), True),
            T.StructField("b", T.StringType(), True),
            T.StructField("c", T.ArrayType(T.LongType(), True), True),
            T.StructField("d", T.StringType(), True),
            T.StructField(
                "e",
                T.StructType(
                    [
                        T.StructField("x", T.LongType(), True),
                        T.StructField("y", T.BooleanType(), True),
                    ]
                ),
                True,
            ),
            T.StructField("f", T.ArrayType(T.StringType(), True), True),
        ]
    )
    assert json_value_to_spark([]) == T.StringType()
    assert json_value_to_spark(["a", "b"]) == T.StringType()
    assert json_value_to_spark([1, 2]) == T.LongType()


def _value(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value: every kind, nested objects and arrays, mixed elements."""
    if depth > 3 or rng.random() < 0.5:
        return rng.choice(
            [None, True, False, 0, -3, 2**70, 1.5, "x", "", [], [1, None], [1.0, "a"], [1, 2.5],
             [True, 1], {}, [{}], [{"a": 1}, {"b": "x"}], [[1], [2.0]]]
        )  # fmt: skip
    if rng.random() < 0.6:
        return {rng.choice("abcde"): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def test_json_typing_is_the_merge_of_each_values_type() -> None:
    """json_value_to_spark merges plain Python shapes and makes one Spark type at the end;
    it must give exactly what typing each value and merging with merge_spark_types
    gives (the rules it restates), field order included."""
    from engine.kafka.typemap.to_spark import _json_type

    rng = random.Random(41)
    samples = [[_value(rng) for _ in range(rng.randint(0, 25))] for _ in range(1500)]
    samples += [[None], [{"a": None}, {"a": {"b": 1}}], [{"a": [None]}, {"a": [{"x": 1}]}], [1, True], ["s", {}], [[1], "x"]]
    for values in samples:
        merged = None
        for value in values:
            if value is not None:
                one = _json_type(value)
                merged = one if merged is None else merge_spark_types(merged, one)
        expected = T.NullType() if merged is None else merged
        got = json_value_to_spark(values, unknown="null")
        assert got == expected, values
        assert got.json() == expected.json(), values  # the same field order


def test_merge_spark_types() -> None:
    a = T.StructType(
        [T.StructField("x", T.IntegerType(), False), T.StructField("y", T.StringType(), False)]
    )
    b = T.StructType(
        [T.StructField("x", T.LongType(), False), T.StructField("z", T.BooleanType(), False)]
    )
    assert merge_spark_types(a, b) == T.StructType(
        [
            T.StructField("x", T.LongType(), False),
            T.StructField("y", T.StringType(), True),
            T.StructField("z", T.BooleanType(), True),
        ]
    )
    assert merge_spark_types(T.IntegerType(), T.DoubleType()) == T.DoubleType()
    assert merge_spark_types(T.LongType(), T.StringType()) == T.StringType()
    assert merge_spark_types(T.NullType(), T.LongType()) == T.LongType()
    assert merge_spark_types(T.DecimalType(10, 2), T.DecimalType(5, 4)) == T.DecimalType(12, 4)
    assert merge_spark_types(T.DecimalType(38, 0), T.DecimalType(38, 10)) == T.StringType()
    assert merge_spark_types(
        T.ArrayType(T.IntegerType(), False), T.ArrayType(T.LongType(), True)
    ) == T.ArrayType(T.LongType(), True)
    assert merge_spark_types(
        T.MapType(T.StringType(), T.IntegerType(), False),
        T.MapType(T.StringType(), T.StringType(), False),
    ) == T.MapType(T.StringType(), T.StringType(), False)
    assert merge_spark_types(T.StructType([]), T.LongType()) == T.StringType()


# -- the round trip through Spark's from_json ----------------------------------------------

KITCHEN_SINK = {
    "type": "record",
    "name": "K",
    "fields": [
        {"name": "f32", "type": "float"},
        {"name": "nan", "type": "double"},
        {"name": "blob", "type": "bytes"},
        {"name": "colour", "type": {"type": "enum", "name": "C", "symbols": ["RED", "BLUE"]}},
        {
            "name": "dec",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3},
        },
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "m", "type": {"type": "map", "values": "long"}},
        {
            "name": "multi",
            "type": [
                "null",
                "long",
                "string",
                {"type": "record", "name": "In", "fields": [{"name": "a", "type": "int"}]},
            ],
        },
        {"name": "arr", "type": {"type": "array", "items": ["null", "In"]}},
    ],
}


@pytest.mark.spark
def test_decoded_json_parses_into_the_mapped_types(spark: Any) -> None:
    from pyspark.sql import functions as F

    value_schema = AvroSchema(AVRO_VALUE_SCHEMA)
    evs = events(12)
    rows: list[tuple[str, str, str, str]] = []
    for event in evs:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, value_schema.parsed, event)
        avro_text = value_schema.decode_batch_to_json([buf.getvalue()]).texts[0]
        connect_text = connect_json.decode_json(
            json.dumps(
                {"schema": CONNECT_VALUE_SCHEMA, "payload": to_connect_payload(event)}
            ).encode()
        )
        assert avro_text is not None
        rows.append((avro_text, connect_text, json.dumps({"ID": event["source"]["pos"]}), "x"))
    sink = AvroSchema(KITCHEN_SINK)
    sink_values = [
        {
            "f32": 0.1,
            "nan": math.nan,
            "blob": b"\x00\xff",
            "colour": "BLUE",
            "dec": decimal.Decimal("-12.345"),
            "ts": 1_700_000_000_123,
            "m": {"a": 1},
            "multi": 5,
            "arr": [None, {"a": 1}],
        },
        {
            "f32": -2.5,
            "nan": 1.5,
            "blob": b"",
            "colour": "RED",
            "dec": decimal.Decimal("0.000"),
            "ts": 0,
            "m": {},
            "multi": {"a": 7},
            "arr": [],
        },
        {
            "f32": 3.0,
            "nan": 0.0,
            "blob": b"a",
            "colour": "RED",
            "dec": decimal.Decimal("1.5"),
            "ts": 1,
            "m": {"b": 2},
            "multi": "text",
            "arr": [{"a": 2}],
        },
    ]
    sink_texts = []
    for v in sink_values:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, sink.parsed, v)
        sink_texts.append(sink.decode_json(buf.getvalue()))

    df = spark.createDataFrame(rows, ["avro", "connect", "plain", "pad"])
    avro_type = avro_to_spark(AVRO_VALUE_SCHEMA)
    connect_type = connect_to_spark(CONNECT_VALUE_SCHEMA)
    plain_type = json_value_to_spark([json.loads(r[2]) for r in rows])
    parsed = df.select(
        F.from_json("avro", avro_type).alias("a"),
        F.from_json("connect", connect_type).alias("c"),
        F.from_json("plain", plain_type).alias("p"),
    ).collect()
    for event, row in zip(evs, parsed, strict=True):
        a, c = row["a"], row["c"]
        assert a is not None
        assert c is not None
        live = event["after"] or event["before"]
        side = "after" if event["after"] else "before"
        assert a[side]["ID"] == live["ID"] == c[side]["ID"]
        assert a[side]["amount"] == live["amount"] == c[side]["amount"]
        assert a[side]["created_at"] == live["created_at"] == c[side]["created_at"]
        assert a["op"] == event["op"] == c["op"]
        assert a["source"]["pos"] == event["source"]["pos"] == c["source"]["pos"]
        assert (a["transaction"] is None) == (event["transaction"] is None)
        assert row["p"]["ID"] == event["source"]["pos"]
        if event["before"] is None:
            assert a["before"] is None
            assert c["before"] is None

    # the same through SQL, as ETL rules write it
    df.select(F.from_json("avro", avro_type).alias("value")).createOrReplaceTempView("zync_types_t")
    ids = [
        r[0]
        for r in spark.sql(
            "SELECT coalesce(value.after.ID, value.before.ID) FROM zync_types_t"
        ).collect()
    ]
    assert ids == [(e["after"] or e["before"])["ID"] for e in evs]

    sink_df = spark.createDataFrame([(t,) for t in sink_texts], ["j"])
    got = sink_df.select(F.from_json("j", avro_to_spark(KITCHEN_SINK)).alias("v")).collect()
    first, second, third = (r["v"] for r in got)
    assert first["f32"] == pytest.approx(0.1)
    assert first["nan"] is None
    assert first["blob"] == "AP8="
    assert first["colour"] == "BLUE"
    assert first["dec"] == decimal.Decimal("-12.345")
    assert second["dec"] == decimal.Decimal("0.000")
    assert first["ts"] == 1_700_000_000_123
    assert first["m"] == {"a": 1}
    assert second["m"] == {}
    # a multi-type union keeps the value's JSON text
    assert [first["multi"], second["multi"], third["multi"]] == ["5", '{"a":7}', "text"]
    assert first["arr"][0] is None
    assert first["arr"][1]["a"] == 1
    assert second["arr"] == []


def test_a_path_null_in_every_sample_is_typed_by_the_batchs_other_values() -> None:
    """from-kafka infers a JSON batch's type from a sample; a field null in every sampled
    value is typed from the batch's other values (else it stays NullType, which a later
    batch types), never fixed as text."""
    from pyspark.sql import types as T

    from engine.ingest.decode import JSON_TYPE_SAMPLES, PartDecoder

    values = [{"id": n, "note": None, "tags": []} for n in range(4 * JSON_TYPE_SAMPLES)]
    values[3] = {"id": 3, "note": {"by": "x"}, "tags": [1]}  # between two samples
    decoder = PartDecoder("t", "value", "json", lambda: None)  # type: ignore[arg-type,return-value]
    _, inferred = decoder.decode([json.dumps(v).encode() for v in values])
    assert isinstance(inferred, T.StructType)
    assert inferred["note"].dataType == T.StructType([T.StructField("by", T.StringType())])
    assert inferred["tags"].dataType == T.ArrayType(T.LongType())
    _, only_nulls = decoder.decode([json.dumps({"id": 1, "note": None}).encode()])
    assert only_nulls["note"].dataType == T.NullType()  # type: ignore[index]
