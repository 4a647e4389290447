"""Pools on disk: exactly-once appends, concurrent writers, types, upkeep, `zync pool`."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from typer.testing import CliRunner

from engine.lake import maintenance
from engine.lake.pool_errors import NotAPool, PoolError, PoolNotFound
from engine.lake.pool_record import DEADLETTER_TYPE, KAFKA_TYPE, MARKER_TYPE, ROW_SCHEMA
from engine.lake.pools import Lake
from engine.lake.topic_types import TopicTypes

pytestmark = pytest.mark.integration


def rows(topic: str, partition: int, offsets: range, *, dead: set[int] = frozenset()) -> pa.Table:
    n = len(offsets)
    return pa.table(
        {
            "kafka": pa.array(
                [{"topic": topic, "partition": partition, "offset": o, "timestamp": None} for o in offsets],
                KAFKA_TYPE,
            ),
            "key": pa.array([None if o in dead else json.dumps(o) for o in offsets], pa.string()),
            "value": pa.array(
                [None if o in dead else json.dumps({"n": o}) for o in offsets], pa.string()
            ),
            "deadletter": pa.array(
                [
                    {"stage": "decode", "error": "bad", "key_bytes": None, "value_bytes": b"x"}
                    if o in dead
                    else None
                    for o in offsets
                ],
                DEADLETTER_TYPE,
            ),
            "marker": pa.nulls(n, MARKER_TYPE),
        },
        schema=ROW_SCHEMA,
    )


def offsets_in(pool_path: Path) -> list[tuple[str, int, int]]:
    table = DeltaTable(str(pool_path)).to_pyarrow_table()
    return sorted((k["topic"], k["partition"], k["offset"]) for k in table.column("kafka").to_pylist())


def test_append_is_exactly_once_and_assigns_seqnos(lake: Lake) -> None:
    pool = lake.create_pool("raw")
    first = pool.append_records(rows("t", 0, range(0, 10)), {("t", 0): 9})
    assert (first.version, first.rows, first.first_seqno, first.last_seqno) == (1, 10, 0, 9)
    # a batch overlapping what the pool holds: only the new part goes in
    again = pool.append_records(rows("t", 0, range(5, 15)), {("t", 0): 14})
    assert (again.rows, again.skipped, again.first_seqno) == (5, 5, 10)
    # everything already there: no commit at all
    none = pool.append_records(rows("t", 0, range(5, 15)), {("t", 0): 14})
    assert none.version is None
    assert none.skipped == 10
    assert pool.version == 2
    assert pool.position("t", 0) == 14
    assert pool.last_seqno() == 14
    # a position may run past the rows (filtered records): an empty commit stores it
    empty = pool.append_records(ROW_SCHEMA.empty_table(), {("t", 0): 20, ("t", 1): 3})
    assert empty.version == 3
    assert empty.rows == 0
    assert pool.position("t", 0) == 20
    assert pool.position("t", 1) == 3
    assert offsets_in(pool.path) == [("t", 0, o) for o in range(15)]


def test_positions_are_read_from_the_log_once_per_snapshot(lake: Lake) -> None:
    """delta-rs reads every commit file since the last checkpoint for each txn asked (up
    to CHECKPOINT_EVERY objects on S3): a pool asks once per snapshot and app, and after
    its own commit knows the txns it wrote; another writer's commit is read again."""
    pool = lake.create_pool("raw")
    asked: list[str] = []

    read = pool.table.transaction_version

    def counting(app_id: str) -> int | None:
        asked.append(app_id)
        return read(app_id)

    pool.table.transaction_version = counting  # type: ignore[method-assign]
    for n in range(4):
        pool.append_records(rows("t", 0, range(n * 10, n * 10 + 10)), {("t", 0): n * 10 + 9})
        assert pool.position("t", 0) == n * 10 + 9
        assert pool.last_seqno() == n * 10 + 9
    assert len(asked) <= 3, asked  # the first snapshot's; the commits' own are known
    other = lake.open_pool("raw")
    other.append_records(rows("t", 1, range(5)), {("t", 1): 4})
    asked.clear()
    pool.refresh()
    assert (pool.position("t", 1), pool.position("t", 0), pool.last_seqno()) == (4, 39, 44)
    assert pool.position("t", 1) == 4
    assert len(asked) == 3  # the other writer's snapshot: read, once per app
    # a commit of types writes no txn: what was known holds after it
    asked.clear()
    assert pool.record_types({"t": TopicTypes(value='"string"')})
    assert (pool.position("t", 1), pool.position("t", 0), pool.last_seqno()) == (4, 39, 44)
    assert asked == []


