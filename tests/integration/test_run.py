"""`zync run` on the invoice scenario, end to end through real Kafka both ways.

The demo's topics get a unique suffix per test (the broker is shared by the session), so
the scenario lives in a copy of demo/invoices with renamed topics plus a fifth batch
that deletes an invoice.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_to_kafka import profiles, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

DEMO = Path(__file__).resolve().parents[2] / "demo" / "invoices"
ROOT = Path(__file__).resolve().parents[2]

#: NewInvoices after the four demo batches (see tests/integration/test_etl_invoices.py)
EXPECTED = [
    ({"ID": 101}, {"ID": 101, "customer": "Bob", "item": "burrito", "invoice_status": "pending"}),
    ({"ID": 100}, {"ID": 100, "customer": "Alice", "item": "taco", "invoice_status": "pending"}),
    (
        {"ID": 102},
        {"ID": 102, "customer": "Charlie", "item": "enchilada", "invoice_status": "pending"},
    ),
    ({"ID": 103}, {"ID": 103, "customer": "Dan", "item": "beans", "invoice_status": "pending"}),
    ({"ID": 100}, {"ID": 100, "invoice_status": "closed"}),
    ({"ID": 103}, {"ID": 103, "invoice_status": "collections"}),
    ({"ID": 102}, {"ID": 102, "invoice_status": "paid"}),
    ({"ID": 101}, {"ID": 101, "invoice_status": "paid"}),
]


@dataclass
class Scenario:
    directory: Path
    suffix: str

    @property
    def config(self) -> Path:
        return self.directory / "etl.yaml"

    def topic(self, name: str) -> str:
        return f"{name}_{self.suffix}"

    @property
    def output(self) -> str:
        return self.topic("NewInvoices")


def _rename(text: str, suffix: str) -> str:
    return re.sub(r"\b(Invoices|InvoiceStatus|NewInvoices|InvoiceChanges)\b", rf"\1_{suffix}", text)


def invoice_scenario(tmp_path: Path) -> Scenario:
    """demo/invoices with topics renamed, plus batch5: Charlie's invoice deleted (a
    Debezium delete, then Debezium's tombstone)."""
    suffix = uuid.uuid4().hex[:6]
    directory = tmp_path / "scenario"
    directory.mkdir()
    for path in DEMO.iterdir():
        if path.suffix in (".yaml", ".jsonl"):
            (directory / path.name).write_text(_rename(path.read_text(), suffix))
    created = json.loads((DEMO / "batch2.jsonl").read_text().splitlines()[0])
    assert created["value"]["after"]["ID"] == 102
    deleted = {
        "topic": f"Invoices_{suffix}",
        "key": {"ID": 102},
        "value": {
            **created["value"],
            "before": created["value"]["after"],
            "after": None,
            "op": "d",
            "ts_ms": created["value"]["ts_ms"] + 3_600_000,
            "source": {
                **created["value"]["source"],
                "ts_ms": created["value"]["source"]["ts_ms"] + 3_600_000,
            },
        },
    }
    tombstone = {"topic": f"Invoices_{suffix}", "key": {"ID": 102}, "value": None}
    (directory / "batch5.jsonl").write_text(
        json.dumps(deleted) + "\n" + json.dumps(tombstone) + "\n"
    )
    return Scenario(directory, suffix)


def demo_driver(scenario: Scenario, lake_root: Path, kafka: Any, registry: Any) -> Any:
    from demo.scenario import Demo

    demo = Demo(
        lake_root=lake_root,
        start_stack=False,
        kafka=kafka,
        registry=registry,
        directory=scenario.directory,
    )
    demo.prepare()
    return demo


def spark_home(home: Path) -> None:
    """Spark settings for a `zync run` subprocess: small and quick."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "spark.json").write_text(
        json.dumps(
            {
                "master": "local[2]",
                "conf": {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"},
            }
        )
    )


def plain(value: Any) -> Any:
    """A decoded value without null fields (Avro records carry every field of the merged
    type; the expected values name only those a rule sets)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if v is not None}
    return value


