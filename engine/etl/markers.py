"""Completion markers: staging rows saying an input record was consumed by a rule.

A marker row has NULL ``kafka``/``key``/``value`` and
``marker = {etl, rule, topic, partition, offset, status}`` with status ``processed`` or
``expired`` (:mod:`engine.lake.pool_record`). ``rule`` is the rule's name (or its 1-based
position in the file); it is NULL for a record no rule matched.

Markers at or below an input's cursor never need reading again: the cursor covers
them. A pass reads only the staging files that may hold this ETL's markers above the
cursors — ``seqno >= marker-floor`` (:mod:`engine.etl.cursors`), pruned by Delta
statistics — to leave out records that are done but above the cursor (for example a
denorm right row matched while an older left row still waits).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.etl.cursors import TopicPartition, cursor_filter
from engine.etl.sql import quote
from engine.lake import delta
from engine.lake.pool_record import (
    DEADLETTER_TYPE,
    EXPIRED,
    KAFKA_TYPE,
    MARKER_TYPE,
    ROW_SCHEMA,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from engine.lake.pools import Pool

#: The columns of done markers a pass collects.
DONE_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("seqno", pa.int64()),
    ]
)


def markers_of(spark: SparkSession, staging: Pool, etl: str, *, min_seqno: int | None = None) -> DataFrame:
    """This ETL's marker rows of the staging snapshot (files pruned by ``min_seqno``)."""
    predicate = f"seqno >= {int(min_seqno)}" if min_seqno else None
    df = delta.read_spark(spark, staging.table, predicate)
    return df.where(f"marker IS NOT NULL AND marker.etl = {quote(etl)}")


def done_above(
    spark: SparkSession,
    staging: Pool,
    etl: str,
    cursors: Mapping[TopicPartition, int],
    topics: list[str],
    marker_floor: int,
) -> DataFrame:
    """``topic, partition, offset, seqno`` of this ETL's markers above the cursors."""
    df = markers_of(spark, staging, etl, min_seqno=marker_floor)
    above = cursor_filter(cursors, topics, column="marker")
    return df.where(above).select(
        "marker.topic", "marker.partition", "marker.offset", "seqno"
    )


def marker_rows(etl: str, decided: pa.Table) -> pa.Table:
    """Staging rows (:data:`ROW_SCHEMA`) for fates ``topic, partition, offset, rule,
    status``."""
    n = decided.num_rows
    decided = decided.combine_chunks()
    marker = pa.StructArray.from_arrays(
        [
            pa.array([etl] * n, pa.string()) if n else pa.array([], pa.string()),
            _array(decided, "rule", pa.string()),
            _array(decided, "topic", pa.string()),
            _array(decided, "partition", pa.int32()),
            _array(decided, "offset", pa.int64()),
            _array(decided, "status", pa.string()),
        ],
        fields=list(MARKER_TYPE),
    )
    return pa.Table.from_arrays(
        [
            null_kafka(n),
            pa.nulls(n, pa.string()),
            pa.nulls(n, pa.string()),
            pa.nulls(n, DEADLETTER_TYPE),
            marker,
        ],
        schema=ROW_SCHEMA,
    )


def null_kafka(n: int) -> pa.StructArray:
    """``n`` NULL ``kafka`` structs whose non-nullable children hold placeholders (a
    NULL struct built by ``pa.nulls`` cannot be cast to the pool schema)."""
    return pa.StructArray.from_arrays(
        [
            pc.fill_null(pa.nulls(n, pa.string()), ""),
            pc.fill_null(pa.nulls(n, pa.int32()), 0),
            pc.fill_null(pa.nulls(n, pa.int64()), 0),
            pa.nulls(n, pa.timestamp("us", tz="UTC")),
        ],
        fields=list(KAFKA_TYPE),
        mask=pc.is_null(pa.nulls(n, pa.bool_())),
    )


def _array(table: pa.Table, name: str, type_: pa.DataType) -> pa.Array:
    column = table.column(name).cast(type_)
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)


def expired_marker_rows(staging: Pool, etl: str) -> pa.Table:
    """``topic, partition, offset, rule, seqno`` of this ETL's expired markers in the
    loaded staging snapshot, read by delta-rs (the ``seqno`` and ``marker`` columns only,
    no Spark): for inspection, not for a pass."""
    import pyarrow.dataset as ds  # deferred, like pyarrow's other optional modules

    wanted = (ds.field("marker", "etl") == etl) & (ds.field("marker", "status") == EXPIRED)
    table = staging.dataset().to_table(columns=["seqno", "marker"], filter=wanted)
    marker = table.column("marker")
    return pa.table(
        {
            **{name: pc.struct_field(marker, name) for name in ("topic", "partition", "offset", "rule")},
            "seqno": table.column("seqno"),
        }
    )


def count_by(table: pa.Table, column: str) -> dict[str, int]:
    """``{value: rows}`` of a string column."""
    if table.num_rows == 0:
        return {}
    grouped = table.group_by(column).aggregate([([], "count_all")])
    return dict(
        zip(grouped.column(column).to_pylist(), grouped.column("count_all").to_pylist(), strict=True)
    )


def where_status(table: pa.Table, *statuses: str) -> pa.Table:
    mask = pc.is_in(table.column("status"), pa.array(list(statuses), pa.string()))
    return table.filter(mask)
