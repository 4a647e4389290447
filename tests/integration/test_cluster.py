"""ETL on a real Spark standalone cluster gives exactly what local Spark gives.

A master and two workers (1 core, 1 GB each) run on 127.0.0.1, started with the
``spark-class`` script inside the pyspark package (:mod:`tests.cluster`). The raw data —
invoice-scenario events with creates, updates, deletes, tombstones, statuses before and
after their invoices and statuses that never come (pending, then expired) — is built
once and its lake copied, once for a run on the cluster and once for a run in this
process on the session's local Spark (``local[2]``: every core of this machine, as
``local[*]``). A process has one SparkSession, so the cluster side runs in a
subprocess with ``ZYNC_SPARK_MASTER=spark://127.0.0.1:PORT`` — the same way a user
points zync at a cluster. Both runs do the same appends and passes; afterwards the
pass results, every row of the raw and staging pools (outputs, their offsets, markers,
seqnos) and the Delta ``txn`` positions (cursors, floors, next offsets) must be
identical.

The cluster fixture stops every JVM it started and checks with ``/proc`` and ``ps``
that none is left.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import (
    SMALL_DRIVER_OUTPUT_ROWS,
    StandaloneCluster,
    app_transactions,
    append_events,
    invoice_events,
    run_in_subprocess,
    run_steps,
    small_passes,
    start_cluster,
    table_rows,
    write_jsonl,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.spark,
    pytest.mark.cluster,
    pytest.mark.slow(seconds=300),
    pytest.mark.timeout(1500),
]

DEMO = Path(__file__).resolve().parents[2] / "demo" / "invoices"
CONFIG = DEMO / "etl.yaml"
BIG = 4_000
#: In the raw pool before the first pass (the rest comes before the second): more than
#: SMALL_DRIVER_OUTPUT_ROWS, so the executors write the first pass's outputs. Both sides
#: run with tests.cluster.small_passes: the large-pass paths (cold reads by delta-spark,
#: executors writing outputs) on little data.
BIG_BASE = 3_200


@pytest.fixture(scope="module", autouse=True)
def _small_passes() -> Iterator[None]:
    """The local runs take the large-pass paths too (tests.cluster.small_passes)."""
    with pytest.MonkeyPatch.context() as patch:
        small_passes(patch)
        yield


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    running = start_cluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, cores=1)
    pids = list(running.pids)
    yield running
    running.stop()
    assert running.leftovers() == [], running.describe(running.leftovers())
    ps = subprocess.run(
        ["ps", "-e", "-o", "pid=,args="], capture_output=True, text=True, check=True
    ).stdout
    ours = [
        line
        for line in ps.splitlines()
        if str(running.directory) in line
        or running.master_url in line
        or line.split(maxsplit=1)[0] in {str(p) for p in pids}
    ]
    assert ours == [], f"processes of the cluster still running: {ours}"


def _lake(root: Path) -> Path:
    from engine.lake.pools import Lake

    lake = Lake(root)
    lake.create_pool("Raw", "raw")
    lake.create_pool("Staging", "staging")
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The scenario, its base lake copied for the local and the cluster run. One
    scenario only: a pass costs the cluster far more than its rows do."""
    from engine.lake.pools import Lake

    root = tmp_path_factory.mktemp("cluster-runs")
    # BIG records: BIG_BASE in the pool, the rest appended after the first pass; the
    # third pass finds nothing new
    big = _lake(root / "big-base")
    events = invoice_events(BIG, spacing_ms=2_000)  # 2 h of events: some expire
    append_events(Lake(big).open_pool("Raw"), events[:BIG_BASE], chunk=1_000)
    tail = write_jsonl(root / "big-tail.jsonl", events[BIG_BASE:])
    scenarios = {"big": (big, ["pass", f"append:{tail}", "pass", "pass"])}
    lakes = {}
    for name, (base, _) in scenarios.items():
        for side in ("local", "cluster"):
            lakes[name, side] = shutil.copytree(base, root / f"{name}-{side}")
    return {"scenarios": scenarios, "lakes": lakes, "home": root / "home"}


@pytest.fixture(scope="module")
def cluster_report(cluster: StandaloneCluster, runs: dict[str, Any]) -> dict[str, Any]:
    """The scenario run by a subprocess whose session is on the cluster."""
    jobs = [
        (runs["lakes"][name, "cluster"], CONFIG, steps)
        for name, (_, steps) in runs["scenarios"].items()
    ]
    runs["home"].mkdir(exist_ok=True)
    report = run_in_subprocess(cluster.master_url, jobs, home=runs["home"], small=True)
    report["by_name"] = dict(zip(runs["scenarios"], report["jobs"], strict=True))
    return report


