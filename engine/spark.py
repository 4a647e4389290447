"""The one SparkSession of a zync process.

The session runs on Java 17/21 (:mod:`engine.jvm.java`) with delta-spark loaded: the jars
of the ``spark`` artifact set (:mod:`engine.jvm.artifacts`, fetched by ``zync setup``),
Delta's SQL extension and catalog, so every read of a pool is Delta's own reader
(docs/design.md#readers-and-writers). Jars pyspark already ships are not loaded twice.

Nothing happens at import time; :func:`get_spark` starts the session on first use and
returns the same session afterwards.

The same code runs on a Spark cluster (``spark://host:7077``; README "Running on a
cluster"): the driver (this process) plans and commits through delta-rs, the executors
read the pools through Delta, decode, join and anti-join. For that:

* executors run the same Python as the driver (``PYSPARK_PYTHON``: an explicit
  ``spark.pyspark.python`` setting, else ``$PYSPARK_PYTHON``, else this interpreter),
  so the cluster's nodes need this virtualenv at the same path;
* the driver binds and advertises 127.0.0.1 when the master is local or on the loopback
  interface; for any other master Spark picks the host's address (``SPARK_LOCAL_IP``,
  ``spark.driver.host`` and ``spark.driver.bindAddress`` override it) so executors on
  other hosts can connect back;
* a ``spark://`` master that accepts no connection fails at once with a one-line
  :class:`SparkMasterError`, instead of Spark's minute of retries.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from engine.jvm import class_archive
from engine.jvm.class_archive import ClassArchiveError
from engine.jvm.java import JVM_OPTS_VAR, extra_options, resolve_java
from engine.settings.home import zync_home
from engine.settings.spark import SparkSettings, load_spark_settings
from engine.spark_jars import (
    DIST_CLASSPATH_VAR,
    SessionJars,
    archive_classpath,
    driver_classpath,
    launcher_keeps_dist_classpath,
)
from engine.spark_master import (
    check_master,
    executors_in_driver,
    is_local_master,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.settings.storage import StorageSettings


# Delta's SQL extension (OPTIMIZE, VACUUM, DESCRIBE HISTORY, time travel) and catalog
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


T = TypeVar("T")

#: The process's Spark session as the CLI and the console name it (engine.api): a handle
#: they get from :func:`get_spark` and hand back to the engine, never use themselves.
Spark: TypeAlias = "SparkSession"

#: A SparkSession, a factory of one, or None (the process's session, built when needed).
SparkSource: TypeAlias = "SparkSession | Callable[[], SparkSession] | None"


_lock = threading.Lock()
_session: SparkSession | None = None
_session_settings: SparkSettings | None = None
_object_storage: StorageSettings | None = None
_session_has_s3 = False


def use_object_storage(storage: StorageSettings) -> None:
    """Give the session S3 (s3a) access with ``storage``: called when a lake on S3 is
    opened. Before the session starts, its jars (the ``spark-s3`` artifact set) and
    configuration go into the builder; afterwards the s3a settings are set on the running
    session's Hadoop configuration (the jars must then already be loaded: open the lake
    before starting Spark, or set ``$ZYNC_SPARK_S3_JARS=true`` to load them always)."""
    global _object_storage
    with _lock:
        _object_storage = storage
        session = _session
    if session is not None:
        if not _session_has_s3:
            logging.getLogger(__name__).warning(
                "Spark was started before the S3 lake was opened, without the s3a jars: "
                "reading the lake from Spark will fail (open the lake first, or set "
                "ZYNC_SPARK_S3_JARS=true)"
            )
        hadoop = session.sparkContext._jsc.hadoopConfiguration()
        for key, value in storage.hadoop_conf().items():
            hadoop.set(key.removeprefix("spark.hadoop."), value)


def _log4j_config() -> str:
    return str(resources.files("engine").joinpath("log4j2.properties"))


def executor_python(settings: SparkSettings) -> str:
    """The Python executors run: ``spark.pyspark.python`` from the settings, else
    ``$PYSPARK_PYTHON``, else this interpreter (the virtualenv zync runs in)."""
    return (
        settings.conf.get("spark.pyspark.python")
        or os.environ.get("PYSPARK_PYTHON")
        or sys.executable
    )


_YES = frozenset({"1", "true", "yes", "on"})


def wants_s3_jars() -> bool:
    """True when the session is to load Spark's s3a jars: a lake on S3 was opened, or
    ``$ZYNC_SPARK_S3_JARS`` says always."""
    return _object_storage is not None or os.environ.get("ZYNC_SPARK_S3_JARS", "") in _YES


def session_jars() -> SessionJars:
    """Where this process's session gets its jars from, as things stand now."""
    with_s3 = wants_s3_jars()
    return SessionJars(with_s3, tuple(driver_classpath(with_s3)), launcher_keeps_dist_classpath())


