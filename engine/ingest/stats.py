"""What a running from-kafka reports: a snapshot of the loop (:class:`IngestStats`, polled
by the console and ``zync run``), per pool and per partition, and one
:class:`CommitInfo` per commit for ``on_commit``. All frozen: safe to hand to any thread."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


def _total(lags: Sequence[int | None]) -> int | None:
    """The sum of lags; None when there are none or one is unknown."""
    known = [lag for lag in lags if lag is not None]
    return None if not lags or len(known) != len(lags) else sum(known)


@dataclass(frozen=True)
class PartitionStats:
    """One input partition: what the pool holds and what Kafka says it has."""

    topic: str
    partition: int
    lake_offset: int | None
    low: int | None = None
    high: int | None = None

    @property
    def lag(self) -> int | None:
        """Records in Kafka after the pool's position (never negative; None: unknown),
        from the high watermark: a figure for people, never a position."""
        if self.high is None:
            return None
        done = self.lake_offset + 1 if self.lake_offset is not None else (self.low or 0)
        return max(0, self.high - done)


@dataclass(frozen=True)
class CommitRef:
    """The last commit of a loop (for the console's loop table)."""

    pool: str
    version: int
    at: float
    records: int


@dataclass(frozen=True)
class PoolStats:
    """One pool of a running ingest. Counts are since the ingest started."""

    pool: str
    topics: tuple[str, ...]
    version: int | None = None
    records: int = 0
    dead_letters: int = 0
    skipped: int = 0
    commits: int = 0
    last_commit_at: float | None = None
    last_commit_records: int = 0
    rate: float = 0.0
    group: str | None = None
    group_error: str | None = None
    partitions: tuple[PartitionStats, ...] = ()
    #: per topic: records committed (dead letters included) and their values' bytes
    topic_records: Mapping[str, int] = field(default_factory=dict)
    topic_bytes: Mapping[str, int] = field(default_factory=dict)
    #: dead letters committed per stage (``decode``, ``shaper``)
    dead_stages: Mapping[str, int] = field(default_factory=dict)

    @property
    def lag(self) -> int | None:
        return _total([p.lag for p in self.partitions])

    def topic_lag(self) -> dict[str, int | None]:
        out: dict[str, int | None] = {}
        for p in self.partitions:
            lag = p.lag
            if p.topic not in out:
                out[p.topic] = lag
            else:
                prev = out[p.topic]
                out[p.topic] = None if prev is None or lag is None else prev + lag
        return out


@dataclass(frozen=True)
class IngestStats:
    """A snapshot of an :class:`~engine.ingest.loop.Ingest` (``state``: idle, starting,
    running, stopping, stopped or failed)."""

    state: str
    pools: tuple[PoolStats, ...] = ()
    started_at: float | None = None
    consumed: int = 0
    last_commit: CommitRef | None = None
    rate: float = 0.0
    error: str | None = None
    idle_seconds: float | None = None
    notes: tuple[str, ...] = ()
    #: outages under way, by dependency (``kafka``, ``registry``): the line that began it
    outages: Mapping[str, str] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.pools)

    @property
    def dead_letters(self) -> int:
        return sum(p.dead_letters for p in self.pools)

    @property
    def lag(self) -> int | None:
        return _total([p.lag for p in self.pools])

    def pool(self, name: str) -> PoolStats | None:
        return next((p for p in self.pools if p.pool == name), None)


@dataclass(frozen=True)
class CommitInfo:
    """One commit of one pool, as ``on_commit`` receives it (from the committer thread).

    ``seconds``: the batch's time in the committer; ``timings``: its parts (extract,
    decode, build, commit — the commit includes recording types and re-planning).
    """

    pool: str
    version: int
    records: int
    dead_letters: int
    skipped: int
    positions: Mapping[tuple[str, int], int]
    seconds: float
    timings: Mapping[str, float]
    upkeep: tuple[str, ...]
    stats: IngestStats

    def topic_lag(self) -> dict[str, int | None]:
        pool = self.stats.pool(self.pool)
        return pool.topic_lag() if pool else {}

    def lag_text(self) -> str:
        """The pool's lag in words (:func:`lag_text`)."""
        return lag_text(self.topic_lag())


#: Topics a commit line names one by one; more are summed (a connector's hundreds).
LAG_TOPICS = 5


def lag_text(lags: Mapping[str, int | None]) -> str:
    """Each topic's lag (``a=1,200 b=0 c=?``), or for more than :data:`LAG_TOPICS`
    topics the total and the three furthest behind (``3,000 over 200 topics: t7=900
    t2=800 t9=700 +12 more``)."""

    def one(topic: str, lag: int | None) -> str:
        return f"{topic}={lag:,}" if lag is not None else f"{topic}=?"

    if len(lags) <= LAG_TOPICS:
        return " ".join(one(t, lag) for t, lag in sorted(lags.items()))
    known = [lag for lag in lags.values() if lag is not None]
    unknown = len(lags) - len(known)
    behind = sorted(((lag, t) for t, lag in lags.items() if lag), reverse=True)
    text = f"{sum(known):,} over {len(lags)} topics"
    if unknown:
        text += f" ({unknown} unknown)"
    if behind:
        shown = " ".join(one(t, lag) for lag, t in behind[:3])
        more = f" +{len(behind) - 3} more" if len(behind) > 3 else ""
        text += f": {shown}{more}"
    return text
