"""One ETL pass, exactly once: outputs, markers and positions in one staging commit.

A pass (:meth:`EtlRunner.run_pass`):

1. checks the configuration against the lake and the typed input schemas (nothing is
   written when it is wrong) and records the outputs' Spark types in the staging pool;
2. reads the ETL's positions from the staging snapshot at version V
   (:mod:`engine.etl.cursors`);
3. reads, per raw pool, only the files that may hold rows with ``seqno >= floor``
   (Delta statistics) and keeps the input records above the cursors; reads the ETL's
   markers above the cursors from staging files with ``seqno >= marker-floor``; the
   *candidates* are those records no marker covers (a set filter, or a broadcast
   anti-join when there are many markers);
4. assigns each candidate the first matching rule (the candidates are cached once) and
   plans every rule in Spark (:mod:`engine.etl.rules`, :mod:`engine.etl.txn`): small
   sides are broadcast. The result (every candidate's fate and every output, its JSON
   made by ``to_json``) stays on the executors (persisted); one Spark job brings the
   driver the fates (processed or pending: a few small columns per input record) and
   the number of outputs per output topic. (A small pass, up to
   :data:`DRIVER_OUTPUT_ROWS` candidates, brings its outputs along in that job and the
   driver writes them with the markers: a Spark write costs more than it saves there;
   the rows are the same either way.)
5. on the driver, vectorized over the fates (no per-row Python): decides expiry
   (:mod:`engine.etl.expiry`), advances cursors and floors, and reserves each output
   topic's next offsets and the staging seqnos;
6. on the executors: orders the outputs (DESIGN.md, decision 5) and numbers them per
   output topic (a window per topic), and writes them as Parquet files into the staging
   table's directory (:meth:`engine.lake.pools.Pool.write_spark`); the driver writes the
   markers and commits those files + markers + positions with
   ``staging.commit_rows(..., expect_version=V)``. When another writer moved staging
   past V the commit fails (its files are deleted) and the pass re-plans from step 2
   (bounded attempts), so two concurrent passes never both commit the same outputs.

A pass that finds nothing to do commits nothing. :class:`EtlRunner` keeps the pools
and the checked configuration warm between passes, and remembers the pool versions of
its last idle pass so a loop polling an unchanged lake does no Spark work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ZyncError
from engine.etl import markers as mk
from engine.etl.config import EtlConfig, EtlConfigError
from engine.etl.cursors import Positions, TopicPartition, cursor_filter
from engine.etl.expiry import age, apply_expiry, newest_timestamps
from engine.etl.rules import (
    DEAD,
    FATE_COLUMNS,
    NO_RULE,
    OUTPUT_COLUMNS,
    PENDING,
    Checked,
    PlanContext,
    TopicTypes,
    assign_rules,
    check_rules,
    fates,
    plan_rule,
    plan_unmatched,
    quiet_spark_errors,
)
from engine.lake import delta
from engine.lake.envelope import (
    EXPIRED,
    KAFKA_TYPE,
    PROCESSED,
    ROW_SCHEMA,
    record_rows,
)
from engine.lake.pools import RAW, STAGING, Lake, Pool, PoolError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NOTHING_NEW = "nothing new to ETL"
_FATES = pa.schema(
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
#: Up to this many done markers above the cursors are excluded with a set filter.
_DONE_AS_SET = 20_000
#: Up to this many candidates, joins broadcast their small side (no shuffle).
_BROADCAST_ROWS = 200_000
#: Up to this many candidates, a pass's outputs come to the driver with the fates (one
#: Spark job) and are written with the markers; above, the executors write them.
DRIVER_OUTPUT_ROWS = 20_000
_PREVIEW = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("key", pa.string()),
        pa.field("value", pa.string()),
    ]
)
MAX_ATTEMPTS = 8


class EtlError(ZyncError):
    """A pass could not complete (e.g. too many conflicting commits)."""


# ------------------------------------------------------------------------------ results


@dataclass
class PassResult:
    """What one pass did (or, with ``dry_run``, would do)."""

    etl: str
    dry_run: bool = False
    committed: bool = False
    #: The staging version the (last) plan read, and the version after the pass.
    read_version: int = -1
    staging_version: int = -1
    consumed: dict[str, int] = field(default_factory=dict)
    processed: dict[str, int] = field(default_factory=dict)
    expired: dict[str, int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, int] = field(default_factory=dict)
    #: Output offsets given, per output topic: (first, last).
    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Cursors after the pass, and those this pass moved.
    cursors: dict[TopicPartition, int] = field(default_factory=dict)
    moved: dict[TopicPartition, int] = field(default_factory=dict)
    attempts: int = 1
    seconds: float = 0.0
    #: The output rows (``topic, offset, timestamp, key, value``), for dry runs.
    rows: pa.Table | None = None

    @property
    def nothing_new(self) -> bool:
        return not self.consumed and not self.outputs and not self.moved

    def summary(self) -> str:
        """Lines in words, for the CLI and logs."""
        mode = " (dry run: nothing committed)" if self.dry_run else ""
        if self.nothing_new:
            waiting = sum(self.pending.values())
            tail = f"; {waiting} record(s) still pending" if waiting else ""
            return f"{self.etl}: {NOTHING_NEW}{tail} (staging version {self.staging_version}){mode}"
        lines = [f"{self.etl}: one pass in {self.seconds:.2f}s{mode}"]
        topics = sorted(set(self.consumed) | set(self.pending))
        for topic in topics:
            bits = [f"{self.processed.get(topic, 0)} processed"]
            if self.expired.get(topic):
                bits.append(f"{self.expired[topic]} expired")
            if self.pending.get(topic):
                bits.append(f"{self.pending[topic]} pending")
            lines.append(f"  in  {topic}: " + ", ".join(bits))
        for topic, count in sorted(self.outputs.items()):
            first, last = self.offsets.get(topic, (0, 0))
            lines.append(f"  out {topic}: {count} record(s), offsets {first}..{last}")
        for (topic, partition), cursor in sorted(self.moved.items()):
            lines.append(f"  cursor {topic}/{partition} → {cursor}")
        if self.committed:
            lines.append(f"  staging version {self.read_version} → {self.staging_version}")
        else:
            lines.append(f"  staging version {self.staging_version}")
        if self.attempts > 1:
            lines.append(f"  re-planned {self.attempts - 1} time(s) after conflicting commits")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "etl": self.etl,
            "dry_run": self.dry_run,
            "committed": self.committed,
            "nothing_new": self.nothing_new,
            "read_version": self.read_version,
            "staging_version": self.staging_version,
            "consumed": self.consumed,
            "processed": self.processed,
            "expired": self.expired,
            "pending": self.pending,
            "outputs": self.outputs,
            "offsets": {t: list(v) for t, v in self.offsets.items()},
            "cursors": _tp_json(self.cursors),
            "moved": _tp_json(self.moved),
            "attempts": self.attempts,
            "seconds": round(self.seconds, 3),
        }
        if self.rows is not None:
            data["rows"] = [
                {**row, "timestamp": row["timestamp"].isoformat() if row["timestamp"] else None}
                for row in self.rows.to_pylist()
            ]
        return data


def _record_json(record: PendingRecord | ExpiredRecord) -> dict[str, Any]:
    """A pending or expired record as JSON: its fields, the timestamp in ISO 8601 and
    the age in seconds (``age_seconds``)."""
    data: dict[str, Any] = {}
    for name, value in dataclasses.asdict(record).items():
        if name == "timestamp":
            data[name] = value.isoformat() if value else None
        elif name == "age":
            data["age_seconds"] = value.total_seconds() if value is not None else None
        else:
            data[name] = value
    return data


def _tp_json(values: Mapping[TopicPartition, int]) -> dict[str, int]:
    return {f"{t}/{p}": v for (t, p), v in sorted(values.items())}


@dataclass(frozen=True)
class PendingRecord:
    """An input record after its cursor that no rule has consumed yet."""

    topic: str
    partition: int
    offset: int
    key: str | None
    rule: str | None
    timestamp: datetime | None
    age: timedelta | None
    seqno: int

    def to_json(self) -> dict[str, Any]:
        return _record_json(self)


@dataclass(frozen=True)
class ExpiredRecord:
    """An input record a rule gave up on, with its full envelope from the raw pool."""

    topic: str
    partition: int
    offset: int
    key: str | None
    value: str | None
    rule: str | None
    timestamp: datetime | None
    age: timedelta | None
    seqno: int | None

    def to_json(self) -> dict[str, Any]:
        return _record_json(self)


@dataclass
class _Plan:
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
    #: The outputs (columns :data:`OUTPUT_COLUMNS`), persisted on the executors until
    #: :meth:`release`; None when there are none or they came to the driver.
    outputs: DataFrame | None = None
    #: The outputs, when a small pass brought them to the driver.
    local_outputs: pa.Table | None = None
    #: The first staging seqno of this plan's outputs (the markers follow them).
    first_seqno: int = 0
    cached: DataFrame | None = None

    @property
    def empty(self) -> bool:
        return self.rows.num_rows == 0 and not self.counts and not self.moved

    def numbering(self) -> list[tuple[str, int, int, int]]:
        """Per output topic, in name order: ``(topic, first offset, first seqno, count)``
        — offsets follow the topic's last one, seqnos run topic after topic."""
        out = []
        start = self.first_seqno
        for topic, count in sorted(self.counts.items()):
            out.append((topic, self.positions.next_offsets.get(topic, 0), start, count))
            start += count
        return out

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()
            self.cached = None


