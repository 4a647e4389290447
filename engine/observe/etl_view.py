"""The configured ETLs as an operator sees them, from one staging snapshot each.

Per rule and input partition: the cursor, and how many records are processed (completion
markers), pending and expired. The pending and expired records themselves come from the
ETL module's own runner (:meth:`engine.etl.run.EtlRunner.pending` and ``expired``), with
their full full_records read back from the raw pools; they are listed again only when a
pool the ETL reads moved.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from engine.errors import one_line
from engine.observe.reports import EtlReport, EtlSnapshot, RecordRow
from engine.observe.snapshot_pools import SnapshotPools, read_valid

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.etl.config import EtlConfig
    from engine.etl.result import ExpiredRecord, PendingRecord
    from engine.etl.run import EtlRunner
    from engine.lake.pools import Pool

#: Pending/expired records shown with their full full_record (the rest: key and position).
LISTING_FULL_RECORDS = 1000

#: Pending and expired rows of one ETL, and why they could not be listed.
Listings = tuple[tuple[RecordRow, ...], tuple[RecordRow, ...], str | None]
#: A listed record's full_record by (topic, partition, offset) (None: the row had none).
FullRecords = dict[tuple[str | None, int | None, int | None], dict[str, Any]]


class EtlView:
    """The ETL snapshot: cursors, marker counts and listings of every configured ETL.

    ``spark`` returns the process's SparkSession, used only for the listings (the ETL
    module needs it); it is called in the polling thread, never at construction.
    """

    def __init__(
        self,
        pools: SnapshotPools,
        etls: Sequence[EtlConfig],
        spark: Callable[[], SparkSession] | None,
        clock: Callable[[], float],
    ) -> None:
        self.pools = pools
        self.etls = etls
        self.spark = spark
        self.clock = clock
        self._marker_cache: tuple[tuple[str, int], dict[tuple[str, str, int, str], int]] | None = None
        self._runners: dict[str, EtlRunner] = {}
        self._listing_cache: dict[tuple[Any, ...], Listings] = {}

    def marker_counts(self, staging: Pool) -> dict[tuple[str, str, int, str], int]:
        """Completion markers per (etl/rule, topic, partition, status); cached per version."""
        key = (staging.name, staging.version)
        if self._marker_cache is not None and self._marker_cache[0] == key:
            return self._marker_cache[1]
        table = read_valid(staging, ["marker"], "marker")
        counts: dict[tuple[str, str, int, str], int] = {}
        for marker in table.column("marker").to_pylist():
            if marker:
                k = (
                    f"{marker['etl']}/{marker['rule'] or ''}",
                    marker["topic"],
                    marker["partition"],
                    marker["status"],
                )
                counts[k] = counts.get(k, 0) + 1
        self._marker_cache = (key, counts)
        return counts

    def report(self, *, listings: bool = True) -> EtlReport:
        """Cursors, processed/pending/expired counts, and the pending and expired records
        of every configured ETL. ``listings=False`` skips the Spark-backed listings."""
        with self.pools.locks["etl"]:
            now = self.clock()
            if not self.etls:
                return EtlReport(taken_at=now, error="no ETL configuration loaded")
            lake_error = self.pools.lake_error()
            if lake_error:
                return EtlReport(taken_at=now, error=lake_error)
            rows: list[EtlSnapshot] = []
            pending: list[RecordRow] = []
            expired: list[RecordRow] = []
            errors: list[str] = []
            version = None
            for config in self.etls:
                try:
                    staging = self.pools.pool(config.staging_pool, "etl")
                except Exception as exc:  # noqa: BLE001 - shown in words on the ETL panel
                    errors.append(f"{config.name}: {one_line(exc, limit=300)}")
                    continue
                version = staging.version
                if listings:
                    p, e, listing_error = self._listings(config, staging)
                    pending.extend(p)
                    expired.extend(e)
                    if listing_error:
                        errors.append(f"{config.name}: {listing_error}")
                rows.extend(self._etl_rows(config, staging, pending, expired))
            return EtlReport(
                taken_at=now,
                rows=tuple(rows),
                pending=tuple(pending),
                expired=tuple(expired),
                staging_version=version,
                error="; ".join(errors) or None,
            )

    def _etl_rows(
        self,
        config: EtlConfig,
        staging: Pool,
        pending: Iterable[RecordRow],
        expired: Iterable[RecordRow],
    ) -> list[EtlSnapshot]:
        from engine.etl.cursors import Positions  # deferred: engine.etl loads delta-rs

        positions = Positions.load(config, staging)
        markers = self.marker_counts(staging)
        waiting: dict[tuple[str, str, int], int] = {}
        for row in pending:
            if row.etl == config.name:
                k = (row.rule, row.topic, row.partition)
                waiting[k] = waiting.get(k, 0) + 1
        rows = []
        for index, rule in enumerate(config.transforms):
            label = config.rule_label(index)
            for topic in rule.topics:
                parts = positions.parts.get(topic)
                partitions = list(range(parts)) if parts else [0]
                for partition in partitions:
                    mk = f"{config.name}/{label}"
                    rows.append(
                        EtlSnapshot(
                            etl=config.name,
                            rule=label,
                            topic=topic,
                            partition=partition,
                            cursor=positions.cursor(topic, partition),
                            processed=markers.get((mk, topic, partition, "processed"), 0),
                            pending=waiting.get((label, topic, partition), 0),
                            expired=markers.get((mk, topic, partition, "expired"), 0),
                        )
                    )
        return rows

    def _runner(self, config: EtlConfig) -> EtlRunner:
        """The view's own warm ETL runner for ``config`` (listings only, never passes)."""
        from engine.etl.run import EtlRunner  # deferred: engine.etl loads delta-rs

        runner = self._runners.get(config.name)
        if runner is None:
            runner = EtlRunner(config, self.pools.lake, self.spark)  # Spark: when first needed
            self._runners[config.name] = runner
        return runner

    def _listings(self, config: EtlConfig, staging: Pool) -> Listings:
        """Pending and expired records through the ETL module's runner, with their full
        full_records from the raw pools; cached until a pool the ETL reads moves."""
        versions: list[Any] = [config.name, staging.version]
        for name in config.raw_pools:
            try:
                versions.append(self.pools.pool(name, "etl").version)
            except Exception:  # noqa: BLE001 - a pool that cannot be read has no version to cache on
                versions.append(None)
        key = tuple(versions)
        cached = self._listing_cache.get(key)
        if cached is not None:
            return cached
        try:
            runner = self._runner(config)
            waiting = runner.pending()
            gone = runner.expired()
            full_records = self._full_records(config, [*waiting, *gone])
        except Exception as exc:  # noqa: BLE001 - shown in words on the ETL panel
            return (), (), f"cannot list pending/expired records: {one_line(exc, limit=300)}"
        result = (
            tuple(record_row(config.name, r, "pending", full_records) for r in waiting),
            tuple(record_row(config.name, r, "expired", full_records) for r in gone),
            None,
        )
        self._listing_cache = {key: result}
        return result

    def _full_records(
        self, config: EtlConfig, records: Sequence[PendingRecord | ExpiredRecord]
    ) -> FullRecords:
        """The raw-pool rows of listed records, as full_records (key and value parsed)."""
        import pyarrow as pa  # deferred, like every heavy import of engine.observe
        import pyarrow.compute as pc
        import pyarrow.dataset as ds

        wanted: dict[str, list[int]] = {}
        for record in records[:LISTING_FULL_RECORDS]:
            seqno = getattr(record, "seqno", None)
            if seqno is not None:
                wanted.setdefault(config.pool_of(record.topic), []).append(int(seqno))
        out: FullRecords = {}
        for pool_name, seqnos in wanted.items():
            pool = self.pools.pool(pool_name, "etl")
            low, high = min(seqnos), max(seqnos)
            dataset = pool.dataset(f"seqno >= {low} AND seqno <= {high}")  # prunes files
            expr = (ds.field("seqno") >= low) & (ds.field("seqno") <= high)
            table = dataset.to_table(columns=["seqno", "kafka", "key", "value"], filter=expr)
            table = table.filter(pc.is_in(table.column("seqno"), value_set=pa.array(seqnos, pa.int64())))
            for row in table.to_pylist():
                kafka = dict(row["kafka"] or {})
                if kafka.get("timestamp") is not None:
                    kafka["timestamp"] = kafka["timestamp"].isoformat()
                full_record = {
                    "pool": pool_name,
                    "seqno": row["seqno"],
                    "kafka": kafka,
                    "key": _parse(row["key"]),
                    "value": _parse(row["value"]),
                }
                out[(kafka.get("topic"), kafka.get("partition"), kafka.get("offset"))] = full_record
        return out


def _parse(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def record_row(
    etl: str, record: PendingRecord | ExpiredRecord, status: str, full_records: FullRecords
) -> RecordRow:
    """A RecordRow from a :class:`engine.etl.result.PendingRecord` or ``ExpiredRecord``."""
    age = getattr(record, "age", None)
    seconds = age.total_seconds() if age is not None else None
    full_record = full_records.get((record.topic, record.partition, record.offset))
    if full_record is None:  # not in the raw pool any more (or past the listing limit)
        timestamp = getattr(record, "timestamp", None)
        full_record = {
            "kafka": {
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "timestamp": timestamp.isoformat() if timestamp is not None else None,
            },
            "key": _parse(record.key),
            "value": _parse(getattr(record, "value", None)),
        }
    return RecordRow(
        etl=etl,
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        key=record.key if record.key is not None else "null",
        rule=record.rule or "(no rule)",
        age_seconds=seconds,
        status=status,
        full_record=full_record,
    )
