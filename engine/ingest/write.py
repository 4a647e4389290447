"""A prepared batch committed to its pool, in the writer thread (one commit at a time, in
consumption order): the topics' Spark types recorded first, then records and dead letters
in one Delta commit carrying the last offset per partition (Delta ``txn``,
docs/design.md#exactly-once-from-kafka) and guarded by where each partition's batch
starts. Rows another writer committed first are dropped when re-planning; partitions a
workers group moved away meanwhile are skipped. Then the counters, the skip-ahead past
another writer, the group mirror, the pool's upkeep and ``on_commit``."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.ingest.group_mirror import GroupMirror
from engine.ingest.positions import tp_list
from engine.ingest.state import describe
from engine.ingest.stats import CommitInfo, CommitRef
from engine.lake.pool_errors import PoolError

if TYPE_CHECKING:
    from engine.ingest.gc_pause import GcPause
    from engine.ingest.positions import Positions
    from engine.ingest.prepare import Prepared
    from engine.ingest.state import LoopState, PoolState, TopicPart
    from engine.settings.kafka import KafkaProfile

log = logging.getLogger("engine.from_kafka")

#: Who committed, in each commit's metadata (``zync pool show``, debugging races).
_WRITER = f"{socket.gethostname()}:{os.getpid()}"


class Writer:
    """Commits prepared batches; ``on_commit`` hears of each commit."""

    def __init__(
        self,
        shared: LoopState,
        positions: Positions,
        kafka: KafkaProfile,
        gc: GcPause,
        on_commit: Callable[[CommitInfo], None] | None,
    ) -> None:
        self._shared = shared
        self._positions = positions
        self._kafka = kafka
        self._gc = gc
        self._on_commit = on_commit

    def write(self, prepared: Prepared) -> None:
        shared = self._shared
        state = shared.pools[prepared.pool]
        pool = state.pool
        rows_table, positions, wanted = prepared.rows, prepared.positions, prepared.wanted
        started, timings = prepared.started, prepared.timings
        timings["queued"] = time.monotonic() - started - sum(timings.values())
        with shared.lock:  # the consumer thread changes `next` when partitions move
            starts = {tp: n for tp in positions if (n := state.next.get(tp)) is not None}
        # the types first: they only grow, so a lost data commit leaves them harmless
        changed = {
            t: ty
            for t, ty in wanted.items()
            if (ty.key or ty.value) and state.recorded.get(t) != ty
        }
        if changed:
            pool.record_types(changed)
            state.recorded.update(changed)

        metadata = {"zync.app": "from-kafka", "zync.pid": _WRITER}
        moved: set[TopicPart] = set()
        try:
            result = pool.append_records(rows_table, positions, starts=starts, metadata=metadata)
        except PoolError:
            moved = self._moved_away(state, prepared, starts)
            if not moved:
                raise
            # a workers group gave these partitions to another worker after the batch
            # was cut, and their pool position is no longer where the batch starts: skip
            # them (their owner ingests them from the pool's position), commit the rest
            rows_table = without_partitions(rows_table, moved)
            positions = {tp: off for tp, off in positions.items() if tp not in moved}
            starts = {tp: off for tp, off in starts.items() if tp not in moved}
            shared.note(f"skipped {tp_list(moved)}: another worker owns them now")
            log.info("skipped %s of a batch: another worker owns them now", tp_list(moved))
            if not positions:
                return
            result = pool.append_records(rows_table, positions, starts=starts, metadata=metadata)
        timings["commit"] = time.monotonic() - started - sum(timings.values())
        held = {tp: pool.position(*tp) for tp in positions}
        # dead letters of this batch that went in (when another writer committed part
        # of the batch first, the count is an estimate)
        exact = result.skipped == 0 and not moved
        dead = prepared.dead if exact else min(prepared.dead, result.rows)
        now = time.time()
        with shared.lock:
            # a workers group: only the partitions this worker still owns (the consumer
            # thread reset the others' state when they were revoked)
            grouped = self._positions.grouped
            mine = set(positions) & self._positions.owned if grouped else set(positions)
            for tp in mine:
                state.next[tp] = positions[tp] + 1
            state.positions.update({tp: held[tp] for tp in mine})
            state.skipped += result.skipped
            if result.version is not None:
                state.version = result.version
                state.commits += 1
                state.records += result.rows
                state.dead_letters += dead
                if exact:  # else another writer committed part of it: counted as its rows
                    _add(state.topic_records, prepared.topic_records)
                    _add(state.topic_bytes, prepared.topic_bytes)
                    _add(state.dead_stages, prepared.dead_stages)
                state.last_commit_at = now
                state.last_commit_records = result.rows
                state.window.append((time.monotonic(), result.rows))
                shared.last_commit = CommitRef(pool.name, result.version, now, result.rows)
            for tp in mine:
                off = held[tp]
                if off is not None and off + 1 > state.next[tp]:
                    # another writer got further: skip what it committed
                    self._positions.seeks[tp] = off + 1
                    state.next[tp] = off + 1
        self._mirror(state, held)
        if result.version is None:
            return
        try:
            upkeep = state.upkeep.after_commit(pool)
        except Exception as exc:  # noqa: BLE001 - upkeep never stops the ingest
            upkeep = [f"upkeep failed (retried later): {describe(exc).splitlines()[0]}"]
            log.warning("%s: %s", pool.name, upkeep[0])
        self._gc.after_commit()
        if upkeep:
            with shared.lock:
                shared.notes.extend(f"{pool.name}: {u}" for u in upkeep)
        if self._on_commit is not None:
            self._on_commit(
                CommitInfo(
                    pool=pool.name,
                    version=result.version,
                    records=result.rows,
                    dead_letters=dead,
                    skipped=result.skipped,
                    positions=dict(positions),
                    seconds=time.monotonic() - started,
                    timings=timings,
                    upkeep=tuple(upkeep),
                    stats=shared.snapshot(),
                )
            )

    def _mirror(self, state: PoolState, held: Mapping[TopicPart, int | None]) -> None:
        """Hand the pool's positions to its group mirror (made with the first commit)."""
        if state.group is None:
            return
        mirrors = self._shared.mirrors
        mirror = mirrors.get(state.pool.name)
        if mirror is None:
            mirror = GroupMirror(self._kafka, state.group)
            mirrors[state.pool.name] = mirror
        # every partition committed, owned or not: a commit of a partition revoked
        # meanwhile may be its last (the mirror commits only what this worker owns)
        mirror.publish({tp: off for tp, off in held.items() if off is not None})

    def _moved_away(
        self,
        state: PoolState,
        prepared: Prepared,
        starts: Mapping[TopicPart, int],
    ) -> set[TopicPart]:
        """After a refused commit: the partitions whose batch rows start past the pool's
        position (the ``starts`` guard) and that moved to another worker since the batch
        was cut. Empty when the refusal is anything else, or a real seeking bug."""
        if not self._positions.grouped:
            return set()
        pool = state.pool
        pool.refresh()
        gapped = {
            tp for tp, start in starts.items()
            if (have := pool.position(*tp)) is not None and start > have + 1
        }  # fmt: skip
        with self._shared.lock:
            owned = set(self._positions.owned)
            rebalanced = self._positions.rebalances != prepared.generation
        moved = {tp for tp in gapped if tp not in owned or rebalanced}
        return moved if moved == gapped else set()


def _add(totals: dict[str, int], more: Mapping[str, int]) -> None:
    for key, n in more.items():
        totals[key] = totals.get(key, 0) + n


def without_partitions(rows: pa.Table, gone: set[TopicPart]) -> pa.Table:
    """``rows`` without the rows (records and dead letters) of partitions ``gone``."""
    kafka = rows.column("kafka")
    topics = pc.struct_field(kafka, "topic")
    partitions = pc.struct_field(kafka, "partition")
    drop = None
    for topic, partition in gone:
        hit = pc.and_(pc.equal(topics, topic), pc.equal(partitions, partition))
        drop = hit if drop is None else pc.or_(drop, hit)
    return rows if drop is None else rows.filter(pc.invert(drop))
