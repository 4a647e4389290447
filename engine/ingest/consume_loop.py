"""The consumer thread (the one calling :meth:`engine.ingest.loop.Ingest.run`): polls
librdkafka, keeps only records of partitions it still owns, fills the pools' buffers and
cuts batches (:mod:`engine.ingest.buffer`), and between polls applies skip-aheads,
refreshes watermarks, flushes the workers group mirror, looks for new partitions, asks
whether Kafka is still there (:mod:`engine.ingest.faults`), and exits after
``exit_after`` idle seconds (not counting a Kafka outage, nor the time before every
partition read has answered a fetch). Stopped, it hands over what it holds."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from engine.ingest.buffer import Batch, Buffers
from engine.kafka.watermarks import FIRST_FETCH_GRACE

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message

    from engine.ingest.assignment import Assignment
    from engine.ingest.faults import KafkaWatch
    from engine.ingest.gc_pause import GcPause
    from engine.ingest.options import IngestOptions
    from engine.ingest.positions import Positions
    from engine.ingest.stages import Stages
    from engine.ingest.state import LoopState

#: How often the consumer refreshes cached watermarks (lag) and looks for new partitions.
WATERMARK_EVERY = 1.0
METADATA_EVERY = 30.0
_POLL = 0.1


class ConsumeLoop:
    """The consumer thread's loop; :attr:`buffers` are its pools' buffers."""

    def __init__(
        self,
        options: IngestOptions,
        shared: LoopState,
        positions: Positions,
        stages: Stages,
        gc: GcPause,
        route: Mapping[str, str],
        watch: KafkaWatch,
    ) -> None:
        self._options = options
        self._shared = shared
        self._positions = positions
        self._stages = stages
        self._gc = gc
        self._watch = watch
        self.buffers = Buffers(shared.pools, route, options, self._hand_over)

    def run(self, consumer: Consumer, assignment: Assignment, stop: threading.Event) -> bool:
        """Poll and cut batches until stopped (True) or idle for exit_after (True);
        False when another thread failed."""
        opts = self._options
        shared = self._shared
        positions = self._positions
        buffers = self.buffers
        stages = self._stages
        in_group = positions.grouped
        started = time.monotonic()
        last_record = started
        next_watermarks = started
        next_metadata = started + METADATA_EVERY
        want = min(opts.max_records, 50_000)
        handed = stages.handed
        watch = self._watch
        fetched_all = False
        assigned_at = started
        heartbeat = shared.heartbeat
        while not stop.is_set():
            heartbeat.beat()  # every poll is progress; a hand-over blocked on a stuck writer is not
            if shared.error is not None:
                return False
            rebalances = positions.rebalances
            messages = consumer.consume(want, _POLL)
            now = time.monotonic()
            if messages:
                good = [m for m in messages if m.error() is None]
                if len(good) != len(messages):
                    watch.message_errors([m for m in messages if m.error() is not None])
                if in_group and positions.rebalances != rebalances:
                    # partitions moved during this call: keep only what is still ours
                    owned = positions.owned_now()
                    good = [m for m in good if (m.topic(), m.partition()) in owned]
                if good:
                    last_record = now
                    with shared.lock:
                        shared.consumed += len(good)
                        shared.last_record_at = now
                    buffers.add(good, now)
            if in_group and (positions.rebalances != rebalances or not positions.rebalances):
                # joining the group or taking partitions over is not idleness: exit_after
                # counts from the latest rebalance
                last_record = max(last_record, now)
                assigned_at = now
                fetched_all = False
            buffers.cut_due(now, caught_up=len(messages) < want)
            if positions.seeks:
                positions.apply_seeks(consumer)
            # a partition not fetched from yet (its leader looked up, its offset reset, a
            # slow broker) may hold records: no exit until every partition read answered
            # before this poll (a fetch response sets the watermark a moment before its
            # records reach the queue, so the poll after it is the one that finds them)
            first_fetch_due = (
                opts.exit_after is not None  # only an exit waits for it: no reads otherwise
                and not fetched_all
                and now - assigned_at < FIRST_FETCH_GRACE
            )
            if now >= next_watermarks or stages.handed != handed or first_fetch_due:
                # fresh before a batch is committed, so its commit reports a current lag
                handed = stages.handed
                fetched_all = assignment.read_watermarks(consumer)
                next_watermarks = now + WATERMARK_EVERY
            if in_group:
                assignment.flush_mirror(consumer)
            if now >= next_metadata:
                if not in_group:  # a subscription picks new partitions up by itself
                    assignment.new_partitions(consumer)
                next_metadata = now + METADATA_EVERY
                self._gc.when_idle()
            watch.check(consumer, now - last_record)
            if watch.down:  # waiting for Kafka is not idleness: exit_after counts from its return
                last_record = time.monotonic()
            elif (
                opts.exit_after is not None
                and now - last_record >= opts.exit_after
                and not first_fetch_due
                and not buffers.holding()
                and stages.inflight == 0
            ):
                if watch.probe(consumer):  # idle, not cut off: Kafka answers
                    shared.note(f"idle for {opts.exit_after:g}s: exiting")
                    return True
                last_record = time.monotonic()
        for buffer in buffers.holding():  # stopped: commit what we hold
            if shared.error is None:
                buffers.cut(buffer)
        return True

    def _hand_over(self, pool: str, messages: list[Message]) -> None:
        self._stages.hand_over(Batch(pool, messages, self._positions.rebalances))
