"""The jars a Spark session of zync's loads beyond pyspark's own: Delta's (the ``spark``
artifact set), the s3a set when a lake is on S3, in the order the driver's class path
ends with them; the class path its class archive is made on; and how the launcher takes
them (``$SPARK_DIST_CLASSPATH``, unless a "Hadoop free" build's ``spark-env.sh`` sets it)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from engine.jvm import artifacts
from engine.jvm.class_archive import spark_classpath


def delta_jars() -> list[Path]:
    """The jars of the ``spark`` artifact set that pyspark does not ship itself (raises
    :class:`engine.jvm.artifacts.MissingArtifacts` when they are not fetched)."""
    import pyspark  # deferred: pyspark is heavy and only a session needs it

    shipped = [jar.name for jar in Path(pyspark.__file__).parent.joinpath("jars").glob("*.jar")]

    def ships(artifact: str) -> bool:
        pattern = re.compile(re.escape(artifact) + r"-\d")
        return any(pattern.match(name) for name in shipped)

    return [path for path in artifacts.classpath("spark") if not ships(path.parent.parent.name)]


def s3_jars() -> list[Path]:
    """The jars of the ``spark-s3`` set (hadoop-aws and the AWS SDK), fetched on first use
    (it needs Maven Central once; ``zync setup --with s3`` fetches them ahead)."""
    if artifacts.resolved("spark-s3") is None:
        artifacts.fetch("spark-s3")
    return artifacts.classpath("spark-s3")


#: Spark's launcher appends this variable's class path to the driver's, last: after
#: ``spark.driver.extraClassPath``, Spark's conf directory and jars, ``$HADOOP_CONF_DIR``
#: and ``$YARN_CONF_DIR``.
DIST_CLASSPATH_VAR = "SPARK_DIST_CLASSPATH"


def launcher_keeps_dist_classpath() -> bool:
    """False when Spark's ``conf/spark-env.sh`` mentions ``$SPARK_DIST_CLASSPATH`` (a
    "Hadoop free" Spark build sets it there): the launcher's scripts source that file
    after zync set the variable, so the session hands its jars over ``spark.jars``."""
    try:
        script = (spark_classpath()[0] / "spark-env.sh").read_text(errors="replace")
    except OSError:
        return True
    return DIST_CLASSPATH_VAR not in script


def driver_classpath(with_s3: bool) -> list[Path]:
    """The session's own jars, in the order the driver JVM's class path ends with them:
    Delta's, then the s3a set's when asked."""
    return [*delta_jars(), *(s3_jars() if with_s3 else [])]


@dataclass(frozen=True)
class SessionJars:
    """The session's own jars (:func:`driver_classpath`) and how they reach the driver:
    appended to its JVM's class path through ``$SPARK_DIST_CLASSPATH``
    (``on_class_path``), else only over ``spark.jars``. Decided once per session start
    (:func:`session_jars`), for its configuration and its launch alike."""

    with_s3: bool
    jars: tuple[Path, ...]
    on_class_path: bool


def archive_classpath() -> list[Path]:
    """The class path the driver's archive is made on and valid for: Spark's own, then
    Delta's jars. A JVM may append to an archive's class path, so a session with the s3a
    jars after those maps the same archive (their classes are loaded, not mapped)."""
    return [*spark_classpath(), *delta_jars()]
