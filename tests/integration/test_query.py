"""`zync query`: pools as typed Spark views, dead-letter views, time travel, and the same
rows as any other Delta reader (deltalake, polars)."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from engine.kafka.codecs import avro
from engine.kafka.typemap.to_spark import avro_to_spark
from engine.lake.pool_record import DEADLETTER_TYPE, KAFKA_TYPE, MARKER_TYPE, ROW_SCHEMA
from engine.lake.pools import Lake
from engine.lake.query import QueryError, query, register_pools
from engine.lake.topic_types import TopicTypes
from tests.fixtures import debezium as dbz

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def debezium_rows(topic: str, offsets: range, *, dead: frozenset[int] = frozenset()) -> pa.Table:
    value_schema = avro.AvroSchema(dbz.AVRO_VALUE_SCHEMA)
    rnd = random.Random(offsets.start)
    kafka, keys, values, dls = [], [], [], []
    for o in offsets:
        kafka.append({"topic": topic, "partition": 0, "offset": o, "timestamp": None})
        if o in dead:
            keys.append(None)
            values.append(None)
            dls.append({"stage": "decode", "error": "value: bad-magic: ...", "key_bytes": None,
                        "value_bytes": b"{oops"})
            continue
        body = avro.encode(1, value_schema.parsed, dbz.event(o, "c", rnd))[5:]
        keys.append(json.dumps({"ID": o}))
        values.append(value_schema.decode_json(body))
        dls.append(None)
    return pa.table(
        {
            "kafka": pa.array(kafka, KAFKA_TYPE),
            "key": pa.array(keys, pa.string()),
            "value": pa.array(values, pa.string()),
            "deadletter": pa.array(dls, DEADLETTER_TYPE),
            "marker": pa.nulls(len(kafka), MARKER_TYPE),
        },
        schema=ROW_SCHEMA,
    )


@pytest.fixture
def filled(lake: Lake) -> Lake:
    pool = lake.create_pool("raw-cdc")
    pool.record_types(
        {
            "invoices": TopicTypes(
                key=avro_to_spark(dbz.AVRO_KEY_SCHEMA).json(),
                value=avro_to_spark(dbz.AVRO_VALUE_SCHEMA).json(),
            )
        }
    )  # version 1
    pool.append_records(debezium_rows("invoices", range(0, 10), dead=frozenset({3})), {("invoices", 0): 9})
    pool.append_records(debezium_rows("invoices", range(10, 25)), {("invoices", 0): 24})
    return lake


def test_pools_are_typed_views_with_dead_letters_and_time_travel(spark, filled: Lake) -> None:
    df, catalog = query(
        spark, filled,
        "SELECT value.after.ID AS id, value.after.amount AS amount, key.ID AS key_id "
        "FROM raw_cdc WHERE value.op = 'c' ORDER BY id",
    )
    rows = df.collect()
    assert [r.id for r in rows] == [i for i in range(25) if i != 3]
    assert all(r.key_id == r.id for r in rows)
    assert str(df.schema["amount"].dataType) == "DecimalType(10,2)"  # from the Avro schema
    assert catalog.names() == ["raw_cdc", "raw_cdc_deadletters"]

    dead = spark.sql("SELECT kafka.offset, stage, error, value_bytes FROM raw_cdc_deadletters").collect()
    assert [(d.offset, d.stage, bytes(d.value_bytes)) for d in dead] == [(3, "decode", b"{oops")]

    # version 2 is the first data commit: 10 rows, one of them a dead letter
    old, _ = query(spark, filled, "SELECT count(*) AS n FROM raw_cdc", as_of=2)
    assert old.first().n == 9
    catalog = register_pools(spark, filled, as_of=7)
    assert "has no version 7 (its versions are 0 to 3)" in catalog.skipped["raw-cdc"]
    with pytest.raises(QueryError, match="has no version 7"):
        query(spark, filled, "SELECT * FROM raw_cdc", as_of=7)
    with pytest.raises(QueryError, match="TABLE_OR_VIEW_NOT_FOUND.*views: raw_cdc"):
        query(spark, filled, "SELECT * FROM nope")


def test_query_shows_the_same_rows_as_deltalake_and_polars(spark, filled: Lake) -> None:
    path = str(filled.pool_path("raw-cdc"))
    by_polars = pl.read_delta(path).filter(pl.col("deadletter").is_null())
    expected = sorted(
        (r["seqno"], r["kafka"]["topic"], r["kafka"]["offset"], json.loads(r["value"])["after"]["ID"],
         json.loads(r["key"])["ID"])
        for r in by_polars.to_dicts()
    )
    df, _ = query(spark, filled, "SELECT seqno, kafka, value, key FROM raw_cdc")
    got = sorted((r.seqno, r.kafka.topic, r.kafka.offset, r.value.after.ID, r.key.ID) for r in df.collect())
    assert got == expected
    assert len(got) == 24

    from deltalake import DeltaTable

    by_deltalake = DeltaTable(path).to_pyarrow_table()
    assert by_deltalake.num_rows == 25  # the records and the dead letter
    assert sorted(by_deltalake.column("seqno").to_pylist()) == list(range(25))


def test_query_command_formats(spark, filled: Lake) -> None:
    from zync_tui.commands.query import make_app

    runner = CliRunner()
    env = {"ZYNC_LAKE": str(filled.root)}
    sql = "SELECT seqno, value.after.ID AS id, value.after.item AS item FROM raw_cdc ORDER BY seqno LIMIT 3"
    as_json = runner.invoke(make_app(), ["query", sql, "--format", "json"], env=env)
    assert as_json.exit_code == 0, as_json.output
    lines = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [line["id"] for line in lines] == [0, 1, 2]
    assert "item" in lines[0]  # nulls are kept

    as_csv = runner.invoke(make_app(), ["query", sql, "-f", "csv"], env=env)
    assert as_csv.exit_code == 0, as_csv.output
    assert list(csv.reader(io.StringIO(as_csv.stdout)))[0] == ["seqno", "id", "item"]

    table = runner.invoke(make_app(), ["query", "SELECT count(*) AS n FROM raw_cdc", "--as-of", "2"], env=env)
    assert table.exit_code == 0, table.output
    assert "9" in table.stdout

    bad = runner.invoke(make_app(), ["query", "SELECT value.nope FROM raw_cdc"], env=env)
    assert bad.exit_code == 1
    assert "error:" in bad.output
    assert "nope" in bad.output
    assert len(bad.output.strip().splitlines()) == 1


def test_an_empty_lake_and_a_foreign_table(spark, tmp_path: Path) -> None:
    from deltalake import write_deltalake

    lake = Lake(tmp_path / "lake")
    lake.create_pool("empty")
    write_deltalake(str(lake.root / "foreign"), pa.table({"id": [1]}))
    df, catalog = query(spark, lake, "SELECT count(*) AS n FROM empty")
    assert df.first().n == 0
    assert "not a zync pool" in catalog.skipped["foreign"]


# --------------------------------------------------------------------------- Delta SQL on pools


def _tick() -> None:
    """Wait until the clock has moved on a few milliseconds (commit times differ)."""
    import time

    start = time.time()
    while time.time() < start + 0.01:
        time.sleep(0.002)


def test_version_as_of_per_reference_with_the_typed_envelope(spark, filled: Lake) -> None:
    # versions: 0 created, 1 types, 2 offsets 0..9 (3 a dead letter), 3 offsets 10..24
    def rows(sql: str) -> list[tuple]:
        df, _ = query(spark, filled, sql)
        return [tuple(r) for r in df.collect()]

    assert rows("SELECT count(*) FROM raw_cdc VERSION AS OF 2") == [(9,)]
    assert rows("SELECT count(*) FROM `raw-cdc` FOR VERSION AS OF '3'") == [(24,)]
    assert rows("SELECT count(*) FROM raw_cdc_deadletters VERSION AS OF 2") == [(1,)]
    # the name as written still qualifies columns; value.after.ID is typed
    assert rows(
        "SELECT raw_cdc.value.after.ID FROM raw_cdc VERSION AS OF 2 "
        "WHERE raw_cdc.value.after.ID > 7 ORDER BY 1"
    ) == [(8,), (9,)]
    # a diff between two versions of the same pool, with aliases
    new = rows(
        "SELECT n.value.after.ID FROM raw_cdc VERSION AS OF 3 n "
        "LEFT ANTI JOIN raw_cdc VERSION AS OF 2 AS o ON n.seqno = o.seqno ORDER BY 1"
    )
    assert new == [(i,) for i in range(10, 25)]
    # inside string literals and comments nothing is read as a reference
    assert rows(
        "SELECT 'raw_cdc VERSION AS OF 99' AS s /* raw_cdc VERSION AS OF 98 */ FROM raw_cdc -- x\n"
        "LIMIT 1"
    ) == [("raw_cdc VERSION AS OF 99",)]
    # --as-of still reads every pool at one version, and a reference overrides it
    df, _ = query(spark, filled, "SELECT (SELECT count(*) FROM raw_cdc), "
                                 "(SELECT count(*) FROM raw_cdc VERSION AS OF 3)", as_of=2)
    assert tuple(df.first()) == (9, 24)
    # internal views do not outlive the query (listed by SQL: Spark's catalog.listTables()
    # cannot decode its rows when expressions are interpreted, as the test session runs them)
    names = [row.tableName for row in spark.sql("SHOW TABLES").collect()]
    assert not [name for name in names if name.startswith("__zync")]


def test_timestamp_as_of(spark, lake: Lake) -> None:
    from datetime import UTC, datetime

    pool = lake.create_pool("Raw")
    pool.record_types({"invoices": TopicTypes(value=avro_to_spark(dbz.AVRO_VALUE_SCHEMA).json())})
    pool.append_records(debezium_rows("invoices", range(0, 4)), {("invoices", 0): 3})  # version 2
    _tick()
    between = datetime.now(UTC)
    _tick()
    pool.append_records(debezium_rows("invoices", range(4, 10)), {("invoices", 0): 9})  # 3

    def count(moment: str) -> int:
        df, _ = query(spark, lake, f"SELECT count(*) AS n FROM Raw TIMESTAMP AS OF {moment}")
        return df.first().n

    assert count(f"'{between:%Y-%m-%d %H:%M:%S.%f}'") == 4
    assert count(f"TIMESTAMP '{between:%Y-%m-%dT%H:%M:%S.%f}Z'") == 4
    assert count("'2999-01-01'") == 10  # after the last commit: the current version
    with pytest.raises(QueryError, match=r"pool 'Raw' has no version at 2020-01-01 00:00:00 UTC: "
                                         r"that is before its first commit \(its versions are 0 \("):
        count("'2020-01-01'")
    with pytest.raises(QueryError, match="not a timestamp"):
        count("'yesterday-ish'")


def test_time_travel_errors_are_one_line_naming_the_pool(spark, filled: Lake) -> None:
    from engine.lake.maintenance import compact, vacuum

    cases = {
        "SELECT * FROM raw_cdc VERSION AS OF 7":
            "pool 'raw-cdc' has no version 7 (its versions are 0 to 3)",
        "SELECT * FROM nope VERSION AS OF 1":
            "no pool 'nope' to read VERSION AS OF (pools: raw-cdc)",
        "SELECT * FROM raw_cdc VERSION AS OF latest":
            "VERSION AS OF takes a version number",
        "DESCRIBE HISTORY nope": "no pool 'nope' in lake",
    }
    for sql, message in cases.items():
        with pytest.raises(QueryError) as caught:
            query(spark, filled, sql)
        assert message in str(caught.value)
        assert "\n" not in str(caught.value)

    pool = filled.open_pool("raw-cdc")
    compact(pool)  # version 4: one file instead of two
    vacuum(pool, retention_hours=0, enforce_retention=False)  # version 2's file is gone
    with pytest.raises(QueryError, match=r"pool 'raw-cdc' version 2 cannot be read: 1 of its 1 "
                                         r"files were removed \(VACUUM\)"):
        query(spark, filled, "SELECT * FROM raw_cdc VERSION AS OF 2")


def test_describe_history_and_detail_take_pool_names(spark, filled: Lake) -> None:
    from zync_tui.commands.query import make_app

    for name in ("raw-cdc", "`raw-cdc`", "raw_cdc", "RAW_CDC"):
        df, _ = query(spark, filled, f"DESCRIBE HISTORY {name}")
        history = df.orderBy("version").collect()
        assert [h.version for h in history] == [0, 1, 2, 3], name
        assert history[0].operation == "CREATE TABLE"
    df, _ = query(spark, filled, "DESC HISTORY raw-cdc LIMIT 1;")
    assert [h.version for h in df.collect()] == [3]
    detail = query(spark, filled, "DESCRIBE DETAIL raw-cdc")[0].first()
    assert detail.name == "raw-cdc"
    assert detail.location.endswith("/raw-cdc")
    assert detail.numFiles == 2

    runner = CliRunner()
    env = {"ZYNC_LAKE": str(filled.root)}
    result = runner.invoke(make_app(), ["query", "DESCRIBE HISTORY raw-cdc", "-f", "json"], env=env)
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["version"] for line in result.stdout.splitlines()] == [3, 2, 1, 0]
    result = runner.invoke(make_app(), ["query", "SELECT * FROM raw_cdc VERSION AS OF 9"], env=env)
    assert result.exit_code == 1
    assert result.output.strip() == (
        "error: pool 'raw-cdc' has no version 9 (its versions are 0 to 3)"
    )
