"""Walk the invoice scenario batch by batch: write each batch's Debezium events into the
Raw pool (as from-kafka would: rows, positions and topic types in one pool), run one ETL
pass of etl.yaml, and show what it did and what waits.

    .venv/bin/python demo/invoices/walk.py [--lake DIR]

Without --lake a temporary lake is used (and removed). The Kafka path (produce the
batches, `zync from-kafka`, `zync etl`) runs the same configuration.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))


from engine.api import (  # noqa: E402 - after the sys.path line that runs it from a checkout
    EtlRunner,
    Lake,
    Pool,
    SparkSettings,
    TopicTypes,
    get_spark,
    json_value_to_spark,
    load_config,
    record_rows,
)


def ingest(pool: Pool, events: list[dict[str, Any]]) -> None:
    """Append events with contiguous offsets per topic, timestamps from ``ts_ms``."""
    pool.refresh()
    offsets: dict[str, int] = {}
    kafka, keys, values = [], [], []
    for event in events:
        topic = event["topic"]
        if topic not in offsets:
            last = pool.position(topic, 0)
            offsets[topic] = 0 if last is None else last + 1
        kafka.append(
            {
                "topic": topic,
                "partition": 0,
                "offset": offsets[topic],
                "timestamp": datetime.fromtimestamp(event["value"]["ts_ms"] / 1000, tz=UTC),
            }
        )
        offsets[topic] += 1
        keys.append(json.dumps(event["key"]))
        values.append(json.dumps(event["value"]))
    rows = record_rows(kafka, keys, values)
    types = {}
    for topic in offsets:
        of = [e for e in events if e["topic"] == topic]
        types[topic] = TopicTypes(  # as from-kafka records them
            key=json_value_to_spark((e["key"] for e in of), unknown="null").json(),
            value=json_value_to_spark((e["value"] for e in of), unknown="null").json(),
        )
    pool.record_types(types)
    pool.append_records(rows, {(t, 0): off - 1 for t, off in offsets.items()})


def walk(lake_root: Path) -> None:
    spark = get_spark(SparkSettings(master="local[2]"))
    lake = Lake(lake_root)
    raw = lake.create_pool("Raw", "raw", exist_ok=True)
    lake.create_pool("Staging", "staging", exist_ok=True)
    runner = EtlRunner(load_config(HERE / "etl.yaml"), lake, spark)
    for n in range(1, 5):
        events = [json.loads(line) for line in (HERE / f"batch{n}.jsonl").read_text().splitlines()]
        ingest(raw, events)
        print(f"\n── batch {n}: {len(events)} events")
        print(runner.run_pass().summary())
        for record in runner.pending():
            print(f"  pending {record.topic}/{record.partition}@{record.offset} key={record.key} rule={record.rule}")
    staging = lake.open_pool("Staging")
    print("\n── NewInvoices in Staging")
    rows = (
        staging.read(spark)
        .where("marker IS NULL")
        .orderBy("kafka.offset")
        .select("kafka.offset", "key", "value")
        .collect()
    )
    for row in rows:
        print(f"  {row.offset}: {row.key} → {row.value}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Walk the invoice scenario.")
    parser.add_argument("--lake", type=Path, help="lake directory (default: a temporary one)")
    args = parser.parse_args()
    if args.lake:
        walk(args.lake)
    else:
        with tempfile.TemporaryDirectory(prefix="zync-invoices-") as tmp:
            walk(Path(tmp))


if __name__ == "__main__":
    main()
