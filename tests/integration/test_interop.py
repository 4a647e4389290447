"""zync's Kafka tools against clients we did not write.

* confluent-kafka's own ``AvroSerializer`` / ``AvroDeserializer`` and
  ``SchemaRegistryClient``, against the real broker and registry, both ways;
* Kafka Connect's ``JsonConverter`` (``schemas.enable=true``) envelope, as documented.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from typer.testing import CliRunner

from zync_tui.commands.kafka import make_app

pytestmark = pytest.mark.integration

runner = CliRunner()
APP = make_app()


def ok(*args: str, input: str | None = None):  # noqa: A002 - click's name
    result = runner.invoke(APP, [str(a) for a in args], input=input)
    assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture
def stack(broker, registry, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ZYNC_KAFKA_BOOTSTRAP_SERVERS", broker.address)
    monkeypatch.setenv("ZYNC_REGISTRY_URL", registry.url)
    return broker, registry


def send(broker, topic: str, messages: list[tuple[bytes | None, bytes | None]]) -> None:
    """Bytes as they are, with a plain producer (kept in this frame, which ends here)."""
    # idempotent: in order even when a send to a topic still being made is retried
    producer = Producer({"bootstrap.servers": broker.address, "enable.idempotence": True})
    for key, value in messages:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(10) == 0


def raw_messages(broker, topic: str, count: int) -> list:
    """The first ``count`` messages of partition 0, with a plain consumer."""
    consumer = Consumer({"bootstrap.servers": broker.address, "group.id": "interop-raw",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        for _ in range(100):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                out.append(message)
            if len(out) == count:
                return out
    finally:
        consumer.close()
    raise AssertionError(f"got {len(out)} of {count} messages from {topic}")


# --------------------------------------------------------------------------- Avro: them → zync

INVOICE_SCHEMA = {
    "type": "record",
    "name": "Invoice",
    "namespace": "com.acme",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
            {"name": "name", "type": "string"}, {"name": "vip", "type": "boolean"}]}},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "Line",
            "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["OPEN", "PAID"]}},
        {"name": "total", "type": "double"},
        {"name": "blob", "type": "bytes"},
        {"name": "issued", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def test_confluent_avro_serializer_records_print_correctly(stack) -> None:
    broker, registry = stack
    topic = f"invoices-{uuid.uuid4().hex[:6]}"
    client = SchemaRegistryClient({"url": registry.url})
    values = AvroSerializer(client, json.dumps(INVOICE_SCHEMA))
    keys = AvroSerializer(client, '"string"')
    issued = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC)
    invoice = {
        "id": 2**40, "customer": {"name": "Åsa", "vip": True},
        "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}],
        "attrs": {"channel": "web"}, "note": None, "status": "PAID", "total": 19.99,
        "blob": b"\x00\x01\x02", "issued": issued,
    }
    send(broker, topic, [
        (keys(key, SerializationContext(topic, MessageField.KEY)),
         None if value is None else values(value, SerializationContext(topic, MessageField.VALUE)))
        for key, value in (("inv-1", invoice),
                           ("inv-2", {**invoice, "note": "late", "status": "OPEN"}),
                           ("inv-1", None))  # a tombstone
    ])

    for fmt in ("auto", "avro"):
        got = [json.loads(line) for line in
               ok("consume", "-t", topic, "--from-beginning", "--max", "3", "-f", fmt).stdout.splitlines()]
        expected = {
            "id": 2**40, "customer": {"name": "Åsa", "vip": True},
            "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}],
            "attrs": {"channel": "web"}, "note": None, "status": "PAID", "total": 19.99,
            "blob": base64.b64encode(b"\x00\x01\x02").decode(),
            "issued": int(issued.timestamp() * 1000),
        }
        got.sort(key=lambda r: (r["key"], r["kafka"]["offset"]))  # two keys, two partitions
        assert [(r["key"], r["value"]) for r in got] == [
            ("inv-1", expected),
            ("inv-1", None),
            ("inv-2", {**expected, "note": "late", "status": "OPEN"}),
        ]
    # and the subjects they registered are listed
    listing = ok("ls").stdout
    assert f"{topic}-key" in listing
    assert f"{topic}-value" in listing


# --------------------------------------------------------------------------- Avro: zync → them

USERS = (
    '{"id": 1, "name": "ann", "email": null, "tags": ["admin"], "address": {"city": "Oslo"}}\n'
    '{"id": 2, "name": "bob", "tags": [], "address": {"city": "Rome"}, "score": 7.5}\n'
)


def test_zync_avro_decodes_with_confluent_deserializer(stack) -> None:
    broker, registry = stack
    topic = "interop_users"
    ok("produce", "-t", topic, "--key", "id", "--namespace", "com.example", input=USERS)
    client = SchemaRegistryClient({"url": registry.url})

    # the schema is what a person would write for this data
    value_schema = client.get_latest_version(f"{topic}-value")
    assert value_schema.schema.schema_type == "AVRO"
    assert json.loads(value_schema.schema.schema_str) == {
        "type": "record",
        "name": "interop_users",
        "namespace": "com.example",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "name", "type": "string"},
            {"name": "email", "type": ["null", "string"], "default": None},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "address", "type": {"type": "record", "name": "interop_users_address",
                                         "fields": [{"name": "city", "type": "string"}]}},
            {"name": "score", "type": ["null", "double"], "default": None},
        ],
    }
    assert json.loads(client.get_latest_version(f"{topic}-key").schema.schema_str) == "int"

    values, keys = AvroDeserializer(client), AvroDeserializer(client)
    decoded = [
        (keys(m.key(), SerializationContext(topic, MessageField.KEY)),
         values(m.value(), SerializationContext(topic, MessageField.VALUE)))
        for m in raw_messages(broker, topic, 2)
    ]
    assert decoded == [
        (1, {"id": 1, "name": "ann", "email": None, "tags": ["admin"],
             "address": {"city": "Oslo"}, "score": None}),
        (2, {"id": 2, "name": "bob", "email": None, "tags": [],
             "address": {"city": "Rome"}, "score": 7.5}),
    ]


def test_zync_avro_with_a_given_schema_and_logical_types(stack, tmp_path: Path) -> None:
    broker, registry = stack
    topic = f"payments-{uuid.uuid4().hex[:6]}"
    schema = {
        "type": "record", "name": "Payment", "namespace": "com.acme",
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                        "precision": 9, "scale": 2}},
            {"name": "raw", "type": "bytes"},
        ],
    }
    avsc = tmp_path / "payment.avsc"
    avsc.write_text(json.dumps(schema))
    ok("produce", "-t", topic, "--value-schema", avsc,
       input='{"id": "p1", "at": "2024-05-01T12:30:00Z", "amount": "12.30", "raw": "aGk="}\n')
    client = SchemaRegistryClient({"url": registry.url})
    assert json.loads(client.get_latest_version(f"{topic}-value").schema.schema_str) == schema
    [message] = raw_messages(broker, topic, 1)
    value = AvroDeserializer(client)(message.value(), SerializationContext(topic, MessageField.VALUE))
    import decimal

    assert value == {"id": "p1", "at": dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC),
                     "amount": decimal.Decimal("12.30"), "raw": b"hi"}


# --------------------------------------------------------------------------- Connect JSON


def test_connect_json_has_the_json_converter_shape(stack) -> None:
    """JsonConverter (schemas.enable=true) writes {"schema": S, "payload": P}: S has type
    (int32, int64, double, boolean, string, bytes, struct, array, map), optional, and
    field for struct fields; struct fields in order; bytes are base64; string-keyed maps
    are objects."""
    broker, _ = stack
    topic = f"connect-{uuid.uuid4().hex[:6]}"
    text = (
        '{"id": 1, "big": 3000000000, "price": 9.5, "ok": true, "name": "a", "blob": "aGk=", '
        '"address": {"city": "Oslo"}, "tags": ["x"], "counts": {"2024-01-01": 3}, "note": null}\n'
        '{"id": 2, "big": 1, "price": 1, "ok": false, "name": "b", "blob": "", '
        '"address": {"city": "Rome"}, "tags": [], "counts": {}, "note": "n"}\n'
    )
    ok("produce", "-t", topic, "--format", "connect-json", "--key", "id",
       "--bytes-fields", "blob", input=text)
    messages = raw_messages(broker, topic, 2)
    schema = {
        "type": "struct",
        "fields": [
            {"type": "int32", "optional": False, "field": "id"},
            {"type": "int64", "optional": False, "field": "big"},
            {"type": "double", "optional": False, "field": "price"},
            {"type": "boolean", "optional": False, "field": "ok"},
            {"type": "string", "optional": False, "field": "name"},
            {"type": "bytes", "optional": False, "field": "blob"},
            {"type": "struct", "fields": [{"type": "string", "optional": False, "field": "city"}],
             "optional": False, "field": "address"},
            {"type": "array", "items": {"type": "string", "optional": False},
             "optional": False, "field": "tags"},
            {"type": "map", "keys": {"type": "string", "optional": False},
             "values": {"type": "int32", "optional": False}, "optional": False,
             "field": "counts"},
            {"type": "string", "optional": True, "field": "note"},
        ],
        "optional": False,
    }
    assert json.loads(messages[0].value()) == {
        "schema": schema,
        "payload": {"id": 1, "big": 3000000000, "price": 9.5, "ok": True, "name": "a",
                    "blob": "aGk=", "address": {"city": "Oslo"}, "tags": ["x"],
                    "counts": {"2024-01-01": 3}, "note": None},
    }
    assert json.loads(messages[1].value())["payload"]["price"] == 1.0
    assert json.loads(messages[0].key()) == {"schema": {"type": "int32", "optional": False},
                                             "payload": 1}


def test_json_converter_messages_print_as_their_payload(stack) -> None:
    broker, _ = stack
    topic = f"fromconnect-{uuid.uuid4().hex[:6]}"
    # the shape of JsonConverter's output in Kafka Connect's documentation and examples
    users = {
        "schema": {"type": "struct", "fields": [
            {"type": "int64", "optional": False, "field": "registertime"},
            {"type": "string", "optional": False, "field": "userid"},
            {"type": "string", "optional": False, "field": "regionid"},
            {"type": "string", "optional": True, "field": "gender"},
            {"type": "bytes", "optional": False, "name": "org.apache.kafka.connect.data.Decimal",
             "version": 1, "parameters": {"scale": "2"}, "field": "balance"},
            {"type": "map", "keys": {"type": "int32", "optional": False},
             "values": {"type": "float", "optional": False}, "optional": False,
             "field": "scores"},
        ], "optional": False, "name": "ksql.users"},
        "payload": {"registertime": 1493819497170, "userid": "User_1", "regionid": "Region_5",
                    "gender": None, "balance": base64.b64encode(b"\x00\xdd").decode(),
                    "scores": [[1, 0.5]]},
    }
    key = {"schema": {"type": "string", "optional": False}, "payload": "User_1"}
    send(broker, topic, [(json.dumps(key).encode(), json.dumps(users).encode())])
    [record] = [json.loads(line) for line in
                ok("consume", "-t", topic, "--from-beginning", "--max", "1").stdout.splitlines()]
    assert record["key"] == "User_1"
    assert record["value"] == {"registertime": 1493819497170, "userid": "User_1",
                               "regionid": "Region_5", "gender": None, "balance": "2.21",
                               "scores": {"1": 0.5}}