def publish_in_file_order(
    demo: Any, lake_root: Path, *, batches: int, timeout: float = 120.0
) -> None:
    """Publish the next ``batches`` batches one record at a time, each once from-kafka
    brought the previous one into the raw pool."""
    import time

    import pyarrow.dataset as ds

    from demo.scenario import read_batch
    from engine.lake.pools import Lake

    def raw_rows() -> int:
        lake = Lake(lake_root)
        if not lake.exists("Raw"):
            return 0
        table = lake.open_pool("Raw").table.to_pyarrow_dataset()
        return table.to_table(columns=["seqno"], filter=ds.field("marker").is_null()).num_rows

    held = raw_rows()
    for _ in range(batches):
        path = demo.batch_paths()[demo.published]
        for record in read_batch(path):
            demo.publish([record])
            held += 1
            deadline = time.monotonic() + timeout
            while raw_rows() < held:
                assert time.monotonic() < deadline, f"from-kafka did not ingest {record}"
                time.sleep(0.1)
        demo.published += 1


def assert_table_soon(path: Path, expected: dict[int, tuple], timeout: float = 60.0) -> None:
    """The table at ``path`` holds ``expected`` (ID: customer, item, status) within
    ``timeout`` seconds."""
    import time

    from deltalake import DeltaTable

    deadline = time.monotonic() + timeout
    while True:
        rows = {}
        if DeltaTable.is_deltatable(str(path)):
            table = DeltaTable(str(path)).to_pyarrow_table()
            rows = {
                r["ID"]: (r["customer"], r["item"], r["invoice_status"]) for r in table.to_pylist()
            }
        if rows == expected:
            return
        assert time.monotonic() < deadline, f"the table holds {rows}"
        time.sleep(0.2)


