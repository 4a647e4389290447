"""Benchmark: to-kafka latency and throughput.

    .venv/bin/python bench/latency.py [--commits 200] [--records 1000000] [--format avro]
        [--partitions 1] [--rounds 3] [--warm-ups 2] [--threads]

1. Starts a private Apache Kafka broker and Schema Registry (engine.local, free ports, a
   temporary directory; both stopped at the end), and a lake in the same directory.
2. **Latency**: a continuous :class:`engine.deliver.loop.Delivery` runs on a staging pool
   while ``--commits`` small staging commits (5 records each, 50-300 ms apart) are made;
   a read_committed consumer notes when each record shows up. Latency of a commit = the
   moment its last record is visible to the consumer - the moment the Delta commit
   returned. Prints the median, p95 and max (goal: median <= 1 s, p95 <= 2 s).
3. **Throughput**: ``--records`` outputs (~200-byte invoices, 100,000 per commit) are
   staged as an ETL pass writes them (``--staging etl``: JSON text and the Avro bodies
   Spark's ``to_avro`` makes, by the ETL's own SQL; ``--staging json``: the JSON text
   only, as a pool from before staged Avro holds); a to-kafka run (non-continuous, in
   this process: read the position back, read staging, encode, produce in
   transactions) of them to a new topic is timed from its start to its end.
   **Ceiling**: the same keys and values, already encoded, produced by a plain
   confluent-kafka producer (zync's idempotent producer settings, no transactions, no
   headers) to a fresh topic, timed until flushed. ``--partitions N`` (default 1): the
   topics have N partitions and every record goes to the partition to-kafka gives it
   (its key's), in the plain runs too. ``--rounds`` rounds (default 3) of
   one to-kafka run and one plain run each; prints each round and the medians, with
   to-kafka / ceiling (goal: >= 60%). Before them the broker is warmed by ``--warm-ups``
   rounds (default 2) of the same records down both paths: a fresh broker JVM compiles
   its hot paths under its first load, the transactional ones (markers, producer state)
   only under transactional load, and a fresh cluster's first transactional producer
   waits while the transaction state is made; the run that met a path first used to pay
   for it (to-kafka, the broker's transactional paths: about twice its CPU).
4. ``--threads``: also where the CPU of each throughput run went — this process's
   threads by name (Python's names for zync's threads; the others by their system name:
   librdkafka's ``rdk:*``, polars' ``async-executor``, Arrow's pool without a name), the
   broker JVM's CPU and the share of the machine's cores left idle.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _types() -> Any:
    from pyspark.sql import types as T

    from engine.lake.topic_types import TopicTypes

    key = T.StructType([T.StructField("ID", T.LongType())])
    value = T.StructType(
        [
            T.StructField("ID", T.LongType()),
            T.StructField("customer", T.StringType()),
            T.StructField("item", T.StringType()),
            T.StructField("amount", T.DoubleType()),
            T.StructField("invoice_status", T.StringType()),
            T.StructField("note", T.StringType()),
        ]
    )
    return TopicTypes(key=key.json(), value=value.json())


def _record(i: int) -> tuple[str, str]:
    key = json.dumps({"ID": i % 50_000}, separators=(",", ":"))
    value = json.dumps(
        {
            "ID": i % 50_000,
            "customer": f"customer number {i % 997}",
            "item": f"item {i % 113} of the catalogue",
            "amount": round(i * 0.37, 2),
            "invoice_status": ("pending", "paid", "closed")[i % 3],
            "note": None
            if i % 10 == 0
            else (
                f"order {i} delivered to the front desk of building {i % 31}, signed by the "
                "recipient; invoice sent by e-mail, payment due in thirty days"
            ),
        },
        separators=(",", ":"),
    )
    return key, value


def _positions(topic: str, first: int, count: int) -> list[dict[str, Any]]:
    """The ``kafka`` structs of ``count`` outputs of ``topic`` from offset ``first``."""
    return [
        {"topic": topic, "partition": 0, "offset": first + i, "timestamp": None}
        for i in range(count)
    ]


def _stage(pool: Any, topic: str, first: int, count: int) -> int:
    """Commit ``count`` records from offset ``first`` as JSON text only (as a staging
    pool from before staged Avro holds them); returns the new version."""
    from engine.lake.pool_record import record_rows

    records = [_record(first + i) for i in range(count)]
    rows = record_rows(
        _positions(topic, first, count), [k for k, _ in records], [v for _, v in records]
    )
    pool.refresh()
    return int(pool.commit_rows(rows, expect_version=pool.version))


def _stage_as_etl(spark: Any, pool: Any, topic: str, first: int, count: int) -> int:
    """:func:`_stage`, the rows made as an ETL pass makes its outputs: the typed records'
    JSON text (Spark's ``to_json``) and Avro bodies (Spark's ``to_avro``), by the ETL's
    own SQL (engine.etl.typed_records)."""
    import pyarrow as pa

    from engine.etl.typed_records import avro_bodies_sql, json_text_sql, parse_json_sql
    from engine.lake.pool_record import record_rows

    key_type, value_type = pool.spark_types(topic)
    records = [_record(first + i) for i in range(count)]
    texts = pa.table({"key": [k for k, _ in records], "value": [v for _, v in records]})
    typed = spark.createDataFrame(texts).selectExpr(
        f"{parse_json_sql('key', key_type)} AS key",
        f"{parse_json_sql('value', value_type)} AS value",
    )
    made = typed.selectExpr(
        f"{json_text_sql('key', key_type)} AS key",
        f"{json_text_sql('value', value_type)} AS value",
        f"{avro_bodies_sql(key_type, value_type)} AS avro",
    ).toArrow()
    rows = record_rows(
        _positions(topic, first, count),
        made.column("key"),
        made.column("value"),
        made.column("avro"),
    )
    pool.refresh()
    return int(pool.commit_rows(rows, expect_version=pool.version))


def latency(lake: Any, kafka: Any, registry: Any, commits: int, fmt: str) -> dict[str, float]:
    from confluent_kafka import TopicPartition

    from engine.deliver.delivery_options import DeliveryOptions
    from engine.deliver.loop import Delivery
    from engine.kafka.clients import consumer, ensure_topic

    topic = f"latency-{int(time.time())}"
    pool = lake.create_pool("LatencyStaging", "staging", exist_ok=True)
    pool.record_types({topic: _types()})
    ensure_topic(kafka, topic)
    seen: dict[int, float] = {}
    stop = threading.Event()

    def watch() -> None:
        # jdbc messages carry their pool offset only as anchors (the first and last of a
        # transaction, ...): the ones in between follow the previous one by one
        reader = consumer(kafka, extra={"fetch.wait.max.ms": "10"})
        reader.assign([TopicPartition(topic, 0, 0)])
        current = -1
        while not stop.is_set():
            for message in reader.consume(1000, 0.05):
                if message.error() is None:
                    anchor = dict(message.headers() or []).get("zync.offset")
                    current = int(anchor) if anchor is not None else current + 1
                    seen[current] = time.time()
        reader.close()

    delivery = Delivery(lake, pool.name, topic, DeliveryOptions(kafka=kafka, registry=registry, format=fmt))
    runner = threading.Thread(
        target=delivery.run, args=(stop,), kwargs={"continuous": True}, daemon=True
    )
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    runner.start()
    per_commit = 5
    rng = random.Random(1)
    _stage(pool, topic, 0, per_commit)  # warm-up: schemas registered, first transaction
    _wait(lambda: per_commit - 1 in seen, 60, "the warm-up commit")
    committed: list[tuple[int, float]] = []
    offset = per_commit
    for _ in range(commits):
        time.sleep(rng.uniform(0.05, 0.3))
        _stage(pool, topic, offset, per_commit)
        offset += per_commit
        committed.append((offset - 1, time.time()))
    _wait(lambda: offset - 1 in seen, 60, "the last commit")
    stop.set()
    runner.join(30)
    watcher.join(5)
    latencies = sorted(seen[last] - at for last, at in committed)
    return {
        "median": statistics.median(latencies),
        "p95": latencies[int(0.95 * (len(latencies) - 1))],
        "max": latencies[-1],
    }


@dataclass(frozen=True)
class CpuUse:
    """Where the CPU went during a run: CPU seconds by thread name (this process), of the
    other process watched, and the share of the machine's cores left idle."""

    threads: dict[str, float]
    other: float
    idle_percent: float


