"""A whole database through one pipeline (issue 41): 200 tables of 60 columns captured as
Debezium Avro (confluent-kafka's serializer, the registry) and 200 as plain JSON, one raw
pool each, a configuration `zync init` writes for them (400 pass-through rules, 400
outputs), `zync run` killed with SIGKILL mid-way and started again — then every output
topic holds exactly each input change's key and row after it (a tombstone for a delete),
once, in order, and each raw pool each input record once."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from typer.testing import CliRunner

from engine.lake.pools import Lake
from tests.fixtures import wide
from zync_tui.cli import app

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow(seconds=240)]

TABLES = 200
COLUMNS = 60
TOPIC_SUBJECTS = {"subject.name.strategy.type": "TOPIC"}
FIRST, EVENTS = 5, 8  # changes 0-4 (creates) before the kill, 5-7 (u, u, d) after
AVRO, JSON_SERVER = "dbwide", "dbwidejson"


def _topics(server: str) -> list[str]:
    return [wide.topic(t, server=server) for t in range(TABLES)]


def _produce(broker: Any, registry: Any, changes: range) -> None:
    """Changes ``changes`` of every table, to both servers' topics."""
    # idempotent, as Kafka Connect's producer (Debezium's) is: without it librdkafka may
    # reorder a partition's messages when it retries a send to a topic still being made
    producer = Producer(
        {"bootstrap.servers": broker.address, "linger.ms": 20, "enable.idempotence": True}
    )
    client = SchemaRegistryClient({"url": registry.url})
    for t, topic in enumerate(_topics(AVRO)):
        # <topic>-key/-value, as Kafka Connect's converter names them (the client's
        # default asks the registry for an associated subject at every message)
        keys = AvroSerializer(client, json.dumps(wide.key_schema(t)), conf=TOPIC_SUBJECTS)
        values = AvroSerializer(client, json.dumps(wide.value_schema(t, COLUMNS)), conf=TOPIC_SUBJECTS)
        for n in changes:
            key, value = wide.change(t, n, columns=COLUMNS)
            producer.produce(
                topic,
                key=keys(key, SerializationContext(topic, MessageField.KEY)),
                value=values(value, SerializationContext(topic, MessageField.VALUE)),
            )
        producer.poll(0)
    for t, topic in enumerate(_topics(JSON_SERVER)):
        for n in changes:
            key, value = wide.change(t, n, columns=COLUMNS)
            producer.produce(topic, key=json.dumps(key), value=json.dumps(value))
        producer.poll(0)
    assert producer.flush(60) == 0


