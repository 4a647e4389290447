"""A configuration's rules compiled for row evaluation (:func:`compile_rules`): for each
stateless and denorm rule its ``where`` (per input topic), ``join-on`` and SELECT, from
Spark's analysis against the input types — the same empty typed inputs
:func:`engine.etl.check.check_rules` analyses — or the reason it stays with Spark.

A :class:`RowRule` also builds what its compiled parts read: the typed pool record of an
input (:meth:`RowRule.record`, key and value parsed as ``from_json`` would), and the
view row of a match with its order columns (:meth:`RowRule.outputs`), so a pass hands it
JSON text and gets JSON text back; :func:`first_rule` assigns a record its rule as the
pass does. Transaction rules are not evaluated here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.etl.config import DenormRule, EtlConfig, Rule, StatelessRule
from engine.etl.plan_context import NO_RULE, ORDER_COLUMNS
from engine.etl.rowwise.analysed import analysed
from engine.etl.rowwise.datatypes import DataType, parse_type
from engine.etl.rowwise.json_read import parse_json
from engine.etl.rowwise.rule_predicate import RowPredicate, compile_predicate
from engine.etl.rowwise.rule_select import RowSelect, compile_select
from engine.etl.rowwise.unsupported import UNFORESEEN, Unsupported, unforeseen
from engine.etl.sql import wrap_select
from engine.etl.typed_records import TopicTypes, typed_record_schema, value_known

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from engine.etl.checked import RuleCheck

#: A pool record as a compiled rule reads it: (seqno, (topic, partition, offset,
#: timestamp in microseconds), key, value).
Record = tuple[int, tuple[str, int, int, int], Any, Any]


@dataclass(frozen=True)
class PartTypes:
    """A topic's key and value types as the evaluator holds them (None: not known, the
    text stays a string)."""

    key: DataType | None
    value: DataType | None


@dataclass(frozen=True)
class RowRule:
    """A stateless or denorm rule, compiled."""

    index: int
    rule: Rule
    #: Per input topic, its ``where`` (None: the rule has none).
    where: Mapping[str, RowPredicate | None]
    join_on: RowPredicate | None
    select: RowSelect
    types: Mapping[str, PartTypes]

    def record(
        self,
        seqno: int,
        kafka: tuple[str, int, int, int],
        key: str | None,
        value: str | None,
    ) -> Record:
        """The typed pool record of an input record given as JSON text."""
        types = self.types[kafka[0]]
        try:
            return (
                seqno,
                kafka,
                key if types.key is None else parse_json(key, types.key),
                value if types.value is None else parse_json(value, types.value),
            )
        except UNFORESEEN as exc:
            raise unforeseen(exc) from exc

    def matches(self, record: Record) -> bool:
        """Whether the rule's ``where`` is true for the record (of one of its topics)."""
        where = self.where[record[1][0]]
        if where is None:
            return True
        return where.matches({"seqno": record[0], "kafka": record[1], "key": record[2], "value": record[3]})

    def joins(self, left: Record, right: Record) -> bool:
        """Whether a denorm's ``join-on`` is true for a left and a right record."""
        assert self.join_on is not None
        return self.join_on.matches({"left": left, "right": right})

    def outputs(self, record: Record, right: Record | None = None) -> list[dict[str, str | None]]:
        """The rule's outputs for a stateless match (``record``) or a denorm pair
        (``record`` left, ``right``): each ``key`` and ``value`` as JSON text."""
        if right is None:
            row = {"in": record, "__zo1": record[0], "__zo2": self.index, "__zo3": record[0],
                   "__zo4": 0, "__zts": record[1][3]}  # fmt: skip
        else:
            times = [t for t in (record[1][3], right[1][3]) if t is not None]
            row = {"left": record, "right": right, "__zo1": max(record[0], right[0]),
                   "__zo2": self.index, "__zo3": record[0], "__zo4": right[0],
                   "__zts": max(times) if times else None}  # fmt: skip
        return self.select.json_texts(row)


@dataclass(frozen=True)
class Refused:
    """A rule left to Spark, and why."""

    index: int
    rule: Rule
    reason: str


def first_rule(compiled: Sequence[RowRule | Refused], record: Record) -> int:
    """The rule a pass assigns an input record to (:func:`engine.etl.rules.assign_sql`):
    the index of the first rule, in file order, over the record's topic whose ``where``
    is true; :data:`~engine.etl.plan_context.NO_RULE` when none is. Unsupported when a
    refused rule comes first that could take it (its condition is Spark's to decide)."""
    topic = record[1][0]
    for item in compiled:
        if topic not in item.rule.topics:
            continue
        if isinstance(item, Refused):
            raise Unsupported(f"rule {item.index + 1} could take the record ({item.reason})")
        if item.matches(record):
            return item.index
    return NO_RULE


