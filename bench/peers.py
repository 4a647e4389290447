"""Benchmark: `zync from-kafka` against Spark Structured Streaming, a batch-decode ceiling
and the physical floors of this machine; and plain JSON records against Avro.

    .venv/bin/python bench/peers.py [--records 1000000] [--partitions 3] [--runs 3]

1. Starts a private broker and Schema Registry (engine.local, free ports, a temporary
   directory; both stopped by PID at the end).
2. Produces N Debezium-like change events (Avro in the Confluent wire format, schemas
   registered; bench/avro_records.py, ~185-byte values, Avro keys) to a 1-partition topic
   and, when ``--partitions`` > 1, to a P-partition topic; and **the same records as plain
   JSON** (each key and value the JSON text zync stores for its Avro record, ~560-byte
   values) to a 1-partition topic.
3. Per topic, ``--runs`` times (the order alternates from run to run), each timed from
   the start of its process until its Delta table holds the N records (its Delta log's
   live files add up to N rows; every table polled alike every 20 ms):

   a. **zync**: ``zync from-kafka -t TOPIC -p POOL --lake LAKE --create-pool
      --exit-after 2s --quiet``, the CLI as a user runs it (the idle exit only ends the
      process after the measurement);
   b. **zync, JSON** (1-partition round only): the same command on the JSON topic;
   c. **Spark SS**: bench/peers_spark.py ``ingest``, a Structured Streaming query
      (Kafka source, ``from_avro`` of key and value after the 5-byte header with the
      registered schemas, Delta sink with a checkpoint, ``trigger(availableNow=True)``)
      in its own process; its session comes from ``engine.spark.get_spark``, so the jars
      and settings are zync's own (local[2] unless $ZYNC_SPARK_MASTER says otherwise).

   After each run both tables must hold the same records: the same set of
   (partition, offset), and per record the same decoded key and value (compared as
   canonical JSON: zync's JSON text parsed, Spark's structs with decimals as text); and
   the JSON pool the very JSON texts of the Avro pool, offset by offset.
4. On the 1-partition topic, ``--runs`` times each: the **producer alone** (the same
   records to a fresh topic), **librdkafka consume alone** (no decode), the **ceiling**:
   consume + one ``polars.read_avro`` per batch (a batch's key bodies, and its value
   bodies, joined into one Avro container each; no lake; checked: N keys and values, the
   keys' IDs add up), and a **warm Spark job** over a cached frame of the N decoded rows
   (bench/peers_spark.py ``floor``). The ceiling is measured between the ingests of
   each round, so from-kafka / ceiling compares runs under the same load.

Every figure is the median of the runs, and every ratio the median of each round's
ratio. Prints one line per figure with the load average, then from-kafka / ceiling (bar
>= 0.7), JSON / Avro (bar >= 0.7) and, last, zync / Spark SS per topic (bar >= 2.0).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.avro_records import DISTINCT, encoded_records, mean_size, produce  # noqa: E402 - after the sys.path line that runs it from a checkout
from engine.kafka.codecs.avro_binary import PRIMITIVES, zigzag_long  # noqa: E402 - after the sys.path line

SPARK_PROGRAM = ROOT / "bench" / "peers_spark.py"
TIMEOUT = 1800.0
POLL = 0.02
BATCH = 100_000  # records per ceiling batch: from-kafka's default commit size
JSON_TOPIC = "bench.peers.json.p1"


@dataclass
class Stack:
    """The private broker and registry, and where the runs keep their files."""

    bootstrap: str
    registry: str
    work: Path

    @property
    def profile(self) -> Any:
        from engine.settings.kafka import KafkaProfile

        return KafkaProfile(bootstrap_servers=self.bootstrap)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "ZYNC_HOME": str(self.work / "home"),
                "ZYNC_KAFKA_BOOTSTRAP_SERVERS": self.bootstrap,
                "ZYNC_REGISTRY_URL": self.registry,
            }
        )
        return env


# ------------------------------------------------------------------ Delta log rows


class LogRows:
    """The rows a Delta table holds: the ``numRecords`` statistics of its live files,
    from the add and remove actions of its commit files. Each call reads only the commit
    files written since the previous one; no table is loaded."""

    def __init__(self, table: Path) -> None:
        self.log = table / "_delta_log"
        self.next_version = 0
        self.files: dict[str, int] = {}

    def rows(self) -> int:
        while True:
            commit = self.log / f"{self.next_version:020d}.json"
            try:
                text = commit.read_text()
            except FileNotFoundError:
                break
            actions = []
            try:
                actions = [json.loads(line) for line in text.splitlines() if line.strip()]
            except json.JSONDecodeError:
                break  # still being written: read it again next time
            for action in actions:
                if "add" in action:
                    stats = json.loads(action["add"].get("stats") or "{}")
                    if "numRecords" not in stats:
                        raise SystemExit(f"{commit}: an add action without numRecords")
                    self.files[action["add"]["path"]] = int(stats["numRecords"])
                elif "remove" in action:
                    self.files.pop(action["remove"]["path"], None)
            self.next_version += 1
        return sum(self.files.values())


def timed_until_full(
    label: str, argv: list[str], env: dict[str, str], table: Path, n: int, logs: Path
) -> tuple[float, Path]:
    """Start ``argv`` and return the seconds from its start until ``table`` holds ``n``
    rows (then let it exit by itself), and the file its stdout went to."""
    out, err = logs / f"{label}.out", logs / f"{label}.err"
    log_rows = LogRows(table)
    with out.open("wb") as stdout, err.open("wb") as stderr:
        started = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=stdout, stderr=stderr, start_new_session=True
        )
        try:
            while (rows := log_rows.rows()) < n:
                code = proc.poll()
                if code is not None and log_rows.rows() < n:
                    raise SystemExit(
                        f"{label} exited with {code} holding {rows:,} of {n:,} rows:\n"
                        f"{_tail(err)}"
                    )
                if time.monotonic() - started > TIMEOUT:
                    raise SystemExit(f"{label}: {rows:,} of {n:,} rows after {TIMEOUT:.0f}s")
                time.sleep(POLL)
            seconds = time.monotonic() - started
            if rows != n:
                raise SystemExit(f"{label}: the table holds {rows:,} rows, expected {n:,}")
            code = proc.wait(300)
            if code != 0:
                raise SystemExit(f"{label} exited with {code}:\n{_tail(err)}")
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
    return seconds, out


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


# ---------------------------------------------------------------- the two ingests


def json_records(keys: list[bytes], values: list[bytes], registry: str) -> tuple[list[bytes], list[bytes]]:
    """The Avro keys and values as plain JSON: each the JSON text zync stores for it."""
    from engine.kafka.codecs.decoder import RecordDecoder
    from engine.kafka.codecs.formats import Format
    from engine.kafka.registry_client import RegistrySchemas
    from engine.settings.registry import RegistryProfile

    decoder = RecordDecoder(Format.AVRO, RegistrySchemas(RegistryProfile(url=registry)))

    def text(data: bytes) -> bytes:
        return (decoder.decode_json(data) or "").encode()

    return [text(k) for k in keys], [text(v) for v in values]


def run_zync(stack: Stack, topic: str, n: int, label: str) -> tuple[float, Path]:
    lake = stack.work / "lake"
    pool = f"bench_{label}"
    argv = [
        str(Path(sys.executable).with_name("zync")), "from-kafka", "-t", topic, "-p", pool,
        "--lake", str(lake), "--create-pool", "--exit-after", "2s", "--quiet",
    ]
    seconds, _ = timed_until_full(f"zync-{label}", argv, stack.env(), lake / pool, n, stack.work)
    return seconds, lake / pool


def run_spark(stack: Stack, topic: str, n: int, label: str) -> tuple[float, Path, dict[str, float]]:
    table = stack.work / "spark" / label
    argv = [
        sys.executable, str(SPARK_PROGRAM), "ingest", "--bootstrap", stack.bootstrap,
        "--registry", stack.registry, "--topic", topic, "--table", str(table),
        "--checkpoint", str(stack.work / "spark" / f"{label}.checkpoint"),
    ]
    seconds, out = timed_until_full(f"spark-{label}", argv, stack.env(), table, n, stack.work)
    return seconds, table, json.loads(out.read_text().strip().splitlines()[-1])


# ------------------------------------------------------------------ the same rows


def _canonical(value: Any) -> Any:
    """Spark's decoded values in the JSON form zync writes (decimals as plain text)."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, Decimal):
        return format(value, "f")
    return value


