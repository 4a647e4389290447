"""engine.kafka.produce and produce_input without Kafka: reading input, envelopes, keys, schemas, validation."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from engine.kafka.codecs import connect_json
from engine.kafka.codecs.avro import AvroSchema, split
from engine.kafka.codecs.formats import Format
from engine.kafka.produce import ProduceError, ProduceOptions, encode, prepare, record_name
from engine.kafka.produce_input import InputError, load_records, parse_json_records, read_sources


def records(text: str, **kw):
    return load_records([("in.json", text)], **kw)


# --------------------------------------------------------------------------- reading


def test_json_lines_keep_their_line_numbers() -> None:
    text = '{"a": 1}\n\n{"a": 2}\n  "text"\n3\n'
    assert parse_json_records(text, "f") == [(1, {"a": 1}), (3, {"a": 2}), (4, "text"), (5, 3)]


def test_pretty_printed_values_in_a_row() -> None:
    text = '{\n  "a": 1\n}\n{\n  "a": 2\n}'
    assert parse_json_records(text) == [(1, {"a": 1}), (4, {"a": 2})]


def test_one_array_holds_the_records_with_each_elements_line() -> None:
    text = '[\n  {"a": 1},\n  {"a": 2}, {"a": 3},\n  [1, 2]\n]\n'
    assert parse_json_records(text) == [(2, {"a": 1}), (3, {"a": 2}), (3, {"a": 3}), (4, [1, 2])]
    assert parse_json_records("[]") == []
    assert parse_json_records("") == []


def test_arrays_one_per_line_are_records_themselves() -> None:
    assert parse_json_records("[1, 2]\n[3]\n") == [(1, [1, 2]), (2, [3])]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1}\n{"a": 2,}\n', r"^in\.json line 2: invalid JSON: Expecting property name"),
        ('{"a": 1}\n{"a": 2} x\n', r"^in\.json line 2: invalid JSON: Expecting value \(column 10\)"),
        ('{"a": 1}\n\n{"a": NaN}\n', r"^in\.json line 3: NaN is not valid JSON"),
        ('[\n {"a": 1},\n {"a": }\n]', r"^in\.json line 3: invalid JSON"),
        ('{"a": 1}\n{"a": "unterminated}', r"^in\.json line 2: invalid JSON: Unterminated string"),
    ],
)
def test_bad_json_names_the_line(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        records(text)


def test_read_sources_reads_files_and_stdin(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"x": 1}\n')
    got = read_sources([str(path), "-"], stdin=io.StringIO('{"y": 2}\n'))
    assert got == [(str(path), '{"x": 1}\n'), ("<stdin>", '{"y": 2}\n')]
    assert read_sources([], stdin=io.StringIO("1")) == [("<stdin>", "1")]
    with pytest.raises(InputError, match=r"missing\.json: cannot read: No such file"):
        read_sources([str(tmp_path / "missing.json")])
    (tmp_path / "latin1.json").write_bytes(b'"caf\xe9"')
    with pytest.raises(InputError, match=r"latin1\.json: not UTF-8 text"):
        read_sources([str(tmp_path / "latin1.json")])


# --------------------------------------------------------------------------- envelopes, keys


def test_bare_values_have_no_key() -> None:
    got = records('{"id": 1}\n{"id": 2}\n')
    assert [(r.line, r.key, r.value) for r in got] == [(1, None, {"id": 1}), (2, None, {"id": 2})]
    assert got[0].where == "in.json line 1"


def test_envelopes_when_every_record_is_one() -> None:
    got = records('{"key": "a", "value": {"x": 1}}\n{"value": null}\n'
                  '{"kafka": {"offset": 3}, "key": 1, "value": 2}\n')
    assert [(r.key, r.value) for r in got] == [("a", {"x": 1}), (None, None), (1, 2)]


def test_a_batch_is_never_half_envelopes() -> None:
    got = records('{"key": "a", "value": 1}\n{"key": "b", "value": 2, "other": 3}\n')
    assert [(r.key, r.value) for r in got] == [
        (None, {"key": "a", "value": 1}),
        (None, {"key": "b", "value": 2, "other": 3}),
    ]
    with pytest.raises(InputError, match=r"line 2: expected an envelope .*fields key, value, other"):
        records('{"key": "a", "value": 1}\n{"key": "b", "value": 2, "other": 3}\n', envelope=True)
    forced = records('{"key": "a", "value": 1}\n', envelope=False)
    assert forced[0].value == {"key": "a", "value": 1}


def test_key_from_a_field_even_a_nested_one() -> None:
    got = records('{"id": 7, "after": {"ID": "x"}}\n', key_field="id")
    assert got[0].key == 7
    assert got[0].value == {"id": 7, "after": {"ID": "x"}}
    assert records('{"after": {"ID": "x"}}\n', key_field="after.ID")[0].key == "x"
    with pytest.raises(InputError, match=r"^in\.json line 2: --key id: the value has no field id$"):
        records('{"id": 1}\n{"ID": 2}\n', key_field="id")
    with pytest.raises(InputError, match=r"line 1: the envelope has a key and --key id"):
        records('{"key": 1, "value": {"id": 1}}\n', key_field="id")


# --------------------------------------------------------------------------- schemas


def test_inferred_avro_schemas_are_what_one_would_write() -> None:
    got = records(
        '{"id": 1, "name": "ann", "score": 1.5, "tags": ["a"], "address": {"city": "Oslo"}}\n'
        '{"id": 2, "name": "bob", "score": 2, "tags": [], "address": {"city": "Rome"}, "note": null}\n',
        key_field="id",
    )
    prepared = prepare(got, ProduceOptions("shop.orders", namespace="com.example"))
    assert prepared.key is not None
    assert prepared.value is not None
    assert prepared.key.schema == "int"
    assert prepared.value.origin == "inferred"
    assert prepared.value.schema == {
        "type": "record",
        "name": "shop_orders",
        "namespace": "com.example",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "name", "type": "string"},
            {"name": "score", "type": "double"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "address", "type": {"type": "record", "name": "shop_orders_address",
                                         "fields": [{"name": "city", "type": "string"}]}},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
    # the second record had no "note": it takes the default; the score became a double
    assert prepared.coerced[1][1]["score"] == 2.0
    assert record_name("1st-topic", "key") == "_1st_topic_key"


def test_bytes_fields_are_base64_and_bytes_only_when_told() -> None:
    got = records('{"id": 1, "blob": "aGk=", "k": "aGk="}\n', key_field="k")
    prepared = prepare(got, ProduceOptions("t", bytes_fields=("blob", "key")))
    assert prepared.value.schema["fields"][1] == {"name": "blob", "type": "bytes"}
    assert prepared.key.schema == "string"  # "key" alone names no key field
    assert prepared.coerced[0][1]["blob"] == b"hi"
    prepared = prepare(got, ProduceOptions("t", bytes_fields=("blob",)))
    assert prepared.coerced[0][1]["blob"] == b"hi"


def test_a_record_that_does_not_fit_the_given_schema_names_line_and_path() -> None:
    schema = {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "after", "type": {"type": "record", "name": "After",
                                       "fields": [{"name": "qty", "type": "int"}]}},
        ],
    }
    good = '{"id": 1, "after": {"qty": 2}}\n'
    got = records(good + '{"id": 2, "after": {"qty": "two"}}\n' + good + '{"id": "x", "after": {"qty": 1}}\n')
    with pytest.raises(ProduceError) as caught:
        prepare(got, ProduceOptions("t", value_schema=schema))
    assert str(caught.value) == (
        'in.json line 2: value.after.qty: expected int, got "two"; '
        'in.json line 4: value.id: expected long, got "x"; nothing was sent'
    )
    assert caught.value.problems == [
        'in.json line 2: value.after.qty: expected int, got "two"',
        'in.json line 4: value.id: expected long, got "x"',
    ]


def test_many_problems_are_counted_in_one_line() -> None:
    got = records("".join(f'{{"id": "{i}"}}\n' for i in range(6)))
    with pytest.raises(ProduceError, match=r"line 3: .*; and 3 more record problems; nothing was sent$"):
        prepare(got, ProduceOptions("t", value_schema={"type": "record", "name": "R",
                                                       "fields": [{"name": "id", "type": "int"}]}))


def test_a_bad_key_schema_and_a_key_that_does_not_fit() -> None:
    got = records('{"id": "a"}\n', key_field="id")
    with pytest.raises(ProduceError, match=r'^in\.json line 1: key: expected long, got "a"; nothing'):
        prepare(got, ProduceOptions("t", key_schema="long"))
    with pytest.raises(ProduceError, match=r"^--key-schema: not a valid Avro schema"):
        prepare(got, ProduceOptions("t", key_schema={"type": "recordo"}))


def test_encode_needs_registered_ids_and_writes_the_wire_format() -> None:
    got = records('{"id": 1}\n{"id": 2}\nnull\n', key_field=None)
    prepared = prepare(got, ProduceOptions("t"))
    with pytest.raises(ValueError, match="register the schemas"):
        encode(prepared)
    prepared.value.schema_id = 42
    messages = encode(prepared)
    assert [k for k, _ in messages] == [None, None, None]
    assert messages[2][1] is None  # a null value is a tombstone
    schema_id, body = split(messages[1][1])
    assert schema_id == 42
    assert AvroSchema(prepared.value.schema).decode(body) == {"id": 2}


def test_connect_json_records_are_envelopes_with_an_inferred_schema() -> None:
    got = records('{"id": 1, "ok": true}\n{"id": 3000000000, "ok": false, "x": 1.5}\n', key_field="ok")
    prepared = prepare(got, ProduceOptions("t", format=Format.CONNECT_JSON))
    value = json.loads(encode(prepared)[0][1])
    assert value == {
        "schema": {
            "type": "struct",
            "fields": [
                {"type": "int64", "optional": False, "field": "id"},
                {"type": "boolean", "optional": False, "field": "ok"},
                {"type": "double", "optional": True, "field": "x"},
            ],
            "optional": False,
        },
        "payload": {"id": 1, "ok": True, "x": None},
    }
    key = json.loads(encode(prepared)[1][0])
    assert key == {"schema": {"type": "boolean", "optional": False}, "payload": False}
    assert connect_json.decode(encode(prepared)[1][1]).payload["id"] == 3000000000


def test_connect_json_has_no_unions_and_says_where() -> None:
    got = records('{"id": 1}\n{"id": "one"}\n')
    with pytest.raises(ProduceError, match=r"Kafka Connect schema for the values: value\.id: seen as number and string"):
        prepare(got, ProduceOptions("t", format=Format.CONNECT_JSON))


def test_connect_json_with_a_given_schema_checks_each_record() -> None:
    schema = {"type": "struct", "fields": [{"field": "n", "type": "int32", "optional": False}]}
    got = records('{"n": 1}\n{"n": null}\n')
    with pytest.raises(ProduceError, match=r"^in\.json line 2: value\.n: null value for a required int32 field; nothing was sent$"):
        prepare(got, ProduceOptions("t", format=Format.CONNECT_JSON, value_schema=schema))


def test_json_takes_anything_but_schemas() -> None:
    got = records('{"a": 1}\n"text"\n', key_field=None)
    prepared = prepare(got, ProduceOptions("t", format=Format.JSON))
    assert encode(prepared) == [(None, b'{"a":1}'), (None, b'"text"')]
    with pytest.raises(ProduceError, match="schemas apply to the avro and connect-json formats"):
        prepare(got, ProduceOptions("t", format=Format.JSON, value_schema={"type": "string"}))
