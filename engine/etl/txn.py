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
records being the change events' pool records (``seqno, kafka, key, value``, key and value
typed with the merged type of the ``in`` topics) ordered by seqno. Outputs are ordered
by the bundle's largest seqno (including its END event), then rule, then its smallest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.etl.config import TxnRule
from engine.etl.plan_context import PENDING, PassQuery
from engine.etl.sql import quote
from engine.etl.typed_records import TopicTypes, merge_types, typed_sql
from engine.lake.pool_record import PROCESSED

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_BY_SEQNO = (
    "(a, b) -> CASE WHEN a.seqno < b.seqno THEN -1 WHEN a.seqno > b.seqno THEN 1 ELSE 0 END"
)

_COLLECTIONS = "array<struct<data_collection:string,event_count:bigint>>"


def _belongs(topic: str, collection: str) -> str:
    return f"({topic} = {collection} OR endswith({topic}, concat('.', {collection})))"


def data_collections_sql(types: TopicTypes) -> str:
    """END's ``data_collections`` as ``array<struct<data_collection, event_count>>``.

    When the topic's type holds the field as text (an earlier zync inferred a string
    from a first batch of BEGIN events only, where it is always null), the JSON text is
    parsed; when it holds NullType (such a batch now), it is NULL."""
    from pyspark.sql import types as T  # deferred: pyspark

    value_type = types[1]
    field = None
    if isinstance(value_type, T.StructType) and "data_collections" in value_type.fieldNames():
        field = value_type["data_collections"].dataType
    if isinstance(field, T.StringType):
        return f"from_json(value.data_collections, {quote(_COLLECTIONS)})"
    if isinstance(field, T.NullType):  # never seen with a value yet (BEGIN events only)
        return f"CAST(NULL AS {_COLLECTIONS})"
    return (
        "CAST(transform(value.data_collections, c -> named_struct("
        "'data_collection', CAST(c.data_collection AS STRING), "
        f"'event_count', CAST(c.event_count AS BIGINT))) AS {_COLLECTIONS})"
    )


def check_transaction_topic(tx: DataFrame, types: TopicTypes) -> None:
    """Analyze the fields of Debezium BEGIN/END events the completion needs."""
    _ = tx.selectExpr(
        "CAST(value.id AS STRING)",
        "value.status = 'END'",
        "CAST(value.event_count AS BIGINT)",
        data_collections_sql(types),
    ).schema


def plan_txn(query: PassQuery, index: int) -> None:
    assigned = query.assigned
    """A txn rule's fates and outputs: its records grouped by transaction id (one
    shuffle), joined back to the bundles' records with the small status side
    broadcast."""
    rule = query.config.transforms[index]
    assert isinstance(rule, TxnRule)
    label = query.config.rule_label(index)
    merged = merge_types([query.types[t] for t in rule.in_])
    topics = ", ".join(quote(t) for t in rule.in_)
    changes = query.cte(
        f"r{index}_changes",
        f"SELECT pool, {typed_sql(merged)}, __txn FROM {assigned} "
        f"WHERE __rule = {index} AND kafka.topic IN ({topics})",
        shared=True,
    )
    records = (
        f"array_sort(collect_list(named_struct('seqno', seqno, 'kafka', kafka, "
        f"'key', key, 'value', value)), {_BY_SEQNO}) AS records"
    )
    if not rule.debezium:
        bundles = query.cte(
            f"r{index}_bundles",
            f"SELECT __txn, {records}, max(seqno) AS __zo1, min(seqno) AS __zo3, "
            f"max(kafka.timestamp) AS __zts, "
            f"coalesce({rule.complete_when}, false) AS __complete "
            f"FROM {changes} GROUP BY __txn",
            shared=True,
        )
        members = f"SELECT pool, seqno, kafka, __txn FROM {changes}"
    else:
        assert rule.transaction_topic is not None
        tx_types = query.types[rule.transaction_topic]
        tx = query.cte(
            f"r{index}_tx",
            f"SELECT pool, {typed_sql(tx_types)}, __txn FROM {assigned} "
            f"WHERE __rule = {index} AND kafka.topic = {quote(rule.transaction_topic)}",
            shared=True,
        )
        change_agg = query.cte(
            f"r{index}_change_agg",
            f"SELECT __txn, {records}, max(seqno) AS __max, min(seqno) AS __min, "
            f"max(kafka.timestamp) AS __ts, collect_list(kafka.topic) AS __topics "
            f"FROM {changes} GROUP BY __txn",
        )
        tx_agg = query.cte(
            f"r{index}_tx_agg",
            f"SELECT __txn, max(seqno) AS __max, min(seqno) AS __min, "
            f"max(kafka.timestamp) AS __ts, "
            f"max(CASE WHEN value.status = 'END' THEN CAST(value.event_count AS BIGINT) END) "
            f"AS __count, first(CASE WHEN value.status = 'END' THEN "
            f"{data_collections_sql(tx_types)} END, true) AS __dcs "
            f"FROM {tx} GROUP BY __txn",
        )
        ours = f"array({topics})"
        required = (
            f"filter(coalesce(__dcs, array()), c -> exists({ours}, t -> "
            f"{_belongs('t', 'c.data_collection')}))"
        )
        complete = (
            f"__count IS NOT NULL AND forall({required}, c -> "
            f"size(filter(coalesce(__topics, array()), t -> "
            f"{_belongs('t', 'c.data_collection')})) = c.event_count)"
        )
        joined = (
            f"SELECT coalesce(c.__txn, t.__txn) AS __txn, "
            f"coalesce(c.records, array()) AS records, "
            f"greatest(c.__max, t.__max) AS __zo1, least(c.__min, t.__min) AS __zo3, "
            f"greatest(c.__ts, t.__ts) AS __zts, c.__topics AS __topics, "
            f"t.__count AS __count, t.__dcs AS __dcs "
            f"FROM {change_agg} c FULL OUTER JOIN {tx_agg} t ON c.__txn = t.__txn"
        )
        bundles = query.cte(
            f"r{index}_bundles",
            f"SELECT *, coalesce({complete}, false) AS __complete FROM ({joined})",
            shared=True,
        )
        members = (
            f"SELECT pool, seqno, kafka, __txn FROM {changes} "
            f"UNION ALL SELECT pool, seqno, kafka, __txn FROM {tx}"
        )
    hint = "/*+ BROADCAST(s) */ " if query.small else ""
    fated = query.cte(
        f"r{index}_members",
        f"SELECT {hint}m.pool, m.seqno, m.kafka, m.__txn, s.__complete AS __c "
        f"FROM ({members}) m JOIN (SELECT __txn, __complete FROM {bundles}) s "
        f"ON m.__txn = s.__txn",
    )
    query.fates(
        fated,
        label=label,
        status=f"CASE WHEN __c THEN {quote(PROCESSED)} ELSE {quote(PENDING)} END",
        index=index,
        bundle="__txn",
    )
    view = query.rule_view(
        index,
        f"SELECT named_struct('txn_id', __txn, 'records', records) AS bundle, __zo1, "
        f"{index} AS __zo2, __zo3, CAST(0 AS BIGINT) AS __zo4, __zts "
        f"FROM {bundles} WHERE __complete AND size(records) > 0",
    )
    query.outputs(index, view, from_names=("bundle",))
