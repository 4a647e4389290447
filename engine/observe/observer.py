"""The :class:`Observer`: what callers hold to take snapshots of a lake, its Kafka topics
and the ETLs configured on it.

It composes the parts of :mod:`engine.observe`: the pools each kind of snapshot reads
(:mod:`~engine.observe.snapshot_pools`), one Kafka probe (:mod:`~engine.observe.kafka_probe`), the
dead letters (:mod:`~engine.observe.dead_letters`), the topics snapshot
(:mod:`~engine.observe.topics_view`), the ETL snapshot (:mod:`~engine.observe.etl_view`)
and the tables snapshot (:mod:`~engine.observe.tables_view`).
Every snapshot says what it could not see in words (``error`` fields) instead of raising:
a broker that is down gives topic rows with the lake's positions and a Kafka error, a
missing lake gives an error and no rows, and the next poll picks recovery up by itself.
The clock (``clock``) is injectable, so ages and rates are deterministic under test.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from engine.observe.dead_letters import DeadLetters
from engine.observe.etl_view import EtlView
from engine.observe.kafka_probe import KafkaProbe
from engine.observe.reports import DeadLetter, EtlReport, TopicsReport
from engine.observe.snapshot_pools import SnapshotPools
from engine.observe.tables_view import TablesReport, TablesView
from engine.observe.topics_view import TopicsView

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.etl.config import EtlConfig
    from engine.lake.pools import Lake, Pool
    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile

#: How long a snapshot waits for Kafka or the registry before saying it is unreachable.
PROBE_TIMEOUT = 3.0


class Observer:
    """Takes snapshots of a lake, its Kafka topics and the ETLs configured on it.

    ``kafka`` and ``registry`` are connection profiles (None: not configured, and the
    snapshot says so). ``etls`` are loaded ETL configurations. ``spark`` is a callable
    returning the process's SparkSession, used only for pending/expired listings (the ETL
    module needs it); it is called in the polling thread, never at construction.

    One Observer is meant to be polled by one thread at a time per method (the console
    runs each kind of poll in its own non-overlapping worker); its caches are locked.
    """

    def __init__(
        self,
        lake: Lake,
        *,
        kafka: KafkaProfile | None = None,
        registry: RegistryProfile | None = None,
        etls: Sequence[EtlConfig] = (),
        spark: Callable[[], SparkSession] | None = None,
        clock: Callable[[], float] = time.time,
        probe_timeout: float = PROBE_TIMEOUT,
        kafka_error: str | None = None,
        registry_error: str | None = None,
    ) -> None:
        self.lake = lake
        self.kafka = kafka
        self.registry = registry
        self.etls = list(etls)
        self.spark = spark
        self.clock = clock
        self.probe_timeout = probe_timeout
        self._pools = SnapshotPools(lake)
        self._probe = KafkaProbe(
            kafka,
            registry,
            timeout=probe_timeout,
            kafka_error=kafka_error,
            registry_error=registry_error,
        )
        self._dead = DeadLetters(self._pools)
        self._topics = TopicsView(self._pools, self._probe, self._dead, self.etls, self._now)
        self._etl = EtlView(self._pools, self.etls, spark, self._now)
        self._tables = TablesView(lake, self.etls, self._now)

    def _now(self) -> float:
        return self.clock()

    def pool(self, name: str, part: str = "topics") -> Pool:
        """The pool ``name``, opened once per kind of snapshot and refreshed on every call."""
        return self._pools.pool(name, part)

    def pool_topics(self, pool: Pool) -> list[str]:
        """The topics a pool holds records (or dead letters) of; cached per version."""
        return self._topics.pool_topics(pool)

    def topics(self) -> TopicsReport:
        """Watermarks, lake positions, lag, rate and dead letters of every topic partition."""
        return self._topics.report()

    def dead_letter_counts(self, pool: Pool) -> dict[tuple[str, int], int]:
        """Dead letters per (topic, partition) in ``pool`` (cached per Delta version)."""
        return self._dead.counts(pool)

    def dead_letters(self, pool_name: str | None = None, limit: int = 1000) -> list[DeadLetter]:
        """The dead letters of one raw pool (or every raw pool), newest first."""
        return self._dead.listing(pool_name, limit)

    def marker_counts(self, staging: Pool) -> dict[tuple[str, str, int, str], int]:
        """Completion markers per (etl/rule, topic, partition, status); cached per version."""
        return self._etl.marker_counts(staging)

    def etl(self, *, listings: bool = True) -> EtlReport:
        """Cursors, processed/pending/expired counts, and the pending and expired records
        of every configured ETL. ``listings=False`` skips the Spark-backed listings."""
        return self._etl.report(listings=listings)

    def tables(self) -> TablesReport:
        """Every table the ETLs keep (and the lake's others): version, rows, the staging
        version it reflects, its staging pool's newest."""
        return self._tables.report()

    def close(self) -> None:
        with self._pools.locks["topics"]:
            self._probe.drop()
