"""The invoice scenario applied to Delta tables (issue 37): after every batch, the current
state table equals the state computed here from the Debezium events themselves (updates,
a delete, a recreate), the history table holds every version with its validity, and
readers that are not zync — delta-spark, delta-rs, polars, Spark's change feed — see it.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest
import yaml
from deltalake import DeltaTable

from engine.api import Applier, EtlRunner, Observer
from engine.etl.config_file import parse_config
from engine.lake.query import query
from tests.integration.test_etl_support import DEMO, append_events, demo_batch, make_pools

pytestmark = [pytest.mark.integration, pytest.mark.spark]

COLUMNS = ("ID", "customer", "item", "invoice_status")


def demo_with(tables: list[dict[str, Any]]) -> Any:
    """demo/invoices/etl.yaml with these tables."""
    data = yaml.safe_load((DEMO / "etl.yaml").read_text())
    data["tables"] = tables
    return parse_config(yaml.safe_dump(data, sort_keys=False), source="demo+tables.yaml")


def debezium(topic: str, op: str, before: dict | None, after: dict | None) -> dict:
    return {
        "topic": topic,
        "key": {"ID": (after or before)["ID"]},
        "value": {"before": before, "after": after, "op": op, "ts_ms": 1_714_560_000_000,
                  "source": {"table": topic}},
    }


ALICE = {"ID": 100, "customer": "Alice", "item": "taco"}
BOB = {"ID": 101, "customer": "Bob", "item": "burrito"}
STATUS_77 = {"ID": 77, "InvoiceID": 102, "status": "paid"}

#: After the demo's four batches: Alice's order changes, Bob's invoice is deleted (with
#: Debezium's tombstone after it), then Bob's invoice number comes back for Bea with a
#: status row of its own, and Charlie's invoice is refunded.
MORE_BATCHES = [
    [
        debezium("Invoices", "u", ALICE, {**ALICE, "item": "two tacos"}),
        debezium("Invoices", "d", BOB, None),
        {"topic": "Invoices", "key": {"ID": 101}, "value": None},
    ],
    [
        debezium("Invoices", "c", None, {"ID": 101, "customer": "Bea", "item": "tamale"}),
        debezium("InvoiceStatus", "c", None, {"ID": 81, "InvoiceID": 101, "status": "new"}),
        debezium("InvoiceStatus", "u", STATUS_77, {**STATUS_77, "status": "refunded"}),
    ],
]


class SourceDatabase:
    """The two source tables, as the Debezium events change them, and the invoices they
    make: each invoice with the status of its most recently changed status row."""

    def __init__(self) -> None:
        self.invoices: dict[int, dict] = {}
        self.statuses: dict[int, tuple[int, dict]] = {}
        self.clock = 0

    def apply(self, events: list[dict]) -> None:
        for event in events:
            value = event["value"]
            if value is None:
                continue  # Debezium's tombstone: the delete came before it
            self.clock += 1
            rows = self.invoices if event["topic"] == "Invoices" else self.statuses
            key = (value["after"] or value["before"])["ID"]
            if value["op"] == "d":
                rows.pop(key, None)
            elif rows is self.invoices:
                self.invoices[key] = value["after"]
            else:
                self.statuses[key] = (self.clock, value["after"])

    def state(self) -> dict[int, tuple]:
        latest: dict[int, tuple[int, str]] = {}
        for clock, row in self.statuses.values():
            if row["InvoiceID"] not in latest or clock > latest[row["InvoiceID"]][0]:
                latest[row["InvoiceID"]] = (clock, row["status"])
        return {
            invoice_id: (invoice_id, row["customer"], row["item"], latest[invoice_id][1])
            for invoice_id, row in self.invoices.items()
            if invoice_id in latest
        }


def rows_of(table: Any) -> dict[int, tuple]:
    return {r["ID"]: tuple(r[c] for c in COLUMNS) for r in table.to_pylist()}


def expected_history(states: list[tuple[int, dict[int, tuple]]]) -> set[tuple]:
    """Every version of every key: (row..., valid_from_version, valid_to_version,
    is_current) from the states after each staging version."""
    found: dict[int, list[list]] = {}
    previous: dict[int, tuple] = {}
    for version, state in states:
        for key in previous.keys() | state.keys():
            before, now = previous.get(key), state.get(key)
            if before == now:
                continue
            versions = found.setdefault(key, [])
            if versions and versions[-1][-1] is None:
                versions[-1][-1] = version  # the open version ends here
            if now is not None:
                versions.append([*now, version, None])
        previous = state
    return {(*v[:-1], v[-1], v[-1] is None) for versions in found.values() for v in versions}


def test_invoice_scenario_as_current_state_and_history(spark, lake) -> None:
    raw, staging = make_pools(lake)
    config = demo_with(
        [
            {"name": "invoices", "from": "NewInvoices", "keys": ["ID"]},
            {"name": "invoice_history", "from": "NewInvoices", "keys": ["ID"], "history": True},
        ]
    )
    runner = EtlRunner(config, lake, spark)
    applier = Applier(config, lake)
    source = SourceDatabase()
    path = str(lake.root / "invoices")
    states: list[tuple[int, dict[int, tuple]]] = []
    snapshots: dict[int, dict[int, tuple]] = {}
    for events in [demo_batch(n) for n in (1, 2, 3, 4)] + MORE_BATCHES:
        append_events(raw, events)
        source.apply(events)
        passed = runner.run_pass()
        assert passed.committed
        applied = applier.run_once()
        assert {r.table for r in applied if r.table_version is not None} == {
            "invoices", "invoice_history"
        }
        current = DeltaTable(path)
        assert rows_of(current.to_pyarrow_table()) == source.state()
        states.append((passed.staging_version, source.state()))
        snapshots[current.version()] = source.state()
    assert source.state()[101] == (101, "Bea", "tamale", "new")  # recreated, not Bob's
    assert source.state()[100] == (100, "Alice", "two tacos", "closed")

    history = DeltaTable(str(lake.root / "invoice_history")).to_pyarrow_table().to_pylist()
    got = {
        (*(r[c] for c in COLUMNS), r["valid_from_version"], r["valid_to_version"], r["is_current"])
        for r in history
    }
    assert got == expected_history(states)
    assert len(history) == len(got)
    # validity times are the staging commits' own
    commit_times = {
        int(e["version"]): e["timestamp"]
        for e in DeltaTable(str(staging.path)).history()
        if "version" in e
    }
    for row in history:
        assert int(row["valid_from"].timestamp() * 1000) == commit_times[row["valid_from_version"]]
    assert {r["ID"] for r in history if r["is_current"]} == set(source.state())

    # nothing new: no commit; each staging version was applied once, in order
    assert [r for r in applier.run_once() if r.table_version is not None] == []
    for table in applier.tables:
        assert table.target.table is not None
        commits = table.target.table.applied_commits()
        assert commits[0].first == 0
        assert all(a.last + 1 == b.first for a, b in zip(commits, commits[1:], strict=False))
        assert commits[-1].last == table.target.table.applied() == staging.refresh()

    # what the console shows: each table's version, rows and the staging version applied
    report = Observer(lake, etls=[config]).tables()
    assert report.error is None
    seen = {t.name: t for t in report.tables}
    assert seen["invoices"].rows == len(source.state())
    assert seen["invoice_history"].rows == len(history)
    for t in seen.values():
        assert (t.applied, t.staged, t.lag) == (staging.version, staging.version, 0)
        assert t.version == DeltaTable(t.location).version()

    _readers_see_it(spark, lake, path, snapshots)


def _readers_see_it(spark: Any, lake: Any, path: str, snapshots: dict[int, dict[int, tuple]]) -> None:
    """delta-spark, delta-rs, polars, Spark's change feed and zync query read the table."""
    by_spark = {
        r["ID"]: tuple(r[c] for c in COLUMNS) for r in spark.read.format("delta").load(path).collect()
    }
    by_polars = rows_of(pl.read_delta(path).to_arrow())
    assert by_spark == by_polars == rows_of(DeltaTable(path).to_pyarrow_table())

    # Spark's change feed between two versions is exactly what each commit changed
    first, last = min(snapshots), max(snapshots)
    feed = (
        spark.read.format("delta").option("readChangeFeed", "true")
        .option("startingVersion", first).option("endingVersion", last).load(path).collect()
    )
    for version in range(first, last + 1):
        before = snapshots.get(version - 1, {})
        after = snapshots[version]
        changes = {(r["_change_type"], tuple(r[c] for c in COLUMNS)) for r in feed
                   if r["_commit_version"] == version}
        wanted = {("insert", after[k]) for k in after.keys() - before.keys()}
        wanted |= {("delete", before[k]) for k in before.keys() - after.keys()}
        for key in after.keys() & before.keys():
            if after[key] != before[key]:
                wanted |= {("update_preimage", before[key]), ("update_postimage", after[key])}
        assert changes == wanted, version

    # zync query sees the table by name: rows, time travel, its history, its feed
    df, catalog = query(spark, lake, "SELECT * FROM invoices ORDER BY ID")
    assert [tuple(r) for r in df.collect()] == sorted(snapshots[last].values())
    assert "invoices" in [t.name for t in catalog.tables]
    old, _ = query(spark, lake, f"SELECT count(*) AS n FROM invoices VERSION AS OF {first}")
    assert old.first()["n"] == len(snapshots[first])
    described, _ = query(spark, lake, "DESCRIBE HISTORY invoices")
    notes = [r["userMetadata"] for r in described.collect() if r["operation"] == "MERGE"]
    assert len(notes) == len(snapshots)
    assert all(n.startswith("zync apply: Staging versions ") for n in notes)
    fed, _ = query(spark, lake, f"SELECT count(*) AS n FROM table_changes('invoices', {last})")
    assert fed.first()["n"] == sum(1 for r in feed if r["_commit_version"] == last)
    pools, _ = query(spark, lake, "SELECT count(*) AS n FROM Staging")
    assert pools.first()["n"] > 0  # the pools are still there beside it