def _digest(key: Any, value: Any) -> bytes:
    text = json.dumps([key, value], sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=12).digest()


def zync_records(pool: Path) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> digest of the decoded key and value, from the raw pool."""
    from deltalake import DeltaTable

    table = DeltaTable(str(pool)).to_pyarrow_table(columns=["kafka", "key", "value", "deadletter"])
    if table.column("deadletter").null_count != table.num_rows:
        raise SystemExit(f"{pool}: dead letters in the pool")
    kafka = table.column("kafka").combine_chunks()
    partitions = kafka.field("partition").to_pylist()
    offsets = kafka.field("offset").to_pylist()
    loads = json.loads
    return {
        (p, o): _digest(loads(k), loads(v))
        for p, o, k, v in zip(
            partitions, offsets, table.column("key").to_pylist(), table.column("value").to_pylist(),
            strict=True,
        )
    }


def spark_records(table_dir: Path) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> digest of the decoded key and value, from Spark's table."""
    from deltalake import DeltaTable

    table = DeltaTable(str(table_dir)).to_pyarrow_table(columns=["partition", "offset", "key", "value"])
    return {
        (p, o): _digest(_canonical(k), _canonical(v))
        for p, o, k, v in zip(
            table.column("partition").to_pylist(), table.column("offset").to_pylist(),
            table.column("key").to_pylist(), table.column("value").to_pylist(),
            strict=True,
        )
    }