def compile_rules(
    config: EtlConfig,
    spark: SparkSession,
    types: Mapping[str, TopicTypes],
    *,
    reuse: Mapping[int, RowRule | Refused] | None = None,
) -> list[RowRule | Refused]:
    """Every rule of ``config`` compiled, or refused with its reason (in rule order);
    a rule in ``reuse`` (by index: its topics' types did not change) is taken from
    there. Analysis only: Spark runs no job."""
    compiled: list[RowRule | Refused] = []
    for index, rule in enumerate(config.transforms):
        if reuse is not None and index in reuse:
            compiled.append(reuse[index])
            continue
        try:
            compiled.append(_compile_rule(index, rule, spark, types))
        except Unsupported as exc:
            compiled.append(Refused(index, rule, exc.reason))
    return compiled


def compile_checked(
    config: EtlConfig,
    checks: Sequence[RuleCheck],
    types: Mapping[str, TopicTypes],
    *,
    only: Sequence[int] | None = None,
) -> dict[int, RowRule | Refused]:
    """:func:`compile_rules` from what checking the configuration kept of Spark's analysis
    (``check_rules(..., capture=True)``: the same frames :func:`_compile_rule` would
    analyse), for the rules ``only`` names (default: all): no Spark call. A rule whose
    check kept nothing is refused."""
    compiled: dict[int, RowRule | Refused] = {}
    for index in range(len(checks)) if only is None else only:
        rule, check = config.transforms[index], checks[index]
        try:
            compiled[index] = _from_check(index, rule, check, types)
        except Unsupported as exc:
            compiled[index] = Refused(index, rule, exc.reason)
    return compiled


def _from_check(
    index: int, rule: Rule, check: RuleCheck, types: Mapping[str, TopicTypes]
) -> RowRule:
    if not isinstance(rule, StatelessRule | DenormRule):
        raise Unsupported("transaction rules are evaluated by Spark")
    if not check.typed or not all(value_known(types, topic) for topic in rule.topics):
        raise Unsupported("an input topic's types are not known yet")
    plans = check.plans
    if "select" not in plans:
        raise Unsupported("the configuration's check kept no analysis of the rule")
    where = {
        topic: compile_predicate(plans[f"where:{topic}"]) if rule.where else None
        for topic in rule.topics
    }
    join_on = compile_predicate(plans["join-on"]) if isinstance(rule, DenormRule) else None
    select = compile_select(plans["select"], hidden=ORDER_COLUMNS)
    return RowRule(
        index, rule, where, join_on, select, {t: _part_types(types[t]) for t in rule.topics}
    )


def _part_types(types: TopicTypes) -> PartTypes:
    key, value = types
    return PartTypes(
        None if key is None else parse_type(key.json()),
        None if value is None else parse_type(value.json()),
    )


def _compile_rule(
    index: int, rule: Rule, spark: SparkSession, types: Mapping[str, TopicTypes]
) -> RowRule:
    from pyspark.sql import functions as F  # deferred: pyspark

    from engine.etl.check import empty_frame, view_with_order  # deferred: pyspark at its call

    if not isinstance(rule, StatelessRule | DenormRule):
        raise Unsupported("transaction rules are evaluated by Spark")
    if not all(value_known(types, topic) for topic in rule.topics):
        raise Unsupported("an input topic's types are not known yet")

    def empty(topic: str) -> DataFrame:
        return empty_frame(spark, typed_record_schema(types[topic]))

    where = {
        topic: None
        if not rule.where
        else compile_predicate(analysed(empty(topic).select(F.expr(rule.where).alias("b"))))
        for topic in rule.topics
    }
    join_on = None
    if isinstance(rule, StatelessRule):
        view = view_with_order(empty(rule.in_).select(F.struct("*").alias("in")), ["in"])
    else:
        pairs = (
            empty(rule.left)
            .select(F.struct("*").alias("left"))
            .crossJoin(empty(rule.right).select(F.struct("*").alias("right")))
        )
        join_on = compile_predicate(analysed(pairs.select(F.expr(rule.join_on).alias("b"))))
        view = view_with_order(pairs, ["left", "right"])
    name = f"zync_rowwise_{id(view)}_{index}"
    view.createOrReplaceTempView(name)
    try:
        select = compile_select(
            analysed(spark.sql(wrap_select(rule.sql, name, ORDER_COLUMNS))), hidden=ORDER_COLUMNS
        )
    finally:
        spark.catalog.dropTempView(name)
    return RowRule(
        index, rule, where, join_on, select, {t: _part_types(types[t]) for t in rule.topics}
    )
