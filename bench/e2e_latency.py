"""Benchmark: end-to-end latency of a CDC pipeline, produce → visible on the output topic
and in the configuration's table.

    .venv/bin/python bench/e2e_latency.py [--pairs 60] [--rates 2,50] [--etl-interval 0.1]

1. Starts a private Apache Kafka broker and Schema Registry (engine.local, free ports on
   127.0.0.1, stopped by PID at the end) and a lake in a temporary directory.
2. Produces one invoice + status pair (Debezium change events in Avro, with
   confluent-kafka's AvroSerializer and the registry), then starts ``zync run
   demo/invoices/etl.yaml`` as a subprocess and times, from that start, until the pair's
   denormalized invoice is visible on ``NewInvoices`` to a ``read_committed`` consumer:
   **first output after start**.
3. For each rate (pairs per second), produces N pairs at a steady pace (invoice, then its
   status); a pair's latency is from the moment its status was produced (the pair is
   complete) to the moment its output is visible. Prints p50, p95 and max per rate.
4. The same for the demo's ``invoices`` table, kept by ``zync run``'s apply loop: a
   reader polling the table's Delta log (delta-rs, every 20 ms) notes when each
   invoice's row appears (its change feed).

With ``--api PORT`` the ``zync run`` serves its API on 127.0.0.1:PORT (a token in
``$ZYNC_CONTROL_TOKEN``), ``--scrape`` scrapes its /metrics every second and prints the
scrapes' p95, ``--hostile`` keeps a hostile client at it (bench/api_load.py: rounds of
1,000 concurrent scrapes, malformed requests, a slowloris connection) while the rates
are measured; ``--no-api`` runs ``zync run --no-api`` (no socket, no port), to weigh
the API's cost.

Every output is checked: one per pair, with the right customer and status, none twice;
so is every table row. The bars (issues "Latency III" and 37): p50 <= 1 s and p95 <= 2 s
at both rates on the topic, first output <= 10 s after start; p50 <= 2 s in the table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # bench.* when run as a script from anywhere
CONFIG = ROOT / "demo" / "invoices" / "etl.yaml"

SOURCE = {
    "type": "record",
    "name": "Source",
    "namespace": "io.debezium.connector.postgresql",
    "fields": [
        {"name": "connector", "type": "string"},
        {"name": "name", "type": "string"},
        {"name": "ts_ms", "type": "long"},
        {"name": "table", "type": "string"},
    ],
}


def _envelope(table: str, row_fields: list[dict[str, Any]]) -> dict[str, Any]:
    row = {"type": "record", "name": "Value", "namespace": f"shop.public.{table}", "fields": row_fields}
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": f"shop.public.{table}",
        "fields": [
            {"name": "before", "type": ["null", row], "default": None},
            {"name": "after", "type": ["null", f"shop.public.{table}.Value"], "default": None},
            {"name": "source", "type": SOURCE},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
        ],
    }


INVOICE = _envelope(
    "Invoices",
    [
        {"name": "ID", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "item", "type": "string"},
    ],
)
STATUS = _envelope(
    "InvoiceStatus",
    [
        {"name": "ID", "type": "long"},
        {"name": "InvoiceID", "type": "long"},
        {"name": "status", "type": "string"},
    ],
)
KEY = {"type": "record", "name": "Key", "namespace": "shop", "fields": [{"name": "ID", "type": "long"}]}


class Producer:
    """Debezium-shaped Avro change events through confluent-kafka's serializers."""

    def __init__(self, bootstrap: str, registry_url: str) -> None:
        import json

        from confluent_kafka import Producer as KafkaProducer
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        client = SchemaRegistryClient({"url": registry_url})
        self._ctx = SerializationContext
        self._field = MessageField
        from bench.width import TOPIC_SUBJECTS as topic_subjects  # as Kafka Connect names them

        self._key = AvroSerializer(client, json.dumps(KEY), conf=topic_subjects)
        self._values = {
            "Invoices": AvroSerializer(client, json.dumps(INVOICE), conf=topic_subjects),
            "InvoiceStatus": AvroSerializer(client, json.dumps(STATUS), conf=topic_subjects),
        }
        self._producer = KafkaProducer(
            {"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True}
        )
        #: when each pair's status was produced (time.monotonic)
        self.produced: dict[int, float] = {}

    def _send(self, topic: str, key: int, after: dict[str, Any]) -> None:
        now = int(time.time() * 1000)
        value = {
            "before": None,
            "after": after,
            "source": {"connector": "postgresql", "name": "shop", "ts_ms": now, "table": topic},
            "op": "c",
            "ts_ms": now,
        }
        self._producer.produce(
            topic,
            key=self._key({"ID": key}, self._ctx(topic, self._field.KEY)),
            value=self._values[topic](value, self._ctx(topic, self._field.VALUE)),
        )

    def pair(self, invoice: int) -> float:
        """An invoice and its first status; returns when the status was produced."""
        self._send("Invoices", invoice, {"ID": invoice, "customer": f"c{invoice}", "item": "taco"})
        self._send(
            "InvoiceStatus", 10_000_000 + invoice,
            {"ID": 10_000_000 + invoice, "InvoiceID": invoice, "status": "pending"},
        )  # fmt: skip
        self._producer.flush(30)
        self.produced[invoice] = done = time.monotonic()
        return done


class Watcher(threading.Thread):
    """A read_committed consumer of the output topic noting when each invoice shows."""

    def __init__(self, bootstrap: str, registry_url: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        self._deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
        self.bootstrap = bootstrap
        self.seen: dict[int, float] = {}
        self.values: dict[int, list[dict[str, Any]]] = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.serialization import MessageField, SerializationContext

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"e2e-{os.getpid()}",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        consumer.subscribe(["NewInvoices"])
        try:
            while not self.stop.is_set():
                message = consumer.poll(0.05)
                if message is None or message.error() is not None:
                    continue
                now = time.monotonic()
                ctx = SerializationContext("NewInvoices", MessageField.VALUE)
                value = self._deserializer(message.value(), ctx)
                invoice = int(value["ID"])
                with self.lock:
                    self.seen.setdefault(invoice, now)
                    self.values.setdefault(invoice, []).append(value)
        finally:
            consumer.close()

    def wait_for(self, invoices: list[int], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if all(i in self.seen for i in invoices):
                    return True
            time.sleep(0.01)
        return False


class TableWatcher(threading.Thread):
    """A reader of the table's Delta log noting when each invoice's row appears."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.seen: dict[int, float] = {}
        self.rows: dict[int, dict[str, Any]] = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        import pyarrow as pa
        from deltalake import DeltaTable

        table = None
        last = 0  # version 0 creates the table: its rows come from version 1 on
        while not self.stop.wait(0.02):
            if table is None:
                if not DeltaTable.is_deltatable(str(self.path)):
                    continue
                table = DeltaTable(str(self.path))
            table.update_incremental()
            version = table.version()
            if version <= last:
                continue
            now = time.monotonic()
            feed = pa.RecordBatchReader.from_stream(
                table.load_cdf(starting_version=last + 1, ending_version=version)
            ).read_all()
            last = version
            with self.lock:
                for row in feed.to_pylist():
                    if row["_change_type"] in ("insert", "update_postimage"):
                        self.seen.setdefault(int(row["ID"]), now)
                        self.rows[int(row["ID"])] = row

    def wait_for(self, invoices: list[int], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if all(i in self.seen for i in invoices):
                    return True
            time.sleep(0.01)
        return False


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _print_passes(log: str) -> None:
    """The ETL passes `zync run` reported (``etl  pass: ... (0.42s)``), which ran while
    from-kafka and to-kafka did: the first (cold) one and the median/p95 of the rest."""
    import re

    seconds = [float(m) for m in re.findall(r"\betl\s+pass: .*\((\d+\.\d+)s\)", log)]
    if not seconds:
        print("ETL passes: none reported")
        return
    rest = seconds[1:] or seconds
    print(
        f"ETL passes with outputs: {len(seconds)}; first {seconds[0]:.2f} s; the others "
        f"median {statistics.median(rest):.2f} s, p95 {_percentile(rest, 0.95):.2f} s, "
        f"max {max(rest):.2f} s"
    )


def _commit_times(
    pool: Path, invoice_of: Any, columns: tuple[str, ...] = ("kafka", "key", "value")
) -> dict[int, float]:
    """For each invoice, the wall-clock time of the first commit of ``pool`` (its Delta
    log's ``commitInfo.timestamp``) holding a row that ``invoice_of(row)`` names it in
    (a pool, or a table: ``columns``)."""
    import json

    import pyarrow.parquet as pq

    found: dict[int, float] = {}
    for commit in sorted((pool / "_delta_log").glob("*.json")):
        at, paths = None, []
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                at = action["commitInfo"]["timestamp"] / 1000
            elif "add" in action:
                paths.append(action["add"]["path"])
        if at is None:
            continue
        for path in paths:
            for row in pq.read_table(pool / path, columns=list(columns)).to_pylist():
                invoice = invoice_of(row)
                if invoice is not None:
                    found.setdefault(invoice, at)
    return found


def _print_stages(
    lake: Path, produced: dict[int, float], seen: dict[int, float], in_table: dict[int, float]
) -> None:
    """Where a pair's latency goes (median and p95 over the pairs; times on the
    ``time.monotonic`` clock, the commits' wall-clock times moved onto it): produce → in
    the raw pool (from-kafka's commit) → its output in staging (the ETL pass's commit) →
    visible on the output topic (to-kafka's transaction), and → in the table (the apply
    loop's commit) → seen by a reader of the table."""
    import json

    def status_of(row: dict[str, Any]) -> int | None:
        if not row["kafka"] or row["kafka"]["topic"] != "InvoiceStatus" or not row["value"]:
            return None
        return int(json.loads(row["value"])["after"]["InvoiceID"])

    def output_of(row: dict[str, Any]) -> int | None:
        if not row["kafka"] or row["kafka"]["topic"] != "NewInvoices" or not row["key"]:
            return None
        return int(json.loads(row["key"])["ID"])

    shift = time.monotonic() - time.time()
    raw = {i: t + shift for i, t in _commit_times(lake / "Raw", status_of).items()}
    staged = {i: t + shift for i, t in _commit_times(lake / "Staging", output_of).items()}
    applied = {
        i: t + shift
        for i, t in _commit_times(lake / "invoices", lambda r: int(r["ID"]), ("ID",)).items()
    }
    pairs = [i for i in produced if all(i in d for d in (raw, staged, seen, applied, in_table))]
    if not pairs:
        print("stages: no pair found in both pools")
        return
    legs = {
        "produce → raw commit": [raw[i] - produced[i] for i in pairs],
        "raw commit → staging commit": [staged[i] - raw[i] for i in pairs],
        "staging commit → visible": [seen[i] - staged[i] for i in pairs],
        "staging commit → table commit": [applied[i] - staged[i] for i in pairs],
        "table commit → seen in the table": [in_table[i] - applied[i] for i in pairs],
    }
    print(f"stages over {len(pairs)} pairs, median / p95:")
    for name, values in legs.items():
        print(f"  {name}: {statistics.median(values):.2f} / {_percentile(values, 0.95):.2f} s")


def main() -> None:
    from bench.stopping import stop_on_sigterm

    stop_on_sigterm()  # a killed run still stops its broker and registry
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=60, help="pairs per rate (default 60)")
    parser.add_argument("--rates", default="2,50", help="pairs per second, comma-separated")
    parser.add_argument("--etl-interval", default=None, help="passed to zync run")
    parser.add_argument("--log", type=Path, help="keep `zync run`'s output in this file")
    parser.add_argument("--api", type=int, default=0, help="serve the API on this port (0: a free one)")
    parser.add_argument("--no-api", action="store_true", help="`zync run --no-api`: no socket, no port (the API's cost)")
    parser.add_argument("--scrape", action="store_true", help="scrape /metrics every second")
    parser.add_argument("--hostile", action="store_true", help="a hostile client at the API")
    args = parser.parse_args()
    if args.no_api and (args.scrape or args.hostile):
        parser.error("--no-api serves nothing to scrape")
    rates = [float(r) for r in args.rates.split(",")]

    from engine.local.broker import start_broker
    from engine.local.processes import stop_process
    from engine.local.registry import start_registry
    from engine.settings.files import write_private_json

    work = Path(tempfile.mkdtemp(prefix="zync-e2e-"))
    broker = start_broker(work / "broker", port=0)
    registry = start_registry(work / "registry", port=0)
    run: subprocess.Popen[bytes] | None = None
    watcher: Watcher | None = None
    tables: TableWatcher | None = None
    try:
        home = work / "home"
        home.mkdir()
        (work / "lake").mkdir()
        write_private_json(home / "kafka.json", {"bootstrap_servers": broker.address})
        write_private_json(home / "schema_registry.json", {"url": registry.address})
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.address})
        for future in admin.create_topics(
            [NewTopic(t, 1, 1) for t in ("Invoices", "InvoiceStatus", "NewInvoices")]
        ).values():
            future.result(30)
        producer = Producer(broker.address, registry.address)
        watcher = Watcher(broker.address, registry.address)
        watcher.start()
        tables = TableWatcher(work / "lake" / "invoices")
        tables.start()

        producer.pair(1)
        token = "bench-token-" + os.urandom(8).hex()
        env = {**os.environ, "ZYNC_HOME": str(home), "ZYNC_SPARK_MASTER": "local[2]",
               "ZYNC_CONTROL_TOKEN": token}  # fmt: skip
        from engine.local.processes import free_port

        port = args.api or free_port()
        argv = [str(Path(sys.executable).parent / "zync"), "run", str(CONFIG), "--lake", str(work / "lake")]
        argv += ["--no-api"] if args.no_api else ["--http", f"127.0.0.1:{port}"]
        if args.etl_interval:
            argv += ["--etl-interval", args.etl_interval]
        started = time.monotonic()
        log = (work / "run.log").open("wb")
        run = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        if not watcher.wait_for([1], 300):
            tail = (work / "run.log").read_text(errors="replace").splitlines()[-15:]
            raise SystemExit("no output within 300 s of `zync run` starting:\n" + "\n".join(tail))
        first = watcher.seen[1] - started
        print(f"first output after `zync run` start: {first:.2f} s")

        from bench.api_load import HostileProcess, Scraper, percentile

        loads: list[Scraper | HostileProcess] = []
        if args.scrape:
            loads.append(Scraper(f"http://127.0.0.1:{port}", token))
        if args.hostile:
            loads.append(HostileProcess(port, token))
        for load in loads:
            load.start()
        loads_began = time.monotonic()
        summary = []
        table_summary: list[tuple[float, float, float]] = []
        invoice = 1
        for rate in rates:
            produced: dict[int, float] = {}
            pace = 1.0 / rate
            next_at = time.monotonic()
            for _ in range(args.pairs):
                invoice += 1
                now = time.monotonic()
                if next_at > now:
                    time.sleep(next_at - now)
                produced[invoice] = producer.pair(invoice)
                next_at += pace
            if not watcher.wait_for(list(produced), 120):
                missing = [i for i in produced if i not in watcher.seen]
                raise SystemExit(f"{len(missing)} outputs never showed at {rate:g} pairs/s")
            latencies = [watcher.seen[i] - t for i, t in produced.items()]
            p50, p95 = statistics.median(latencies), _percentile(latencies, 0.95)
            print(
                f"{rate:g} pairs/s, {len(latencies)} pairs: produce → visible "
                f"p50 {p50:.2f} s, p95 {p95:.2f} s, max {max(latencies):.2f} s"
            )
            summary.append((rate, p50, p95))
            if not tables.wait_for(list(produced), 120):
                missing = [i for i in produced if i not in tables.seen]
                raise SystemExit(f"{len(missing)} rows never showed in the table at {rate:g} pairs/s")
            in_table = [tables.seen[i] - t for i, t in produced.items()]
            t50, t95 = statistics.median(in_table), _percentile(in_table, 0.95)
            print(
                f"{rate:g} pairs/s, {len(in_table)} pairs: produce → row in the table "
                f"p50 {t50:.2f} s, p95 {t95:.2f} s, max {max(in_table):.2f} s"
            )
            table_summary.append((rate, t50, t95))
        for load in loads:
            load.stop.set()
            load.join(120)
            if isinstance(load, Scraper):
                print(f"/metrics scrapes every 1 s: {len(load.times)}, p95 "
                      f"{percentile(load.times, 0.95) * 1000:.1f} ms, max "
                      f"{max(load.times, default=0) * 1000:.1f} ms, {load.failures} failed")
            else:
                print(f"hostile client: {load.rounds} rounds of {load.storm} concurrent scrapes "
                      f"({load.served:,} served), malformed requests and a slowloris connection; "
                      f"its process's CPU {load.cpu_seconds:.1f} s over {time.monotonic() - loads_began:.0f} s")
        with watcher.lock:
            twice = [i for i, values in watcher.values.items() if len(values) != 1]
            wrong = [
                i for i, values in watcher.values.items()
                if values[0]["customer"] != f"c{i}" or values[0]["invoice_status"] != "pending"
            ]  # fmt: skip
        print(f"outputs checked: {len(watcher.values)}, twice: {len(twice)}, wrong: {len(wrong)}")
        if twice or wrong:
            raise SystemExit("outputs are not exactly one per pair")
        with tables.lock:
            rows_wrong = [
                i for i, row in tables.rows.items()
                if row["customer"] != f"c{i}" or row["invoice_status"] != "pending"
            ]  # fmt: skip
        print(f"table rows checked: {len(tables.rows)}, wrong: {len(rows_wrong)}")
        if rows_wrong or set(tables.rows) != set(watcher.values):
            raise SystemExit("the table does not hold one right row per pair")
        _print_stages(work / "lake", producer.produced, watcher.seen, tables.seen)
        bars = first <= 10 and all(p50 <= 1 and p95 <= 2 for _, p50, p95 in summary)
        print(f"bars (first <= 10 s, p50 <= 1 s, p95 <= 2 s): {'met' if bars else 'NOT met'}")
        table_bar = all(t50 <= 2 for _, t50, _ in table_summary)
        print(f"table bar (p50 <= 2 s): {'met' if table_bar else 'NOT met'}")
    finally:
        if watcher is not None:
            watcher.stop.set()
        if tables is not None:
            tables.stop.set()
        if run is not None and run.poll() is None:
            run.send_signal(signal.SIGTERM)
            try:
                run.wait(60)
            except subprocess.TimeoutExpired:
                run.kill()
                run.wait()
        stop_process(registry)
        stop_process(broker)
        if (work / "run.log").exists():
            _print_passes((work / "run.log").read_text(errors="replace"))
        if args.log and (work / "run.log").exists():
            shutil.copy(work / "run.log", args.log)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
