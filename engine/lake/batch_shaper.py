"""Shapers: a Spark SQL SELECT that reshapes records before from-kafka commits them.

``zync from-kafka --shaper FILE.sql`` runs the file's SELECT over the view ``batch``,
which holds one topic's records of the batch as the typed pool record
``kafka struct<topic, partition, offset, timestamp>, key, value`` (key and value parsed
with the types of their schema, so ``value.after.ID`` works). The SELECT returns the rows
to store, with the columns ``kafka``, ``key`` and ``value``::

    SELECT kafka, key, value.after AS value FROM batch WHERE value.op <> 'd'

Rules, checked for every batch (:mod:`engine.lake.shaper_rules`), because the
exactly-once bookkeeping depends on them:

* ``kafka`` comes through unchanged: it must be a struct with ``topic``, ``partition``,
  ``offset`` and ``timestamp``, and every output row's (topic, partition, offset) must be
  one of the batch's input records (dropping rows is fine: a filter; the positions still
  advance past them);
* at most one output row per input record;
* the columns are exactly ``kafka``, ``key`` and ``value``.

A shaper breaking them stops from-kafka with :class:`ShaperError` before anything of the
batch is committed. A shaper that fails at run time on some records (a malformed cast
under ANSI SQL, ``assert_true``, ``raise_error``) is run again on halves of the batch
until the failing records are isolated: they become dead letters (stage ``shaper``), the
others are kept. Too many failures (a shaper that fails on everything) stop instead.

The output's key and value types are recorded as the topic's types in the pool, so SQL
over the pool sees the shaped structure.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from engine.lake.pool_record import KAFKA_TYPE, record_rows
from engine.lake.shaper_rules import COLUMNS, INDEX, ShaperError, check_columns, check_rows

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession
    from pyspark.sql.types import DataType

VIEW = "batch"
STAGE = "shaper"
#: Spark jobs one batch may spend isolating failing records before giving up.
MAX_JOBS_PER_BATCH = 200


@dataclass
class ShapeResult:
    """A shaped batch.

    ``rows``: the output as :data:`~engine.lake.pool_record.ROW_SCHEMA` rows (key and value
    as JSON text), in input order; ``index``: for each output row, the input row it came
    from; ``failures``: (input row, error text) of the records the shaper failed on;
    ``key_type``/``value_type``: the Spark types of the output's key and value.
    """

    rows: pa.Table
    index: list[int]
    failures: list[tuple[int, str]] = field(default_factory=list)
    key_type: DataType | None = None
    value_type: DataType | None = None


class Shaper:
    """One shaper SQL text, applied batch by batch (thread-safe)."""

    def __init__(self, sql: str, *, source: str = "<shaper>") -> None:
        text = sql.strip()
        while text.endswith(";"):
            text = text[:-1].rstrip()
        if not text:
            raise ShaperError(f"{source}: the shaper is empty: write a SELECT over `{VIEW}`")
        first = re.sub(r"^(\s*(--[^\n]*\n|/\*.*?\*/))*\s*", "", text, flags=re.S)
        if not re.match(r"(?i)(select|with|from|values)\b", first):
            raise ShaperError(
                f"{source}: a shaper is one SELECT over the view `{VIEW}` "
                f"(it starts with {first[:20]!r})"
            )
        self.sql = text
        self.source = source
        self._lock = threading.Lock()
        self._session: SparkSession | None = None

    def __repr__(self) -> str:
        return f"Shaper({self.source!r})"

    @classmethod
    def from_file(cls, path: str | Path) -> Shaper:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ShaperError(f"cannot read the shaper {path}: {reason}") from None
        return cls(text, source=str(path))

    # -- checks -------------------------------------------------------------------------

    def check_syntax(self, spark: SparkSession) -> None:
        """Parse the SQL (no data, no types needed); :class:`ShaperError` if it is not SQL."""
        # deferred: pyspark
        from pyspark.errors import ParseException

        session = self._session_of(spark)
        try:
            session._jsparkSession.sessionState().sqlParser().parsePlan(self.sql)
        except ParseException as exc:
            raise ShaperError(f"{self.source}: {_first_line(exc)}") from None
        except Exception:  # noqa: BLE001 - not a classic session: analysis will tell
            return

    def _session_of(self, spark: SparkSession) -> SparkSession:
        if self._session is None:
            # a session of its own: the temp view `batch` never clashes with others
            self._session = spark.newSession()
        return self._session

    # -- applying -----------------------------------------------------------------------

    def apply(
        self,
        spark: SparkSession,
        rows: pa.Table,
        key_type: DataType | None,
        value_type: DataType | None,
    ) -> ShapeResult:
        """Shape ``rows`` (records with ``kafka``, ``key``, ``value`` JSON text)."""
        rows = rows.select(list(COLUMNS))
        with self._lock:
            session = self._session_of(spark)
            jobs = [0]
            outputs: list[pa.Table] = []
            failures: list[tuple[int, str]] = []
            types: list[tuple[Any, Any]] = []
            indexed = rows.append_column(INDEX, pa.array(range(rows.num_rows), pa.int64()))
            self._shape(session, indexed, key_type, value_type, outputs, failures, types, jobs)
        if outputs:
            shaped = pa.concat_tables(outputs).sort_by(INDEX)
        else:
            shaped = pa.table(
                {"kafka": pa.array([], KAFKA_TYPE), "key": pa.array([], pa.string()),
                 "value": pa.array([], pa.string()), INDEX: pa.array([], pa.int64())}
            )
        index = shaped.column(INDEX).to_pylist()
        table = record_rows(shaped.column("kafka"), shaped.column("key"), shaped.column("value"))
        key_out, value_out = types[0] if types else (key_type, value_type)
        return ShapeResult(table, index, sorted(failures), key_out, value_out)

    def _shape(
        self,
        session: SparkSession,
        rows: pa.Table,
        key_type: DataType | None,
        value_type: DataType | None,
        outputs: list[pa.Table],
        failures: list[tuple[int, str]],
        types: list[tuple[Any, Any]],
        jobs: list[int],
    ) -> None:
        # deferred: pyspark
        from py4j.protocol import Py4JJavaError
        from pyspark.errors.exceptions.captured import AnalysisException, CapturedException

        if rows.num_rows == 0:
            return
        jobs[0] += 1
        if jobs[0] > MAX_JOBS_PER_BATCH:
            first = failures[0][1] if failures else "(none isolated yet)"
            raise ShaperError(
                f"{self.source}: the shaper fails on too many records of a batch "
                f"({len(failures)} isolated after {MAX_JOBS_PER_BATCH} Spark jobs); "
                f"first error: {first}"
            )
        try:
            out, out_types = self._run(session, rows, key_type, value_type)
        except AnalysisException as exc:
            raise ShaperError(f"{self.source}: {_first_line(exc)}") from None
        except (CapturedException, Py4JJavaError) as exc:
            if rows.num_rows == 1:
                failures.append((int(rows.column(INDEX)[0].as_py()), _first_line(exc)))
                return
            half = rows.num_rows // 2
            for part in (rows.slice(0, half), rows.slice(half)):
                self._shape(session, part, key_type, value_type, outputs, failures, types, jobs)
            return
        outputs.append(out)
        if not types:
            types.append(out_types)

    def _run(
        self,
        session: SparkSession,
        rows: pa.Table,
        key_type: DataType | None,
        value_type: DataType | None,
    ) -> tuple[pa.Table, tuple[Any, Any]]:
        # deferred: pyspark
        from pyspark.sql import functions as F

        from engine.sparktypes import parse_json_column

        frame = session.createDataFrame(rows.select(list(COLUMNS)))
        frame.select(
            "kafka",
            parse_json_column(F.col("key"), key_type).alias("key"),
            parse_json_column(F.col("value"), value_type).alias("value"),
        ).createOrReplaceTempView(VIEW)
        out = session.sql(self.sql)
        check_columns(out, self.source)
        out_types = (out.schema["key"].dataType, out.schema["value"].dataType)
        kafka = F.struct(  # by name: a struct cast would go by position
            F.col("kafka.topic").cast("string").alias("topic"),
            F.col("kafka.partition").cast("int").alias("partition"),
            F.col("kafka.offset").cast("bigint").alias("offset"),
            F.col("kafka.timestamp").cast("timestamp").alias("timestamp"),
        )
        result = out.select(
            F.when(F.col("kafka").isNull(), F.lit(None)).otherwise(kafka).alias("kafka"),
            _json_text(F.col("key"), out_types[0]).alias("key"),
            _json_text(F.col("value"), out_types[1]).alias("value"),
        ).toArrow()
        return check_rows(result, rows, self.source), out_types

def _json_text(column: Column, data_type: DataType) -> Column:
    """The JSON text of a column of any type (NULL stays NULL)."""
    # deferred: pyspark
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, NullType, StructType

    if isinstance(data_type, NullType):
        return F.lit(None).cast("string")
    if isinstance(data_type, StructType | ArrayType | MapType):
        return F.to_json(column)
    # to_json takes structs only: wrap the scalar and cut `{"v":X}` down to X
    wrapped = F.to_json(F.struct(column.alias("v")))
    return F.when(column.isNull(), F.lit(None).cast("string")).otherwise(
        F.regexp_extract(wrapped, r'^\{"v":(.*)\}$', 1)
    )


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "desc", None) or exc).strip()
    for prefix in ("An error occurred while calling",):
        if text.startswith(prefix) and "\n" in text:
            text = text.split("\n", 1)[1].lstrip(": ")
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:500]
