"""Tables read together as of a staging version, and source transactions whole at every
table version (issue 37).

Two tables from one staging pool (invoices, and customers from another output), read as
of every staging version V — each at its Delta version that reflects exactly V, a table
with nothing to apply at V included — equal the state of the source at V. A txn rule over
a transaction of three source tables never shows part of one at any table version.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from deltalake import DeltaTable
from typer.testing import CliRunner

from engine.api import Applier, AsOfError, EtlRunner, tables_as_of_staging
from engine.etl.config_file import parse_config
from engine.lake.query import query
from tests.integration.test_etl_debezium_txn import begin, end
from tests.integration.test_etl_support import append_events, make_pools
from zync_tui.commands.query import make_app

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SHOP = """\
name: shop
inputs:
  - {topic: shop.invoices, pool: Raw}
  - {topic: shop.customers, pool: Raw}
outputs:
  - {topic: Invoices, pool: Staging}
  - {topic: Customers, pool: Staging}
transforms:
  - type: stateless
    where: value.op IN ('c', 'u')
    in: shop.invoices
    out: Invoices
    sql: |
      SELECT in.key AS key, named_struct('ID', in.value.after.ID,
             'customer', in.value.after.customer, 'amount', in.value.after.amount) AS value
  - type: stateless
    where: value.op = 'd'
    in: shop.invoices
    out: Invoices
    sql: SELECT in.key AS key, NULL AS value
  - type: stateless
    where: value.op IN ('c', 'u')
    in: shop.customers
    out: Customers
    sql: |
      SELECT named_struct('customer', in.value.after.name) AS key,
             named_struct('customer', in.value.after.name, 'city', in.value.after.city) AS value
tables:
  - {name: invoices, from: Invoices, keys: [ID]}
  - {name: customers, from: Customers, keys: [customer]}
"""


def event(topic: str, op: str, row: dict, key: str = "ID") -> dict:
    after = None if op == "d" else row
    return {"topic": topic, "key": {key: row[key]},
            "value": {"before": None, "after": after, "op": op, "ts_ms": 0}}


def invoice(op: str, id_: int, customer: str = "", amount: int = 0) -> dict:
    return event("shop.invoices", op, {"ID": id_, "customer": customer, "amount": amount})


def customer(op: str, name: str, city: str) -> dict:
    return event("shop.customers", op, {"name": name, "city": city}, key="name")


#: Batches, and whether the apply loop runs after each (it catches up two at once too).
BATCHES = [
    ([invoice("c", 1, "ann", 10), invoice("c", 2, "bob", 20), customer("c", "ann", "Oslo")], True),
    ([customer("c", "bob", "Rome")], False),  # customers only
    ([invoice("u", 1, "ann", 15)], True),  # invoices only
    # (a batch's events of a topic type it: one with only deletes would type `after` text)
    ([invoice("d", 2), invoice("u", 1, "ann", 16), customer("u", "ann", "Paris")], False),
    ([invoice("r", 9, "x", 1)], True),  # no rule takes a snapshot read: no output
    ([invoice("c", 3, "cy", 30), invoice("u", 3, "cy", 35)], True),
]


class Source:
    def __init__(self) -> None:
        self.invoices: dict[int, tuple] = {}
        self.customers: dict[str, tuple] = {}

    def apply(self, events: list[dict]) -> None:
        for e in events:
            value = e["value"]
            if value["op"] not in ("c", "u", "d"):
                continue  # the configuration keeps creates, updates and deletes
            if e["topic"] == "shop.invoices":
                key = e["key"]["ID"]
                if value["op"] == "d":
                    self.invoices.pop(key, None)
                else:
                    a = value["after"]
                    self.invoices[key] = (a["ID"], a["customer"], a["amount"])
            elif value["op"] != "d":
                a = value["after"]
                self.customers[a["name"]] = (a["name"], a["city"])

    def state(self) -> tuple[dict, dict]:
        return dict(self.invoices), dict(self.customers)


def read_at(lake: Any, name: str, version: int) -> dict:
    table = DeltaTable(str(lake.root / name), version=version).to_pyarrow_table()
    return {row[table.column_names[0]]: tuple(row.values()) for row in table.to_pylist()}


def test_two_tables_read_as_of_every_staging_version(spark, lake) -> None:
    raw, staging = make_pools(lake)
    config = parse_config(SHOP, source="shop.yaml")
    runner = EtlRunner(config, lake, spark)
    applier = Applier(config, lake, versions_per_commit=1)
    source = Source()
    expected: list[tuple[int, tuple[dict, dict]]] = []
    for events, apply_now in BATCHES:
        append_events(raw, events)
        source.apply(events)
        assert runner.run_pass().committed
        expected.append((staging.refresh(), source.state()))
        if apply_now:
            applier.run_once()

    for version in range(staging.version + 1):
        at = {t.name: t.version for t in tables_as_of_staging(lake, version)}
        state = ({}, {})
        for staged, then in expected:
            if staged <= version:
                state = then
        assert read_at(lake, "invoices", at["invoices"]) == state[0], version
        assert read_at(lake, "customers", at["customers"]) == state[1], version

    # zync query reads them together as of one staging version (and staging with them)
    middle = expected[2][0]
    found = {t.name: t.version for t in tables_as_of_staging(lake, middle)}
    df, catalog = query(
        spark,
        lake,
        "SELECT i.ID, c.city FROM invoices i JOIN customers c USING (customer) ORDER BY i.ID",
        tables_at=found,
        pool_at=("Staging", middle),
    )
    assert [tuple(r) for r in df.collect()] == [(1, "Oslo"), (2, "Rome")]
    assert {(t.name, t.version) for t in catalog.tables} == set(found.items())
    now, _ = query(spark, lake, "SELECT count(*) AS n FROM invoices")  # the view is gone
    assert now.first()["n"] == len(source.invoices)
    # ... and so does `zync query --as-of-staging`
    cli = CliRunner().invoke(
        make_app(),
        ["query", "--lake", str(lake.root), "--as-of-staging", f"Staging:{middle}", "-f", "json",
         "SELECT count(*) AS n FROM invoices"],
    )
    assert cli.exit_code == 0, cli.output
    assert '{"n":2}' in cli.stdout
    assert f"as of Staging version {middle}: customers at version" in cli.stderr

    # a staging version with outputs the table has not applied yet: refused in one line
    append_events(raw, [invoice("c", 4, "dee", 40)])
    runner.run_pass()
    with pytest.raises(AsOfError, match=r"table 'invoices' has not applied staging version \d+ yet"):
        tables_as_of_staging(lake, staging.refresh())
    refused = CliRunner().invoke(
        make_app(), ["query", "--lake", str(lake.root), "--as-of-staging", str(staging.version), "SELECT 1"]
    )
    assert refused.exit_code == 1
    assert "has not applied staging version" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    # applied together with a later version in one commit: that version is not kept
    first = staging.version
    append_events(raw, [invoice("u", 4, "dee", 45)])
    runner.run_pass()
    Applier(config, lake).run_once()
    with pytest.raises(AsOfError, match="in one commit .* reflects staging version"):
        tables_as_of_staging(lake, first)
    assert read_at(lake, "invoices", tables_as_of_staging(lake, staging.refresh())[1].version)[4] == (
        4, "dee", 45
    )


ORDERS, LINES, PEOPLE = "shop.public.orders", "shop.public.order_lines", "shop.public.people"
TX = "shop.transaction"
TXN_CONFIG = f"""\
name: shop-transactions
inputs:
  - {{topic: {ORDERS}, pool: Raw}}
  - {{topic: {LINES}, pool: Raw}}
  - {{topic: {PEOPLE}, pool: Raw}}
  - {{topic: {TX}, pool: Raw}}
