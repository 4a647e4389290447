"""Runs a configuration's rules both ways on the same inputs — in Spark, over the view a
pass builds, and in the row evaluator (engine.etl.rowwise) — and compares the results
row by row (no tests here).

Spark's side parses the same JSON texts with the same SQL the pass uses
(:func:`engine.etl.typed_records.parse_json_sql`), evaluates each rule's ``where`` on every
record of its topics, its ``join-on`` on every (left, right) pair, and its SELECT on
every record (stateless) or pair (denorm) — not only the matching ones, for coverage —
and writes keys and values with :func:`engine.etl.typed_records.json_text_sql`. The
evaluator's side does the same from the texts. A record the evaluator refuses
(:class:`Unsupported`) is counted, never compared.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from engine.etl.config import DenormRule, EtlConfig, StatelessRule
from engine.etl.rowwise.rule_set import Record, Refused, RowRule, compile_rules, first_rule
from engine.etl.rowwise.unsupported import Unsupported
from engine.etl.sql import quote, wrap_select
from engine.etl.typed_records import TopicTypes, json_text_sql, parse_json_sql


@dataclass(frozen=True)
class Input:
    """An input record as a raw pool holds it (key and value as JSON text)."""

    seqno: int
    topic: str
    offset: int
    timestamp: int  # microseconds since the epoch
    key: str | None
    value: str | None
    partition: int = 0


@dataclass
class RuleReport:
    """What comparing one rule found."""

    index: int
    compiled: RowRule | Refused
    compared: int = 0
    #: Rows Spark raised an error for (and the evaluator refused, as it must).
    spark_failed: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    mismatches: list[str] = field(default_factory=list)

    @property
    def supported(self) -> bool:
        return isinstance(self.compiled, RowRule)


def compare_configuration(
    spark: Any,
    config: EtlConfig,
    types: Mapping[str, TopicTypes],
    inputs: Sequence[Input],
    *,
    pairs_per_rule: int = 400,
) -> list[RuleReport]:
    """Every rule of ``config`` compiled and, where supported, compared on ``inputs``."""
    reports = [RuleReport(i, c) for i, c in enumerate(compile_rules(config, spark, types))]
    frame = _inputs_frame(spark, inputs)
    token = f"rw{abs(hash((config.name, len(inputs)))) % 10**8}"
    frame.createOrReplaceTempView(f"{token}_inputs")
    views = [f"{token}_inputs"]
    try:
        for topic in config.input_topics:
            if topic not in types:
                continue
            key_type, value_type = types[topic]
            name = f"{token}_typed_{config.input_topics.index(topic)}"
            spark.sql(
                "SELECT seqno, named_struct('topic', topic, 'partition', partition, 'offset', "
                "`offset`, 'timestamp', ts) AS kafka, "
                f"{parse_json_sql('key', key_type)} AS key, "
                f"{parse_json_sql('value', value_type)} AS value "
                f"FROM {token}_inputs WHERE topic = {quote(topic)}"
            ).createOrReplaceTempView(name)
            views.append(name)
        for report in reports:
            if isinstance(report.compiled, RowRule):
                _compare_rule(spark, config, token, report, report.compiled, inputs, pairs_per_rule, views)
        _compare_assignment(spark, config, types, token, reports, inputs)
    finally:
        for name in views:
            spark.catalog.dropTempView(name)
    return reports


def _inputs_frame(spark: Any, inputs: Sequence[Input]) -> Any:
    import pyarrow as pa

    table = pa.table(
        {
            "seqno": pa.array([i.seqno for i in inputs], pa.int64()),
            "topic": pa.array([i.topic for i in inputs], pa.string()),
            "partition": pa.array([i.partition for i in inputs], pa.int32()),
            "offset": pa.array([i.offset for i in inputs], pa.int64()),
            "ts": pa.array(
                [datetime.fromtimestamp(i.timestamp / 1e6, tz=UTC) for i in inputs],
                pa.timestamp("us", tz="UTC"),
            ),
            "key": pa.array([i.key for i in inputs], pa.string()),
            "value": pa.array([i.value for i in inputs], pa.string()),
        }
    )
    return spark.createDataFrame(table)


def _typed(config: EtlConfig, token: str, topic: str) -> str:
    return f"{token}_typed_{config.input_topics.index(topic)}"


def _records(rule: RowRule, report: RuleReport, inputs: Sequence[Input], topic: str) -> dict[int, Record]:
    records = {}
    for item in inputs:
        if item.topic != topic:
            continue
        try:
            records[item.seqno] = rule.record(
                item.seqno, (item.topic, item.partition, item.offset, item.timestamp), item.key, item.value
            )
        except Unsupported as exc:
            report.refused[f"input: {exc.reason}"] += 1
            if exc.reason.startswith("unforeseen"):
                report.mismatches.append(f"rule {report.index + 1} seqno {item.seqno}: {exc.reason}")
    return records


def _compare_rule(
    spark: Any,
    config: EtlConfig,
    token: str,
    report: RuleReport,
    rule: RowRule,
    inputs: Sequence[Input],
    pairs_per_rule: int,
    views: list[str],
) -> None:
    source = rule.rule
    records = {topic: _records(rule, report, inputs, topic) for topic in source.topics}
    # where, per topic
    if source.where:
        for topic in source.topics:
            typed = _typed(config, token, topic)
            rows, failed = _collect(
                lambda low, high, typed=typed: spark.sql(
                    f"SELECT seqno, ({source.where}) AS b FROM {typed} WHERE seqno BETWEEN {low} AND {high}"
                ).collect(),
                sorted(records[topic]),
            )
            spark_values: dict[int, Any] = {row.seqno: row.b for row in rows}
            spark_values.update({seqno: SPARK_FAILED for seqno in failed})
            predicate = rule.where[topic]
            assert predicate is not None
            for seqno, record in records[topic].items():
                row = {"seqno": record[0], "kafka": record[1], "key": record[2], "value": record[3]}
                _check(report, f"where seqno {seqno}", lambda row=row, predicate=predicate: predicate.test(row), spark_values[seqno])
    view = f"{token}_view_{report.index}"
    views.append(view)
    if isinstance(source, StatelessRule):

        def stateless_view(low: int, high: int) -> str:
            return (
                "SELECT named_struct('seqno', seqno, 'kafka', kafka, 'key', key, 'value', value) AS `in`, "
                f"seqno AS __zo1, {report.index} AS __zo2, seqno AS __zo3, CAST(0 AS BIGINT) AS __zo4, "
                f"kafka.timestamp AS __zts FROM {_typed(config, token, source.in_)} "
                f"WHERE seqno BETWEEN {low} AND {high}"
            )

        expected = _spark_outputs(spark, source.sql, view, stateless_view, sorted(records[source.in_]))
        for seqno, record in records[source.in_].items():
            _check(report, f"select seqno {seqno}", lambda record=record: rule.outputs(record), expected.get((seqno, 0), []))
        return
    assert isinstance(source, DenormRule)
    left, right = _typed(config, token, source.left), _typed(config, token, source.right)
    envelope = "named_struct('seqno', {t}.seqno, 'kafka', {t}.kafka, 'key', {t}.key, 'value', {t}.value)"
    sample = max(1, _pair_count(records, source) // pairs_per_rule)

    def pairs_view(low: int, high: int) -> str:
        return (
            f"SELECT {envelope.format(t='l')} AS `left`, {envelope.format(t='r')} AS `right`, "
            f"greatest(l.seqno, r.seqno) AS __zo1, {report.index} AS __zo2, l.seqno AS __zo3, "
            f"r.seqno AS __zo4, greatest(l.kafka.timestamp, r.kafka.timestamp) AS __zts "
            f"FROM {left} l CROSS JOIN {right} r "
            f"WHERE (l.seqno * 7919 + r.seqno) % {sample} = 0 AND l.seqno BETWEEN {low} AND {high}"
        )

    lefts = sorted(records[source.left])

    def join_rows(low: int, high: int) -> list[Any]:
        spark.sql(pairs_view(low, high)).createOrReplaceTempView(view)
        return spark.sql(f"SELECT __zo3 AS l, __zo4 AS r, ({source.join_on}) AS b FROM {view}").collect()

    rows, failed = _collect(join_rows, lefts)
    joined: dict[tuple[int, int], Any] = {(row.l, row.r): row.b for row in rows}
    pairs = {
        (row.l, row.r)
        for row in spark.sql(f"SELECT __zo3 AS l, __zo4 AS r FROM ({pairs_view(lefts[0], lefts[-1])})").collect()
    } if lefts else set()
    joined.update({pair: SPARK_FAILED for pair in pairs if pair[0] in failed})
    expected = _spark_outputs(spark, source.sql, view, pairs_view, lefts, pairs)
    for (l_seqno, r_seqno), matched in joined.items():
        lrec, rrec = records[source.left].get(l_seqno), records[source.right].get(r_seqno)
        if lrec is None or rrec is None:
            continue
        row = {"left": lrec, "right": rrec}
        assert rule.join_on is not None
        join_on = rule.join_on
        _check(report, f"join-on {l_seqno},{r_seqno}", lambda row=row, join_on=join_on: join_on.test(row), matched)
        _check(
            report,
            f"select {l_seqno},{r_seqno}",
            lambda lrec=lrec, rrec=rrec: rule.outputs(lrec, rrec),
            expected.get((l_seqno, r_seqno), []),
        )


def _compare_assignment(
    spark: Any,
    config: EtlConfig,
    types: Mapping[str, TopicTypes],
    token: str,
    reports: list[RuleReport],
    inputs: Sequence[Input],
) -> None:
    """Each record's first matching rule, as the pass's own SQL assigns it
    (:func:`engine.etl.rules.assign_sql`), against :func:`first_rule`. Differences are
    reported on the first rule's report."""
    from engine.etl.rules import assign_sql

    if not any(r.supported for r in reports):
        return
    candidates = f"{token}_candidates"
    spark.sql(
        "SELECT 'Raw' AS pool, seqno, named_struct('topic', topic, 'partition', partition, "
        f"'offset', `offset`, 'timestamp', ts) AS kafka, key, value FROM {token}_inputs"
    ).createOrReplaceTempView(candidates)
    try:
        rows, failed = _collect(
            lambda low, high: spark.sql(
                f"SELECT seqno, __rule FROM ({assign_sql(config, candidates, types)}) "
            ).where(f"seqno BETWEEN {low} AND {high}").collect(),
            sorted(i.seqno for i in inputs),
        )
    finally:
        spark.catalog.dropTempView(candidates)
    assigned: dict[int, Any] = {row.seqno: row["__rule"] for row in rows}
    assigned.update({seqno: SPARK_FAILED for seqno in failed})
    compiled = [r.compiled for r in reports]
    by_topic = {t: c for c in compiled if isinstance(c, RowRule) for t in c.rule.topics}
    report = reports[0]
    for item in inputs:
        rule = by_topic.get(item.topic)
        if rule is None:
            continue
        kafka = (item.topic, item.partition, item.offset, item.timestamp)

        def mine(item: Input = item, rule: RowRule = rule, kafka: Any = kafka) -> int:
            return first_rule(compiled, rule.record(item.seqno, kafka, item.key, item.value))

        _check(report, f"assignment of seqno {item.seqno}", mine, assigned[item.seqno])


