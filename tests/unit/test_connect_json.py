"""Kafka Connect JsonConverter envelopes (schemas.enable=true)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from engine.kafka.codecs import connect_json
from engine.kafka.codecs.connect_json import ConnectSchemaError
from engine.kafka.codecs.errors import DecodeError
from tests.fixtures.debezium import (
    CONNECT_KEY_SCHEMA,
    CONNECT_VALUE_SCHEMA,
    events,
    to_connect_payload,
    to_json_form,
)


def _envelope(schema: Any, payload: Any) -> bytes:
    return json.dumps({"schema": schema, "payload": payload}).encode()


def test_debezium_event_decodes_to_its_json_form() -> None:
    for event in events(12):
        record = connect_json.decode(_envelope(CONNECT_VALUE_SCHEMA, to_connect_payload(event)))
        assert record.schema == CONNECT_VALUE_SCHEMA
        assert record.payload == to_json_form(event)


def test_decode_json_is_compact_payload_text() -> None:
    event = events(2)[1]
    text = connect_json.decode_json(_envelope(CONNECT_VALUE_SCHEMA, to_connect_payload(event)))
    assert json.loads(text) == to_json_form(event)
    assert ", " not in text
    assert text.startswith('{"before":')


def test_key_envelope() -> None:
    data = _envelope(CONNECT_KEY_SCHEMA, {"ID": 1001})
    assert connect_json.decode(data).payload == {"ID": 1001}


def test_encode_writes_jsonconverter_shape_and_round_trips() -> None:
    event = to_json_form(events(3)[2])
    data = connect_json.encode(CONNECT_VALUE_SCHEMA, event)
    envelope = json.loads(data)
    assert list(envelope) == ["schema", "payload"]
    amount = (envelope["payload"]["after"] or envelope["payload"]["before"])["amount"]
    assert isinstance(amount, str)
    assert base64.b64decode(amount)
    assert connect_json.decode(data).payload == event


def test_types_and_conventions() -> None:
    schema = {
        "type": "struct",
        "fields": [
            {"type": "int8", "optional": False, "field": "i8"},
            {"type": "int16", "optional": False, "field": "i16"},
            {"type": "float", "optional": False, "field": "f"},
            {"type": "float64", "optional": False, "field": "d"},
            {"type": "boolean", "optional": False, "field": "b"},
            {"type": "bytes", "optional": False, "field": "raw"},
            {
                "type": "array",
                "items": {"type": "string", "optional": True},
                "optional": False,
                "field": "a",
            },
            {"type": "map", "keys": {"type": "string"}, "values": {"type": "int64"}, "field": "m"},
            {"type": "map", "keys": {"type": "int32"}, "values": {"type": "string"}, "field": "im"},
            {"type": "int32", "optional": True, "field": "missing"},
            {"type": "string", "optional": False, "default": "none", "field": "dflt"},
            {"type": "struct", "fields": [], "optional": True, "field": "empty"},
        ],
    }
    payload = {
        "i8": -128,
        "i16": 300,
        "f": 1.5,
        "d": 2,
        "b": True,
        "raw": "AP8=",
        "a": ["x", None],
        "m": {"k": 1},
        "im": [[1, "one"], [2, "two"]],
        "dflt": None,
        "empty": {},
        "ignored": "JsonConverter reads only schema fields",
    }
    assert connect_json.decode(_envelope(schema, payload)).payload == {
        "i8": -128,
        "i16": 300,
        "f": 1.5,
        "d": 2.0,
        "b": True,
        "raw": "AP8=",
        "a": ["x", None],
        "m": {"k": 1},
        "im": {"1": "one", "2": "two"},
        "missing": None,
        "dflt": "none",
        "empty": {},
    }
    encoded = json.loads(
        connect_json.encode(schema, connect_json.decode(_envelope(schema, payload)).payload)
    )
    assert encoded["payload"]["im"] == [[1, "one"], [2, "two"]]


def test_decimal_numeric_format_and_negative_values() -> None:
    schema = {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "3"},
    }
    neg = base64.b64encode((-1500).to_bytes(2, "big", signed=True)).decode()
    assert connect_json.decode(_envelope(schema, neg)).payload == "-1.500"
    assert connect_json.decode(_envelope(schema, 2.5)).payload == "2.500"
    assert json.loads(connect_json.encode(schema, "-1.5"))["payload"] == neg


def test_schemaless_envelope() -> None:
    record = connect_json.decode(_envelope(None, {"a": [1, 2.5, None]}))
    assert record.schema is None
    assert record.payload == {"a": [1, 2.5, None]}
    assert json.loads(connect_json.encode(None, {"b": b"\x01"}))["payload"] == {"b": "AQ=="}


@pytest.mark.parametrize(
    ("data", "kind", "message"),
    [
        (b"\xff\xfe", "bad-json", "UTF-8"),
        (b"{not json", "bad-json", "not JSON"),
        (b'{"schema": null, "payload": NaN}', "bad-json", "NaN"),
        (b'{"a": 1}', "bad-connect-envelope", "found a"),
        (b'{"schema": null}', "bad-connect-envelope", "exactly schema and payload"),
        (b'{"schema": null, "payload": 1, "x": 2}', "bad-connect-envelope", "payload, schema, x"),
        (b"[1]", "bad-connect-envelope", "an array"),
        (b'{"schema": {"type": "int33"}, "payload": 1}', "bad-connect-envelope", "unknown type"),
        (b'{"schema": {"type": "array"}, "payload": []}', "bad-connect-envelope", "without items"),
        (
            b'{"schema": {"type": "struct", "fields": [{"type": "string"}]}, "payload": {}}',
            "bad-connect-envelope",
            "field name missing",
        ),
        (
            b'{"schema": {"type": "int8"}, "payload": 300}',
            "bad-connect-envelope",
            "value: 300 is out of range for int8",
        ),
        (
            b'{"schema": {"type": "int32"}, "payload": null}',
            "bad-connect-envelope",
            "null value for a required int32",
        ),
        (b'{"schema": {"type": "bytes"}, "payload": "%%%"}', "bad-connect-envelope", "base64"),
        (
            b'{"schema": {"type": "map", "keys": {"type": "string"}, "values": {"type": "string"}},'
            b' "payload": [1]}',
            "bad-connect-envelope",
            "JSON objects",
        ),
        (
            b'{"schema": {"type": "map", "keys": {"type": "int32"}, "values": {"type": "string"}},'
            b' "payload": [[1]]}',
            "bad-connect-envelope",
            "[key, value] pair",
        ),
    ],
)
def test_decode_errors(data: bytes, kind: str, message: str) -> None:
    with pytest.raises(DecodeError, match=message.replace("[", r"\[")) as err:
        connect_json.decode(data)
    assert err.value.kind == kind


def test_payload_error_names_the_path() -> None:
    payload = to_connect_payload(events(1)[0])
    payload["after"] = dict(payload["after"] or payload["before"], ID="abc")
    with pytest.raises(DecodeError) as err:
        connect_json.decode(_envelope(CONNECT_VALUE_SCHEMA, payload))
    assert err.value.message == 'value.after.ID: expected int32, got "abc"'


def test_encode_errors() -> None:
    with pytest.raises(ConnectSchemaError):
        connect_json.encode({"type": "nope"}, 1)
    with pytest.raises(ValueError, match="value.x: not a field"):
        connect_json.encode({"type": "struct", "fields": []}, {"x": 1})
    with pytest.raises(ValueError, match="expected int32"):
        connect_json.encode({"type": "int32"}, "1")
