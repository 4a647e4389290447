"""Benchmark: `zync from-kafka` against the stack's ceiling.

    .venv/bin/python bench/ingest.py [--records 1000000]

1. Starts a private Apache Kafka broker and Schema Registry (engine.local, free ports, a
   temporary directory; both stopped at the end).
2. Produces N Debezium-like change events (Avro, Confluent wire format, ~200 bytes: an
   update with ``before``, ``after``, ``source`` and ``transaction``; Avro keys) to a
   1-partition topic (bench/avro_records.py). The values cycle through 5,000 distinct
   encoded events, which costs the decoders the same as N distinct ones.
3. **Ceiling**: confluent-kafka consumes the topic (zync's consumer settings) and
   fastavro decodes every key and value (``schemaless_reader``, garbage collector
   paused), no lake: records/s. Measured before and after the ingest; the mean is used.
4. **Ingest**: runs ``python -m zync_tui.commands.ingest from-kafka -t TOPIC -p bench
   --create-pool`` as a subprocess and times it from its start until the pool's Delta log
   says it holds offset N-1: records/s.

Prints both, and ingest / ceiling (goal: >= 60%).
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOPIC = "bench.inventory.invoices"


def produce(profile, n: int, value_id: int, key_id: int) -> float:
    from bench.avro_records import encoded_records, mean_size
    from bench.avro_records import produce as produce_records

    keys, values = encoded_records(value_id, key_id)
    seconds = produce_records(profile, TOPIC, n, keys, values)
    avg = mean_size(values)
    print(f"produced {n:,} records (values ~{avg:.0f} bytes) in {seconds:.1f}s")
    return avg


def ceiling(profile, n: int, registry_url: str) -> float:
    """confluent-kafka consume + fastavro decode of keys and values, no lake."""
    import json
    import urllib.request

    import fastavro
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    from engine.kafka import clients

    schemas: dict[int, object] = {}

    def parsed(schema_id: int):
        if schema_id not in schemas:
            with urllib.request.urlopen(f"{registry_url}/schemas/ids/{schema_id}") as response:
                text = json.load(response)["schema"]
            schemas[schema_id] = fastavro.parse_schema(json.loads(text))
        return schemas[schema_id]

    consumer = clients.consumer(profile, group="bench-ceiling")
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    reader = fastavro.schemaless_reader
    got = 0
    gc.disable()  # the ceiling at its best (measured: ~200 k/s instead of ~145 k/s)
    started = time.monotonic()
    try:
        while got < n:
            for m in consumer.consume(50_000, 1.0):
                if m.error():
                    continue
                key, value = m.key(), m.value()
                reader(io.BytesIO(key[5:]), parsed(int.from_bytes(key[1:5], "big")), None)
                reader(io.BytesIO(value[5:]), parsed(int.from_bytes(value[1:5], "big")), None)
                got += 1
            if time.monotonic() - started > 600:
                raise SystemExit(f"ceiling: only {got:,} records after 600s")
        seconds = time.monotonic() - started
    finally:
        gc.enable()
    consumer.close()
    return n / seconds


def ingest(n: int, env: dict[str, str], lake: str) -> tuple[float, float]:
    """Run from-kafka in a subprocess on ``lake`` (a directory or an ``s3://`` URL, with
    the storage settings in ``env``); records/s and seconds from its start until the
    pool's position holds the last of n records."""
    from deltalake import DeltaTable

    from engine.lake.location import resolve_lake

    pool = resolve_lake(lake, env=env).join("bench")
    options = pool.storage_options()
    cmd = [
        sys.executable, "-m", "zync_tui.commands.ingest", "from-kafka",
        "-t", TOPIC, "-p", "bench", "--create-pool", "--exit-after", "3s", "--quiet",
        "--lake", lake,
    ]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    done_at = None
    try:
        while done_at is None:
            if proc.poll() is not None and proc.returncode != 0:
                raise SystemExit(f"from-kafka exited with {proc.returncode}")
            try:
                position = DeltaTable(pool.uri, storage_options=options).transaction_version(
                    f"zync.in/{TOPIC}/0"
                )
            except Exception:  # noqa: BLE001 - no table yet
                position = None
            if position is not None and position >= n - 1:
                done_at = time.monotonic()
                break
            if time.monotonic() - started > 1200:
                raise SystemExit("from-kafka did not finish within 1200s")
            time.sleep(0.05)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    seconds = done_at - started
    table = DeltaTable(pool.uri, storage_options=options)
    rows = sum(table.get_add_actions(flatten=True).column("num_records").to_pylist())
    if rows != n:
        raise SystemExit(f"the pool holds {rows:,} rows, expected {n:,}")
    print(f"from-kafka into {lake}: {n:,} records in {seconds:.2f}s (from process start; "
          f"{len(table.file_uris())} files, version {table.version()})")
    return n / seconds, seconds


def main() -> None:
    from bench.stopping import stop_on_sigterm

    stop_on_sigterm()  # a killed run still stops its broker and registry
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    n = args.records

    from engine.kafka.registry_client import RegistrySchemas
    from engine.local import broker, processes, registry
    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile
    from tests.fixtures import debezium as dbz

    with tempfile.TemporaryDirectory(prefix="zync-bench-") as tmp:
        tmp_path = Path(tmp)
        broker = broker.start_broker(tmp_path / "broker", port=0, timeout=60)
        registry = registry.start_registry(tmp_path / "registry", port=0, timeout=60)
        try:
            profile = KafkaProfile(bootstrap_servers=broker.address)
            schemas = RegistrySchemas(RegistryProfile(url=registry.address))
            value_id = schemas.register(f"{TOPIC}-value", dbz.AVRO_VALUE_SCHEMA)
            key_id = schemas.register(f"{TOPIC}-key", dbz.AVRO_KEY_SCHEMA)
            size = produce(profile, n, value_id, key_id)

            before = ceiling(profile, n, registry.address)
            print(f"ceiling (consume + fastavro decode, no lake): {before:,.0f} records/s")

            lake = tmp_path / "lake"
            env = dict(os.environ)
            env.update(
                {
                    "ZYNC_HOME": str(tmp_path / "home"),
                    "ZYNC_LAKE": str(lake),
                    "ZYNC_KAFKA_BOOTSTRAP_SERVERS": broker.address,
                    "ZYNC_REGISTRY_URL": registry.address,
                }
            )
            rate, seconds = ingest(n, env, str(lake))
            print(f"from-kafka: {rate:,.0f} records/s")
            # once more after, so a change in machine load shows and is averaged out
            after = ceiling(profile, n, registry.address)
            print(f"ceiling again: {after:,.0f} records/s")
            ceiling_rate = (before + after) / 2
            print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
            ratio = rate / ceiling_rate
            print(f"ratio ingest / ceiling: {ratio:.0%} (goal >= 60%)")
            print()
            print("| records | value size | ceiling (rec/s) | from-kafka (rec/s) | ratio |")
            print("|---|---|---|---|---|")
            print(f"| {n:,} | ~{size:.0f} B | {ceiling_rate:,.0f} | {rate:,.0f} | {ratio:.0%} |")
        finally:
            processes.stop_process(registry)
            processes.stop_process(broker)


if __name__ == "__main__":
    main()