def _pair_count(records: Mapping[str, Mapping[int, Record]], rule: DenormRule) -> int:
    return len(records[rule.left]) * len(records[rule.right])


#: What Spark gave where it raised an error for the row: the evaluator must refuse it.
SPARK_FAILED: Any = "<Spark raised an error>"


def _collect(run: Callable[[int, int], list[Any]], seqnos: list[int]) -> tuple[list[Any], set[int]]:
    """``run(low, high)`` over the seqnos in ``seqnos`` (the range goes into the input,
    below everything Spark evaluates: it evaluates a projection of local rows whole when
    it plans it); where Spark raises for some row (an ANSI error), the range is halved
    until the failing seqnos are found."""
    from pyspark.errors import AnalysisException, PySparkException

    if not seqnos:
        return [], set()
    try:
        return run(seqnos[0], seqnos[-1]), set()
    except AnalysisException:
        raise  # the statement is wrong, not a row
    except PySparkException:
        if len(seqnos) == 1:
            return [], {seqnos[0]}
    middle = len(seqnos) // 2
    rows, failed = _collect(run, seqnos[:middle])
    more_rows, more_failed = _collect(run, seqnos[middle:])
    return rows + more_rows, failed | more_failed


def _spark_outputs(
    spark: Any,
    sql: str,
    view: str,
    view_sql: Callable[[int, int], str],
    seqnos: list[int],
    pairs: set[tuple[int, int]] | None = None,
) -> dict[tuple[int, int], Any]:
    """Each match's outputs (``{"key", "value"}`` JSON texts), by (left or only seqno,
    right seqno or 0); SPARK_FAILED for the matches of a row Spark raised an error for."""
    from engine.etl.plan_context import ORDER_COLUMNS

    def outputs(low: int, high: int) -> list[Any]:
        spark.sql(view_sql(low, high)).createOrReplaceTempView(view)
        wrapped = spark.sql(wrap_select(sql, view, ORDER_COLUMNS))
        schema = wrapped.schema
        return wrapped.selectExpr(
            "__zo3 AS l",
            "__zo4 AS r",
            f"{json_text_sql('key', schema['key'].dataType)} AS k",
            f"{json_text_sql('value', schema['value'].dataType)} AS v",
        ).collect()

    rows, failed = _collect(outputs, seqnos)
    found: dict[tuple[int, int], Any] = {}
    for row in rows:
        found.setdefault((row.l, row.r), []).append({"key": row.k, "value": row.v})
    for pair in pairs or {(seqno, 0) for seqno in seqnos}:
        if pair[0] in failed:
            found[pair] = SPARK_FAILED
    return found


def _check(report: RuleReport, what: str, mine: Any, spark_value: Any) -> None:
    try:
        value = mine()
    except Unsupported as exc:
        if exc.reason.startswith("unforeseen"):  # a bug, not a refusal
            report.mismatches.append(f"rule {report.index + 1} {what}: {exc.reason}")
        report.refused[exc.reason] += 1
        if spark_value is SPARK_FAILED:
            report.spark_failed += 1
        return
    report.compared += 1
    if value != spark_value:
        report.mismatches.append(f"rule {report.index + 1} {what}: evaluator {value!r}, Spark {spark_value!r}")
