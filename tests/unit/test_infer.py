"""Schema inference from sample JSON records, for Avro and Kafka Connect JSON."""

from __future__ import annotations

import base64
import json
from typing import Any

import fastavro
import pytest

from engine.kafka.codecs import connect_json
from engine.kafka.codecs.avro import AvroSchema
from engine.kafka.typemap.infer import InferenceError, infer_avro_schema, infer_connect_schema
from tests.fixtures.debezium import events, to_json_form


def _fields(schema: dict[str, Any]) -> dict[str, Any]:
    return {f["name"]: f for f in schema["fields"]}


def _round_trip_avro(records: list[Any], schema: Any, **kw: Any) -> None:
    """Every record encodes with the inferred schema and decodes back to itself."""
    avro_schema = AvroSchema(schema)
    fastavro.parse_schema(schema)  # a valid schema for fastavro too
    for record in records:
        if record is None:
            continue
        data = avro_schema.encode(1, record, **kw)
        assert avro_schema.decode(data[5:]) == _with_nulls(record, avro_schema.decode(data[5:]))


def _with_nulls(record: Any, decoded: Any) -> Any:
    """``record`` with the fields it left out as null, as the decoder fills them."""
    if isinstance(record, dict) and isinstance(decoded, dict):
        return {k: _with_nulls(record.get(k), v) for k, v in decoded.items()}
    if isinstance(record, list) and isinstance(decoded, list):
        return [_with_nulls(r, d) for r, d in zip(record, decoded, strict=True)]
    if isinstance(record, int) and isinstance(decoded, float):
        return float(record)
    return record


def test_flat_records_in_first_seen_order() -> None:
    records = [{"b": 1, "a": "x"}, {"a": "y", "c": True, "b": 2}]
    schema = infer_avro_schema(records)
    assert schema == {
        "type": "record",
        "name": "Value",
        "fields": [
            {"name": "b", "type": "int"},
            {"name": "a", "type": "string"},
            {"name": "c", "type": ["null", "boolean"], "default": None},
        ],
    }
    _round_trip_avro(records, schema)


def test_nulls_missing_and_only_null_fields() -> None:
    records = [{"a": None, "b": 1, "n": None}, {"a": "x", "n": None}]
    fields = _fields(infer_avro_schema(records))
    assert fields["a"]["type"] == ["null", "string"]
    assert fields["b"]["type"] == ["null", "int"]
    assert fields["b"]["default"] is None
    assert fields["n"]["type"] == ["null", "string"]  # never seen with a value
    _round_trip_avro(records, infer_avro_schema(records))


def test_numbers_int_long_double_and_booleans() -> None:
    records = [
        {"i": 1, "l": 1, "d": 1, "b": True, "p": 2**40},
        {"i": -(2**31), "l": 2**31, "d": 2.5, "b": False, "p": -1},
    ]
    fields = _fields(infer_avro_schema(records))
    assert [fields[k]["type"] for k in "ildbp"] == ["int", "long", "double", "boolean", "long"]
    assert _fields(infer_avro_schema(records, prefer_long=True))["i"]["type"] == "long"
    _round_trip_avro(records, infer_avro_schema(records))


def test_arrays_empty_mixed_and_of_records() -> None:
    records = [
        {"e": [], "n": [1, 2.5], "r": [{"x": 1}], "late": []},
        {"e": [], "n": [], "r": [{"x": 2, "y": "q"}, {"x": 3}], "late": [None, "s"]},
    ]
    fields = _fields(infer_avro_schema(records))
    assert fields["e"]["type"] == {"type": "array", "items": "string"}
    assert fields["n"]["type"] == {"type": "array", "items": "double"}
    assert fields["late"]["type"] == {"type": "array", "items": ["null", "string"]}
    item = fields["r"]["type"]["items"]
    assert item["type"] == "record"
    assert item["name"] == "Value_r_item"
    assert _fields(item)["y"]["type"] == ["null", "string"]
    _round_trip_avro(records, infer_avro_schema(records))


def test_deep_nesting_names_by_path_and_unique() -> None:
    records = [{"a": {"b": {"c": {"d": 1}}}, "a_b": {"z": 1}, "x": {"b": {"c": {"q": "s"}}}}]
    schema = infer_avro_schema(records, namespace="my.ns")
    assert schema["namespace"] == "my.ns"
    names = []

    def walk(t: Any) -> None:
        if isinstance(t, dict) and t.get("type") == "record":
            names.append(t["name"])
            for f in t["fields"]:
                walk(f["type"])
        elif isinstance(t, list):
            for b in t:
                walk(b)

    walk(schema)
    assert names == [
        "Value",
        "Value_a",
        "Value_a_b",
        "Value_a_b_c",
        "Value_a_b_2",
        "Value_x",
        "Value_x_b",
        "Value_x_b_c",
    ]
    assert len(set(names)) == len(names)
    _round_trip_avro(records, schema)


