"""Checking ETL rules before anything is written.

:func:`check_rules` analyzes every expression and query against empty DataFrames of the
typed input schemas, so a bad field fails with Spark's own message (naming the file, the
rule and the field) before the pass reads or writes anything.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from engine.etl import txn
from engine.etl.checked import Checked, RuleCheck
from engine.etl.config import (
    DenormRule,
    EtlConfig,
    EtlConfigError,
    Rule,
    StatelessRule,
    TxnRule,
)
from engine.etl.plan_context import ORDER_COLUMNS
from engine.etl.spark_errors import quiet_spark_errors, spark_message
from engine.etl.sql import SqlShapeError, wrap_select
from engine.etl.typed_records import TopicTypes, merge_types, typed_record_schema, value_known

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from engine.etl.check_cache import RuleCheckCache

#: Rules analysed at once by :func:`check_rules`, when at least :data:`PARALLEL_RULES`
#: need it.
CHECK_THREADS = 4
PARALLEL_RULES = 8


def _snippet(text: str, limit: int = 80) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


class _Checker:
    """Analyzes a configuration's expressions with Spark against typed empty inputs."""

    def __init__(
        self,
        config: EtlConfig,
        spark: SparkSession,
        types: Mapping[str, TopicTypes],
        capture: bool = False,
    ):
        self.config = config
        self.spark = spark
        self.types = types
        self.capture = capture
        self.token = uuid.uuid4().hex[:12]
        self.views: list[str] = []
        self._empty: dict[str, DataFrame] = {}

    def known(self, topic: str) -> bool:
        return value_known(self.types, topic)

    def empty(self, types: TopicTypes) -> DataFrame:
        return empty_frame(self.spark, typed_record_schema(types))

    def empty_of(self, topic: str) -> DataFrame:
        """An empty frame of ``topic``'s typed records, made once per check."""
        frame = self._empty.get(topic)
        if frame is None:
            frame = self._empty[topic] = self.empty(self.types[topic])
        return frame

    def keep(self, plans: dict[str, Any], name: str, frame: DataFrame) -> None:
        """With ``capture``: Spark's analysis of ``frame`` for the row evaluator."""
        if self.capture:
            from engine.etl.rowwise.analysed import analysed  # deferred: only when captured

            plans[name] = analysed(frame)

    def fail(self, index: int, what: str, text: str, exc: BaseException | str) -> EtlConfigError:
        message = exc if isinstance(exc, str) else spark_message(exc)
        return EtlConfigError(
            f"{self.config.source}: {self.config.describe_rule(index)}: {what} "
            f'"{_snippet(text)}": {message}'
        )

    @contextlib.contextmanager
    def guard(self, index: int, what: str, text: str) -> Iterator[None]:
        from pyspark.errors import PySparkException  # deferred: pyspark

        try:
            with quiet_spark_errors():
                yield
        except SqlShapeError as exc:
            raise self.fail(index, what, text, str(exc)) from None
        except PySparkException as exc:
            raise self.fail(index, what, text, exc) from None

    def parse_only(self, index: int, what: str, text: str, *, query: bool = False) -> None:
        parser = self.spark._jsparkSession.sessionState().sqlParser()
        with self.guard(index, what, text):
            if query:
                parser.parsePlan(text)
            else:
                parser.parseExpression(text)

    def boolean(
        self, index: int, what: str, text: str, df: DataFrame, plans: dict[str, Any] | None = None, name: str = ""
    ) -> None:
        from pyspark.sql import functions as F  # deferred: pyspark
        from pyspark.sql import types as T  # deferred: pyspark

        with self.guard(index, what, text):
            frame = df.select(F.expr(text).alias("b"))
            result = frame.schema["b"].dataType
            if not isinstance(result, T.BooleanType | T.NullType):
                raise SqlShapeError(f"must be a boolean, it is {result.simpleString()}")
            if plans is not None:
                self.keep(plans, name, frame)

    def query(
        self,
        index: int,
        rule_sql: str,
        view_df: DataFrame,
        from_names: Sequence[str] = (),
        plans: dict[str, Any] | None = None,
    ) -> RuleCheck:
        view = f"zync_check_{self.token}_{index}"
        with self.guard(index, "sql", rule_sql):
            wrapped = wrap_select(rule_sql, view, ORDER_COLUMNS, from_names=from_names)
            view_df.createOrReplaceTempView(view)
            self.views.append(view)
            frame = self.spark.sql(wrapped)
            schema = frame.schema
            names = schema.fieldNames()
            missing = [c for c in ("key", "value") if c not in names]
            if missing:
                raise SqlShapeError(
                    f"must yield columns `key` and `value` (missing: {', '.join(missing)})"
                )
            plans = {} if plans is None else plans
            self.keep(plans, "select", frame)
        return RuleCheck(schema["key"].dataType, schema["value"].dataType, typed=True, plans=plans)

    def drop_views(self) -> None:
        for view in self.views:
            self.spark.catalog.dropTempView(view)
        self.views.clear()


