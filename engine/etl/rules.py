"""Matching input records to ETL rules, and planning each rule in Spark.

A pass hands this module the *candidates*: the input records after the cursors that
no completion marker covers yet, as JSON text in the pool envelope
(``pool, seqno, kafka, key, value``). For each input topic the JSON is parsed with the
topic's Spark type (from the raw pool's metadata) and every record is assigned the
FIRST rule, in file order, whose topic and ``where`` match it (:func:`assign_rules`);
``-1`` means no rule matches (the record is processed with no output).

Each rule then gives its fates and its outputs (:func:`plan_rule`; the rows are
described in :mod:`engine.etl.plan_context`): stateless and denorm rules here,
transaction bundles in :mod:`engine.etl.txn`. Checking the rules before anything is
written is :mod:`engine.etl.check`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from engine.etl import txn
from engine.etl.config import DenormRule, EtlConfig, Rule, StatelessRule, TxnRule
from engine.etl.envelopes import TopicTypes, envelope_struct, typed_columns, value_known
from engine.etl.plan_context import NO_RULE, PENDING, PlanContext, fates, of_rule, outputs
from engine.etl.spark_errors import quiet_spark_errors
from engine.lake.envelope import PROCESSED

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


# ----------------------------------------------------------------------- rule matching


def match_condition(rule: Rule, topic: str) -> str:
    """The SQL condition under which a record of ``topic`` matches ``rule``."""
    if isinstance(rule, TxnRule) and rule.debezium and topic == rule.transaction_topic:
        return "value.id IS NOT NULL"
    conditions = [f"({rule.where})"] if rule.where else []
    if isinstance(rule, TxnRule):
        conditions.append(f"({rule.txn_id_expr}) IS NOT NULL")
    return " AND ".join(conditions) or "true"


def txn_id_sql(rule: TxnRule, topic: str) -> str:
    if rule.debezium and topic == rule.transaction_topic:
        return "CAST(value.id AS STRING)"
    return f"CAST(({rule.txn_id_expr}) AS STRING)"


def assign_rules(
    config: EtlConfig, candidates: DataFrame, types: Mapping[str, TopicTypes]
) -> DataFrame:
    """Candidates (JSON text) with ``__rule`` (first matching rule, -1: none) and
    ``__txn`` (the transaction id, for txn rules)."""
    from pyspark.sql import functions as F

    parts = []
    for topic in config.input_topics:
        rules = [(i, r) for i, r in enumerate(config.transforms) if topic in r.topics]
        if not value_known(types, topic):
            rules = []
        of_topic = candidates.where(F.col("kafka.topic") == F.lit(topic))
        typed = of_topic.select(
            "pool",
            *typed_columns(types.get(topic, (None, None))),
            F.col("key").alias("__kj"),
            F.col("value").alias("__vj"),
        )
        if rules:
            whens = " ".join(
                f"WHEN coalesce({match_condition(r, topic)}, false) THEN {i}" for i, r in rules
            )
            typed = typed.withColumn("__rule", F.expr(f"CASE {whens} ELSE {NO_RULE} END"))
            txns = [(i, r) for i, r in rules if isinstance(r, TxnRule)]
            if txns:
                cases = " ".join(f"WHEN {i} THEN {txn_id_sql(r, topic)}" for i, r in txns)
                typed = typed.withColumn("__txn", F.expr(f"CASE __rule {cases} END"))
            else:
                typed = typed.withColumn("__txn", F.lit(None).cast("string"))
        else:
            typed = typed.withColumn("__rule", F.lit(NO_RULE)).withColumn(
                "__txn", F.lit(None).cast("string")
            )
        parts.append(
            typed.select(
                "pool",
                "seqno",
                "kafka",
                F.col("__kj").alias("key"),
                F.col("__vj").alias("value"),
                "__rule",
                "__txn",
            )
        )
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


# --------------------------------------------------------------------------- planning


def plan_unmatched(ctx: PlanContext, assigned: DataFrame) -> DataFrame:
    """Records no rule matches: processed, with no output and no rule."""
    from pyspark.sql import functions as F

    return fates(of_rule(assigned, NO_RULE), None, F.lit(PROCESSED))


def plan_stateless(ctx: PlanContext, index: int, assigned: DataFrame) -> tuple[DataFrame, DataFrame]:
    from pyspark.sql import functions as F

    rule = ctx.config.transforms[index]
    assert isinstance(rule, StatelessRule)
    label = ctx.config.rule_label(index)
    records = of_rule(assigned, index, rule.in_)
    done = fates(records, label, F.lit(PROCESSED), index)
    view = records.select(
        envelope_struct(ctx.types[rule.in_]).alias("in"),
        F.col("seqno").alias("__zo1"),
        F.lit(index).alias("__zo2"),
        F.col("seqno").alias("__zo3"),
        F.lit(0).cast("long").alias("__zo4"),
        F.col("kafka.timestamp").alias("__zts"),
    )
    return done, outputs(ctx, index, ctx.run_sql(index, view))


def plan_denorm(ctx: PlanContext, index: int, assigned: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Pairs of a left and a right record satisfying ``join-on``; every record of a
    pair is processed, the others wait. One left outer join with the right side
    broadcast gives the left fates, the matched rights and the pairs; a right that
    appears both matched and pending is settled on the driver (processed wins)."""
    from pyspark.sql import functions as F

    rule = ctx.config.transforms[index]
    assert isinstance(rule, DenormRule)
    label = ctx.config.rule_label(index)
    lefts = of_rule(assigned, index, rule.left).select(
        "pool", "seqno", "kafka", envelope_struct(ctx.types[rule.left]).alias("left")
    )
    rights = of_rule(assigned, index, rule.right).select(
        F.col("pool").alias("__rpool"), envelope_struct(ctx.types[rule.right]).alias("right")
    )
    with quiet_spark_errors():
        right_side = F.broadcast(rights) if ctx.small else rights
        joined = lefts.join(right_side, F.expr(rule.join_on), "left_outer")
    matched = F.col("right").isNotNull()
    left_fates = fates(
        joined, label, F.when(matched, F.lit(PROCESSED)).otherwise(F.lit(PENDING)), index
    )
    pairs = joined.where(matched)
    right_matched = fates(
        pairs.select(
            F.col("__rpool").alias("pool"), F.col("right.seqno").alias("seqno"), F.col("right.kafka").alias("kafka")
        ),
        label,
        F.lit(PROCESSED),
        index,
    )
    right_all = fates(of_rule(assigned, index, rule.right), label, F.lit(PENDING), index)
    view = pairs.select(
        "left",
        "right",
        F.greatest("left.seqno", "right.seqno").alias("__zo1"),
        F.lit(index).alias("__zo2"),
        F.col("left.seqno").alias("__zo3"),
        F.col("right.seqno").alias("__zo4"),
        F.greatest("left.kafka.timestamp", "right.kafka.timestamp").alias("__zts"),
    )
    out = outputs(ctx, index, ctx.run_sql(index, view))
    return left_fates.unionByName(right_matched).unionByName(right_all), out


def plan_rule(
    ctx: PlanContext, index: int, assigned: DataFrame
) -> tuple[DataFrame, DataFrame | None]:
    """(fates, outputs) of one rule over the assigned candidates. A rule over a topic
    whose types are not known yet keeps its candidates pending, with no outputs."""
    from pyspark.sql import functions as F

    rule = ctx.config.transforms[index]
    if not ctx.checked.rules[index].typed:
        label = ctx.config.rule_label(index)
        return fates(of_rule(assigned, index), label, F.lit(PENDING), index), None
    if isinstance(rule, StatelessRule):
        return plan_stateless(ctx, index, assigned)
    if isinstance(rule, DenormRule):
        return plan_denorm(ctx, index, assigned)
    return txn.plan_txn(ctx, index, assigned)
