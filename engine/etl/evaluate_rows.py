"""A small warm pass evaluated on the driver, row by row, without a Spark job.

A warm pass over a handful of new records spent its time in Spark's analysis, planning
and job start, not in its work (0.4–0.8 s for the invoice rules, ~5 s for 200
pass-through rules). When every rule holding candidates is one :mod:`engine.etl.rowwise`
compiled from Spark's analysis (stateless and denorm rules whose expressions, types and
values it evaluates exactly), this module gives the same fates and outputs the pass's
statement would (:mod:`engine.etl.plan_context`): each candidate assigned its first
matching rule (:func:`engine.etl.rowwise.rule_set.first_rule`), a stateless rule's
records processed with their outputs, a denorm's lefts joined with its rights (each
left processed with its pairs or pending, each right pending unless a pair took it).
Anything else — a transaction rule, a rule refused, a value the evaluator refuses, more
candidates than :data:`ROWWISE_ROWS` — raises ``Unsupported`` and the pass goes to Spark,
which decides as it always did (docs/design.md#rules-evaluated-without-spark).

Outputs carry no Avro bodies (``avro`` NULL): to-kafka encodes their JSON text, as for
any output written without them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from engine.etl.checked import Checked
from engine.etl.config import DenormRule, EtlConfig, StatelessRule
from engine.etl.plan import FATES_SCHEMA
from engine.etl.plan_context import DEAD, NO_RULE, PENDING
from engine.etl.read import candidates_arrow
from engine.etl.rowwise.rule_set import Record, Refused, RowRule, first_rule
from engine.etl.rowwise.unsupported import Unsupported
from engine.lake.pool_record import AVRO_TYPE, PROCESSED

#: Up to this many candidates a warm pass is evaluated row by row (0: never).
ROWWISE_ROWS = 5_000
#: A denorm whose lefts times rights exceed this goes to Spark (its broadcast join).
ROWWISE_PAIRS = 200_000

#: The outputs of a pass evaluated row by row (:data:`engine.etl.plan_context.OUTPUT_COLUMNS`).
OUTPUTS_SCHEMA = pa.schema(
    [
        pa.field("out", pa.string()),
        pa.field("key", pa.string()),
        pa.field("value", pa.string()),
        pa.field("avro", AVRO_TYPE),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("o1", pa.int64()),
        pa.field("o2", pa.int32()),
        pa.field("o3", pa.int64()),
        pa.field("o4", pa.int64()),
        pa.field("o5", pa.int64()),
    ]
)

Compiled = Sequence["RowRule | Refused"]


@dataclass(frozen=True)
class RowsEvaluated:
    """What a pass evaluated row by row gives the driver: every candidate's fate, the
    outputs, and the number of outputs per output topic."""

    fates: pa.Table
    outputs: pa.Table
    counts: dict[str, int]


class _Pass:
    """The rows of one pass's fates and outputs, as they are made."""

    def __init__(self, config: EtlConfig) -> None:
        self.config = config
        self.fates: dict[str, list[Any]] = {f.name: [] for f in FATES_SCHEMA}
        self.outputs: dict[str, list[Any]] = {f.name: [] for f in OUTPUTS_SCHEMA}

    def fate(self, pool: str, record: Record, status: str, index: int = NO_RULE) -> None:
        seqno, (topic, partition, offset, ts), _, _ = record
        label = None if index == NO_RULE else self.config.rule_label(index)
        for name, value in (
            ("pool", pool), ("seqno", seqno), ("topic", topic), ("partition", partition),
            ("offset", offset), ("ts", ts), ("rule", label), ("ri", index), ("bundle", None),
            ("status", status),
        ):  # fmt: skip
            self.fates[name].append(value)

    def output(self, out: str, made: dict[str, str | None], ts: int | None, order: tuple[int, int, int, int]) -> None:
        row = {"out": out, "key": made["key"], "value": made["value"], "avro": None, "ts": ts}
        row |= dict(zip(("o1", "o2", "o3", "o4"), order, strict=True))
        row["o5"] = len(self.outputs["o5"])
        for name, value in row.items():
            self.outputs[name].append(value)

    def result(self) -> RowsEvaluated:
        outputs = pa.table(self.outputs, schema=OUTPUTS_SCHEMA)
        counts: dict[str, int] = {}
        for out in self.outputs["out"]:
            counts[out] = counts.get(out, 0) + 1
        return RowsEvaluated(pa.table(self.fates, schema=FATES_SCHEMA), outputs, counts)


