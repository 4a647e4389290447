"""Where a session's jars go (engine.spark): appended to the driver JVM's own class path,
whose class archive covers Delta's; handed to executors (``spark.jars``) only when they
run in JVMs of their own — in ``local[N]`` that would copy every jar (~700 MB with the
AWS SDK) into a scratch directory at each start."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from engine import spark as sessions
from engine import spark_jars
from engine.jvm import class_archive
from engine.settings.spark import SparkSettings


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("ZYNC_SPARK_S3_JARS", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_CONF_DIR",
                sessions.DIST_CLASSPATH_VAR):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv(class_archive.SWITCH_VAR, raising=False)
    monkeypatch.setattr(class_archive, "archive_dir", lambda: tmp_path / "archives")
    monkeypatch.setattr(sessions, "_object_storage", None)  # an S3 test on this worker set it


def _archived(conf: dict[str, str]) -> list[str]:
    options = shlex.split(conf["spark.driver.extraJavaOptions"])
    return [o for o in options if o.startswith("-XX:SharedArchiveFile=")]


def _make_archive() -> Path:
    path = class_archive.archive_path("spark", sessions.archive_classpath())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"archive")
    return path


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,3]"])
def test_executors_in_the_driver_are_handed_no_jars(master: str) -> None:
    assert "spark.jars" not in sessions._builder_conf(SparkSettings(master=master))


@pytest.mark.parametrize("master", ["spark://127.0.0.1:7077", "local-cluster[2,1,1024]"])
def test_executors_elsewhere_fetch_the_jars_from_the_driver(
    master: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = sessions._builder_conf(SparkSettings(master=master))
    assert conf["spark.jars"].split(",") == [str(jar) for jar in spark_jars.delta_jars()]
    monkeypatch.setenv("ZYNC_SPARK_S3_JARS", "true")
    conf = sessions._builder_conf(SparkSettings(master=master))
    assert conf["spark.jars"].split(",") == [str(j) for j in sessions.driver_classpath(True)]
    assert any("hadoop-aws" in jar for jar in conf["spark.jars"].split(","))


def test_the_driver_maps_the_archive_of_spark_and_delta_with_or_without_s3(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _archived(sessions._builder_conf(SparkSettings(master="local[2]"))) == []
    path = _make_archive()
    assert sessions.archive_classpath()[-len(spark_jars.delta_jars()):] == spark_jars.delta_jars()
    for s3 in ("false", "true"):  # the s3a jars come after the archive's class path
        monkeypatch.setenv("ZYNC_SPARK_S3_JARS", s3)
        conf = sessions._builder_conf(SparkSettings(master="local[2]"))
        assert _archived(conf) == [f"-XX:SharedArchiveFile={path}"]


@pytest.mark.parametrize(
    "var", ["spark.driver.extraClassPath", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH"]
)
def test_a_users_class_path_before_ours_voids_the_archive(
    var: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _make_archive()
    settings = SparkSettings(master="local[2]")
    if var.startswith("spark."):
        settings = SparkSettings(master="local[2]", conf={var: "/opt/udfs.jar"})
    else:
        monkeypatch.setenv(var, "/opt/hadoop/etc")
    assert _archived(sessions._builder_conf(settings)) == []


def test_the_jars_are_appended_while_the_jvm_is_launched(monkeypatch: pytest.MonkeyPatch) -> None:
    jars = [Path("/a/delta.jar"), Path("/b/aws.jar")]
    with sessions._class_path_appended(jars):
        assert os.environ[sessions.DIST_CLASSPATH_VAR] == os.pathsep.join(map(str, jars))
    assert sessions.DIST_CLASSPATH_VAR not in os.environ
    monkeypatch.setenv(sessions.DIST_CLASSPATH_VAR, "/hadoop/*")
    with sessions._class_path_appended(jars):
        assert os.environ[sessions.DIST_CLASSPATH_VAR].split(os.pathsep) == [
            "/hadoop/*", *map(str, jars)
        ]
    assert os.environ[sessions.DIST_CLASSPATH_VAR] == "/hadoop/*"


def test_a_spark_env_script_that_sets_the_variable_gets_the_jars_handed_over(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A "Hadoop free" Spark build's conf/spark-env.sh sets $SPARK_DIST_CLASSPATH, and
    the launcher's scripts source it after zync set it: the jars go by spark.jars."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    _make_archive()
    assert sessions.launcher_keeps_dist_classpath()
    assert "spark.jars" not in sessions._builder_conf(SparkSettings(master="local[2]"))
    (conf_dir / "spark-env.sh").write_text("export SPARK_DIST_CLASSPATH=$(hadoop classpath)\n")
    assert not sessions.launcher_keeps_dist_classpath()
    conf = sessions._builder_conf(SparkSettings(master="local[2]"))
    assert conf["spark.jars"].split(",") == [str(jar) for jar in spark_jars.delta_jars()]
    assert _archived(conf) == []
