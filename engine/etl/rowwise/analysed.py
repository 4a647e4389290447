"""What the row evaluator compiles: a query's analysed plan as Spark's JSON, its output
schema, and the session settings its meaning depends on (:class:`Analysed`), taken from
a Spark frame by :func:`analysed` — once, when a configuration is checked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.etl.rowwise.compiled import Session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Analysed:
    """``plan``: ``queryExecution().analyzed().toJSON()``; ``schema``: the frame's
    schema as JSON (``DataFrame.schema.json()``)."""

    plan: str
    schema: str
    session: Session = field(default_factory=Session)


def analysed(frame: DataFrame) -> Analysed:
    """The analysed plan, schema and session settings of ``frame`` (no job runs)."""
    conf = frame.sparkSession.conf
    session = Session(
        time_zone=str(conf.get("spark.sql.session.timeZone")),
        decimal_precision_loss=str(
            conf.get("spark.sql.decimalOperations.allowPrecisionLoss", "true")
        ).lower()
        == "true",
    )
    plan = str(frame._jdf.queryExecution().analyzed().toJSON())
    return Analysed(plan, frame.schema.json(), session)