def empty_frame(spark: SparkSession, schema: StructType) -> DataFrame:
    """An empty DataFrame of ``schema``, made in Spark's JVM (a local relation of no
    rows). ``spark.createDataFrame([], schema)`` goes through an RDD of pickled Python
    rows: 6–17 ms for a 60-column record against 1.4–2.7 ms, once per input topic of a
    check of hundreds of rules."""
    from pyspark.sql import DataFrame  # deferred: pyspark

    session = spark._jsparkSession
    jvm = spark._jvm
    assert jvm is not None  # a classic session's gateway
    jschema = session.parseDataType(schema.json())
    return DataFrame(session.createDataFrame(jvm.java.util.ArrayList(), jschema), spark)


def view_with_order(df: DataFrame, struct_names: Sequence[str]) -> DataFrame:
    """An empty-order view for checking: the named struct columns plus ORDER_COLUMNS.
    Written as SQL text (one call to Spark) rather than built from Column objects, a
    few py4j calls each: 4–5 ms a rule against 11–15 ms."""
    return df.selectExpr(
        *(f"`{name}`" for name in struct_names),
        "CAST(0 AS BIGINT) AS __zo1",
        "0 AS __zo2",
        "CAST(0 AS BIGINT) AS __zo3",
        "CAST(0 AS BIGINT) AS __zo4",
        "CAST(NULL AS TIMESTAMP) AS __zts",
    )


def check_rules(
    config: EtlConfig,
    spark: SparkSession,
    types: Mapping[str, TopicTypes],
    *,
    reuse: Mapping[int, RuleCheck] | None = None,
    capture: bool = False,
    cache: RuleCheckCache | None = None,
) -> Checked:
    """Analyze every rule's expressions and SQL; raises :class:`EtlConfigError`.

    ``types`` maps each input topic to its (key, value) Spark types; a rule touching a
    topic whose types are not known yet (no record ingested) is only parsed. A rule in
    ``reuse`` (by index: its topics' types did not change since it was checked) is not
    analyzed again — a configuration of hundreds of rules over JSON topics, whose types
    grow as new values arrive, would otherwise check them all at every change. With
    ``capture``, each stateless and denorm rule's :attr:`RuleCheck.plans` keep Spark's
    analysis of its parts for the row evaluator (:mod:`engine.etl.rowwise`), which then
    needs no Spark of its own. With ``cache``, a rule checked before with the same input
    types (in this or an earlier process) is read from it. Rules are analysed several at
    once (:data:`CHECK_THREADS`); the error reported is the first rule's, as in order.
    """
    todo = [i for i in range(len(config.transforms)) if reuse is None or i not in reuse]
    found: dict[int, RuleCheck] = {i: reuse[i] for i in range(len(config.transforms)) if reuse is not None and i in reuse}
    keys: dict[int, str] = {}
    if cache is not None:
        for index in todo:
            keys[index] = cache.key(config.transforms[index], types, capture=capture)
            hit = cache.get(keys[index])
            if hit is not None:
                found[index] = hit
        todo = [i for i in todo if i not in found]
    local = threading.local()
    checkers: list[_Checker] = []
    lock = threading.Lock()

    def one(index: int) -> RuleCheck:
        checker = getattr(local, "checker", None)
        if checker is None:
            checker = local.checker = _Checker(config, spark, types, capture)
            with lock:
                checkers.append(checker)
        return _check_rule(checker, index, config.transforms[index])

    failures: dict[int, BaseException] = {}
    try:
        if len(todo) >= PARALLEL_RULES:
            # each rule's analysis is a few py4j calls Spark's JVM answers in its own
            # threads: several at once use both cores (200 wide rules: 2x faster)
            with ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="zync-check") as pool:
                futures = {index: pool.submit(one, index) for index in todo}
            for index, future in futures.items():
                error = future.exception()
                if error is None:
                    found[index] = future.result()
                else:
                    failures[index] = error
        else:
            for index in todo:
                found[index] = one(index)
    finally:
        for checker in checkers:
            checker.drop_views()
    if failures:
        raise failures[min(failures)]  # the first rule's error, as a check in order gives
    if cache is not None:
        for index in todo:
            cache.put(keys[index], found[index])
    return Checked([found[i] for i in range(len(config.transforms))])


