"""What a pool holds, as plain Python read models: the summary `zync pool ls` lists, the
report `zync pool show` prints (types, per topic/partition offsets and dead letters, the
last commits), and the counts and outputs the demo waits on.

Every read here goes through delta-rs and pyarrow inside the engine; the CLI and the demo
get dataclasses of ints and strings, never a table, a dataset or a Delta log entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from engine.lake.maintenance import last_checkpoint

if TYPE_CHECKING:
    from engine.lake.pools import Pool


@dataclass(frozen=True)
class PoolSummary:
    """One pool in a line: its version, live rows, files and bytes, the topics it types."""

    name: str
    kind: str
    version: int
    rows: int
    files: int
    size_bytes: int
    topics: list[str]


@dataclass(frozen=True)
class PartitionRow:
    """One topic partition of a pool: records, dead letters, offsets, the stored position."""

    topic: str
    partition: int
    rows: int
    dead_letters: int
    min_offset: int
    max_offset: int
    position: int | None


@dataclass(frozen=True)
class HistoryRow:
    """One commit of a pool's Delta log: when (UTC text), what, by which zync loop, rows."""

    version: int | None
    timestamp: str
    operation: str | None
    app: str
    rows: int | None


@dataclass(frozen=True)
class TopicTypeText:
    """A topic's key and value types as stored (Spark JSON) and as SQL shows them."""

    key: str | None
    value: str | None
    key_text: str
    value_text: str


@dataclass(frozen=True)
class PoolReport:
    """Everything `zync pool show` prints about one pool."""

    summary: PoolSummary
    uri: str
    last_checkpoint: int | None
    last_seqno: int
    dead_letters_by_stage: dict[str, int]
    types: dict[str, TopicTypeText]
    partitions: list[PartitionRow]
    commits: list[HistoryRow]

    @property
    def dead_letters(self) -> int:
        return sum(self.dead_letters_by_stage.values())


def pool_summary(pool: Pool) -> PoolSummary:
    """The pool's live rows, files and bytes (from the Delta log's add actions)."""
    actions = pa.table(pool.table.get_add_actions(flatten=True))
    rows = int(pc.sum(actions.column("num_records")).as_py() or 0) if actions.num_rows else 0
    size = int(pc.sum(actions.column("size_bytes")).as_py() or 0) if actions.num_rows else 0
    return PoolSummary(
        name=pool.name,
        kind=pool.kind,
        version=pool.version,
        rows=rows,
        files=actions.num_rows,
        size_bytes=size,
        topics=sorted(pool.meta.types),
    )


def pool_report(pool: Pool, commits: int) -> PoolReport:
    """The pool's summary, types, partitions, dead letters and its last ``commits`` commits."""
    types = {
        topic: TopicTypeText(
            key=(text := tt.to_json())["key"],
            value=text["value"],
            key_text=spark_type_text(text["key"]),
            value_text=spark_type_text(text["value"]),
        )
        for topic, tt in sorted(pool.meta.types.items())
    }
    return PoolReport(
        summary=pool_summary(pool),
        uri=pool.uri,
        last_checkpoint=last_checkpoint(pool),
        last_seqno=pool.last_seqno(),
        dead_letters_by_stage=_dead_letter_stages(pool),
        types=types,
        partitions=_partition_rows(pool),
        commits=_history(pool, commits),
    )


def _partition_rows(pool: Pool) -> list[PartitionRow]:
    """Per topic/partition: records, dead letters, min/max offset and the stored position."""
    scan = pool.dataset().to_table(
        columns={
            "t": ds.field("kafka", "topic"),
            "p": ds.field("kafka", "partition"),
            "o": ds.field("kafka", "offset"),
            "dead": pc.is_valid(ds.field("deadletter")),
        }
    )
    scan = scan.filter(pc.is_valid(scan.column("t")))
    if scan.num_rows == 0:
        return []
    scan = scan.append_column("dl", pc.cast(scan.column("dead"), pa.int64()))
    agg = scan.group_by(["t", "p"]).aggregate(
        [("o", "min"), ("o", "max"), ("o", "count"), ("dl", "sum")]
    )
    return [
        PartitionRow(
            topic=row["t"],
            partition=row["p"],
            rows=row["o_count"],
            dead_letters=row["dl_sum"] or 0,
            min_offset=row["o_min"],
            max_offset=row["o_max"],
            position=pool.position(row["t"], row["p"]),
        )
        for row in sorted(agg.to_pylist(), key=lambda r: (r["t"], r["p"]))
    ]


def _dead_letter_stages(pool: Pool) -> dict[str, int]:
    scan = pool.dataset().to_table(
        columns={"stage": ds.field("deadletter", "stage")}, filter=pc.is_valid(ds.field("deadletter"))
    )
    if scan.num_rows == 0:
        return {}
    agg = scan.group_by("stage").aggregate([("stage", "count")])
    return {r["stage"]: r["stage_count"] for r in agg.to_pylist()}


def _when(ts: datetime | float | None) -> str:
    if ts is None:
        return "-"
    if isinstance(ts, int | float):
        ts = datetime.fromtimestamp(ts / 1000 if ts > 1e11 else ts, UTC)
    return ts.strftime("%Y-%m-%d %H:%M:%S")


def _history(pool: Pool, limit: int) -> list[HistoryRow]:
    out = []
    for entry in pool.table.history(limit):
        metrics: dict[str, Any] = entry.get("operationMetrics") or {}
        out.append(
            HistoryRow(
                version=entry.get("version"),
                timestamp=_when(entry.get("timestamp")),
                operation=entry.get("operation"),
                app=entry.get("zync.app") or entry.get("zync.op") or "",
                rows=metrics.get("num_added_rows"),
            )
        )
    return out


def spark_type_text(text: str | None) -> str:
    """A Spark type stored as JSON, as SQL writes it (``struct<ID:bigint,...>``); ``-``
    for none, the JSON itself when pyspark cannot parse it."""
    if not text:
        return "-"
    try:
        from pyspark.sql.types import _parse_datatype_json_string  # deferred: pyspark

        return str(_parse_datatype_json_string(text).simpleString())
    except Exception:  # noqa: BLE001 - a type pyspark cannot parse is shown as stored
        return text


def record_count(pool: Pool) -> int:
    """Records and dead letters the pool holds (markers excluded)."""
    table = pool.dataset().to_table(columns=["seqno"], filter=ds.field("marker").is_null())
    return int(table.num_rows)


@dataclass(frozen=True)
class StagedOutput:
    """One output record of a staging pool: its offset on the output topic, key and value
    as the JSON text staged (None when absent)."""

    offset: int
    key: str | None
    value: str | None


def staged_outputs(pool: Pool, topic: str) -> list[StagedOutput]:
    """The output records staged for ``topic``, by offset."""
    table = pool.dataset().to_table(
        columns=["kafka", "key", "value"],
        filter=ds.field("marker").is_null() & ds.field("kafka").is_valid(),
    )
    rows = [
        StagedOutput(r["kafka"]["offset"], r["key"], r["value"])
        for r in table.to_pylist()
        if r["kafka"] and r["kafka"]["topic"] == topic
    ]
    return sorted(rows, key=lambda r: r.offset)
