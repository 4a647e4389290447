"""Event-time expiry: a txn bundle that never completes and a denorm left row whose
right row never comes are expired once their topic's newest record is `expire-after`
newer; they give no output, the cursor moves past them, `zync expired` shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from engine.api import EtlRunner, load_config
from tests.integration.test_etl_support import append_events, make_pools, markers, outputs
from zync_tui.commands.etl import register

pytestmark = [pytest.mark.integration, pytest.mark.spark]

CONFIG = """\
name: expiring
inputs:
  - {topic: orders, pool: Raw}
  - {topic: items, pool: Raw}
  - {topic: customers, pool: Raw}
  - {topic: addresses, pool: Raw}
output: {topic: Out, pool: Staging}
transforms:
  - type: txn
    name: order-bundle
    in: [orders, items]
    txn-id: value.txn
    complete-when: bool_or(coalesce(value.done, false))
    expire-after: 15m
    out: Out
    sql: |
      SELECT named_struct('txn', bundle.txn_id) AS key,
             named_struct('records', size(bundle.records),
                          'first', bundle.records[0].kafka.topic) AS value
  - type: denorm
    name: customer-address
    left: customers
    right: addresses
    join-on: left.value.id = right.value.customer
    expire-after: 1h
    out: Out
    sql: |
      SELECT left.key AS key,
             named_struct('name', left.value.name, 'city', right.value.city) AS value
"""

T0 = 1_714_557_600_000
MINUTE = 60_000


def _ev(topic: str, value: dict, minute: int, key: dict | None = None) -> dict:
    return {"topic": topic, "key": key or {"k": topic}, "value": value, "timestamp": T0 + minute * MINUTE}


def test_expired_bundle_and_denorm_row(spark, lake, tmp_path: Path) -> None:
    raw, _ = make_pools(lake)
    path = tmp_path / "expiring.yaml"
    path.write_text(CONFIG)
    runner = EtlRunner(load_config(path), lake, spark)
    full_types = [  # every field once, so the topics' types are known from the start
        _ev("orders", {"txn": "t2", "n": 2, "done": False}, 0),
        _ev("items", {"txn": "t2", "item": "cake", "done": True}, 0),
    ]
    append_events(
        raw,
        [
            _ev("orders", {"txn": "t1", "n": 1, "done": False}, 0),
            _ev("items", {"txn": "t1", "item": "tea", "done": False}, 0),
            *full_types,
            _ev("customers", {"id": 1, "name": "Ann"}, 0, key={"id": 1}),
            _ev("addresses", {"customer": 9, "city": "Nowhere"}, 0),
        ],
    )
    first = runner.run_pass()
    assert first.outputs == {"Out": 1}  # t2 complete; t1 and Ann wait
    assert first.pending == {"orders": 1, "items": 1, "customers": 1, "addresses": 1}
    assert ("orders", 0) not in first.cursors  # t1's order at offset 0 holds it

    # 10 minutes later: t1 is younger than 15m behind the newest order, still pending
    append_events(raw, [_ev("orders", {"txn": "t3", "n": 1, "done": True}, 10)])
    second = runner.run_pass()
    assert second.outputs == {"Out": 1}
    assert second.expired == {}

    # 20 minutes: t1's order is 20m behind → the whole bundle expires (its item too,
    # although no newer item arrived); Bob joins his address; Ann (20m < 1h) waits
    append_events(
        raw,
        [
            _ev("orders", {"txn": "t4", "n": 1, "done": True}, 20),
            _ev("customers", {"id": 2, "name": "Bob"}, 20, key={"id": 2}),
            _ev("addresses", {"customer": 2, "city": "Oslo"}, 20),
        ],
    )
    third = runner.run_pass()
    assert third.expired == {"orders": 1, "items": 1}
    assert third.pending == {"customers": 1, "addresses": 1}
    assert third.cursors[("orders", 0)] == 3
    assert third.cursors[("items", 0)] == 1

    # 70 minutes: Ann's row is more than 1h behind the newest customer, and the address
    # of nobody more than 1h behind the newest address → both expired
    append_events(
        raw,
        [
            _ev("customers", {"id": 3, "name": "Cy"}, 70, key={"id": 3}),
            _ev("addresses", {"customer": 7, "city": "Rome"}, 70),
        ],
    )
    fourth = runner.run_pass()
    assert fourth.expired == {"customers": 1, "addresses": 1}
    assert fourth.pending == {"customers": 1, "addresses": 1}
    assert fourth.cursors[("customers", 0)] == 1  # past Ann (0) and Bob (1), not Cy (2)

    values = [value for *_, value in outputs(spark, lake)]
    assert values == [
        {"records": 2, "first": "orders"},  # t2
        {"records": 1, "first": "orders"},  # t3
        {"records": 1, "first": "orders"},  # t4
        {"name": "Bob", "city": "Oslo"},
    ]
    expired_markers = [(t, o, rule) for t, _, o, rule, status in markers(spark, lake) if status == "expired"]
    assert sorted(expired_markers) == [
        ("addresses", 0, "customer-address"),
        ("customers", 0, "customer-address"),
        ("items", 0, "order-bundle"),
        ("orders", 0, "order-bundle"),
    ]

    gone = runner.expired()
    assert [(r.topic, r.offset, r.rule) for r in gone] == sorted(
        [("addresses", 0, "customer-address"), ("customers", 0, "customer-address"),
         ("items", 0, "order-bundle"), ("orders", 0, "order-bundle")]
    )
    ann = next(r for r in gone if r.topic == "customers")
    assert json.loads(ann.value) == {"id": 1, "name": "Ann"}  # the full record
    assert ann.key == '{"id": 1}'
    assert ann.age is not None
    assert ann.age.total_seconds() == 70 * 60

    # the CLI shows the same, as JSON and as a table
    app = typer.Typer()
    register(app)
    cli = CliRunner()
    shown = cli.invoke(app, ["expired", str(path), "--lake", str(lake.root), "--json"])
    assert shown.exit_code == 0, shown.output
    assert [(r["topic"], r["offset"]) for r in json.loads(shown.output)] == [
        ("addresses", 0), ("customers", 0), ("items", 0), ("orders", 0)
    ]
    table = cli.invoke(app, ["pending", str(path), "--lake", str(lake.root)])
    assert table.exit_code == 0, table.output
    assert "customers" in table.output
    assert "customer-address" in table.output
    ran = cli.invoke(app, ["etl", str(path), "--lake", str(lake.root), "--profile"])
    assert ran.exit_code == 0, ran.output
    assert "nothing new to ETL" in ran.output
    # --profile: where the pass spent its time, one line per phase
    assert "input read by delta-rs from the Delta log" in ran.output
    phases = [line.split()[0] for line in ran.output.splitlines() if line.endswith("%")]
    assert {"refresh", "check", "read"} <= set(phases), ran.output
    assert "spark jobs" in ran.output
