"""A guarded position: messages name their staging pool, so a topic last written by
another pool (a recreated lake, another ETL) stops to-kafka with one line naming both,
until it is taken over (--take-over-topic); positions written before pools were named
are taken as the pool's own unless they name offsets it never staged."""

from __future__ import annotations

import pytest

from engine.lake.pools import Lake
from tests.integration.test_to_kafka import (
    deliver,
    invoice,
    profiles,
    read_topic,
    stage,
    stage_many,
    staging_pool,
    unique,
)

pytestmark = [pytest.mark.integration]


def test_another_pools_topic_is_refused_until_taken_over(lake, broker, monkeypatch, tmp_path) -> None:
    from typer.testing import CliRunner

    from engine.deliver.ownership import ForeignTopic
    from zync_tui.commands.deliver import make_app

    kafka, _ = profiles(broker)
    topic = unique("Owned")
    first = staging_pool(lake)
    stage_many(first, topic, 12, per_commit=12)
    options = {"format": "json", "partitions": 3}
    status, _ = deliver(lake, topic, kafka, **options)
    assert status.records_delivered == 12

    # the lake is recreated: a pool of the same name, another Delta table
    other = Lake(tmp_path / "recreated")
    second = staging_pool(other)
    stage(second, topic, [({"ID": 1}, {"ID": 1, "customer": "again 0"})] * 3)
    with pytest.raises(ForeignTopic) as raised:
        deliver(other, topic, kafka, **options)
    text = str(raised.value)
    assert "\n" not in text
    assert first.table.metadata().id in text
    assert second.table.metadata().id in text
    assert "--take-over-topic" in text

    monkeypatch.setenv("ZYNC_KAFKA_BOOTSTRAP_SERVERS", broker.address)
    argv = ["to-kafka", "-t", topic, "-p", "Staging", "--lake", str(other.root), "--format", "json"]
    refused = CliRunner().invoke(make_app(), argv)
    assert refused.exit_code == 1
    assert "was last written by staging pool 'Staging'" in refused.output
    taken = CliRunner().invoke(make_app(), [*argv, "--take-over-topic"])
    assert taken.exit_code == 0, taken.output
    assert "taking the topic over from staging pool 'Staging'" in taken.output
    got = read_topic(kafka, topic, fmt="json", expect=15)
    assert len(got) == 15
    again = [r for r in got if "again" in r.value["customer"]]
    assert [r.anchor for r in again] == [0, 1, 2]  # the new pool from its first output

    # the take-over holds: partitions the new pool never wrote keep the old tail, older
    # than the new pool's messages
    stage(second, topic, [({"ID": 1}, {"ID": 1, "customer": "again 3"})])
    status, events = deliver(other, topic, kafka, **options)
    assert status.records_delivered == 1
    assert status.delivered_offset == 3
    # and the first pool is now the stranger
    stage_many(first, topic, 1, per_commit=1)
    with pytest.raises(ForeignTopic, match="table id " + second.table.metadata().id):
        deliver(lake, topic, kafka, **options)


def test_positions_of_an_older_zync_are_taken_as_the_pools_own(lake, broker) -> None:
    from engine.deliver.ownership import ForeignTopic
    from engine.kafka.clients import ensure_topic, producer

    kafka, _ = profiles(broker)
    pool = staging_pool(lake)
    topic, beyond = unique("Legacy"), unique("LegacyBeyond")
    stage_many(pool, topic, 8, per_commit=8)
    stage_many(pool, beyond, 8, per_commit=8)
    older = producer(kafka)
    for name, offsets in ((topic, range(5)), (beyond, [50])):
        ensure_topic(kafka, name)
        for offset in offsets:
            older.produce(name, b"{}", headers=[("zync.offset", b"%d" % offset)])
    older.flush(10)

    status, events = deliver(lake, topic, kafka, format="json")
    assert status.records_delivered == 3  # pool offsets 5, 6, 7
    assert any("names no staging pool" in e.message for e in events)
    got = read_topic(kafka, topic, fmt="json", expect=8)
    assert [r.value for r in got[5:]] == [invoice(i)[1] for i in range(5, 8)]
    assert got[-1].headers["zync.pool.id"] == pool.table.metadata().id
    assert got[-1].headers["zync.pool"] == "Staging"

    with pytest.raises(ForeignTopic, match="a zync that did not name its pool"):
        deliver(lake, beyond, kafka, format="json")
