"""Planning ETL rules into Spark SQL, and checking them before anything is written.

A pass hands this module the *candidates*: the input records after the cursors that
no completion marker covers yet, as JSON text in the pool envelope
(``pool, seqno, kafka, key, value``). For each input topic the JSON is parsed with the
topic's Spark type (from the raw pool's metadata) and every record is assigned the
FIRST rule, in file order, whose topic and ``where`` match it (:func:`assign_rules`);
``-1`` means no rule matches (the record is processed with no output).

Each rule then gives two DataFrames (:func:`plan_rule`):

* *fates*: rows per candidate of the rule (a record may appear more than once; the
  driver keeps one per record, processed winning over pending) — ``pool, seqno, topic, partition, offset,
  ts, rule, ri`` (rule index), ``bundle`` (txn id) and ``status``: ``processed`` or
  ``pending`` (expiry is decided afterwards on the driver, :mod:`engine.etl.expiry`);
* *outputs*: ``out, key, value`` (JSON text made by ``to_json`` on the executors),
  ``ts`` (the newest input timestamp) and the ordering columns ``o1..o5``: the largest
  input seqno, the rule index, the left (or first) input seqno, the right input seqno
  and the row's position among one match's outputs (docs/design.md#ordering).

A rule's ``sql`` is a SELECT without FROM; :func:`wrap_select` adds the ordering columns
to its select list and ``FROM`` the rule's view (columns ``left``/``right``, ``in`` or
``bundle``), so a ``WHERE`` or ``explode`` in it works per match.

:func:`check_rules` analyzes every expression and query against empty DataFrames of the
typed input schemas, so a bad field fails with Spark's own message before the pass
reads or writes anything.
"""

from __future__ import annotations

import contextlib
import logging
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.etl.config import DenormRule, EtlConfig, EtlConfigError, StatelessRule, TxnRule
from engine.lake.envelope import PROCESSED

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

PENDING = "pending"
NO_RULE = -1

#: The hidden columns of a rule's view, added before the user's select list.
ORDER_COLUMNS = ("__zo1", "__zo2", "__zo3", "__zo4", "__zts")

FATE_COLUMNS = (
    "pool", "seqno", "topic", "partition", "offset", "ts", "rule", "ri", "bundle", "status"
)
#: The status of dead-letter rows a pass reads (not candidates: they only move cursors).
DEAD = "dead"
OUTPUT_COLUMNS = ("out", "key", "value", "ts", "o1", "o2", "o3", "o4", "o5")


# ----------------------------------------------------------------------------- SQL text


