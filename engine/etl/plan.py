"""A planned pass before its commit, and the driver's decisions that make it.

Spark evaluates the rules (:mod:`engine.etl.evaluate`) and brings the driver every
candidate's fate and the number of outputs per output topic. :func:`decide` then, on
the driver and vectorized over the fates (no per-row Python): decides expiry
(:mod:`engine.etl.expiry`), advances cursors and floors, reserves each output topic's
next offsets and the staging seqnos, and makes the marker rows. The result is a
:class:`Plan`: the positions before and after, the marker rows and, on the executors or
brought along, the outputs; it counts what the pass did (:meth:`Plan.result`) and gives
the rows the driver commits and a dry run's preview.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from engine.etl import markers as mk
from engine.etl.cursors import Positions, TopicPartition
from engine.etl.etl_pools import EtlPools
from engine.etl.expiry import apply_expiry, newest_timestamps
from engine.etl.numbering import (
    PREVIEW_SCHEMA,
    TopicNumbers,
    arange,
    numbered,
    numbered_arrow,
    numbering,
    preview,
)
from engine.etl.plan_context import DEAD, FATE_COLUMNS, PENDING
from engine.etl.result import PassResult
from engine.etl.spark_errors import quiet_spark_errors
from engine.lake.pool_record import EXPIRED, PROCESSED, ROW_SCHEMA, fit_rows, record_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.lake.pools import Pool

#: The fate rows the driver decides over.
FATES_SCHEMA = pa.schema(
    [
        pa.field("pool", pa.string()),
        pa.field("seqno", pa.int64()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("rule", pa.string()),
        pa.field("ri", pa.int32()),
        pa.field("bundle", pa.string()),
        pa.field("status", pa.string()),
    ]
)


#: Where a pass's input came from: delta-spark, the window kept since the last pass, or
#: delta-rs reading a small input from the Delta log.
ReadFrom = Literal["spark", "window", "log"]


@dataclass
class Plan:
    """A planned pass, before its commit."""

    positions: Positions
    after: Positions
    #: Marker rows (the outputs stay on the executors: :attr:`outputs`).
    rows: pa.Table
    decided: pa.Table
    pending: pa.Table
    #: Outputs per output topic.
    counts: dict[str, int]
    moved: dict[TopicPartition, int]
    #: The outputs (columns :data:`engine.etl.plan_context.OUTPUT_COLUMNS`), kept on
    #: the executors until :meth:`release`; None when there are none or they came to the
    #: driver.
    outputs: DataFrame | None = None
    #: The outputs, when a small pass brought them to the driver.
    local_outputs: pa.Table | None = None
    #: The first staging seqno of this plan's outputs (the markers follow them).
    first_seqno: int = 0
    #: Frees the kept outputs once written.
    release_result: Callable[[], None] | None = None
    #: What the pass read: the input rows (a Spark frame when read cold, Arrow when read
    #: from the window) and this ETL's markers above the cursors; see engine.etl.window.
    fresh: DataFrame | None = None
    read_rows: pa.Table | None = None
    #: Where the pass's input came from (in memory for ``window`` and ``log``:
    #: engine.etl.evaluate.WarmRead).
    read_from: ReadFrom = "spark"
    done: pa.Table | None = None
    #: Frees the kept cold input (:attr:`fresh`).
    release_read: Callable[[], Any] | None = None

    @property
    def empty(self) -> bool:
        return self.rows.num_rows == 0 and not self.counts and not self.moved

    def numbering(self) -> list[TopicNumbers]:
        """Per output topic, in name order: its first offset and first staging seqno
        (:func:`engine.etl.numbering.numbering`)."""
        return numbering(self.counts, self.positions.next_offsets, self.first_seqno)

    def result(self, etl: str, *, dry_run: bool, attempts: int) -> PassResult:
        """What this plan makes the pass do, counted per topic and per rule."""
        result = PassResult(etl, dry_run=dry_run, attempts=attempts)
        result.read_version = result.staging_version = self.positions.staging_version
        result.consumed = mk.count_by(self.decided, "topic")
        result.processed = mk.count_by(mk.where_status(self.decided, PROCESSED), "topic")
        result.expired = mk.count_by(mk.where_status(self.decided, EXPIRED), "topic")
        result.pending = mk.count_by(self.pending, "topic")
        result.expired_rules = _by_rule(mk.where_status(self.decided, EXPIRED))
        result.pending_rules = _by_rule(self.pending)
        result.outputs = dict(self.counts)
        for topic in result.outputs:
            first = self.positions.next_offsets.get(topic, 0)
            result.offsets[topic] = (first, self.after.next_offsets[topic] - 1)
        result.cursors = dict(self.after.cursors)
        result.moved = self.moved
        return result

    def driver_rows(self, staging: Pool) -> pa.Table:
        """The rows the driver commits to ``staging``: the outputs a small pass brought to
        the driver (numbered), then the marker rows."""
        if self.local_outputs is None:
            return self.rows
        numbered_rows = numbered_arrow(self.local_outputs, self.numbering())
        outputs = record_rows(
            numbered_rows.column("kafka"),
            numbered_rows.column("key"),
            numbered_rows.column("value"),
            numbered_rows.column("avro"),
        )
        schema = staging.row_schema
        return pa.concat_tables([fit_rows(outputs, schema), fit_rows(self.rows, schema)])

    def preview(self) -> pa.Table:
        """A dry run's outputs ``topic, offset, timestamp, key, value``, in design order
        across topics (collected: a dry run is a preview)."""
        if self.local_outputs is not None:
            table = numbered_arrow(self.local_outputs, self.numbering())
        elif self.outputs is not None:
            with quiet_spark_errors():
                table = numbered(self.outputs, self.numbering()).toArrow()
        else:
            return PREVIEW_SCHEMA.empty_table()
        return preview(table)

    def release(self) -> None:
        if self.release_result is not None:
            self.release_result()
            self.release_result = None
        if self.release_read is not None:
            self.release_read()
            self.release_read = None


def _by_rule(fates: pa.Table) -> dict[str, int]:
    """Rows per rule label (``(no rule)`` for records no rule matched)."""
    if fates.num_rows == 0 or "rule" not in fates.column_names:
        return {}
    rules = fates.column("rule").fill_null("(no rule)")
    return mk.count_by(pa.table({"rule": rules}), "rule")


def empty_plan(positions: Positions) -> Plan:
    fates_ = FATES_SCHEMA.empty_table()
    return Plan(positions, positions, ROW_SCHEMA.empty_table(), fates_, fates_, {}, {})


def decide(
    pools: EtlPools, positions: Positions, done: pa.Table, fates_: pa.Table, counts: dict[str, int]
) -> Plan:
    """Expiry, cursors, floors, the output topics' next offsets (``counts``: outputs
    per topic), marker rows — on the driver, vectorized over the collected fates."""
    config = pools.config
    read = _settle(fates_.select(list(FATE_COLUMNS)).cast(FATES_SCHEMA))
    if read.num_rows == 0 and done.num_rows == 0:
        return empty_plan(positions)
    # (with only done markers read, the cursors may still move past them)
    newest = newest_timestamps(read, positions.newest)
    is_dead = pc.equal(read.column("status"), DEAD)
    fates_ = apply_expiry(read.filter(pc.invert(is_dead)), config, newest)
    is_pending = pc.equal(fates_.column("status"), PENDING)
    pending = fates_.filter(is_pending)
    decided = fates_.filter(pc.invert(is_pending)).sort_by(
        [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
    )

    after = Positions(
        etl=positions.etl,
        staging_version=positions.staging_version,
        cursors=dict(positions.cursors),
        parts=dict(positions.parts),
        next_offsets=dict(positions.next_offsets),
        floors=dict(positions.floors),
        marker_floor=positions.marker_floor,
        newest=newest,
    )
    # cursors: up to the first pending offset, else to the last offset read
    seen = pa.concat_tables(
        [
            read.select(["topic", "partition", "offset"]),
            done.select(["topic", "partition", "offset"]),
        ]
    )
    last_read = _max_by(seen, ["topic", "partition"], "offset")
    first_pending = _min_by(pending, ["topic", "partition"], "offset")
    moved: dict[TopicPartition, int] = {}
    for (topic, partition), max_offset in sorted(last_read.items()):
        waiting = first_pending.get((topic, partition))
        cursor = waiting - 1 if waiting is not None else max_offset
        old = positions.cursors.get((topic, partition))
        if cursor >= 0 and (old is None or cursor > old):
            after.cursors[(topic, partition)] = cursor
            moved[(topic, partition)] = cursor
        after.parts[topic] = max(after.parts.get(topic, 0), partition + 1)
    # raw floors: the oldest pending seqno, else past everything of the snapshot
    oldest_pending = _min_by(pending, ["pool"], "seqno")
    for pool_name in config.raw_pools:
        waiting = oldest_pending.get((pool_name,))
        floor = waiting if waiting is not None else pools.raw(pool_name).last_seqno() + 1
        after.floors[pool_name] = max(floor, positions.floor(pool_name))

    for topic, count in sorted(counts.items()):
        after.next_offsets[topic] = after.next_offsets.get(topic, 0) + count
    outputs = sum(counts.values())
    rows = mk.marker_rows(config.name, decided)
    first_seqno = pools.staging.last_seqno() + 1
    after.marker_floor = _marker_floor(
        done, decided, after.cursors, first_seqno + outputs, first_seqno + outputs + rows.num_rows
    )
    return Plan(positions, after, rows, decided, pending, counts, moved, first_seqno=first_seqno)


def _settle(read: pa.Table) -> pa.Table:
    """One fate row per record: ``processed`` wins over ``pending`` (a denorm right
    row is listed once as a candidate and once per pair it is in)."""
    if read.num_rows == 0:
        return read
    keys = [n for n in read.column_names if n != "status"]
    # "processed" > "pending"; "dead" rows are never listed twice
    grouped = read.group_by(keys, use_threads=False).aggregate([("status", "max")])
    columns = {n: grouped.column(n) for n in keys}
    columns["status"] = grouped.column("status_max")
    return pa.table({n: columns[n] for n in read.column_names}).cast(FATES_SCHEMA)


def _max_by(table: pa.Table, keys: list[str], column: str) -> dict[tuple[Any, ...], int]:
    if table.num_rows == 0:
        return {}
    grouped = table.group_by(keys).aggregate([(column, "max")])
    columns = [grouped.column(k).to_pylist() for k in keys]
    values = grouped.column(f"{column}_max").to_pylist()
    return {tuple(col[i] for col in columns): value for i, value in enumerate(values)}


def _min_by(table: pa.Table, keys: list[str], column: str) -> dict[tuple[Any, ...], int]:
    if table.num_rows == 0:
        return {}
    grouped = table.group_by(keys).aggregate([(column, "min")])
    columns = [grouped.column(k).to_pylist() for k in keys]
    values = grouped.column(f"{column}_min").to_pylist()
    return {tuple(col[i] for col in columns): value for i, value in enumerate(values)}


def marker_positions(decided: pa.Table, first_marker_seqno: int) -> pa.Table:
    """``topic, partition, offset, seqno`` of the markers made for ``decided`` (in its
    order), whose staging seqnos start at ``first_marker_seqno``."""
    return pa.table(
        {
            "topic": decided.column("topic").cast(pa.string()),
            "partition": decided.column("partition").cast(pa.int32()),
            "offset": decided.column("offset").cast(pa.int64()),
            "seqno": arange(first_marker_seqno, decided.num_rows),
        }
    ).cast(mk.DONE_SCHEMA)


def new_marker_positions(plan: Plan) -> pa.Table:
    """The markers ``plan`` commits, as ``topic, partition, offset, seqno``."""
    return marker_positions(plan.decided, plan.first_seqno + sum(plan.counts.values()))


def _marker_floor(
    done: pa.Table,
    decided: pa.Table,
    cursors: Mapping[TopicPartition, int],
    first_marker_seqno: int,
    next_seqno: int,
) -> int:
    """The staging seqno of the oldest of this ETL's markers above the new cursors
    (``next_seqno`` when there is none)."""
    new_markers = marker_positions(decided, first_marker_seqno)
    every = pa.concat_tables(
        [done.select(new_markers.column_names).cast(new_markers.schema), new_markers]
    )
    if every.num_rows == 0:
        return next_seqno
    limits = pa.table(
        {
            "topic": pa.array([t for t, _ in cursors], pa.string()),
            "partition": pa.array([p for _, p in cursors], pa.int32()),
            "cursor": pa.array(list(cursors.values()), pa.int64()),
        }
    )
    joined = every.join(limits, keys=["topic", "partition"], join_type="left outer")
    above = joined.filter(
        pc.greater(joined.column("offset"), pc.fill_null(joined.column("cursor"), -1))
    )
    if above.num_rows == 0:
        return next_seqno
    return int(pc.min(above.column("seqno")).as_py())
