"""The invoice scenario of issue 5, batch by batch, and deletes/tombstones."""

from __future__ import annotations

from typing import Any

import pytest

from engine.api import EtlRunner, load_config
from tests.integration.test_etl_support import (
    DEMO,
    append_events,
    demo_batch,
    make_pools,
    markers,
    outputs,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]

OUT = "NewInvoices"


def _invoice(id_: int, customer: str, item: str, status: str) -> tuple:
    return (OUT, {"ID": id_}, {"ID": id_, "customer": customer, "item": item, "invoice_status": status})


def _status(id_: int, status: str) -> tuple:
    return (OUT, {"ID": id_}, {"ID": id_, "invoice_status": status})


def _without_offsets(rows: list) -> list:
    return [(topic, key, value) for topic, _, key, value in rows]


@pytest.fixture(
    params=["rows", "driver", "executors", "driver-topic-views", "executors-topic-views"]
)
def writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each scenario with its small warm passes evaluated row by row on the driver
    (engine.etl.evaluate_rows), and with every pass evaluated by Spark: outputs brought
    to the driver (a small pass) and written by the executors (what a large pass does);
    and both again with each topic's records parsed in a view of its own, as a
    configuration of many input topics has them (engine.etl.rules.PARSED_TOPICS)."""
    import engine.etl.evaluate
    import engine.etl.evaluate_rows
    import engine.etl.rules

    if request.param != "rows":
        monkeypatch.setattr(engine.etl.evaluate_rows, "ROWWISE_ROWS", 0)
    if request.param.startswith("executors"):
        monkeypatch.setattr(engine.etl.evaluate, "DRIVER_OUTPUT_ROWS", -1)
    if request.param.endswith("topic-views"):
        monkeypatch.setattr(engine.etl.rules, "PARSED_TOPICS", 0)
    return request.param


def test_invoice_scenario_batch_by_batch(spark, lake, writer) -> None:
    raw, _ = make_pools(lake)
    runner = EtlRunner(load_config(DEMO / "etl.yaml"), lake, spark)

    # batch 1: statuses 80→101 and 32→100 arrive after both invoices; Bob's pair is
    # complete first (largest input seqno 2 < 3), so Bob gets offset 0 (DESIGN 5)
    append_events(raw, demo_batch(1))
    result = runner.run_pass()
    assert result.committed
    assert result.outputs == {OUT: 2}
    assert result.consumed == {"Invoices": 2, "InvoiceStatus": 2}
    assert _without_offsets(outputs(spark, lake)) == [
        _invoice(101, "Bob", "burrito", "pending"),
        _invoice(100, "Alice", "taco", "pending"),
    ]

    # batch 2: + Charlie; Dan waits for his status row
    append_events(raw, demo_batch(2))
    result = runner.run_pass()
    assert result.outputs == {OUT: 1}
    assert result.pending == {"Invoices": 1}
    assert result.cursors[("Invoices", 0)] == 2  # Dan (offset 3) holds the cursor
    waiting = runner.pending()
    assert [(p.topic, p.partition, p.offset, p.rule) for p in waiting] == [
        ("Invoices", 0, 3, "new-invoice")
    ]
    assert waiting[0].key == '{"ID": 103}'

    # batch 3: + Dan, + 100 closed
    append_events(raw, demo_batch(3))
    result = runner.run_pass()
    assert result.outputs == {OUT: 2}
    assert runner.pending() == []

    # batch 4: + 103 collections, 102 paid, 101 paid
    append_events(raw, demo_batch(4))
    runner.run_pass()

    rows = outputs(spark, lake)
    assert [offset for _, offset, _, _ in rows] == list(range(8))
    assert _without_offsets(rows) == [
        _invoice(101, "Bob", "burrito", "pending"),
        _invoice(100, "Alice", "taco", "pending"),
        _invoice(102, "Charlie", "enchilada", "pending"),
        _invoice(103, "Dan", "beans", "pending"),
        _status(100, "closed"),
        _status(103, "collections"),
        _status(102, "paid"),
        _status(101, "paid"),
    ]
    done = markers(spark, lake)
    assert [(t, p, o) for t, p, o, _, _ in done] == sorted(
        [("Invoices", 0, o) for o in range(4)] + [("InvoiceStatus", 0, o) for o in range(8)]
    )
    assert {status for *_, status in done} == {"processed"}
    assert {rule for *_, rule, _ in done} == {"new-invoice", "status-update"}

    # a further pass (fresh runner, nothing cached) changes nothing
    staging = lake.open_pool("Staging")
    version = staging.version
    again = EtlRunner(load_config(DEMO / "etl.yaml"), lake, spark).run_pass()
    assert again.nothing_new
    assert not again.committed
    assert "nothing new to ETL" in again.summary()
    staging.refresh()
    assert staging.version == version
    # nothing pending, nothing expired: a fresh runner answers from the Delta log and
    # delta-rs without starting Spark (`zync pending`/`expired` start no JVM)
    def no_spark() -> Any:
        raise AssertionError("Spark was started to list nothing")

    idle = EtlRunner(load_config(DEMO / "etl.yaml"), lake, no_spark)
    assert idle.pending() == []
    assert idle.expired() == []
    # the outputs are typed for SQL and to-kafka: the merged value type of both rules
    value_type = staging.spark_types(OUT)[1]
    assert value_type is not None
    assert set(value_type.fieldNames()) == {"ID", "customer", "item", "invoice_status"}


def _debezium(topic: str, op: str, before: dict | None, after: dict | None, minute: int) -> dict:
    ts = 1_714_557_600_000 + minute * 60_000
    return {
        "topic": topic,
        "key": {"ID": (after or before)["ID"]},
        "value": {"before": before, "after": after, "op": op, "ts_ms": ts, "source": {"table": topic}},
    }


def test_updates_deletes_and_debezium_tombstones(spark, lake, writer) -> None:
    raw, _ = make_pools(lake)
    runner = EtlRunner(load_config(DEMO / "etl.yaml"), lake, spark)
    alice = {"ID": 100, "customer": "Alice", "item": "taco"}
    append_events(
        raw,
        [
            _debezium("Invoices", "c", None, alice, 0),
            _debezium("InvoiceStatus", "c", None, {"ID": 32, "InvoiceID": 100, "status": "pending"}, 1),
            _debezium("Invoices", "u", alice, {**alice, "item": "two tacos"}, 2),
            _debezium("Invoices", "d", {**alice, "item": "two tacos"}, None, 3),
            # Debezium's tombstone after a delete: same key, NULL value
            {"topic": "Invoices", "key": {"ID": 100}, "value": None},
            # a status row deleted: no rule matches, processed with no output
            _debezium("InvoiceStatus", "d", {"ID": 32, "InvoiceID": 100, "status": "pending"}, None, 4),
        ],
    )
    result = runner.run_pass()
    assert result.consumed == {"Invoices": 4, "InvoiceStatus": 2}
    assert result.pending == {}
    assert _without_offsets(outputs(spark, lake)) == [
        _invoice(100, "Alice", "taco", "pending"),
        (OUT, {"ID": 100}, {"ID": 100, "customer": "Alice", "item": "two tacos"}),
        (OUT, {"ID": 100}, None),  # the delete became a tombstone
    ]
    rules = {(t, o): rule for t, _, o, rule, _ in markers(spark, lake)}
    assert rules == {
        ("Invoices", 0): "new-invoice",
        ("Invoices", 1): "invoice-update",
        ("Invoices", 2): "invoice-delete",
        ("Invoices", 3): None,  # the Debezium tombstone: no rule, no output
        ("InvoiceStatus", 0): "new-invoice",
        ("InvoiceStatus", 1): None,
    }
    assert runner.run_pass().nothing_new


def test_dry_run_shows_outputs_and_commits_nothing(spark, lake, writer) -> None:
    raw, staging = make_pools(lake)
    config = load_config(DEMO / "etl.yaml")
    append_events(raw, demo_batch(1))
    before = staging.version
    result = EtlRunner(config, lake, spark).run_pass(dry_run=True)
    assert not result.committed
    assert result.dry_run
    assert result.rows is not None
    assert result.rows.column("offset").to_pylist() == [0, 1]
    assert '"Bob"' in result.rows.column("value").to_pylist()[0]
    staging.refresh()
    assert staging.version == before
    assert outputs(spark, lake) == []
    text = EtlRunner(config, lake, spark).explain()
    assert "FROM `zync_etl_" in text
    assert "== Spark plan" in text
    assert "rule 1 (denorm 'new-invoice')" in text


def test_a_pass_before_an_input_topic_has_typed_records(spark, lake) -> None:
    raw, _ = make_pools(lake)
    runner = EtlRunner(load_config(DEMO / "etl.yaml"), lake, spark)
    # only invoices so far, and a status topic holding nothing but a tombstone
    append_events(raw, [e for e in demo_batch(1) if e["topic"] == "Invoices"])
    append_events(raw, [{"topic": "InvoiceStatus", "key": {"ID": 1}, "value": None}])
    result = runner.run_pass()
    assert result.pending == {"Invoices": 2}  # waiting for their status rows
    assert result.processed == {"InvoiceStatus": 1}  # the untyped tombstone: no rule
    assert outputs(spark, lake) == []


def test_both_writers_make_the_same_staging_rows(spark, tmp_path, monkeypatch) -> None:
    """Every staging row (seqno, offsets, markers) is the same whichever side wrote the
    outputs, and the executors' files sit in etl-<uuid>/ directories."""
    from pathlib import Path

    from deltalake import DeltaTable

    import engine.etl.evaluate
    import engine.etl.evaluate_rows
    from engine.lake.pools import Lake

    monkeypatch.setattr(engine.etl.evaluate_rows, "ROWWISE_ROWS", 0)  # Spark's writers
    tables = {}
    for side, limit in (("driver", engine.etl.evaluate.DRIVER_OUTPUT_ROWS), ("executors", -1)):
        monkeypatch.setattr(engine.etl.evaluate, "DRIVER_OUTPUT_ROWS", limit)
        lake = Lake(tmp_path / side)
        raw, staging = make_pools(lake)
        runner = EtlRunner(load_config(DEMO / "etl.yaml"), lake, spark)
        for n in (1, 2, 3, 4):
            append_events(raw, demo_batch(n))
            runner.run_pass()
        table = DeltaTable(str(staging.path)).to_pyarrow_table().sort_by("seqno")
        tables[side] = table
        files = [Path(uri).parent.name for uri in DeltaTable(str(staging.path)).file_uris()]
        assert any(f.startswith("etl-") for f in files) == (side == "executors")
    assert tables["driver"].num_rows == tables["executors"].num_rows > 8
    assert tables["driver"].to_pylist() == tables["executors"].to_pylist()