# ------------------------------------------------------------------------------ runner


class EtlRunner:
    """One ETL configuration over a lake, kept warm between passes.

    Thread-safe: one pass (or inspection) at a time per runner. The SparkSession is the
    process's one session (:func:`engine.spark.get_spark`) unless one is given.
    """

    def __init__(
        self,
        config: EtlConfig,
        lake: Lake,
        spark: SparkSession | None = None,
        *,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self.config = config
        self.lake = lake
        self._spark = spark
        self.max_attempts = max_attempts
        self._pools: dict[str, Pool] = {}
        self._checked: tuple[str, Checked] | None = None
        self._idle: tuple[tuple[int, ...], int] | None = None
        self._idle_pending: dict[str, int] = {}
        self._recorded: str | None = None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"EtlRunner({self.config.name!r}, {self.lake!r})"

    # -- parts ------------------------------------------------------------------------

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from engine.spark import get_spark

            self._spark = get_spark()
        return self._spark

    def _pool(self, name: str, kind: str, role: str) -> Pool:
        pool = self._pools.get(name)
        if pool is None:
            try:
                pool = self.lake.open_pool(name)
            except PoolError as exc:
                raise EtlConfigError(f"{self.config.source}: {role} pool {name!r}: {exc}") from None
            self._pools[name] = pool
        if pool.kind != kind:
            raise EtlConfigError(
                f"{self.config.source}: {role} pool {name!r} is a {pool.kind} pool, "
                f"an ETL {role} must be a {kind} pool"
            )
        return pool

    @property
    def staging(self) -> Pool:
        return self._pool(self.config.staging_pool, STAGING, "output")

    def raw(self, name: str) -> Pool:
        return self._pool(name, RAW, "input")

    def _refresh(self) -> None:
        for name in self.config.raw_pools:
            self.raw(name).refresh()
        self.staging.refresh()

    def types(self) -> dict[str, TopicTypes]:
        """Each input topic's (key, value) Spark types from its raw pool (None: unknown)."""
        return {t: self.raw(self.config.pool_of(t)).spark_types(t) for t in self.config.input_topics}

    def check(self) -> Checked:
        """Check the configuration against the lake and the input types (cached while
        the types do not change); raises :class:`EtlConfigError`."""
        with self._lock:
            _ = self.staging
            types = self.types()
            signature = repr(
                sorted((t, k.json() if k else None, v.json() if v else None) for t, (k, v) in types.items())
            )
            if self._checked is None or self._checked[0] != signature:
                self._checked = (signature, check_rules(self.config, self.spark, types))
            return self._checked[1]

    def _record_output_types(self, checked: Checked) -> None:
        from engine.lake.pools import TopicTypes as PoolTypes

        found = checked.output_types(self.config)
        wanted = {
            topic: PoolTypes(key=k.json() if k else None, value=v.json() if v else None)
            for topic, (k, v) in found.items()
        }
        signature = repr(sorted((t, w.key, w.value) for t, w in wanted.items()))
        if wanted and signature != self._recorded:
            self.staging.record_types(wanted)
            self._recorded = signature

    def positions(self) -> Positions:
        """The ETL's positions in the current staging snapshot."""
        with self._lock:
            self.staging.refresh()
            return Positions.load(self.config, self.staging)

    # -- the pass ---------------------------------------------------------------------

    def run_pass(self, *, dry_run: bool = False) -> PassResult:
        """One pass; see the module docstring. Raises :class:`EtlConfigError` before
        anything is written when the configuration is wrong."""
        with self._lock:
            started = time.monotonic()
            self._refresh()
            checked = self.check()
            if not dry_run:
                self._record_output_types(checked)
            for attempt in range(1, self.max_attempts + 1):
                self._refresh()
                versions = tuple(self.raw(p).version for p in self.config.raw_pools)
                idle_key = (versions, self.staging.version)
                positions = Positions.load(self.config, self.staging)
                if self._idle == idle_key:
                    result = PassResult(self.config.name, dry_run=dry_run)
                    result.read_version = result.staging_version = self.staging.version
                    result.cursors = dict(positions.cursors)
                    result.pending = dict(self._idle_pending)
                    result.seconds = time.monotonic() - started
                    return result
                plan = self._plan(positions, checked)
                try:
                    result = self._result(plan, dry_run, attempt)
                    if plan.empty:
                        self._idle = idle_key
                        self._idle_pending = dict(result.pending)
                        result.seconds = time.monotonic() - started
                        return result
                    if dry_run:
                        result.rows = self._preview(plan)
                        result.seconds = time.monotonic() - started
                        return result
                    rows = plan.rows
                    if plan.local_outputs is not None:
                        numbered = self._numbered_arrow(plan)
                        outputs = record_rows(
                            numbered.column("kafka"), numbered.column("key"), numbered.column("value")
                        )
                        rows = pa.concat_tables([outputs, rows])
                    files = self._write_outputs(plan)
                    try:
                        version = self.staging.commit_rows(
                            rows,
                            expect_version=positions.staging_version,
                            app_transactions=plan.after.changes_from(positions),
                            metadata={"zync.op": "etl", "zync.etl": self.config.name},
                            files=files,
                        )
                    except delta.CommitConflict:
                        continue
                finally:
                    plan.release()
                result.committed = True
                result.staging_version = version
                result.seconds = time.monotonic() - started
                return result
            raise EtlError(
                f"ETL {self.config.name!r}: gave up after {self.max_attempts} attempts: "
                f"other writers kept committing to pool {self.config.staging_pool!r}"
            )

    def _result(self, plan: _Plan, dry_run: bool, attempt: int) -> PassResult:
        result = PassResult(self.config.name, dry_run=dry_run, attempts=attempt)
        result.read_version = result.staging_version = plan.positions.staging_version
        result.consumed = mk.count_by(plan.decided, "topic")
        result.processed = mk.count_by(mk.where_status(plan.decided, PROCESSED), "topic")
        result.expired = mk.count_by(mk.where_status(plan.decided, EXPIRED), "topic")
        result.pending = mk.count_by(plan.pending, "topic")
        result.outputs = dict(plan.counts)
        for topic in result.outputs:
            first = plan.positions.next_offsets.get(topic, 0)
            result.offsets[topic] = (first, plan.after.next_offsets[topic] - 1)
        result.cursors = dict(plan.after.cursors)
        result.moved = plan.moved
        return result

    def _fresh(self, positions: Positions) -> DataFrame | None:
        """Rows of the input topics above the cursors, from raw files with
        ``seqno >= floor`` only (None: no such file)."""
        from pyspark.sql import functions as F

        parts = []
        for pool_name in self.config.raw_pools:
            raw = self.raw(pool_name)
            floor = positions.floor(pool_name)
            if raw.last_seqno() < floor:
                continue
            topics = [i.topic for i in self.config.inputs if i.pool == pool_name]
            predicate = f"seqno >= {floor}"
            df = delta.read_spark(self.spark, raw.table, predicate)
            df = df.where(
                f"{predicate} AND marker IS NULL AND {cursor_filter(positions.cursors, topics)}"
            )
            parts.append(
                df.select(
                    F.lit(pool_name).alias("pool"),
                    "seqno",
                    "kafka",
                    "key",
                    "value",
                    F.col("deadletter").isNotNull().alias("__dead"),
                )
            )
        if not parts:
            return None
        fresh = parts[0]
        for part in parts[1:]:
            fresh = fresh.unionByName(part)
        return fresh

    def _candidates(self, fresh: DataFrame, done: pa.Table) -> DataFrame:
        """The input records of ``fresh`` that no marker above the cursors covers: a
        set filter when the done side is small, else a broadcast anti-join."""
        from pyspark.sql import functions as F

        records = fresh.where(~F.col("__dead"))
        if done.num_rows == 0:
            return records
        key = F.concat_ws(
            "\x01",
            F.col("kafka.topic"),
            F.col("kafka.partition").cast("string"),
            F.col("kafka.offset").cast("string"),
        )
        keys = pc.binary_join_element_wise(
            done.column("topic"),
            done.column("partition").cast(pa.string()),
            done.column("offset").cast(pa.string()),
            "\x01",
        )
        if done.num_rows <= _DONE_AS_SET:
            return records.where(~key.isin(keys.to_pylist()))
        side = self.spark.createDataFrame(pa.table({"__k": keys}))
        return records.join(F.broadcast(side), key == F.col("__k"), "left_anti")

    def _done(self, positions: Positions) -> pa.Table:
        """This ETL's markers above the cursors (no Spark job when no staging file can
        hold one)."""
        if self.staging.last_seqno() < positions.marker_floor:
            return mk.DONE_SCHEMA.empty_table()
        df = mk.done_above(
            self.spark,
            self.staging,
            self.config.name,
            positions.cursors,
            self.config.input_topics,
            positions.marker_floor,
        )
        return df.toArrow().select(mk.DONE_SCHEMA.names).cast(mk.DONE_SCHEMA)

    def _plan(self, positions: Positions, checked: Checked) -> _Plan:
        """Read and plan in Spark; one job (plus one for the done markers, if any can
        exist) brings the fates and the output counts to the driver, which decides. The
        outputs stay persisted on the executors for :meth:`_write_outputs`."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        spark = self.spark
        fresh = self._fresh(positions)
        if fresh is None:
            return _empty_plan(positions)
        done = self._done(positions)
        types = self.types()
        with quiet_spark_errors():
            assigned = assign_rules(self.config, self._candidates(fresh, done), types).cache()
        ctx: PlanContext | None = None
        try:
            # materialize the candidates once: every branch of the plan reads them
            count = assigned.count()
            ctx = PlanContext(spark, self.config, types, checked, small=count <= _BROADCAST_ROWS)
            dead = fates(fresh.where(F.col("__dead")), None, F.lit(DEAD))
            fate_parts = [dead]
            output_parts = []
            with quiet_spark_errors():
                for index in range(len(self.config.transforms) if count else 0):
                    f, o = plan_rule(ctx, index, assigned)
                    fate_parts.append(f)
                    if o is not None:
                        output_parts.append(o)
            if count:
                fate_parts.append(plan_unmatched(ctx, assigned))
            result = _union(fate_parts, output_parts)
            local = count <= DRIVER_OUTPUT_ROWS
            if local:
                table = result.toArrow()
            else:
                result = result.persist(StorageLevel.MEMORY_AND_DISK)
                try:
                    table = _summarize(result)
                except BaseException:
                    result.unpersist()
                    raise
        finally:
            if ctx is not None:
                ctx.drop_views()
            assigned.unpersist()
        kind = table.column("kind")
        fates_ = table.filter(pc.equal(kind, "f"))
        if local:
            outputs = table.filter(pc.equal(kind, "o"))
            grouped = outputs.group_by("out", use_threads=False).aggregate([([], "count_all")])
            counts = _counts(grouped.column("out"), grouped.column("count_all"))
            plan = self._decide(positions, done, fates_, counts)
            if plan.counts:
                plan.local_outputs = outputs.select(list(OUTPUT_COLUMNS))
            return plan
        counted = table.filter(pc.equal(kind, "c"))
        counts = _counts(counted.column("topic"), counted.column("offset"))
        try:
            plan = self._decide(positions, done, fates_, counts)
        except BaseException:
            result.unpersist()
            raise
        if plan.counts:
            plan.cached = result
            plan.outputs = result.where(F.col("kind") == "o").select(*OUTPUT_COLUMNS)
        else:
            result.unpersist()
        return plan

    def _decide(
        self, positions: Positions, done: pa.Table, fates_: pa.Table, counts: dict[str, int]
    ) -> _Plan:
        """Expiry, cursors, floors, the output topics' next offsets (``counts``: outputs
        per topic), marker rows — on the driver, vectorized over the collected fates."""
        read = _settle(fates_.select(list(FATE_COLUMNS)).cast(_FATES))
        if read.num_rows == 0 and done.num_rows == 0:
            return _empty_plan(positions)
        # (with only done markers read, the cursors may still move past them)
        newest = newest_timestamps(read, positions.newest)
        is_dead = pc.equal(read.column("status"), DEAD)
        fates_ = apply_expiry(read.filter(pc.invert(is_dead)), self.config, newest)
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
            [read.select(["topic", "partition", "offset"]), done.select(["topic", "partition", "offset"])]
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
        for pool_name in self.config.raw_pools:
            waiting = oldest_pending.get((pool_name,))
            floor = waiting if waiting is not None else self.raw(pool_name).last_seqno() + 1
            after.floors[pool_name] = max(floor, positions.floor(pool_name))

        for topic, count in sorted(counts.items()):
            after.next_offsets[topic] = after.next_offsets.get(topic, 0) + count
        outputs = sum(counts.values())
        rows = mk.marker_rows(self.config.name, decided)
        first_seqno = self.staging.last_seqno() + 1
        after.marker_floor = _marker_floor(
            done, decided, after.cursors, first_seqno + outputs, first_seqno + outputs + rows.num_rows
        )
        return _Plan(
            positions, after, rows, decided, pending, counts, moved, first_seqno=first_seqno
        )

    def _numbered(self, plan: _Plan) -> DataFrame:
        """The plan's outputs as staging rows ``seqno, kafka, key, value`` (plus the order
        columns ``o1..o5``): in DESIGN order within each output topic (a window per
        topic, on the executors), numbered from the topic's next offset; seqnos follow
        the pool's last one, topic after topic in name order."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        assert plan.outputs is not None
        bases, starts = [], []
        for topic, base, start, _ in plan.numbering():
            bases += [F.lit(topic), F.lit(base)]
            starts += [F.lit(topic), F.lit(start)]
        # ties (one input giving several outputs of one rule) go by key, then value
        order = Window.partitionBy("out").orderBy("o1", "o2", "o3", "o4", "o5", "key", "value")
        rank = F.row_number().over(order) - 1
        return plan.outputs.select(
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
            "o1", "o2", "o3", "o4", "o5",
        )

    def _numbered_arrow(self, plan: _Plan) -> pa.Table:
        """:meth:`_numbered` for outputs that came to the driver: the same order (Spark's
        ascending order puts NULLs first), offsets and seqnos."""
        outs = plan.local_outputs
        assert outs is not None
        keys = ["out", "o1", "o2", "o3", "o4", "o5", "key", "value"]
        outs = outs.take(
            pc.sort_indices(
                outs, sort_keys=[(k, "ascending") for k in keys], null_placement="at_start"
            )
        ).combine_chunks()
        pieces, seqnos = [], []
        for _, base, start, count in plan.numbering():
            pieces.append(_arange(base, count))
            seqnos.append(_arange(start, count))
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
                **{c: outs.column(c) for c in ("o1", "o2", "o3", "o4", "o5")},
            }
        )

    def _write_outputs(self, plan: _Plan) -> list[delta.WrittenFile]:
        """Write the plan's outputs into the staging directory from the executors
        (committed, or deleted, by :meth:`Pool.commit_rows`)."""
        if plan.outputs is None:
            return []
        rows = self._numbered(plan).select("seqno", "kafka", "key", "value")
        with quiet_spark_errors():
            return self.staging.write_spark(rows, label="etl")

    def _preview(self, plan: _Plan) -> pa.Table:
        """A dry run's outputs ``topic, offset, timestamp, key, value``, in DESIGN order
        across topics (collected: a dry run is a preview)."""
        if plan.local_outputs is not None:
            table = self._numbered_arrow(plan)
        elif plan.outputs is not None:
            with quiet_spark_errors():
                table = self._numbered(plan).toArrow()
        else:
            return _PREVIEW.empty_table()
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
            schema=_PREVIEW,
        )

    # -- inspection -------------------------------------------------------------------

    def pending(self, *, limit: int | None = None) -> list[PendingRecord]:
        """Input records after the cursors that are not processed yet, in
        (topic, partition, offset) order, with the rule that will take them (the first
        ``limit`` of them, when given)."""
        from pyspark.sql import functions as F

        with self._lock:
            self._refresh()
            self.check()
            positions = Positions.load(self.config, self.staging)
            fresh = self._fresh(positions)
            if fresh is None:
                return []
            done = self._done(positions)
            with quiet_spark_errors():
                assigned = assign_rules(self.config, self._candidates(fresh, done), self.types())
                rows = assigned.select(
                    F.col("kafka.topic").alias("topic"),
                    F.col("kafka.partition").alias("partition"),
                    F.col("kafka.offset").alias("offset"),
                    F.col("kafka.timestamp").alias("ts"),
                    "key",
                    "seqno",
                    "__rule",
                )
                if limit is not None:
                    rows = rows.orderBy("topic", "partition", "offset").limit(limit)
                rows = rows.toArrow()
        rows = rows.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])
        newest = newest_timestamps(rows.select(["topic", "ts"]), positions.newest)
        found = []
        for row in rows.to_pylist():
            index = row["__rule"]
            found.append(
                PendingRecord(
                    topic=row["topic"],
                    partition=row["partition"],
                    offset=row["offset"],
                    key=row["key"],
                    rule=None if index == NO_RULE else self.config.rule_label(index),
                    timestamp=row["ts"],
                    age=age(newest.get(row["topic"]), row["ts"]),
                    seqno=row["seqno"],
                )
            )
        return found

    def expired(self, *, limit: int | None = None) -> list[ExpiredRecord]:
        """Input records this ETL expired, with their envelope joined back from raw (the
        first ``limit`` in (topic, partition, offset) order, when given)."""
        from pyspark.sql import functions as F

        with self._lock:
            self._refresh()
            positions = Positions.load(self.config, self.staging)
            gone_df = mk.expired_markers(self.spark, self.staging, self.config.name)
            if limit is not None:
                gone_df = gone_df.orderBy("topic", "partition", "offset").limit(limit)
            gone = gone_df.toArrow()
            if gone.num_rows == 0:
                return []
            side = self.spark.createDataFrame(
                gone.select(["topic", "partition", "offset", "rule"]).rename_columns(
                    ["__t", "__p", "__o", "__rule"]
                )
            )
            envelopes = []
            for pool_name in self.config.raw_pools:
                topics = [i.topic for i in self.config.inputs if i.pool == pool_name]
                raw = self.raw(pool_name)
                df = raw.read(self.spark).where(
                    F.col("marker").isNull() & F.col("kafka.topic").isin(topics)
                )
                joined = df.join(
                    F.broadcast(side),
                    (F.col("kafka.topic") == F.col("__t"))
                    & (F.col("kafka.partition") == F.col("__p"))
                    & (F.col("kafka.offset") == F.col("__o")),
                    "inner",
                )
                envelopes.append(
                    joined.select(
                        F.col("kafka.topic").alias("topic"),
                        F.col("kafka.partition").alias("partition"),
                        F.col("kafka.offset").alias("offset"),
                        F.col("kafka.timestamp").alias("timestamp"),
                        "key",
                        "value",
                        "seqno",
                        F.col("__rule").alias("rule"),
                    ).toArrow()
                )
        table = pa.concat_tables(envelopes) if envelopes else None
        found: dict[tuple[str, int, int], dict[str, Any]] = {}
        if table is not None:
            for row in table.to_pylist():
                found[(row["topic"], row["partition"], row["offset"])] = row
        result = []
        for row in gone.sort_by(
            [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
        ).to_pylist():
            env = found.get((row["topic"], row["partition"], row["offset"]), {})
            ts = env.get("timestamp")
            result.append(
                ExpiredRecord(
                    topic=row["topic"],
                    partition=row["partition"],
                    offset=row["offset"],
                    key=env.get("key"),
                    value=env.get("value"),
                    rule=row["rule"],
                    timestamp=ts,
                    age=age(positions.newest.get(row["topic"]), ts),
                    seqno=env.get("seqno"),
                )
            )
        return result

    def explain(self) -> str:
        """The positions, the reads, each rule's Spark SQL and the Spark plans a pass
        would run — without running it."""
        with self._lock:
            self._refresh()
            checked = self.check()
            positions = Positions.load(self.config, self.staging)
            out = io.StringIO()
            cfg = self.config
            out.write(f"ETL {cfg.name!r} from {cfg.source}\n")
            out.write(f"staging pool {cfg.staging_pool!r} at version {positions.staging_version}\n")
            out.write("positions:\n")
            for (topic, partition), cursor in sorted(positions.cursors.items()):
                out.write(f"  cursor {topic}/{partition} = {cursor}\n")
            if not positions.cursors:
                out.write("  no cursors yet: every input record is new\n")
            for topic, offset in sorted(positions.next_offsets.items()):
                out.write(f"  next offset {topic} = {offset}\n")
            for pool_name in cfg.raw_pools:
                raw = self.raw(pool_name)
                floor = positions.floor(pool_name)
                files = len(raw.files(f"seqno >= {floor}")) if raw.last_seqno() >= floor else 0
                topics = [i.topic for i in cfg.inputs if i.pool == pool_name]
                out.write(
                    f"read raw pool {pool_name!r} (version {raw.version}): {files} of "
                    f"{len(raw.files())} file(s) with seqno >= {floor}, rows where "
                    f"{cursor_filter(positions.cursors, topics)}\n"
                )
            mfiles = len(self.staging.files(f"seqno >= {positions.marker_floor}")) if positions.marker_floor else len(self.staging.files())
            out.write(
                f"read markers: {mfiles} of {len(self.staging.files())} staging file(s) with "
                f"seqno >= {positions.marker_floor}\n"
            )
            fresh = self._fresh(positions)
            if fresh is None:
                out.write(f"\n{NOTHING_NEW}: no raw file at or above the floors\n")
                return out.getvalue()
            done = self._done(positions)
            types = self.types()
            ctx = PlanContext(self.spark, cfg, types, checked)
            try:
                with quiet_spark_errors():
                    assigned = assign_rules(cfg, self._candidates(fresh, done), types)
                    plans: list[tuple[str, DataFrame]] = [("candidates", assigned)]
                    for index in range(len(cfg.transforms)):
                        _, outputs_df = plan_rule(ctx, index, assigned)
                        if outputs_df is not None:
                            plans.append((f"{cfg.describe_rule(index)} outputs", outputs_df))
                for index in range(len(cfg.transforms)):
                    out.write(f"\n{cfg.describe_rule(index)} → {cfg.transforms[index].out}:\n")
                    out.write(f"  {ctx.sql.get(index, '')}\n")
                for title, df in plans:
                    out.write(f"\n== Spark plan: {title} ==\n")
                    out.write(_explain(df))
            finally:
                ctx.drop_views()
            return out.getvalue()


# ------------------------------------------------------------------------------ helpers


def _explain(df: DataFrame) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        df.explain(mode="formatted")
    return buffer.getvalue()


_RESULT_TYPES = {
    "kind": "string", "pool": "string", "seqno": "bigint", "topic": "string", "partition": "int",
    "offset": "bigint", "ts": "timestamp", "rule": "string", "ri": "int", "bundle": "string",
    "status": "string", "out": "string", "key": "string", "value": "string", "o1": "bigint",
    "o2": "int", "o3": "bigint", "o4": "bigint", "o5": "bigint",
}


def _union(fate_parts: list[DataFrame], output_parts: list[DataFrame]) -> DataFrame:
    """Every fate and output in one DataFrame with a ``kind`` column (``f``/``o``). The
    parts get one column list and are unioned by position (cheap to analyze)."""

    def shaped(df: DataFrame, kind: str) -> DataFrame:
        have = set(df.columns)
        return df.selectExpr(  # one call: SQL text is parsed in the JVM
            *[
                f"CAST({repr(kind) if name == 'kind' else f'`{name}`' if name in have else 'NULL'} "
                f"AS {type_}) AS `{name}`"
                for name, type_ in _RESULT_TYPES.items()
            ]
        )

    parts = [shaped(f, "f") for f in fate_parts] + [shaped(o, "o") for o in output_parts]
    result = parts[0]
    for part in parts[1:]:
        result = result.union(part)
    return result


def _summarize(result: DataFrame) -> pa.Table:
    """In one Spark job, for the driver: the fate rows (kind ``f``, fate columns only)
    and one row per output topic (kind ``c``: the topic in ``topic``, the number of its
    outputs in ``offset``)."""
    from pyspark.sql import functions as F

    fates_ = result.where(F.col("kind") == "f").select(*FATE_COLUMNS, "kind")
    counts = (
        result.where(F.col("kind") == "o")
        .groupBy("out")
        .agg(F.count(F.lit(1)).alias("offset"))
        .select(
            *[
                (
                    F.col("out").alias("topic")
                    if name == "topic"
                    else F.col("offset")
                    if name == "offset"
                    else F.lit(None).cast(_RESULT_TYPES[name]).alias(name)
                )
                for name in FATE_COLUMNS
            ],
            F.lit("c").alias("kind"),
        )
    )
    return fates_.unionByName(counts).toArrow()


def _counts(topics: pa.ChunkedArray, counts: pa.ChunkedArray) -> dict[str, int]:
    return dict(zip(topics.to_pylist(), counts.to_pylist(), strict=True))


def _arange(start: int, count: int) -> pa.Array:
    """``start, start+1, ... start+count-1`` as int64, without a Python loop."""
    if count == 0:
        return pa.array([], pa.int64())
    ones = pc.fill_null(pa.nulls(count, pa.int64()), 1)
    return pc.add(pc.cumulative_sum(ones), start - 1)


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
    return pa.table({n: columns[n] for n in read.column_names}).cast(_FATES)


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


def _marker_floor(
    done: pa.Table,
    decided: pa.Table,
    cursors: Mapping[TopicPartition, int],
    first_marker_seqno: int,
    next_seqno: int,
) -> int:
    """The staging seqno of the oldest of this ETL's markers above the new cursors
    (``next_seqno`` when there is none)."""
    new_markers = pa.table(
        {
            "topic": decided.column("topic").cast(pa.string()),
            "partition": decided.column("partition").cast(pa.int32()),
            "offset": decided.column("offset").cast(pa.int64()),
            "seqno": _arange(first_marker_seqno, decided.num_rows),
        }
    )
    every = pa.concat_tables([done.select(new_markers.column_names).cast(new_markers.schema), new_markers])
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


def _empty_plan(positions: Positions) -> _Plan:
    fates_ = _FATES.empty_table()
    return _Plan(positions, positions, ROW_SCHEMA.empty_table(), fates_, fates_, {}, {})


# --------------------------------------------------------------------------- functions


def run_pass(config: EtlConfig, lake: Lake, spark: SparkSession | None = None, *, dry_run: bool = False) -> PassResult:
    """One ETL pass (see :class:`EtlRunner`); a fresh runner each call."""
    return EtlRunner(config, lake, spark).run_pass(dry_run=dry_run)


def explain(config: EtlConfig, lake: Lake, spark: SparkSession | None = None) -> str:
    """What a pass would read and run, with Spark's plans; runs nothing."""
    return EtlRunner(config, lake, spark).explain()


def pending(config: EtlConfig, lake: Lake, spark: SparkSession | None = None) -> list[PendingRecord]:
    """Records after the cursors not processed yet."""
    return EtlRunner(config, lake, spark).pending()


def expired(config: EtlConfig, lake: Lake, spark: SparkSession | None = None) -> list[ExpiredRecord]:
    """Records the ETL expired, with their full envelope."""
    return EtlRunner(config, lake, spark).expired()
