"""Benchmark: the apply loop against a hand-written Spark MERGE INTO of the same changes.

    .venv/bin/python bench/apply.py [--outputs 1000000] [--keys 100000] [--versions 10]
                                    [--runs 3] [--deletes 0.05]

1. Stages N outputs of one topic in a staging pool, as the ETL writes them (JSON text of
   ``key {ID}`` and ``value {ID, customer, item, amount, status}``, the pool's recorded
   types, ``--versions`` commits of N / versions outputs): every key inserted first,
   then updates of random keys, ``--deletes`` of them tombstones (a key deleted may come
   back). Once, not timed.
2. In one process and one SparkSession (local[2] unless $ZYNC_SPARK_MASTER says
   otherwise), first every job once over a small staging pool (JVM warm-up, not timed),
   then ``--runs`` times, the order alternating, each into empty tables:

   * **zync**: ``Applier.run_once()`` of a configuration with the table (history off,
     then on): reads the staging versions' changes with delta-rs, decodes, folds, one
     delta-rs MERGE with the position — one table commit;
   * **plain**: the Spark job a user writes for the same final table: read the staging
     pool with delta-spark, ``from_json`` with the hand-written schemas, keep the latest
     change per key (``row_number`` over the offset, as MERGE requires), then one
     ``MERGE INTO`` (delete on a tombstone, update, insert). For history: the latest
     change per key and staging version, its validity by ``lead`` over the versions,
     then one MERGE closing each key's current row and inserting the versions.
   * the writes alone: the latest change per key as an Arrow table, merged by delta-rs
     and by delta-spark's MERGE INTO (from a cached DataFrame).

   Both tables must hold the same rows. The last lines are plain / zync (bar: >= 1.0).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOPIC = "Changes"
KEY_DDL = "ID BIGINT"
VALUE_DDL = "ID BIGINT, customer STRING, item STRING, amount DOUBLE, status STRING"
COLUMNS = ["ID", "customer", "item", "amount", "status"]
STATUSES = ["new", "paid", "late", "closed", "refunded"]


def config(history: bool) -> Any:
    from engine.etl.config_file import parse_config

    text = f"""
name: bench
inputs: [{{topic: In, pool: Raw}}]
outputs: [{{topic: {TOPIC}, pool: Staging}}]
transforms:
  - {{type: stateless, in: In, out: {TOPIC}, sql: "SELECT in.key AS key, in.value AS value"}}
tables:
  - {{name: {'history' if history else 'current'}, from: {TOPIC}, keys: [ID], history: {str(history).lower()}}}
