"""The numbering of a pass's outputs: their order, offsets and staging seqnos.

Within each output topic the outputs are ordered as docs/design.md#ordering says (the
ordering columns ``o1..o5``, then key and value for ties) and numbered from the topic's
next offset; staging seqnos follow the pool's last one, topic after topic in name order
(:func:`numbering`). The same numbers are given on the executors (:func:`numbered`, a
window per topic) and on the driver, for outputs a small pass brought along
(:func:`numbered_arrow`); :func:`preview` shows them as a dry run does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from engine.lake.pool_record import AVRO_TYPE, KAFKA_TYPE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: A dry run's output rows.
PREVIEW_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("key", pa.string()),
        pa.field("value", pa.string()),
    ]
)


class TopicNumbers(NamedTuple):
    """One output topic's share of a pass: its first offset and first staging seqno."""

    topic: str
    offset: int
    seqno: int
    outputs: int


def numbering(
    counts: Mapping[str, int], next_offsets: Mapping[str, int], first_seqno: int
) -> list[TopicNumbers]:
    """Per output topic, in name order: ``(topic, first offset, first seqno, outputs)``
    — offsets follow the topic's last one, seqnos run topic after topic."""
    out = []
    start = first_seqno
    for topic, count in sorted(counts.items()):
        out.append(TopicNumbers(topic, next_offsets.get(topic, 0), start, count))
        start += count
    return out


def arange(start: int, count: int) -> pa.Array:
    """``start, start+1, ... start+count-1`` as int64, without a Python loop."""
    if count == 0:
        return pa.array([], pa.int64())
    ones = pc.fill_null(pa.nulls(count, pa.int64()), 1)
    return pc.add(pc.cumulative_sum(ones), start - 1)


def numbered(outputs: DataFrame, numbers: list[TopicNumbers]) -> DataFrame:
    """The outputs as staging rows ``seqno, kafka, key, value, avro`` (plus the order
    columns ``o1..o5``): in design order within each output topic (a window per
    topic, on the executors), numbered from the topic's next offset; seqnos follow
    the pool's last one, topic after topic in name order."""
    from pyspark.sql import Window  # deferred: pyspark
    from pyspark.sql import functions as F  # deferred: pyspark

    bases, starts = [], []
    for topic, base, start, _ in numbers:
        bases += [F.lit(topic), F.lit(base)]
        starts += [F.lit(topic), F.lit(start)]
    # ties (one input giving several outputs of one rule) go by key, then value
    order = Window.partitionBy("out").orderBy("o1", "o2", "o3", "o4", "o5", "key", "value")
    rank = F.row_number().over(order) - 1
    return outputs.select(
        (F.element_at(F.create_map(*starts), F.col("out")) + rank).cast("long").alias("seqno"),
        F.struct(
            F.col("out").alias("topic"),
            F.lit(0).cast("int").alias("partition"),
            (F.element_at(F.create_map(*bases), F.col("out")) + rank)
            .cast("long")
            .alias("offset"),
            F.col("ts").alias("timestamp"),
        ).alias("kafka"),
        "key",
        "value",
        "avro",
        "o1", "o2", "o3", "o4", "o5",
    )


def numbered_arrow(outputs: pa.Table, numbers: list[TopicNumbers]) -> pa.Table:
    """:func:`numbered` for outputs that came to the driver: the same order (Spark's
    ascending order puts NULLs first), offsets and seqnos."""
    keys = ["out", "o1", "o2", "o3", "o4", "o5", "key", "value"]
    outs = outputs.take(
        pc.sort_indices(outputs, sort_keys=[(k, "ascending", "at_start") for k in keys])
    ).combine_chunks()
    pieces, seqnos = [], []
    for _, base, start, count in numbers:
        pieces.append(arange(base, count))
        seqnos.append(arange(start, count))
    kafka = pa.StructArray.from_arrays(
        [
            outs.column("out").cast(pa.string()).combine_chunks(),
            pc.fill_null(pa.nulls(outs.num_rows, pa.int32()), 0),
            pa.concat_arrays(pieces),
            outs.column("ts").cast(pa.timestamp("us", tz="UTC")).combine_chunks(),
        ],
        fields=list(KAFKA_TYPE),
    )
    return pa.table(
        {
            "seqno": pa.concat_arrays(seqnos),
            "kafka": kafka,
            "key": outs.column("key").cast(pa.string()),
            "value": outs.column("value").cast(pa.string()),
            "avro": outs.column("avro").cast(AVRO_TYPE),
            **{c: outs.column(c) for c in ("o1", "o2", "o3", "o4", "o5")},
        }
    )


def preview(table: pa.Table) -> pa.Table:
    """Numbered outputs as a dry run shows them: ``topic, offset, timestamp, key,
    value``, in design order across topics."""
    table = table.take(
        pc.sort_indices(
            table,
            sort_keys=[(c, "ascending") for c in ("o1", "o2", "o3", "o4", "o5", "seqno")],
        )
    )
    kafka = table.column("kafka")
    return pa.table(
        [
            pc.struct_field(kafka, "topic"),
            pc.struct_field(kafka, "offset"),
            pc.struct_field(kafka, "timestamp").cast(pa.timestamp("us", tz="UTC")),
            table.column("key"),
            table.column("value"),
        ],
        schema=PREVIEW_SCHEMA,
    )
