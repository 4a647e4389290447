"""ETL scaling: the cost of a pass follows new work, not history.

For each history size H (default 10,000 and 1,000,000 input records), a first process
builds a lake whose Raw pool holds H Debezium-shaped records (Invoices and InvoiceStatus
creates, half each, pairing up) and processes them with a real ETL pass of the demo
configuration (demo/invoices/etl.yaml: denorm + stateless rules), so Staging holds their
outputs and completion markers. A fresh process then times the first pass over 1,000 new
records (500 pairs) with a cold JVM. Finally one process keeps a warm runner per lake and
alternates passes over 1,000 new records between the lakes (so load from elsewhere on the
machine hits every size alike): a few warm-up passes, then the measured ones (median).
The figure to reach: the warm median at 1M history over the one at 10k ≤ 1.5. Separate
processes keep the JVM heap of the big history pass out of the measurement.

    .venv/bin/python bench/etl_scaling.py [--sizes 10000,1000000] [--new 1000]
                                          [--warmup 2] [--repeats 5] [--json]

Spark runs local[2] (ZYNC_SPARK_MASTER overrides). Raw commits hold up to 100,000 records,
as from-kafka commits them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402 - after the sys.path line that runs it from a checkout

from engine.lake.pool_record import ROW_SCHEMA  # noqa: E402 - after the sys.path line
from engine.lake.pools import Lake, Pool  # noqa: E402 - after the sys.path line
from engine.lake.topic_types import TopicTypes  # noqa: E402 - after the sys.path line

CONFIG = ROOT / "demo" / "invoices" / "etl.yaml"
CHUNK = 100_000
T0 = datetime(2024, 5, 1, tzinfo=UTC)


def _types() -> dict[str, TopicTypes]:
    from pyspark.sql import types as T

    key = T.StructType([T.StructField("ID", T.LongType())])
    source = T.StructType([T.StructField("table", T.StringType()), T.StructField("lsn", T.LongType())])

    def envelope(row: T.StructType) -> T.StructType:
        return T.StructType(
            [
                T.StructField("before", row),
                T.StructField("after", row),
                T.StructField("source", source),
                T.StructField("op", T.StringType()),
                T.StructField("ts_ms", T.LongType()),
            ]
        )

    invoice = T.StructType(
        [T.StructField("ID", T.LongType()), T.StructField("customer", T.StringType()), T.StructField("item", T.StringType())]
    )
    status = T.StructType(
        [T.StructField("ID", T.LongType()), T.StructField("InvoiceID", T.LongType()), T.StructField("status", T.StringType())]
    )
    return {
        "Invoices": TopicTypes(key=key.json(), value=envelope(invoice).json()),
        "InvoiceStatus": TopicTypes(key=key.json(), value=envelope(status).json()),
    }


def _rows(first_id: int, pairs: int, offsets: dict[str, int]) -> tuple[pa.Table, dict[tuple[str, int], int]]:
    """``pairs`` invoices and their status rows (each invoice followed by its status)."""
    topics, offs, stamps, keys, values = [], [], [], [], []
    for i in range(first_id, first_id + pairs):
        ts = T0 + timedelta(milliseconds=i)
        ms = int(ts.timestamp() * 1000)
        for topic, value in (
            ("Invoices", f'{{"before":null,"after":{{"ID":{i},"customer":"c{i}","item":"taco"}},'
                         f'"source":{{"table":"Invoices","lsn":{i}}},"op":"c","ts_ms":{ms}}}'),
            ("InvoiceStatus", f'{{"before":null,"after":{{"ID":{i},"InvoiceID":{i},"status":"pending"}},'
                              f'"source":{{"table":"InvoiceStatus","lsn":{i}}},"op":"c","ts_ms":{ms}}}'),
        ):
            topics.append(topic)
            offs.append(offsets[topic])
            offsets[topic] += 1
            stamps.append(ts)
            keys.append(f'{{"ID":{i}}}')
            values.append(value)
    n = len(topics)
    kafka = pa.StructArray.from_arrays(
        [
            pa.array(topics, pa.string()),
            pa.array([0] * n, pa.int32()),
            pa.array(offs, pa.int64()),
            pa.array(stamps, pa.timestamp("us", tz="UTC")),
        ],
        fields=list(ROW_SCHEMA.field("kafka").type),
    )
    table = pa.Table.from_arrays(
        [
            kafka,
            pa.array(keys, pa.string()),
            pa.array(values, pa.string()),
            pa.nulls(n, ROW_SCHEMA.field("deadletter").type),
            pa.nulls(n, ROW_SCHEMA.field("marker").type),
        ],
        schema=ROW_SCHEMA,
    )
    positions = {(t, 0): offsets[t] - 1 for t in ("Invoices", "InvoiceStatus")}
    return table, positions


class Feed:
    """Appends invoice pairs to a raw pool, chunked like from-kafka commits."""

    def __init__(self, raw: Pool) -> None:
        self.raw = raw
        self.next_id = 0
        self.offsets = {"Invoices": 0, "InvoiceStatus": 0}

    def add(self, records: int) -> None:
        pairs = records // 2
        while pairs > 0:
            step = min(pairs, CHUNK // 2)
            table, positions = _rows(self.next_id, step, self.offsets)
            self.raw.append_records(table, positions)
            self.next_id += step
            pairs -= step


def _spark() -> Any:
    from engine.settings.spark import SparkSettings
    from engine.spark import get_spark

    master = os.environ.get("ZYNC_SPARK_MASTER") or "local[2]"
    return get_spark(SparkSettings(master=master))


def _state(lake_root: Path) -> Path:
    return lake_root / "bench-feed.json"


def _feed(lake: Lake) -> Feed:
    feed = Feed(lake.open_pool("Raw"))
    state = json.loads(_state(lake.root).read_text())
    feed.next_id, feed.offsets = state["next_id"], state["offsets"]
    return feed


def _save(lake: Lake, feed: Feed) -> None:
    _state(lake.root).write_text(json.dumps({"next_id": feed.next_id, "offsets": feed.offsets}))


def build(size: int, lake_root: Path) -> dict[str, Any]:
    """A lake whose Raw pool holds ``size`` records, all processed by real passes."""
    from engine.etl import EtlRunner, load_config

    spark = _spark()
    lake = Lake(lake_root)
    raw = lake.create_pool("Raw", "raw")
    lake.create_pool("Staging", "staging")
    raw.record_types(_types())
    feed = Feed(raw)
    started = time.perf_counter()
    feed.add(size)
    ingest_s = time.perf_counter() - started
    started = time.perf_counter()
    history = EtlRunner(load_config(CONFIG), lake, spark).run_pass()
    history_s = time.perf_counter() - started
    assert history.outputs.get("NewInvoices") == size // 2, history.summary()
    _save(lake, feed)
    return {"ingest_s": round(ingest_s, 2), "history_pass_s": round(history_s, 2)}


def cold(lake_root: Path, new: int) -> dict[str, Any]:
    """A fresh process: Spark start and the first pass over ``new`` records (cold JVM)."""
    from engine.etl import EtlRunner, load_config

    started = time.perf_counter()
    spark = _spark()
    spark_start_s = time.perf_counter() - started
    lake = Lake(lake_root)
    feed = _feed(lake)
    feed.add(new)
    _save(lake, feed)
    started = time.perf_counter()
    result = EtlRunner(load_config(CONFIG), lake, spark).run_pass()
    first_s = time.perf_counter() - started
    assert result.outputs.get("NewInvoices") == new // 2, result.summary()
    return {"spark_start_s": round(spark_start_s, 2), "first_pass_s": round(first_s, 3)}


def measure(lake_roots: list[Path], new: int, warmup: int, repeats: int) -> list[dict[str, Any]]:
    """One fresh process, one warm runner per lake, passes alternating between the
    lakes (so load from elsewhere hits every size alike): ``warmup`` passes each, then
    ``repeats`` measured ones, each over ``new`` new records."""
    from engine.etl import EtlRunner, load_config

    spark = _spark()
    lakes = [Lake(root) for root in lake_roots]
    feeds = [_feed(lake) for lake in lakes]
    runners = [EtlRunner(load_config(CONFIG), lake, spark) for lake in lakes]
    times: list[list[float]] = [[] for _ in lakes]
    for _ in range(warmup + repeats):
        for i, (feed, runner) in enumerate(zip(feeds, runners, strict=True)):
            feed.add(new)
            started = time.perf_counter()
            result = runner.run_pass()
            times[i].append(time.perf_counter() - started)
            assert result.outputs.get("NewInvoices") == new // 2, result.summary()
    reports = []
    for lake, feed, runner, took in zip(lakes, feeds, runners, times, strict=True):
        # what the next pass reads: everything is processed, the floors sit at the end
        positions = runner.positions()
        feed.add(new)
        _save(lake, feed)
        raw = lake.open_pool("Raw")
        staging = lake.open_pool("Staging")
        floor = positions.floor("Raw")
        markers = positions.marker_floor
        warm = took[warmup:]
        reports.append(
            {
                "warm_pass_s": [round(t, 3) for t in warm],
                "warm_pass_median_s": round(statistics.median(warm), 3),
                "raw_files_total": len(raw.files()),
                "raw_files_read": len(raw.files(f"seqno >= {floor}")),
                "raw_rows_total": raw.last_seqno() + 1,
                "staging_files_total": len(staging.files()),
                "staging_marker_files_read": (
                    len(staging.files(f"seqno >= {markers}")) if staging.last_seqno() >= markers else 0
                ),
            }
        )
    return reports


def _child(args: list[str]) -> Any:
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"bench child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--new", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cold", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--measure", type=Path, nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        print(json.dumps(build(args.size, args.build)))
        return
    if args.cold:
        print(json.dumps(cold(args.cold, args.new)))
        return
    if args.measure:
        print(json.dumps(measure(args.measure, args.new, args.warmup, args.repeats)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="zync-etl-bench-") as tmp:
        roots = [Path(tmp) / f"lake-{size}" for size in sizes]
        for size, root in zip(sizes, roots, strict=True):
            built = _child(["--build", str(root), "--size", str(size)])
            first = _child(["--cold", str(root), "--new", str(args.new)])
            results.append({"history": size, "new": args.new, **built, **first})
        measured = _child(
            ["--measure", *[str(r) for r in roots], "--new", str(args.new),
             "--warmup", str(args.warmup), "--repeats", str(args.repeats)]
        )
        for result, found in zip(results, measured, strict=True):
            result.update(found)
    by_size = {r["history"]: r for r in results}
    ratio = None
    if len(sizes) >= 2:
        ratio = by_size[sizes[-1]]["warm_pass_median_s"] / by_size[sizes[0]]["warm_pass_median_s"]
    report = {"sizes": results, "ratio": round(ratio, 2) if ratio else None}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for r in results:
        print(
            f"history {r['history']:>9,}: history pass {r['history_pass_s']:7.2f}s; "
            f"pass over {r['new']:,} new records: first in a fresh process {r['first_pass_s']:.2f}s "
            f"(+ Spark start {r['spark_start_s']:.2f}s), warm median {r['warm_pass_median_s']:.3f}s "
            f"{r['warm_pass_s']}; raw files read {r['raw_files_read']}/{r['raw_files_total']}, "
            f"staging marker files read {r['staging_marker_files_read']}/{r['staging_files_total']}"
        )
    if ratio is not None:
        print(f"ratio {sizes[-1]:,} / {sizes[0]:,} history: {ratio:.2f} (goal ≤ 1.5)")


if __name__ == "__main__":
    main()