"""
    return parse_config(text, source="bench.yaml")


def stage(root: Path, outputs: int, keys: int, versions: int, deletes: float, seed: int) -> None:
    """A lake with a staging pool holding the outputs."""
    from pyspark.sql import types as T

    from engine.api import Lake, TopicTypes, record_rows

    rng = random.Random(seed)
    lake = Lake(root)
    lake.create_pool("Raw", "raw")
    staging = lake.create_pool("Staging", "staging")
    # the plain history job reads the staging versions through Spark's change feed
    staging.table.alter.set_table_properties({"delta.enableChangeDataFeed": "true"})
    key_type = T.StructType([T.StructField("ID", T.LongType())])
    value_type = T.StructType(
        [
            T.StructField("ID", T.LongType()),
            T.StructField("customer", T.StringType()),
            T.StructField("item", T.StringType()),
            T.StructField("amount", T.DoubleType()),
            T.StructField("status", T.StringType()),
        ]
    )
    staging.record_types({TOPIC: TopicTypes(key=key_type.json(), value=value_type.json())})
    per_commit = -(-outputs // versions)
    stamp = datetime.now(UTC)
    for start in range(0, outputs, per_commit):
        kafka, key_texts, values = [], [], []
        for offset in range(start, min(outputs, start + per_commit)):
            key = offset if offset < keys else rng.randrange(keys)
            kafka.append({"topic": TOPIC, "partition": 0, "offset": offset, "timestamp": stamp})
            key_texts.append(f'{{"ID":{key}}}')
            if offset >= keys and rng.random() < deletes:
                values.append(None)
                continue
            values.append(
                json.dumps(
                    {
                        "ID": key,
                        "customer": f"customer-{rng.randrange(5000)}",
                        "item": f"item-{rng.randrange(200)}",
                        "amount": round(rng.uniform(1, 500), 2),
                        "status": rng.choice(STATUSES),
                    },
                    separators=(",", ":"),
                )
            )
        staging.refresh()
        staging.commit_rows(record_rows(kafka, key_texts, values), expect_version=staging.version)


def run_zync(lake_root: Path, history: bool) -> tuple[float, str]:
    from engine.api import Applier, Lake

    lake = Lake(lake_root)
    applier = Applier(config(history), lake)
    started = time.perf_counter()
    results = applier.run_once()
    seconds = time.perf_counter() - started
    committed = [r for r in results if r.table_version is not None]
    assert committed, "nothing applied"
    return seconds, str(lake_root / ("history" if history else "current"))


def _latest_sql(staging_path: str) -> str:
    return f"""
        SELECT o.* FROM (
          SELECT kafka.offset AS offset, from_json(key, '{KEY_DDL}').ID AS ID,
                 from_json(value, '{VALUE_DDL}') AS v, value IS NULL AS gone,
                 row_number() OVER (PARTITION BY from_json(key, '{KEY_DDL}').ID
                                    ORDER BY kafka.offset DESC) AS n
          FROM delta.`{staging_path}`
          WHERE marker IS NULL AND deadletter IS NULL AND kafka.topic = '{TOPIC}'
        ) o WHERE n = 1"""


def run_plain(spark: Any, lake_root: Path, history: bool) -> tuple[float, str]:
    """The hand-written Spark job into a new table (created empty, CDF on, untimed)."""
    from deltalake import DeltaTable

    staging = (lake_root / "Staging").resolve().as_uri()
    target = (lake_root / ("plain_history" if history else "plain_current")).resolve().as_uri()
    extra = ", valid_from TIMESTAMP, valid_to TIMESTAMP, valid_from_version BIGINT, " \
            "valid_to_version BIGINT, is_current BOOLEAN" if history else ""
    spark.sql(
        f"CREATE TABLE delta.`{target}` ({VALUE_DDL}{extra}) USING delta "
        "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
    )
    first = min(
        int(e["version"]) for e in DeltaTable(str(lake_root / "Staging")).history()
        if e.get("operation") == "WRITE"
    )
    started = time.perf_counter()
    if not history:
        spark.sql(_latest_sql(staging)).createOrReplaceTempView("latest")
        spark.sql(
            f"""MERGE INTO delta.`{target}` t USING latest s ON t.ID = s.ID
                WHEN MATCHED AND s.gone THEN DELETE
                WHEN MATCHED THEN UPDATE SET customer = s.v.customer, item = s.v.item,
                                             amount = s.v.amount, status = s.v.status
                WHEN NOT MATCHED AND NOT s.gone THEN INSERT (ID, customer, item, amount, status)
                  VALUES (s.ID, s.v.customer, s.v.item, s.v.amount, s.v.status)"""
        )
    else:
        spark.sql(
            f"""
            WITH changes AS (
              SELECT kafka.offset AS offset, from_json(key, '{KEY_DDL}').ID AS ID,
                     from_json(value, '{VALUE_DDL}') AS v, value IS NULL AS gone,
                     _commit_version AS version, _commit_timestamp AS at
              FROM table_changes_by_path('{staging}', {first})
              WHERE _change_type = 'insert' AND marker IS NULL AND deadletter IS NULL
                AND kafka.topic = '{TOPIC}'
            ),
            per_version AS (
              SELECT * FROM (
                SELECT *, row_number() OVER (PARTITION BY ID, version ORDER BY offset DESC) AS n
                FROM changes) WHERE n = 1
            ),
            chained AS (
              SELECT *, lead(version) OVER (PARTITION BY ID ORDER BY version) AS next_version,
                        lead(at) OVER (PARTITION BY ID ORDER BY version) AS next_at,
                        min(version) OVER (PARTITION BY ID) AS first_version
              FROM per_version
            )
            SELECT ID, v, version, at, next_version, next_at, false AS close FROM chained
            WHERE NOT gone
            UNION ALL
            SELECT ID, NULL AS v, NULL AS version, NULL AS at, version AS next_version,
                   at AS next_at, true AS close
            FROM chained WHERE version = first_version
            """
        ).createOrReplaceTempView("history_source")
        spark.sql(
            f"""MERGE INTO delta.`{target}` t USING history_source s
                ON t.ID = s.ID AND t.is_current AND s.close
                WHEN MATCHED THEN UPDATE SET valid_to = s.next_at,
                     valid_to_version = s.next_version, is_current = false
                WHEN NOT MATCHED AND NOT s.close THEN INSERT
                  (ID, customer, item, amount, status, valid_from, valid_to,
                   valid_from_version, valid_to_version, is_current)
                  VALUES (s.ID, s.v.customer, s.v.item, s.v.amount, s.v.status, s.at,
                          s.next_at, s.version, s.next_version, s.next_version IS NULL)"""
        )
    seconds = time.perf_counter() - started
    return seconds, target


def writes_alone(spark: Any, lake_root: Path) -> tuple[float, float]:
    """The latest change per key merged into an empty table: delta-rs' MERGE of an
    Arrow table vs delta-spark's MERGE INTO of the same rows (cached)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    staging = (lake_root / "Staging").resolve().as_uri()
    latest = spark.sql(_latest_sql(staging)).select(
        "ID", "gone", "v.customer", "v.item", "v.amount", "v.status"
    )
    arrow = latest.toArrow()
    latest.cache().count()
    latest.createOrReplaceTempView("latest_cached")
    schema = pa.schema([("ID", pa.int64()), ("customer", pa.string()), ("item", pa.string()),
                        ("amount", pa.float64()), ("status", pa.string())])
    rs_path = str(lake_root / "writes_rs")
    DeltaTable.create(rs_path, schema=schema, configuration={"delta.enableChangeDataFeed": "true"})
    started = time.perf_counter()
    (
        DeltaTable(rs_path)
        .merge(arrow, "t.ID = s.ID", source_alias="s", target_alias="t")
        .when_matched_delete(predicate="s.gone")
        .when_matched_update(
            updates={c: f"s.{c}" for c in COLUMNS if c != "ID"}, predicate="NOT s.gone"
        )
        .when_not_matched_insert(updates={c: f"s.{c}" for c in COLUMNS}, predicate="NOT s.gone")
        .execute()
    )
    rs = time.perf_counter() - started
    spark_path = (lake_root / "writes_spark").resolve().as_uri()
    spark.sql(
        f"CREATE TABLE delta.`{spark_path}` ({VALUE_DDL}) USING delta "
        "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
    )
    started = time.perf_counter()
    spark.sql(
        f"""MERGE INTO delta.`{spark_path}` t USING latest_cached s ON t.ID = s.ID
            WHEN MATCHED AND s.gone THEN DELETE
            WHEN MATCHED THEN UPDATE SET *
            WHEN NOT MATCHED AND NOT s.gone THEN INSERT *"""
    )
    sp = time.perf_counter() - started
    latest.unpersist()
    return rs, sp


