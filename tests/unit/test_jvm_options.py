"""``$ZYNC_JVM_OPTS`` reaches every JVM zync starts: the embedded broker's command line
and Spark's driver and executor options (after zync's own, so they can override them)."""

from __future__ import annotations

import shlex

import pytest

from engine.jvm.java import JVM_OPTS_VAR, chooses_collector, extra_options


def test_options_are_split_as_a_shell_would(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JVM_OPTS_VAR, raising=False)
    assert extra_options() == []
    monkeypatch.setenv(JVM_OPTS_VAR, "-XX:TieredStopAtLevel=1 '-Dsome.path=/a b/c'")
    assert extra_options() == ["-XX:TieredStopAtLevel=1", "-Dsome.path=/a b/c"]


def test_the_broker_and_spark_get_them(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from engine.local import broker
    from engine.settings.spark import SparkSettings
    from engine.spark import _builder_conf

    monkeypatch.setenv(JVM_OPTS_VAR, "-Xss2m -XX:TieredStopAtLevel=1")
    monkeypatch.setattr(broker.artifacts, "classpath", lambda name: [])
    argv = broker._java_argv("kafka.Kafka", "server.properties", log_dir=tmp_path)
    assert argv.index("-XX:TieredStopAtLevel=1") < argv.index("kafka.Kafka")
    assert "-Xss2m" in argv
    conf = _builder_conf(SparkSettings(master="local[2]"))
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        options = shlex.split(conf[key])
        if key == "spark.driver.extraJavaOptions":
            # a driver out of memory exits: Spark's result thread would otherwise die of it
            # silently and leave the caller waiting for ever
            assert options.pop(0) == "-XX:+ExitOnOutOfMemoryError"
        assert options[0].startswith("-Dlog4j2.configurationFile=")
        assert options[1:3] == ["-Xss2m", "-XX:TieredStopAtLevel=1"]
        # then, for the driver only, its class archive when one was made
        assert all(o.startswith("-XX:SharedArchiveFile=") for o in options[3:])
    assert len(shlex.split(conf["spark.executor.extraJavaOptions"])) == 3


def test_the_broker_keeps_its_collector(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A collector chosen in $ZYNC_JVM_OPTS is for Spark's JVMs; the broker keeps G1 (a JVM
    given two refuses to start: "Multiple garbage collectors selected")."""
    from engine.local import broker
    from engine.settings.spark import SparkSettings
    from engine.spark import _builder_conf

    monkeypatch.setattr(broker.artifacts, "classpath", lambda name: [])
    monkeypatch.setenv(JVM_OPTS_VAR, "-XX:+UseSerialGC -Xss2m")
    argv = broker._java_argv("kafka.Kafka", "server.properties", log_dir=tmp_path)
    assert [o for o in argv if chooses_collector(o)] == ["-XX:+UseG1GC"]
    assert "-Xss2m" in argv
    conf = _builder_conf(SparkSettings(master="local[2]"))
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        assert "-XX:+UseSerialGC" in shlex.split(conf[key])
    assert not any(
        chooses_collector(o) for o in ("-XX:+UseStringDeduplication", "-XX:-UseGCOverheadLimit", "-Xss2m")
    )
