"""Spark reads Delta tables through the log that delta-rs writes, and its results
are committed back through delta-rs for any Delta reader."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from engine.lake import delta

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _table(ids: range, tag: str) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "tag": [tag] * len(ids)})


def test_spark_reads_only_the_live_files(spark, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, _table(range(0, 5), "first"))
    write_deltalake(uri, _table(range(5, 8), "second"), mode="append")
    table = DeltaTable(uri)
    assert len(delta.live_files(table)) == 2
    assert delta.read_spark(spark, table).count() == 8

    write_deltalake(uri, _table(range(100, 103), "third"), mode="overwrite")
    table = DeltaTable(uri)
    rows = delta.read_spark(spark, table).orderBy("id").collect()
    assert [(r.id, r.tag) for r in rows] == [(100, "third"), (101, "third"), (102, "third")]
    # the replaced files are still on disk: a directory listing would be wrong
    assert len(list(Path(uri).glob("*.parquet"))) == 3
    assert len(delta.live_files(table)) == 1


def test_file_pruning_by_statistics(spark, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, _table(range(0, 10), "a"))
    write_deltalake(uri, _table(range(10, 20), "b"), mode="append")
    table = DeltaTable(uri)
    assert len(delta.live_files(table, "id >= 10")) == 1
    assert delta.read_spark(spark, table, "id >= 10").count() == 10


def test_a_spark_result_committed_through_delta_rs_reads_back_identically(spark, tmp_path: Path) -> None:
    uri = str(tmp_path / "out")
    df = spark.range(0, 1000).selectExpr("id", "concat('row-', id) AS tag", "id % 7 AS bucket")
    result = delta.spark_to_arrow(df)
    delta.commit_arrow(uri, result, app_transactions={"test-app": 41})

    table = DeltaTable(uri)
    assert table.transaction_version("test-app") == 41
    by_delta = pl.from_arrow(table.to_pyarrow_table()).sort("id")
    by_polars = pl.read_delta(uri).sort("id")
    by_spark = pl.from_arrow(delta.spark_to_arrow(delta.read_spark(spark, table))).sort("id")
    assert by_delta.equals(by_polars)
    assert by_delta.equals(by_spark)
    assert by_delta.height == 1000


def test_commit_only_if_still_at_the_planned_version(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, _table(range(0, 2), "a"))
    planned = DeltaTable(uri)
    write_deltalake(uri, _table(range(2, 4), "b"), mode="append")  # someone else commits
    with pytest.raises(delta.CommitConflict):
        delta.commit_arrow(planned, _table(range(4, 6), "c"), expect_version=planned.version())
    assert DeltaTable(uri).version() == 1


def test_concurrent_app_transaction_conflicts(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, _table(range(0, 2), "a"))
    first = DeltaTable(uri)
    second = DeltaTable(uri)
    delta.commit_arrow(first, _table(range(2, 3), "b"), app_transactions={"pos": 2})
    with pytest.raises(delta.CommitConflict):
        delta.commit_arrow(second, _table(range(2, 3), "b"), app_transactions={"pos": 2})
    assert DeltaTable(uri).transaction_version("pos") == 2


# ----------------------------------------------------------------------------------------
# the ETL's seqno floors reach Delta as a filter it skips files with


def files_read(df) -> int:
    """How many files the (executed) plan's Parquet scans read: Delta hands the scan
    only the files its statistics did not rule out."""
    df.collect()
    total = 0
    todo = [df._jdf.queryExecution().executedPlan()]
    while todo:
        node = todo.pop()
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":
            todo.append(node.executedPlan())
            continue
        if name == "FileSourceScanExec":
            total += int(node.metrics().apply("numFiles").value())
        children = node.children()
        todo.extend(children.apply(i) for i in range(children.size()))
    return total


def test_files_below_the_seqno_floor_are_not_read(spark, lake) -> None:
    from engine.etl.cursors import cursor_filter
    from engine.etl.markers import marker_rows, markers_of
    from tests.integration.test_etl_support import append_events

    raw = lake.create_pool("Raw")
    for commit in range(6):  # one file per commit, seqnos 10*commit .. 10*commit+9
        append_events(raw, [{"topic": "T", "key": {"ID": i}, "value": {"ID": i}}
                            for i in range(commit * 10, commit * 10 + 10)])
    assert len(raw.files()) == 6
    everything = delta.read_spark(spark, raw.table)
    assert files_read(everything) == 6

    # the read of an ETL pass (engine/etl: its floor, then markers and cursors)
    floor = 40
    fresh = delta.read_spark(spark, raw.table, f"seqno >= {floor}").where(
        f"seqno >= {floor} AND marker IS NULL AND {cursor_filter({('T', 0): 44}, ['T'])}"
    )
    assert files_read(fresh) == 2
    assert sorted(r.seqno for r in fresh.collect()) == list(range(45, 60))

    staging = lake.create_pool("Staging", "staging")
    for commit in range(4):
        fates = pa.table({"topic": ["T"] * 5, "partition": [0] * 5,
                          "offset": list(range(commit * 5, commit * 5 + 5)),
                          "rule": ["r"] * 5, "status": ["processed"] * 5})
        staging.commit_rows(marker_rows("etl", fates), expect_version=staging.version)
    assert files_read(markers_of(spark, staging, "etl")) == 4
    above = markers_of(spark, staging, "etl", min_seqno=15)
    assert files_read(above) == 1
    assert sorted(r.seqno for r in above.collect()) == [15, 16, 17, 18, 19]


def test_the_session_keeps_its_warehouse_out_of_the_working_directory(spark) -> None:
    """Spark makes its (unused) warehouse directory when a session starts; zync's goes
    under the zync home, not into the directory a user runs zync from."""
    warehouse = spark.conf.get("spark.sql.warehouse.dir")
    assert warehouse.rstrip("/").endswith("spark-warehouse")
    assert not warehouse.removeprefix("file:").startswith(str(Path.cwd()) + "/spark-warehouse")
    spark.sql("SHOW TABLES").collect()  # the catalog is up: the directory exists by now
    assert not (Path.cwd() / "spark-warehouse").exists()
