"""The debezium envelope: applied in order as a JDBC sink with ExtractNewRecordState
would (upsert ``after`` by key, delete on ``d`` and on tombstones), the events give
staging's latest image per key; a deleted then re-created key replays as c, u, d,
tombstone, c."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.test_differential import _plain, _text, latest_images
from tests.integration.test_to_kafka import (
    Received,
    deliver,
    invoice_types,
    profiles,
    read_topic,
    stage,
    staging_pool,
    unique,
)

pytestmark = [pytest.mark.integration]


def payload(m: Received) -> Any:
    """The event (Connect JSON: its payload), None for a tombstone."""
    if isinstance(m.value, dict) and "payload" in m.value and "schema" in m.value:
        return m.value["payload"]
    return m.value


def sink(messages: list[Received]) -> dict[str, Any]:
    """A JDBC sink behind ExtractNewRecordState: ``after`` upserted by key, the row
    deleted on ``op: d`` (rewritten to a delete) and on a tombstone."""
    table: dict[str, Any] = {}
    for m in messages:
        key = _text(m.key)
        event = payload(m)
        if event is None or event["op"] == "d":
            table.pop(key, None)
        else:
            table[key] = _plain(event["after"])
    return table


def _value(i: int, n: int) -> dict[str, Any]:
    return {"ID": i, "customer": f"c{i}-{n}", "amount": float(n), "tags": [str(n)]}


@pytest.mark.parametrize(("fmt", "partitions"), [("avro", 2), ("connect-json", 1), ("json", 1)])
def test_applied_in_order_the_events_give_the_latest_image_per_key(
    lake, broker, registry, fmt, partitions
) -> None:
    kafka, reg = profiles(broker, registry)
    topic = unique("Dbz")
    pool = staging_pool(lake)
    types = invoice_types()
    stage(pool, topic, [({"ID": i}, _value(i, 0)) for i in range(8)], types=types)
    stage(
        pool,
        topic,
        [({"ID": i}, _value(i, 1)) for i in range(4)] + [({"ID": 5}, None), ({"ID": 9}, None)],
        types=types,
    )
    options = {"format": fmt, "envelope": "debezium", "partitions": partitions}
    status, _ = deliver(lake, topic, kafka, reg, **options)
    assert status.delivered_offset == 13
    got = read_topic(kafka, topic, registry=reg, fmt=fmt, expect=14 + 2)
    assert sink(got) == latest_images(pool, topic)
    ops = [payload(m)["op"] if payload(m) else None for m in got if m.partition == got[0].partition]
    assert set(ops) <= {"c", "u", "d", None}

    # a restart: only what is new, with `before` from staging's images
    stage(pool, topic, [({"ID": 2}, _value(2, 2)), ({"ID": 6}, None)], types=types)
    status, _ = deliver(lake, topic, kafka, reg, **options)
    assert status.records_delivered == 1 + 2
    got = read_topic(kafka, topic, registry=reg, fmt=fmt, expect=16 + 3)
    assert len(got) == 16 + 3
    assert sink(got) == latest_images(pool, topic)
    update = next(payload(m) for m in got if payload(m) and payload(m)["source"]["offset"] == 14)
    assert (update["op"], _plain(update["before"]), _plain(update["after"])) == (
        "u",
        _value(2, 1),
        _value(2, 2),
    )
    offsets = [payload(m)["source"]["offset"] for m in got if payload(m)]
    assert sorted(offsets) == list(range(16))  # one event per output, none twice
    source = payload(got[0])["source"]
    assert (source["connector"], source["name"]) == ("zync", "Staging")
    assert source["pool_version"] >= 1


def test_a_deleted_then_recreated_key_replays(lake, broker, registry) -> None:
    kafka, reg = profiles(broker, registry)
    topic = unique("DbzAgain")
    pool = staging_pool(lake)
    types = invoice_types()
    key = {"ID": 42}
    stage(pool, topic, [(key, _value(42, 0)), (key, _value(42, 1))], types=types)
    stage(pool, topic, [(key, None)], types=types)
    stage(pool, topic, [(key, _value(42, 2))], types=types)
    deliver(lake, topic, kafka, reg, envelope="debezium")
    got = read_topic(kafka, topic, registry=reg, expect=5)
    events = [payload(m) for m in got]
    assert [e["op"] if e else None for e in events] == ["c", "u", "d", None, "c"]
    assert all(m.key == key for m in got)
    assert _plain(events[2]["before"]) == _value(42, 1)
    assert events[2]["after"] is None
    assert events[4]["before"] is None
    assert sink(got) == {_text(key): _value(42, 2)}
    assert [m.headers["zync.step"] for m in got] == ["0", "0", "0", "1", "0"]

    # the registered value schema mirrors Debezium's Envelope
    from engine.kafka.registry_client import RegistrySchemas

    schema = json.loads(RegistrySchemas(reg).latest(f"{topic}-value").schema.schema_str)
    assert (schema["name"], schema["namespace"]) == ("Envelope", topic.replace("-", "_"))
    fields = {f["name"]: f["type"] for f in schema["fields"]}
    assert list(fields) == ["before", "after", "source", "op", "ts_ms"]
    assert fields["before"][0] == "null"
    assert fields["before"][1]["name"] == "Value"
    assert fields["after"] == ["null", f"{schema['namespace']}.Value"]
    assert fields["source"]["name"] == "Source"
    assert fields["op"] == "string"
