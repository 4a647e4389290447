"""Benchmark: a whole database through one pipeline — hundreds of tables, wide rows.

    .venv/bin/python bench/width.py [--tables 200] [--events 20] [--columns 60]
                                    [--format avro|json] [--runs 3] [--phases ingest,etl,run]
                                    [--outputs 400] [--per-output 3]

A Debezium PostgreSQL connector's topics (tests/fixtures/wide.py): ``--tables`` topics
of ``--columns``-wide rows with the connector's full ``source``, ``--events`` change
events each (creates, updates, deletes, re-creates), produced with confluent-kafka's
``AvroSerializer`` and the registry (or as plain JSON), into a private broker and
registry (engine.local, free ports on 127.0.0.1, stopped by PID at the end).

* **ingest**: ``zync from-kafka CONFIG`` into a fresh raw pool, from process start until
  the pool holds every event, against the same number of events of one table's shape in
  ONE topic (`--runs` each, alternating; medians). Bar: wide ≥ 0.8× one topic.
* **etl**: a warm ETL loop (one SparkSession, one runner; the pass-through
  configuration: one stateless rule per table) — passes over ONE new event per table
  (``--tables`` rules hold a candidate each) against passes over the same number of
  events through ONE rule (one table's events in one topic), alternating, after two
  warm-up passes each; medians and each pass's phases. Bars: wide ≤ 2 s and ≤ 3× one rule.
* **run**: ``zync run CONFIG`` on a fresh lake over the produced topics, from process
  start until the first output is visible on an output topic to a ``read_committed``
  consumer, and until every table's outputs are. Bar: first output ≤ 20 s.
* **deliver**: to-kafka with ``--outputs`` outputs (default 400): ``zync run CONFIG
  --only to-kafka`` (one process delivering every output of a pass-through
  configuration, the way ``zync run`` does) while this process runs the ETL (a warm
  runner): after a first pass has been delivered, each of ``--runs`` passes commits
  ``--per-output`` new outputs to every output topic in one staging commit, timed from
  the end of that commit until a ``read_committed`` consumer sees all of them. Also the
  delivering process's threads and its CPU while every output is idle (10 s).

Prints one line per figure and the load average.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402 - after the sys.path line that runs it from a checkout

from bench.peers import Stack, timed_until_full  # noqa: E402 - after the sys.path line
from tests.fixtures import wide  # noqa: E402 - after the sys.path line

ONE = "bench.width.one"  # the one-topic comparison
#: The subjects ``<topic>-key`` / ``<topic>-value``, as Kafka Connect's Avro converter
#: (Debezium's) names them; confluent-kafka 2.16's default first asks the registry for
#: the topic's associated subject, at every message.
TOPIC_SUBJECTS = {"subject.name.strategy.type": "TOPIC"}


def produce(stack: Stack, topics: dict[str, list[tuple[Any, Any]]], fmt: str, schemas: dict[str, tuple[Any, Any]]) -> None:
    """Produce each topic's (key, value) events with confluent-kafka's serializers."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    # idempotent, as Kafka Connect's producer is: in order even when a send is retried
    producer = Producer(
        {"bootstrap.servers": stack.bootstrap, "linger.ms": 20, "enable.idempotence": True,
         "log_level": 3}  # not its notes of a coordinator still loading: it retries
    )
    client = SchemaRegistryClient({"url": stack.registry})
    for topic, events in topics.items():
        if fmt == "avro":
            key_schema, value_schema = schemas[topic]
            keys = AvroSerializer(client, json.dumps(key_schema), conf=TOPIC_SUBJECTS)
            values = AvroSerializer(client, json.dumps(value_schema), conf=TOPIC_SUBJECTS)
            for key, value in events:
                producer.produce(
                    topic,
                    key=keys(key, SerializationContext(topic, MessageField.KEY)),
                    value=values(value, SerializationContext(topic, MessageField.VALUE)),
                )
                producer.poll(0)
        else:
            for key, value in events:
                producer.produce(topic, key=json.dumps(key), value=json.dumps(value))
                producer.poll(0)
    if producer.flush(60):
        raise SystemExit("the producer could not deliver every event")