def _check_rule(checker: _Checker, index: int, rule: Rule) -> RuleCheck:
    """Analyze one rule's expressions and SQL (raises :class:`EtlConfigError`)."""
    from pyspark.sql import functions as F  # deferred: pyspark

    if not all(checker.known(t) for t in rule.topics):
        for what, text in _expressions(rule):
            checker.parse_only(index, what, text)
        checker.parse_only(index, "sql", _parseable(rule), query=True)
        return RuleCheck()
    plans: dict[str, Any] = {}
    if isinstance(rule, StatelessRule):
        df = checker.empty_of(rule.in_)
        if rule.where:
            checker.boolean(index, "where", rule.where, df, plans, f"where:{rule.in_}")
        view = view_with_order(df.select(F.struct("*").alias("in")), ["in"])
        return checker.query(index, rule.sql, view, plans=plans)
    elif isinstance(rule, DenormRule):
        left = checker.empty_of(rule.left)
        right = checker.empty_of(rule.right)
        if rule.where:
            checker.boolean(index, "where", rule.where, left, plans, f"where:{rule.left}")
            checker.boolean(index, "where", rule.where, right, plans, f"where:{rule.right}")
        pairs = left.select(F.struct("*").alias("left")).crossJoin(
            right.select(F.struct("*").alias("right"))
        )
        checker.boolean(index, "join-on", rule.join_on, pairs, plans, "join-on")
        view = view_with_order(pairs, ["left", "right"])
        return checker.query(index, rule.sql, view, plans=plans)
    else:
        assert isinstance(rule, TxnRule)
        for topic in rule.in_:
            df = checker.empty(checker.types[topic])
            if rule.where:
                checker.boolean(index, "where", rule.where, df)
            with checker.guard(index, "txn-id", rule.txn_id_expr):
                df.select(F.expr(rule.txn_id_expr).cast("string"))
        merged = merge_types([checker.types[t] for t in rule.in_])
        records = checker.empty(merged)
        if rule.debezium:
            assert rule.transaction_topic is not None
            tx = checker.empty(checker.types[rule.transaction_topic])
            with checker.guard(index, "transaction-topic", rule.transaction_topic):
                txn.check_transaction_topic(tx, checker.types[rule.transaction_topic])
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
        return checker.query(index, rule.sql, view, from_names=["bundle"])


def _expressions(rule: Rule) -> list[tuple[str, str]]:
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


def _parseable(rule: Rule) -> str:
    """The rule's SQL with a FROM, for the parser alone."""
    try:
        return wrap_select(rule.sql, "v", ORDER_COLUMNS, from_names=["bundle"])
    except SqlShapeError:
        return rule.sql