def test_a_large_pass_writes_outputs_it_kept_and_frees_them(spark, lake, monkeypatch) -> None:
    """A large pass's outputs are written after the plan is decided, from rows computed
    once and kept on the executors (a local checkpoint: the plan is the stored rows), not
    computed again from the raw table — Spark's cache, used before, missed plans holding
    a CTE, and dropping the input's view uncached it (bench/RESULTS.md, "ETL
    throughput"). Once the pass is over, nothing it kept is left."""
    import engine.etl.evaluate
    import engine.etl.window

    monkeypatch.setattr(engine.etl.evaluate, "DRIVER_OUTPUT_ROWS", -1)
    monkeypatch.setattr(engine.etl.window, "LOG_READ_ROWS", 0)
    raw, _ = make_pools(lake)
    runner = EtlRunner(load_config(DEMO / "etl.yaml"), lake, spark)
    seen = []
    write = runner._write_outputs

    def plan_of(frame: Any) -> str:
        return str(frame._jdf.logicalPlan().getClass().getSimpleName())

    def watched(plan: Any) -> Any:
        seen.append((plan.read_from, plan_of(plan.outputs), plan_of(plan.fresh)))
        return write(plan)

    def stored() -> int:
        """RDDs with blocks, but delta-spark's own (its cached state of a Delta log)."""
        infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
        return sum(1 for info in infos if not info.name().startswith("Delta Table State"))

    monkeypatch.setattr(runner, "_write_outputs", watched)
    append_events(raw, demo_batch(1))
    before = stored()
    assert runner.run_pass().committed
    assert seen == [("spark", "LogicalRDD", "LogicalRDD")]
    assert stored() == before
