"""The JSON text a pass writes for an output key or value (engine.etl.typed_records): what
Spark's to_json gives a struct, and the bare JSON of a scalar (an integer key of a Kafka
Connect topic, say), NULL staying NULL (a tombstone)."""

from __future__ import annotations

import json

import pytest

from engine.etl.typed_records import json_text_sql

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_json_text_of_scalars_structs_and_null(spark) -> None:
    from pyspark.sql import types as T

    cases = [
        ("42L", T.LongType(), 42),
        ("'say \"hi\"\\n'", T.StringType(), 'say "hi"\n'),
        ("1.5D", T.DoubleType(), 1.5),
        ("true", T.BooleanType(), True),
        ("named_struct('a', 1, 'b', CAST(NULL AS STRING))", T.StructType(
            [T.StructField("a", T.IntegerType()), T.StructField("b", T.StringType())]
        ), {"a": 1, "b": None}),
        ("array(1, 2)", T.ArrayType(T.IntegerType()), [1, 2]),
    ]
    for expr, data_type, expected in cases:
        text = spark.sql(f"SELECT {json_text_sql(expr, data_type)} AS j").first().j
        assert json.loads(text) == expected, (expr, text)
    null = spark.sql(f"SELECT {json_text_sql('CAST(NULL AS INT)', T.IntegerType())} AS j")
    assert null.first().j is None