class CpuWatch:
    """CPU seconds of this process's threads (sampled from /proc every 0.25 s, so threads
    that end between samples lose at most their last 0.25 s), of one other process, and
    the machine's idle share, between :meth:`start` and :meth:`stop`."""

    def __init__(self, other_pid: int) -> None:
        self.other_pid = other_pid
        self._names: dict[int, str] = {}
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._halt = threading.Event()
        self._sampler = threading.Thread(target=self._sample, name="cpu-watch", daemon=True)

    def start(self) -> None:
        self._other = _proc_cpu(f"/proc/{self.other_pid}/stat")
        self._machine = _machine_times()
        self._first = self._threads()
        self._sampler.start()

    def stop(self) -> CpuUse:
        self._halt.set()
        self._sampler.join()
        self._threads()
        used: dict[str, float] = {}
        for tid, cpu in self._last.items():
            name = self._names.get(tid, "?").rstrip("0123456789_-")
            used[name] = used.get(name, 0.0) + cpu - self._first.get(tid, 0.0)
        total, idle = (
            now - then for now, then in zip(_machine_times(), self._machine, strict=True)
        )
        return CpuUse(
            used,
            _proc_cpu(f"/proc/{self.other_pid}/stat") - self._other,
            100 * idle / total if total else 0.0,
        )

    def _threads(self) -> dict[int, float]:
        seen = {}
        for entry in os.listdir("/proc/self/task"):
            tid = int(entry)
            try:
                seen[tid] = _proc_cpu(f"/proc/self/task/{tid}/stat")
                if tid not in self._names:  # a thread's name is read once
                    self._names[tid] = self._name(tid)
            except OSError:
                continue  # ended meanwhile
        self._last.update(seen)
        return seen

    @staticmethod
    def _name(tid: int) -> str:
        """Python's name for one of its threads, else the system's (``comm``)."""
        for thread in threading.enumerate():
            if thread.native_id == tid:
                return thread.name
        return Path(f"/proc/self/task/{tid}/comm").read_text().strip()

    def _sample(self) -> None:
        while not self._halt.wait(0.25):
            self._threads()


