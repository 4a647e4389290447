"""The class archives `zync setup` makes are the ones the JVMs map: the embedded broker
and this session's Spark driver each have the archive of their class path in their
memory map; `zync setup` says where they are."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.api import make_broker_class_archive, make_spark_class_archive
from engine.local.broker import start_broker
from engine.local.processes import stop_process

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_the_broker_maps_its_archive(tmp_path: Path) -> None:
    archive = make_broker_class_archive()
    proc = start_broker(tmp_path / "broker", port=0)
    try:
        assert str(archive.path) in _maps(proc.pid)
    finally:
        stop_process(proc)


def test_the_spark_driver_maps_its_archive(spark) -> None:
    archive = make_spark_class_archive()
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    # scripts/test.sh runs `zync setup` (which makes it) before any session starts
    assert str(archive.path) in _maps(pid), "the session started before `zync setup` made the archive"


def test_setup_says_where_they_are() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "zync_tui.cli", "setup"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    for kind in ("spark", "kafka"):
        line = next(ln for ln in done.stderr.splitlines() if ln.startswith(f"{kind}: class archive"))
        assert f"{make_spark_class_archive().path.parent}" in line
    quiet = subprocess.run(
        [sys.executable, "-m", "zync_tui.cli", "setup", "--quiet"], capture_output=True, text=True,
        timeout=600,
    )
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""


def test_the_sessions_jars_end_the_drivers_class_path_and_are_not_copied(spark) -> None:
    """Delta's jars, then the s3a set's (the tests' session loads it), after Spark's own
    (whose classes keep precedence); none copied into the session's scratch directory."""
    from pyspark import SparkFiles

    from engine.spark_jars import driver_classpath

    jvm = spark._jvm
    classpath = jvm.java.lang.System.getProperty("java.class.path").split(os.pathsep)
    ours = [str(jar) for jar in driver_classpath(with_s3=True)]
    assert classpath[-len(ours):] == ours
    assert any("/pyspark/jars/" in entry for entry in classpath[: -len(ours)])
    scratch = Path(SparkFiles.getRootDirectory())
    assert not list(scratch.rglob("*.jar"))
