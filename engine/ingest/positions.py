"""Where each input partition is read from. The Delta log holds the positions (the ``txn``
of each (topic, partition) a pool's commits carry, see
:meth:`engine.lake.pools.Pool.append_records`): a partition starts right after the pool's
position, never at a consumer group's offsets. Also, per run: the partitions this worker
owns in a workers group and the count of rebalances, and the skip-aheads past offsets
another writer committed first (docs/design.md#exactly-once-from-kafka)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException, TopicPartition

from engine.kafka.clients import FIRST_OFFSET
from engine.lake import delta
from engine.lake.appends import ingest_app

if TYPE_CHECKING:
    from confluent_kafka import Consumer
    from deltalake import DeltaTable

    from engine.ingest.state import LoopState, PoolState, TopicPart

log = logging.getLogger("engine.from_kafka")


class Positions:
    """The start of each partition, what this worker owns and where to skip to.

    ``owned``, ``rebalances`` and ``seeks`` are guarded by the shared lock: the consumer
    thread changes ownership (in the group's callbacks), the writer asks for seeks.
    """

    def __init__(self, shared: LoopState, grouped: bool) -> None:
        self._shared = shared
        self.grouped = grouped
        #: a workers group: what the group gave this process (consumer thread writes)
        self.owned: set[TopicPart] = set()
        #: rebalances so far (a batch remembers the count it was cut at)
        self.rebalances = 0
        #: where another writer's commits got: the consumer skips ahead (only forward)
        self.seeks: dict[TopicPart, int] = {}
        self._views: dict[str, DeltaTable] = {}  # the consumer thread's views of the logs

    def start_at(
        self,
        state: PoolState,
        topic: str,
        partition: int,
        *,
        own_table: bool = False,
        table: DeltaTable | None = None,
    ) -> TopicPartition:
        """Where (topic, partition) starts: right after the pool's position.

        ``own_table``: read the Delta log with a table object of its own (the writer
        thread owns the pool's while the loop runs); ``table``: with this one."""
        if own_table and table is None:
            table = delta.open_table(state.pool.location)
        if table is not None:
            position = table.transaction_version(ingest_app(topic, partition))
        else:
            position = state.pool.position(topic, partition)
        tp = (topic, partition)
        with self._shared.lock:
            state.positions[tp] = position
            if position is None:
                state.next.pop(tp, None)
            else:
                state.next[tp] = position + 1
        if position is None:
            return TopicPartition(topic, partition, FIRST_OFFSET)  # the log's start
        return TopicPartition(topic, partition, position + 1)

    def view(self, pool: str) -> DeltaTable:
        """The consumer thread's own, fresh view of a pool's Delta log."""
        view = self._views.get(pool)
        if view is None:
            view = self._views[pool] = delta.open_table(self._shared.pools[pool].pool.location)
        else:
            view.update_incremental()
        return view

    def owned_now(self) -> set[TopicPart]:
        with self._shared.lock:
            return set(self.owned)

    def assigned(self, starts: list[TopicPartition]) -> None:
        """The group gave this worker ``starts`` (already positioned)."""
        shared = self._shared
        with shared.lock:
            self.rebalances += 1
            self.owned.update((s.topic, s.partition) for s in starts)
            for s in starts:
                self.seeks.pop((s.topic, s.partition), None)
            if starts:
                shared.notes.append("assigned " + tp_list(starts))

    def taken_away(self, gone: set[TopicPart], note: str) -> None:
        """The group took ``gone`` to another worker: forget where they were."""
        shared = self._shared
        with shared.lock:
            self.rebalances += 1
            self.owned -= gone
            for tp in gone:
                self.seeks.pop(tp, None)
                for state in shared.pools.values():
                    state.next.pop(tp, None)
                    state.positions.pop(tp, None)
            if gone:
                shared.notes.append(note)

    def apply_seeks(self, consumer: Consumer) -> None:
        """Skip ahead to where another writer's commits got (only ever forward)."""
        with self._shared.lock:
            seeks, self.seeks = self.seeks, {}
            if self.grouped:  # only partitions this worker still owns
                seeks = {tp: off for tp, off in seeks.items() if tp in self.owned}
        for (topic, partition), offset in seeks.items():
            try:
                current = consumer.position([TopicPartition(topic, partition)])[0].offset
                if current < 0 or current < offset:
                    consumer.seek(TopicPartition(topic, partition, offset))
            except KafkaException as exc:  # only an optimisation: rows are dropped anyway
                log.debug("seek %s[%s] to %s failed: %s", topic, partition, offset, exc)


def tp_list(partitions: Iterable[TopicPartition | TopicPart]) -> str:
    """``t[0], t[1]`` for (topic, partition) pairs or TopicPartitions."""
    pairs = sorted(
        (p.topic, p.partition) if isinstance(p, TopicPartition) else (p[0], p[1])
        for p in partitions
    )
    return ", ".join(f"{t}[{p}]" for t, p in pairs) or "nothing"