def same_rows(spark: Any, ours: str, theirs: str, history: bool) -> int:
    """Both tables read by delta-spark hold the same rows; returns how many."""
    columns = ", ".join(COLUMNS)
    if history:  # the commit times: delta-rs and delta-spark may read them apart by a ms
        columns += ", valid_from_version, valid_to_version, is_current"
    ours_uri = Path(ours).resolve().as_uri() if "://" not in ours else ours
    a = spark.sql(f"SELECT {columns} FROM delta.`{ours_uri}`")
    b = spark.sql(f"SELECT {columns} FROM delta.`{theirs}`")
    n = a.count()
    assert n == b.count(), (n, b.count())
    assert a.exceptAll(b).count() == 0, "a row of zync's table is not in the plain one"
    assert b.exceptAll(a).count() == 0, "a row of the plain table is not in zync's"
    return n


def timed_runs(
    spark: Any, base: Path, runs: int, history: bool
) -> tuple[list[float], list[float], int]:
    zync, plain = [], []
    rows = 0
    for run in range(runs):
        lake = base / f"run-{'h' if history else 'c'}{run}"
        shutil.copytree(base / "staged", lake)
        order: list[tuple[str, Callable[[], tuple[float, str]]]] = [
            ("zync", lambda lake=lake: run_zync(lake, history)),
            ("plain", lambda lake=lake: run_plain(spark, lake, history)),
        ]
        if run % 2:
            order.reverse()
        found = {}
        for name, job in order:
            seconds, where = job()
            found[name] = where
            (zync if name == "zync" else plain).append(seconds)
            print(f"  run {run + 1} {name:<5} {'history' if history else 'current'}: {seconds:.2f} s")
        rows = same_rows(spark, found["zync"], found["plain"], history)
        shutil.rmtree(lake)
    return zync, plain, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--deletes", type=float, default=0.05)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from engine.api import get_spark, load_spark_settings

    spark = get_spark(load_spark_settings(None))
    base = Path(tempfile.mkdtemp(prefix="zync-bench-apply-"))
    try:
        print(f"warm-up: {min(20_000, args.outputs)} outputs")
        stage(base / "staged", min(20_000, args.outputs), min(2_000, args.keys), 2, args.deletes, 1)
        timed_runs(spark, base, 1, False)
        timed_runs(spark, base, 1, True)
        writes_alone(spark, base / "staged")
        shutil.rmtree(base / "staged")
        started = time.perf_counter()
        stage(base / "staged", args.outputs, args.keys, args.versions, args.deletes, 2)
        print(
            f"staged {args.outputs} outputs over {args.keys} keys in {args.versions} commits "
            f"({time.perf_counter() - started:.1f} s)"
        )
        figures = {}
        for history in (False, True):
            zync, plain, rows = timed_runs(spark, base, args.runs, history)
            kind = "history (SCD2)" if history else "current (SCD1)"
            figures[kind] = (statistics.median(zync), statistics.median(plain), rows)
        rs, sp = writes_alone(spark, base / "staged")
        print()
        for kind, (z, p, rows) in figures.items():
            print(
                f"{kind}: zync {z:.2f} s, plain MERGE job {p:.2f} s (medians of {args.runs}; "
                f"{rows} rows): plain / zync = {p / z:.2f} (bar >= 1.0)"
            )
        print(f"the write alone (latest per key, MERGE into an empty table): delta-rs {rs:.2f} s, "
              f"delta-spark {sp:.2f} s")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
