"""The window a long-running ETL keeps between passes, so a pass costs what is new.

A cold pass reads, through Spark and Delta, the input rows above the cursors (from the
raw files at or after each pool's seqno floor) and this ETL's markers above the cursors
(:mod:`engine.etl.read`). After a pass that committed, the next pass would read exactly:

* the rows of the last read that are still at or after the new floors and above the new
  cursors, plus the raw rows committed since (a higher seqno);
* the markers of the last read, plus those the pass just committed, above the new
  cursors and at or after the new marker floor.

:class:`Window` keeps both as Arrow tables, so a warm pass reads only the new raw rows
(through delta-rs, from the files whose statistics say they hold them) and evaluates the
rules over a small in-memory frame — the same rows, the same fates, the same commit.

The window is only as good as its assumption that nobody else changed staging: it is
used only while staging is still at the version this ETL's own commit made, each raw
pool is the same table (same id) at or after the version read, and no pool needs a
reader feature zync does not read itself (deletion vectors, column mapping). Anything
else — a restart, another process's commit, a user's OPTIMIZE on staging — drops it, and
the next pass is cold (docs/design.md#exactly-once-etl). A window larger than
:data:`WINDOW_ROWS` rows is not kept: big passes stay on Spark.

Without a window (the first pass of a process, or after the window was dropped), a pass
whose input is small — the files it would read hold at most :data:`LOG_READ_ROWS` rows,
by the Delta log's statistics — reads it the same way, with delta-rs
(:func:`log_read`): no Spark read of the Delta log, which is most of a cold pass's time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from engine.etl import markers as mk
from engine.etl.config import EtlConfig
from engine.etl.cursors import Positions, TopicPartition
from engine.etl.plan import Plan, new_marker_positions
from engine.lake import delta
from engine.lake.delta import arrow_schema, parquet_dataset
from engine.lake.pool_record import KAFKA_TYPE
from engine.lake.pools import Pool

#: The most input rows (plus markers) a window holds; above, passes read cold.
WINDOW_ROWS = 50_000
#: Up to this many rows in the files a cold pass would read (raw files at or after the
#: floors, staging files at or after the marker floor), delta-rs reads them.
LOG_READ_ROWS = 10_000

#: The rows a pass evaluates (what :func:`engine.etl.read.fresh_records` gives Spark).
FRESH_SCHEMA = pa.schema(
    [
        pa.field("pool", pa.string()),
        pa.field("seqno", pa.int64()),
        pa.field("kafka", KAFKA_TYPE),
        pa.field("key", pa.string()),
        pa.field("value", pa.string()),
        pa.field("__dead", pa.bool_()),
    ]
)


@dataclass(frozen=True)
class RawMark:
    """How far a window has read one raw pool: the table, its version, its last seqno."""

    table_id: str
    version: int
    last_seqno: int


@dataclass(frozen=True)
class Window:
    """The rows and markers a warm pass starts from (see the module docstring)."""

    staging_version: int
    raw: Mapping[str, RawMark]
    rows: pa.Table
    done: pa.Table

    @property
    def size(self) -> int:
        return int(self.rows.num_rows + self.done.num_rows)


def raw_mark(pool: Pool) -> RawMark:
    # delta-rs annotates the table id as int; it is the table's UUID text
    return RawMark(str(pool.table.metadata().id), pool.version, pool.last_seqno())


def readable(pool: Pool) -> bool:
    """True when the pool's files can be read as plain Parquet (no deletion vectors or
    column mapping: reader version 1)."""
    return pool.table.protocol().min_reader_version < 2


def _rows_after(
    pool: Pool, seqno: int, columns: Mapping[str, pc.Expression], condition: pc.Expression
) -> pa.Table | None:
    """``columns`` of the rows with a seqno above ``seqno`` that meet ``condition``, read
    with delta-rs and pyarrow from the files of the pool's loaded snapshot that may hold
    them (None: no such file)."""
    if pool.last_seqno() <= seqno:
        return None
    files = pool.files(f"seqno > {seqno}")
    if not files:
        return None
    dataset = parquet_dataset(pool.location, files, arrow_schema(pool.table))
    return dataset.scanner(
        columns=dict(columns), filter=(pc.field("seqno") > seqno) & condition
    ).to_table()


def new_rows(pool_name: str, pool: Pool, after_seqno: int, topics: list[str]) -> pa.Table:
    """The raw rows of ``topics`` with a seqno above ``after_seqno`` in the pool's loaded
    snapshot (:data:`FRESH_SCHEMA`)."""
    found = _rows_after(
        pool,
        after_seqno,
        {
            "seqno": pc.field("seqno"),
            "kafka": pc.field("kafka"),
            "key": pc.field("key"),
            "value": pc.field("value"),
            "__dead": pc.field("deadletter", "stage").is_valid(),
        },
        pc.field("marker", "etl").is_null() & pc.field("kafka", "topic").isin(topics),
    )
    if found is None:
        return FRESH_SCHEMA.empty_table()
    pools = pa.array([pool_name] * found.num_rows, pa.string())
    return pa.table(
        {
            "pool": pools,
            "seqno": found.column("seqno"),
            "kafka": found.column("kafka").cast(KAFKA_TYPE),
            "key": found.column("key"),
            "value": found.column("value"),
            "__dead": found.column("__dead"),
        },
        schema=FRESH_SCHEMA,
    )


def above_cursors(table: pa.Table, cursors: Mapping[TopicPartition, int]) -> pa.Table:
    """Rows of ``table`` (with ``topic, partition, offset`` columns) above their cursor."""
    if table.num_rows == 0 or not cursors:
        return table
    limits = pa.table(
        {
            "topic": pa.array([t for t, _ in cursors], pa.string()),
            "partition": pa.array([p for _, p in cursors], pa.int32()),
            "__cursor": pa.array(list(cursors.values()), pa.int64()),
        }
    )
    index = pa.table(
        {
            "topic": table.column("topic").cast(pa.string()),
            "partition": table.column("partition").cast(pa.int32()),
            "offset": table.column("offset").cast(pa.int64()),
            "__row": pa.array(range(table.num_rows), pa.int64()),
        }
    )
    joined = index.join(limits, keys=["topic", "partition"], join_type="left outer")
    keep = pc.greater(joined.column("offset"), pc.fill_null(joined.column("__cursor"), -1))
    rows = pc.sort_indices(joined.filter(keep).column("__row"))
    return table.take(joined.filter(keep).column("__row").take(rows))


def rows_above(rows: pa.Table, cursors: Mapping[TopicPartition, int]) -> pa.Table:
    """Input rows (``FRESH_SCHEMA``) above their partition's cursor, in their order."""
    if rows.num_rows == 0 or not cursors:
        return rows
    kafka = rows.column("kafka")
    index = pa.table(
        {
            "topic": pc.struct_field(kafka, "topic"),
            "partition": pc.struct_field(kafka, "partition"),
            "offset": pc.struct_field(kafka, "offset"),
            "__i": pa.array(range(rows.num_rows), pa.int64()),
        }
    )
    return rows.take(above_cursors(index, cursors).column("__i"))


