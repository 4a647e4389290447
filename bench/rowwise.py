"""Benchmark: the row evaluator (engine.etl.rowwise) — per-record cost and compile cost.

    .venv/bin/python bench/rowwise.py [--records 2000] [--rules 20] [--spark]

Two configurations, compiled from Spark's analysis as a pass would (``compile_rules``):

* **wide**: ``--rules`` pass-through stateless rules (``SELECT in.key AS key, in.value AS
  value``), one per topic of Debezium Postgres change events of 60 columns (ints, longs,
  strings, doubles, decimals, booleans, timestamps as longs, a ``source`` block of 14
  fields, ~10% NULLs), as issue 41's configuration;
* **invoices**: demo/invoices/etl.yaml over change events shaped as the demo's.

Per record: the typed record from its JSON text (``RowRule.record``), ``where``, and the
outputs' JSON text (``RowRule.outputs``); for the denorm, per pair: ``join-on`` and the
outputs. Compile: per rule, Spark's analysis (``analysed``, in the JVM) apart from the
evaluator's own compile of the plan JSON (``compile_select``/``compile_predicate``).
``--spark`` also times Spark evaluating the same wide rule over 20 records (the small
pass the evaluator replaces), warm.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASE_US = 1_714_557_600_000_000
_KINDS = ["integer", "long", "string", "double", "decimal(10,2)", "boolean", "string", "long"]


def _struct(fields: list[tuple[str, Any]]) -> dict[str, Any]:
    return {"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields]}


def wide_types() -> tuple[dict[str, Any], dict[str, Any]]:
    row = _struct([("id", "long")] + [(f"c{i:02d}", _KINDS[i % len(_KINDS)]) for i in range(1, 60)])
    source = _struct(
        [(n, "string") for n in ("version", "connector", "name", "snapshot", "db", "sequence", "schema", "table")]
        + [(n, "long") for n in ("ts_ms", "ts_us", "ts_ns", "txId", "lsn", "xmin")]
    )
    value = _struct([("before", row), ("after", row), ("source", source), ("op", "string"), ("ts_ms", "long")])
    return _struct([("id", "long")]), value


def _value(t: Any, rnd: random.Random) -> Any:
    if rnd.random() < 0.1:
        return None
    if isinstance(t, dict):
        return {f["name"]: _value(f["type"], rnd) for f in t["fields"]}
    if t in ("integer", "long"):
        return rnd.randint(-100_000, 10**9)
    if t == "string":
        return rnd.choice(["Alice", "Bob", "taco", "burrito", "pending", "paid", "Zoë", "ACME Inc."])
    if t == "double":
        return round(rnd.uniform(-1e4, 1e4), 2)
    if t == "boolean":
        return rnd.random() < 0.5
    return f"{rnd.randint(-10**6, 10**6) / 100:.2f}"  # decimal(10,2), as Avro decimals are written


def wide_events(count: int, rnd: random.Random) -> list[tuple[str, str]]:
    key_type, value_type = wide_types()
    events = []
    for i in range(count):
        value = _value(value_type, rnd) or {}
        value["op"] = rnd.choice("cru")
        events.append((json.dumps({"id": i}), json.dumps(value, separators=(",", ":"))))
    return events


def _spark() -> Any:
    from engine.settings.spark import SparkSettings
    from engine.spark import get_spark

    return get_spark(SparkSettings(master="local[2]"))


def compile_costs(spark: Any, config: Any, types: Any) -> list[tuple[float, float]]:
    """Per rule: (Spark analysis seconds, evaluator compile seconds)."""
    from engine.etl.rowwise import rule_set
    from engine.etl.rowwise.analysed import analysed
    from engine.etl.rowwise.rule_predicate import compile_predicate
    from engine.etl.rowwise.rule_select import compile_select

    spent: list[tuple[float, float]] = []
    real_analysed, real_select, real_predicate = analysed, compile_select, compile_predicate
    clock = {"spark": 0.0, "mine": 0.0}

    def timed(fn: Any, bucket: str) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                clock[bucket] += time.perf_counter() - start

        return run

    rule_set.analysed = timed(real_analysed, "spark")  # type: ignore[attr-defined]
    rule_set.compile_select = timed(real_select, "mine")  # type: ignore[attr-defined]
    rule_set.compile_predicate = timed(real_predicate, "mine")  # type: ignore[attr-defined]
    try:
        for index in range(len(config.transforms)):
            clock["spark"] = clock["mine"] = 0.0
            start = time.perf_counter()
            single = config.model_copy(update={"transforms": [config.transforms[index]]})
            rule_set.compile_rules(single, spark, types)
            total = time.perf_counter() - start
            spent.append((total - clock["mine"], clock["mine"]))
    finally:
        rule_set.analysed = real_analysed  # type: ignore[attr-defined]
        rule_set.compile_select = real_select  # type: ignore[attr-defined]
        rule_set.compile_predicate = real_predicate  # type: ignore[attr-defined]
    return spent


def per_record(rule: Any, topic: str, events: list[tuple[str, str]]) -> tuple[float, int]:
    """Seconds per record of a stateless rule (parse, where, outputs), and refusals."""
    from engine.etl.rowwise.unsupported import Unsupported

    refused = 0
    start = time.perf_counter()
    for i, (key, value) in enumerate(events):
        try:
            record = rule.record(i, (topic, 0, i, BASE_US + i), key, value)
            if rule.matches(record):
                rule.outputs(record)
        except Unsupported:
            refused += 1
    return (time.perf_counter() - start) / len(events), refused


def bench_wide(spark: Any, records: int, rules: int, with_spark: bool) -> dict[str, Any]:
    from pyspark.sql import types as T

    from engine.etl.config_file import parse_config
    from engine.etl.rowwise.rule_set import RowRule, compile_rules

    key_type, value_type = wide_types()
    topics = [f"dbserver1.public.t{i}" for i in range(rules)]
    config = parse_config(
        "name: wide\ninputs:\n" + "".join(f"  - {{topic: {t}, pool: Raw}}\n" for t in topics)
        + "outputs:\n  - {topic: Out, pool: Staging}\ntransforms:\n"
        + "".join(f"  - {{type: stateless, in: {t}, out: Out, sql: 'SELECT in.key AS key, in.value AS value'}}\n" for t in topics)
    )
    types = {t: (T.StructType.fromJson(key_type), T.StructType.fromJson(value_type)) for t in topics}
    start = time.perf_counter()
    compiled = compile_rules(config, spark, types)
    all_rules = time.perf_counter() - start
    costs = compile_costs(spark, config, types)
    rule = compiled[0]
    assert isinstance(rule, RowRule), rule
    json_ms = _plan_json_ms(spark, config, types)
    events = wide_events(records, random.Random(1))
    per, refused = per_record(rule, topics[0], events)
    result = {
        "rules": rules,
        "compile_all_s": round(all_rules, 3),
        "spark_analysis_ms_per_rule": round(statistics.median(c[0] for c in costs) * 1000, 1),
        "evaluator_compile_ms_per_rule": round(statistics.median(c[1] for c in costs) * 1000, 2),
        "plan_json_ms_per_rule": json_ms,
        "per_record_ms": round(per * 1000, 3),
        "refused": refused,
        "text_bytes": round(statistics.mean(len(v) for _, v in events)),
    }
    if with_spark:
        result["spark_small_pass_s"] = round(_spark_small(spark, value_type, events[:20]), 3)
    return result


def _plan_json_ms(spark: Any, config: Any, types: Any) -> float:
    """What taking the analysed plan, schema and settings from a frame the check has
    already analysed costs (``analysed``): the median of 5, in milliseconds."""
    from pyspark.sql import functions as F

    from engine.etl.check import view_with_order
    from engine.etl.plan_context import ORDER_COLUMNS
    from engine.etl.rowwise.analysed import analysed
    from engine.etl.sql import wrap_select
    from engine.etl.typed_records import typed_record_schema

    rule = config.transforms[0]
    empty = spark.createDataFrame([], typed_record_schema(types[rule.in_]))
    view_with_order(empty.select(F.struct("*").alias("in")), ["in"]).createOrReplaceTempView("bench_rowwise_v")
    frame = spark.sql(wrap_select(rule.sql, "bench_rowwise_v", ORDER_COLUMNS))
    _ = frame.schema  # analysed once, as the check does
    times = []
    for _ in range(5):
        start = time.perf_counter()
        analysed(frame)
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1000, 2)


def _spark_small(spark: Any, value_type: Any, events: list[tuple[str, str]]) -> float:
    """Spark evaluating the pass-through rule over 20 records (from_json, SELECT,
    to_json), warm: the median of 5 runs of a fresh statement each."""
    import pyarrow as pa

    from engine.etl.typed_records import json_text_sql, parse_json_sql

    frame = spark.createDataFrame(pa.table({"k": [k for k, _ in events], "v": [v for _, v in events]}))
    frame.createOrReplaceTempView("bench_rowwise_in")
    times = []
    for run in range(6):
        start = time.perf_counter()
        spark.sql(
            f"SELECT {json_text_sql('value', spark_type(value_type))} AS v FROM (SELECT "
            f"{parse_json_sql('v', spark_type(value_type))} AS value, {run} AS r FROM bench_rowwise_in)"
        ).toArrow()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def spark_type(data_type: Any) -> Any:
    """A Spark type from its JSON."""
    from pyspark.sql import types as T

    return T._parse_datatype_json_value(data_type)


def bench_invoices(spark: Any, records: int) -> dict[str, Any]:
    from engine.etl.config_file import load_config
    from engine.etl.rowwise.rule_set import RowRule, compile_rules
    from engine.etl.rowwise.unsupported import Unsupported
    from engine.kafka.typemap.to_spark import json_value_to_spark

    demo = ROOT / "demo" / "invoices"
    events = [json.loads(line) for n in (1, 2, 3, 4) for line in (demo / f"batch{n}.jsonl").read_text().splitlines() if line.strip()]
    config = load_config(demo / "etl.yaml")
    types = {}
    for topic in config.input_topics:
        of_topic = [e for e in events if e["topic"] == topic]
        types[topic] = (json_value_to_spark([e["key"] for e in of_topic]),
                        json_value_to_spark([e["value"] for e in of_topic if e["value"]]))  # fmt: skip
    start = time.perf_counter()
    compiled = compile_rules(config, spark, types)
    all_rules = time.perf_counter() - start
    costs = compile_costs(spark, config, types)
    assert all(isinstance(rule, RowRule) for rule in compiled), compiled
    rnd = random.Random(2)
    made = []
    for _ in range(records):
        event = json.loads(json.dumps(rnd.choice([e for e in events if e["value"]])))
        event["value"]["op"] = rnd.choice("cru")
        made.append(event)
    per_rule = {}
    for rule in compiled[1:]:
        assert isinstance(rule, RowRule)
        topic = rule.rule.topics[0]
        mine = [(json.dumps(e["key"]), json.dumps(e["value"])) for e in made if e["topic"] == topic]
        per_rule[rule.rule.name or str(rule.index)] = round(per_record(rule, topic, mine)[0] * 1000, 3)
    denorm = compiled[0]
    assert isinstance(denorm, RowRule)
    lefts = [denorm.record(i, ("Invoices", 0, i, BASE_US), json.dumps(e["key"]), json.dumps(e["value"]))
             for i, e in enumerate(made) if e["topic"] == "Invoices"][:200]  # fmt: skip
    rights = [denorm.record(i, ("InvoiceStatus", 0, i, BASE_US), json.dumps(e["key"]), json.dumps(e["value"]))
              for i, e in enumerate(made) if e["topic"] == "InvoiceStatus"][:200]  # fmt: skip
    start, pairs = time.perf_counter(), 0
    for left in lefts[:50]:
        for right in rights[:50]:
            pairs += 1
            try:
                if denorm.joins(left, right):
                    denorm.outputs(left, right)
            except Unsupported:
                pass
    per_rule["new-invoice (per pair)"] = round((time.perf_counter() - start) / pairs * 1000, 4)
    start = time.perf_counter()
    for i, e in enumerate(made[:1000]):
        denorm.record(i, (e["topic"], 0, i, BASE_US), json.dumps(e["key"]), json.dumps(e["value"]))
    per_rule["record (parse, per record)"] = round((time.perf_counter() - start) / min(1000, len(made)) * 1000, 4)
    return {
        "compile_all_s": round(all_rules, 3),
        "spark_analysis_ms_per_rule": [round(c[0] * 1000, 1) for c in costs],
        "evaluator_compile_ms_per_rule": [round(c[1] * 1000, 2) for c in costs],
        "per_record_ms": per_rule,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--rules", type=int, default=20, help="pass-through rules in the wide configuration")
    parser.add_argument("--spark", action="store_true", help="also time Spark over the same 20 records")
    args = parser.parse_args()
    spark = _spark()
    print(json.dumps({"wide": bench_wide(spark, args.records, args.rules, args.spark)}), flush=True)
    print(json.dumps({"invoices": bench_invoices(spark, args.records)}), flush=True)


if __name__ == "__main__":
    main()
