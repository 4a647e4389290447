"""Every rule of the repository's ETL configurations, run both ways on the same inputs —
in Spark over the view a pass builds, and by the row evaluator (engine.etl.rowwise) —
compared row by row: keys and values as JSON text byte for byte, ``where`` and
``join-on`` as True/False/NULL. A rule is either evaluated exactly or refused with a
reason; a row Spark raises an error for must be refused (tests/rowwise_harness.py).

Configurations: demo/invoices/etl.yaml; the tests' own (staged Avro, expiry, security,
Debezium transactions, the configuration model's denorm); the pass-through rule over
wide Debezium rows of 60 columns with a full Postgres ``source``; and one written here
that uses every expression family the evaluator implements, on generated values with
NULLs, nested NULL structs, unicode, extreme numbers, doubles around the notation
bounds, negative zero, decimals of several scales and text to cast.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from engine.etl.config_file import parse_config
from engine.etl.rowwise.rule_set import Refused, RowRule
from tests.rowwise_corpus import (
    NASTY_STRINGS,
    ValueMaker,
    debezium_key_type,
    debezium_value_type,
    dumps,
    struct_type,
    wide_row_type,
)
from tests.rowwise_harness import Input, RuleReport, compare_configuration

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow(seconds=25)]

ROOT = Path(__file__).resolve().parents[2]
BASE_US = 1_714_557_600_000_000  # 2024-05-01T10:00:00Z


def _types(spec: dict[str, tuple[Any, Any]]) -> dict[str, tuple[Any, Any]]:
    """Spark types of (key, value) per topic, given as Spark's JSON."""
    from pyspark.sql import types as T

    def load(t: Any) -> Any:
        return T._parse_datatype_json_value(t)

    return {topic: (load(k), load(v)) for topic, (k, v) in spec.items()}


def _inputs(
    spec: dict[str, tuple[Any, Any]], per_topic: int, seed: int, shape: Any = None
) -> list[Input]:
    """Generated records of each topic (``shape(topic, value)`` adjusts a value)."""
    rnd, maker = random.Random(seed), ValueMaker(seed + 1)
    inputs: list[Input] = []
    for topic, (key_type, value_type) in spec.items():
        for _ in range(per_topic):
            seqno = len(inputs) + 1
            value = maker.value(value_type)
            if shape is not None and value is not None:
                shape(topic, value, rnd)
            inputs.append(
                Input(seqno, topic, seqno, BASE_US + seqno * 1000 + rnd.randint(0, 999),
                      dumps(maker.value(key_type), rnd), dumps(value, rnd))
            )  # fmt: skip
    return inputs


def _assert_exact(reports: list[RuleReport]) -> None:
    mismatches = [m for r in reports for m in r.mismatches]
    assert not mismatches, "\n".join(mismatches[:10])
    for report in reports:
        if report.supported:
            assert report.compared > 0, f"rule {report.index + 1}: nothing compared ({dict(report.refused)})"


def _support(reports: list[RuleReport]) -> list[str]:
    return [
        "supported" if isinstance(r.compiled, RowRule) else f"refused: {r.compiled.reason}"
        for r in reports
    ]


# ------------------------------------------------------------ the repository's configurations