def quote(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def ident(name: str) -> str:
    """A Spark SQL identifier in backquotes."""
    return "`" + name.replace("`", "``") + "`"


class SqlShapeError(ValueError):
    """A rule's sql is not a SELECT the engine can evaluate per match."""


@dataclass(frozen=True)
class _Word:
    text: str  # lower case
    start: int
    end: int
    depth: int
    after_dot: bool


_CLAUSES = frozenset(
    {
        "from", "where", "group", "having", "order", "limit", "offset", "window",
        "qualify", "cluster", "distribute", "sort", "union", "intersect", "except",
        "minus",
    }
)


def _words(sql: str) -> list[_Word]:
    """The bare words of ``sql`` with their parenthesis depth, skipping literals,
    quoted identifiers and comments."""
    words: list[_Word] = []
    i, n, depth = 0, len(sql), 0
    last = ""  # the previous significant character
    while i < n:
        c = sql[i]
        if c in " \t\r\n":
            i += 1
            continue
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if c in "'\"`":
            j = i + 1
            while j < n:
                if sql[j] == "\\" and c != "`":
                    j += 2
                    continue
                if sql[j] == c:
                    if c == "`" and j + 1 < n and sql[j + 1] == "`":
                        j += 2
                        continue
                    break
                j += 1
            i = j + 1
            last = c
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c.isalpha() or c == "_":
            j = i
            while j < n and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            words.append(_Word(sql[i:j].lower(), i, j, depth, last == "."))
            last = "w"
            i = j
            continue
        last = c
        i += 1
    return words


def wrap_select(
    sql: str, view: str, extras: Sequence[str], *, from_names: Sequence[str] = ()
) -> str:
    """``SELECT <list> [WHERE ...]`` → ``SELECT <extras>, <list> FROM <view> [WHERE ...]``.

    ``FROM <name>`` for a name in ``from_names`` is accepted and replaced by the view.
    Raises :class:`SqlShapeError` for anything else that is not a SELECT without FROM.
    """
    text = sql.strip().rstrip(";").rstrip()
    words = _words(text)
    if not words or words[0].text != "select" or words[0].depth != 0:
        raise SqlShapeError("must be a SELECT (without FROM)")
    head_end = words[0].end
    rest_words = words[1:]
    if rest_words and rest_words[0].text in ("distinct", "all") and rest_words[0].depth == 0:
        head_end = rest_words[0].end
        rest_words = rest_words[1:]
    clause = next(
        (w for w in rest_words if w.depth == 0 and not w.after_dot and w.text in _CLAUSES),
        None,
    )
    select_list = text[head_end : clause.start if clause else len(text)].strip()
    tail = text[clause.start :] if clause else ""
    if clause is not None and clause.text == "from":
        after = [w for w in rest_words if w.start > clause.start and w.depth == 0]
        name = after[0] if after else None
        following = after[1] if len(after) > 1 else None
        allowed = {n.lower() for n in from_names}
        gap_end = following.start if following else len(text)
        if (
            name is None
            or name.text not in allowed
            or text[name.end : gap_end].strip()
            or (following is not None and following.text not in _CLAUSES)
        ):
            hint = f" (or FROM {from_names[0]})" if from_names else ""
            raise SqlShapeError(
                f"must be a SELECT without FROM{hint}: it is evaluated once per match"
            )
        tail = text[gap_end:] if following else ""
    if not select_list:
        raise SqlShapeError("the SELECT has no columns")
    prefix = ", ".join(extras)
    head = text[:head_end]
    return f"{head} {prefix}, {select_list} FROM {ident(view)} {tail}".rstrip()


# --------------------------------------------------------------------------- envelopes


TopicTypes = tuple["DataType | None", "DataType | None"]


def kafka_type() -> StructType:
    from engine.lake.delta import spark_schema
    from engine.lake.envelope import POOL_SCHEMA

    return spark_schema(POOL_SCHEMA)["kafka"].dataType  # type: ignore[return-value]


def envelope_schema(types: TopicTypes) -> StructType:
    """The typed envelope: ``seqno, kafka, key, value`` with the topic's types."""
    from pyspark.sql import types as T

    key_type, value_type = types
    return T.StructType(
        [
            T.StructField("seqno", T.LongType(), False),
            T.StructField("kafka", kafka_type(), True),
            T.StructField("key", key_type or T.StringType(), True),
            T.StructField("value", value_type or T.StringType(), True),
        ]
    )


def typed_columns(types: TopicTypes) -> list[Column]:
    """``seqno, kafka, key, value`` with key/value JSON text parsed into the types."""
    from pyspark.sql import functions as F

    from engine.sparktypes import parse_json_column

    key_type, value_type = types
    return [
        F.col("seqno"),
        F.col("kafka"),
        parse_json_column(F.col("key"), key_type).alias("key"),
        parse_json_column(F.col("value"), value_type).alias("value"),
    ]


def envelope_struct(types: TopicTypes) -> Column:
    from pyspark.sql import functions as F

    return F.struct(*typed_columns(types))


def json_text(column: Column, data_type: DataType) -> Column:
    """JSON text of a column on the executors (NULL stays NULL: a tombstone)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(data_type, T.NullType):
        return F.lit(None).cast("string")
    keep_nulls = {"ignoreNullFields": "false"}  # a NULL column is written as null
    if isinstance(data_type, T.StructType | T.ArrayType | T.MapType):
        return F.to_json(column, keep_nulls)
    wrapped = F.to_json(F.struct(column.alias("v")), keep_nulls)
    return F.when(column.isNull(), F.lit(None).cast("string")).otherwise(
        F.regexp_extract(wrapped, r'^\{"v":(.*)\}$', 1)
    )


def merge_types(types: Sequence[TopicTypes]) -> TopicTypes:
    """One key type and one value type that every topic's records parse into."""
    from engine.sparktypes import merge_spark_types

    key: DataType | None = None
    value: DataType | None = None
    for k, v in types:
        key = k if key is None else (key if k is None else merge_spark_types(key, k))
        value = v if value is None else (value if v is None else merge_spark_types(value, v))
    return key, value


# -------------------------------------------------------------------- Spark diagnostics


@contextlib.contextmanager
def quiet_spark_errors() -> Iterator[None]:
    """Keep pyspark from logging analysis errors we catch and report ourselves."""
    names = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
    loggers = [logging.getLogger(name) for name in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def spark_message(exc: BaseException) -> str:
    """The first line of a Spark error, without SQLSTATE and plan."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = re.sub(r"\s*SQLSTATE: \w+;?.*$", "", text)
    text = re.sub(r";\s*line \d+ pos \d+;?$", "", text)
    return text.strip()


def _snippet(text: str, limit: int = 80) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


@dataclass
class RuleCheck:
    """What checking found about one rule: output types (None: not known yet)."""

    key_type: DataType | None = None
    value_type: DataType | None = None
    typed: bool = False


@dataclass
class Checked:
    """The result of :func:`check_rules`: per-rule output types."""

    rules: list[RuleCheck] = field(default_factory=list)

    def output_types(self, config: EtlConfig) -> dict[str, TopicTypes]:
        """Per output topic, the merged key and value types of the rules writing it."""
        from engine.sparktypes import merge_spark_types

        found: dict[str, TopicTypes] = {}
        for rule, check in zip(config.transforms, self.rules, strict=True):
            if not check.typed:
                continue
            key, value = found.get(rule.out, (None, None))
            k, v = _useful(check.key_type), _useful(check.value_type)
            if k is not None:
                key = k if key is None else merge_spark_types(key, k)
            if v is not None:
                value = v if value is None else merge_spark_types(value, v)
            found[rule.out] = (key, value)
        return found


def _useful(data_type: DataType | None) -> DataType | None:
    from pyspark.sql import types as T

    return None if data_type is None or isinstance(data_type, T.NullType) else data_type


class _Checker:
    """Analyzes a configuration's expressions with Spark against typed empty inputs."""

    def __init__(self, config: EtlConfig, spark: SparkSession, types: Mapping[str, TopicTypes]):
        self.config = config
        self.spark = spark
        self.types = types
        self.token = uuid.uuid4().hex[:12]
        self.views: list[str] = []

    def known(self, topic: str) -> bool:
        return value_known(self.types, topic)

    def empty(self, types: TopicTypes) -> DataFrame:
        return self.spark.createDataFrame([], envelope_schema(types))

    def fail(self, index: int, what: str, text: str, exc: BaseException | str) -> EtlConfigError:
        message = exc if isinstance(exc, str) else spark_message(exc)
        return EtlConfigError(
            f"{self.config.source}: {self.config.describe_rule(index)}: {what} "
            f'"{_snippet(text)}": {message}'
        )

    @contextlib.contextmanager
    def guard(self, index: int, what: str, text: str) -> Iterator[None]:
        from pyspark.errors import PySparkException

        try:
            with quiet_spark_errors():
                yield
        except SqlShapeError as exc:
            raise self.fail(index, what, text, str(exc)) from None
        except PySparkException as exc:
            raise self.fail(index, what, text, exc) from None

    def parse_only(self, index: int, what: str, text: str, *, query: bool = False) -> None:
        parser = self.spark._jsparkSession.sessionState().sqlParser()  # type: ignore[attr-defined]
        with self.guard(index, what, text):
            if query:
                parser.parsePlan(text)
            else:
                parser.parseExpression(text)

    def boolean(self, index: int, what: str, text: str, df: DataFrame) -> None:
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        with self.guard(index, what, text):
            result = df.select(F.expr(text).alias("b")).schema["b"].dataType
            if not isinstance(result, T.BooleanType | T.NullType):
                raise SqlShapeError(f"must be a boolean, it is {result.simpleString()}")

    def query(self, index: int, rule_sql: str, view_df: DataFrame, from_names: Sequence[str] = ()) -> RuleCheck:
        view = f"zync_check_{self.token}_{index}"
        with self.guard(index, "sql", rule_sql):
            wrapped = wrap_select(rule_sql, view, ORDER_COLUMNS, from_names=from_names)
            view_df.createOrReplaceTempView(view)
            self.views.append(view)
            schema = self.spark.sql(wrapped).schema
            names = schema.fieldNames()
            missing = [c for c in ("key", "value") if c not in names]
            if missing:
                raise SqlShapeError(
                    f"must yield columns `key` and `value` (missing: {', '.join(missing)})"
                )
        return RuleCheck(schema["key"].dataType, schema["value"].dataType, typed=True)

    def drop_views(self) -> None:
        for view in self.views:
            self.spark.catalog.dropTempView(view)
        self.views.clear()


def value_known(types: Mapping[str, TopicTypes], topic: str) -> bool:
    """Whether the raw pool knows the topic's value type (some non-null value was
    ingested). Rules over a topic whose values are not typed yet are only parsed, and
    its records (null values only: tombstones) match no rule."""
    return types.get(topic, (None, None))[1] is not None


def view_with_order(df: DataFrame, struct_names: Sequence[str]) -> DataFrame:
    """An empty-order view for checking: the named struct columns plus ORDER_COLUMNS."""
    from pyspark.sql import functions as F

    return df.select(
        *struct_names,
        F.lit(0).cast("long").alias("__zo1"),
        F.lit(0).alias("__zo2"),
        F.lit(0).cast("long").alias("__zo3"),
        F.lit(0).cast("long").alias("__zo4"),
        F.lit(None).cast("timestamp").alias("__zts"),
    )


def check_rules(
    config: EtlConfig, spark: SparkSession, types: Mapping[str, TopicTypes]
) -> Checked:
    """Analyze every rule's expressions and SQL; raises :class:`EtlConfigError`.

    ``types`` maps each input topic to its (key, value) Spark types; a rule touching a
    topic whose types are not known yet (no record ingested) is only parsed.
    """
    from pyspark.sql import functions as F

    from engine.etl import txn

    checker = _Checker(config, spark, types)
    checked = Checked()
    try:
        for index, rule in enumerate(config.transforms):
            if not all(checker.known(t) for t in rule.topics):
                for what, text in _expressions(rule):
                    checker.parse_only(index, what, text)
                checker.parse_only(index, "sql", _parseable(rule), query=True)
                checked.rules.append(RuleCheck())
                continue
            if isinstance(rule, StatelessRule):
                df = checker.empty(types[rule.in_])
                if rule.where:
                    checker.boolean(index, "where", rule.where, df)
                view = view_with_order(df.select(F.struct("*").alias("in")), ["in"])
                checked.rules.append(checker.query(index, rule.sql, view))
            elif isinstance(rule, DenormRule):
                left = checker.empty(types[rule.left])
                right = checker.empty(types[rule.right])
                if rule.where:
                    checker.boolean(index, "where", rule.where, left)
                    checker.boolean(index, "where", rule.where, right)
                pairs = left.select(F.struct("*").alias("left")).crossJoin(
                    right.select(F.struct("*").alias("right"))
                )
                checker.boolean(index, "join-on", rule.join_on, pairs)
                view = view_with_order(pairs, ["left", "right"])
                checked.rules.append(checker.query(index, rule.sql, view))
            else:
                assert isinstance(rule, TxnRule)
                for topic in rule.in_:
                    df = checker.empty(types[topic])
                    if rule.where:
                        checker.boolean(index, "where", rule.where, df)
                    with checker.guard(index, "txn-id", rule.txn_id_expr):
                        df.select(F.expr(rule.txn_id_expr).cast("string"))
                merged = merge_types([types[t] for t in rule.in_])
                records = checker.empty(merged)
                if rule.debezium:
                    assert rule.transaction_topic is not None
                    tx = checker.empty(types[rule.transaction_topic])
                    with checker.guard(index, "transaction-topic", rule.transaction_topic):
                        txn.check_transaction_topic(tx)
                else:
                    with checker.guard(index, "complete-when", rule.complete_when):
                        _ = records.groupBy().agg(F.expr(rule.complete_when).alias("c")).schema
                bundle = records.select(
                    F.struct(
                        F.lit("").alias("txn_id"),
                        F.array(F.struct(*records.columns)).alias("records"),
                    ).alias("bundle")
                )
                view = view_with_order(bundle, ["bundle"])
                checked.rules.append(checker.query(index, rule.sql, view, from_names=["bundle"]))
    finally:
        checker.drop_views()
    return checked


def _expressions(rule: Any) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if rule.where:
        found.append(("where", rule.where))
    if isinstance(rule, DenormRule):
        found.append(("join-on", rule.join_on))
    if isinstance(rule, TxnRule):
        found.append(("txn-id", rule.txn_id_expr))
        if not rule.debezium:
            found.append(("complete-when", rule.complete_when))
    return found


def _parseable(rule: Any) -> str:
    """The rule's SQL with a FROM, for the parser alone."""
    try:
        return wrap_select(rule.sql, "v", ORDER_COLUMNS, from_names=["bundle"])
    except SqlShapeError:
        return rule.sql


# ----------------------------------------------------------------------- rule matching


def match_condition(rule: Any, topic: str) -> str:
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


@dataclass
class PlanContext:
    """What planning a pass's rules needs, and the temp views it created."""

    spark: SparkSession
    config: EtlConfig
    types: Mapping[str, TopicTypes]
    checked: Checked
    #: Broadcast the small sides of joins (the candidates of a pass are few).
    small: bool = True
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    views: list[str] = field(default_factory=list)
    #: The SQL text actually run per rule (for --explain).
    sql: dict[int, str] = field(default_factory=dict)

    def run_sql(self, index: int, view_df: DataFrame, *, from_names: Sequence[str] = ()) -> DataFrame:
        rule = self.config.transforms[index]
        view = f"zync_etl_{self.token}_{index}"
        view_df.createOrReplaceTempView(view)
        self.views.append(view)
        wrapped = wrap_select(rule.sql, view, ORDER_COLUMNS, from_names=from_names)
        self.sql[index] = wrapped
        with quiet_spark_errors():
            return self.spark.sql(wrapped)

    def drop_views(self) -> None:
        for view in self.views:
            self.spark.catalog.dropTempView(view)
        self.views.clear()


def fates(
    df: DataFrame,
    label: str | None,
    status: Column,
    index: int = NO_RULE,
    bundle: Column | None = None,
) -> DataFrame:
    """Fate rows (:data:`FATE_COLUMNS`) for rows with ``pool, seqno, kafka``: the rule's
    label and index, the txn bundle id (txn rules) and the status."""
    from pyspark.sql import functions as F

    return df.select(
        "pool",
        "seqno",
        F.col("kafka.topic").alias("topic"),
        F.col("kafka.partition").alias("partition"),
        F.col("kafka.offset").alias("offset"),
        F.col("kafka.timestamp").alias("ts"),
        F.lit(label).cast("string").alias("rule"),
        F.lit(index).cast("int").alias("ri"),
        (bundle if bundle is not None else F.lit(None)).cast("string").alias("bundle"),
        status.alias("status"),
    )


def outputs(ctx: PlanContext, index: int, result: DataFrame) -> DataFrame:
    """Output rows (:data:`OUTPUT_COLUMNS`) from a rule's SQL result."""
    from pyspark.sql import functions as F

    rule = ctx.config.transforms[index]
    schema = result.schema
    return result.select(
        F.lit(rule.out).alias("out"),
        json_text(F.col("key"), schema["key"].dataType).alias("key"),
        json_text(F.col("value"), schema["value"].dataType).alias("value"),
        F.col("__zts").alias("ts"),
        F.col("__zo1").cast("long").alias("o1"),
        F.col("__zo2").cast("int").alias("o2"),
        F.col("__zo3").cast("long").alias("o3"),
        F.col("__zo4").cast("long").alias("o4"),
        F.monotonically_increasing_id().alias("o5"),
    )


def of_rule(assigned: DataFrame, index: int, topic: str | None = None) -> DataFrame:
    from pyspark.sql import functions as F

    df = assigned.where(F.col("__rule") == F.lit(index))
    if topic is not None:
        df = df.where(F.col("kafka.topic") == F.lit(topic))
    return df


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

    from engine.etl import txn

    rule = ctx.config.transforms[index]
    if not ctx.checked.rules[index].typed:
        label = ctx.config.rule_label(index)
        return fates(of_rule(assigned, index), label, F.lit(PENDING), index), None
    if isinstance(rule, StatelessRule):
        return plan_stateless(ctx, index, assigned)
    if isinstance(rule, DenormRule):
        return plan_denorm(ctx, index, assigned)
    return txn.plan_txn(ctx, index, assigned)