def _configuration(tmp_path: Path) -> Path:
    """`zync init` for each server's tables, one raw pool each, merged into one ETL."""
    parts = []
    for server, pool in ((AVRO, "RawAvro"), (JSON_SERVER, "RawJson")):
        out = tmp_path / f"{server}.yaml"
        result = CliRunner().invoke(
            app,
            ["init", "--from-topics", f"{server}.{wide.SCHEMA}.*", "-o", str(out),
             "--raw-pool", pool, "--output", "clean.{topic}"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert f"{TABLES} rule(s) ({TABLES} Debezium, 0 copied as they are)" in result.output
        parts.append(yaml.safe_load(out.read_text()))
    merged = {
        "name": "width",
        **{key: parts[0][key] + parts[1][key] for key in ("inputs", "outputs", "transforms")},
    }
    path = tmp_path / "width.yaml"
    path.write_text(yaml.safe_dump(merged, sort_keys=False))
    return path


def _outputs(
    broker: Any, registry: Any, expect: int, timeout: float, run: subprocess.Popen[bytes]
) -> dict[str, list[tuple[Any, Any]]]:
    """Every output topic's records (read_committed, in offset order), decoded with
    confluent-kafka's AvroDeserializer, once ``expect`` records are there (or ``run``
    ended, or ``timeout`` passed)."""
    client = SchemaRegistryClient({"url": registry.url})
    decode = AvroDeserializer(client)
    consumer = Consumer({
        "bootstrap.servers": broker.address, "group.id": f"width-{time.time_ns()}",
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })  # fmt: skip
    topics = [f"clean.{t}" for server in (AVRO, JSON_SERVER) for t in _topics(server)]
    consumer.assign([TopicPartition(t, 0, 0) for t in topics])
    got: dict[str, list[tuple[Any, Any]]] = {t: [] for t in topics}
    deadline = time.monotonic() + timeout
    seen = 0
    try:
        while seen < expect and time.monotonic() < deadline and run.poll() is None:
            for m in consumer.consume(5000, timeout=0.5):
                if m.error() is not None:
                    continue
                topic = m.topic()
                key = decode(m.key(), SerializationContext(topic, MessageField.KEY))
                value = None if m.value() is None else decode(m.value(), SerializationContext(topic, MessageField.VALUE))
                got[topic].append((key, value))
                seen += 1
        # a little longer: anything past what was expected is a duplicate
        for m in consumer.consume(5000, timeout=2.0):
            if m.error() is None:
                got[m.topic()].append(("extra", None))
    finally:
        consumer.close()
    return got


def _start(config: Path, lake: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`zync run`, its output appended to ``log``: a file, never a pipe nobody reads
    while it runs (a full pipe would stop the run at its next line)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "zync_tui.cli", "run", str(config), "--lake", str(lake),
             "--no-api"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def test_a_whole_database_through_one_pipeline_exactly_once(
    tmp_path: Path, broker: Any, registry: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZYNC_KAFKA_BOOTSTRAP_SERVERS", broker.address)
    monkeypatch.setenv("ZYNC_REGISTRY_URL", registry.url)
    _produce(broker, registry, range(FIRST))
    config = _configuration(tmp_path)
    lake = tmp_path / "lake"
    lake.mkdir()
    env = dict(os.environ)
    log = tmp_path / "run.log"
    run = _start(config, lake, env, log)
    try:
        # killed mid-way: once some outputs are staged, at a random moment after
        staging = lake / "Staging" / "_delta_log"
        deadline = time.monotonic() + 240
        while not (staging.exists() and len(list(staging.glob("*.json"))) > 2):
            assert run.poll() is None, _tail(log)
            assert time.monotonic() < deadline, "no ETL commit within 240 s"
            time.sleep(0.2)
        time.sleep(random.Random(41).uniform(0.0, 2.0))
        os.kill(run.pid, signal.SIGKILL)
        run.wait(30)
        _produce(broker, registry, range(FIRST, EVENTS))
        run = _start(config, lake, env, log)
        got = _outputs(broker, registry, expect=2 * TABLES * EVENTS, timeout=300, run=run)
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
            try:
                run.wait(120)
            except subprocess.TimeoutExpired:
                run.kill()
    for server in (AVRO, JSON_SERVER):
        for t, topic in enumerate(_topics(server)):
            expected = []
            for n in range(EVENTS):
                key, value = wide.change(t, n, columns=COLUMNS)
                expected.append((key, value["after"]))
            assert got[f"clean.{topic}"] == expected, f"{topic}; zync run's output:\n{_tail(log)}"
    # 400 outputs' routine lines folded: a summary every few seconds, not a wall of lines
    said = log.read_text(errors="replace").splitlines()
    routine = ("caught up after", "delivered pool offsets", "delivering from", "topic created")
    assert not [line for line in said if any(r in line for r in routine)], _tail(log)
    assert any(" record(s) delivered to " in line for line in said), _tail(log)
    assert len(said) < 2 * TABLES, _tail(log)
    for pool in ("RawAvro", "RawJson"):
        table = Lake(lake).open_pool(pool).dataset().to_table(columns=["kafka", "marker"])
        coordinates = [(k["topic"], k["offset"]) for k, m in zip(
            table.column("kafka").to_pylist(), table.column("marker").to_pylist(), strict=True
        ) if m is None]  # fmt: skip
        assert len(coordinates) == len(set(coordinates)) == TABLES * EVENTS, pool
