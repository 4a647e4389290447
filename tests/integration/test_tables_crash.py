"""The apply loop exactly once (issue 37): killed with SIGKILL at random moments, and
beside other writers of its tables.

Outputs are staged as the ETL commits them (a commit of about a hundred per staging
version: full rows, rows carrying some fields, tombstones) while `zync apply -c`
processes apply them to a current-state table and a history table. At the end both
tables equal the state computed here from the staged outputs, and the tables' commits
cover every staging version once (their ranges follow each other, the last is the
position), so nothing was applied twice or skipped.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.api import Applier, Lake, TopicTypes, load_config, record_rows
from engine.lake.delta import TableNotFoundError, arrow_schema, open_table, parquet_dataset
from engine.lake.lake_tables import PROCESS, applied_commit
from engine.lake.location import Location, parse_location
from tests.crash import kill_at_random_moments

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=90)]

ROOT = Path(__file__).resolve().parents[2]
FIELDS = ("k", "name", "amount", "status")
CONFIG = """\
name: crash
inputs: [{topic: In, pool: Raw}]
outputs: [{topic: Rows, pool: Staging}]
transforms:
  - {type: stateless, in: In, out: Rows, sql: "SELECT in.key AS key, in.value AS value"}
tables:
  - {name: current_rows, from: Rows, keys: [k]}
  - {name: row_history, from: Rows, keys: [k], history: true}