def _infer(events: list[dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    """Each topic's types as from-kafka records them for JSON events (as Spark JSON)."""
    from engine.kafka.typemap.to_spark import json_value_to_spark

    found = {}
    for topic in dict.fromkeys(e["topic"] for e in events):
        of_topic = [e for e in events if e["topic"] == topic]
        key = json_value_to_spark([e["key"] for e in of_topic])
        value = json_value_to_spark([e["value"] for e in of_topic if e["value"] is not None])
        found[topic] = (json.loads(key.json()), json.loads(value.json()))
    return found


def _event_inputs(events: list[dict[str, Any]], start: int = 1) -> list[Input]:
    return [
        Input(start + i, e["topic"], start + i, BASE_US + (start + i) * 1000,
              json.dumps(e["key"]), None if e["value"] is None else json.dumps(e["value"]))
        for i, e in enumerate(events)
    ]  # fmt: skip


def test_the_invoice_configuration_is_evaluated_exactly(spark) -> None:
    demo = ROOT / "demo" / "invoices"
    events = [
        json.loads(line)
        for n in (1, 2, 3, 4)
        for line in (demo / f"batch{n}.jsonl").read_text().splitlines()
        if line.strip()
    ]
    spec = _infer(events)
    inputs = _event_inputs(events)
    inputs += [
        Input(len(inputs) + 1 + i.seqno, i.topic, i.offset + 1000, i.timestamp, i.key, i.value)
        for i in _inputs(spec, 60, seed=11)
    ]
    config = parse_config((demo / "etl.yaml").read_text())
    reports = compare_configuration(spark, config, _types(spec), inputs)
    assert _support(reports) == ["supported"] * 4
    _assert_exact(reports)


def test_the_tests_configurations_are_evaluated_exactly(spark) -> None:
    from tests.integration.test_etl_debezium_txn import CONFIG as DEBEZIUM_TXN
    from tests.integration.test_etl_expiry import CONFIG as EXPIRY
    from tests.integration.test_security import CONFIG as SECURITY
    from tests.integration.test_staged_avro import ETL_YAML as STAGED_AVRO
    from tests.unit.test_etl_config import BASE, DENORM

    long_key = struct_type([("id", "long")])
    cases: list[tuple[str, dict[str, tuple[Any, Any]], list[str]]] = [
        (STAGED_AVRO, {"Orders": (long_key, struct_type(
            [("id", "long"), ("item", "string"), ("qty", "long"), ("price", "double")]))},
         ["supported"]),
        (EXPIRY, {
            "orders": (struct_type([("k", "string")]), struct_type([("txn", "string"), ("n", "long"), ("done", "boolean")])),
            "items": (struct_type([("k", "string")]), struct_type([("txn", "string"), ("item", "string"), ("done", "boolean")])),
            "customers": (long_key, struct_type([("id", "long"), ("name", "string")])),
            "addresses": (struct_type([("k", "string")]), struct_type([("customer", "long"), ("city", "string")])),
        }, ["refused: transaction rules are evaluated by Spark", "supported"]),
        (SECURITY.format(name="s", src="Src", out="Out"),
         {"Src": ("long", struct_type([("id", "long"), ("msg", "string")]))}, ["supported"]),
        (DEBEZIUM_TXN, {}, ["refused: transaction rules are evaluated by Spark"]),
        (BASE + DENORM, {
            "Invoices": (struct_type([("ID", "long")]), struct_type([("op", "string"), ("after", struct_type([("ID", "long"), ("customer", "string")]))])),
            "InvoiceStatus": (struct_type([("ID", "long")]), struct_type([("op", "string"), ("after", struct_type([("InvoiceID", "long"), ("status", "string")]))])),
        }, ["supported"]),
    ]  # fmt: skip
    for text, spec, expected in cases:
        config = parse_config(text)
        if not spec:  # a transaction rule over topics not typed: refused before analysis
            spec = {t: (struct_type([("k", "string")]), struct_type([("id", "string")])) for t in config.input_topics}

        def ids(topic: str, value: dict[str, Any], rnd: random.Random) -> None:
            for name in ("id", "customer", "ID", "InvoiceID"):  # make join partners meet
                if name in value:
                    value[name] = rnd.randint(0, 6)
            if "after" in value and value["after"] is not None:
                ids(topic, value["after"], rnd)
            if "msg" in value and rnd.random() < 0.5:
                value["msg"] = f"message {rnd.randint(0, 99)}"  # ASCII, which upper() takes

        reports = compare_configuration(spark, config, _types(spec), _inputs(spec, 40, seed=21, shape=ids))
        assert _support(reports) == expected, config.name
        _assert_exact(reports)


def test_a_pass_through_rule_over_wide_debezium_rows(spark) -> None:
    spec = {
        f"dbserver1.public.t{i}": (debezium_key_type(), debezium_value_type(wide_row_type(60)))
        for i in range(2)
    }
    topics = list(spec)
    config = parse_config(
        "name: wide\ninputs:\n" + "".join(f"  - {{topic: {t}, pool: Raw}}\n" for t in topics)
        + "outputs:\n  - {topic: Out, pool: Staging}\ntransforms:\n"
        + f"  - {{type: stateless, in: {topics[0]}, out: Out, sql: 'SELECT in.key AS key, in.value AS value'}}\n"
        + f"  - {{type: stateless, in: {topics[1]}, out: Out, where: \"value.op IN ('c', 'r', 'u')\", "
        "sql: 'SELECT in.key AS key, in.value.after AS value'}\n"
    )

    def debezium(topic: str, value: dict[str, Any], rnd: random.Random) -> None:
        value["op"] = rnd.choice(["c", "r", "u", "d", None])

    reports = compare_configuration(spark, config, _types(spec), _inputs(spec, 60, seed=31, shape=debezium))
    assert _support(reports) == ["supported", "supported"]
    _assert_exact(reports)
    assert all(r.compared >= 20 for r in reports), [(r.compared, dict(r.refused)) for r in reports]


# ------------------------------------------------------------------- every expression family

RICH = struct_type(
    [
        ("i", "integer"), ("l", "long"), ("s", "short"), ("b", "byte"), ("d", "double"),
        ("f", "float"), ("dec", "decimal(10,2)"), ("dec2", "decimal(20,6)"),
        ("dec3", "decimal(38,18)"), ("str", "string"), ("str2", "string"), ("flag", "boolean"),
        ("ts_ms", "long"), ("arr", {"type": "array", "elementType": "string", "containsNull": True}),
        ("m", {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}),
        ("nested", struct_type([("a", "integer"), ("b", "string"), ("c", struct_type([("x", "double")]))])),
        ("num_text", "string"), ("date_text", "string"), ("ts_text", "string"), ("bool_text", "string"),
    ]
)  # fmt: skip

#: Rules over RICH. Failures Spark would raise are made try_* where the rule also covers
#: other expressions (so Spark gives NULL for the row where the evaluator refuses it);
#: the last rule keeps ANSI errors, to check that each such row is refused.
FUNCTIONS = """
name: functions
inputs: [{topic: Rich, pool: Raw}, {topic: Other, pool: Raw}]
outputs: [{topic: Out, pool: Staging}]
transforms:
  - type: stateless
    name: arithmetic
    in: Rich
    out: Out
    sql: |
      SELECT in.key AS key, named_struct(
        'a1', try_add(in.value.i, 1), 'a2', try_subtract(in.value.l, in.value.i), 'a3', try_multiply(in.value.i, 2),
        'a5', in.value.d / 3, 'a6', in.value.d * 1.5, 'a7', in.value.f + in.value.f, 'a8', in.value.f * 2,
        'a9', try_mod(in.value.i, 7), 'a10', in.value.l div 3, 'a11', try_subtract(0, in.value.i),
        'a13', in.value.dec + in.value.dec2, 'a14', in.value.dec * in.value.dec, 'a15', in.value.dec - 1,
        'a16', in.value.dec * 2.5, 'a17', try_add(in.value.dec3, in.value.dec3), 'a18', try_multiply(in.value.dec3, in.value.dec),
        'a19', in.value.i / 2, 'a21', in.value.s + in.value.b, 'a22', -in.value.d, 'a23', abs(in.value.dec2),
        'a24', in.value.d - in.value.f, 'a26', -in.value.dec, 'a27', +in.value.d, 'a28', try_divide(in.value.d, in.value.i)) AS value
  - type: stateless
    name: casts
    in: Rich
    out: Out
    sql: |
      SELECT in.key AS key, named_struct(
        'c1', CAST(in.value.i AS STRING), 'c2', CAST(in.value.d AS STRING), 'c3', CAST(in.value.f AS STRING),
        'c4', CAST(in.value.dec AS STRING), 'c5', CAST(in.value.dec AS DOUBLE), 'c6', try_cast(in.value.d AS DECIMAL(20,4)),
        'c7', try_cast(in.value.d AS INT), 'c8', try_cast(in.value.d AS LONG), 'c9', CAST(in.value.dec AS INT),
        'c13', CAST(in.value.flag AS INT), 'c15', try_cast(in.value.l AS INT), 'c16', try_cast(in.value.s * 100 AS SHORT),
        'c19', CAST(timestamp_millis(in.value.ts_ms) AS STRING), 'c20', CAST(timestamp_millis(in.value.ts_ms) AS DATE),
        'c21', CAST(in.value.f AS DOUBLE), 'c22', CAST(in.value.d AS FLOAT), 'c23', try_cast(in.value.s AS DECIMAL(5,1)),
        'c24', CAST(in.value.l AS DOUBLE), 'c25', try_cast(in.value.dec AS DECIMAL(5,1)), 'c26', CAST(in.value.flag AS STRING),
        'c27', try_cast(in.value.f AS DECIMAL(20,10)), 'c28', CAST(in.value.dec3 AS STRING), 'c31', CAST(in.value.s AS FLOAT),
        'c32', CAST(in.value.dec2 AS DECIMAL(38,2)), 'c33', CAST(timestamp_millis(in.value.ts_ms) AS LONG),
        'c35', CAST(in.value.str AS BINARY), 'c36', CAST(in.value.d AS BOOLEAN), 'c37', CAST(in.value.b AS DECIMAL(3,0)),
        'c38', CAST(in.value.nested AS STRUCT<p: BIGINT, q: STRING, r: STRUCT<y: STRING>>),
        'c39', CAST(in.value.arr AS ARRAY<STRING>), 'c40', CAST(in.value.m AS MAP<STRING, DOUBLE>)) AS value
  - type: stateless
    name: text-casts
    in: Rich
    out: Out
    sql: |
      SELECT in.key AS key, named_struct(
        't1', try_cast(in.value.num_text AS INT), 't2', try_cast(in.value.num_text AS DOUBLE),
        't3', try_cast(in.value.num_text AS DECIMAL(10,3)), 't4', try_cast(in.value.num_text AS LONG),
        't5', try_cast(in.value.num_text AS FLOAT), 't6', try_cast(in.value.bool_text AS BOOLEAN),
        't7', try_cast(in.value.date_text AS DATE), 't8', try_cast(in.value.ts_text AS TIMESTAMP),
        't9', try_cast(in.value.date_text AS DATE) < DATE'2024-01-01') AS value
  - type: stateless
    name: strings
    in: Rich
    out: Out
    sql: |
      SELECT in.key AS key, named_struct(
        's1', concat(in.value.str, '-', in.value.str2), 's2', concat_ws('|', in.value.str, in.value.str2, NULL, in.value.arr),
        's3', upper(in.value.num_text), 's4', lower(in.value.bool_text), 's5', length(in.value.str), 's6', substring(in.value.str, 2, 3),
        's7', substr(in.value.str, -2), 's8', left(in.value.str, 2), 's9', right(in.value.str, 2), 's10', trim(in.value.str),
        's11', ltrim(in.value.str), 's12', rtrim(in.value.str), 's13', startswith(in.value.str, 'a'),
        's14', contains(in.value.str, 'é'), 's15', replace(in.value.str, 'a', 'b'), 's16', in.value.str || in.value.str2,
        's17', endswith(in.value.str2, 'z'), 's18', substring(in.value.str, 0), 's19', char_length(in.value.str2),
        's20', in.value.str < in.value.str2, 's21', replace(in.value.str, ''), 's22', concat(in.value.arr, in.value.arr),
        's23', substring(in.value.str, -300, 2), 's24', right(in.value.str, 0), 's25', left(in.value.str, -1),
        's26', length(CAST(in.value.str AS BINARY))) AS value
  - type: stateless
    name: conditionals
    in: Rich
    out: Out
    where: value.i IS NULL OR value.i > -1000 OR value.str = 'plain'
    sql: |
      SELECT in.key AS key, named_struct(
        'k1', coalesce(in.value.str, in.value.str2, 'none'), 'k2', nvl(in.value.i, -1), 'k3', nullif(in.value.i, 0),
        'k4', if(in.value.flag, in.value.str, in.value.str2), 'k5', CASE WHEN in.value.i > 0 THEN 'pos' WHEN in.value.i < 0 THEN 'neg' ELSE 'zero' END,
        'k6', greatest(in.value.i, 0, in.value.l), 'k7', least(in.value.d, 0.5D), 'k8', nvl2(in.value.str, 1, 2),
        'k9', in.value.i IS NULL, 'k10', in.value.str IS NOT NULL,
        'k11', ifnull(in.value.nested, named_struct('a', 1, 'b', 'x', 'c', named_struct('x', 0.5D))),
        'k12', in.value.i > 0 AND in.value.flag, 'k13', in.value.i < 0 OR in.value.flag, 'k14', NOT in.value.flag,
        'k15', in.value.str = in.value.str2, 'k16', in.value.str <=> in.value.str2, 'k17', in.value.i IN (1, 2, 3, -1),
        'k18', in.value.str IN ('plain', NULL), 'k19', in.value.i BETWEEN 1 AND 100, 'k20', in.value.d >= 0.5,
        'k21', in.value.dec > 1, 'k22', in.value.nested = named_struct('a', in.value.i, 'b', in.value.str, 'c', named_struct('x', in.value.d)),
        'k23', CASE in.value.str WHEN 'plain' THEN 1 WHEN 'null' THEN 2 END, 'k24', greatest(in.value.str, in.value.str2),
        'k25', in.value.flag AND NULL, 'k26', in.value.flag OR NULL, 'k27', coalesce(in.value.dec, in.value.dec2),
        'k28', in.value.i IN (in.value.s, in.value.b, NULL), 'k29', in.value.d <=> -0.0D, 'k30', in.value.d = 0.0D) AS value
  - type: stateless
    name: containers
    in: Rich
    out: Out
    sql: |
      SELECT named_struct('id', in.key.id, 'topic', in.kafka.topic, 'ts', in.kafka.timestamp, 'seq', in.seqno,
                          'p', in.kafka.partition, 'o', in.kafka.offset) AS key, named_struct(
        'x1', array(in.value.i, in.value.l), 'x2', try_element_at(in.value.arr, 1), 'x3', try_element_at(in.value.arr, -1),
        'x4', size(in.value.arr), 'x5', size(in.value.m), 'x6', array_contains(in.value.arr, 'plain'),
        'x7', map('a', in.value.i, 'b', in.value.l), 'x8', map_keys(in.value.m), 'x9', map_values(in.value.m),
        'x10', in.value.nested.c.x, 'x11', named_struct('x', in.value.nested.a), 'x12', try_element_at(in.value.arr, 3),
        'x13', in.value.arr, 'x14', in.value.m, 'x15', in.value.nested, 'x16', array(in.value.nested, in.value.nested),
        'x17', timestamp_millis(in.value.ts_ms), 'x18', unix_millis(timestamp_millis(in.value.ts_ms)),
        'x19', timestamp_seconds(in.value.s), 'x21', array(in.value.dec, in.value.dec2),
        'x22', in.value.m['plain0'], 'x23', element_at(in.value.m, 'x'), 'x24', unix_seconds(timestamp_millis(in.value.ts_ms)),
        'x25', timestamp_micros(in.value.ts_ms), 'x26', CAST(in.value.l AS TIMESTAMP)) AS value
  - type: stateless
    name: filtered
    in: Rich
    out: Out
    sql: SELECT in.value.str AS key, in.value.d AS value WHERE in.value.i > 0
  - type: stateless
    name: scalars
    in: Other
    out: Out
    sql: SELECT in.key AS key, in.value AS value
  - type: denorm
    name: pairs
    where: seqno % 3 <> 0
    left: Rich
    right: Other
    join-on: left.value.i % 5 = right.key % 5
    out: Out
    sql: |
      SELECT left.key AS key,
             named_struct('l', left.value.str, 'r', right.value, 'seqs', array(left.seqno, right.seqno),
                          'newest', greatest(left.kafka.timestamp, right.kafka.timestamp)) AS value
  - type: stateless
    name: ansi-errors
    in: Rich
    out: Out
    sql: |
      SELECT in.value.arr[0] AS key,
             named_struct('n', CAST(in.value.num_text AS INT), 'p', in.value.s * 10000000,
                          'q', 100 div in.value.b) AS value
      WHERE in.seqno % 8 = 0
"""

NUMBERS = ["123", "-7", "+12", "007", "0", "42", "1000", "-9999", "-0"]
BAD_NUMBERS = ["1.5e3", "abc", " 12 ", "1.0", "99999999999", ".5", "5.", "1e400", "0.1", "12.3456",
               "2147483647", "-2147483648"]  # fmt: skip
DATES = ["2024-05-01", "1999-12-31", "2024-02-29", "0001-01-01", "9999-12-31"]
BAD_DATES = ["2024-13-01", "2024-5-1", "2023-02-29", "x"]
TIMESTAMPS = ["2024-05-01 10:00:00", "2024-05-01T10:00:00.123456", "2024-05-01 10:00:00.5Z", "1970-01-01 00:00:00"]
BOOLEANS = ["true", "FALSE", "yes", "n", "1", "0", "T", " t ", "maybe"]


def _rich(topic: str, value: dict[str, Any], rnd: random.Random) -> None:
    if topic != "Rich":
        return
    value["num_text"] = rnd.choice(NUMBERS if rnd.random() < 0.9 else BAD_NUMBERS)
    value["date_text"] = rnd.choice(DATES if rnd.random() < 0.9 else BAD_DATES)
    value["ts_text"] = rnd.choice(TIMESTAMPS if rnd.random() < 0.9 else BAD_DATES)
    value["bool_text"] = rnd.choice(BOOLEANS)
    for name, limit in (("i", 10**6), ("l", 10**9), ("s", 300), ("b", 100)):
        if value.get(name) is not None and rnd.random() < 0.95:
            value[name] = rnd.randint(-limit, limit)
    if value.get("d") is not None and rnd.random() < 0.7:
        value["d"] = round(rnd.uniform(-1e5, 1e5), rnd.randint(0, 6))
    if value.get("dec") is not None and rnd.random() < 0.7:
        value["dec"] = f"{rnd.randint(-99999, 99999) / 100:.2f}"
    if value.get("f") is not None and rnd.random() < 0.7:
        value["f"] = rnd.choice([0.5, 1.1, -2.25, 100.0, 3.14, 0.001, 1e-5, 12345.6])
    if value.get("ts_ms") is not None:
        value["ts_ms"] = rnd.choice([1714557600123, 0, -1, 1714557600000 + rnd.randint(0, 10**9)])
    if value.get("arr") is not None and rnd.random() < 0.6:
        value["arr"] = [rnd.choice(NASTY_STRINGS[:8]) for _ in range(rnd.randint(1, 3))]
    if value.get("m") is not None and rnd.random() < 0.5:
        value["m"] = {"plain0": rnd.randint(-5, 5), "x": None}


def test_every_expression_family_is_evaluated_exactly(spark) -> None:
    spec = {"Rich": (struct_type([("id", "long")]), RICH), "Other": ("long", "string")}
    inputs = _inputs({"Rich": spec["Rich"]}, 160, seed=41, shape=_rich)
    rnd = random.Random(42)
    for _ in range(24):
        seqno = len(inputs) + 1
        inputs.append(Input(seqno, "Other", seqno, BASE_US + seqno * 1000, str(rnd.randint(-50, 50)),
                            rnd.choice([None, '"text"', '"é\\n"', "12", '{"a": 1.50}', "true", "[1, 2.0e1]"])))  # fmt: skip
    config = parse_config(FUNCTIONS)
    reports = compare_configuration(spark, config, _types(spec), inputs)
    refused = [(config.transforms[r.index].name, r.compiled.reason) for r in reports if isinstance(r.compiled, Refused)]
    assert not refused
    _assert_exact(reports)
    for report in reports:  # most rows are compared: refusals are the exception
        total = report.compared + sum(report.refused.values())
        assert report.compared >= total * 0.6, (
            config.transforms[report.index].name, report.compared, report.refused.most_common(8)
        )
    ansi = reports[-1]
    assert ansi.spark_failed > 0  # rows Spark raised an error for, each refused
