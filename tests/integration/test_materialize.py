"""The materialize envelope (Materialize's CDCv2 Avro format, ENVELOPE MATERIALIZE): a
reader that sums diffs per record up to the last time closed holds staging's table; the
registered schema is the documented one, field by field; progress statements tile the
times and count each time's distinct updates."""

from __future__ import annotations

import json
from collections import Counter
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

#: Materialize's documentation of the format ("Materialize CDC", the example schema),
#: with its placeholder for the record's columns.
DOCUMENTED: list[Any] = [
    {
        "type": "array",
        "items": {
            "type": "record",
            "name": "update",
            "namespace": "com.materialize.cdc",
            "fields": [
                {"name": "data", "type": {"type": "record", "name": "data", "fields": "COLUMNS"}},
                {"name": "time", "type": "long"},
                {"name": "diff", "type": "long"},
            ],
        },
    },
    {
        "type": "record",
        "name": "progress",
        "namespace": "com.materialize.cdc",
        "fields": [
            {"name": "lower", "type": {"type": "array", "items": "long"}},
            {"name": "upper", "type": {"type": "array", "items": "long"}},
            {
                "name": "counts",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "counts",
                        "fields": [
                            {"name": "time", "type": "long"},
                            {"name": "count", "type": "long"},
                        ],
                    },
                },
            },
        ],
    },
]


def updates_and_progress(messages: list[Received]) -> tuple[list[Any], list[Any]]:
    """(data, time, diff) of every update, and every progress statement, in topic order
    per partition."""
    updates, progress = [], []
    for m in messages:
        if isinstance(m.value, list):
            updates.extend((u["data"], u["time"], u["diff"]) for u in m.value)
        else:
            progress.append((m.partition, m.value))
    return updates, progress


def closed_time(messages: list[Received], partitions: int) -> int | None:
    """The last time closed: the least upper bound reached on every partition, minus 1."""
    upper: dict[int, int] = {}
    for m in messages:
        if isinstance(m.value, dict):
            upper[m.partition] = max(upper.get(m.partition, 0), m.value["upper"][0])
    return min(upper.values()) - 1 if len(upper) == partitions else None


def rebuild(messages: list[Received], partitions: int) -> Counter[str]:
    """What a CDCv2 reader holds: diffs summed per record up to the last closed time (a
    multiset of records, as JSON text)."""
    upto = closed_time(messages, partitions)
    assert upto is not None, "no time closed on every partition"
    updates, _ = updates_and_progress(messages)
    table: Counter[str] = Counter()
    for data, time, diff in {(_text(_plain(d)), t, n) for d, t, n in updates}:  # duplicates: once
        if time <= upto:
            table[data] += diff
    assert all(n >= 0 for n in table.values()), table
    return +table


def check_protocol(messages: list[Received]) -> None:
    """At most one diff per (data, time); per partition: positions grow, no update after
    its time's progress, statements tile the times from 0 and count each time's distinct
    updates (in the whole topic)."""
    updates, _ = updates_and_progress(messages)
    diffs: dict[tuple[str, int], set[int]] = {}
    for data, time, diff in updates:
        diffs.setdefault((_text(data), time), set()).add(diff)
        assert diff != 0
    assert all(len(d) == 1 for d in diffs.values()), "two diffs for one (data, time)"
    per_time = Counter(time for _, time in diffs)
    by_partition: dict[int, list[Received]] = {}
    for m in messages:
        by_partition.setdefault(m.partition, []).append(m)
    for partition, items in by_partition.items():
        positions = [(int(m.headers["zync.offset"]), int(m.headers["zync.step"])) for m in items]
        assert positions == sorted(positions), f"partition {partition}: positions go back"
        assert len(set(positions)) == len(positions), f"partition {partition}: a position twice"
        frontier = 0
        for m in items:
            if isinstance(m.value, list):
                assert m.value[0]["time"] >= frontier, "an update at a closed time"
                continue
            assert m.value["lower"] == [frontier], f"partition {partition}: statements leave a gap"
            (upper,) = m.value["upper"]
            counts = {c["time"]: c["count"] for c in m.value["counts"]}
            assert all(frontier <= t < upper for t in counts)
            for time in range(frontier, upper):
                assert counts.get(time, 0) == per_time.get(time, 0), f"time {time}: wrong count"
            frontier = upper


def staged_table(pool: Any, topic: str) -> Counter[str]:
    return Counter(_text(v) for v in latest_images(pool, topic).values())


