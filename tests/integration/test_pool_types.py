"""Where a pool keeps its topics' types: type files its Delta log names, not its
description (which delta-rs caps at 4,000 characters: four small topics, or one wide
Debezium topic). Hundreds of wide topics, a schema widened twenty times, the upgrade of a
lake made by the previous code, vacuum, and errors that say what happened."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from engine.api import EtlRunner, load_config
from engine.lake import maintenance
from engine.lake.pool_errors import PoolError
from engine.lake.pools import Lake
from engine.lake.topic_types import TYPES_DIR, TYPES_PROPERTY, TopicTypes
from tests.integration.test_etl_support import DEMO, append_events, demo_batch, outputs

pytestmark = pytest.mark.integration

#: A lake the previous writer made (zync at bced9fa: demo/invoices/walk.py's ingest and
#: one ETL pass for each of batches 1 and 2), types in the pools' descriptions.
LEGACY_LAKE = Path(__file__).resolve().parents[1] / "fixtures" / "lake-bced9fa"


def wide_value(table: int, columns: int = 60):
    """A Debezium value type of a ``columns``-wide table with a Postgres ``source``."""
    from pyspark.sql import types as T

    kinds = [T.LongType(), T.StringType(), T.DoubleType(), T.TimestampType(), T.BooleanType()]
    row = T.StructType(
        [T.StructField(f"t{table}_c{i:02d}", kinds[i % len(kinds)]) for i in range(columns)]
    )
    source = T.StructType(
        [
            T.StructField(name, T.LongType() if name.startswith(("ts_", "txId", "lsn")) else T.StringType())
            for name in (
                "version", "connector", "name", "ts_ms", "snapshot", "db", "sequence",
                "ts_us", "ts_ns", "schema", "table", "txId", "lsn", "xmin",
            )
        ]
    )  # fmt: skip
    return T.StructType(
        [
            T.StructField("before", row),
            T.StructField("after", row),
            T.StructField("source", source),
            T.StructField("op", T.StringType()),
            T.StructField("ts_ms", T.LongType()),
        ]
    )


def test_hundreds_of_wide_topics_fit_and_the_metadata_stays_small(lake: Lake) -> None:
    pool = lake.create_pool("Raw")
    key = '{"fields":[{"metadata":{},"name":"id","nullable":false,"type":"long"}],"type":"struct"}'
    wanted = {f"db.inventory.t{i:03d}": TopicTypes(key, wide_value(i).json()) for i in range(200)}
    # from-kafka records a batch's topics at once; a later batch brings more
    assert pool.record_types(dict(list(wanted.items())[:120]))
    assert pool.record_types(dict(list(wanted.items())[120:]))
    reopened = lake.open_pool("Raw")
    assert reopened.meta.types == wanted
    assert reopened.spark_types("db.inventory.t007")[1] == wide_value(7)
    metadata = DeltaTable(str(lake.pool_path("Raw"))).metadata()
    assert len(metadata.description) + sum(map(len, metadata.configuration.values())) < 300
    # one file per distinct type (the 200 keys are one) and an index per change
    files = sorted(p.name for p in (lake.pool_path("Raw") / TYPES_DIR).iterdir())
    assert sum(not f.startswith("index-") for f in files) == 201
    assert sum(f.startswith("index-") for f in files) == 2


@pytest.mark.spark
def test_a_schema_widened_twenty_times_merges_and_queries_see_every_column(
    spark, lake: Lake
) -> None:
    from engine.lake.query import query

    pool = lake.create_pool("Raw")
    for version in range(1, 21):
        # each version adds a column (the connector's schema after an ALTER TABLE ADD)
        value = {"id": version, **{f"added_{n:02d}": f"v{version}" for n in range(1, version + 1)}}
        append_events(pool, [{"topic": "orders", "key": {"id": version}, "value": value}])
    value_type = lake.open_pool("Raw").spark_types("orders")[1]
    assert value_type.fieldNames() == ["id", *(f"added_{n:02d}" for n in range(1, 21))]
    frame, _ = query(
        spark, lake, "SELECT value.id, value.added_01, value.added_20 FROM Raw ORDER BY seqno"
    )
    got = [tuple(r) for r in frame.collect()]
    assert got[0] == (1, "v1", None)
    assert got[-1] == (20, "v20", "v20")


def test_a_failure_that_is_not_a_conflict_stops_at_once_naming_it(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a concurrent change of the metadata is retried: a validation failure (what
    delta-rs said of a description over 4,000 characters) is reported once, as itself."""
    from deltalake.table import TableAlterer

    pool = lake.create_pool("Raw")
    calls = []

    def refuse(self, *args, **kwargs) -> None:
        calls.append(args)
        raise DeltaError("Table metadata is invalid: description: Table description cannot exceed 4000 characters")

    monkeypatch.setattr(TableAlterer, "set_table_properties", refuse)
    with pytest.raises(PoolError) as caught:
        pool.record_types({"t": TopicTypes(value='"long"')})
    assert len(calls) == 1
    message = str(caught.value)
    assert message.startswith("pool 'Raw': cannot record its topics' types: Table metadata is invalid")
    assert "conflict" not in message


def test_vacuum_keeps_the_type_files(lake: Lake) -> None:
    pool = lake.create_pool("Raw")
    pool.record_types({"t": TopicTypes(value='"long"')})
    pool.record_types({"t": TopicTypes(value='"string"')})  # long → string: a second index
    dry = maintenance.vacuum(pool, retention_hours=0, dry_run=True, enforce_retention=False)
    assert not [f for f in dry.files if f.startswith("_zync")]
    maintenance.vacuum(pool, retention_hours=0, enforce_retention=False)
    assert lake.open_pool("Raw").topic_types("t") == TopicTypes(value='"string"')


@pytest.mark.spark
def test_a_lake_made_by_the_previous_code_upgrades_ingests_and_passes(
    spark, tmp_path: Path
) -> None:
    shutil.copytree(LEGACY_LAKE, tmp_path / "lake")
    lake = Lake(tmp_path / "lake")
    before = DeltaTable(str(lake.pool_path("Raw"))).metadata()
    assert '"types": {"InvoiceStatus"' in before.description
    assert TYPES_PROPERTY not in before.configuration

    raw = lake.open_pool("Raw")
    after = DeltaTable(str(lake.pool_path("Raw"))).metadata()
    assert TYPES_PROPERTY in after.configuration
    assert "types" not in after.description.replace("_zync/types", "")
    assert set(raw.meta.types) == {"Invoices", "InvoiceStatus"}
    assert not raw.meta.legacy
    version = raw.version
    assert lake.open_pool("Raw").version == version  # upgraded once

    runner = EtlRunner(load_config(DEMO / "etl.yaml"), lake, spark)
    append_events(raw, demo_batch(3))
    assert runner.run_pass().outputs == {"NewInvoices": 2}
    append_events(raw, demo_batch(4))
    runner.run_pass()
    rows = outputs(spark, lake)
    assert [offset for _, offset, _, _ in rows] == list(range(8))
    assert [value["ID"] for *_, value in rows] == [101, 100, 102, 103, 100, 103, 102, 101]
    staging = lake.open_pool("Staging")
    assert not staging.meta.legacy
    assert set(staging.spark_types("NewInvoices")[1].fieldNames()) == {
        "ID", "customer", "item", "invoice_status",
    }  # fmt: skip
