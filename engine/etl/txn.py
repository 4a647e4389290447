"""Transaction bundles: a source transaction's outputs, whole or not at all.

A ``txn`` rule groups its records by transaction id (``txn-id``, evaluated on each
record with its topic's type). A bundle is *complete* when

* ``complete-when`` (an aggregate over the bundle's records, e.g.
  ``bool_or(value.done)``) is true, or
* with ``complete-when: debezium``: Debezium's END event for the id has arrived on the
  ``transaction-topic`` and, for every data collection it lists that one of the rule's
  ``in`` topics holds (topic ``T`` holds collection ``C`` when ``T == C`` or ``T`` ends
  with ``.C``), the bundle holds exactly the END event's ``event_count`` of change events
  of that topic, across partitions.

Only then are its records marked processed and its outputs computed, all in the pass's
one staging commit; until then every record of the bundle stays pending. A bundle
expires as a whole when any of its records is older than ``expire-after`` behind the
newest timestamp of its topic (:mod:`engine.etl.expiry`), so a transaction never
appears in part.

``sql`` sees one row per complete bundle: ``bundle`` = ``struct(txn_id, records)``, the
records being the change events' envelopes (``seqno, kafka, key, value``, key and value
typed with the merged type of the ``in`` topics) ordered by seqno. Outputs are ordered
by the bundle's largest seqno (including its END event), then rule, then its smallest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.etl.config import TxnRule
from engine.etl.envelopes import merge_types, typed_columns
from engine.etl.plan_context import PENDING, PlanContext, fates, of_rule, outputs
from engine.etl.spark_errors import quiet_spark_errors
from engine.etl.sql import quote
from engine.lake.envelope import PROCESSED

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_BY_SEQNO = (
    "(a, b) -> CASE WHEN a.seqno < b.seqno THEN -1 WHEN a.seqno > b.seqno THEN 1 ELSE 0 END"
)


def _belongs(topic: str, collection: str) -> str:
    return f"({topic} = {collection} OR endswith({topic}, concat('.', {collection})))"


_COLLECTIONS = "array<struct<data_collection:string,event_count:bigint>>"


def data_collections(tx: DataFrame) -> Column:
    """END's ``data_collections`` as ``array<struct<data_collection, event_count>>``.

    When the topic's type holds the field as text (a first batch of BEGIN events only,
    where it is always null, infers a string), the JSON text is parsed."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    field = tx.select(F.expr("value.data_collections").alias("d")).schema["d"].dataType
    if isinstance(field, T.StringType):
        return F.from_json(F.expr("value.data_collections"), _COLLECTIONS)
    return F.expr(
        "transform(value.data_collections, c -> named_struct("
        "'data_collection', CAST(c.data_collection AS STRING), "
        "'event_count', CAST(c.event_count AS BIGINT)))"
    ).cast(_COLLECTIONS)


def check_transaction_topic(tx: DataFrame) -> None:
    """Analyze the fields of Debezium BEGIN/END events the completion needs."""
    from pyspark.sql import functions as F

    _ = tx.select(
        F.expr("CAST(value.id AS STRING)"),
        F.expr("value.status = 'END'"),
        F.expr("CAST(value.event_count AS BIGINT)"),
        data_collections(tx),
    ).schema


def plan_txn(ctx: PlanContext, index: int, assigned: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(fates, outputs) of a txn rule: one aggregation by transaction id (one shuffle),
    joined back to the bundles' records with the small status side broadcast."""
    from pyspark.sql import functions as F

    rule = ctx.config.transforms[index]
    assert isinstance(rule, TxnRule)
    label = ctx.config.rule_label(index)
    merged = merge_types([ctx.types[t] for t in rule.in_])

    changes = of_rule(assigned, index).where(F.col("kafka.topic").isin(list(rule.in_)))
    typed = changes.select("pool", *typed_columns(merged), "__txn")
    envelope = F.struct("seqno", "kafka", "key", "value")
    records = F.expr(f"array_sort(collect_list(__env), {_BY_SEQNO})").alias("records")
    common = [
        F.max("seqno").alias("__zo1"),
        F.min("seqno").alias("__zo3"),
        F.max("kafka.timestamp").alias("__zts"),
    ]
    if not rule.debezium:
        with quiet_spark_errors():
            complete = F.coalesce(F.expr(rule.complete_when), F.lit(False)).alias("__complete")
        rows = typed.select("*", envelope.alias("__env"))
        bundles = rows.groupBy("__txn").agg(records, *common, complete)
        members = rows.select("pool", "seqno", "kafka", "__txn")
    else:
        assert rule.transaction_topic is not None
        tx = of_rule(assigned, index, rule.transaction_topic).select(
            "pool", *typed_columns(ctx.types[rule.transaction_topic]), "__txn"
        )
        dcs = data_collections(tx)
        change_rows = typed.select(
            "__txn", "pool", "seqno", "kafka",
            envelope.alias("__env"),
            F.col("kafka.topic").alias("__topic"),
            F.lit(None).cast("boolean").alias("__end"),
            F.lit(None).cast("bigint").alias("__count"),
            F.lit(None).cast(_COLLECTIONS).alias("__dcs"),
        )
        tx_rows = tx.select(
            "__txn", "pool", "seqno", "kafka",
            F.lit(None).cast(change_rows.schema["__env"].dataType).alias("__env"),
            F.lit(None).cast("string").alias("__topic"),
            F.expr("value.status = 'END'").alias("__end"),
            F.expr("CAST(value.event_count AS BIGINT)").alias("__count"),
            dcs.alias("__dcs"),
        )
        rows = change_rows.unionByName(tx_rows)
        ours = "array(" + ", ".join(quote(t) for t in rule.in_) + ")"
        required = (
            f"filter(coalesce(__dcs, array()), c -> exists({ours}, t -> "
            f"{_belongs('t', 'c.data_collection')}))"
        )
        complete_sql = (
            f"__count IS NOT NULL AND forall({required}, c -> "
            f"size(filter(coalesce(__topics, array()), t -> "
            f"{_belongs('t', 'c.data_collection')})) = c.event_count)"
        )
        aggregated = rows.groupBy("__txn").agg(
            records,
            *common,
            F.collect_list("__topic").alias("__topics"),
            F.max(F.when(F.col("__end"), F.col("__count"))).alias("__count"),
            F.first(F.when(F.col("__end"), F.col("__dcs")), ignorenulls=True).alias("__dcs"),
        )
        bundles = aggregated.select("*", F.expr(complete_sql).alias("__complete"))
        members = rows.select("pool", "seqno", "kafka", "__txn")

    status = bundles.select("__txn", F.col("__complete").alias("__c"))
    fate_rows = fates(
        members.join(F.broadcast(status) if ctx.small else status, "__txn", "inner"),
        label,
        F.when(F.col("__c"), F.lit(PROCESSED)).otherwise(F.lit(PENDING)),
        index,
        F.col("__txn"),
    )
    view = bundles.where(F.col("__complete") & (F.size("records") > 0)).select(
        F.struct(F.col("__txn").alias("txn_id"), F.col("records")).alias("bundle"),
        "__zo1",
        F.lit(index).alias("__zo2"),
        "__zo3",
        F.lit(0).cast("long").alias("__zo4"),
        "__zts",
    )
    out = outputs(ctx, index, ctx.run_sql(index, view, from_names=["bundle"]))
    return fate_rows, out