def test_append_refuses_rows_beyond_positions_and_gaps(lake: Lake) -> None:
    pool = lake.create_pool("raw")
    pool.append_records(rows("t", 0, range(0, 10)), {("t", 0): 9})
    with pytest.raises(ValueError, match="go up to offset 19 but the batch's position is 15"):
        pool.append_records(rows("t", 0, range(10, 20)), {("t", 0): 15})
    with pytest.raises(ValueError, match="position is None"):
        pool.append_records(rows("u", 0, range(0, 2)), {("t", 0): 11})
    # a batch that starts after offset 10 would leave a hole: refused
    with pytest.raises(PoolError, match="starts at offset 15 but the pool holds offsets up to 9"):
        pool.append_records(rows("t", 0, range(15, 20)), {("t", 0): 19}, starts={("t", 0): 15})
    ok = pool.append_records(rows("t", 0, range(10, 20)), {("t", 0): 19}, starts={("t", 0): 10})
    assert ok.rows == 10


def test_concurrent_writers_commit_every_offset_once(lake: Lake) -> None:
    """Four writers (own DeltaTable objects, like separate processes) race over the same
    offsets in overlapping batches: every offset lands once, seqnos stay contiguous."""
    lake.create_pool("raw")
    errors: list[BaseException] = []
    results = []

    def writer(seed: int) -> None:
        import random

        rnd = random.Random(seed)
        pool = lake.open_pool("raw")
        start = 0
        try:
            while start < 400:
                end = min(400, start + rnd.randint(5, 40))
                batch = [rows("t", p, range(start, end)) for p in (0, 1)]
                result = pool.append_records(
                    pa.concat_tables(batch), {("t", 0): end - 1, ("t", 1): end - 1}
                )
                results.append(result)
                start = end
        except BaseException as exc:  # noqa: BLE001 - collected, asserted empty below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert any(r.attempts > 1 for r in results) or any(r.skipped for r in results)
    table = DeltaTable(str(lake.pool_path("raw"))).to_pyarrow_table()
    assert offsets_in(lake.pool_path("raw")) == sorted(("t", p, o) for p in (0, 1) for o in range(400))
    assert sorted(table.column("seqno").to_pylist()) == list(range(800))


def test_record_types_merge_and_survive_concurrent_writers(lake: Lake) -> None:
    from pyspark.sql import types as T

    lake.create_pool("raw")
    a, b = lake.open_pool("raw"), lake.open_pool("raw")
    one = T.StructType([T.StructField("x", T.LongType())])
    two = T.StructType([T.StructField("y", T.StringType())])
    assert a.record_types({"t": TopicTypes(value=one.json())})
    # b's snapshot predates a's change: its commit conflicts, then merges both
    assert b.record_types({"t": TopicTypes(value=two.json())})
    assert not b.record_types({"t": TopicTypes(value=one.json())})  # nothing new
    value = lake.open_pool("raw").spark_types("t")[1]
    assert [f.name for f in value.fields] == ["x", "y"]


def test_not_a_pool_and_missing_pool_say_what_is_wrong(lake: Lake, tmp_path: Path) -> None:
    with pytest.raises(PoolNotFound, match=r"no pool 'nope' .*zync pool create nope"):
        lake.open_pool("nope")
    write_deltalake(str(lake.root / "plain"), pa.table({"id": [1, 2]}))
    with pytest.raises(NotAPool, match="not a zync pool: its description has no zync metadata"):
        lake.open_pool("plain")
    # zync metadata but the wrong columns
    lake.create_pool("shaped")
    DeltaTable(str(lake.pool_path("shaped")))  # exists
    wrong = lake.root / "wrong"
    write_deltalake(
        str(wrong),
        pa.table({"seqno": pa.array([1], pa.int64()), "kafka": ["x"]}),
        description=json.dumps({"zync": {"kind": "raw", "types": {}}}),
    )
    with pytest.raises(NotAPool) as caught:
        lake.open_pool("wrong")
    message = str(caught.value)
    assert "column `kafka` is string, a pool needs struct<" in message
    assert "column `value` is missing" in message


def test_compact_keeps_rows_positions_and_types_and_checkpoints(lake: Lake) -> None:
    pool = lake.create_pool("raw")
    pool.record_types({"t": TopicTypes(key='"long"', value=None)})
    for start in range(0, 60, 10):
        pool.append_records(rows("t", 0, range(start, start + 10), dead={start}), {("t", 0): start + 9})
    before = pool.table.to_pyarrow_table().sort_by("seqno")
    assert maintenance.file_counts(pool).files == 6
    result = maintenance.compact(pool)
    assert (result.files_removed, result.files_added) == (6, 1)
    after = lake.open_pool("raw")
    assert after.table.to_pyarrow_table().sort_by("seqno").equals(before)
    assert after.position("t", 0) == 59
    assert after.last_seqno() == 59
    assert after.meta.types["t"].key == '"long"'
    version = maintenance.checkpoint(after)
    assert maintenance.last_checkpoint(after) == version == after.version
    # vacuum: the six replaced files are older than a 0-hour retention
    dry = maintenance.vacuum(after, retention_hours=0, dry_run=True, enforce_retention=False)
    assert len(dry.files) == 6


