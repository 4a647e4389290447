"""Helpers the ETL tests share (no tests here): write events into a raw pool the way
from-kafka does — rows, positions and topic types in the pool — and read staging back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.lake.appends import AppendResult
from engine.lake.pool_record import record_rows
from engine.lake.pools import Lake, Pool
from engine.lake.topic_types import TopicTypes

DEMO = Path(__file__).resolve().parents[2] / "demo" / "invoices"
BASE_MS = 1_714_557_600_000  # 2024-05-01T10:00:00Z


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def demo_batch(n: int) -> list[dict[str, Any]]:
    return load_jsonl(DEMO / f"batch{n}.jsonl")


def _timestamp_ms(event: dict[str, Any]) -> int:
    if "timestamp" in event:
        return int(event["timestamp"])
    value = event.get("value")
    if isinstance(value, dict) and isinstance(value.get("ts_ms"), int):
        return value["ts_ms"]
    return BASE_MS


def append_events(pool: Pool, events: Iterable[dict[str, Any]]) -> AppendResult:
    """Append ``{"topic", "key", "value"[, "partition", "timestamp" (ms)]}`` events in
    order, with contiguous offsets per (topic, partition) after the pool's position,
    and record each topic's key/value types inferred from this batch."""
    from engine.kafka.typemap.to_spark import json_value_to_spark

    events = list(events)
    pool.refresh()
    next_offset: dict[tuple[str, int], int] = {}
    kafka, keys, values = [], [], []
    for event in events:
        tp = (event["topic"], int(event.get("partition", 0)))
        if tp not in next_offset:
            last = pool.position(*tp)
            next_offset[tp] = 0 if last is None else last + 1
        offset = next_offset[tp]
        next_offset[tp] = offset + 1
        kafka.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "offset": offset,
                "timestamp": datetime.fromtimestamp(_timestamp_ms(event) / 1000, tz=UTC),
            }
        )
        keys.append(None if event.get("key") is None else json.dumps(event["key"]))
        values.append(None if event.get("value") is None else json.dumps(event["value"]))
    rows = record_rows(kafka, keys, values)
    types: dict[str, TopicTypes] = {}
    for topic in sorted({e["topic"] for e in events}):
        of = [e for e in events if e["topic"] == topic]
        key_values = [e.get("key") for e in of if e.get("key") is not None]
        value_values = [e.get("value") for e in of if e.get("value") is not None]
        # as from-kafka records them: a path null in every value stays NullType
        types[topic] = TopicTypes(
            key=json_value_to_spark(key_values, unknown="null").json() if key_values else None,
            value=json_value_to_spark(value_values, unknown="null").json() if value_values else None,
        )
    pool.record_types(types)
    positions = {tp: off - 1 for tp, off in next_offset.items()}
    return pool.append_records(rows, positions)


def make_pools(lake: Lake, raw: str = "Raw", staging: str = "Staging") -> tuple[Pool, Pool]:
    return lake.create_pool(raw, "raw"), lake.create_pool(staging, "staging")


def outputs(spark: Any, lake: Lake, pool: str = "Staging") -> list[tuple[str, int, Any, Any]]:
    """Output records of a staging pool: (topic, offset, key, value) decoded, by seqno."""
    staged = lake.open_pool(pool)
    rows = (
        staged.read(spark)
        .where("marker IS NULL AND deadletter IS NULL")
        .orderBy("seqno")
        .select("kafka.topic", "kafka.offset", "key", "value")
        .collect()
    )
    return [
        (
            r.topic,
            r.offset,
            None if r.key is None else json.loads(r.key),
            None if r.value is None else json.loads(r.value),
        )
        for r in rows
    ]


def markers(spark: Any, lake: Lake, pool: str = "Staging") -> list[tuple[str, int, int, str, str]]:
    """Marker rows: (topic, partition, offset, rule, status), sorted."""
    staged = lake.open_pool(pool)
    rows = staged.read(spark).where("marker IS NOT NULL").select("marker.*").collect()
    return sorted((r.topic, r.partition, r.offset, r.rule, r.status) for r in rows)
