"""Mirrors of committed positions to a Kafka consumer group, so lag tools see how far the
pools are. Only a mirror: the Delta log is the source of truth, and a failed group commit
is only reported. :class:`GroupMirror` commits from a thread of its own (an assign-mode
consumer); :class:`SubscribedMirror` commits through the workers group's subscribing
consumer, as a group with active members takes commits only from its members."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from engine.kafka.clients import consumer

if TYPE_CHECKING:
    from confluent_kafka import Consumer

    from engine.settings.kafka import KafkaProfile

log = logging.getLogger("engine.from_kafka")


class GroupMirror:
    """Mirrors committed positions to a consumer group, off the commit path.

    A thread holding an assign()-mode consumer with the group's id commits the latest
    positions it was given (older ones are superseded, never queued). A failed group
    commit is only reported: the Delta log is the source of truth.
    """

    def __init__(self, profile: KafkaProfile, group: str) -> None:
        self.group = group
        self._profile = profile
        self._latest: dict[tuple[str, int], int] = {}
        self._pending = False
        self._cond = threading.Condition()
        self._closing = False
        self.error: str | None = None
        self.committed: dict[tuple[str, int], int] = {}
        self._thread = threading.Thread(target=self._run, name=f"zync-mirror-{group}", daemon=True)
        self._thread.start()

    def publish(self, positions: Mapping[tuple[str, int], int]) -> None:
        with self._cond:
            self._latest.update(positions)
            self._pending = True
            self._cond.notify()

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        client = None
        try:
            client = consumer(self._profile, group=self.group)
            while True:
                with self._cond:
                    while not self._pending and not self._closing:
                        self._cond.wait()
                    if not self._pending and self._closing:
                        return
                    todo = dict(self._latest)
                    self._pending = False
                offsets = [TopicPartition(t, p, off + 1) for (t, p), off in sorted(todo.items())]
                try:
                    client.commit(offsets=offsets, asynchronous=False)
                    self.committed.update(todo)
                    self.error = None
                except KafkaException as exc:
                    self.error = f"group {self.group}: {exc.args[0].str()}"
                    log.warning("cannot mirror positions to %s", self.error)
        except Exception as exc:  # noqa: BLE001 - a mirror never stops the ingest
            self.error = f"group {self.group}: {exc}"
            log.warning("group mirror stopped: %s", self.error)
        finally:
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()


class SubscribedMirror:
    """Mirrors committed positions to the workers group, through the subscribing consumer.

    A group with active members rejects commits from a consumer that is not one of them
    (an assign-mode consumer has no member id or generation), so in a workers group the
    consumer thread itself commits, asynchronously and at most every :attr:`EVERY`
    seconds, the latest positions of the partitions it owns. As with
    :class:`GroupMirror`, a failed commit is only reported (and retried with the next
    positions): the Delta log is the source of truth.
    """

    EVERY = 0.5

    def __init__(self, group: str) -> None:
        self.group = group
        self._lock = threading.Lock()
        self._latest: dict[tuple[str, int], int] = {}
        self._dirty = False
        self._next_at = 0.0
        self.error: str | None = None
        self.committed: dict[tuple[str, int], int] = {}

    def publish(self, positions: Mapping[tuple[str, int], int]) -> None:
        """The pool's positions: after a commit (writer thread; partitions this worker
        may no longer own too), when partitions are assigned (consumer thread)."""
        with self._lock:
            for tp, off in positions.items():
                if off > self._latest.get(tp, -1):  # positions only grow
                    self._latest[tp] = off
                    self._dirty = True

    def flush(self, client: Consumer, owned: set[tuple[str, int]], *, final: bool = False) -> None:
        """From the consumer thread: commit what changed for the partitions it owns
        (``final``: now and synchronously, before the consumer closes; everything not
        confirmed yet, as an asynchronous commit still on its way may be lost then)."""
        now = time.monotonic()
        with self._lock:
            if not final and (not self._dirty or now < self._next_at):
                return
            todo = {
                tp: off
                for tp, off in self._latest.items()
                if tp in owned and self.committed.get(tp) != off
            }
            self._dirty = False
            self._next_at = now + self.EVERY
        if not todo:
            return
        offsets = [TopicPartition(t, p, off + 1) for (t, p), off in sorted(todo.items())]
        try:
            if final:
                self.on_commit(None, client.commit(offsets=offsets, asynchronous=False))
            else:
                client.commit(offsets=offsets, asynchronous=True)  # -> on_commit
        except KafkaException as exc:
            self._failed(exc.args[0].str())

    def on_commit(
        self, error: KafkaError | None, partitions: Sequence[TopicPartition] | None
    ) -> None:
        """The consumer's ``on_commit`` callback (served by its poll calls)."""
        if error is not None:
            self._failed(error.str() if hasattr(error, "str") else str(error))
            return
        failed = [tp.error for tp in partitions or () if tp.error is not None]
        with self._lock:
            for tp in partitions or ():
                if tp.error is None and tp.offset >= 0:
                    self.committed[(tp.topic, tp.partition)] = tp.offset - 1
        if failed:
            self._failed(failed[0].str())
        else:
            self.error = None

    def _failed(self, reason: str) -> None:
        self.error = f"group {self.group}: {reason}"
        with self._lock:
            self._dirty = True  # retried with the next flush
        log.warning("cannot mirror positions to %s", self.error)

    def close(self, timeout: float = 5.0) -> None:
        """Nothing to stop: the consumer thread flushes before closing its consumer."""


#: Either mirror: ``publish`` positions, read ``error``, ``close`` at the end.
Mirror = GroupMirror | SubscribedMirror
