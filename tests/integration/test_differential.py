"""The differential envelope: a consumer summing diffs up to the latest closed time gets
staging's latest image per key, and no update of a time comes after its progress."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest

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


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    return value


def closed_time(messages: list[Received], partitions: int) -> int | None:
    """The latest time closed (a progress message) on every partition."""
    latest: dict[int, int] = {}
    for m in messages:
        if m.value["progress"] is not None:
            latest[m.partition] = max(latest.get(m.partition, -1), m.value["progress"]["time"])
    if len(latest) < partitions:
        return None
    return min(latest.values())


def rebuild(messages: list[Received], partitions: int) -> dict[str, Any]:
    """The table a differential consumer holds: diffs summed per record, for the times
    up to the latest one closed everywhere; key (JSON text) → value."""
    upto = closed_time(messages, partitions)
    assert upto is not None, "no time closed on every partition"
    sums: Counter[tuple[str, str]] = Counter()
    for m in messages:
        update = m.value["update"]
        if update is not None and update["time"] <= upto:
            record = update["record"]
            sums[(_text(record["key"]), _text(_plain(record["value"])))] += update["diff"]
    assert all(n in (0, 1) for n in sums.values()), sums
    table: dict[str, Any] = {}
    for (key, value), n in sums.items():
        if n == 1:
            assert key not in table, f"two live images for {key}"
            table[key] = json.loads(value)
    return table


def latest_images(pool: Any, topic: str) -> dict[str, Any]:
    """Staging's latest non-tombstone value per key (JSON text of the key → value)."""
    import pyarrow.dataset as ds

    pool.refresh()
    rows = (
        pool.table.to_pyarrow_dataset()
        .to_table(
            columns=["kafka", "key", "value"],
            filter=(ds.field("kafka", "topic") == topic) & ds.field("marker").is_null(),
        )
        .to_pylist()
    )
    images: dict[str, Any] = {}
    for row in sorted(rows, key=lambda r: r["kafka"]["offset"]):
        key = _text(json.loads(row["key"]))
        if row["value"] is None:
            images.pop(key, None)
        else:
            images[key] = _plain(json.loads(row["value"]))
    return images


def check_invariants(messages: list[Received]) -> None:
    """Per partition: positions only grow, no update after its time's progress, and each
    progress counts exactly the updates of its time there."""
    by_partition: dict[int, list[Received]] = {}
    for m in messages:
        by_partition.setdefault(m.partition, []).append(m)
    for partition, items in by_partition.items():
        positions = [(int(m.headers["zync.offset"]), int(m.headers["zync.step"])) for m in items]
        assert positions == sorted(positions), f"partition {partition}: positions go back"
        assert len(set(positions)) == len(positions), f"partition {partition}: a position twice"
        counts: Counter[int] = Counter()
        closed = -1
        for m in items:
            update, progress = m.value["update"], m.value["progress"]
            if update is not None:
                assert update["time"] > closed, (
                    f"an update of time {update['time']} after its progress"
                )
                counts[update["time"]] += 1
            else:
                assert progress["count"] == counts[progress["time"]]
                closed = progress["time"]


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_sum_of_diffs_is_the_latest_image_per_key(lake, broker, registry, fmt) -> None:
    kafka, reg = profiles(broker, registry)
    topic = unique("Diff")
    pool = staging_pool(lake)
    types = invoice_types()

    def value(i: int, n: int) -> dict[str, Any]:
        return {"ID": i, "customer": f"c{i}-{n}", "amount": float(n), "tags": [str(n)]}

    stage(pool, topic, [({"ID": i}, value(i, 0)) for i in range(10)], types=types)
    stage(
        pool,
        topic,
        [({"ID": i}, value(i, 1)) for i in range(5)]
        + [({"ID": 5}, None), ({"ID": 10}, value(10, 1))],
        types=types,
    )
    stage(
        pool,
        topic,
        [
            ({"ID": 5}, None),
            ({"ID": 5}, value(5, 2)),
            ({"ID": 0}, value(0, 2)),
            ({"ID": 0}, value(0, 3)),
            ({"ID": 7}, None),
        ],
        types=types,
    )
    options = {"format": fmt, "envelope": "differential", "partitions": 2}
    status, _ = deliver(lake, topic, kafka, reg, **options)
    assert status.delivered_offset == 21

    got = read_topic(kafka, topic, registry=reg, fmt=fmt)
    check_invariants(got)
    assert closed_time(got, 2) == pool.version
    assert rebuild(got, 2) == latest_images(pool, topic)

    # a restart resumes after the last time (images of earlier keys read from staging)
    stage(
        pool,
        topic,
        [({"ID": 3}, value(3, 4)), ({"ID": 8}, None), ({"ID": 11}, value(11, 4))],
        types=types,
    )
    status, _ = deliver(lake, topic, kafka, reg, **options)
    assert status.records_delivered == 2 + 1 + 1 + 2  # -1/+1, -1, +1, progress x2
    got = read_topic(kafka, topic, registry=reg, fmt=fmt)
    check_invariants(got)
    assert rebuild(got, 2) == latest_images(pool, topic)


@pytest.mark.spark
@pytest.mark.slow
def test_invoice_scenario_differential(tmp_path, lake, broker, registry, spark) -> None:
    from engine.services.pipeline import Pipeline
    from tests.integration.test_run import demo_driver, invoice_scenario, publish_in_file_order

    kafka, reg = profiles(broker, registry)
    scenario = invoice_scenario(tmp_path)
    demo = demo_driver(scenario, lake.root, kafka, reg)
    events: list[Any] = []
    pipeline = Pipeline(
        scenario.config,
        lake,
        kafka=kafka,
        registry=reg,
        spark=spark,
        etl_interval=0.2,
        envelope="differential",
        on_event=events.append,
    )
    pipeline.start()
    try:
        publish_in_file_order(demo, lake.root, batches=5)
        staging = lake.open_pool("Staging")

        def done() -> bool:
            statuses = pipeline.to_kafka.status().detail
            staging.refresh()
            return bool(statuses) and statuses[0].delivered_offset == 8 and statuses[0].lag == 0

        deadline = time.monotonic() + 240
        while not done():
            failed = pipeline.failed()
            assert not failed, failed
            assert time.monotonic() < deadline, [e.line() for e in events]
            time.sleep(0.2)
    finally:
        pipeline.stop()
    status = pipeline.status()
    assert {name: s.state for name, s in status.items()} == dict.fromkeys(status, "stopped")
    assert status["to-kafka"].records > 0
    assert status["etl"].last_commit is not None

    got = read_topic(kafka, scenario.output, registry=reg)
    check_invariants(got)
    table = rebuild(got, 1)
    assert table == latest_images(staging, scenario.output)
    assert set(table) == {'{"ID":100}', '{"ID":101}', '{"ID":103}'}  # 102 was deleted
    assert table['{"ID":101}'] == {"ID": 101, "invoice_status": "paid"}