def _builder_conf(settings: SparkSettings, jars: SessionJars | None = None) -> dict[str, str]:
    """The session's Spark configuration, its jars going as ``jars`` says (default:
    :func:`session_jars`). :func:`get_spark` appends them to the driver JVM's class path
    when ``jars.on_class_path``; ``spark.jars`` hands them to executors in JVMs of their
    own, and to the driver otherwise."""
    jars = jars or session_jars()
    executor = [f"-Dlog4j2.configurationFile=file:{_log4j_config()}", *extra_options()]
    # the archive fits only its class path: none when a user's entries come before ours
    users = [settings.conf.get("spark.driver.extraClassPath")]
    users += [os.environ.get(var) for var in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", DIST_CLASSPATH_VAR)]
    fits = jars.on_class_path and not any(users)
    archive = class_archive.use_options("spark", archive_classpath()) if fits else []
    # A driver out of memory exits instead of limping on: Spark's thread that hands a
    # result to Python dies of the error without telling the caller, who would wait for
    # ever (a pass hung, its loop wedged); a JVM that has gone makes every call fail,
    # and the loop reports it.
    driver = ["-XX:+ExitOnOutOfMemoryError", *executor, *archive]
    s3: dict[str, str] = {}
    if _object_storage is not None:
        s3 = _object_storage.hadoop_conf()
    # Executors in the driver's JVM (local[N]) find the jars on its class path; executors
    # elsewhere fetch them from the driver. spark.jars in local[N] would have the driver
    # copy every jar into a scratch directory at each start (~700 MB with the AWS SDK).
    in_driver = executors_in_driver(settings.master) and jars.on_class_path
    handed = [] if in_driver else jars.jars
    distributed = {"spark.jars": ",".join(str(jar) for jar in handed)} if handed else {}
    conf = {
        **DELTA_CONF,
        **s3,
        **distributed,
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.memory": "2g",
        "spark.driver.extraJavaOptions": shlex.join(driver),
        "spark.executor.extraJavaOptions": shlex.join(executor),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
        "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
        "spark.pyspark.python": executor_python(settings),
        # zync reads and writes tables by path and makes no managed table; Spark still
        # creates its warehouse directory when the session starts, by default in the
        # working directory (an empty `spark-warehouse/` wherever a user ran zync)
        "spark.sql.warehouse.dir": str(zync_home() / "spark-warehouse"),
    }
    if is_local_master(settings.master):
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
    conf.update(settings.conf)
    return conf


def get_spark(settings: SparkSettings | None = None) -> SparkSession:
    """The process's SparkSession, started on first call.

    Without ``settings`` they come from :func:`engine.settings.spark.load_spark_settings`
    (``spark.json`` < ``$ZYNC_SPARK_MASTER``), so every caller honours the configured
    master. A later call with different settings gets the running session unchanged:
    one long-lived session per process (docs/design.md, "The embedded stack"). Raises
    :class:`JavaNotFoundError`, :class:`SparkMasterError` or
    :class:`engine.settings.errors.ConfigError`.
    """
    global _session, _session_settings, _session_has_s3
    with _lock:
        if _session is not None:
            return _session
        if settings is None:
            settings = load_spark_settings()
        java = resolve_java()
        check_master(settings.master)
        jars = session_jars()
        conf = _builder_conf(settings, jars)
        os.environ["JAVA_HOME"] = str(java.home)
        # PySpark hands executors the interpreter named by $PYSPARK_PYTHON (the conf key
        # is only read by spark-submit), so both say the same
        os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if is_local_master(settings.master):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark.sql import SparkSession  # deferred: pyspark is heavy

        builder = SparkSession.builder.appName(settings.app_name).master(settings.master)
        for key, value in conf.items():
            builder = builder.config(key, value)
        with _class_path_appended(list(jars.jars) if jars.on_class_path else []):
            session = _with_stderr_to(spark_log_path(), builder.getOrCreate)
        _quiet_query_context_loggers()
        session.sparkContext.setLogLevel("ERROR")
        _session, _session_settings = session, settings
        _session_has_s3 = jars.with_s3
        return session


@contextlib.contextmanager
def _class_path_appended(jars: list[Path]) -> Iterator[None]:
    """While the driver's JVM is launched, ``$SPARK_DIST_CLASSPATH`` ends with ``jars``
    (after a user's own), so the launcher appends them to the JVM's class path: after
    Spark's jars, whose classes keep precedence as they would from ``spark.jars``."""
    before = os.environ.get(DIST_CLASSPATH_VAR)
    os.environ[DIST_CLASSPATH_VAR] = os.pathsep.join([*filter(None, [before]), *map(str, jars)])
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DIST_CLASSPATH_VAR, None)
        else:
            os.environ[DIST_CLASSPATH_VAR] = before