def write_config(work: Path, config: dict[str, Any], name: str) -> Path:
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to a `zync run` the bench started, and its end (killed after 120 s)."""
    proc.terminate()
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)
        print("zync run did not stop within 120 s of SIGTERM", flush=True)


def ingest(stack: Stack, config: Path, pool: Path, n: int, label: str) -> float:
    argv = [
        str(Path(sys.executable).with_name("zync")), "from-kafka", str(config), "--lake",
        str(pool.parent), "--create-pool", "--exit-after", "2s", "--quiet",
    ]
    seconds, _ = timed_until_full(label, argv, stack.env(), pool, n, stack.work)
    return seconds


def etl_passes(args: argparse.Namespace, work: Path) -> None:
    """Warm passes over one new event per table against the same events in one rule."""
    from engine.api import EtlRunner, Lake, SparkSettings, get_spark, load_config
    from tests.integration.test_etl_support import append_events

    spark = get_spark(SparkSettings(master=os.environ.get("ZYNC_SPARK_MASTER", "local[2]")))
    runs: dict[str, list[float]] = {"wide": [], "one": []}
    setups = {}
    for label, tables in (("wide", args.tables), ("one", 1)):
        config = wide.pass_through_config(tables, name=f"width-{label}")
        lake = Lake(work / f"etl-{label}")
        raw = lake.create_pool("Raw", "raw")
        lake.create_pool("Staging", "staging")
        path = write_config(work, config, f"etl-{label}")
        events = [
            {"topic": wide.topic(t if label == "wide" else 0), "key": k, "value": v}
            for t in range(args.tables)
            for k, v in (wide.change(t, n, columns=args.columns) for n in range(2))
        ]
        append_events(raw, events)
        runner = EtlRunner(load_config(path), lake, spark)
        runner.run_pass()  # cold: the history
        setups[label] = (raw, runner)
    n = 2
    for round_ in range(args.runs + 2):
        for label, (raw, runner) in setups.items():
            table = (lambda t: t) if label == "wide" else (lambda t: 0)
            append_events(
                raw,
                [
                    {"topic": wide.topic(table(t)), "key": k, "value": v}
                    for t in range(args.tables)
                    for k, v in [wide.change(t, n, columns=args.columns)]
                ],
            )
            started = time.perf_counter()
            result = runner.run_pass()
            seconds = time.perf_counter() - started
            assert sum(result.outputs.values()) + sum(result.expired.values()) <= args.tables
            phases = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in result.timings.seconds.items() if v >= 0.005)
            print(f"  etl {label} pass {round_}: {seconds:.2f} s ({phases})", flush=True)
            if round_ >= 2:
                runs[label].append(seconds)
        n += 1
    w, o = statistics.median(runs["wide"]), statistics.median(runs["one"])
    print(f"etl warm pass, {args.tables} rules x 1 new event each: {w:.2f} s (bar <= 2 s)", flush=True)
    print(f"etl warm pass, 1 rule x {args.tables} new events: {o:.2f} s", flush=True)
    print(f"etl wide / one rule: {w / o:.2f} (bar <= 3)", flush=True)


def first_output(stack: Stack, config: Path, work: Path, outputs: list[str], expected: int) -> tuple[float, float]:
    """``zync run CONFIG`` on a fresh lake: seconds from its start until the first output
    is visible on an output topic, and until ``expected`` outputs are."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": stack.bootstrap,
            "group.id": f"bench-width-{time.time_ns()}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    consumer.subscribe([f"^{outputs[0].rsplit('.', 1)[0]}\\..*"])
    (work / "run-lake").mkdir(exist_ok=True)
    argv = [str(Path(sys.executable).with_name("zync")), "run", str(config), "--lake", str(work / "run-lake")]
    err = (work / "run.err").open("wb")
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, env=stack.env(), stdout=err, stderr=err)
    first = None
    seen = 0
    try:
        while seen < expected:
            if time.monotonic() - started > 600:
                raise SystemExit(f"zync run: {seen} of {expected} outputs after 600 s")
            if proc.poll() is not None:
                raise SystemExit(f"zync run exited with {proc.returncode}: {(work / 'run.err').read_text()[-2000:]}")
            for message in consumer.consume(1000, timeout=0.2):
                if message.error() is None:
                    seen += 1
                    first = first if first is not None else time.monotonic() - started
        return float(first or 0.0), time.monotonic() - started
    finally:
        _stop(proc)
        consumer.close()
        err.close()
        print(f"zync run's last lines:\n{(work / 'run.err').read_text()[-3000:]}", flush=True)


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def deliver_latency(stack: Stack, args: argparse.Namespace, work: Path) -> None:
    """ETL commit of ``--per-output`` new outputs to each of ``--outputs`` topics → all
    visible, delivered by ``zync run --only to-kafka``."""
    from confluent_kafka import Consumer, TopicPartition

    from engine.api import EtlRunner, Lake, SparkSettings, get_spark, load_config
    from engine.kafka.clients import admin_client
    from tests.integration.test_etl_support import append_events

    tables, per = args.outputs, args.per_output
    config = write_config(work, wide.pass_through_config(tables, name="deliver"), "deliver")
    lake = Lake(work / "deliver-lake")
    raw = lake.create_pool("Raw", "raw")
    lake.create_pool("Staging", "staging")
    spark = get_spark(SparkSettings(master=os.environ.get("ZYNC_SPARK_MASTER", "local[2]")))
    runner = EtlRunner(load_config(config), lake, spark)
    outputs = [f"clean.t{t:03d}" for t in range(tables)]
    changes = iter(range(10_000))

    def stage(count: int) -> float:
        """One pass committing ``count`` outputs per table; seconds the pass took."""
        n = [next(changes) for _ in range(count)]
        append_events(
            raw,
            [
                {"topic": wide.topic(t), "key": k, "value": v}
                for t in range(tables)
                for k, v in (wide.change(t, i, columns=args.columns) for i in n)
            ],
        )
        started = time.perf_counter()
        result = runner.run_pass()
        assert sum(result.outputs.values()) == tables * count, result.outputs
        return time.perf_counter() - started

    stage(1)  # the first outputs: to-kafka creates the topics and registers the schemas
    argv = [
        str(Path(sys.executable).with_name("zync")), "run", str(config), "--only", "to-kafka",
        "--lake", str(work / "deliver-lake"), "--no-api",
    ]
    err = (work / "deliver.err").open("wb")
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, env=stack.env(), stdout=err, stderr=err)
    consumer = Consumer(
        {
            "bootstrap.servers": stack.bootstrap,
            "group.id": f"bench-deliver-{time.time_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    seen = 0

    def until(expected: int, what: str) -> None:
        nonlocal seen
        deadline = time.monotonic() + 900
        while seen < expected:
            if time.monotonic() > deadline:
                raise SystemExit(f"{what}: {seen} of {expected} outputs after 900 s")
            if proc.poll() is not None:
                raise SystemExit(f"zync run exited with {proc.returncode}: {(work / 'deliver.err').read_text()[-2000:]}")
            for message in consumer.consume(1000, timeout=0.05):
                if message.error() is None:
                    seen += 1

    try:
        admin = admin_client(stack.profile)
        while not set(outputs) <= set(admin.list_topics(timeout=10).topics):
            if time.monotonic() - started > 900:
                raise SystemExit("to-kafka did not create every output topic within 900 s")
            if proc.poll() is not None:
                raise SystemExit(f"zync run exited with {proc.returncode}: {(work / 'deliver.err').read_text()[-2000:]}")
            time.sleep(0.5)
        consumer.assign([TopicPartition(t, 0, 0) for t in outputs])
        until(tables, "the first pass")
        print(f"deliver: {tables} outputs started and delivered the first pass {time.monotonic() - started:.1f} s after start", flush=True)
        time.sleep(2.0)  # every delivery idle
        cpu, wall = _process_cpu(proc.pid), time.monotonic()
        time.sleep(10.0)
        idle = (_process_cpu(proc.pid) - cpu) / (time.monotonic() - wall)
        print(f"deliver: idle, {tables} outputs: {_threads(proc.pid)} threads, {idle * 100:.0f} % of a core", flush=True)
        times = []
        for k in range(args.runs):
            pass_seconds = stage(per)
            committed = time.monotonic()
            until(tables * (1 + per * (k + 1)), f"pass {k}")
            times.append(time.monotonic() - committed)
            print(f"  deliver pass {k}: ETL pass {pass_seconds:.2f} s, commit -> all {tables * per} visible {times[-1]:.2f} s", flush=True)
        print(
            f"deliver: ETL commit of {tables * per} outputs over {tables} topics -> all visible: "
            f"median {statistics.median(times):.2f} s ({', '.join(f'{t:.2f}' for t in times)})",
            flush=True,
        )
    finally:
        _stop(proc)
        consumer.close()
        err.close()


def main() -> None:
    from bench.stopping import stop_on_sigterm

    stop_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--columns", type=int, default=60)
    parser.add_argument("--format", choices=("avro", "json"), default="avro")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--phases", default="ingest,etl,run")
    parser.add_argument("--outputs", type=int, default=400, help="deliver: output topics")
    parser.add_argument("--per-output", type=int, default=3, help="deliver: outputs per topic per pass")
    args = parser.parse_args()
    phases = set(args.phases.split(","))
    logging.getLogger("engine.kafka.librdkafka").setLevel(logging.ERROR)

    from engine.local import broker, processes, registry

    print(
        f"{args.tables} tables x {args.columns} columns x {args.events} events, {args.format}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="zync-bench-width-") as tmp:
        work = Path(tmp)
        if phases & {"ingest", "run", "deliver"}:
            broker_proc = broker.start_broker(work / "broker", port=0, timeout=60)
            registry_proc = registry.start_registry(work / "registry", port=0, timeout=60)
        try:
            if phases & {"ingest", "run"}:
                stack = Stack(broker_proc.address, registry_proc.address, work)
                topics = {
                    wide.topic(t): [wide.change(t, n, columns=args.columns) for n in range(args.events)]
                    for t in range(args.tables)
                }
                schemas = {
                    wide.topic(t): (wide.key_schema(t), wide.value_schema(t, args.columns))
                    for t in range(args.tables)
                }
                one = [wide.change(0, n, columns=args.columns) for n in range(args.events * args.tables)]
                schemas[ONE] = schemas[wide.topic(0)]
                started = time.monotonic()
                produce(stack, {**topics, ONE: one}, args.format, schemas)
                n = args.events * args.tables
                print(f"produced {2 * n:,} events in {time.monotonic() - started:.1f} s", flush=True)
                config = write_config(work, wide.pass_through_config(args.tables), "wide")
                one_config = write_config(
                    work,
                    {"name": "one", "inputs": [{"topic": ONE, "pool": "Raw"}], "outputs": [],
                     "transforms": []},
                    "one",
                )
            if "ingest" in phases:
                times: dict[str, list[float]] = {"wide": [], "one": []}
                for k in range(args.runs):
                    order = ("wide", "one") if k % 2 == 0 else ("one", "wide")
                    for label in order:
                        path = config if label == "wide" else one_config
                        pool = work / f"ingest-{label}-{k}" / "Raw"
                        times[label].append(ingest(stack, path, pool, n, f"ingest-{label}-{k}"))
                w, o = statistics.median(times["wide"]), statistics.median(times["one"])
                print(f"from-kafka, {args.tables} topics: {w:.2f} s, {n / w:,.0f} records/s", flush=True)
                print(f"from-kafka, 1 topic: {o:.2f} s, {n / o:,.0f} records/s", flush=True)
                print(f"from-kafka wide / one topic: {o / w:.2f} (bar >= 0.8)", flush=True)
            if "etl" in phases:
                etl_passes(args, work)
            if "deliver" in phases:
                deliver_latency(Stack(broker_proc.address, registry_proc.address, work), args, work)
            if "run" in phases:
                outputs = [f"clean.t{t:03d}" for t in range(args.tables)]
                first, whole = first_output(stack, config, work, outputs, n)
                print(f"zync run: first output {first:.1f} s after start (bar <= 20 s), all {n:,} outputs after {whole:.1f} s", flush=True)
        finally:
            if phases & {"ingest", "run", "deliver"}:
                processes.stop_process(registry_proc)
                processes.stop_process(broker_proc)
        print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
