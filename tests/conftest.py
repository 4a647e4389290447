"""Session fixtures with the real parts: Spark, a lake on disk, broker and registry.

Each service runs on a free port on 127.0.0.1 and is stopped by PID at the end of the
session by the fixture that started it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _zync_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the user's ~/.zync."""
    if "ZYNC_HOME" not in os.environ or not os.environ["ZYNC_HOME"].startswith(
        str(tmp_path_factory.getbasetemp())
    ):
        monkeypatch.setenv("ZYNC_HOME", str(tmp_path_factory.mktemp("zync-home")))


@pytest.fixture(scope="session")
def spark():
    """The process's one SparkSession (local[2]), stopped at the end of the session."""
    from engine.jvm.artifacts import resolved
    from engine.settings.spark import SparkSettings
    from engine.spark import get_spark, stop_spark

    if resolved("spark-s3") is not None:
        # whichever test file starts the session, the S3 lake tests find s3a in it
        os.environ.setdefault("ZYNC_SPARK_S3_JARS", "true")

    session = get_spark(SparkSettings(master="local[2]", conf={"spark.sql.shuffle.partitions": "4"}))
    yield session
    stop_spark()


@pytest.fixture
def lake(tmp_path: Path):
    """An empty lake directory."""
    from engine.lake.pools import Lake

    return Lake(tmp_path / "lake")


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """An Apache Kafka broker (KRaft) on a free port, for the whole session."""
    from tests.stack import start_broker

    running = start_broker(tmp_path_factory.mktemp("broker"))
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
