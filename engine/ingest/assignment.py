"""How this process gets its partitions and keeps up with them. Without a workers group
every partition of every input topic is assigned directly (no rebalancing; new partitions
are picked up from the metadata). With one, the group spreads them over the workers
(docs/design.md#exactly-once-from-kafka): its callbacks start each partition given right
after the pool's position and drop the buffered rows of those taken away. Also the
watermarks (for the lag) of the partitions read, and the mirror flush through the
subscribing consumer."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException, TopicPartition

from engine.ingest.errors import IngestError
from engine.ingest.group_mirror import SubscribedMirror
from engine.ingest.positions import tp_list
from engine.kafka.clients import (
    FIRST_OFFSET,
    check_reachable,
    consumer,
    look_at_cluster,
    where,
)
from engine.kafka.watermarks import fetched_watermarks

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError
    from deltalake import DeltaTable

    from engine.ingest.options import IngestInput, IngestOptions
    from engine.ingest.positions import Positions
    from engine.ingest.state import LoopState, TopicPart
    from engine.settings.kafka import KafkaProfile

log = logging.getLogger("engine.from_kafka")

#: A workers group rebalances eagerly (every member gives everything back, then gets its
#: share): one round per rebalance; what a worker gives back costs only its buffered rows
#: (positions are in the pool).
WORKERS_ASSIGNMENT = "range,roundrobin"


class Assignment:
    """The partitions this process reads: assigned directly, or its workers group's share.

    ``drop(gone)``: forget the buffered records of partitions taken away; how many.
    ``error_cb``: the consumer's client-level errors go there.
    """

    def __init__(
        self,
        inputs: Sequence[IngestInput],
        *,
        kafka: KafkaProfile,
        options: IngestOptions,
        shared: LoopState,
        positions: Positions,
        route: Mapping[str, str],
        drop: Callable[[set[TopicPart]], int],
        error_cb: Callable[[KafkaError], None],
    ) -> None:
        self._inputs = inputs
        self._kafka = kafka
        self._options = options
        self._shared = shared
        self._positions = positions
        self._route = route
        self._drop = drop
        self._error_cb = error_cb
        self._partition_counts: dict[str, int] = {}

    def connect(self) -> Consumer:
        """The consumer, its partitions assigned or its subscription made."""
        return self._subscribe() if self._positions.grouped else self._assign()

    def _topics(self) -> dict[str, int]:
        """{topic: partition count} of the inputs; every one must exist."""
        topics = check_reachable(self._kafka)
        missing = [i.topic for i in self._inputs if not topics.get(i.topic)]
        if missing:
            known = ", ".join(sorted(t for t in topics if not t.startswith("__"))) or "none"
            raise IngestError(
                f"topic {missing[0]!r} does not exist on {where(self._kafka)} (topics: {known})"
            )
        return {i.topic: topics[i.topic] for i in self._inputs}

    def _assign(self) -> Consumer:
        topics = self._topics()
        client = consumer(self._kafka, extra={"error_cb": self._error_cb})
        look_at_cluster(client)  # else its first fetch waits for librdkafka's next scan
        assignment = []
        for item in self._inputs:
            state = self._shared.pools[item.pool]
            for partition in range(topics[item.topic]):
                assignment.append(self._positions.start_at(state, item.topic, partition))
        client.assign(assignment)
        self._partition_counts = {i.topic: topics[i.topic] for i in self._inputs}
        return client

    def new_partitions(self, client: Consumer) -> None:
        """Assigned directly: start the partitions added to an input since (a
        subscription picks them up by itself)."""
        try:
            metadata = client.list_topics(timeout=5)
        except KafkaException:
            return
        added = []
        for item in self._inputs:
            topic = metadata.topics.get(item.topic)
            if topic is None or topic.error is not None:
                continue
            have = self._partition_counts.get(item.topic, 0)
            if len(topic.partitions) > have:
                state = self._shared.pools[item.pool]
                for partition in range(have, len(topic.partitions)):
                    start = self._positions.start_at(state, item.topic, partition, own_table=True)
                    added.append(start)
                self._partition_counts[item.topic] = len(topic.partitions)
        if added:
            client.incremental_assign(added)
            self._shared.note(
                "new partitions: " + ", ".join(f"{tp.topic}[{tp.partition}]" for tp in added)
            )

    def read_watermarks(self, client: Consumer) -> bool:
        """Refresh the cached watermarks (the lag) of the partitions read. True when every
        one of them has answered a fetch: librdkafka knows a partition's high watermark
        only from a fetch response (the first one carries the records waiting there)."""
        if self._positions.grouped:
            partitions = sorted(self._positions.owned_now())
        else:
            partitions = [
                (item.topic, partition)
                for item in self._inputs
                for partition in range(self._partition_counts.get(item.topic, 0))
            ]
        marks = fetched_watermarks(client, partitions)
        with self._shared.lock:
            self._shared.watermarks.update(marks)
        return len(marks) == len(partitions)

    # -- workers group (consumer thread: the callbacks run inside consumer.consume()) ----

    def _subscribe(self) -> Consumer:
        group = self._options.workers_group
        assert group is not None
        topics = self._topics()
        extra: dict[str, Any] = {
            "partition.assignment.strategy": WORKERS_ASSIGNMENT,
            "error_cb": self._error_cb,
        }
        pools = self._shared.pools
        mirrors = {st.group for st in pools.values() if st.group == group}
        if mirrors:
            mirror = SubscribedMirror(group)
            extra["on_commit"] = mirror.on_commit
            for name, st in pools.items():
                if st.group == group:
                    self._shared.mirrors[name] = mirror
        client = consumer(self._kafka, group=group, extra=extra)
        client.subscribe(
            list(topics),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        self._partition_counts = topics
        self._shared.note(f"joining workers group {group}")
        return client

    def _on_assign(self, client: Consumer, partitions: list[TopicPartition]) -> None:
        """The group gave us partitions: start each right after the pool's position
        (never at the group's committed offsets: the Delta log holds the positions)."""
        views: dict[str, DeltaTable] = {}
        starts = []
        for tp in partitions:
            name = self._route.get(tp.topic)
            if name is None:  # not an input (cannot happen: we subscribe to inputs only)
                continue
            if name not in views:
                views[name] = self._positions.view(name)
            state = self._shared.pools[name]
            starts.append(
                self._positions.start_at(state, tp.topic, tp.partition, table=views[name])
            )
        self._positions.assigned(starts)
        # the pool's positions (a start is position + 1; FIRST_OFFSET: none held yet)
        held = {(s.topic, s.partition): s.offset - 1 for s in starts if s.offset > FIRST_OFFSET}
        for mirror in set(self._shared.mirrors.values()):
            if isinstance(mirror, SubscribedMirror):
                mirror.publish(held)  # the group's offsets catch up with the pool's
        client.assign(starts)  # eager (WORKERS_ASSIGNMENT): the whole new assignment
        log.info("workers group %s: assigned %s", self._options.workers_group, tp_list(starts))

    def _on_revoke(self, client: Consumer, partitions: list[TopicPartition]) -> None:
        self._give_up(client, partitions, "revoked")

    def _on_lost(self, client: Consumer, partitions: list[TopicPartition]) -> None:
        self._give_up(client, partitions, "lost")

    def _give_up(self, client: Consumer, partitions: list[TopicPartition], how: str) -> None:
        """Partitions went to another worker: drop their buffered (uncommitted) rows and
        forget where they were. A batch already handed to the committer is safe: rows the
        pool holds are dropped when it is planned, and see
        :meth:`engine.ingest.write.Writer.write` for the rest."""
        gone = {(tp.topic, tp.partition) for tp in partitions}
        dropped = self._drop(gone)
        more = f" ({dropped:,} buffered records dropped)" if dropped else ""
        self._positions.taken_away(gone, f"{how} {tp_list(partitions)}{more}")
        try:
            client.unassign()  # eager (WORKERS_ASSIGNMENT): everything goes back
        except Exception as exc:  # noqa: BLE001 - the client unassigns them anyway
            log.debug("unassign after %s partitions failed: %s", how, exc)
        log.info("workers group %s: %s %s", self._options.workers_group, how, tp_list(partitions))

    def flush_mirror(self, client: Consumer, *, final: bool = False) -> None:
        """Commit the positions due to the workers group through its member ``client``."""
        mirrors = self._shared.mirrors.values()
        mirror = next((m for m in mirrors if isinstance(m, SubscribedMirror)), None)
        if mirror is None:
            return
        owned = self._positions.owned_now()
        try:
            mirror.flush(client, owned, final=final)
        except Exception as exc:  # noqa: BLE001 - a mirror never stops the ingest
            log.warning("cannot mirror positions to %s: %s", mirror.group, exc)
