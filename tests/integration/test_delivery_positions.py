"""Positions that outlive the output topic's records and the topic itself
(docs/design.md#exactly-once-to-kafka), on the real broker: retention emptying every
partition, compaction removing the tombstone at a partition's end, the committed
position expired, a topic delivered by a zync from before committed positions, and a
topic deleted and created again.

A consumer reads each topic from its start while the test runs (retention and
compaction remove records later), so what was delivered can be compared with staging:
every output once, none missing. The session broker applies retention and compaction
within seconds (tests/stack.py: SESSION_BROKER); the topics' own settings do the rest.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.test_differential import check_invariants, latest_images, rebuild
from tests.integration.test_to_kafka import (
    Received,
    deliver,
    invoice,
    invoice_types,
    profiles,
    stage,
    stage_many,
    staging_pool,
    unique,
)

pytestmark = [pytest.mark.integration]


class Collector:
    """Reads ``topic`` (every partition, read_committed, JSON) from its start, in a
    thread, until :meth:`close`: everything delivered, before retention or compaction
    removes it."""

    def __init__(self, kafka: Any, topic: str, partitions: int) -> None:
        from confluent_kafka import TopicPartition

        from engine.kafka.clients import consumer

        self.records: list[Received] = []
        self._stop = threading.Event()
        self._reader = consumer(kafka)
        self._reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        import json

        while not self._stop.is_set():
            for m in self._reader.consume(1000, 0.1):
                if m.error() is not None:
                    continue
                headers = {k: v.decode() for k, v in (m.headers() or []) if v is not None}
                value = None if m.value() is None else json.loads(m.value())
                key = None if m.key() is None else json.loads(m.key())
                self.records.append(Received(m.partition(), m.offset(), key, value, headers))

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        _wait(lambda: len(self.records) >= count, timeout, f"{count} records")
        time.sleep(0.3)  # and nothing more
        assert len(self.records) == count, f"{len(self.records)} records, not {count}"
        return list(self.records)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._reader.close()


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _marks(kafka: Any, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    from engine.kafka.clients import consumer
    from engine.kafka.watermarks import watermarks

    reader = consumer(kafka)
    try:
        return watermarks(reader, topic, list(range(partitions)))
    finally:
        reader.close()


def _pool_offsets(records: list[Received]) -> list[int]:
    """The pool offset of each jdbc message (small transactions: every one says it)."""
    return [int(r.headers["zync.offset"]) for r in records]


def test_retention_emptying_the_partitions_delivers_nothing_twice(lake, broker) -> None:
    """jdbc to three partitions, differential to two: each topic keeps records for two
    seconds; once every partition is empty, the next outputs go on from where the
    first stopped."""
    from engine.kafka.clients import ensure_topic

    kafka, _ = profiles(broker)
    pool = staging_pool(lake)
    outputs = {"jdbc": (unique("Retained"), 3), "differential": (unique("RetainedDiff"), 2)}
    collectors = {}
    for envelope, (topic, partitions) in outputs.items():
        retained = {"retention.ms": "2000", "segment.ms": "200"}
        ensure_topic(kafka, topic, partitions=partitions, config=retained)
        collectors[envelope] = Collector(kafka, topic, partitions)
    try:
        first = {}
        for envelope, (topic, _) in outputs.items():
            stage_many(pool, topic, 60, per_commit=20)
            status, _ = deliver(lake, topic, kafka, format="json", envelope=envelope)
            first[envelope] = status.records_delivered
            collectors[envelope].wait_for(first[envelope])

        def emptied() -> bool:  # every record gone: each partition's start is its end
            return all(
                low == high > 0
                for topic, partitions in outputs.values()
                for low, high in _marks(kafka, topic, partitions).values()
            )

        _wait(emptied, 60, "retention to empty every partition")
        got = {}
        for envelope, (topic, _) in outputs.items():
            stage_many(pool, topic, 30, per_commit=30)
            status, events = deliver(lake, topic, kafka, format="json", envelope=envelope)
            assert "after pool offset 59" in " ".join(e.message for e in events)
            got[envelope] = collectors[envelope].wait_for(first[envelope] + status.records_delivered)
    finally:
        for collector in collectors.values():
            collector.close()
    offsets = _pool_offsets(got["jdbc"])
    assert sorted(offsets) == list(range(90))  # none twice, none skipped
    assert [(r.key, r.value) for r in sorted(got["jdbc"], key=lambda r: r.anchor or 0)] == [
        invoice(i) for i in range(90)
    ]
    check_invariants(got["differential"])  # no position twice, counts, no late update
    topic, partitions = outputs["differential"]
    assert rebuild(got["differential"], partitions) == latest_images(pool, topic)


def test_a_compacted_tombstone_at_the_end_delivers_nothing_twice(lake, broker) -> None:
    from engine.deliver.positions import read_positions
    from engine.kafka.clients import ensure_topic, producer

    kafka, _ = profiles(broker)
    topic = unique("Compacted")
    pool = staging_pool(lake)
    compacted = {
        "cleanup.policy": "compact",
        "delete.retention.ms": "0",
        "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0",
        "segment.ms": "1",  # each append rolls a segment: the tombstone's is cleanable
    }
    ensure_topic(kafka, topic, config=compacted)
    collector = Collector(kafka, topic, 1)
    try:
        stage(pool, topic, [invoice(i) for i in range(6)] + [({"ID": 3}, None)])
        status, _ = deliver(lake, topic, kafka, format="json")
        assert status.records_delivered == 7
        collector.wait_for(7)
        # the cleaner marks the tombstone once, and removes it at a later cleaning
        # (its delete horizon past): transactions cut short after it (as a killed
        # to-kafka leaves them) give it new segments to clean, and leave nothing a
        # read_committed consumer sees
        cut = producer(kafka, transactional_id=unique("cut-short"))
        cut.init_transactions(10)

        def tombstone_gone() -> bool:
            tail = read_positions(kafka, topic, [0]).positions[0]
            if tail is None or tail.offset < 6:
                return True
            cut.begin_transaction()
            cut.produce(topic, b"{}", b'{"ID":99}', partition=0)
            cut.flush(10)
            cut.abort_transaction(10)
            time.sleep(0.5)
            return False

        _wait(tombstone_gone, 60, "compaction to remove the tombstone at the end")
        stage(pool, topic, [invoice(i) for i in range(7, 10)])
        status, _ = deliver(lake, topic, kafka, format="json")
        assert status.records_delivered == 3
        got = collector.wait_for(10)
    finally:
        collector.close()
    assert _pool_offsets(got) == list(range(10))  # none twice, none skipped, in order
    assert got[6].value is None


def test_a_recreated_topic_stops_delivery_until_taken_over(lake, broker, monkeypatch) -> None:
    from confluent_kafka.admin import NewTopic
    from typer.testing import CliRunner

    from engine.deliver.ownership import RecreatedTopic
    from engine.kafka.clients import admin_client, ensure_topic, topic_partitions
    from zync_tui.commands.deliver import make_app

    kafka, _ = profiles(broker)
    topic = unique("Recreated")
    pool = staging_pool(lake)
    stage_many(pool, topic, 12, per_commit=6)
    options = {"format": "json", "partitions": 3}
    status, _ = deliver(lake, topic, kafka, **options)
    assert status.records_delivered == 12
    admin = admin_client(kafka)

    def delete() -> None:
        admin.delete_topics([topic])[topic].result(30)

        def gone() -> bool:
            try:
                topic_partitions(kafka, topic)
            except Exception:  # noqa: BLE001 - TopicNotFound
                return True
            return False

        _wait(gone, 30, "the topic to be deleted")

    delete()
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    ensure_topic(kafka, topic)  # known to the broker that answers metadata
    stage_many(pool, topic, 3, per_commit=3)
    with pytest.raises(RecreatedTopic) as raised:
        deliver(lake, topic, kafka, **options)
    text = str(raised.value)
    assert "\n" not in text
    assert f"topic {topic!r} was deleted and created again" in text
    assert "--take-over-topic" in text

    monkeypatch.setenv("ZYNC_KAFKA_BOOTSTRAP_SERVERS", broker.address)
    argv = ["to-kafka", "-t", topic, "-p", "Staging", "--lake", str(lake.root), "--format", "json"]
    refused = CliRunner().invoke(make_app(), argv)
    assert refused.exit_code == 1
    lines = [line for line in refused.output.splitlines() if topic in line]
    assert any("was deleted and created again" in line for line in lines), refused.output
    collector = Collector(kafka, topic, 3)
    try:
        taken = CliRunner().invoke(make_app(), [*argv, "--take-over-topic"])
        assert taken.exit_code == 0, taken.output
        assert "taking the topic over" in taken.output
        got = collector.wait_for(15)  # the pool's first output on
        assert sorted(_pool_offsets(got)) == list(range(15))
        # the take-over holds: the claim names this topic now
        stage_many(pool, topic, 2, per_commit=2)
        status, _ = deliver(lake, topic, kafka, **options)
        assert status.records_delivered == 2
        assert sorted(_pool_offsets(collector.wait_for(17))) == list(range(17))
    finally:
        collector.close()

    # deleted and not made again: to-kafka would make it, and stops instead
    delete()
    with pytest.raises(RecreatedTopic):
        deliver(lake, topic, kafka, **options)


def test_an_expired_committed_position_is_stood_in_for_by_the_tail_or_stops(lake, broker) -> None:
    from confluent_kafka import TopicPartition

    from engine.deliver.committed import group_id
    from engine.deliver.ownership import PositionLost
    from engine.kafka.clients import admin_client

    kafka, _ = profiles(broker)
    topic = unique("Expired")
    pool = staging_pool(lake)
    stage_many(pool, topic, 20, per_commit=10)
    options = {"format": "json", "partitions": 2}
    status, _ = deliver(lake, topic, kafka, **options)
    assert status.records_delivered == 20
    admin = admin_client(kafka)

    def expire() -> None:  # every offset gone, as after offsets.retention.minutes
        admin.delete_consumer_groups([group_id(topic)])[group_id(topic)].result(30)

    expire()
    stage_many(pool, topic, 4, per_commit=4)
    status, events = deliver(lake, topic, kafka, **options)
    assert status.records_delivered == 4  # the tail stood in: nothing twice
    assert any("committed delivery position expired" in e.message for e in events)

    # records removed from a partition too: nothing can say where delivery stood
    expire()
    ends = _marks(kafka, topic, 2)
    admin.delete_records([TopicPartition(topic, 0, ends[0][1])])[
        TopicPartition(topic, 0, ends[0][1])
    ].result(30)
    stage_many(pool, topic, 1, per_commit=1)
    with pytest.raises(PositionLost, match=r"partition\(s\) 0 no longer show") as raised:
        deliver(lake, topic, kafka, **options)
    assert "\n" not in str(raised.value)
    status, events = deliver(lake, topic, kafka, take_over=True, **options)
    assert status.records_delivered == 25  # from the first output again, as asked


def test_a_topic_delivered_before_committed_positions_goes_on(lake, broker) -> None:
    """A topic a zync from before committed positions and claims delivered to (its
    position in the tail only) goes on where it stopped, and gets both at once."""
    from engine.deliver.claims import read_claim
    from engine.deliver.committed import CommittedPositions
    from engine.deliver.positions import PoolIdentity, anchor_headers
    from engine.kafka.clients import ensure_topic, producer

    kafka, _ = profiles(broker)
    topic = unique("Upgraded")
    pool = staging_pool(lake)
    stage_many(pool, topic, 8, per_commit=8, types=invoice_types())
    identity = PoolIdentity(str(pool.table.metadata().id), pool.name)
    ensure_topic(kafka, topic)
    before = producer(kafka, transactional_id=f"zync-to-kafka-{topic}")
    before.init_transactions(10)
    before.begin_transaction()
    for offset in range(5):
        headers = anchor_headers(offset, offset == 4, identity.headers())
        before.produce(topic, b'{"old":1}', b'{"ID":0}', partition=0, headers=headers)
    before.commit_transaction(10)

    status, events = deliver(lake, topic, kafka, format="json")
    assert status.records_delivered == 3  # pool offsets 5, 6, 7
    claim = read_claim(kafka, topic)
    assert claim is not None
    assert claim.pool_id == identity.id
    committed = CommittedPositions(kafka, topic)
    try:
        entry = committed.read([0], timeout=10)[0]
    finally:
        committed.close()
    assert entry is not None
    assert entry.position is not None
    assert (entry.position.offset, entry.pool_id) == (7, identity.id)