def _proc_cpu(stat_path: str) -> float:
    """user + system CPU seconds from a /proc .../stat file."""
    fields = Path(stat_path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_times() -> tuple[int, int]:
    """All and idle (idle + iowait) jiffies of the machine's cores so far."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(values), values[3] + values[4]


def _cpu_line(what: str, used: CpuUse) -> str:
    threads = ", ".join(
        f"{name} {cpu:.2f}"
        for name, cpu in sorted(used.threads.items(), key=lambda kv: -kv[1])
        if cpu >= 0.05
    )
    return (
        f"CPU-s during {what}: broker JVM {used.other:.2f}; this process's threads: "
        f"{threads}; cores idle {used.idle_percent:.0f}%"
    )


def throughput(
    lake: Any,
    kafka: Any,
    registry: Any,
    records: int,
    fmt: str,
    *,
    warm_ups: int = 2,
    rounds: int = 3,
    broker_pid: int | None = None,
    staging: str = "etl",
    partitions: int = 1,
    on_round: Callable[[int, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    import pyarrow.compute as pc

    from engine.deliver.encode import PartCodec
    from engine.deliver.ledger import Ledger
    from engine.kafka.codecs.formats import Format

    topic = f"throughput-{int(time.time())}"
    pool = lake.create_pool("BenchStaging", "staging", exist_ok=True)
    pool.record_types({topic: _types()})
    started = time.monotonic()
    spark = None
    if staging == "etl":
        from engine.spark import get_spark

        spark = get_spark()
    for first in range(0, records, 100_000):
        count = min(100_000, records - first)
        if spark is not None:
            _stage_as_etl(spark, pool, topic, first, count)
        else:
            _stage(pool, topic, first, count)
    if spark is not None:
        from engine.spark import stop_spark

        stop_spark()  # its JVM is not part of a delivery
    print(
        f"staged {records:,} records ({staging}) in {time.monotonic() - started:.1f}s", flush=True
    )

    # the ceiling's bytes: the staged records encoded (untimed)
    pool.refresh()
    table = pool.table.to_pyarrow_dataset().to_table(
        columns={
            "offset": pc.field("kafka", "offset"),
            "key": pc.field("key"),
            "value": pc.field("value"),
        }
    )
    key_type, value_type = pool.spark_types(topic)
    keys = PartCodec(Format(fmt), key_type, "bench_key")
    values = PartCodec(Format(fmt), value_type, "bench_value")
    if fmt == "avro":
        keys.schema_id = values.schema_id = 1
    key_bytes = keys.encode(table.column("key").to_pylist())
    value_bytes = values.encode(table.column("value").to_pylist())
    # the partition to-kafka gives each record (its key's, by to-kafka's own rule)
    ledger = Ledger(list(range(partitions)), counts_after=True)
    partition_of = [
        ledger.partition_of(key, offset)
        for key, offset in zip(
            table.column("key").to_pylist(), table.column("offset").to_pylist(), strict=True
        )
    ]
    # a fresh broker JVM compiles its hot paths under the first load, and the
    # transactional ones (transaction markers, producer state) only under transactional
    # load: whichever run meets a path first pays for compiling it (up to twice the
    # broker's CPU), so the broker is warmed by the same bytes down both paths first, as
    # a user's long-running broker is. The first delivery also waits while a fresh
    # cluster makes its transaction state (about a second), long done on a user's.
    for n in range(warm_ups):
        seconds, _, _ = _plain_run(
            kafka, f"warm-up-{n}-{int(time.time())}", key_bytes, value_bytes, None, partition_of
        )
        print(
            f"broker warm-up {n + 1}: plain producer {records / seconds:,.0f} records/s", flush=True
        )
        seconds = _delivery_run(
            lake,
            pool,
            topic,
            f"warm-up-tx-{n}-{int(time.time())}",
            kafka,
            registry,
            fmt,
            partitions=partitions,
        )[0]
        print(f"broker warm-up {n + 1}: to-kafka {records / seconds:,.0f} records/s", flush=True)

    runs = []
    for n in range(rounds):
        zync_seconds, zync_cpu, zync_threads = _delivery_run(
            lake,
            pool,
            topic,
            f"{topic}-{n}",
            kafka,
            registry,
            fmt,
            broker_pid,
            partitions=partitions,
        )
        ceiling_seconds, ceiling_cpu, ceiling_threads = _plain_run(
            kafka,
            f"ceiling-{n}-{int(time.time())}",
            key_bytes,
            value_bytes,
            broker_pid,
            partition_of,
        )
        runs.append(
            {
                "zync": records / zync_seconds,
                "ceiling": records / ceiling_seconds,
                "zync_seconds": zync_seconds,
                "ceiling_seconds": ceiling_seconds,
                "zync_cpu": zync_cpu,
                "ceiling_cpu": ceiling_cpu,
                "zync_threads": zync_threads,
                "ceiling_threads": ceiling_threads,
            }
        )
        if on_round is not None:
            on_round(n + 1, runs[-1])
    sample = [v for v in value_bytes[:10_000] if v is not None]
    return {"rounds": runs, "value_bytes": sum(len(v) for v in sample) / len(sample)}


def _delivery_run(
    lake: Any,
    pool: Any,
    staged: str,
    topic: str,
    kafka: Any,
    registry: Any,
    fmt: str,
    broker_pid: int | None = None,
    *,
    partitions: int = 1,
) -> tuple[float, float, CpuUse | None]:
    """One to-kafka run (non-continuous, in this process) of the records staged for
    ``staged`` to the new topic ``topic`` of ``partitions`` partitions, timed from its
    start to its end: seconds, this process's CPU seconds and (with ``broker_pid``)
    where the CPU went."""
    from engine.deliver.delivery_options import DeliveryOptions
    from engine.deliver.loop import Delivery

    delivery = Delivery(
        lake,
        pool.name,
        topic,
        DeliveryOptions(kafka=kafka, registry=registry, format=fmt, partitions=partitions),
        staged=staged,
    )
    watch = None if broker_pid is None else CpuWatch(broker_pid)
    cpu = _cpu()
    if watch:
        watch.start()
    started = time.monotonic()
    status = delivery.run()
    seconds = time.monotonic() - started
    used = _cpu() - cpu
    threads = watch.stop() if watch else None
    assert status.records_delivered == _pool_records(pool, staged), status
    return seconds, used, threads


def _pool_records(pool: Any, staged: str) -> int:
    """The records staged for ``staged`` (every one is delivered in one run)."""
    import pyarrow.compute as pc

    pool.refresh()
    offsets = pool.table.to_pyarrow_dataset().to_table(
        columns={"offset": pc.field("kafka", "offset")},
        filter=pc.field("kafka", "topic") == staged,
    )
    return int(offsets.num_rows)


def _plain_run(
    kafka: Any,
    topic: str,
    key_bytes: list[bytes | None],
    value_bytes: list[bytes | None],
    broker_pid: int | None = None,
    partition_of: list[int] | None = None,
) -> tuple[float, float, CpuUse | None]:
    """The encoded records through a plain producer (zync's idempotent settings, no
    transactions, no headers) to a fresh topic, timed until flushed: seconds, this
    process's CPU seconds and (with ``broker_pid``) where the CPU went. Each record goes
    to its ``partition_of`` (the partition to-kafka gives it; default: all to 0)."""
    from engine.kafka.clients import ensure_topic, producer

    partition_of = partition_of or [0] * len(key_bytes)
    ensure_topic(kafka, topic, partitions=max(partition_of) + 1)
    plain = producer(kafka)
    produce = plain.produce
    watch = None if broker_pid is None else CpuWatch(broker_pid)
    cpu = _cpu()
    if watch:
        watch.start()
    started = time.monotonic()
    for key, value, partition in zip(key_bytes, value_bytes, partition_of, strict=True):
        while True:
            try:
                produce(topic, value, key, partition=partition)
                break
            except BufferError:
                plain.poll(0.05)
    left = plain.flush(300)
    seconds = time.monotonic() - started
    used = _cpu() - cpu
    threads = watch.stop() if watch else None
    assert left == 0
    return seconds, used, threads


def _cpu() -> float:
    """CPU seconds this process used so far (all threads, user + system)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)


