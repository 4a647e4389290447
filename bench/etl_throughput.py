"""Benchmark: an ETL pass over N new raw records against a plain Spark job that computes
the same output rows.

    .venv/bin/python bench/etl_throughput.py [--records 1000000] [--partitions 2] [--runs 3]

1. Builds a raw pool of N Debezium-shaped events of the invoice scenario once
   (``tests.cluster.invoice_events``: creates, statuses before and after their invoice,
   statuses that never come, updates, deletes and tombstones; P partitions per topic;
   appended as from-kafka commits them, 100,000 per commit), and an empty staging pool.
2. In one process and one SparkSession (``engine.spark.get_spark``, local[2] unless
   $ZYNC_SPARK_MASTER says otherwise), first both jobs once over a small lake (JVM
   warm-up, not timed), then ``--runs`` times, the order alternating, each on a fresh
   copy of the lake:

   * **zync**: one ETL pass of demo/invoices/etl.yaml (denorm + stateless rules) with a
     new ``EtlRunner``: outputs, completion markers and positions in one staging commit;
   * **plain**: the Spark job a user would write for the same output rows: read the raw
     pool with delta-spark, ``from_json`` with hand-written schemas, the same join and
     the rules' SQL (first matching rule = the rules' disjoint ``op`` conditions), the
     key and value as JSON text, written to a Delta table. No markers, cursors,
     numbering or expiry.

   Both must give the same multiset of output rows (key, value).
3. Where the pass's time goes: ``run.py`` has no timing hooks, so the pass is timed from
   outside, by wrapping the runner's methods named in ``PHASES`` (and the staging pool's
   ``commit_rows``) on the instance; a name the runner no longer has is reported as not
   found. The Spark jobs each side ran are counted through a job group.

Every figure is the median of the runs; the last line is plain / zync, the pass's speed
as a fraction of the plain job's (bar: >= 0.5).
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONFIG = ROOT / "demo" / "invoices" / "etl.yaml"
CHUNK = 100_000
WARMUP_RECORDS = 20_000

#: (object, method, what it does): timed from outside on each pass's runner. The ones
#: marked nested run inside the one above them and are not added to the total.
PHASES: list[tuple[str, str, str, bool]] = [
    ("runner", "check", "check the configuration against the input types", False),
    ("runner", "_plan", "plan: read raw and markers, assign rules, plan them, one Spark "
                        "job brings fates and output counts to the driver, decide", False),
    ("runner", "_write_outputs", "number the outputs and write them from the executors", False),
    ("staging", "commit_rows", "the one Delta commit: output files, markers, positions", False),
]

# The plain job's input schemas, as a user writes them for the invoice topics.
KEY_DDL = "ID BIGINT"
INVOICE_ROW = "STRUCT<ID: BIGINT, customer: STRING, item: STRING>"
STATUS_ROW = "STRUCT<ID: BIGINT, InvoiceID: BIGINT, status: STRING>"
SOURCE = "STRUCT<table: STRING, lsn: BIGINT>"
INVOICE_DDL = f"before {INVOICE_ROW}, after {INVOICE_ROW}, source {SOURCE}, op STRING, ts_ms BIGINT"
STATUS_DDL = f"before {STATUS_ROW}, after {STATUS_ROW}, source {SOURCE}, op STRING, ts_ms BIGINT"

# The rules of demo/invoices/etl.yaml written as one query over the raw pool (view
# ``raw``): each branch is one rule (their ``op`` conditions are disjoint, so "the first
# matching rule" is the one that matches), its key and value as JSON text the way zync
# writes them (null fields kept).
PLAIN_SQL = """
WITH invoices AS (
  SELECT from_json(key, '{key}') AS key, from_json(value, '{invoice}') AS value
  FROM raw WHERE kafka.topic = 'Invoices'
), statuses AS (
  SELECT from_json(key, '{key}') AS key, from_json(value, '{status}') AS value
  FROM raw WHERE kafka.topic = 'InvoiceStatus'
)
SELECT to_json(l.key, {opts}) AS key,
       to_json(named_struct('ID', l.value.after.ID,
                            'customer', l.value.after.customer,
                            'item', l.value.after.item,
                            'invoice_status', r.value.after.status), {opts}) AS value
FROM invoices AS l JOIN statuses AS r ON l.value.after.ID = r.value.after.InvoiceID
WHERE l.value.op IN ('c', 'r') AND r.value.op IN ('c', 'r')
UNION ALL
SELECT to_json(named_struct('ID', value.after.InvoiceID), {opts}),
       to_json(named_struct('ID', value.after.InvoiceID,
                            'invoice_status', value.after.status), {opts})