def test_upkeep_checkpoints_every_n_commits_and_compacts_small_files(lake: Lake) -> None:
    pool = lake.create_pool("raw")
    upkeep = maintenance.Upkeep(checkpoint_every=5, compact_small_files=8, check_every=4)
    done = []
    for i in range(12):
        pool.append_records(rows("t", 0, range(i * 3, i * 3 + 3)), {("t", 0): i * 3 + 2})
        done += upkeep.after_commit(pool)
    assert any(d.startswith("checkpoint at version") for d in done)
    assert any(d.startswith("compacted 8 files into 1") for d in done)
    assert maintenance.last_checkpoint(pool) is not None
    assert offsets_in(pool.path) == [("t", 0, o) for o in range(36)]


def test_pool_commands(tmp_path: Path) -> None:
    from zync_tui.commands.pool import make_app

    app = make_app()
    runner = CliRunner()
    lake_dir = str(tmp_path / "lake")

    def zync(*args: str) -> str:
        result = runner.invoke(app, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    assert "pool raw (raw)" in zync("pool", "create", "raw", "--lake", lake_dir)
    failed = runner.invoke(app, ["pool", "create", "raw", "--lake", lake_dir])
    assert failed.exit_code == 1
    assert "already exists" in failed.output
    zync("pool", "create", "stage", "--kind", "staging", "--lake", lake_dir)
    pool = Lake(lake_dir).open_pool("raw")
    for start in (0, 10):
        pool.append_records(rows("t", 0, range(start, start + 10), dead={3}), {("t", 0): start + 9})
    write_deltalake(str(Path(lake_dir) / "other"), pa.table({"id": [1]}))

    listed = json.loads(zync("pool", "ls", "--lake", lake_dir, "--json"))
    by_name = {p["name"]: p for p in listed["pools"]}
    assert by_name["raw"]["rows"] == 20
    assert by_name["raw"]["version"] == 2
    assert by_name["stage"]["kind"] == "staging"
    assert "not a zync pool" in listed["not_pools"]["other"]
    assert "raw" in zync("pool", "ls", "--lake", lake_dir)

    shown = json.loads(zync("pool", "show", "raw", "--lake", lake_dir, "--json"))
    assert shown["dead_letters"] == 1
    assert shown["dead_letters_by_stage"] == {"decode": 1}
    assert shown["partitions"] == [
        {"topic": "t", "partition": 0, "rows": 20, "dead_letters": 1, "min_offset": 0,
         "max_offset": 19, "position": 19}
    ]
    assert [c["version"] for c in shown["commits"]][:2] == [2, 1]
    text = zync("pool", "show", "raw", "--lake", lake_dir)
    assert "dead letters 1 (decode: 1)" in text

    assert "2 files → 1" in zync("pool", "compact", "raw", "--lake", lake_dir)
    assert "would delete 2 file(s)" in zync(
        "pool", "vacuum", "raw", "--lake", lake_dir, "--retention", "0", "--force", "--dry-run"
    )
    assert "checkpoint at version" in zync("pool", "checkpoint", "raw", "--lake", lake_dir)

    missing = runner.invoke(app, ["pool", "show", "nope", "--lake", lake_dir])
    assert missing.exit_code == 1
    assert "no pool 'nope'" in missing.output
    other = runner.invoke(app, ["pool", "show", "other", "--lake", lake_dir])
    assert other.exit_code == 1
    assert "not a zync pool" in other.output


# ------------------------------------------------ files written by Spark, committed by delta-rs


def _spark_rows(spark, topic: str, offsets: range, first_seqno: int):
    from pyspark.sql import functions as F

    return spark.range(offsets.start, offsets.stop).select(
        (F.col("id") - offsets.start + first_seqno).alias("seqno"),
        F.struct(
            F.lit(topic).alias("topic"),
            F.lit(0).alias("partition"),
            F.col("id").alias("offset"),
            F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("timestamp"),
        ).alias("kafka"),
        F.to_json(F.struct(F.col("id").alias("ID"))).alias("key"),
        F.to_json(F.struct(F.col("id").alias("ID"), F.lit("x" * 80).alias("note"))).alias("value"),
    )


@pytest.mark.spark
def test_files_written_by_spark_commit_with_rows_in_one_commit(spark, lake: Lake) -> None:
    import polars as pl
    import pyarrow.parquet as pq

    from engine.etl.markers import marker_rows

    pool = lake.create_pool("staging", "staging")
    base = pool.version
    files = pool.write_spark(_spark_rows(spark, "out", range(0, 500), 0).repartition(3), label="etl")
    assert sum(f.rows for f in files) == 500
    assert len(files) >= 2
    assert all(f.path.startswith("etl-") for f in files)
    # Spark's writer (Java, on the executors) made them, and left nothing else behind
    written = list((Path(pool.path) / files[0].path).parent.iterdir())
    assert sorted(p.name for p in written) == sorted(Path(f.path).name for f in files)
    assert pq.read_metadata(Path(pool.path) / files[0].path).created_by.startswith("parquet-mr")
    decided = pa.table(
        {"topic": ["in", "in"], "partition": [0, 0], "offset": [7, 8], "rule": ["r", "r"],
         "status": ["processed", "processed"]}
    )
    version = pool.commit_rows(
        marker_rows("etl", decided),
        expect_version=base,
        app_transactions={"zync.test/pos": 8},
        files=files,
    )
    assert version == base + 1
    assert pool.last_seqno() == 501  # 500 outputs, then the two markers
    assert pool.app_version("zync.test/pos") == 8
    # other readers see one table: deltalake, polars (the pool's own schema, right types)
    table = DeltaTable(str(pool.path)).to_pyarrow_table()
    assert table.num_rows == 502
    assert sorted(table.column("seqno").to_pylist()) == list(range(502))
    frame = pl.read_delta(str(pool.path)).sort("seqno")
    assert frame["kafka"].struct.field("offset").head(3).to_list() == [0, 1, 2]
    assert frame["kafka"].struct.field("timestamp").dtype == pl.Datetime("us", "UTC")
    assert frame["marker"].struct.field("offset").tail(2).to_list() == [7, 8]
    # statistics prune by seqno: the markers' file only
    stats = pool.table.get_add_actions(flatten=True)
    stats = dict(zip(stats.column("path").to_pylist(), stats.column("max.seqno").to_pylist(), strict=True))
    assert max(stats.values()) == 501
    assert len(pool.files("seqno >= 501")) == 1
    assert pool.records(spark, "out").count() == 500
    # filters on struct columns and on long strings through delta-rs' dataset (which
    # turns the files' statistics into guarantees)
    import pyarrow.dataset as ds

    dataset = pool.table.to_pyarrow_dataset()
    outputs = ds.field("marker").is_null() & ds.field("kafka").is_valid()
    assert dataset.to_table(filter=outputs).num_rows == 500
    assert dataset.to_table(filter=ds.field("marker").is_valid()).num_rows == 2
    assert dataset.to_table(filter=ds.field("deadletter").is_valid()).num_rows == 0
    assert dataset.to_table(filter=ds.field("deadletter").is_null()).num_rows == 502
    one = json.dumps({"ID": 499, "note": "x" * 80}, separators=(",", ":"))
    assert dataset.to_table(filter=ds.field("value") == one).num_rows == 1
    # the files say NOT NULL where the pool does (delta-rs' change feed insists)
    assert pq.read_schema(Path(pool.path) / files[0].path).field("seqno").nullable is False
    changes = pool.table.load_cdf(starting_version=version, ending_version=version).read_all()
    assert changes.num_rows == 502


@pytest.mark.spark
def test_files_of_a_conflicting_commit_are_deleted(spark, lake: Lake) -> None:
    from engine.lake import delta

    pool = lake.create_pool("staging", "staging")
    planned = pool.version
    files = pool.write_spark(_spark_rows(spark, "out", range(0, 10), 0), label="etl")
    other = lake.open_pool("staging")
    other.commit_rows(rows("t", 0, range(0, 3)), expect_version=planned)  # someone else
    with pytest.raises(delta.CommitConflict):
        pool.commit_rows(rows("t", 0, range(0, 0)), expect_version=planned, files=files)
    assert not any((Path(pool.path) / f.path).exists() for f in files)
    assert not (Path(pool.path) / files[0].path).parent.exists()
    pool.refresh()
    assert pool.last_seqno() == 2


@pytest.mark.spark
def test_files_a_crashed_writer_left_are_vacuumed(spark, lake: Lake) -> None:
    pool = lake.create_pool("staging", "staging")
    files = pool.write_spark(_spark_rows(spark, "out", range(0, 10), 0), label="etl")
    # the process died before its commit: the files are in no snapshot
    pool.refresh()
    assert pool.records(spark).count() == 0
    result = maintenance.vacuum(pool, retention_hours=0, enforce_retention=False)
    assert any(files[0].path in f for f in result.files)
    assert not (Path(pool.path) / files[0].path).exists()
