"""The shaper: a Spark SQL SELECT that reshapes each record before delivery.

It runs over the view ``records`` (the topic's typed records: ``seqno, kafka, key,
value``). Its result must have columns ``kafka`` (unchanged: it carries the record's
position), ``key`` and ``value``; it may drop records, not multiply them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.deliver.errors import DeliveryError
from engine.lake.pool_record import POOL_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from engine.deliver.staging_reader import StagingReader


def load_shaper(shaper: str | Path | None) -> str | None:
    """The shaper's SQL: the text of a ``.sql`` file (or SQL given as is)."""
    if shaper is None:
        return None
    text = str(shaper)
    if isinstance(shaper, Path) or text.strip().endswith(".sql"):
        path = Path(shaper)
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise DeliveryError(f"{path}: cannot read the shaper: {exc.strerror}") from None
    return text


class Shaper:
    """Applies the shaper's ``sql`` (None: none) to the rows ``reader`` reads."""

    def __init__(
        self,
        sql: str | None,
        reader: StagingReader,
        spark: Callable[[], SparkSession] | None = None,
    ) -> None:
        self.sql = sql
        self.reader = reader
        self._spark_factory = spark

    def _spark(self) -> SparkSession:
        if self._spark_factory is not None:
            return self._spark_factory()
        # deferred: engine.spark brings the JVM set-up's modules, which a to-kafka without
        # a shaper (the usual one) never needs
        from engine.spark import get_spark

        return get_spark()

    def types(self) -> tuple[DataType, DataType]:
        """The key and value types of the shaper's result."""
        schema = self.frame(0, -1).schema
        return schema["key"].dataType, schema["value"].dataType

    def frame(self, low: int, high: int) -> DataFrame:
        """The shaper's result over the topic's records with ``low <= offset <= high``
        (an empty range gives the result's schema)."""
        assert self.sql is not None
        # deferred: pyspark, and deltalake behind the lake modules
        from pyspark.sql import functions as F

        from engine.lake.delta import spark_schema
        from engine.sparktypes import parse_json_column

        pool, topic = self.reader.pool, self.reader.topic
        spark = self._spark()
        offset = pc.field("kafka", "offset")
        rows = pool.dataset().to_table(
            columns=["seqno", "kafka", "key", "value"],
            filter=self.reader.record_condition() & (offset >= low) & (offset <= high),
        )
        schema = pa.schema([POOL_SCHEMA.field(name) for name in ("seqno", "kafka", "key", "value")])
        rows = rows.cast(schema)
        frame = (
            spark.createDataFrame(rows)
            if rows.num_rows
            else spark.createDataFrame([], spark_schema(schema))
        )
        key_type, value_type = pool.spark_types(topic)
        records = frame.select(
            "seqno",
            "kafka",
            parse_json_column(F.col("key"), key_type).alias("key"),
            parse_json_column(F.col("value"), value_type).alias("value"),
        )
        records.createOrReplaceTempView("records")
        try:
            result = spark.sql(self.sql)
            result.schema  # noqa: B018 - analyses the query now
        except Exception as exc:  # noqa: BLE001 - Spark analysis errors
            text = str(exc).strip()
            first = text.splitlines()[0] if text else type(exc).__name__
            raise DeliveryError(f"the shaper does not run over `records`: {first}") from None
        missing = [c for c in ("kafka", "key", "value") if c not in result.columns]
        if missing:
            raise DeliveryError(
                "the shaper's SELECT must return the columns kafka (unchanged), key and "
                f"value; missing: {', '.join(missing)}"
            )
        return result

    def shape(self, table: pa.Table) -> pa.Table:
        """Rows (offset, key, value[, time]) reshaped by the shaper, if there is one."""
        if self.sql is None or not table.num_rows:
            return table
        # deferred: pyspark
        from pyspark.sql import functions as F

        from engine.sparktypes import json_text

        low = pc.min(table.column("offset")).as_py()
        high = pc.max(table.column("offset")).as_py()
        result = self.frame(low, high)
        schema = result.schema
        shaped = result.select(
            F.col("kafka.offset").alias("offset"),
            json_text(F.col("key"), schema["key"].dataType).alias("key"),
            json_text(F.col("value"), schema["value"].dataType).alias("value"),
        ).toArrow()
        offsets = shaped.column("offset").to_pylist()
        if len(set(offsets)) != len(offsets):
            raise DeliveryError("the shaper gave more than one row for a record (at most one)")
        wanted = pc.is_in(shaped.column("offset"), value_set=table.column("offset"))
        shaped = (
            shaped.filter(wanted)
            .select(["offset", "key", "value"])
            .cast(pa.schema([("offset", pa.int64()), ("key", pa.string()), ("value", pa.string())]))
        )
        if "time" in table.column_names:
            times = dict(
                zip(
                    table.column("offset").to_pylist(),
                    table.column("time").to_pylist(),
                    strict=True,
                )
            )
            moments = [times[o] for o in shaped.column("offset").to_pylist()]
            shaped = shaped.append_column("time", pa.array(moments, type=pa.int64()))
        return shaped