FROM statuses WHERE value.op = 'u'
UNION ALL
SELECT to_json(key, {opts}),
       to_json(named_struct('ID', value.after.ID,
                            'customer', value.after.customer,
                            'item', value.after.item), {opts})
FROM invoices WHERE value.op = 'u'
UNION ALL
SELECT to_json(key, {opts}), CAST(NULL AS STRING)
FROM invoices WHERE value.op = 'd'
""".format(
    key=KEY_DDL, invoice=INVOICE_DDL, status=STATUS_DDL, opts="map('ignoreNullFields', 'false')"
)


def _spark() -> Any:
    from engine.settings.spark import SparkSettings
    from engine.spark import get_spark

    return get_spark(SparkSettings(master=os.environ.get("ZYNC_SPARK_MASTER") or "local[2]"))


def build_lake(root: Path, records: int, partitions: int) -> Path:
    """A lake whose Raw pool holds ``records`` invoice events and an empty Staging."""
    from engine.lake.pools import Lake
    from tests.cluster import append_events, invoice_events

    lake = Lake(root)
    raw = lake.create_pool("Raw", "raw")
    lake.create_pool("Staging", "staging")
    append_events(raw, invoice_events(records, partitions=partitions), chunk=CHUNK)
    return root


# ---------------------------------------------------------------------- the two jobs


class PhaseTimer:
    """Times the methods named in PHASES on one runner (and its staging pool) by
    replacing them on the instances with timed wrappers."""

    def __init__(self, runner: Any) -> None:
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.missing: list[str] = []
        owners = {"runner": runner, "staging": getattr(runner, "staging", None)}
        for owner, name, _, _ in PHASES:
            method = getattr(owners[owner], name, None)
            if method is None:
                self.missing.append(f"{owner}.{name}")
                continue
            setattr(owners[owner], name, self._timed(f"{owner}.{name}", method))

    def _timed(self, label: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - started

        return timed


class JobCount:
    """The Spark jobs this thread starts inside the block (through a job group)."""

    def __init__(self, spark: Any, group: str) -> None:
        self.context = spark.sparkContext
        self.group = group
        self.jobs = 0

    def __enter__(self) -> JobCount:
        self.context.setJobGroup(self.group, self.group)
        return self

    def __exit__(self, *exc: object) -> None:
        self.jobs = len(self.context.statusTracker().getJobIdsForGroup(self.group))
        self.context.setLocalProperty("spark.jobGroup.id", None)


def zync_pass(spark: Any, root: Path, label: str) -> dict[str, Any]:
    """One ETL pass of the demo configuration over the lake at ``root``."""
    from engine.etl import EtlRunner, load_config
    from engine.lake.pools import Lake

    runner = EtlRunner(load_config(CONFIG), Lake(root), spark)
    timer = PhaseTimer(runner)
    with JobCount(spark, f"zync-{label}") as jobs:
        started = time.perf_counter()
        result = runner.run_pass()
        seconds = time.perf_counter() - started
    if not result.committed:
        raise SystemExit(f"the pass committed nothing: {result.summary()}")
    data = result.to_json()
    return {
        "seconds": seconds,
        # the pass runs its jobs under a job group of its own (engine.etl.timings)
        "jobs": data.get("spark_jobs") or jobs.jobs,
        "pass_phases": data.get("phases") or {},
        "phases": dict(timer.seconds),
        "missing": timer.missing,
        "result": result,
    }


def plain_job(spark: Any, root: Path, label: str) -> dict[str, Any]:
    """The hand-written job: raw pool -> the rules' output rows -> a Delta table."""
    with JobCount(spark, f"plain-{label}") as jobs:
        started = time.perf_counter()
        raw = spark.read.format("delta").load((root / "Raw").resolve().as_uri())
        raw.where("deadletter IS NULL AND marker IS NULL").createOrReplaceTempView("raw")
        out = spark.sql(PLAIN_SQL)
        out.write.format("delta").mode("overwrite").save((root / "plain").resolve().as_uri())
        seconds = time.perf_counter() - started
    spark.catalog.dropTempView("raw")
    return {"seconds": seconds, "jobs": jobs.jobs}