def same_records(pool: Path, table: Path, n: int) -> None:
    """Raise SystemExit unless both tables hold the same n records."""
    ours, theirs = zync_records(pool), spark_records(table)
    if len(ours) != n or len(theirs) != n:
        raise SystemExit(f"distinct (partition, offset): zync {len(ours):,}, Spark {len(theirs):,}")
    if ours.keys() != theirs.keys():
        raise SystemExit("zync and Spark hold different (partition, offset) sets")
    differ = [tp for tp, digest in ours.items() if theirs[tp] != digest]
    if differ:
        raise SystemExit(f"{len(differ):,} records decode differently, e.g. at {sorted(differ)[:3]}")


# ---------------------------------------------------------------- floors, ceiling


def consume_floor(stack: Stack, topic: str, n: int) -> float:
    """Seconds librdkafka (zync's consumer settings) takes to hand over n records."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    from engine.kafka import clients

    consumer = clients.consumer(stack.profile, group="bench-consume")
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    started = time.monotonic()
    while got < n:
        got += sum(1 for m in consumer.consume(BATCH, 1.0) if m.error() is None)
        if time.monotonic() - started > TIMEOUT:
            raise SystemExit(f"consume: only {got:,} records after {TIMEOUT:.0f}s")
    seconds = time.monotonic() - started
    consumer.close()
    return seconds


_SYNC = b"bench-peers-sync"
_SCHEMA_KEYS = frozenset(
    {"type", "name", "fields", "items", "values", "symbols", "size", "logicalType", "precision", "scale"}
)


def polars_schema(schema: Any) -> Any:
    """The schema as polars' Avro reader takes it: named types expanded in place,
    primitives bare, no defaults and no extra attributes (Connect's ``connect.*``)."""
    if isinstance(schema, list):
        return [polars_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if schema["type"] in PRIMITIVES and "logicalType" not in schema:
        return schema["type"]
    out = {k: v for k, v in schema.items() if k in _SCHEMA_KEYS}
    if "fields" in out:
        out["fields"] = [{"name": f["name"], "type": polars_schema(f["type"])} for f in out["fields"]]
    for k in ("type", "items", "values"):
        if k in out and not isinstance(out[k], str):
            out[k] = polars_schema(out[k])
    return out


def avro_container(schema: str, bodies: list[bytes]) -> bytes:
    """One Avro object container file: the header and one block holding ``bodies``."""
    meta = {b"avro.schema": schema.encode(), b"avro.codec": b"null"}
    out = bytearray(b"Obj\x01")
    out += zigzag_long(len(meta))
    for k, v in meta.items():
        out += zigzag_long(len(k)) + k + zigzag_long(len(v)) + v
    out += zigzag_long(0) + _SYNC
    block = b"".join(bodies)
    out += zigzag_long(len(bodies)) + zigzag_long(len(block)) + block + _SYNC
    return bytes(out)


def ceiling(stack: Stack, topic: str, n: int) -> float:
    """Seconds to consume n records and decode their keys and values with polars' Avro
    reader, one container per batch and schema id; checks what was decoded."""
    # deferred, like every client and codec import here: only the measurements need them
    import fastavro
    import polars as pl
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    from engine.kafka import clients

    schemas: dict[int, str] = {}

    def schema(schema_id: int) -> str:
        if schema_id not in schemas:
            with urllib.request.urlopen(f"{stack.registry}/schemas/ids/{schema_id}") as response:
                registered = json.loads(json.load(response)["schema"])
            expanded = fastavro.parse_schema(registered, expand=True)
            schemas[schema_id] = json.dumps(polars_schema(expanded))
        return schemas[schema_id]

    def decode(parts: list[bytes]) -> list[pl.DataFrame]:
        by_id: dict[int, list[bytes]] = {}
        for part in parts:
            by_id.setdefault(int.from_bytes(part[1:5], "big"), []).append(part[5:])
        return [
            pl.read_avro(io.BytesIO(avro_container(schema(sid), bodies)))
            for sid, bodies in by_id.items()
        ]

    consumer = clients.consumer(stack.profile, group="bench-ceiling")
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, key_rows, value_rows, key_sum, updates = 0, 0, 0, 0, 0
    started = time.monotonic()
    while got < n:
        messages = [m for m in consumer.consume(BATCH, 1.0) if m.error() is None]
        if not messages:
            if time.monotonic() - started > TIMEOUT:
                raise SystemExit(f"ceiling: only {got:,} records after {TIMEOUT:.0f}s")
            continue
        got += len(messages)
        for frame in decode([m.key() for m in messages]):
            key_rows += frame.height
            key_sum += int(frame["ID"].sum())
        for frame in decode([m.value() for m in messages]):
            value_rows += frame.height
            updates += int((frame["op"] == "u").sum())
    seconds = time.monotonic() - started
    consumer.close()
    expected = sum(range(DISTINCT)) * (n // DISTINCT) + sum(range(n % DISTINCT))
    if (key_rows, value_rows, key_sum, updates) != (n, n, expected, n):
        raise SystemExit(
            f"ceiling decoded {key_rows:,} keys (IDs add up to {key_sum:,}, expected "
            f"{expected:,}) and {value_rows:,} values ({updates:,} updates) of {n:,} records"
        )
    return seconds


def spark_floor(stack: Stack, table: Path, n: int, runs: int) -> float:
    out = subprocess.run(
        [sys.executable, str(SPARK_PROGRAM), "floor", "--table", str(table), "--runs", str(runs)],
        cwd=ROOT, env=stack.env(), capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"the Spark floor failed:\n{out.stderr[-3000:]}")
    report = json.loads(out.stdout.strip().splitlines()[-1])
    if report["rows"] != n:
        raise SystemExit(f"the Spark floor read {report['rows']:,} rows, expected {n:,}")
    return statistics.median(report["seconds"])


# ------------------------------------------------------------------------- main


def _median(times: list[float]) -> float:
    return statistics.median(times)


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f} records/s ({seconds:.2f}s)"


def _repeat(runs: int, measure: Callable[[int], float]) -> float:
    return _median([measure(k) for k in range(runs)])


@dataclass
class Rounds:
    """Each round's seconds per leg, the load average when each leg started, and one
    table Spark wrote (None without Spark)."""

    seconds: list[dict[str, float]]
    loads: list[dict[str, float]]
    spark_table: Path | None = None

    def median(self, leg: str) -> float:
        return _median([r[leg] for r in self.seconds])

    def ratio(self, faster: str, slower: str) -> float:
        """The median over the rounds of ``faster``'s rate / ``slower``'s: same-run ratios."""
        return _median([r[slower] / r[faster] for r in self.seconds])

    def load_range(self) -> str:
        values = [x for r in self.loads for x in r.values()]
        return f"{min(values):.1f}–{max(values):.1f}"


def compare(
    stack: Stack,
    topic: str,
    partitions: int,
    n: int,
    runs: int,
    *,
    json_topic: str | None = None,
    with_ceiling: bool = False,
    with_spark: bool = True,
) -> Rounds:
    """zync (and Spark SS, the JSON topic's zync, the ceiling) on ``topic``, ``runs``
    rounds, the order of the legs reversed every other round; checks each round's tables
    hold the same records."""
    out = Rounds([], [])
    for k in range(runs):
        label = f"p{partitions}-r{k + 1}"
        pools: dict[str, Path] = {}
        inside: dict[str, float] = {}

        def zync_leg(leg: str, on: str, label: str = label, pools: dict[str, Path] = pools) -> float:
            seconds, pools[leg] = run_zync(stack, on, n, f"{label}-{leg}")
            return seconds

        def spark_leg(label: str = label, inside: dict[str, float] = inside) -> float:
            seconds, out.spark_table, report = run_spark(stack, topic, n, label)
            inside.update(report)
            return seconds

        legs: dict[str, Callable[[], float]] = {}
        if with_ceiling:
            legs["ceiling"] = lambda: ceiling(stack, topic, n)
        legs["zync"] = lambda: zync_leg("zync", topic)
        if json_topic is not None:
            legs["json"] = lambda: zync_leg("json", json_topic)
        if with_spark:
            legs["spark"] = spark_leg
        order = list(legs) if k % 2 == 0 else list(reversed(legs))
        seconds: dict[str, float] = {}
        loads: dict[str, float] = {}
        for leg in order:
            loads[leg] = os.getloadavg()[0]
            seconds[leg] = legs[leg]()
        out.seconds.append(seconds)
        out.loads.append(loads)
        checked = []
        if with_spark:
            assert out.spark_table is not None
            same_records(pools["zync"], out.spark_table, n)
            checked.append("zync and Spark SS: the same (partition, offset, decoded key and value)")
        if json_topic is not None:
            same_texts(pools["zync"], pools["json"], n)
            checked.append("JSON and Avro pools: the same JSON texts")
        figures = ", ".join(
            f"{_LEG_NAMES[leg]} {seconds[leg]:.2f}s (load {loads[leg]:.1f})" for leg in order
        )
        spark = (
            f" (Spark session {inside['session_s']:.1f}s, query {inside['query_s']:.1f}s)"
            if inside else ""
        )
        ratios = []
        if with_ceiling:
            ratios.append(f"from-kafka / ceiling {seconds['ceiling'] / seconds['zync']:.2f}")
        if json_topic is not None:
            ratios.append(f"JSON / Avro {seconds['zync'] / seconds['json']:.2f}")
        print(
            f"  run {k + 1}/{runs}, {partitions} partition(s): {figures}{spark}"
            + (f"; {', '.join(ratios)}" if ratios else "")
            + (f"; {'; '.join(checked)}" if checked else ""),
            flush=True,
        )
    return out


_LEG_NAMES = {"ceiling": "ceiling", "zync": "zync", "json": "zync JSON", "spark": "Spark SS"}


def same_texts(avro_pool: Path, json_pool: Path, n: int) -> None:
    """Raise SystemExit unless both pools hold the same n JSON keys and values by offset."""
    from deltalake import DeltaTable

    def texts(pool: Path) -> Any:
        table = DeltaTable(str(pool)).to_pyarrow_table(columns=["kafka", "key", "value"])
        offsets = table.column("kafka").combine_chunks().field("offset")
        return table.append_column("offset", offsets).sort_by("offset").select(["offset", "key", "value"])

    avro, plain = texts(avro_pool), texts(json_pool)
    if avro.num_rows != n or not avro.equals(plain):
        raise SystemExit(f"the JSON pool {json_pool.name} does not hold the Avro pool's texts")


def main() -> None:
    from bench.stopping import stop_on_sigterm

    stop_on_sigterm()  # a killed run still stops its broker and registry
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-spark", action="store_true",
                        help="leave out Spark SS and the warm Spark job (the from-kafka figures only)")
    args = parser.parse_args()
    n, runs = args.records, args.runs
    # librdkafka's transient warnings (a coordinator still loading) would clutter the figures
    logging.getLogger("engine.kafka.librdkafka").setLevel(logging.ERROR)

    from engine.kafka.registry_client import RegistrySchemas
    from engine.local import broker, processes, registry
    from engine.settings.registry import RegistryProfile
    from tests.fixtures import debezium as dbz

    with tempfile.TemporaryDirectory(prefix="zync-bench-peers-") as tmp:
        work = Path(tmp)
        broker_proc = broker.start_broker(work / "broker", port=0, timeout=60)
        registry_proc = registry.start_registry(work / "registry", port=0, timeout=60)
        try:
            stack = Stack(broker_proc.address, registry_proc.address, work)
            schemas = RegistrySchemas(RegistryProfile(url=registry_proc.address))
            topics = {1: "bench.peers.p1"}
            if args.partitions > 1:
                topics[args.partitions] = f"bench.peers.p{args.partitions}"
            records: dict[str, tuple[list[bytes], list[bytes]]] = {}
            for topic in [*topics.values(), *(f"bench.peers.producer{k}" for k in range(runs))]:
                value_id = schemas.register(f"{topic}-value", dbz.AVRO_VALUE_SCHEMA)
                key_id = schemas.register(f"{topic}-key", dbz.AVRO_KEY_SCHEMA)
                records[topic] = encoded_records(value_id, key_id)
            keys, values = records[topics[1]]
            print(
                f"{n:,} Debezium-like Avro records (values ~{mean_size(values):.0f} B, keys "
                f"~{mean_size(keys):.0f} B, {DISTINCT:,} distinct), "
                f"topics of {', '.join(str(p) for p in topics)} partition(s)",
                flush=True,
            )
            for partitions, topic in topics.items():
                produce(stack.profile, topic, n, *records[topic], partitions=partitions)
            produce(stack.profile, JSON_TOPIC, n, *json_records(*records[topics[1]], stack.registry))
            json_keys, json_values = json_records(keys[:1], values[:1], stack.registry)
            print(
                f"the same records as plain JSON (values ~{len(json_values[0])} B), 1 partition",
                flush=True,
            )

            produced = _repeat(
                runs,
                lambda k: produce(stack.profile, f"bench.peers.producer{k}", n,
                                  *records[f"bench.peers.producer{k}"]),
            )
            print(f"producer alone (1 partition): {_rate(n, produced)}", flush=True)
            consumed = _repeat(runs, lambda k: consume_floor(stack, topics[1], n))
            print(f"librdkafka consume alone, no decode (1 partition): {_rate(n, consumed)}", flush=True)

            results: dict[int, Rounds] = {}
            for partitions, topic in topics.items():
                one = partitions == 1
                results[partitions] = compare(
                    stack, topic, partitions, n, runs, json_topic=JSON_TOPIC if one else None,
                    with_ceiling=one, with_spark=not args.no_spark,
                )  # fmt: skip
                rounds = results[partitions]
                where = f"{partitions} partition(s), from process start; load {rounds.load_range()}"
                if one:
                    print(
                        f"ceiling: consume + polars batch decode of keys and values, no lake "
                        f"(1 partition): {_rate(n, rounds.median('ceiling'))}",
                        flush=True,
                    )
                print(f"zync from-kafka ({where}): {_rate(n, rounds.median('zync'))}", flush=True)
                if one:
                    print(f"zync from-kafka, JSON ({where}): {_rate(n, rounds.median('json'))}", flush=True)
                if not args.no_spark:
                    print(f"Spark SS ({where}): {_rate(n, rounds.median('spark'))}", flush=True)

            if not args.no_spark:
                assert results[1].spark_table is not None
                warm = spark_floor(stack, results[1].spark_table, n, runs)
                print(
                    f"warm Spark job over a cached frame of {n:,} rows (sum of one column): "
                    f"{warm:.3f}s ({n / warm:,.0f} rows/s)",
                    flush=True,
                )
            print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
            one = results[1]
            print(
                f"from-kafka / ceiling (1 partition, median of the rounds' ratios): "
                f"{one.ratio('zync', 'ceiling'):.2f} (bar >= 0.7)"
            )
            print(
                f"from-kafka JSON / Avro (the same records, median of the rounds' ratios): "
                f"{one.ratio('json', 'zync'):.2f} (bar >= 0.7)"
            )
            if not args.no_spark:
                ratios = ", ".join(
                    f"{p} partition(s) {r.ratio('zync', 'spark'):.2f}" for p, r in results.items()
                )
                print(f"zync / Spark SS: {ratios} (bar >= 2.0)")
        finally:
            processes.stop_process(registry_proc)
            processes.stop_process(broker_proc)


if __name__ == "__main__":
    main()