"""


class Stager:
    """Stages outputs of topic Rows in commits, as the ETL would, and keeps what the
    tables must end up holding."""

    def __init__(self, lake: Lake, keys: int, seed: int, *, sliding: bool = False) -> None:
        from pyspark.sql import types as T

        self.staging = lake.create_pool("Staging", "staging")
        lake.create_pool("Raw", "raw")
        self.rng = random.Random(seed)
        self.keys = keys
        self.sliding = sliding  # keys move on: older files of the tables stay untouched
        self.fresh = 0
        self.commits = 0
        self.offset = 0
        self.state: dict[int, dict] = {}
        self.states: dict[int, dict[int, dict]] = {}  # the state after each staging version
        self.history: list[tuple] = []  # (k, name, amount, status, from, to) as they close
        self.open: dict[int, tuple[dict, int]] = {}
        value = T.StructType(
            [T.StructField("k", T.LongType()), T.StructField("name", T.StringType()),
             T.StructField("amount", T.LongType()), T.StructField("status", T.StringType())]
        )
        key = T.StructType([T.StructField("k", T.LongType())])
        self.staging.record_types({"Rows": TopicTypes(key=key.json(), value=value.json())})

    def record(self) -> tuple[int, dict | None]:
        k = self.rng.randrange(self.keys)
        if self.sliding:  # two commits of new keys, then one of changes to the last ones
            if self.commits % 3:
                self.fresh += 1
                return self.fresh, {"k": self.fresh, "name": "new", "amount": 1, "status": "new"}
            k = max(0, self.fresh - self.rng.randrange(self.keys))
        roll = self.rng.random()
        if roll < 0.05:
            return k, None
        if roll < 0.5 and k in self.state:  # some fields only
            return k, {"k": k, "status": self.rng.choice(["new", "paid", "late"])}
        return k, {"k": k, "name": f"n{self.rng.randrange(999)}",
                   "amount": self.rng.randrange(10_000), "status": "new"}

    def commit(self, n: int) -> int:
        records = [self.record() for _ in range(n)]
        self.commits += 1
        self.staging.refresh()
        version = self.staging.version + 1
        touched: dict[int, dict | None] = {}
        for k, value in records:
            if value is None:
                self.state.pop(k, None)
            else:
                base = self.state.get(k, {})
                self.state[k] = {**{f: None for f in FIELDS}, **base, **value}
            touched[k] = self.state.get(k)
        for k, now in touched.items():
            if k in self.open:
                row, since = self.open.pop(k)
                self.history.append((*(row[f] for f in FIELDS), since, version))
            if now is not None:
                self.open[k] = (dict(now), version)
        stamp = datetime.now(UTC)
        kafka = [{"topic": "Rows", "partition": 0, "offset": self.offset + i, "timestamp": stamp}
                 for i in range(n)]
        self.offset += n
        rows = record_rows(
            kafka,
            [json.dumps({"k": k}) for k, _ in records],
            [None if v is None else json.dumps(v, separators=(",", ":")) for _, v in records],
        )
        assert self.staging.commit_rows(rows, expect_version=version - 1) == version
        self.states[version] = {k: dict(v) for k, v in self.state.items()}
        return version


def _closed(history: list[tuple]) -> set[tuple]:
    return {(*row, False) for row in history}


def table(lake: Lake, name: str) -> DeltaTable:
    """A table of the lake (a directory or s3://), read with delta-rs."""
    return open_table(lake.location.join(name))


def rows(found: DeltaTable) -> list[dict[str, Any]]:
    """Every row, read the way the engine reads (pyarrow over the live files)."""
    return parquet_dataset(found_location(found), found.file_uris(), arrow_schema(found)).to_table().to_pylist()


def found_location(found: DeltaTable) -> Location:
    return parse_location(found.table_uri.rstrip("/"))


def check_tables(lake: Lake, stager: Stager) -> list[dict[str, Any]]:
    """Both tables hold the expected rows; their apply commits cover every staging
    version once. Returns the commits of the current-state table."""
    current = rows(table(lake, "current_rows"))
    assert {r["k"]: {f: r[f] for f in FIELDS} for r in current} == stager.state
    assert len(current) == len(stager.state)
    history = rows(table(lake, "row_history"))
    got = [(*(r[f] for f in FIELDS), r["valid_from_version"], r["valid_to_version"], r["is_current"])
           for r in history]
    assert len(got) == len(set(got)), "a history row is there twice: a version applied twice"
    wanted = _closed(stager.history) | {
        (*(row[f] for f in FIELDS), since, None, True) for row, since in stager.open.values()
    }
    assert set(got) == wanted
    staged = stager.staging.refresh()
    entries = []
    for name in ("current_rows", "row_history"):
        found = table(lake, name)
        log = sorted(found.history(), key=lambda e: e["version"])
        commits = [c for c in (applied_commit(e) for e in log) if c is not None]
        assert commits[0].first == 0
        for before, after in zip(commits, commits[1:], strict=False):
            assert after.first == before.last + 1, f"{name}: {before} then {after}"
        assert commits[-1].last == staged == found.transaction_version("zync.apply/Rows")
        if name == "current_rows":
            entries = [e for e in log if applied_commit(e) is not None]
    return entries


def _retried(spark: Any, sql: str) -> int:
    """Run ``sql``, again when it lost a race to a commit of the apply loop (as a user's
    job would); returns how many races it lost. Delta's conflicts reach Python as
    pyspark's exceptions or, for those pyspark does not convert (a concurrent MERGE that
    deleted files the OPTIMIZE read: ConcurrentDeleteReadException), as py4j's."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    for lost in range(10):
        try:
            spark.sql(sql).collect()
            return lost
        except (PySparkException, Py4JJavaError) as exc:
            if "Concurrent" not in str(exc) and "DELTA_CONCURRENT" not in str(exc):
                raise
    raise AssertionError(f"{sql}: lost 10 races in a row")


def _env(tmp_path: Path, lake: Lake) -> dict[str, str]:
    return dict(os.environ, ZYNC_HOME=str(tmp_path / "home"), ZYNC_LAKE=lake.location.uri)


def _cmd(config: Path) -> list[str]:
    return [sys.executable, "-m", "zync_tui.commands.apply", "apply", str(config), "-c"]


def kill_9_while_staging(
    lake: Lake, tmp_path: Path, *, commits: int, min_kills: int, seed: int
) -> None:
    """Stage ``commits`` commits of 100 outputs while `zync apply -c` is killed with
    SIGKILL at random moments, at least ``min_kills`` times; then check the tables."""
    rnd = random.Random(int(os.environ.get("ZYNC_CRASH_SEED", str(seed))))
    config = tmp_path / "crash.yaml"
    config.write_text(CONFIG)
    stager = Stager(lake, keys=1_500, seed=rnd.randrange(1 << 30))

    def stage() -> None:
        for _ in range(commits):
            stager.commit(100)
            time.sleep(0.1)

    writer = threading.Thread(target=stage, daemon=True)
    writer.start()
    where = lake.location.join("current_rows")

    def version() -> int:
        try:
            return open_table(where).version()
        except TableNotFoundError:
            return -1

    kills, busy = kill_at_random_moments(
        _cmd(config), cwd=ROOT, env=_env(tmp_path, lake), producer=writer, version=version,
        rnd=rnd, min_kills=min_kills, random_wait=(0.5, 3.0), after_commit_wait=0.4, limit=240,
    )
    writer.join()
    assert kills >= min_kills
    assert busy >= min_kills // 2, f"only {busy} of {kills} kills hit a process that had committed"
    assert stager.offset == commits * 100
    Applier(load_config(config), lake).run_once()  # the rest, after the last kill
    entries = check_tables(lake, stager)
    assert len({e[PROCESS] for e in entries}) >= 2  # a killed process applied, and the last


def test_kill_9_at_random_moments_applies_each_staging_version_once(tmp_path: Path) -> None:
    kill_9_while_staging(Lake(tmp_path / "lake"), tmp_path, commits=220, min_kills=8, seed=20240637)


def test_optimize_vacuum_and_a_second_apply_process_beside_the_loop(spark, tmp_path: Path) -> None:
    """delta-spark compacts and vacuums the tables while two apply processes race for
    them: lost races are planned again, nothing is applied twice."""
    config = tmp_path / "race.yaml"
    config.write_text(CONFIG)
    lake = Lake(tmp_path / "lake")
    stager = Stager(lake, keys=40, seed=7, sliding=True)  # many small files to compact
    stager.commit(100)
    processes = [
        subprocess.Popen(_cmd(config), cwd=ROOT, env=_env(tmp_path, lake), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    conflicts = 0
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "lake" / "row_history").exists():
            assert time.monotonic() < deadline, "the apply processes made no table"
            time.sleep(0.1)
        for round_ in range(6):
            for _ in range(6):
                stager.commit(60)
                time.sleep(0.05)
            for name in ("current_rows", "row_history"):
                path = (tmp_path / "lake" / name).resolve().as_uri()
                conflicts += _retried(spark, f"OPTIMIZE delta.`{path}`")
                if round_ == 3:  # LITE: the files the log removed (a full listing: ~20 s)
                    conflicts += _retried(spark, f"VACUUM delta.`{path}` LITE RETAIN 0 HOURS")
        deadline = time.monotonic() + 60
        while DeltaTable(str(tmp_path / "lake" / "row_history")).transaction_version(
            "zync.apply/Rows"
        ) != stager.staging.refresh():
            assert time.monotonic() < deadline, "the apply processes did not catch up"
            for proc in processes:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            time.sleep(0.1)
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
        for proc in processes:
            proc.send_signal(signal.SIGTERM)
        for proc in processes:
            proc.wait(timeout=60)
            if proc.stderr is not None:
                proc.stderr.close()
    assert all(proc.returncode == 0 for proc in processes)
    entries = check_tables(lake, stager)
    assert len({e[PROCESS] for e in entries}) == 2  # both processes applied some
    optimized = [e for e in DeltaTable(str(tmp_path / "lake" / "current_rows")).history()
                 if e.get("operation") == "OPTIMIZE"]
    assert optimized  # and delta-spark's compactions were committed between them