def test_a_status_update_keeps_the_rest_and_a_field_written_null_clears_it(spark, lake) -> None:
    """An output that names only some fields updates only those; a rule that writes a
    field as NULL sets it to NULL (how a user says "set to NULL")."""
    raw, _ = make_pools(lake)
    data = yaml.safe_load((DEMO / "etl.yaml").read_text())
    # the status rule also clears `item` when an invoice is closed
    data["transforms"][1]["sql"] = (
        "SELECT named_struct('ID', in.value.after.InvoiceID) AS key, "
        "named_struct('ID', in.value.after.InvoiceID, 'invoice_status', in.value.after.status, "
        "'item', CASE WHEN in.value.after.status = 'closed' THEN CAST(NULL AS STRING) END) AS value"
    )
    data["tables"] = [{"name": "invoices", "from": "NewInvoices", "keys": ["ID"]}]
    config = parse_config(yaml.safe_dump(data), source="clear.yaml")
    runner = EtlRunner(config, lake, spark)
    applier = Applier(config, lake)
    for n in (1, 2, 3):
        append_events(raw, demo_batch(n))
        runner.run_pass()
    applier.run_once()
    rows = rows_of(DeltaTable(str(lake.root / "invoices")).to_pyarrow_table())
    assert rows[100] == (100, "Alice", None, "closed")  # written NULL: cleared
    assert rows[101] == (101, "Bob", "burrito", "pending")
    staged = [json.loads(v) for v in _staged_values(lake) if v and '"closed"' in v]
    assert staged == [{"ID": 100, "invoice_status": "closed", "item": None}]


def _staged_values(lake: Any) -> list[str | None]:
    table = DeltaTable(str(lake.root / "Staging")).to_pyarrow_table(columns=["value", "marker"])
    return [r["value"] for r in table.to_pylist() if r["marker"] is None]