def evaluate_rows(
    config: EtlConfig, checked: Checked, compiled: Compiled, rows: pa.Table, done: pa.Table
) -> RowsEvaluated:
    """The fates and outputs of a warm pass over ``rows``
    (:data:`engine.etl.window.FRESH_SCHEMA`) less the records ``done`` covers, as the
    pass's statement would give them. Raises ``Unsupported`` when Spark must do it."""
    candidates = candidates_arrow(rows, done)
    if candidates.num_rows > ROWWISE_ROWS:
        raise Unsupported(f"{candidates.num_rows} candidates (row by row up to {ROWWISE_ROWS})")
    made = _Pass(config)
    dead = rows.filter(pc.fill_null(rows.column("__dead"), False))
    for pool, record in _records(dead, None):
        made.fate(pool, record, DEAD)
    present = set(pc.unique(pc.struct_field(candidates.column("kafka"), "topic")).to_pylist())
    readers = _readers(config, compiled, present)
    assigned: dict[int, list[tuple[str, Record]]] = {}
    for pool, record in _records(candidates, readers):
        topic = record[1][0]
        index = first_rule(compiled, record) if topic in readers else NO_RULE
        assigned.setdefault(index, []).append((pool, record))
    for index, records in assigned.items():
        if index == NO_RULE:
            for pool, record in records:
                made.fate(pool, record, PROCESSED)
            continue
        item = compiled[index]
        if isinstance(item, Refused) or not checked.rules[index].typed:
            raise Unsupported(f"rule {index + 1} is Spark's to evaluate")
        if isinstance(item.rule, StatelessRule):
            _stateless(made, item, records)
        elif isinstance(item.rule, DenormRule):
            _denorm(made, item, records)
        else:
            raise Unsupported(f"rule {index + 1} is a transaction rule")
    return made.result()


def _readers(config: EtlConfig, compiled: Compiled, present: set[str]) -> dict[str, RowRule]:
    """Per input topic, a compiled rule reading it (whose types parse its records);
    topics whose values are not typed yet have none (no rule takes their records).
    Raises ``Unsupported`` when a topic of ``present`` (those with candidates) has rules
    but none evaluated row by row; a topic with no candidate needs none (the first pass
    of a whole database, most of whose tables have sent nothing yet)."""
    readers: dict[str, RowRule] = {}
    for item in compiled:
        if isinstance(item, RowRule):
            for topic in item.rule.topics:
                readers.setdefault(topic, item)
    for topic in config.input_topics:
        if topic not in present:
            continue
        rules = [item for item in compiled if topic in item.rule.topics]
        if rules and topic not in readers:
            raise Unsupported(f"no rule over {topic} is evaluated row by row")
    return readers


def _records(table: pa.Table, readers: dict[str, RowRule] | None) -> list[tuple[str, Record]]:
    """Each row as (pool, typed record); ``readers`` None: key and value left as text."""
    kafka = table.column("kafka").to_pylist()
    out = []
    for pool, seqno, k, key, value in zip(
        table.column("pool").to_pylist(),
        table.column("seqno").to_pylist(),
        kafka,
        table.column("key").to_pylist(),
        table.column("value").to_pylist(),
        strict=True,
    ):
        ts = k["timestamp"]
        micros = None if ts is None else _micros(ts)
        where = (k["topic"], k["partition"], k["offset"], micros)
        reader = None if readers is None else readers.get(k["topic"])
        if reader is None:
            out.append((pool, cast("Record", (seqno, where, key, value))))
        else:
            out.append((pool, reader.record(seqno, cast("tuple[str, int, int, int]", where), key, value)))
    return out


def _micros(ts: Any) -> int:
    """A timestamp pyarrow gave (an aware datetime) as microseconds since the epoch."""
    delta = ts - datetime(1970, 1, 1, tzinfo=UTC)
    return int((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)


def _stateless(made: _Pass, rule: RowRule, records: list[tuple[str, Record]]) -> None:
    out = rule.rule.out
    for pool, record in records:
        made.fate(pool, record, PROCESSED, rule.index)
        seqno, ts = record[0], record[1][3]
        for row in rule.outputs(record):
            made.output(out, row, ts, (seqno, rule.index, seqno, 0))


def _denorm(made: _Pass, rule: RowRule, records: list[tuple[str, Record]]) -> None:
    denorm = rule.rule
    assert isinstance(denorm, DenormRule)
    lefts = [(p, r) for p, r in records if r[1][0] == denorm.left]
    rights = [(p, r) for p, r in records if r[1][0] == denorm.right]
    if len(lefts) * len(rights) > ROWWISE_PAIRS:
        raise Unsupported(f"{len(lefts)} × {len(rights)} pairs to look at")
    for left_pool, left in lefts:
        pairs = [(p, r) for p, r in rights if rule.joins(left, r)]
        made.fate(left_pool, left, PROCESSED if pairs else PENDING, rule.index)
        for right_pool, right in pairs:
            made.fate(right_pool, right, PROCESSED, rule.index)
            times = [t for t in (left[1][3], right[1][3]) if t is not None]
            order = (max(left[0], right[0]), rule.index, left[0], right[0])
            for row in rule.outputs(left, right):
                made.output(denorm.out, row, max(times) if times else None, order)
    for right_pool, right in rights:
        made.fate(right_pool, right, PENDING, rule.index)  # a pair's makes it processed
