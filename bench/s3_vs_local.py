"""Benchmark: the same work on a local lake and on an ``s3://`` lake (moto's S3 server on
127.0.0.1).

    .venv/bin/python bench/s3_vs_local.py [--records 1000000] [--rounds 2]

1. **Invoice scenario** (ETL): the demo's four batches of Debezium events appended to the
   raw pool, one ETL pass after each (Spark local[2], delta-spark reading the pools; on
   S3 through s3a), outputs written by the driver, then the same with the outputs written
   by the Spark executors (a large pass's path). Seconds for the whole scenario, per lake.
2. **Ingest**: N Debezium-like Avro records (~184-byte values, 1 partition, bench/
   avro_records.py) on a private Apache Kafka broker; ``zync from-kafka`` as a subprocess,
   timed from its start until the pool's Delta log holds offset N-1: records/s per lake.

moto keeps objects in memory and answers over loopback HTTP, so the S3 figures show the
cost of zync's requests (listing, conditional puts, reads through s3a) rather than a real
store's latency. Every service is started here on free ports and stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOPIC = "bench.inventory.invoices"


def invoice_scenario(spark, lake_root: str, writer: str) -> float:
    """Seconds for the four batches and four ETL passes on a fresh lake."""
    import engine.etl.evaluate
    from engine.etl import EtlRunner, load_config
    from engine.lake.location import resolve_lake
    from engine.lake.pools import Lake
    from tests.integration.test_etl_support import (
        DEMO,
        append_events,
        demo_batch,
        make_pools,
        outputs,
    )

    engine.etl.evaluate.DRIVER_OUTPUT_ROWS = -1 if writer == "executors" else 20_000
    lake = Lake(resolve_lake(lake_root))
    started = time.monotonic()
    raw, _ = make_pools(lake)
    runner = EtlRunner(load_config(DEMO / "etl.yaml"), lake, spark)
    for batch in (1, 2, 3, 4):
        append_events(raw, demo_batch(batch))
        runner.run_pass()
    seconds = time.monotonic() - started
    assert len(outputs(spark, lake)) == 8
    return seconds


def main() -> None:
    from bench.stopping import stop_on_sigterm

    stop_on_sigterm()  # a killed run still stops its broker and registry
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2, help="invoice scenario runs per lake")
    args = parser.parse_args()

    from bench.ingest import ingest, produce
    from engine.kafka.registry_client import RegistrySchemas
    from engine.local import broker as local_broker
    from engine.local import processes
    from engine.local import registry as local_registry
    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile
    from engine.settings.spark import SparkSettings
    from engine.spark import get_spark, stop_spark
    from tests.fixtures import debezium as dbz
    from tests.s3 import start_moto

    print(f"load average at start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="zync-bench-s3-") as tmp:
        tmp_path = Path(tmp)
        moto = start_moto(tmp_path)
        os.environ.update(moto.env())
        os.environ["ZYNC_HOME"] = str(tmp_path / "home")
        os.environ["ZYNC_SPARK_S3_JARS"] = "true"
        try:
            spark = get_spark(SparkSettings(master="local[2]", conf={"spark.sql.shuffle.partitions": "4"}))
            scenario: dict[tuple[str, str], list[float]] = {}
            for round_ in range(args.rounds + 1):  # the first round warms the JVM up
                for writer in ("driver", "executors"):
                    for kind in ("local", "s3"):
                        root = str(tmp_path / f"lake-{round_}-{writer}") if kind == "local" else moto.new_lake()
                        seconds = invoice_scenario(spark, root, writer)
                        if round_:
                            scenario.setdefault((writer, kind), []).append(seconds)
                        print(f"  invoice scenario, {writer} writes, {kind}: {seconds:.2f}s"
                              f"{' (warm-up)' if not round_ else ''}")
            stop_spark()

            broker = local_broker.start_broker(tmp_path / "broker", port=0, timeout=60)
            registry = local_registry.start_registry(tmp_path / "registry", port=0, timeout=60)
            try:
                profile = KafkaProfile(bootstrap_servers=broker.address)
                schemas = RegistrySchemas(RegistryProfile(url=registry.address))
                value_id = schemas.register(f"{TOPIC}-value", dbz.AVRO_VALUE_SCHEMA)
                key_id = schemas.register(f"{TOPIC}-key", dbz.AVRO_KEY_SCHEMA)
                produce(profile, args.records, value_id, key_id)
                env = dict(os.environ)
                env.update({"ZYNC_KAFKA_BOOTSTRAP_SERVERS": broker.address,
                            "ZYNC_REGISTRY_URL": registry.address})
                rates = {
                    "local": ingest(args.records, env, str(tmp_path / "ingest-lake"))[0],
                    "s3": ingest(args.records, env, moto.new_lake("ingest"))[0],
                }
            finally:
                processes.stop_process(registry)
                processes.stop_process(broker)
        finally:
            moto.stop()

    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print()
    print("| invoice scenario (4 batches, 4 passes) | local (s) | s3 (s) | s3 / local |")
    print("|---|---|---|---|")
    for writer in ("driver", "executors"):
        local = sorted(scenario[(writer, "local")])[len(scenario[(writer, "local")]) // 2]
        s3 = sorted(scenario[(writer, "s3")])[len(scenario[(writer, "s3")]) // 2]
        print(f"| outputs written by the {writer} | {local:.2f} | {s3:.2f} | {s3 / local:.2f}x |")
    print()
    print("| from-kafka ingest | local (records/s) | s3 (records/s) | s3 / local |")
    print("|---|---|---|---|")
    print(f"| {args.records:,} Avro records | {rates['local']:,.0f} | {rates['s3']:,.0f} | "
          f"{rates['s3'] / rates['local']:.0%} |")


if __name__ == "__main__":
    main()
