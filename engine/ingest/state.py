"""The live state the consumer, decoder and writer threads share, under one lock: the
loop's state and error, counts, notes, each pool's committed positions and counters
(:class:`PoolState`), cached watermarks and the group mirrors; and the consistent
snapshot of it all (:meth:`LoopState.snapshot`) that ``status()`` returns. Notes made
with :meth:`LoopState.note` also go to the run's listener, with their kind."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.errors import ZyncError
from engine.heartbeat import Heartbeat
from engine.ingest.stats import CommitRef, IngestStats, PartitionStats, PoolStats
from engine.lake.pool_errors import PoolError

if TYPE_CHECKING:
    from engine.ingest.group_mirror import Mirror
    from engine.lake.maintenance import Upkeep
    from engine.lake.pools import Pool
    from engine.lake.topic_types import TopicTypes

log = logging.getLogger("engine.from_kafka")

#: The window over which :attr:`PoolStats.rate` is averaged, in seconds.
RATE_WINDOW = 10.0

TopicPart = tuple[str, int]

#: The kind of an ordinary note (an outage's are ``engine.kafka.outage.UNREACHABLE``
#: and ``BACK``).
NOTE = "note"

#: Hears each note made with :meth:`LoopState.note`: ``listener(kind, text)``.
NoteListener = Callable[[str, str], None]


class PoolState:
    """The committer's view of one pool (touched by the committer thread, read under lock).

    ``positions``: the last offset the pool holds per partition (None: nothing yet);
    ``next``: where the next batch of a partition must start (its ``starts`` guard).
    """

    def __init__(self, pool: Pool, topics: list[str], group: str | None, upkeep: Upkeep) -> None:
        self.pool = pool
        self.topics = topics
        self.group = group
        self.records = 0
        self.dead_letters = 0
        self.skipped = 0
        self.commits = 0
        self.version: int | None = pool.version
        self.last_commit_at: float | None = None
        self.last_commit_records = 0
        self.window: deque[tuple[float, int]] = deque()
        self.topic_records: dict[str, int] = {}
        self.topic_bytes: dict[str, int] = {}
        self.dead_stages: dict[str, int] = {}
        self.positions: dict[TopicPart, int | None] = {}
        self.next: dict[TopicPart, int] = {}
        self.recorded: dict[str, TopicTypes] = {}
        self.upkeep = upkeep

    def rate(self, now: float) -> float:
        while self.window and now - self.window[0][0] > RATE_WINDOW:
            self.window.popleft()
        if not self.window:
            return 0.0
        span = max(now - self.window[0][0], 1.0)
        return sum(n for _, n in self.window) / span


class LoopState:
    """Everything the loop's threads share; ``lock`` guards it (and the per-run state of
    :class:`engine.ingest.positions.Positions` and :class:`engine.ingest.stages.Stages`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state = "idle"
        self.error: BaseException | None = None
        self.started_at: float | None = None
        self.consumed = 0
        self.last_commit: CommitRef | None = None
        self.last_record_at: float | None = None
        self.notes: deque[str] = deque(maxlen=20)
        self.pools: dict[str, PoolState] = {}
        self.watermarks: dict[TopicPart, tuple[int, int]] = {}
        self.mirrors: dict[str, Mirror] = {}
        self.listener: NoteListener | None = None
        #: beaten by the consumer thread, waited on by the decoder (engine.heartbeat)
        self.heartbeat = Heartbeat("from-kafka")
        #: outages under way, by dependency (``kafka``, ``registry``)
        self.outages: dict[str, str] = {}

    def begin(self) -> None:
        """A fresh run (the console may start a stopped loop again): counts and pools
        start over; the last commit and the notes stay."""
        with self.lock:
            self.state = "starting"
            self.error = None
            self.started_at = time.time()
            self.consumed = 0
            self.last_record_at = None
            self.pools = {}
            self.mirrors = {}
            self.watermarks = {}
            self.outages = {}

    def set_state(self, state: str, *, when: str | None = None) -> None:
        """Move to ``state`` (``when``: only from that state)."""
        with self.lock:
            if when is None or self.state == when:
                self.state = state

    def end(self) -> None:
        """The run is over: stopped, or failed when an error was kept."""
        with self.lock:
            self.state = "failed" if self.error is not None else "stopped"

    def note(self, text: str, kind: str = NOTE) -> None:
        """Keep ``text`` in the notes and tell the listener (outside the lock: it may
        ask for a snapshot)."""
        with self.lock:
            self.notes.append(text)
        listener = self.listener
        if listener is not None:
            try:
                listener(kind, text)
            except Exception:  # a listener never stops the loop
                log.exception("a note listener failed")

    def fail(self, exc: BaseException) -> None:
        """Keep the first failure; every thread stops at its next check of :attr:`error`."""
        with self.lock:
            if self.error is None:
                self.error = exc

    def snapshot(self) -> IngestStats:
        """A consistent snapshot of the loop (cheap; safe from any thread)."""
        with self.lock:
            pools = []
            total_rate = 0.0
            for name, st in self.pools.items():
                rate = st.rate(time.monotonic())
                total_rate += rate
                mirror = self.mirrors.get(name)
                partitions = tuple(
                    PartitionStats(
                        t,
                        p,
                        off,
                        *(self.watermarks.get((t, p)) or (None, None)),
                    )
                    for (t, p), off in sorted(st.positions.items())
                )
                pools.append(
                    PoolStats(
                        pool=name,
                        topics=tuple(st.topics),
                        version=st.version,
                        records=st.records,
                        dead_letters=st.dead_letters,
                        skipped=st.skipped,
                        commits=st.commits,
                        last_commit_at=st.last_commit_at,
                        last_commit_records=st.last_commit_records,
                        rate=rate,
                        group=st.group,
                        group_error=mirror.error if mirror else None,
                        partitions=partitions,
                        topic_records=dict(st.topic_records),
                        topic_bytes=dict(st.topic_bytes),
                        dead_stages=dict(st.dead_stages),
                    )
                )
            idle = None
            if self.last_record_at is not None:
                idle = max(0.0, time.monotonic() - self.last_record_at)
            error = self.error
            return IngestStats(
                state=self.state,
                pools=tuple(pools),
                started_at=self.started_at,
                consumed=self.consumed,
                last_commit=self.last_commit,
                rate=total_rate,
                error=describe(error) if error is not None else None,
                idle_seconds=idle if self.state == "running" else None,
                notes=tuple(self.notes),
                outages=dict(self.outages),
            )


def describe(exc: BaseException) -> str:
    """An error in one line for the status: zync's own messages as they are."""
    text = str(exc).strip()
    if isinstance(exc, ZyncError | PoolError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
