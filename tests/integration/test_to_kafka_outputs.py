"""to-kafka with many outputs from one staging pool (issue 41): the deliveries share one
staging feed (engine/deliver/feed.py) — each staging commit read once for all of them —
and every output is still delivered exactly once, across a restart.

Staging commits hold records of every output topic at once, the way one ETL pass
writes them.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pyarrow as pa
import pytest

from engine.lake.pool_record import record_rows
from tests.integration.test_to_kafka import invoice, profiles, staging_pool, unique

pytestmark = [pytest.mark.integration]

OUTPUTS = 50


def stage_all(pool: Any, counts: dict[str, int], per_topic: int) -> int:
    """One staging commit of ``per_topic`` more records of every topic of ``counts``
    (its next offset, advanced); returns the new version."""
    kafka, keys, values = [], [], []
    for topic in counts:
        for offset in range(counts[topic], counts[topic] + per_topic):
            key, value = invoice(offset)
            kafka.append({"topic": topic, "partition": 0, "offset": offset, "timestamp": None})
            keys.append(json.dumps(key, separators=(",", ":")))
            values.append(json.dumps(value, separators=(",", ":")))
        counts[topic] += per_topic
    rows = record_rows(kafka, keys, values)
    pool.refresh()
    return pool.commit_rows(rows, expect_version=pool.version)


def read_all(kafka: Any, topics: list[str], expect: int, timeout: float = 60.0) -> dict[str, list]:
    """Every record of ``topics`` (one partition each, read_committed) by topic: the pool
    offset each carries, in topic order; waits for ``expect`` records in all, then a
    moment for any more."""
    from confluent_kafka import TopicPartition

    from engine.kafka.clients import consumer

    reader = consumer(kafka)
    reader.assign([TopicPartition(t, 0, 0) for t in topics])
    got: dict[str, list[int]] = {t: [] for t in topics}
    seen = 0
    deadline = time.monotonic() + timeout
    settle: float | None = None
    try:
        while time.monotonic() < deadline and (settle is None or time.monotonic() < settle):
            for m in reader.consume(10_000, 0.2):
                if m.error() is None:
                    value = json.loads(m.value())
                    got[m.topic()].append(int(value["customer"].split()[-1]))
                    seen += 1
            if seen >= expect and settle is None:
                settle = time.monotonic() + 1.0  # and nothing more
    finally:
        reader.close()
    return got


def test_many_outputs_of_one_pool_read_each_commit_once_and_deliver_exactly_once(
    lake, broker, monkeypatch
) -> None:
    from engine.deliver import feed as feed_module
    from engine.deliver.deliveries import deliver_outputs, deliveries_of, run_deliveries
    from engine.deliver.delivery_options import DeliveryOptions
    from engine.deliver.loop import DeliveryOutput

    reads: list[tuple[int, int]] = []
    changes = feed_module.StagingFeed._changes

    def counted(self: Any, first: int, last: int, topics: list[str]) -> pa.Table:
        reads.append((first, last))
        return changes(self, first, last, topics)

    monkeypatch.setattr(feed_module.StagingFeed, "_changes", counted)

    from engine.kafka import clients

    looked: list[str] = []  # each delivery's own look for its topic (not prepared)
    ensure_topic = clients.ensure_topic

    def one_topic(profile: Any, topic: str, **kwargs: Any) -> Any:
        looked.append(topic)
        return ensure_topic(profile, topic, **kwargs)

    monkeypatch.setattr(clients, "ensure_topic", one_topic)

    kafka, _ = profiles(broker)
    prefix = unique("wide")
    topics = [f"{prefix}.t{i:02d}" for i in range(OUTPUTS)]
    pool = staging_pool(lake, unique("Staging"))
    outputs = [DeliveryOutput(pool.name, t) for t in topics]
    counts = dict.fromkeys(topics, 0)
    stage_all(pool, counts, 2)

    stop = threading.Event()
    deliveries = deliveries_of(lake, outputs, DeliveryOptions(kafka=kafka, format="json", poll_interval=0.1))
    assert len({id(d.feed) for d in deliveries}) == 1  # one feed for the pool
    errors: list[BaseException] = []

    def run() -> None:
        try:
            run_deliveries(deliveries, stop, continuous=True)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        _wait(lambda: all(d.status().state == "idle" for d in deliveries), 120, "every output idle")
        assert reads == []  # the first records came from the snapshot
        # the 50 topics and the claims topic were made ready in one request, not each
        assert looked == []
        assert all(d.prepared is None for d in deliveries)  # each took its own
        version = stage_all(pool, counts, 3)
        _wait(
            lambda: all(d.status().delivered_offset == 4 for d in deliveries),
            60,
            "every output's second commit",
        )
        assert reads == [(version, version)]  # one read of the commit for 50 outputs
    finally:
        _stop(deliveries, stop, thread)
    assert not errors, errors

    # a restart resumes each output from its committed position: nothing twice
    stage_all(pool, counts, 2)
    statuses = deliver_outputs(lake, outputs, DeliveryOptions(kafka=kafka, format="json"))
    assert {s.delivered_offset for s in statuses} == {6}
    got = read_all(kafka, topics, expect=7 * OUTPUTS)
    assert got == {t: list(range(7)) for t in topics}


def test_outputs_of_an_empty_pool_wait_for_its_first_commit_before_starting(lake, broker) -> None:
    """A pipeline's first start: the staging pool holds no output, so each delivery
    takes its topic's claim and waits, idle (ready), without its producer; the first
    commit starts them all, and they deliver it."""
    from engine.deliver.deliveries import deliveries_of, run_deliveries
    from engine.deliver.delivery_options import DeliveryOptions
    from engine.deliver.loop import DeliveryOutput

    kafka, _ = profiles(broker)
    prefix = unique("empty")
    topics = [f"{prefix}.t{i}" for i in range(5)]
    pool = staging_pool(lake, unique("Staging"))
    counts = dict.fromkeys(topics, 0)
    deliveries = deliveries_of(
        lake, [DeliveryOutput(pool.name, t) for t in topics], DeliveryOptions(kafka=kafka, format="json", poll_interval=0.1)
    )
    events: list[tuple[str, str]] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=run_deliveries,
        args=(deliveries, stop, lambda e: events.append((e.kind, e.message))),
        kwargs={"continuous": True},
        daemon=True,
    )
    thread.start()
    try:
        _wait(lambda: sum(kind == "waiting" for kind, _ in events) == len(topics), 60, "every output waiting")
        assert all(d.status().state == "idle" for d in deliveries)
        assert all(d.claimed.is_set() for d in deliveries)  # each holds its topic
        assert all(d._current is None for d in deliveries)  # no producer started yet
        assert not [m for kind, m in events if kind == "started"]
        stage_all(pool, counts, 2)
        _wait(lambda: all(d.status().delivered_offset == 1 for d in deliveries), 60, "the first commit")
    finally:
        _stop(deliveries, stop, thread)
    assert sum(kind == "started" for kind, _ in events) == len(topics)
    assert read_all(kafka, topics, expect=2 * len(topics)) == {t: [0, 1] for t in topics}


def _stop(deliveries: Any, stop: threading.Event, thread: threading.Thread) -> None:
    """Stop deliveries running continuously in ``thread``, and see them end."""
    stop.set()
    for d in deliveries:
        d.wake()
    thread.join(60)
    assert not thread.is_alive()


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_ensure_topics_creates_the_missing_ones_in_one_request(broker) -> None:
    from engine.kafka.clients import TopicSpec, ensure_topic, ensure_topics

    kafka, _ = profiles(broker)
    prefix = unique("ensure")
    ensure_topic(kafka, f"{prefix}.old", partitions=2)
    wanted = {
        f"{prefix}.old": TopicSpec(partitions=5),  # there already: left as it is
        f"{prefix}.one": TopicSpec(),
        f"{prefix}.three": TopicSpec(partitions=3, config={"cleanup.policy": "compact"}),
    }
    ready = ensure_topics(kafka, wanted)
    assert ready == {
        f"{prefix}.old": ([0, 1], False),
        f"{prefix}.one": ([0], True),
        f"{prefix}.three": ([0, 1, 2], True),
    }
    assert ensure_topics(kafka, wanted)[f"{prefix}.three"] == ([0, 1, 2], False)
