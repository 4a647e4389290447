"""`zync init --from-topics`: a starter configuration for every table a connector captures,
from topics written by confluent-kafka's own AvroSerializer (and plain JSON), on the
session broker and registry."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from typer.testing import CliRunner

from engine.api import load_config
from tests.fixtures import wide
from zync_tui.cli import app

pytestmark = pytest.mark.integration


@pytest.fixture
def connector(broker, registry, monkeypatch: pytest.MonkeyPatch) -> str:
    """A connector's topics under a fresh server name: three tables of Debezium Avro
    events (the last change of t002 a delete and its tombstone), one topic of plain JSON
    and one empty; returns the server name."""
    monkeypatch.setenv("ZYNC_KAFKA_BOOTSTRAP_SERVERS", broker.address)
    monkeypatch.setenv("ZYNC_REGISTRY_URL", registry.url)
    server = f"init{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": broker.address})
    client = SchemaRegistryClient({"url": registry.url})
    for table in range(3):
        topic = f"{server}.{wide.SCHEMA}.t{table:03d}"
        keys = AvroSerializer(client, json.dumps(wide.key_schema(table)))
        values = AvroSerializer(client, json.dumps(wide.value_schema(table, columns=6)))
        changes = [wide.change(table, n, columns=6) for n in range(8)]
        for key, value in changes:
            producer.produce(
                topic,
                key=keys(key, SerializationContext(topic, MessageField.KEY)),
                value=values(value, SerializationContext(topic, MessageField.VALUE)),
            )
        if table == 2:  # Debezium's tombstone after the delete (change 7)
            key = keys(changes[-1][0], SerializationContext(topic, MessageField.KEY))
            producer.produce(topic, key=key, value=None)
    producer.produce(f"{server}.{wide.SCHEMA}.audit", key=b"1", value=b'{"who": "x", "n": 1}')
    admin = AdminClient({"bootstrap.servers": broker.address})
    empty = f"{server}.{wide.SCHEMA}.empty"
    admin.create_topics([NewTopic(empty, 1, 1)])[empty].result(30)
    assert producer.flush(30) == 0
    return server


def test_a_starter_configuration_for_every_table(connector: str, tmp_path: Path) -> None:
    out = tmp_path / "shop.yaml"
    result = CliRunner().invoke(app, ["init", "--from-topics", f"{connector}.*", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output
    assert "5 rule(s) (4 Debezium, 1 copied as they are)" in result.output

    text = out.read_text()
    assert text.startswith("# Written by `zync init --from-topics")
    assert f"Not Debezium change events (copied as they are): {connector}.inventory.audit." in text
    assert f"Empty when sampled, taken for Debezium change events: {connector}.inventory.empty." in text
    data = yaml.safe_load(text)
    assert data["name"] == "shop"
    topics = [i["topic"] for i in data["inputs"]]
    assert topics == sorted(topics)
    assert len(topics) == 5
    assert {i["pool"] for i in data["inputs"]} == {"Raw"}
    assert [o["topic"] for o in data["outputs"]] == [
        "clean.audit", "clean.empty", "clean.t000", "clean.t001", "clean.t002",
    ]  # fmt: skip
    rules = {r["in"]: r for r in data["transforms"]}
    debezium = rules[f"{connector}.inventory.t002"]
    assert debezium["where"] == "value.op IS NOT NULL"  # Debezium's tombstones: no rule
    assert "in.value.after" in debezium["sql"]
    assert "in.value.op = 'd'" in debezium["sql"]
    assert rules[f"{connector}.inventory.audit"]["sql"] == "SELECT in.key AS key, in.value AS value"
    assert "where" not in rules[f"{connector}.inventory.audit"]
    config = load_config(out)  # the strict model takes it
    assert len(config.transforms) == 5


def test_what_init_refuses(connector: str, tmp_path: Path) -> None:
    out = tmp_path / "etl.yaml"
    out.write_text("# mine\n")
    cli = CliRunner()
    refused = cli.invoke(app, ["init", "--from-topics", f"{connector}.*", "-o", str(out)])
    assert refused.exit_code == 1
    assert "exists: choose another --out, or --force to overwrite it" in refused.output
    assert out.read_text() == "# mine\n"

    none = cli.invoke(app, ["init", "--from-topics", "nothing.like.this.*", "-o", str(tmp_path / "x.yaml")])
    assert none.exit_code == 1
    assert "no topic matches 'nothing.like.this.*' (topics:" in none.output

    clash = cli.invoke(
        app,
        ["init", "--from-topics", f"{connector}.*", "-o", str(tmp_path / "y.yaml"), "--output", "all"],
    )
    assert clash.exit_code == 1
    assert "would both write 'all': use an output name with {topic}" in clash.output

    unknown = cli.invoke(
        app,
        ["init", "--from-topics", f"{connector}.*", "-o", str(tmp_path / "z.yaml"), "--output", "x.{tabel}"],
    )
    assert unknown.exit_code == 1
    assert "unknown placeholder {tabel}; use {topic} or {table}" in unknown.output
    assert not (tmp_path / "z.yaml").exists()
