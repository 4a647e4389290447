"""Session fixtures with the real parts: Spark, a lake on disk, broker and registry.

Each service runs on a free port on 127.0.0.1 and is stopped by PID at the end of the
session by the fixture that started it.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Every JVM the tests start (brokers, Spark drivers, executors, the cluster's daemons;
#: subprocesses inherit it) compiles with C1 only: they live seconds to minutes on small
#: data, and skipping C2 halves their CPU (bench/RESULTS.md, "The test suite"); C1 alone
#: gets a smaller code cache by default, which Spark fills. Spark's JVMs collect with the
#: serial collector, which spends less CPU than G1 on small heaps and two cores (same
#: file); the brokers keep G1, as Kafka's scripts start them (engine/local/broker.py).
#: Set before any JVM starts; an explicit $ZYNC_JVM_OPTS wins.
os.environ.setdefault(
    "ZYNC_JVM_OPTS", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m -XX:+UseSerialGC"
)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Once the tests are collected, the objects made so far (every imported module)
    leave the garbage collector's care, and it collects less often: a worker lives for
    the whole run and allocates much (consoles, Arrow tables). tests/console with two
    workers: 52 and 49 → 44 and 46 CPU-s (bench/RESULTS.md, "The test suite")."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, each file's tests together and in their order.

    scripts/test.sh's workers take whole files in this order (``--dist loadfile
    --no-loadscope-reorder``), so the long ones start at once on different workers
    instead of ending the run on one. A file's weight is the largest ``seconds`` of its ``slow``
    markers (``pytest.mark.slow(seconds=300)``: about that long on two cores; a bare
    ``slow`` counts as 60); the other files keep their order after them."""

    def weight(item: pytest.Item) -> int:
        marker = item.get_closest_marker("slow")
        return 0 if marker is None else int(marker.kwargs.get("seconds", 60))

    by_file: dict[Path, int] = {}
    for item in items:
        by_file[item.path] = max(by_file.get(item.path, 0), weight(item))
    items.sort(key=lambda item: -by_file[item.path])


@pytest.fixture(autouse=True)
def _zync_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the user's ~/.zync."""
    if "ZYNC_HOME" not in os.environ or not os.environ["ZYNC_HOME"].startswith(
        str(tmp_path_factory.getbasetemp())
    ):
        monkeypatch.setenv("ZYNC_HOME", str(tmp_path_factory.mktemp("zync-home")))


@pytest.fixture(scope="session")
def spark():
    """The process's one SparkSession (local[2]), stopped at the end of the session.

    Started with Spark's s3a jars (``$ZYNC_SPARK_S3_JARS``, as a user who opens lakes
    on S3 after Spark has started sets it), so the S3 lake tests share the session of
    every other test file on their worker instead of starting a JVM of their own.

    Its expressions are evaluated interpreted (``spark.sql.codegen.factoryMode``
    ``NO_CODEGEN``): the tests' passes are small and many, and generating and compiling
    code for each new plan cost more than running it (test_etl_invoices + test_etl_window:
    184 → 150 CPU-s, bench/RESULTS.md "The test suite"), and each query is planned once,
    without adaptive re-planning between its stages (``spark.sql.adaptive.enabled``
    ``false``; the same two files: 163 and 161 → 149 and 152 CPU-s). The results are the
    same by Spark's contract; the ``zync`` processes the end-to-end tests start run Spark
    as users do (code generated, adaptive), and test_cluster compares a run of each kind
    row by row."""
    from engine.settings.spark import SparkSettings
    from engine.spark import get_spark, stop_spark

    before = os.environ.get("ZYNC_SPARK_S3_JARS")
    os.environ["ZYNC_SPARK_S3_JARS"] = "true"
    try:
        session = get_spark(
            SparkSettings(
                master="local[2]",
                conf={
                    "spark.sql.shuffle.partitions": "4",
                    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
                    "spark.sql.adaptive.enabled": "false",
                },
            )
        )
    finally:
        if before is None:
            del os.environ["ZYNC_SPARK_S3_JARS"]
        else:
            os.environ["ZYNC_SPARK_S3_JARS"] = before
    yield session
    stop_spark()


@pytest.fixture
def lake(tmp_path: Path):
    """An empty lake directory."""
    from engine.lake.pools import Lake

    return Lake(tmp_path / "lake")


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """An Apache Kafka broker (KRaft) on a free port, for the whole session; it applies
    retention and compaction within seconds (tests.stack.SESSION_BROKER)."""
    from tests.stack import SESSION_BROKER, start_broker

    running = start_broker(tmp_path_factory.mktemp("broker"), SESSION_BROKER)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """zync's Schema Registry service (SQLite) on a free port, for the whole session."""
    from tests.stack import start_registry

    running = start_registry(tmp_path_factory.mktemp("registry"))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """moto's S3 + DynamoDB server on a free port of 127.0.0.1, for one test module."""
    from tests.s3 import start_moto

    server = start_moto(tmp_path_factory.mktemp("moto"))
    yield server
    server.stop()


@pytest.fixture
def s3_url(moto, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh ``s3://`` lake on the moto server, with the AWS settings that reach it in
    the environment (as a user would export them)."""
    from engine.lake.commit_guard import forget_probes

    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    forget_probes()
    return moto.new_lake()
