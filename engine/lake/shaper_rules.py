"""The rules a shaper's output keeps, checked on every batch before from-kafka commits it.

A shaper (:mod:`engine.lake.batch_shaper`) returns exactly the columns ``kafka``, ``key``
and ``value``; ``kafka`` comes through unchanged (a struct of topic, partition, offset and
timestamp) and names one of the batch's input records; no input record gives more than
one output row. from-kafka's exactly-once positions depend on them: a shaper that
breaks one stops with :class:`ShaperError` before anything of the batch is committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ZyncError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The columns a shaper returns, and the fields of its ``kafka`` struct.
COLUMNS = ("kafka", "key", "value")
KAFKA_FIELDS = ("topic", "partition", "offset", "timestamp")
#: The column that carries each row's input index through a shaped batch.
INDEX = "__zync_index"


class ShaperError(ZyncError):
    """The shaper is not valid SQL or breaks the rules above; the message says how."""


def check_columns(out: DataFrame, source: str) -> None:
    """The output has exactly the columns kafka, key and value, ``kafka`` unchanged."""
    # deferred: pyspark
    from pyspark.sql.types import StructType

    names = [f.name for f in out.schema.fields]
    missing = [c for c in COLUMNS if c not in names]
    extra = [c for c in names if c not in COLUMNS]
    if "kafka" in missing:
        raise ShaperError(
            f"{source}: the shaper dropped the `kafka` column; keep it as it is "
            "(from-kafka's exactly-once positions depend on it)"
        )
    if missing or extra or len(names) != len(set(names)):
        raise ShaperError(
            f"{source}: a shaper returns exactly the columns kafka, key and value "
            f"(it returned {', '.join(names)})"
        )
    kafka = out.schema["kafka"].dataType
    fields = [f.name for f in kafka.fields] if isinstance(kafka, StructType) else []
    if sorted(fields) != sorted(KAFKA_FIELDS):
        raise ShaperError(
            f"{source}: the shaper rewrote the `kafka` column (it must stay "
            f"struct<topic, partition, offset, timestamp>; got {kafka.simpleString()})"
        )


def check_rows(result: pa.Table, rows: pa.Table, source: str) -> pa.Table:
    """The output's (topic, partition, offset) set is within the input's, no repeats;
    returns the output with each row's input index."""

    def flat(table: pa.Table) -> pa.Table:
        kafka = table.column("kafka")
        return pa.table(
            {
                "t": pc.struct_field(kafka, "topic"),
                "p": pc.struct_field(kafka, "partition"),
                "o": pc.struct_field(kafka, "offset"),
            }
        )

    out_keys = flat(result).append_column("__row", pa.array(range(result.num_rows), pa.int64()))
    in_keys = flat(rows).append_column(INDEX, rows.column(INDEX))
    joined = out_keys.join(in_keys, ["t", "p", "o"], join_type="left outer")
    unknown = joined.filter(pc.is_null(joined.column(INDEX)))
    if unknown.num_rows:
        row = unknown.slice(0, 1).to_pylist()[0]
        raise ShaperError(
            f"{source}: the shaper rewrote `kafka`: it returned a row for "
            f"{row['t']}[{row['p']}] offset {row['o']}, which is not one of its input "
            "records (keep the kafka column as it is)"
        )
    if (
        joined.num_rows != result.num_rows
        or len(pc.unique(joined.column("__row"))) != result.num_rows
        or len(pc.unique(joined.column(INDEX))) != joined.num_rows
    ):
        raise ShaperError(
            f"{source}: the shaper returned more than one row for an input record "
            "(a shaper keeps, changes or drops each record; use an ETL rule to fan out)"
        )
    joined = joined.sort_by("__row")
    return result.append_column(INDEX, joined.column(INDEX))
