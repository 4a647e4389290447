"""Matching input records to ETL rules, and each rule's part of a pass's SQL.

A pass hands this module the *candidates*: the input records after the cursors that
no completion marker covers yet, as JSON text in the pool record
(``pool, seqno, kafka, key, value``). For each input topic the JSON is parsed with the
topic's Spark type (from the raw pool's metadata) and every record is assigned the
FIRST rule, in file order, whose topic and ``where`` match it (:func:`assign_sql`);
``-1`` means no rule matches (the record is processed with no output).

Each rule then adds its fates and its outputs to the pass's one SQL statement
(:func:`plan_rules`; the rows and the statement are :mod:`engine.etl.plan_context`'s):
stateless and denorm rules here, transaction bundles in :mod:`engine.etl.txn`.
Checking the rules before anything is written is :mod:`engine.etl.check`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from engine.etl import txn
from engine.etl.config import DenormRule, EtlConfig, Rule, StatelessRule, TxnRule
from engine.etl.plan_context import NO_RULE, PENDING, PassQuery
from engine.etl.sql import quote
from engine.etl.typed_records import TopicTypes, parse_json_sql, typed_sql, value_known
from engine.lake.pool_record import PROCESSED

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

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


def parsed_column(config: EtlConfig, topic: str, part: str) -> str:
    """The column of the assigned candidates holding ``part`` (``key`` or ``value``)
    of records of ``topic`` parsed into its type (NULL in other topics' records)."""
    return f"__p{part[0]}{config.input_topics.index(topic)}"


#: Up to this many input topics, assigning the rules keeps every topic's parsed key and
#: value in the assigned candidates (:func:`assign_sql`), so each record's JSON is parsed
#: once however many parts of the statement read it. Those columns are a union's: every
#: topic's rows carry every topic's columns (NULL but its own), N² typed columns for N
#: topics — 2 MB of SQL text at 20 topics, a pass of minutes at 50. Above it, the assigned
#: candidates keep the JSON text and each topic's rules read a view that parses its own
#: (:func:`topic_records`, kept on the executors in a large pass).
PARSED_TOPICS = 8


def parses_in_assign(config: EtlConfig) -> bool:
    """Whether :func:`assign_sql` keeps the parsed columns (few input topics)."""
    return len(config.input_topics) <= PARSED_TOPICS


def assign_sql(config: EtlConfig, candidates: str, types: Mapping[str, TopicTypes]) -> str:
    """A SELECT over ``candidates`` (a view or CTE of JSON-text records): each record
    with ``__rule`` (its first matching rule, -1: none) and ``__txn`` (its transaction
    id, for txn rules); key and value stay JSON text. With few input topics
    (:func:`parses_in_assign`) they are also kept parsed, once, in their topic's
    :func:`parsed_column` (a cold pass keeps this on the executors, so the JSON is not
    parsed again for each rule); otherwise :func:`topic_records` parses them."""
    parsed_here = parses_in_assign(config)
    parts = []
    for topic in config.input_topics:
        rules = [(i, r) for i, r in enumerate(config.transforms) if topic in r.topics]
        if not value_known(types, topic):
            rules = []
        conditions = [match_condition(r, topic) for _, r in rules]
        txn_sql = "CAST(NULL AS STRING)"
        # the parsed key and value: to assign the rules, and for the parsed columns
        typed = (
            f"SELECT pool, {typed_sql(types.get(topic, (None, None)))}, key AS __kj, "
            f"value AS __vj FROM {candidates}"
        )
        if not parsed_here and (not rules or conditions[0] == "true"):
            # no rule, or the topic's first rule takes every record: nothing to parse
            typed = f"SELECT pool, seqno, kafka, key AS __kj, value AS __vj FROM {candidates}"
        if not rules:
            rule_sql = str(NO_RULE)
        elif conditions[0] == "true" and not parsed_here:
            rule_sql = str(rules[0][0])
        else:
            whens = " ".join(
                f"WHEN coalesce({c}, false) THEN {i}"
                for (i, _), c in zip(rules, conditions, strict=True)
            )
            rule_sql = f"CASE {whens} ELSE {NO_RULE} END"
            cases = " ".join(
                f"WHEN {i} THEN {txn_id_sql(r, topic)}" for i, r in rules if isinstance(r, TxnRule)
            )
            if cases:
                txn_sql = f"CASE __rule {cases} END"
        ruled = f"SELECT *, {rule_sql} AS __rule FROM ({typed} WHERE kafka.topic = {quote(topic)})"
        parsed = []
        for other in config.input_topics if parsed_here else ():
            for part in ("key", "value"):
                name = parsed_column(config, other, part)
                if other == topic:
                    parsed.append(f"{part} AS {name}")
                else:
                    none = parse_json_sql("CAST(NULL AS STRING)", _type_of(types, other, part))
                    parsed.append(f"{none} AS {name}")
        parts.append(
            f"SELECT pool, seqno, kafka, __kj AS key, __vj AS value, __rule, "
            f"{txn_sql} AS __txn{''.join(', ' + p for p in parsed)} FROM ({ruled})"
        )
    return "\nUNION ALL\n".join(parts)


def topic_records(query: PassQuery, topic: str) -> str:
    """The view of ``topic``'s assigned candidates with its key and value parsed into its
    parsed columns (:func:`parsed_column`): the assigned candidates themselves when they hold them
    (:func:`parses_in_assign`), else a view made once per pass (which a large pass
    keeps when the statement reads it several times)."""
    if parses_in_assign(query.config):
        return query.assigned
    name = query.topic_views.get(topic)
    if name is None:
        key_type, value_type = query.types.get(topic, (None, None))
        name = query.cte(
            f"t{query.config.input_topics.index(topic)}",
            f"SELECT pool, seqno, kafka, key, value, __rule, __txn, "
            f"{parse_json_sql('key', key_type)} AS {parsed_column(query.config, topic, 'key')}, "
            f"{parse_json_sql('value', value_type)} AS "
            f"{parsed_column(query.config, topic, 'value')} "
            f"FROM {query.assigned} WHERE kafka.topic = {quote(topic)}",
            shared=_read_again(query.config, topic),
        )
        query.topic_views[topic] = name
    return name


def _type_of(types: Mapping[str, TopicTypes], topic: str, part: str) -> DataType | None:
    key_type, value_type = types.get(topic, (None, None))
    return key_type if part == "key" else value_type


def _read_again(config: EtlConfig, topic: str) -> bool:
    """Whether the statement reads a topic's view more than once (a large pass then
    keeps it): a topic of a denorm or transaction rule, or of several rules. A topic
    read by one stateless rule alone is read once (its fates come from the assigned
    candidates: :func:`plan_rules`), and keeping it would cost a Spark job per topic."""
    rules = [r for r in config.transforms if topic in r.topics]
    return len(rules) > 1 or any(not isinstance(r, StatelessRule) for r in rules)


def assigned_record_sql(config: EtlConfig, topic: str) -> str:
    """The typed pool record of an assigned record of ``topic`` as one struct: ``seqno,
    kafka, key, value`` (:func:`engine.etl.typed_records.typed_record_schema`)."""
    return (
        "named_struct('seqno', seqno, 'kafka', kafka, "
        f"'key', {parsed_column(config, topic, 'key')}, "
        f"'value', {parsed_column(config, topic, 'value')})"
    )


def of_rule(assigned: str, index: int, topic: str | None = None) -> str:
    """``FROM ... WHERE`` text of a rule's assigned records (of one topic)."""
    where = f"__rule = {index}"
    if topic is not None:
        where += f" AND kafka.topic = {quote(topic)}"
    return f"{assigned} WHERE {where}"


# --------------------------------------------------------------------------- planning


def plan_unmatched(query: PassQuery) -> None:
    """Records no rule matches: processed, with no output and no rule."""
    query.fates(query.assigned, label=None, status=quote(PROCESSED), where=f"__rule = {NO_RULE}")


def plan_stateless(query: PassQuery, index: int) -> None:
    """A stateless rule's outputs: its SELECT over each record assigned to it (every one
    of them is processed: :func:`plan_rules` gives their fates, all rules' at once)."""
    rule = query.config.transforms[index]
    assert isinstance(rule, StatelessRule)
    records = of_rule(topic_records(query, rule.in_), index, rule.in_)
    view = query.rule_view(
        index,
        f"SELECT {assigned_record_sql(query.config, rule.in_)} AS `in`, seqno AS __zo1, "
        f"{index} AS __zo2, seqno AS __zo3, CAST(0 AS BIGINT) AS __zo4, "
        f"kafka.timestamp AS __zts FROM {records}",
    )
    query.outputs(index, view)


def plan_denorm(query: PassQuery, index: int) -> None:
    """Pairs of a left and a right record satisfying ``join-on``; every record of a
    pair is processed, the others wait. One left outer join with the right side
    broadcast gives the left fates, the matched rights and the pairs; a right that
    appears both matched and pending is settled on the driver (processed wins)."""
    rule = query.config.transforms[index]
    assert isinstance(rule, DenormRule)
    label = query.config.rule_label(index)
    lefts = query.cte(
        f"r{index}_lefts",
        f"SELECT pool, seqno, kafka, {assigned_record_sql(query.config, rule.left)} AS `left` "
        f"FROM {of_rule(topic_records(query, rule.left), index, rule.left)}",
    )
    rights = query.cte(
        f"r{index}_rights",
        f"SELECT pool AS __rpool, {assigned_record_sql(query.config, rule.right)} AS `right` "
        f"FROM {of_rule(topic_records(query, rule.right), index, rule.right)}",
    )
    hint = f"/*+ BROADCAST({rights}) */ " if query.small else ""
    joined = query.cte(
        f"r{index}_joined",
        f"SELECT {hint}{lefts}.*, {rights}.* FROM {lefts} LEFT OUTER JOIN {rights} "
        f"ON {rule.join_on}",
        shared=True,
    )
    query.fates(
        joined,
        label=label,
        status=f"CASE WHEN `right` IS NOT NULL THEN {quote(PROCESSED)} ELSE {quote(PENDING)} END",
        index=index,
    )
    query.fates(
        joined,
        label=label,
        status=quote(PROCESSED),
        index=index,
        where="`right` IS NOT NULL",
        pool="__rpool",
        holder="`right`.",
    )
    query.fates(
        of_rule(topic_records(query, rule.right), index, rule.right),
        label=label,
        status=quote(PENDING),
        index=index,
    )
    view = query.rule_view(
        index,
        "SELECT `left`, `right`, greatest(`left`.seqno, `right`.seqno) AS __zo1, "
        f"{index} AS __zo2, `left`.seqno AS __zo3, `right`.seqno AS __zo4, "
        "greatest(`left`.kafka.timestamp, `right`.kafka.timestamp) AS __zts "
        f"FROM {joined} WHERE `right` IS NOT NULL",
    )
    query.outputs(index, view)


def plan_rules(query: PassQuery, indexes: Iterable[int], *, unmatched: bool = True) -> None:
    """Add the fates and outputs of the rules ``indexes`` (those holding candidates), then
    (``unmatched``) the fates of the candidates no rule matches. Every record a typed stateless rule is
    assigned is processed, so their fates are one part of the statement for all of them
    (a configuration of hundreds of such rules plans hundreds of parts fewer)."""
    stateless = []
    for index in indexes:
        rule = query.config.transforms[index]
        if not query.checked.rules[index].typed:
            label = query.config.rule_label(index)
            query.fates(
                of_rule(query.assigned, index), label=label, status=quote(PENDING), index=index
            )
        elif isinstance(rule, StatelessRule):
            plan_stateless(query, index)
            stateless.append(index)
        elif isinstance(rule, DenormRule):
            plan_denorm(query, index)
        else:
            txn.plan_txn(query, index)
    if stateless:
        query.fates(
            query.assigned,
            label=None,
            status=quote(PROCESSED),
            index="__rule",
            where=f"__rule IN ({', '.join(map(str, stateless))})",
        )
    if unmatched:
        plan_unmatched(query)