def next_window(
    read: pa.Table,
    done: pa.Table,
    plan: Plan,
    staging_version: int,
    marks: Mapping[str, RawMark],
) -> Window | None:
    """The window after ``plan`` was committed as ``staging_version`` (or found nothing
    to commit): ``read`` (the rows the pass evaluated) and ``done`` (the markers it
    started from) moved past the cursors and floors now in staging, with the pass's own
    markers added. None when it would be larger than :data:`WINDOW_ROWS`."""
    after: Positions = plan.positions if plan.empty else plan.after
    floors = pa.array(
        [after.floors.get(p, 0) for p in read.column("pool").to_pylist()], pa.int64()
    ) if read.num_rows else pa.array([], pa.int64())
    rows = read.filter(pc.greater_equal(read.column("seqno"), floors)) if read.num_rows else read
    rows = rows_above(rows, after.cursors)
    markers = pa.concat_tables(
        [done.select(mk.DONE_SCHEMA.names).cast(mk.DONE_SCHEMA), new_marker_positions(plan)]
    )
    markers = above_cursors(markers, after.cursors)
    markers = markers.filter(pc.greater_equal(markers.column("seqno"), after.marker_floor))
    window = Window(staging_version, dict(marks), rows, markers)
    return window if window.size <= WINDOW_ROWS else None


def markers_above(
    staging: Pool, etl: str, cursors: Mapping[TopicPartition, int], topics: list[str],
    marker_floor: int,
) -> pa.Table:
    """``topic, partition, offset, seqno`` (:data:`engine.etl.markers.DONE_SCHEMA`) of
    the ETL's markers above the cursors, from the staging files at or after the marker
    floor — what :func:`engine.etl.markers.done_above` gives in Spark."""
    found = _rows_after(
        staging,
        marker_floor - 1,
        {
            "topic": pc.field("marker", "topic"),
            "partition": pc.field("marker", "partition"),
            "offset": pc.field("marker", "offset"),
            "seqno": pc.field("seqno"),
        },
        (pc.field("marker", "etl") == etl) & pc.field("marker", "topic").isin(topics),
    )
    if found is None:
        return mk.DONE_SCHEMA.empty_table()
    return above_cursors(found, cursors).select(mk.DONE_SCHEMA.names).cast(mk.DONE_SCHEMA)


def log_read(
    config: EtlConfig, raws: Mapping[str, Pool], staging: Pool, positions: Positions
) -> tuple[pa.Table, pa.Table] | None:
    """A cold pass's input — the rows above the cursors at or after the floors, and the
    markers above the cursors — read with delta-rs, or None when Spark should read it
    (more than :data:`LOG_READ_ROWS` rows to look at, or a reader feature zync does
    not read itself)."""
    if not readable(staging) or not all(readable(pool) for pool in raws.values()):
        return None
    estimate = sum(
        delta.rows_from(pool.table, "seqno", positions.floor(name))
        for name, pool in raws.items()
        if pool.last_seqno() >= positions.floor(name)
    )
    if staging.last_seqno() >= positions.marker_floor:
        estimate += delta.rows_from(staging.table, "seqno", positions.marker_floor)
    if estimate > LOG_READ_ROWS:
        return None
    parts = [FRESH_SCHEMA.empty_table()]
    for name, pool in raws.items():
        topics = [i.topic for i in config.inputs if i.pool == name]
        fresh = new_rows(name, pool, positions.floor(name) - 1, topics)
        parts.append(rows_above(fresh, positions.cursors))
    done = markers_above(
        staging, config.name, positions.cursors, config.input_topics, positions.marker_floor
    )
    return pa.concat_tables(parts), done