def test_maps_when_keys_are_data() -> None:
    by_date = [{"sales": {"2024-01-01": 3}}, {"sales": {"2024-01-02": 4.5}}]
    assert _fields(infer_avro_schema(by_date))["sales"]["type"] == {
        "type": "map",
        "values": "double",
    }
    sparse = [{"m": {f"k{i}": i}} for i in range(10)]
    assert _fields(infer_avro_schema(sparse))["m"]["type"] == {"type": "map", "values": "int"}
    dense = [{"m": {f"k{i}": i for i in range(10)}} for _ in range(3)]
    assert _fields(infer_avro_schema(dense))["m"]["type"]["type"] == "record"
    forced = [{"m": {"a": 1}}]
    assert _fields(infer_avro_schema(forced, map_fields=["m"]))["m"]["type"]["type"] == "map"
    wide = [{"m": {f"k{i}": i for i in range(300)}}]
    assert _fields(infer_avro_schema(wide))["m"]["type"]["type"] == "map"
    for records in (by_date, sparse, forced):
        _round_trip_avro(records, infer_avro_schema(records, map_fields=["m"]))


def test_conflicts_become_unions_in_avro_and_errors_in_connect() -> None:
    records = [{"v": 1}, {"v": "one"}, {"v": None}]
    assert _fields(infer_avro_schema(records))["v"]["type"] == ["null", "int", "string"]
    _round_trip_avro(records, infer_avro_schema(records))
    with pytest.raises(InferenceError, match="value.v: seen as number and string"):
        infer_connect_schema(records)


def test_bytes_only_when_told() -> None:
    blob = base64.b64encode(b"\x00\x01").decode()
    records = [{"blob": blob, "text": blob, "inner": {"raw": blob}}]
    fields = _fields(infer_avro_schema(records, bytes_fields=["blob", "inner.raw"]))
    assert fields["blob"]["type"] == "bytes"
    assert fields["text"]["type"] == "string"
    assert _fields(fields["inner"]["type"])["raw"]["type"] == "bytes"
    schema = infer_avro_schema(records, bytes_fields=["blob", "inner.raw"])
    _round_trip_avro(records, schema)
    assert _fields(infer_avro_schema([{"b": b"\x01"}]))["b"]["type"] == "bytes"


def test_top_level_values_for_keys() -> None:
    assert infer_avro_schema(["k1", "k2"]) == "string"
    assert infer_avro_schema([1, 2**40]) == "long"
    assert infer_avro_schema([1, None, 2]) == "int"  # tombstones are skipped
    assert infer_avro_schema([{"ID": 1}], name="Key") == {
        "type": "record",
        "name": "Key",
        "fields": [{"name": "ID", "type": "int"}],
    }
    assert infer_connect_schema(["a"]) == {"type": "string", "optional": False}


def test_no_records() -> None:
    with pytest.raises(InferenceError, match="no records"):
        infer_avro_schema([])
    with pytest.raises(InferenceError, match="no records"):
        infer_avro_schema([None])


def test_not_json() -> None:
    with pytest.raises(InferenceError, match="set is not a JSON value"):
        infer_avro_schema([{"a": {1, 2}}])
    with pytest.raises(InferenceError, match="64 bits"):
        infer_avro_schema([2**64])


def test_debezium_like_records_round_trip_in_both_formats() -> None:
    records = [to_json_form(e) for e in events(40)]
    schema = infer_avro_schema(records, name="Envelope", namespace="dbserver1.inventory.invoices")
    fields = _fields(schema)
    assert fields["before"]["type"][0] == "null"
    assert fields["after"]["type"][1]["name"] == "Envelope_after"
    # `before` and `after` have the same shape but distinct (unique) names
    assert fields["before"]["type"][1]["name"] == "Envelope_before"
    _round_trip_avro(records, schema)

    connect = infer_connect_schema(records, name="Envelope")
    assert connect["name"] == "Envelope"
    by_name = {f["field"]: f for f in connect["fields"]}
    assert by_name["after"]["optional"] is True
    assert {f["field"]: f["type"] for f in by_name["source"]["fields"]}["ts_ms"] == "int64"
    for record in records:
        assert connect_json.decode(connect_json.encode(connect, record)).payload == record


def test_connect_types() -> None:
    schema = infer_connect_schema(
        [
            {
                "i": 1,
                "l": 2**40,
                "d": 0.5,
                "s": "x",
                "b": False,
                "blob": "AA==",
                "a": [1],
                "m": {"a b": "x"},
            },
            {"i": 2, "l": 1, "d": 1, "s": None, "b": True, "blob": "AQ==", "a": [], "m": {}},
        ],
        bytes_fields=["blob"],
    )
    by_name = {f["field"]: f for f in schema["fields"]}
    assert {k: v["type"] for k, v in by_name.items()} == {
        "i": "int32",
        "l": "int64",
        "d": "double",
        "s": "string",
        "b": "boolean",
        "blob": "bytes",
        "a": "array",
        "m": "map",
    }
    assert by_name["s"]["optional"] is True
    assert by_name["i"]["optional"] is False
    assert by_name["a"]["items"] == {"type": "int32", "optional": False}
    assert by_name["m"]["keys"] == {"type": "string", "optional": False}
    connect_json.check_schema(schema)
    json.dumps(schema)