def main() -> None:
    from bench.stopping import stop_on_sigterm

    stop_on_sigterm()  # a killed run still stops its broker and registry
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--format", default="avro", choices=["avro", "json", "connect-json"])
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument(
        "--threads", action="store_true", help="print where the throughput runs' CPU went"
    )
    parser.add_argument(
        "--staging",
        default="etl",
        choices=["etl", "json"],
        help="throughput: stage the records as an ETL pass writes them (JSON text and Avro "
        "bodies made by Spark, the default) or as JSON text only (a pool from before "
        "staged Avro)",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="throughput: partitions of the topics (default 1); each record goes to the "
        "partition to-kafka gives it, in the plain producer's runs too",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="throughput: measured rounds, each a to-kafka run and a plain producer run "
        "(default 3; the medians are printed)",
    )
    parser.add_argument(
        "--warm-ups",
        type=int,
        default=2,
        help="plain producer runs and to-kafka runs of the same records that warm the "
        "broker's JIT first, each (default 2)",
    )
    args = parser.parse_args()

    from engine.lake.pools import Lake
    from engine.local import broker as local_broker
    from engine.local import processes
    from engine.local import registry as local_registry
    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile

    with tempfile.TemporaryDirectory(prefix="zync-bench-") as tmp:
        root = Path(tmp)
        (root / "broker").mkdir()
        (root / "registry").mkdir()
        broker = local_broker.start_broker(root / "broker", port=0, timeout=60)
        registry_process = local_registry.start_registry(root / "registry", port=0, timeout=60)
        try:
            kafka = KafkaProfile(bootstrap_servers=f"{processes.HOST}:{broker.port}")
            registry = RegistryProfile(url=registry_process.address)
            lake = Lake(root / "lake")
            if not args.skip_latency:
                figures = latency(lake, kafka, registry, args.commits, args.format)
                print(
                    f"latency over {args.commits} commits (commit -> visible to a consumer): "
                    f"median {figures['median'] * 1000:.0f} ms, p95 {figures['p95'] * 1000:.0f} ms, "
                    f"max {figures['max'] * 1000:.0f} ms",
                    flush=True,
                )
            if not args.skip_throughput:

                def report(n: int, run: dict[str, Any]) -> None:
                    print(
                        f"round {n}: to-kafka {run['zync']:,.0f} records/s "
                        f"({run['zync_seconds']:.2f}s), plain producer {run['ceiling']:,.0f} "
                        f"records/s ({run['ceiling_seconds']:.2f}s): "
                        f"{100 * run['zync'] / run['ceiling']:.0f}%; CPU of this process "
                        f"{run['zync_cpu']:.1f}s and {run['ceiling_cpu']:.1f}s",
                        flush=True,
                    )
                    if args.threads:
                        print(_cpu_line("to-kafka", run["zync_threads"]), flush=True)
                        print(_cpu_line("the plain producer", run["ceiling_threads"]), flush=True)

                measured = throughput(
                    lake, kafka, registry, args.records, args.format,
                    warm_ups=args.warm_ups, rounds=args.rounds,
                    broker_pid=broker.pid if args.threads else None,
                    staging=args.staging, partitions=args.partitions, on_round=report,
                )  # fmt: skip
                runs = measured["rounds"]
                zync = statistics.median(r["zync"] for r in runs)
                ceiling = statistics.median(r["ceiling"] for r in runs)
                ratio = statistics.median(100 * r["zync"] / r["ceiling"] for r in runs)
                print(
                    f"throughput, {args.records:,} records ({args.format}, {args.partitions} "
                    f"partition(s), values ~"
                    f"{measured['value_bytes']:.0f} bytes), medians of {len(runs)} rounds: "
                    f"to-kafka {zync:,.0f} records/s, plain producer {ceiling:,.0f} records/s; "
                    f"to-kafka / plain producer, same round: {ratio:.0f}% of the ceiling; "
                    f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
                    flush=True,
                )
        finally:
            processes.stop_process(registry_process)
            processes.stop_process(broker)


if __name__ == "__main__":
    main()
