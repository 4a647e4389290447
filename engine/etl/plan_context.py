"""The rows a rule's plan yields, and what planning a pass's rules shares.

Each rule gives two DataFrames:

* *fates*: rows per candidate of the rule (a record may appear more than once; the
  driver keeps one per record, processed winning over pending) — ``pool, seqno, topic, partition, offset,
  ts, rule, ri`` (rule index), ``bundle`` (txn id) and ``status``: ``processed`` or
  ``pending`` (expiry is decided afterwards on the driver, :mod:`engine.etl.expiry`);
* *outputs*: ``out, key, value`` (JSON text made by ``to_json`` on the executors),
  ``ts`` (the newest input timestamp) and the ordering columns ``o1..o5``: the largest
  input seqno, the rule index, the left (or first) input seqno, the right input seqno
  and the row's position among one match's outputs (docs/design.md#ordering).

:class:`PlanContext` holds the session, the configuration, the input types and the temp
views a pass's rules create. Both :mod:`engine.etl.rules` and :mod:`engine.etl.txn` plan
with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.etl.checked import Checked
from engine.etl.config import EtlConfig
from engine.etl.envelopes import TopicTypes, json_text
from engine.etl.spark_errors import quiet_spark_errors
from engine.etl.sql import wrap_select

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

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
