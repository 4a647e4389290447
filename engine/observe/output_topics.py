"""The ETLs' output topics as the topics snapshot shows them.

Per output topic: the staging pool's last offset for it, the topic's watermarks, the
last pool offset to-kafka delivered to it (read from Kafka once per high watermark), the
records staged but not delivered yet, and the rate. A broker that is down gives rows
with the lake's positions and a Kafka error. :class:`engine.observe.topics_view.TopicsView`
puts these rows after the input topics'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from engine.errors import one_line
from engine.kafka.envelope_names import DEFAULT
from engine.observe.kafka_probe import KafkaProbe
from engine.observe.lag import Rates
from engine.observe.reports import OUT, TopicSnapshot
from engine.observe.snapshot_pools import SnapshotPools

if TYPE_CHECKING:
    from engine.etl.config import EtlConfig


class _Output(NamedTuple):
    topic: str
    staged: str
    pool: str
    etl: str
    envelope: str


class OutputTopics:
    """The output topics' rows of the topics snapshot, and their delivered positions."""

    def __init__(
        self,
        pools: SnapshotPools,
        probe: KafkaProbe,
        etls: Sequence[EtlConfig],
        rates: Rates,
    ) -> None:
        self.pools = pools
        self.probe = probe
        self.etls = etls
        self.rates = rates
        self._delivered: dict[tuple[str, int | None], int | None] = {}

    def configured(self) -> list[_Output]:
        """Every ETL output: its topic, the staging topic it carries, pool, ETL, envelope."""
        return [
            _Output(o.topic, o.staged, o.pool, config.name, o.envelope or DEFAULT)
            for config in self.etls
            for o in config.outputs
        ]

    def rows(
        self,
        output: _Output,
        partitions: Mapping[str, int] | None,
        kafka_error: str | None,
        lake_error: str | None,
        now: float,
    ) -> list[TopicSnapshot]:
        from engine.etl.cursors import out_app  # deferred: engine.etl loads delta-rs

        topic, pool_name = output.topic, output.pool
        pool, error = self.pools.pool_or_error(pool_name, lake_error)
        staged = None
        if pool is not None:
            next_offset = pool.app_version(out_app(output.etl, output.staged))
            staged = None if next_offset is None else next_offset - 1
        low = high = None
        if partitions is not None and topic in partitions:
            marks, mark_error = self.probe.watermarks(topic, list(range(partitions[topic])))
            error = error or mark_error
            if marks:
                low = min(m[0] for m in marks.values())
                high = sum(m[1] for m in marks.values())
        else:
            error = error or kafka_error
        rate, history = self.rates.add((topic, 0, OUT), now, staged)
        delivered = None
        if partitions is not None and topic in partitions:
            delivered, read_error = self._delivered_offset(topic, partitions[topic], high)
            error = error or read_error
        lag = None
        if staged is not None:
            lag = max(0, staged - (-1 if delivered is None else delivered))
        return [
            TopicSnapshot(
                topic=topic,
                partition=0,
                pool=pool_name,
                direction=OUT,
                low=low,
                high=high,
                lake_offset=staged,
                lag_records=lag,
                rate=rate,
                history=history,
                error=error,
                envelope=output.envelope,
                staged=output.staged,
                delivered_offset=delivered,
            )
        ]

    def _delivered_offset(
        self, topic: str, count: int, high: int | None
    ) -> tuple[int | None, str | None]:
        """The last pool offset delivered to ``topic`` — the position to-kafka commits
        with its records (docs/design.md#exactly-once-to-kafka), else its messages'
        ``zync.offset`` headers read from its tail (a topic a zync before committed
        positions delivered) — once per high watermark, or None and why not."""
        key = (topic, high)
        if key in self._delivered:
            return self._delivered[key], None
        # deferred: the delivery's positions load confluent_kafka
        from engine.deliver.committed import CommittedPositions
        from engine.deliver.positions import read_positions

        assert self.probe.kafka is not None
        partitions = list(range(count))
        try:
            committed = CommittedPositions(self.probe.kafka, topic)
            try:
                found = {
                    p: c.position
                    for p, c in committed.read(partitions, self.probe.timeout).items()
                    if c is not None
                }
            finally:
                committed.close()
            if not any(found.values()):
                found = read_positions(
                    self.probe.kafka, topic, partitions, timeout=self.probe.timeout
                ).positions
        except Exception as exc:  # noqa: BLE001 - shown in words
            return None, f"cannot read {topic}'s delivered position: {one_line(exc, limit=300)}"
        offsets = [p.offset for p in found.values() if p is not None]
        delivered = max(offsets) if offsets else None
        self._delivered = {k: v for k, v in self._delivered.items() if k[0] != topic}
        self._delivered[key] = delivered
        return delivered, None