def _assert_same_tables(local: Path, remote: Path, pool: str) -> int:
    a, b = table_rows(local / pool), table_rows(remote / pool)
    assert a.schema == b.schema
    assert a.num_rows == b.num_rows, (
        f"{pool}: {a.num_rows} rows locally, {b.num_rows} on the cluster"
    )
    if not a.equals(b):
        for i, (x, y) in enumerate(zip(a.to_pylist(), b.to_pylist(), strict=True)):
            assert x == y, f"{pool}: row {i} differs:\nlocal   {x}\ncluster {y}"
    return a.num_rows


def _compare(spark: Any, runs: dict[str, Any], report: dict[str, Any], name: str) -> list[dict]:
    lake_local, lake_cluster = runs["lakes"][name, "local"], runs["lakes"][name, "cluster"]
    _, steps = runs["scenarios"][name]
    local = run_steps(lake_local, CONFIG, steps, spark)
    remote = report["by_name"][name]["passes"]
    assert len(local) == len(remote)
    for i, (x, y) in enumerate(zip(local, remote, strict=True)):
        assert x == y, f"pass {i + 1} differs:\nlocal   {x}\ncluster {y}"
    for pool in ("Raw", "Staging"):
        _assert_same_tables(lake_local, lake_cluster, pool)
        assert app_transactions(lake_local / pool) == app_transactions(lake_cluster / pool)
    return local


def test_the_cluster_runs_the_passes(cluster: StandaloneCluster, cluster_report: dict) -> None:
    assert cluster_report["master"] == cluster.master_url
    assert cluster_report["executors"] == 2
    status = cluster.status()
    assert [w["state"] for w in status["workers"]] == ["ALIVE", "ALIVE"]
    apps = status.get("completedapps", []) + status.get("activeapps", [])
    assert any(app["name"] == "zync" for app in apps), apps


def _output_files(lake: Path) -> list[Path]:
    """The staging files holding ETL outputs (rows with a ``kafka`` struct)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    staging = lake / "Staging"
    found = []
    for uri in DeltaTable(str(staging)).file_uris():
        path = Path(uri.removeprefix("file://"))
        kafka = pq.read_table(path, columns=["kafka"]).column("kafka")
        if pc.sum(pc.is_valid(kafka)).as_py():
            found.append(path)
    return found


def test_a_large_pass_on_the_cluster_matches_local(spark, runs, cluster_report) -> None:
    import pyarrow.parquet as pq

    passes = _compare(spark, runs, cluster_report, "big")
    # the outputs were written by the executors (Spark's Java Parquet writer, into the
    # staging table's etl-<uuid>/ directories), not collected to the driver
    assert BIG_BASE > SMALL_DRIVER_OUTPUT_ROWS
    written = [p for p in _output_files(runs["lakes"]["big", "cluster"])
               if p.parent.name.startswith("etl-")]  # fmt: skip
    assert written  # the first pass's (a smaller one's come from the driver)
    for path in written:
        assert pq.read_metadata(path).created_by.startswith("parquet-mr"), path
    first, second, third = passes
    assert all(p["outputs"] for p in (first, second))
    assert sum(first["consumed"].values()) + sum(first["pending"].values()) == BIG_BASE
    assert first["expired"]
    assert first["pending"]
    assert second["outputs"]
    assert second["moved"]
    assert third["nothing_new"]
    assert not third["committed"]


# ------------------------------------------------------- driver settings (no cluster needed)


def test_driver_settings_follow_the_master(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from engine.settings.spark import SparkSettings
    from engine.spark import _builder_conf

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    on_loopback = _builder_conf(SparkSettings(master="spark://127.0.0.1:7077"))
    assert on_loopback["spark.driver.host"] == "127.0.0.1"
    assert on_loopback["spark.driver.bindAddress"] == "127.0.0.1"
    assert on_loopback["spark.pyspark.python"] == sys.executable
    remote = _builder_conf(SparkSettings(master="spark://10.1.2.3:7077"))
    assert "spark.driver.host" not in remote  # executors elsewhere must reach the driver
    assert "spark.driver.bindAddress" not in remote
    chosen = _builder_conf(
        SparkSettings(
            master="spark://10.1.2.3:7077",
            conf={"spark.driver.host": "10.1.2.4", "spark.pyspark.python": "/opt/zync/bin/python"},
        )
    )
    assert chosen["spark.driver.host"] == "10.1.2.4"
    assert chosen["spark.pyspark.python"] == "/opt/zync/bin/python"


def test_an_unreachable_master_fails_in_one_line(tmp_path: Path) -> None:
    """`zync etl` honours $ZYNC_SPARK_MASTER and says in one line that nobody answers."""
    import os
    import sys

    from engine.local.processes import free_port

    (tmp_path / "lake").mkdir()
    master = f"spark://127.0.0.1:{free_port()}"
    env = {**os.environ, "ZYNC_SPARK_MASTER": master, "ZYNC_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "zync_tui.commands.etl",
            "etl",
            str(CONFIG),
            "--lake",
            str(tmp_path / "lake"),
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"cannot reach the Spark master {master}" in lines[0]