def spark_factory(spark: SparkSource) -> Callable[[], SparkSession]:
    """A callable giving a SparkSession from a session, a factory or None (None: the
    process's session with the configured settings). Nothing starts until it is called,
    so a caller that turns out not to need Spark never starts a JVM."""
    if spark is None:

        def default() -> SparkSession:
            return get_spark(load_spark_settings())

        return default
    if callable(spark) and not hasattr(spark, "sql"):
        return spark
    session = spark
    return lambda: session  # type: ignore[return-value]  # a session, not a factory


def spark_log_path() -> Path:
    """Where the Spark JVM's own output goes (``<zync home>/logs/spark.log``).

    The JVM and its Python workers write to the stderr they were started with; pointing
    it at a file keeps a user's terminal (and the console's screen) clean.
    """
    return zync_home() / "logs" / "spark.log"


def _with_stderr_to(path: Path, start: Callable[[], T]) -> T:
    """Run ``start`` (which launches the JVM) with file descriptor 2 pointing at ``path``,
    so the child JVM inherits the file as its stderr; ours is restored afterwards."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        return start()  # an unwritable home must not stop Spark: keep the terminal
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        os.dup2(log_fd, 2)
        return start()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log_fd)


def spark_master() -> str | None:
    """The master of the running session (None before :func:`get_spark`)."""
    return None if _session_settings is None else _session_settings.master


def s3_ready() -> bool:
    """True when the running session was started with Spark's s3a jars."""
    return _session is not None and _session_has_s3


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


def _quiet_query_context_loggers() -> None:
    """PySpark logs every failed query's context as JSON on stderr through its own
    loggers; zync reports those failures itself, in words, so they are turned off."""
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).disabled = True


def make_class_archive(timeout: float = 600.0) -> class_archive.ClassArchive:
    """The Spark driver's class archive (:mod:`engine.jvm.class_archive`) on
    :func:`archive_classpath`, made unless it exists: a session started as every session
    is (without the s3a jars), in a child process, runs :func:`_archive_workload`; its JVM
    writes the archive as it exits. Raises :class:`ClassArchiveError`."""

    def run(jvm_options: list[str]) -> None:
        env = {
            **os.environ,
            JVM_OPTS_VAR: shlex.join([*extra_options(), *jvm_options]),
            "ZYNC_SPARK_S3_JARS": "false",
        }
        code = "from engine.spark import _archive_workload; _archive_workload()"
        try:
            done = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True,
                timeout=timeout,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise ClassArchiveError(
                f"the Spark session for the class archive took over {timeout:.0f} s"
            ) from None
        if done.returncode != 0:
            lines = (done.stdout + done.stderr).strip().splitlines()
            raise ClassArchiveError(
                "the Spark session for the class archive failed: "
                + (lines[-1] if lines else f"exit code {done.returncode}")
            )

    return class_archive.make("spark", archive_classpath(), run)


def _archive_workload() -> None:
    """Work like a pass's (an Arrow frame in, JSON decoded, joins, a window, a union, a
    Delta table written and read, Arrow out) in a local session, so its JVM loads the
    classes every session needs; then stops the JVM and waits until it exited. Run by
    :func:`make_class_archive` in a process of its own."""
    import pyarrow as pa  # deferred: pyarrow, only for this workload

    spark = get_spark(SparkSettings(master="local[2]", app_name="zync-class-archive"))
    rows = pa.table(
        {
            "seqno": pa.array(range(200), pa.int64()),
            "value": pa.array([f'{{"ID": {i % 40}, "Amount": {i}.5}}' for i in range(200)]),
        }
    )
    spark.createDataFrame(rows).createOrReplaceTempView("zync_archive_rows")
    statement = """
        WITH decoded AS (
            SELECT seqno, from_json(value, 'ID BIGINT, Amount DOUBLE') AS v
            FROM zync_archive_rows
        ), firsts AS (
            SELECT v.ID AS id, min(seqno) AS first FROM decoded GROUP BY v.ID
        ), numbered AS (
            SELECT /*+ BROADCAST(f) */ d.seqno, d.v, f.first,
                   row_number() OVER (PARTITION BY d.v.ID ORDER BY d.seqno) AS n
            FROM decoded d JOIN firsts f ON d.v.ID = f.id
        )
        SELECT seqno, to_json(named_struct('id', v.ID, 'n', n)) AS out FROM numbered
        WHERE n > 1
        UNION ALL
        SELECT d.seqno, CAST(NULL AS STRING) FROM decoded d
        LEFT ANTI JOIN numbered x ON d.seqno = x.seqno
    """
    result = spark.sql(statement)
    result.toArrow()
    with tempfile.TemporaryDirectory(prefix="zync-class-archive-") as tmp:
        result.write.format("delta").mode("overwrite").save(tmp)
        spark.read.format("delta").load(tmp).where("seqno >= 100").toArrow()
    # the JVM writes the archive as it exits, which it does when its stdin closes: wait for
    # it here, so the archive is complete when this process ends
    jvm = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
    stop_spark()
    jvm.stdin.close()
    jvm.wait(timeout=300)
