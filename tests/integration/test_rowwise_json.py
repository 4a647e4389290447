"""The row evaluator's JSON against Spark's own, on random values (seeded; each test is
one or two Spark jobs): what ``from_json`` reads and ``to_json`` writes for structs,
arrays and maps; the scalar path a pass uses for keys (get_json_object and a cast);
and doubles and floats as the JVM prints them. Every value is read and written exactly
as Spark does, or refused (:class:`Unsupported`) — never different.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import pytest

from engine.etl.rowwise.datatypes import parse_type
from engine.etl.rowwise.java_numbers import double_text, float_text, to_float32
from engine.etl.rowwise.json_read import parse_json
from engine.etl.rowwise.json_write import json_text
from engine.etl.rowwise.unsupported import Unsupported
from engine.etl.typed_records import json_text_sql, parse_json_sql
from tests.rowwise_corpus import (
    ValueMaker,
    debezium_key_type,
    debezium_value_type,
    dumps,
    random_type,
    struct_type,
    wide_row_type,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _frame(spark: Any, columns: dict[str, tuple[Any, list[Any]]]) -> Any:
    import pyarrow as pa

    return spark.createDataFrame(pa.table({name: pa.array(values, t) for name, (t, values) in columns.items()}))


def _mine(text: str | None, data_type: Any) -> str | None:
    return json_text(parse_json(text, data_type), data_type)


def test_structs_arrays_and_maps_read_and_written_as_spark_does(spark) -> None:
    import pyarrow as pa

    rnd = random.Random(5)
    maker = ValueMaker(6)
    types = [debezium_value_type(wide_row_type(60)), debezium_key_type()]
    types += [struct_type([("v", random_type(rnd)), ("w", random_type(rnd))]) for _ in range(60)]
    types.append({"type": "array", "elementType": random_type(rnd), "containsNull": True})
    types.append({"type": "map", "keyType": "string", "valueType": random_type(rnd), "valueContainsNull": True})
    rows: list[tuple[int, str | None]] = []
    for index, data_type in enumerate(types):
        for _ in range(200 if index == 0 else 40):
            rows.append((index, dumps(maker.value(data_type), rnd)))
    rows += [(1, text) for text in ['{"id": 1, "id": 2}', "{'id': 1}", '{"id": NaN}', '{"id": 1} x', "null", "[]", ""]]
    cases = " ".join(
        f"WHEN {i} THEN {json_text_sql(parse_json_sql('t', _spark_type(t)), _spark_type(t))}"
        for i, t in enumerate(types)
    )
    frame = _frame(spark, {"i": (pa.int32(), [r[0] for r in rows]), "t": (pa.string(), [r[1] for r in rows])})
    written = frame.selectExpr(f"CASE i {cases} END AS j").toArrow().column("j").to_pylist()
    compared, refused, mismatches = 0, Counter[str](), []
    for (index, text), spark_text in zip(rows, written, strict=True):
        data_type = parse_type(types[index])
        try:
            mine = _mine(text, data_type)
        except Unsupported as exc:
            refused[exc.reason.split(" (")[0][:60]] += 1
            continue
        compared += 1
        if mine != spark_text:
            mismatches.append((text, mine, spark_text))
    assert not mismatches, mismatches[:3]
    assert compared >= 0.75 * len(rows), refused.most_common(10)


def _spark_type(data_type: Any) -> Any:
    from pyspark.sql import types as T

    return T._parse_datatype_json_value(data_type)


SCALAR_TEXTS = [
    '"abc"', '"é \\n \\u0000 😀"', "123", "-0", "9223372036854775807", "-9223372036854775809",
    "2147483648", "1.50", "1e5", "-0.0", "1e400", "true", "false", "null", '{"a": [1, 2.5]}',
    '"12.345"', '"-0.001"', '"1e5"', "12.345", '"abc', "NaN", '"NaN"', "  7 ", "[1, 2]", '""',
    "0.1", "3.4028235e38", "16777217", "16777217.0", "1.0000001", '"  42  "', "1E-7", "0",
]  # fmt: skip
SCALAR_TYPES = ["string", "long", "integer", "short", "byte", "double", "float", "boolean", "decimal(10,2)", "decimal(38,18)", "decimal(5,0)"]


def test_scalar_keys_read_and_written_as_spark_does(spark) -> None:
    """A topic whose key is a scalar (an Avro ``long`` key, a Connect ``int32``): the
    text is read by get_json_object and a cast, and written bare."""
    import pyarrow as pa

    rnd = random.Random(7)
    texts = SCALAR_TEXTS + [str(rnd.randint(-(10**12), 10**12)) for _ in range(40)]
    texts += [repr(rnd.uniform(-1e6, 1e6)) for _ in range(40)] + [None]
    frame = _frame(spark, {"t": (pa.string(), texts)})
    exprs = [
        f"{json_text_sql(parse_json_sql('t', _spark_type(name)), _spark_type(name))} AS c{i}"
        for i, name in enumerate(SCALAR_TYPES)
    ]
    # Without ANSI, a text Spark's cast cannot read gives NULL instead of failing the
    # job; every text read here reads the same under both (the evaluator refuses the rest)
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        table = frame.selectExpr(*exprs).toArrow()
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
    compared, mismatches = 0, []
    for i, name in enumerate(SCALAR_TYPES):
        data_type = parse_type(name)
        for text, spark_text in zip(texts, table.column(i).to_pylist(), strict=True):
            try:
                mine = _mine(text, data_type)
            except Unsupported:
                continue
            compared += 1
            if mine != spark_text:
                mismatches.append((name, text, mine, spark_text))
    assert not mismatches, mismatches[:5]
    assert compared > len(texts) * len(SCALAR_TYPES) // 4


def _doubles(rnd: random.Random) -> list[float]:
    values = [0.0, -0.0, 1e7, 9999999.0, 1e-3, 1e-4, 2e23, 1e23, 2.0**54, 2.0**63, 5e-324]
    for binary_exponent in range(-1022, 1024, 3):
        for _ in range(6):
            x = math.ldexp(1.0 + rnd.getrandbits(52) / 2.0**52, binary_exponent)
            values.append(x if rnd.random() < 0.7 else -x)
        short = math.ldexp(1.0 + rnd.getrandbits(52) / 2.0**52, binary_exponent)
        values.append(float(f"{short:.{rnd.randint(0, 15)}e}"))
    for _ in range(600):  # Java 17 truncates some of these where rounding up is closer
        values.append(math.ldexp(1.0 + rnd.getrandbits(52) / 2.0**52, 84))
    for _ in range(2000):
        digits = rnd.randint(1, 17)
        values.append(float(f"{rnd.randint(10 ** (digits - 1), 10**digits - 1)}e{rnd.randint(-30, 30)}"))
    return [v for v in values if math.isfinite(v)]


def _floats(rnd: random.Random) -> list[float]:
    values = [0.0, 1.1, 0.1, 16777216.0, 3.4028234663852886e38, 1.1754943508222875e-38]
    for binary_exponent in range(-126, 128):
        for _ in range(12):
            values.append(math.ldexp(1.0 + rnd.getrandbits(23) / 2.0**23, binary_exponent))
    for _ in range(1000):
        value = to_float32(rnd.uniform(-1e4, 1e4))
        values.append(float(f"{value:.{rnd.randint(0, 7)}g}"))
    return [to_float32(v) for v in values if math.isfinite(v) and abs(v) <= 3.4e38]


def test_doubles_and_floats_as_the_jvm_writes_them(spark) -> None:
    """``Double.toString``/``Float.toString`` (``CAST AS STRING``, ``to_json``, and
    ``reflect`` of the JVM's own method) on every binary exponent, the notation bounds,
    and the exponent where Java 17 truncates: equal where rendered, refused elsewhere."""
    import pyarrow as pa

    rnd = random.Random(9)
    doubles, floats = _doubles(rnd), _floats(rnd)
    rows = _frame(spark, {"d": (pa.float64(), doubles)}).selectExpr(
        "CAST(d AS STRING) AS c", "to_json(named_struct('v', d)) AS j",
        "reflect('java.lang.Double', 'toString', d) AS r",
    ).toArrow()  # fmt: skip
    frows = _frame(spark, {"f": (pa.float32(), floats)}).selectExpr(
        "CAST(f AS STRING) AS c", "to_json(named_struct('v', f)) AS j"
    ).toArrow()
    checks: list[tuple[Any, float, list[str]]] = []
    for value, c, j, r in zip(doubles, *(rows.column(n).to_pylist() for n in "cjr"), strict=True):
        checks.append((double_text, value, [c, j[5:-1], r]))
    for value, c, j in zip(floats, *(frows.column(n).to_pylist() for n in "cj"), strict=True):
        checks.append((float_text, value, [c, j[5:-1]]))
    rendered, mismatches = 0, []
    for render, value, jvm in checks:
        assert len(set(jvm)) == 1, (value, jvm)  # the JVM's texts agree with each other
        try:
            mine = render(value)
        except Unsupported:
            continue
        rendered += 1
        if mine != jvm[0]:
            mismatches.append((repr(value), mine, jvm[0]))
    assert not mismatches, mismatches[:5]
    assert rendered >= 0.8 * len(checks)