def same_outputs(root: Path) -> int:
    """The number of output rows; raises SystemExit unless the pass's outputs (staging
    rows that are not markers) and the plain job's are the same multiset (key, value)."""
    from deltalake import DeltaTable

    staging = DeltaTable(str(root / "Staging")).to_pyarrow_table(
        columns=["kafka", "key", "value", "marker"]
    )
    outputs = staging.filter(staging.column("marker").is_null())
    topics = set(outputs.column("kafka").combine_chunks().field("topic").to_pylist())
    if topics - {"NewInvoices"}:
        raise SystemExit(f"the pass wrote outputs to {sorted(topics)}")
    ours = collections.Counter(
        zip(outputs.column("key").to_pylist(), outputs.column("value").to_pylist(), strict=True)
    )
    plain = DeltaTable(str(root / "plain")).to_pyarrow_table(columns=["key", "value"])
    theirs = collections.Counter(
        zip(plain.column("key").to_pylist(), plain.column("value").to_pylist(), strict=True)
    )
    if ours != theirs:
        only_ours, only_theirs = ours - theirs, theirs - ours
        raise SystemExit(
            f"different output rows: {sum(only_ours.values()):,} only in zync's (e.g. "
            f"{list(only_ours)[:2]}), {sum(only_theirs.values()):,} only in the plain job's "
            f"(e.g. {list(only_theirs)[:2]})"
        )
    return outputs.num_rows


# ------------------------------------------------------------------------- main


def _rate(n: int, seconds: float) -> str:
    return f"{seconds:.2f}s ({n / seconds:,.0f} records/s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    n, runs = args.records, args.runs

    from engine.spark import stop_spark

    work = Path(tempfile.mkdtemp(prefix="zync-bench-etl-"))
    os.environ.setdefault("ZYNC_HOME", str(work / "home"))
    try:
        started = time.monotonic()
        base = build_lake(work / "base", n, args.partitions)
        warm = build_lake(work / "warm", min(n, WARMUP_RECORDS), args.partitions)
        print(
            f"raw pool: {n:,} invoice events ({args.partitions} partition(s) per topic) "
            f"built in {time.monotonic() - started:.1f}s",
            flush=True,
        )
        started = time.monotonic()
        spark = _spark()
        zync_pass(spark, warm, "warm-up")
        plain_job(spark, warm, "warm-up")
        same_outputs(warm)
        print(f"Spark session and warm-up (both jobs over {min(n, WARMUP_RECORDS):,} events): "
              f"{time.monotonic() - started:.1f}s", flush=True)

        passes, plains = [], []
        outputs = 0
        for k in range(runs):
            root = shutil.copytree(base, work / f"run{k + 1}")
            label = f"run{k + 1}"
            if k % 2 == 0:
                ours = zync_pass(spark, root, label)
                theirs = plain_job(spark, root, label)
            else:
                theirs = plain_job(spark, root, label)
                ours = zync_pass(spark, root, label)
            outputs = same_outputs(root)
            passes.append(ours)
            plains.append(theirs)
            print(
                f"  run {k + 1}/{runs}: zync pass {ours['seconds']:.2f}s ({ours['jobs']} Spark "
                f"jobs), plain job {theirs['seconds']:.2f}s ({theirs['jobs']} Spark jobs); "
                f"same {outputs:,} output rows",
                flush=True,
            )
            shutil.rmtree(root)

        result = passes[-1]["result"]
        print(
            f"pass: consumed {sum(result.consumed.values()):,}, outputs "
            f"{sum(result.outputs.values()):,}, expired {sum(result.expired.values()):,}, "
            f"pending {sum(result.pending.values()):,}"
        )
        zync_s = statistics.median(p["seconds"] for p in passes)
        plain_s = statistics.median(p["seconds"] for p in plains)
        print(f"zync ETL pass over {n:,} new raw records: {_rate(n, zync_s)}")
        print(f"plain Spark job, the same {outputs:,} output rows: {_rate(n, plain_s)}")

        print("where the pass's time goes (median s; the runner's methods timed from outside):")
        accounted = 0.0
        for owner, name, what, nested in PHASES:
            label = f"{owner}.{name}"
            if label in passes[0]["missing"]:
                print(f"  {label}: not found (renamed?)")
                continue
            seconds = statistics.median(p["phases"].get(label, 0.0) for p in passes)
            if not nested:
                accounted += seconds
            print(f"  {'  ' if nested else ''}{label} ({what}): {seconds:.2f}s")
        print(f"  other (refresh, output types, positions, result): {zync_s - accounted:.2f}s")
        print("the pass's own phases (median s, engine.etl.timings, as `zync etl --profile`):")
        for phase in passes[0]["pass_phases"]:
            seconds = statistics.median(p["pass_phases"].get(phase, 0.0) for p in passes)
            print(f"  {phase}: {seconds:.2f}s")
        print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print(f"speed ratio plain / zync: {plain_s / zync_s:.2f} (bar >= 0.5)")
    finally:
        stop_spark()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
