"""An ETL's positions, kept in the staging pool's Delta log as ``txn`` app ids.

Every position is committed in the same Delta commit as the outputs and completion
markers it accounts for (docs/design.md#exactly-once-etl), under app ids of the ETL's name:

``zync.etl/<name>/cursor/<topic>/<partition>``
    the cursor C: every input record of (topic, partition) with offset ≤ C is processed
    or expired. A pass reads only offsets above it.
``zync.etl/<name>/parts/<topic>``
    how many partitions of the topic the ETL has seen (Kafka numbers them 0..n-1), so
    the cursors can be looked up (Delta cannot list app ids).
``zync.etl/<name>/out/<topic>``
    the next output offset of an output topic (offsets are contiguous from 0).
``zync.etl/<name>/floor/<pool>``
    the smallest seqno of the raw pool that may still hold undone input: a pass reads
    only raw files with ``seqno >= floor`` (Delta statistics prune the rest).
``zync.etl/<name>/marker-floor``
    the smallest staging seqno of this ETL's markers above any cursor: a pass reads
    only staging files with ``seqno >= marker-floor`` to know which pending-window
    records are already done.
``zync.etl/<name>/newest/<topic>``
    the newest Kafka timestamp (epoch microseconds) seen on an input topic, the clock
    of event-time expiry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.etl.sql import quote

if TYPE_CHECKING:
    from engine.etl.config import EtlConfig
    from engine.lake.pools import Pool

PREFIX = "zync.etl"

TopicPartition = tuple[str, int]


def app_prefix(etl: str) -> str:
    return f"{PREFIX}/{etl}"


def cursor_app(etl: str, topic: str, partition: int) -> str:
    return f"{PREFIX}/{etl}/cursor/{topic}/{partition}"


def parts_app(etl: str, topic: str) -> str:
    return f"{PREFIX}/{etl}/parts/{topic}"


def out_app(etl: str, topic: str) -> str:
    return f"{PREFIX}/{etl}/out/{topic}"


def floor_app(etl: str, pool: str) -> str:
    return f"{PREFIX}/{etl}/floor/{pool}"


def marker_floor_app(etl: str) -> str:
    return f"{PREFIX}/{etl}/marker-floor"


def newest_app(etl: str, topic: str) -> str:
    return f"{PREFIX}/{etl}/newest/{topic}"


@dataclass
class Positions:
    """Everything an ETL pass starts from, as read from one staging snapshot."""

    etl: str
    staging_version: int
    cursors: dict[TopicPartition, int] = field(default_factory=dict)
    parts: dict[str, int] = field(default_factory=dict)
    next_offsets: dict[str, int] = field(default_factory=dict)
    floors: dict[str, int] = field(default_factory=dict)
    marker_floor: int = 0
    newest: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, config: EtlConfig, staging: Pool) -> Positions:
        """The positions in the staging pool's loaded snapshot."""
        name = config.name
        get = staging.app_version
        positions = cls(etl=name, staging_version=staging.version)
        for topic in config.input_topics:
            parts = get(parts_app(name, topic))
            if parts is not None:
                positions.parts[topic] = parts
                for partition in range(parts):
                    cursor = get(cursor_app(name, topic, partition))
                    if cursor is not None:
                        positions.cursors[(topic, partition)] = cursor
            newest = get(newest_app(name, topic))
            if newest is not None:
                positions.newest[topic] = newest
        for topic in config.output_topics:
            positions.next_offsets[topic] = get(out_app(name, topic)) or 0
        for pool in config.raw_pools:
            positions.floors[pool] = get(floor_app(name, pool)) or 0
        positions.marker_floor = get(marker_floor_app(name)) or 0
        return positions

    def cursor(self, topic: str, partition: int) -> int | None:
        return self.cursors.get((topic, partition))

    def floor(self, pool: str) -> int:
        return self.floors.get(pool, 0)

    def app_transactions(self) -> dict[str, int]:
        """Every position as ``{app id: version}``."""
        name = self.etl
        txns: dict[str, int] = {}
        for (topic, partition), cursor in self.cursors.items():
            txns[cursor_app(name, topic, partition)] = cursor
        for topic, parts in self.parts.items():
            txns[parts_app(name, topic)] = parts
        for topic, offset in self.next_offsets.items():
            txns[out_app(name, topic)] = offset
        for pool, floor in self.floors.items():
            txns[floor_app(name, pool)] = floor
        txns[marker_floor_app(name)] = self.marker_floor
        for topic, newest in self.newest.items():
            txns[newest_app(name, topic)] = newest
        return txns

    def changes_from(self, before: Positions) -> dict[str, int]:
        """The app transactions whose value differs from ``before``'s."""
        old = before.app_transactions()
        return {app: v for app, v in self.app_transactions().items() if old.get(app) != v}


def cursor_filter(
    cursors: Mapping[TopicPartition, int], topics: Iterable[str], *, column: str = "kafka"
) -> str:
    """A Spark SQL predicate keeping rows of ``topics`` above the cursors.

    ``column`` is the struct holding ``topic, partition, offset``: ``kafka`` for input
    records, ``marker`` for completion markers.
    """
    wanted = sorted(set(topics))
    if not wanted:
        return "false"
    c = column
    parts = [f"{c}.topic IN ({', '.join(quote(t) for t in wanted)})"]
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), cursor in sorted(cursors.items()):
        if topic in wanted:
            by_topic.setdefault(topic, []).append((partition, cursor))
    for topic, cursors_of in by_topic.items():
        cases = " ".join(f"WHEN {p} THEN {cur}L" for p, cur in cursors_of)
        parts.append(
            f"({c}.topic <> {quote(topic)} OR {c}.offset > "
            f"coalesce(CASE {c}.partition {cases} END, -1L))"
        )
    return " AND ".join(parts)