outputs:
  - {{topic: Rows, pool: Staging}}
transforms:
  - type: txn
    in: [{ORDERS}, {LINES}, {PEOPLE}]
    complete-when: debezium
    transaction-topic: {TX}
    out: Rows
    sql: |
      SELECT inline(transform(bundle.records, r -> named_struct(
               'key', named_struct('source', r.kafka.topic, 'id', r.value.after.id),
               'value', named_struct('source', r.kafka.topic, 'id', r.value.after.id,
                                     'txn', bundle.txn_id, 'size', size(bundle.records)))))
tables:
  - {{name: shop_rows, from: Rows, keys: [source, id]}}
"""


def change(topic: str, txn: str, order: int, row: dict) -> dict:
    """A Debezium change event with transaction metadata, no more fields than needed (a
    pool records every topic's type in a description of at most 4,000 characters)."""
    return {
        "topic": topic,
        "key": {"id": row["id"]},
        "value": {"after": row, "op": "c",
                  "transaction": {"id": txn, "total_order": order, "data_collection_order": order}},
    }


def test_a_source_transaction_is_never_half_visible(spark, lake) -> None:
    """Each transaction writes an order, its lines and its customer; their events arrive
    interleaved over several batches. At every version of the table (read with
    VERSION AS OF), each transaction's rows are all there or none is."""
    raw, _ = make_pools(lake)
    config = parse_config(TXN_CONFIG, source="txn.yaml")
    runner = EtlRunner(config, lake, spark)
    applier = Applier(config, lake)
    sizes: dict[str, int] = {}

    def transaction(n: int, lines: int) -> list[dict]:
        txn = f"tx{n}"
        sizes[txn] = lines + 2
        events = [begin(txn), change(ORDERS, txn, 1, {"id": n})]
        events += [change(LINES, txn, 2 + i, {"id": 100 * n + i}) for i in range(lines)]
        events += [change(PEOPLE, txn, 2 + lines, {"id": 1000 + n})]
        return [*events, end(txn, orders=1, order_lines=lines, people=1)]

    # batch n: the second half of transaction n-1's events, then the first half of n's
    halves = []
    for n in range(1, 9):
        events = transaction(n, 1 + n % 3)
        halves.append((events[: len(events) // 2], events[len(events) // 2 :]))
    batches = [halves[0][0]]
    batches += [second + first for (_, second), (first, _) in zip(halves, halves[1:], strict=False)]
    batches.append(halves[-1][1])
    for n, batch in enumerate(batches):
        append_events(raw, batch)
        runner.run_pass()
        if n != 4:  # once, two passes' commits go in one table commit
            applier.run_once()

    path = (lake.root / "shop_rows").resolve().as_uri()
    last = DeltaTable(str(lake.root / "shop_rows")).version()
    seen_whole: set[str] = set()
    growth = []
    for version in range(last + 1):
        rows = spark.sql(f"SELECT txn FROM delta.`{path}` VERSION AS OF {version}").collect()
        counts = Counter(r["txn"] for r in rows)
        for txn, n in counts.items():
            assert n == sizes[txn], f"version {version}: {n} of {sizes[txn]} rows of {txn}"
        seen_whole |= set(counts)
        growth.append(len(counts))
    assert seen_whole == set(sizes)  # every transaction arrived, whole
    assert len(set(growth)) >= 4, growth  # they arrived over several table versions
