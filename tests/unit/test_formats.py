"""Formats, DecodeError, and RecordDecoder over Avro, Connect JSON and plain JSON."""

from __future__ import annotations

import json
import pickle

import pytest

from engine.kafka.codecs import avro, plain_json
from engine.kafka.codecs.avro import AvroSchema
from engine.kafka.codecs.decoder import RecordDecoder
from engine.kafka.codecs.errors import DECODE_ERROR_KINDS, DecodeError
from engine.kafka.codecs.formats import Format, SchemaNotFound, WriterSchema
from tests.fixtures.debezium import (
    AVRO_KEY_SCHEMA,
    AVRO_VALUE_SCHEMA,
    CONNECT_VALUE_SCHEMA,
    events,
    to_connect_payload,
    to_json_form,
)

SCHEMAS = {1: json.dumps(AVRO_VALUE_SCHEMA), 2: json.dumps(AVRO_KEY_SCHEMA), 3: "not a schema"}


def _lookup(schema_id: int) -> str:
    try:
        return SCHEMAS[schema_id]
    except KeyError:
        raise SchemaNotFound(schema_id) from None


def _avro_decoder() -> RecordDecoder:
    return RecordDecoder(Format.AVRO, _lookup)


def test_format_parse() -> None:
    assert Format.parse("avro") is Format.AVRO
    assert Format.parse("Connect_JSON") is Format.CONNECT_JSON
    assert Format.parse(" json ") is Format.JSON
    with pytest.raises(ValueError, match="use one of avro, connect-json, json"):
        Format.parse("protobuf")


def test_decode_error_carries_its_kind() -> None:
    err = DecodeError("truncated", "3 bytes")
    assert err.kind == "truncated"
    assert err.message == "3 bytes"
    assert str(err) == "truncated: 3 bytes"
    assert pickle.loads(pickle.dumps(err)).kind == "truncated"
    with pytest.raises(ValueError, match="unknown decode error kind"):
        DecodeError("oops", "x")
    assert set(DECODE_ERROR_KINDS) == {
        "bad-magic",
        "truncated",
        "bad-avro",
        "unknown-schema-id",
        "bad-schema",
        "bad-json",
        "bad-connect-envelope",
    }


def test_avro_decoder_needs_a_lookup() -> None:
    with pytest.raises(ValueError, match="lookup"):
        RecordDecoder(Format.AVRO)


def test_avro_decode_and_tombstone() -> None:
    decoder = _avro_decoder()
    event = events(2)[1]
    data = avro.encode(1, AvroSchema(AVRO_VALUE_SCHEMA).parsed, event)
    assert decoder.decode(data) == to_json_form(event)
    assert json.loads(decoder.decode_json(data) or "") == to_json_form(event)
    assert decoder.decode(None) is None
    assert decoder.decode_json(None) is None
    assert decoder.writer_schema(None) is None
    ws = decoder.writer_schema(data)
    assert ws == WriterSchema(Format.AVRO, AVRO_VALUE_SCHEMA, 1)


def test_avro_schema_lookups_are_cached() -> None:
    calls: list[int] = []

    def counting(schema_id: int) -> str:
        calls.append(schema_id)
        return _lookup(schema_id)

    decoder = RecordDecoder(Format.AVRO, counting)
    data = avro.encode(2, AvroSchema(AVRO_KEY_SCHEMA).parsed, {"ID": 5})
    for _ in range(3):
        assert decoder.decode(data) == {"ID": 5}
    assert calls == [2]


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"\x00\x00\x00\x00\x63\x02", "unknown-schema-id"),
        (b"\x00\x00\x00\x00\x03\x02", "bad-schema"),
        (b'{"ID": 1}', "bad-magic"),
        (b"\x00\x00", "truncated"),
        (b"\x00\x00\x00\x00\x02", "truncated"),
        (b"\x00\x00\x00\x00\x02\x02\x00", "bad-avro"),
    ],
)
def test_avro_decode_errors(data: bytes, kind: str) -> None:
    with pytest.raises(DecodeError) as err:
        _avro_decoder().decode(data)
    assert err.value.kind == kind
    batch = _avro_decoder().decode_batch_json([data])
    assert isinstance(batch[0], DecodeError)
    assert batch[0].kind == kind


