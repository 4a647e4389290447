"""The apply loop (issue 37): bad input refused before anything is written, in one line
that names the table, the output and the key (a key missing from an output's value, a
key that changes type, a table name that is a pool's, a NULL key, a table kept from other
keys); a table with nothing to apply, whose position still moves on; and what the API
serves of the loop (its tables in the status document, its lag as metrics)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from engine.api import Applier, BadOutput, EtlRunner, TableError, TopicTypes, record_rows
from engine.etl.config import EtlConfigError
from engine.etl.config_file import parse_config
from tests.integration.test_etl_support import DEMO, append_events, demo_batch, make_pools

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def demo(tables: list[dict[str, Any]], **rule_sql: str) -> Any:
    data = yaml.safe_load((DEMO / "etl.yaml").read_text())
    data["tables"] = tables
    for name, sql in rule_sql.items():
        rule = next(r for r in data["transforms"] if r.get("name") == name)
        rule["sql"] = sql
    return parse_config(yaml.safe_dump(data, sort_keys=False), source="bad.yaml")


def one_line(exc: BaseException, *words: str) -> str:
    text = str(exc)
    assert "\n" not in text
    for word in words:
        assert word in text, (word, text)
    return text


def test_bad_tables_are_refused_before_anything_is_written(spark, lake) -> None:
    raw, staging = make_pools(lake)
    append_events(raw, demo_batch(1))
    before = staging.version

    # a key the output's values do not have: the ETL refuses before its pass writes
    missing = demo([{"name": "invoices", "from": "NewInvoices", "keys": ["InvoiceID"]}])
    with pytest.raises(EtlConfigError) as refused:
        EtlRunner(missing, lake, spark).run_pass()
    one_line(refused.value, "table 'invoices'", "output 'NewInvoices'", "key 'InvoiceID'")
    assert staging.refresh() == before

    # a name a pool of the lake has
    lake.create_pool("Archive", "raw")
    clash = demo([{"name": "Archive", "from": "NewInvoices", "keys": ["ID"]}])
    with pytest.raises(EtlConfigError) as refused:
        EtlRunner(clash, lake, spark).run_pass()
    one_line(refused.value, "table 'Archive'", "pool 'Archive'")
    with pytest.raises(TableError) as refused:
        Applier(clash, lake).run_once()
    one_line(refused.value, "pool 'Archive'")
    # ... or a pool of the configuration (found when the file is read)
    with pytest.raises(EtlConfigError, match="table 'Raw': pool 'Raw' has this name"):
        demo([{"name": "Raw", "from": "NewInvoices", "keys": ["ID"]}])
    assert staging.refresh() == before

    # the demo's table, applied once: its ID column is a bigint
    good = demo([{"name": "invoices", "from": "NewInvoices", "keys": ["ID"]}])
    EtlRunner(good, lake, spark).run_pass()
    table = lake.root / "invoices"
    # the keys missing from the staged values: the apply refuses too, and creates nothing
    with pytest.raises(TableError) as refused:
        Applier(missing, lake).run_once()
    one_line(refused.value, "table 'invoices'", "output 'NewInvoices'", "key 'InvoiceID'")
    assert not table.exists()
    applier = Applier(good, lake)
    applier.run_once()
    version = _version(table)

    # a rule that makes the key a string: the ETL refuses it (the table holds bigints)
    as_text = demo(
        [{"name": "invoices", "from": "NewInvoices", "keys": ["ID"]}],
        **{"status-update": (
            "SELECT named_struct('ID', CAST(in.value.after.InvoiceID AS STRING)) AS key, "
            "named_struct('ID', CAST(in.value.after.InvoiceID AS STRING), "
            "'invoice_status', in.value.after.status) AS value"
        )},
    )
    staged = staging.refresh()
    with pytest.raises(EtlConfigError) as refused:
        EtlRunner(as_text, lake, spark).run_pass()
    one_line(refused.value, "table 'invoices'", "key 'ID'", "output 'NewInvoices'", "string")
    assert staging.refresh() == staged

    # ... and when string keys were staged all the same (by a configuration without the
    # table), the apply refuses them: the table stays as it was
    _stage(staging, [({"ID": "101"}, {"ID": "101", "invoice_status": "paid"})], key_type="string")
    with pytest.raises(TableError) as refused:
        Applier(good, lake).run_once()
    one_line(refused.value, "table 'invoices'", "key 'ID'", "output 'NewInvoices'", "int64")
    assert _version(table) == version


def test_a_null_key_stops_the_batch_and_other_keys_refuse_the_table(lake) -> None:
    _, staging = make_pools(lake)
    config = demo([{"name": "invoices", "from": "NewInvoices", "keys": ["ID"]}])
    _stage(staging, [({"ID": 1}, {"ID": 1, "customer": "Ann"})])
    applier = Applier(config, lake)
    applier.run_once()
    table = lake.root / "invoices"
    version = _version(table)
    _stage(staging, [({"ID": 2}, {"ID": 2, "customer": "Bob"}), ({"ID": None}, {"customer": "?"})])
    with pytest.raises(BadOutput) as refused:
        applier.run_once()
    one_line(refused.value, "table 'invoices'", "output 'NewInvoices'", "offset 2", "key 'ID'")
    assert _version(table) == version  # not even Bob's row: the batch is whole or not at all

    other_keys = demo([{"name": "invoices", "from": "NewInvoices", "keys": ["ID", "customer"]}])
    with pytest.raises(TableError) as refused:
        Applier(other_keys, lake).run_once()
    one_line(refused.value, "table 'invoices'", "keys ID", "ID, customer")


def _version(path: Any) -> int:
    return DeltaTable(str(path)).version()


_offsets: dict[str, int] = {}


def _stage(staging: Any, records: list[tuple[dict, dict | None]], key_type: str = "bigint") -> None:
    """Outputs of NewInvoices committed to staging as the ETL commits them."""
    from pyspark.sql import types as T

    id_type = T.StringType() if key_type == "string" else T.LongType()
    staging.record_types(
        {
            "NewInvoices": TopicTypes(
                key=T.StructType([T.StructField("ID", id_type)]).json(),
                value=T.StructType(
                    [T.StructField("ID", id_type), T.StructField("customer", T.StringType()),
                     T.StructField("invoice_status", T.StringType())]
                ).json(),
            )
        }
    )
    staging.refresh()
    first = _offsets.get(staging.uri, 0)
    kafka = [
        {"topic": "NewInvoices", "partition": 0, "offset": first + i, "timestamp": datetime.now(UTC)}
        for i in range(len(records))
    ]
    _offsets[staging.uri] = first + len(records)
    rows = record_rows(
        kafka,
        [json.dumps(k, separators=(",", ":")) for k, _ in records],
        [None if v is None else json.dumps(v, separators=(",", ":")) for _, v in records],
    )
    staging.commit_rows(rows, expect_version=staging.version)


def test_a_table_with_nothing_to_apply_moves_its_position_now_and_then(lake) -> None:
    """Staging versions that hold nothing for a table commit nothing to it, until its
    position is ADVANCE_EVERY versions behind: then the position alone, so a restart
    need not read far back. As of any of those versions, the table reflects it."""
    from engine.api import tables_as_of_staging
    from engine.apply.loop import ADVANCE_EVERY

    _, staging = make_pools(lake)
    config = demo([{"name": "invoices", "from": "NewInvoices", "keys": ["ID"]}])
    _stage(staging, [({"ID": 1}, {"ID": 1, "customer": "Ann"})])
    applier = Applier(config, lake)
    applier.run_once()
    table = lake.root / "invoices"
    version = _version(table)
    for n in range(ADVANCE_EVERY // 2):  # another output's commits
        rows = record_rows(
            [{"topic": "Other", "partition": 0, "offset": n, "timestamp": datetime.now(UTC)}],
            ['{"x":1}'], ['{"x":1}'],
        )
        staging.commit_rows(rows, expect_version=staging.refresh())
    assert [r for r in applier.run_once() if r.table_version is not None] == []
    assert _version(table) == version  # nothing committed...
    (status,) = applier.status()
    assert status.applied == staging.version  # ... but the loop knows it is up to date
    assert tables_as_of_staging(lake, staging.version)[0].version == version
    for n in range(ADVANCE_EVERY // 2, ADVANCE_EVERY + 1):
        rows = record_rows(
            [{"topic": "Other", "partition": 0, "offset": n, "timestamp": datetime.now(UTC)}],
            ['{"x":1}'], ['{"x":1}'],
        )
        staging.commit_rows(rows, expect_version=staging.refresh())
    fresh = Applier(config, lake)  # a restart: reads from the position in the table
    assert [r.table_version for r in fresh.run_once()] == [version + 1]
    assert DeltaTable(str(table)).transaction_version("zync.apply/NewInvoices") == staging.version


def test_the_apply_service_in_the_status_document_and_the_metrics(lake) -> None:
    """What the API serves of the apply loop: its tables in its loop's detail and in the
    status document's tables section, its lag and positions as metrics."""
    from engine.api import ApplyService, Observer, ServedProcess
    from engine.serve.metrics import Exposition
    from engine.serve.status_document import document

    _, staging = make_pools(lake)
    config = demo([{"name": "invoices", "from": "NewInvoices", "keys": ["ID"]}])
    _stage(staging, [({"ID": 1}, {"ID": 1, "customer": "Ann"}), ({"ID": 2}, {"ID": 2})])
    service = ApplyService(config, lake, poll_interval=0.05)
    observer = Observer(lake, etls=[config])
    process = ServedProcess("invoices", "apply", loops=lambda: {"apply": service},
                            observer=lambda: observer)
    service.start()
    try:
        deadline = time.monotonic() + 30
        while not service.status().detail or service.status().detail[0].lag != 0:
            assert time.monotonic() < deadline, service.status()
            time.sleep(0.05)
        doc = document(process, ["loops", "tables"])
        (loop,) = doc["loops"]
        assert loop["name"] == "apply"
        assert loop["detail"]["tables"][0]["rows"] == 2
        assert loop["dependencies"]["lake"]["up"] is True
        (table,) = doc["tables"]["tables"]
        assert (table["name"], table["rows"], table["applied"], table["staged"]) == (
            "invoices", 2, staging.version, staging.version
        )
        text = Exposition(process).render().decode()
        assert 'zync_apply_lag_versions{loop="apply",pipeline="invoices",table="invoices"} 0.0' in text
        assert 'zync_table_rows{loop="apply",pipeline="invoices",table="invoices"} 2.0' in text
    finally:
        service.stop()
