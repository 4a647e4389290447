"""Every topic partition the pipeline reads or writes, as the lake and Kafka see it.

Inputs are the ETLs' input topics and every topic found in a raw pool: per partition,
the watermarks, the lake's offset, lag (:mod:`engine.observe.lag`), rate and dead letters.
Outputs are the ETLs' output topics: the staging pool's last offset and the topic's
watermarks (:mod:`engine.observe.output_topics`). A broker that is down gives rows with
the lake's positions and a Kafka error; a missing lake gives an error and no rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from engine.errors import one_line
from engine.observe.dead_letters import DeadLetters
from engine.observe.kafka_probe import KafkaProbe
from engine.observe.lag import Rates, partition_lag
from engine.observe.output_topics import OutputTopics
from engine.observe.reports import IN, TopicSnapshot, TopicsReport
from engine.observe.snapshot_pools import SnapshotPools

if TYPE_CHECKING:
    from engine.etl.config import EtlConfig
    from engine.lake.pools import Pool


class TopicsView:
    """The topics snapshot: its pools, Kafka probe, dead-letter counts and rates."""

    def __init__(
        self,
        pools: SnapshotPools,
        probe: KafkaProbe,
        dead_letters: DeadLetters,
        etls: Sequence[EtlConfig],
        clock: Callable[[], float],
    ) -> None:
        self.pools = pools
        self.probe = probe
        self.dead_letters = dead_letters
        self.etls = etls
        self.clock = clock
        self.rates = Rates()
        self._topics_cache: dict[str, tuple[int, list[str]]] = {}
        self.output_topics = OutputTopics(pools, probe, etls, self.rates)

    def report(self) -> TopicsReport:
        """Watermarks, lake positions, lag, rate and dead letters of every topic partition."""
        lake = self.pools.lake
        with self.pools.locks["topics"]:
            now = self.clock()
            lake_error = self.pools.lake_error()
            inputs: list[tuple[str, str]] = []
            if lake_error is None:
                try:
                    inputs = self._inputs()
                except Exception as exc:  # noqa: BLE001 - shown in words
                    lake_error = (
                        f"cannot read the lake at {lake.location}: {one_line(exc, limit=300)}"
                    )
            elif self.etls:
                inputs = [(e.topic, e.pool) for c in self.etls for e in c.inputs]
            outputs = self.output_topics.configured()
            partitions, kafka_error = self.probe.partitions()
            registry_error = self.probe.registry_check()
            rows: list[TopicSnapshot] = []
            for topic, pool_name in inputs:
                rows.extend(
                    self._input_rows(topic, pool_name, partitions, kafka_error, lake_error, now)
                )
            for output in outputs:
                rows.extend(self.output_topics.rows(output, partitions, kafka_error, lake_error, now))
            return TopicsReport(
                taken_at=now,
                topics=tuple(rows),
                kafka_error=kafka_error,
                registry_error=registry_error,
                lake_error=lake_error,
            )

    def _inputs(self) -> list[tuple[str, str]]:
        """(topic, raw pool) pairs: the ETLs' inputs, then topics found in raw pools."""
        seen: dict[tuple[str, str], None] = {}
        for config in self.etls:
            for endpoint in config.inputs:
                seen[(endpoint.topic, endpoint.pool)] = None
        for name in self.pools.lake.pool_names():
            try:
                pool = self.pools.pool(name)
            except Exception:  # noqa: BLE001 - a table that is not a pool: not ours to show
                continue
            if pool.kind != "raw":
                continue
            for topic in self.pool_topics(pool):
                seen[(topic, name)] = None
        return list(seen)

    def pool_topics(self, pool: Pool) -> list[str]:
        """The topics a pool holds records (or dead letters) of; cached per version."""
        cached = self._topics_cache.get(pool.name)
        if cached is not None and cached[0] == pool.version:
            return cached[1]
        import pyarrow.compute as pc  # deferred, like every heavy import of engine.observe
        import pyarrow.dataset as ds

        table = pool.dataset().to_table(
            columns={"topic": ds.field("kafka", "topic")}, filter=ds.field("kafka").is_valid()
        )
        found = {t for t in pc.unique(table.column("topic")).to_pylist() if t is not None}
        topics = sorted(found | set(pool.meta.types))
        self._topics_cache[pool.name] = (pool.version, topics)
        return topics

    def _input_rows(
        self,
        topic: str,
        pool_name: str,
        partitions: Mapping[str, int] | None,
        kafka_error: str | None,
        lake_error: str | None,
        now: float,
    ) -> list[TopicSnapshot]:
        pool, pool_error = self.pools.pool_or_error(pool_name, lake_error)
        count = (partitions or {}).get(topic, 0)
        parts = list(range(count))
        if pool is not None:
            # partitions the lake knows of, even when Kafka cannot be asked
            partition = 0
            while pool.position(topic, partition) is not None:
                parts.append(partition)
                partition += 1
            parts = sorted(set(parts))
        if not parts:
            parts = [0]
        marks: dict[int, tuple[int, int]] = {}
        error = pool_error or kafka_error
        if partitions is not None and topic not in partitions:
            error = error or f"topic {topic} does not exist in Kafka yet"
        elif partitions is not None:
            marks, mark_error = self.probe.watermarks(topic, list(range(count)))
            error = error or mark_error
        dead: dict[tuple[str, int], int] = {}
        if pool is not None:
            try:
                dead = self.dead_letters.counts(pool)
            except Exception as exc:  # noqa: BLE001 - shown in words
                error = error or f"cannot count dead letters: {one_line(exc, limit=300)}"
        rows = []
        for partition in parts:
            position = pool.position(topic, partition) if pool is not None else None
            low, high = marks.get(partition, (None, None))
            lag = partition_lag(self.probe, topic, partition, position, low, high)
            error = error or lag.error
            rate, history = self.rates.add((topic, partition, IN), now, position)
            rows.append(
                TopicSnapshot(
                    topic=topic,
                    partition=partition,
                    pool=pool_name,
                    direction=IN,
                    low=low,
                    high=lag.high,
                    lake_offset=position,
                    lag_records=lag.records,
                    lag_seconds=lag.seconds,
                    source_lag_seconds=lag.source_seconds,
                    rate=rate,
                    history=history,
                    dead_letters=dead.get((topic, partition), 0),
                    error=error,
                )
            )
        return rows