def test_avro_batch_mixes_schemas_tombstones_and_errors() -> None:
    value = AvroSchema(AVRO_VALUE_SCHEMA)
    evs = events(30)
    datas: list[bytes | None] = [avro.encode(1, value.parsed, e) for e in evs]
    datas[3] = None
    datas[5] = avro.encode(2, AvroSchema(AVRO_KEY_SCHEMA).parsed, {"ID": 9})
    datas[7] = b"\x00\x00\x00\x00\x63"  # unknown id
    datas[9] = (datas[9] or b"")[:-4]  # truncated body
    datas[11] = b"not avro"
    out = _avro_decoder().decode_batch_json(datas)
    assert out[3] is None
    assert out[5] == '{"ID":9}'
    assert isinstance(out[7], DecodeError)
    assert out[7].kind == "unknown-schema-id"
    assert isinstance(out[9], DecodeError)
    assert isinstance(out[11], DecodeError)
    assert out[11].kind == "bad-magic"
    for i, event in enumerate(evs):
        if i not in (3, 5, 7, 9, 11):
            text = out[i]
            assert isinstance(text, str)
            assert json.loads(text) == to_json_form(event)


def test_connect_json_decoder() -> None:
    decoder = RecordDecoder(Format.CONNECT_JSON)
    event = events(1)[0]
    data = json.dumps(
        {"schema": CONNECT_VALUE_SCHEMA, "payload": to_connect_payload(event)}
    ).encode()
    assert decoder.decode(data) == to_json_form(event)
    ws = decoder.writer_schema(data)
    assert ws is not None
    assert ws.schema == CONNECT_VALUE_SCHEMA
    assert ws.schema_id is None
    out = decoder.decode_batch_json([data, None, b"{}", b"\xff"])
    assert json.loads(out[0] or "") == to_json_form(event)
    assert out[1] is None
    assert isinstance(out[2], DecodeError)
    assert out[2].kind == "bad-connect-envelope"
    assert isinstance(out[3], DecodeError)
    assert out[3].kind == "bad-json"


def test_plain_json_decoder() -> None:
    decoder = RecordDecoder(Format.JSON)
    assert decoder.decode(b'{"a": [1, 2.5, "\xc3\xa9"]}') == {"a": [1, 2.5, "é"]}
    assert decoder.decode_json(b'{"a" : 1}') == '{"a":1}'
    assert decoder.writer_schema(b"1") == WriterSchema(Format.JSON, None)
    for bad in (b"\xff", b"{", b"NaN", b"[Infinity]", b""):
        with pytest.raises(DecodeError) as err:
            decoder.decode(bad)
        assert err.value.kind == "bad-json"


def test_json_format_encode() -> None:
    assert plain_json.encode({"a": "é"}) == '{"a":"é"}'.encode()
    with pytest.raises(ValueError, match="not JSON compliant|Out of range"):
        plain_json.encode(float("nan"))


def test_decoded_values_are_json_serializable() -> None:
    schema = AvroSchema(
        {
            "type": "record",
            "name": "R",
            "fields": [
                {"name": "b", "type": "bytes"},
                {
                    "name": "d",
                    "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 1},
                },
                {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            ],
        }
    )
    SCHEMAS[4] = json.dumps(schema.schema)
    try:
        import decimal

        data = avro.encode(4, schema.parsed, {"b": b"\x01", "d": decimal.Decimal("1.5"), "t": 5})
        value = _avro_decoder().decode(data)
        assert json.dumps(value) == '{"b": "AQ==", "d": "1.5", "t": 5}'
    finally:
        del SCHEMAS[4]
