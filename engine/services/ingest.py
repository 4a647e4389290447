"""The from-kafka service: :class:`engine.ingest.loop.Ingest` in a service's thread.

It waits for Kafka and for the input topics to exist, then copies them into raw pools;
each commit is counted in its status and told as an event (pool, version, records, dead
letters, lag). ``detail`` is the ingest's own :class:`engine.ingest.stats.IngestStats`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from engine.ingest.options import IngestInput, IngestOptions
from engine.kafka.outage import BACK, UNREACHABLE
from engine.services.report import (
    BYTES_IN,
    KAFKA,
    POOL_VERSION,
    RECORDS_IN,
    REGISTRY,
    Dependency,
    LoopReport,
    Metric,
    Reading,
    as_json,
    readings,
)
from engine.services.service import RUNNING, Service, ServiceEvent, ServiceStatus
from engine.spark import SparkSource

if TYPE_CHECKING:
    from engine.ingest.loop import Ingest
    from engine.ingest.stats import CommitInfo, IngestStats
    from engine.lake.pools import Lake
    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile


DEAD_LETTERS = Metric(
    "dead_letters_total",
    "counter",
    "Records from-kafka kept as dead letters, per raw pool and stage (decode, shaper).",
)
CONSUMER_LAG = Metric(
    "consumer_lag_records",
    "gauge",
    "Records in Kafka after the raw pool's position, per partition: high watermark - next offset.",
)
CONSUMER_OFFSET = Metric(
    "consumer_committed_offset", "gauge", "The last offset the raw pool holds, per partition."
)
HIGH_WATERMARK = Metric(
    "consumer_high_watermark", "gauge", "The partition's high watermark, as from-kafka last read it."
)


class FromKafkaService(Service["IngestStats"]):
    """from-kafka over ``inputs`` ((topic, pool) pairs); waits for missing topics."""

    name = "from-kafka"
    imports_first = ("pyspark.sql",)  # topic types are read with pyspark's type parser

    def __init__(
        self,
        inputs: Iterable[tuple[str, str]],
        lake: Lake,
        *,
        kafka: KafkaProfile,
        registry: RegistryProfile | None = None,
        options: IngestOptions | None = None,
        spark: SparkSource = None,
        on_event: Callable[[ServiceEvent], None] | None = None,
        on_commit: Callable[[CommitInfo], None] | None = None,
        wait_for_topics: bool = True,
    ) -> None:
        super().__init__(on_event=on_event)
        self.wait_for_topics = wait_for_topics  # False: a missing topic fails the loop
        self.inputs = [IngestInput(topic, pool) for topic, pool in inputs]
        self.lake = lake
        self.kafka = kafka
        self.registry = registry
        self.options = options or IngestOptions(create_pools=True)
        self._spark = spark
        self._on_commit = on_commit
        self.ingest: Ingest | None = None
        self._kafka_wait: str | None = None  # why the loop waits for Kafka before it starts

    def _detail(self) -> IngestStats | None:
        return None if self.ingest is None else self.ingest.status()

    def _run(self, stop: threading.Event) -> None:
        from engine.ingest.loop import Ingest  # deferred: confluent_kafka and deltalake

        if self.wait_for_topics and not self._wait_for_topics(stop):
            return
        self.ingest = Ingest(
            self.inputs,
            lake=self.lake,
            kafka=self.kafka,
            registry=self.registry,
            options=self.options,
            spark=self._spark,
            heartbeat=self.heartbeat,
        )
        self._running()
        self.ingest.run(stop, on_commit=self._commit, on_note=self._note)

    def _note(self, kind: str, text: str) -> None:
        """An outage of Kafka or the registry began (``unreachable``) or ended (``back``)."""
        if kind in (UNREACHABLE, BACK):
            self._failed_softly(text if kind == UNREACHABLE else None)
            dependency = REGISTRY if text.startswith("Schema Registry") else KAFKA
            self._event(kind, text, dependency=dependency)

    def report(self, status: ServiceStatus[IngestStats]) -> LoopReport:
        stats = status.detail
        found: list[Reading | None] = []
        outages = stats.outages if stats is not None else {}
        for pool in stats.pools if stats is not None else ():
            found.append(POOL_VERSION.at(pool.version, pool=pool.pool))
            found += [RECORDS_IN.at(n, topic=t) for t, n in pool.topic_records.items()]
            found += [BYTES_IN.at(n, topic=t) for t, n in pool.topic_bytes.items()]
            found += [
                DEAD_LETTERS.at(n, pool=pool.pool, stage=stage)
                for stage, n in pool.dead_stages.items()
            ]
            for p in pool.partitions:
                where = {"topic": p.topic, "partition": p.partition}
                found += [
                    CONSUMER_LAG.at(p.lag, **where),
                    CONSUMER_OFFSET.at(p.lake_offset, **where),
                    HIGH_WATERMARK.at(p.high, **where),
                ]
        running = status.state == RUNNING
        kafka_down = outages.get(KAFKA) or self._kafka_wait
        kafka = Dependency(KAFKA, False if kafka_down else (True if running else None), kafka_down)
        registry = Dependency(
            REGISTRY,
            False if REGISTRY in outages else (True if running and self.registry else None),
            outages.get(REGISTRY),
        )
        return LoopReport(
            detail=as_json(stats) if stats is not None else {},
            readings=readings(*found),
            dependencies=(kafka, registry),
        )

    def _wait_for_topics(self, stop: threading.Event) -> bool:
        from engine.kafka.clients import KafkaUnavailable, check_reachable  # deferred: librdkafka

        announced = ""
        while not stop.is_set():
            self.heartbeat.beat()
            try:
                topics = check_reachable(self.kafka)
                missing = [i.topic for i in self.inputs if not topics.get(i.topic)]
                problem = f"waiting for topic(s) {', '.join(missing)} to exist" if missing else ""
                self._kafka_wait = None
            except KafkaUnavailable as exc:
                problem = f"waiting for Kafka: {exc}"
                self._kafka_wait = problem
            if not problem:
                self._failed_softly(None)
                return True
            if problem != announced:
                self._event("waiting", problem)
                self._failed_softly(problem)
                announced = problem
            with self.heartbeat.waiting(problem):
                stop.wait(2.0)
        return False

    def _commit(self, info: CommitInfo) -> None:
        self._committed(info.version, info.records, info.pool)
        fields = {
            "pool": info.pool, "version": info.version, "records": info.records,
            "dead_letters": info.dead_letters, "seconds": round(info.seconds, 4),
            "lag": {t: n for t, n in info.topic_lag().items() if n is not None},
        }  # fmt: skip
        lagging = any(info.topic_lag().values())
        tail = f", lag {info.lag_text()}" if lagging else ""
        dead = f", {info.dead_letters} dead letter(s)" if info.dead_letters else ""
        self._event(
            "commit",
            f"{info.pool} v{info.version}: +{info.records} record(s){dead} in {info.seconds:.2f}s{tail}",
            **fields,
        )
        if self._on_commit is not None:
            self._on_commit(info)