def test_zync_run_invoice_scenario_end_to_end(tmp_path, broker, registry) -> None:
    kafka, reg = profiles(broker, registry)
    scenario = invoice_scenario(tmp_path)
    lake_root = tmp_path / "lake"
    demo = demo_driver(scenario, lake_root, kafka, reg)

    home = Path(os.environ["ZYNC_HOME"])
    spark_home(home)
    env = {**os.environ, "ZYNC_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    connection = ["-b", broker.address, "-r", registry.url]
    log_path = tmp_path / "run.log"
    log = log_path.open("w")
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zync_tui.commands.run",
            "run",
            str(scenario.config),
            "--lake",
            str(lake_root),
            "--etl-interval",
            "500ms",
            *connection,
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        # record by record, each once the previous one reached the raw pool: Kafka keeps
        # no order across topics, the scenario's order is that of its files
        publish_in_file_order(demo, lake_root, batches=4)
        got = read_topic(kafka, scenario.output, registry=reg, expect=8, timeout=240)
        assert [(r.key, plain(r.value)) for r in got] == EXPECTED, log_path.read_text()

        # a delete while it runs: the jdbc envelope carries it as a tombstone
        publish_in_file_order(demo, lake_root, batches=1)
        got = read_topic(kafka, scenario.output, registry=reg, expect=9, timeout=240)
        assert (got[8].key, got[8].value) == ({"ID": 102}, None)

        # the configuration's second output: the same records as Debezium change events
        changes = read_topic(
            kafka, scenario.topic("InvoiceChanges"), registry=reg, expect=10, timeout=240
        )
        assert [r.value["op"] if r.value else None for r in changes] == [
            *["c"] * 4, *["u"] * 4, "d", None
        ]
        assert [r.key for r in changes] == [key for key, _ in EXPECTED] + [{"ID": 102}] * 2
        assert [plain(r.value["after"]) for r in changes[:8]] == [v for _, v in EXPECTED]
        assert plain(changes[4].value["before"]) == EXPECTED[1][1]  # Alice's invoice
        assert plain(changes[8].value["before"]) == EXPECTED[6][1]  # Charlie's, deleted
        assert {r.value["source"]["name"] for r in changes[:9]} == {"Staging"}

        # the configuration's table, kept by the apply loop: Charlie's row deleted
        assert_table_soon(
            lake_root / "invoices",
            {
                100: ("Alice", "taco", "closed"),
                101: ("Bob", "burrito", "paid"),
                103: ("Dan", "beans", "collections"),
            },
        )
    finally:
        run.send_signal(signal.SIGTERM)
        try:
            code = run.wait(120)
        finally:
            if run.poll() is None:
                run.kill()
            log.close()
    output = log_path.read_text()
    assert code == 0, output
    for service in ("from-kafka", "etl", "to-kafka", "apply"):
        assert re.search(rf"{service}\s+stopped", output), output
    assert re.search(r"to-kafka\s+.*delivered pool offsets 0\.\.", output), output
    assert re.search(r"InvoiceChanges_\w+: .*delivering topic 'NewInvoices_\w+' of pool 'Staging' \(debezium envelope", output), output

    consume = subprocess.run(
        [
            sys.executable,
            "-m",
            "zync_tui.commands.kafka",
            "consume",
            "-t",
            scenario.output,
            "--from-beginning",
            "--exit-after",
            "3s",
            *connection,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert consume.returncode == 0, consume.stderr
    lines = [json.loads(line) for line in consume.stdout.splitlines() if line.strip()]
    assert [(r["key"], plain(r["value"])) for r in lines] == [*EXPECTED, ({"ID": 102}, None)]


def test_a_new_demo_lake_delivers_its_outputs_into_topics_an_earlier_lake_wrote(
    tmp_path, broker, registry, spark
) -> None:
    """The demo's lake deleted while the embedded broker kept its topics (`zync dev down`
    keeps them): to-kafka refused the output topics, written by another staging pool, and
    the demo showed it failed. Now the demo deletes the output topics an earlier lake
    delivered to and its to-kafka takes them over: the new lake's outputs, once each."""
    import time

    from demo.scenario import make_pipeline

    kafka, reg = profiles(broker, registry)
    scenario = invoice_scenario(tmp_path)
    expected = EXPECTED[:2]  # the outputs of batch 1

    def deliver(demo: Any, lake_root: Path, batches: int) -> list[Any]:
        pipeline = make_pipeline(demo, spark=lambda: spark)
        pipeline.start()
        try:
            publish_in_file_order(demo, lake_root, batches=batches)
            deadline = time.monotonic() + 180
            last = len(expected) - 1  # the pool offset of the last output
            while True:  # every output delivered up to it, by this lake's to-kafka
                assert not pipeline.failed(), pipeline.failed()
                deliveries = pipeline.to_kafka.deliveries()
                if deliveries and all(d.status().delivered_offset == last for d in deliveries):
                    break
                assert time.monotonic() < deadline, pipeline.status()
                time.sleep(0.1)
            got = read_topic(kafka, scenario.output, registry=reg)  # to its end
            staging = demo.lake.open_pool("Staging").table.metadata().id
            assert {r.headers["zync.pool.id"] for r in got} == {staging}  # this lake's only
            return got
        finally:
            pipeline.stop()

    first = demo_driver(scenario, tmp_path / "first", kafka, reg)
    got = deliver(first, tmp_path / "first", batches=1)
    assert [(r.key, plain(r.value)) for r in got] == expected

    second = demo_driver(scenario, tmp_path / "second", kafka, reg)
    assert second.published == 1  # the broker's batch, ingested again by the new lake
    got = deliver(second, tmp_path / "second", batches=0)
    # not the first lake's outputs too; in either order (the batch is read back from two
    # topics at once, and Kafka keeps no order across topics)
    assert sorted((r.key["ID"], plain(r.value)["customer"]) for r in got) == [(100, "Alice"), (101, "Bob")]