def _value(i: int, n: int) -> dict[str, Any]:
    return {"ID": i, "customer": f"c{i}-{n}", "amount": float(n), "tags": [str(n)]}


def test_rebuilt_table_is_staging_and_the_schema_is_the_documented_one(
    lake, broker, registry
) -> None:
    kafka, reg = profiles(broker, registry)
    topic = unique("Mz")
    pool = staging_pool(lake)
    types = invoice_types()
    stage(pool, topic, [({"ID": i}, _value(i, 0)) for i in range(10)], types=types)
    stage(
        pool,
        topic,
        [({"ID": i}, _value(i, 1)) for i in range(5)]
        + [({"ID": 5}, None), ({"ID": 10}, _value(10, 1))],
        types=types,
    )
    stage(
        pool,
        topic,
        [
            ({"ID": 5}, None),
            ({"ID": 5}, _value(5, 2)),
            ({"ID": 0}, _value(0, 2)),
            ({"ID": 0}, _value(0, 1)),  # back to where it was at the last time: consolidated
            ({"ID": 1}, _value(1, 3)),
            ({"ID": 1}, _value(1, 1)),
            ({"ID": 7}, None),
        ],
        types=types,
    )
    options = {"envelope": "materialize", "partitions": 2}
    status, _ = deliver(lake, topic, kafka, reg, **options)
    assert status.delivered_offset == 23

    got = read_topic(kafka, topic, registry=reg)
    check_protocol(got)
    assert closed_time(got, 2) == pool.version
    assert rebuild(got, 2) == staged_table(pool, topic)
    updates, _ = updates_and_progress(got)
    last = [(d["ID"], n) for d, t, n in updates if t == pool.version]
    assert sorted(last) == [(5, 1), (7, -1)]  # keys 0 and 1 came back to their images

    # a restart resumes after the last time (images of earlier keys read from staging)
    stage(
        pool,
        topic,
        [({"ID": 3}, _value(3, 4)), ({"ID": 8}, None), ({"ID": 11}, _value(11, 4))],
        types=types,
    )
    status, _ = deliver(lake, topic, kafka, reg, **options)
    assert status.records_delivered == 4 + 2  # -3, +3, -8, +11; a statement per partition
    got = read_topic(kafka, topic, registry=reg)
    check_protocol(got)
    assert rebuild(got, 2) == staged_table(pool, topic)

    # the registered value schema, field by field, against Materialize's documentation
    from engine.kafka.registry_client import RegistrySchemas

    registered = json.loads(RegistrySchemas(reg).latest(f"{topic}-value").schema.schema_str)
    data = registered[0]["items"]["fields"][0]["type"]
    assert [f["name"] for f in data["fields"]] == ["ID", "customer", "amount", "tags"]
    assert data.get("namespace") in (None, "com.materialize.cdc")
    documented = json.loads(json.dumps(DOCUMENTED).replace('"COLUMNS"', json.dumps(data["fields"])))
    assert registered == documented


def test_materialize_needs_avro(lake, broker) -> None:
    from engine.deliver.delivery_options import DeliveryOptions
    from engine.deliver.errors import DeliveryError
    from engine.deliver.loop import Delivery

    kafka, _ = profiles(broker)
    with pytest.raises(DeliveryError, match="materialize envelope is written in avro only"):
        Delivery(lake, "Staging", unique("MzJson"), DeliveryOptions(kafka=kafka, format="json"), envelope="materialize")


def test_null_and_absent_fields_are_one_record(lake, broker, registry) -> None:
    """Null fields and absent fields are the same record to Materialize (one Avro
    encoding): a value restaged with a field spelt out as null changes nothing."""
    kafka, reg = profiles(broker, registry)
    topic = unique("MzNulls")
    pool = staging_pool(lake)
    types = invoice_types()
    stage(pool, topic, [({"ID": 1}, {"ID": 1, "customer": "a"})], types=types)
    stage(
        pool,
        topic,
        [({"ID": 1}, {"ID": 1, "customer": "a", "amount": None}), ({"ID": 2}, {"ID": 2})],
        types=types,
    )
    deliver(lake, topic, kafka, reg, envelope="materialize")
    got = read_topic(kafka, topic, registry=reg)
    check_protocol(got)
    updates, _ = updates_and_progress(got)
    assert [(_plain(d), n) for d, t, n in updates if t == pool.version] == [({"ID": 2}, 1)]
