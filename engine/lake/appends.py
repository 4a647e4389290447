"""Appending ingested records to a raw pool, exactly once; and committing rows (the
ETL's outputs and markers) on the snapshot they were planned on (:func:`commit_rows`).

A batch (records and dead letters, :data:`engine.lake.pool_record.ROW_SCHEMA`) and the last
Kafka offset it covers per (topic, partition) go into the pool in ONE Delta commit: the
rows, with seqnos after the pool's last one, and ``txn`` actions holding the positions
(``zync.in/<topic>/<partition>``) and the last seqno (``zync.seqno``). The commit is made
only on the snapshot it was planned on; when another writer moved the pool, the batch is
planned again on the new snapshot and the rows that writer committed are dropped
(docs/design.md#exactly-once-from-kafka).
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.lake import delta
from engine.lake.pool_errors import PoolError
from engine.lake.pool_record import ROW_SCHEMA, fit_rows, with_seqno

if TYPE_CHECKING:
    from engine.lake.pools import Pool

#: The txn app id holding the last seqno a pool assigned.
SEQNO_APP = "zync.seqno"
#: Plans of one batch, each on a newer snapshot, before giving up.
MAX_COMMIT_ATTEMPTS = 50


def ingest_app(topic: str, partition: int) -> str:
    """The Delta txn app id holding the last offset of (topic, partition) in a pool."""
    return f"zync.in/{topic}/{partition}"


#: A checkpoint every this many versions keeps loading and committing a pool cheap.
CHECKPOINT_EVERY = 100


@dataclass(frozen=True)
class AppendResult:
    """What :meth:`Pool.append_records` committed (``version`` None: nothing new)."""

    version: int | None
    rows: int
    first_seqno: int | None = None
    last_seqno: int | None = None
    skipped: int = 0
    attempts: int = 1


def append_records(
    pool: Pool,
    rows: pa.Table,
    positions: Mapping[tuple[str, int], int],
    *,
    starts: Mapping[tuple[str, int], int] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> AppendResult:
    """Append ingested rows and their positions in one commit, exactly once.

        ``rows`` has :data:`ROW_SCHEMA` (records and dead letters, in offset order per
        partition) and ``positions`` the last offset consumed per (topic, partition) —
        which may be past the last row (e.g. a filtered record). Rows at or below a
        position this pool already holds are dropped (another writer committed them),
        seqnos are assigned after the pool's last one, and the commit carries the new
        positions and seqno as Delta txn actions. The commit is made only if the pool is
        still at the version it was planned on; otherwise it is re-planned on the new
        snapshot (so concurrent writers never commit a position or a seqno twice).

        ``starts`` (optional) is, per (topic, partition), the first offset the batch
        covers (where its consumer was positioned). If the pool's position is before
        ``start - 1``, committing would skip the offsets in between: that raises
        :class:`PoolError` instead (a guard against seeking bugs).
    """
    rows = rows.select(ROW_SCHEMA.names).cast(ROW_SCHEMA)
    _check_within(rows, positions)
    pool.guard.require_safe_commits()
    delay = 0.005
    for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
        pool.refresh()
        planned_on = pool.version
        stored = {tp: pool.position(*tp) for tp in positions}
        for tp, start in (starts or {}).items():
            have = stored.get(tp)
            if have is not None and start > have + 1:
                raise PoolError(
                    f"pool {pool.name!r}: a batch of {tp[0]}[{tp[1]}] starts at offset "
                    f"{start} but the pool holds offsets up to {have}: committing it "
                    "would skip records"
                )
        todo = {
            tp: off for tp, off in positions.items() if (have := stored[tp]) is None or off > have
        }
        if not todo:
            return AppendResult(None, 0, skipped=rows.num_rows, attempts=attempt)
        fresh = _drop_committed(rows, stored)
        first = pool.last_seqno() + 1
        table = with_seqno(fresh, first)
        txns = {ingest_app(topic, part): off for (topic, part), off in todo.items()}
        last = first + fresh.num_rows - 1
        if fresh.num_rows:
            txns[SEQNO_APP] = last
        try:
            delta.commit_arrow(
                pool.table,
                table,
                app_transactions=txns,
                expect_version=planned_on,
                metadata={"zync.op": "ingest", **(metadata or {})},
            )
        except delta.CommitConflict:
            # another writer committed first: back off a little (two writers that
            # retry in lockstep would keep colliding) and re-plan on its snapshot
            time.sleep(random.uniform(0, delay))
            delay = min(delay * 2, 0.5)
            continue
        pool.committed(planned_on, txns)  # loads the new snapshot
        return AppendResult(
            # the commit was made exactly on `planned_on`; the refreshed table may
            # already show a later writer's commit too
            version=planned_on + 1,
            rows=fresh.num_rows,
            first_seqno=first if fresh.num_rows else None,
            last_seqno=last if fresh.num_rows else None,
            skipped=rows.num_rows - fresh.num_rows,
            attempts=attempt,
        )
    raise PoolError(
        f"pool {pool.name!r}: gave up after {MAX_COMMIT_ATTEMPTS} conflicting commits"
    )


def _kafka_columns(rows: pa.Table) -> tuple[pa.ChunkedArray, pa.ChunkedArray, pa.ChunkedArray]:
    kafka = rows.column("kafka")
    return (
        pc.struct_field(kafka, "topic"),
        pc.struct_field(kafka, "partition"),
        pc.struct_field(kafka, "offset"),
    )


def _check_within(rows: pa.Table, positions: Mapping[tuple[str, int], int]) -> None:
    """Every row's (topic, partition) has a position, at or after the row's offset."""
    if rows.num_rows == 0:
        return
    topic, partition, offset = _kafka_columns(rows)
    last = (
        pa.table({"t": topic, "p": partition, "o": offset})
        .filter(pc.is_valid(topic))
        .group_by(["t", "p"])
        .aggregate([("o", "max")])
    )
    for t, p, o in zip(
        last.column("t").to_pylist(),
        last.column("p").to_pylist(),
        last.column("o_max").to_pylist(),
        strict=True,
    ):
        position = positions.get((t, p))
        if position is None or o > position:
            raise ValueError(
                f"rows of {t}[{p}] go up to offset {o} but the batch's position is {position}"
            )


def _drop_committed(rows: pa.Table, stored: Mapping[tuple[str, int], int | None]) -> pa.Table:
    """Rows whose (topic, partition) position in the pool is below their offset."""
    limits = {tp: off for tp, off in stored.items() if off is not None}
    if not limits or rows.num_rows == 0:
        return rows
    topic, partition, offset = _kafka_columns(rows)
    drop = None
    for (t, p), limit in limits.items():
        here = pc.and_(pc.and_(pc.equal(topic, t), pc.equal(partition, p)), pc.less_equal(offset, limit))
        drop = here if drop is None else pc.or_(drop, here)
    assert drop is not None
    return rows.filter(pc.invert(pc.fill_null(drop, False)))


def commit_rows(
    pool: Pool,
    rows: pa.Table,
    *,
    expect_version: int,
    app_transactions: Mapping[str, int] | None = None,
    metadata: Mapping[str, Any] | None = None,
    files: Sequence[delta.WrittenFile] = (),
) -> int:
    """Commit rows only if the pool is still at ``expect_version``; returns the new
    version. Raises :class:`engine.lake.delta.CommitConflict` when the pool moved on
    (re-plan).

    ``files`` are Parquet files already written into the pool's directory (by Spark
    executors, :meth:`Pool.write_spark`) holding the seqnos right after the pool's last
    one; ``rows`` get the seqnos after theirs, and everything is one Delta commit.
    Files of a commit that conflicts are deleted. An ``avro`` column is kept when
    the table has one (:attr:`row_schema`), and dropped otherwise."""
    rows = fit_rows(rows, pool.row_schema)
    pool.guard.require_safe_commits()
    if pool.version != expect_version:
        pool.table = delta.open_table(pool.location, version=expect_version)
    first = pool.last_seqno() + 1 + sum(f.rows for f in files)
    last = first + rows.num_rows - 1
    txns = dict(app_transactions or {})
    if last >= pool.last_seqno() + 1:
        txns[SEQNO_APP] = last
    if not files:
        delta.commit_arrow(
            pool.table,
            with_seqno(rows, first),
            app_transactions=txns,
            expect_version=expect_version,
            metadata=metadata,
        )
    else:
        files = list(files)
        if rows.num_rows:
            files += delta.write_files(pool.location, with_seqno(rows, first))
        try:
            delta.commit_files(
                pool.table,
                files,
                app_transactions=txns,
                expect_version=expect_version,
                metadata=metadata,
            )
        except delta.CommitConflict:
            delta.remove_files(pool.location, files)
            raise
    pool.committed(expect_version, txns)
    if pool.version % CHECKPOINT_EVERY == 0:
        pool.table.create_checkpoint()  # keeps loading and committing cheap
    return pool.version
