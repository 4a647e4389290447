"""Avro compatibility (schema resolution) as the registry applies it: a table of cases."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.registry.compat import (
    InvalidSchemaError,
    check_compatibility,
    normalize_level,
    normalized_json,
    parse_avro,
    reader_incompatibilities,
)


def avro(schema: Any, *references: Any) -> Any:
    return parse_avro(json.dumps(schema), [json.dumps(r) for r in references])


def record(name: str, *fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def field(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def enum(name: str, *symbols: str, **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": list(symbols), **extra}


def fixed(name: str, size: int) -> dict[str, Any]:
    return {"type": "fixed", "name": name, "size": size}


def wrap(type_: Any) -> dict[str, Any]:
    """A one-field record, so a type change shows up as a field change."""
    return record("R", field("f", type_))


ADDRESS_V1 = record("Address", field("street", "string"), field("zip", "int"))
LIST_V1 = record("Node", field("value", "int"), field("next", ["null", "Node"], default=None))

# (case id, writer schema, reader schema, expected incompatibility kinds (empty: compatible))
CASES: list[tuple[str, Any, Any, list[str]]] = [
    ("same primitive", "string", "string", []),
    ("null reads null", "null", "null", []),
    ("same record", wrap("int"), wrap("int"), []),
    # type promotions
    ("int -> long", wrap("int"), wrap("long"), []),
    ("int -> float", wrap("int"), wrap("float"), []),
    ("int -> double", wrap("int"), wrap("double"), []),
    ("long -> float", wrap("long"), wrap("float"), []),
    ("long -> double", wrap("long"), wrap("double"), []),
    ("float -> double", wrap("float"), wrap("double"), []),
    ("string -> bytes", wrap("string"), wrap("bytes"), []),
    ("bytes -> string", wrap("bytes"), wrap("string"), []),
    ("long -/-> int", wrap("long"), wrap("int"), ["TYPE_MISMATCH"]),
    ("double -/-> float", wrap("double"), wrap("float"), ["TYPE_MISMATCH"]),
    ("float -/-> long", wrap("float"), wrap("long"), ["TYPE_MISMATCH"]),
    ("string -/-> int", wrap("string"), wrap("int"), ["TYPE_MISMATCH"]),
    ("boolean -/-> int", wrap("boolean"), wrap("int"), ["TYPE_MISMATCH"]),
    (
        "logical type is an annotation",
        wrap("long"),
        wrap({"type": "long", "logicalType": "timestamp-millis"}),
        [],
    ),
    # record fields
    (
        "field added with default",
        record("R", field("a", "int")),
        record("R", field("a", "int"), field("b", "string", default="x")),
        [],
    ),
    (
        "field added without default",
        record("R", field("a", "int")),
        record("R", field("a", "int"), field("b", "string")),
        ["READER_FIELD_MISSING_DEFAULT_VALUE"],
    ),
    (
        "field removed",
        record("R", field("a", "int"), field("b", "string")),
        record("R", field("a", "int")),
        [],
    ),
    (
        "field renamed with alias",
        record("R", field("old", "int")),
        record("R", field("new", "int", aliases=["old"])),
        [],
    ),
    (
        "field renamed without alias or default",
        record("R", field("old", "int")),
        record("R", field("new", "int")),
        ["READER_FIELD_MISSING_DEFAULT_VALUE"],
    ),
    (
        "record renamed",
        record("R", field("a", "int")),
        record("S", field("a", "int")),
        ["NAME_MISMATCH"],
    ),
    (
        "record renamed with alias",
        record("R", field("a", "int"), namespace="x"),
        record("S", field("a", "int"), namespace="x", aliases=["R"]),
        [],
    ),
    (
        "namespace change keeps the unqualified name",
        record("R", field("a", "int"), namespace="a"),
        record("R", field("a", "int"), namespace="b"),
        [],
    ),
    (
        "nested record field promoted",
        record("C", field("addr", ADDRESS_V1)),
        record(
            "C", field("addr", record("Address", field("street", "string"), field("zip", "long")))
        ),
        [],
    ),
    (
        "nested record field narrowed",
        record(
            "C", field("addr", record("Address", field("street", "string"), field("zip", "long")))
        ),
        record("C", field("addr", ADDRESS_V1)),
        ["TYPE_MISMATCH"],
    ),
    (
        "nested record gains field without default",
        record("C", field("addr", ADDRESS_V1)),
        record(
            "C",
            field(
                "addr",
                record(
                    "Address",
                    field("street", "string"),
                    field("zip", "int"),
                    field("city", "string"),
                ),
            ),
        ),
        ["READER_FIELD_MISSING_DEFAULT_VALUE"],
    ),
    (
        "named type reused by name",
        record("C", field("home", ADDRESS_V1), field("work", "Address")),
        record("C", field("home", ADDRESS_V1), field("work", "Address")),
        [],
    ),
    (
        "named type reused: both uses are checked",
        record("C", field("home", ADDRESS_V1), field("work", "Address")),
        record(
            "C",
            field(
                "home",
                record(
                    "Address",
                    field("street", "string"),
                    field("zip", "int"),
                    field("city", "string"),
                ),
            ),
            field("work", "Address"),
        ),
        ["READER_FIELD_MISSING_DEFAULT_VALUE"],
    ),
    # unions
    ("optional field widened union", wrap(["null", "string"]), wrap(["null", "string", "int"]), []),
    (
        "union loses a branch",
        wrap(["null", "string", "int"]),
        wrap(["null", "string"]),
        ["MISSING_UNION_BRANCH"],
    ),
    ("value becomes optional", wrap("string"), wrap(["null", "string"]), []),
    ("optional becomes required", wrap(["null", "string"]), wrap("string"), ["TYPE_MISMATCH"]),
    ("union branch promotion", wrap("int"), wrap(["null", "long"]), []),
    ("union to union with promotion", wrap(["null", "int"]), wrap(["null", "double"]), []),
    (
        "union without a readable branch",
        wrap("boolean"),
        wrap(["null", "string"]),
        ["MISSING_UNION_BRANCH"],
    ),
    # enums
    ("enum symbol added", wrap(enum("E", "A", "B")), wrap(enum("E", "A", "B", "C")), []),
    (
        "enum symbol removed",
        wrap(enum("E", "A", "B", "C")),
        wrap(enum("E", "A", "B")),
        ["MISSING_ENUM_SYMBOLS"],
    ),
    (
        "enum symbol removed, reader default",
        wrap(enum("E", "A", "B", "C")),
        wrap(enum("E", "A", "B", default="A")),
        [],
    ),
    ("enum renamed", wrap(enum("E", "A")), wrap(enum("F", "A")), ["NAME_MISMATCH"]),
    ("enum to string", wrap(enum("E", "A")), wrap("string"), ["TYPE_MISMATCH"]),
    # fixed
    ("same fixed", wrap(fixed("F", 16)), wrap(fixed("F", 16)), []),
    ("fixed size change", wrap(fixed("F", 16)), wrap(fixed("F", 8)), ["FIXED_SIZE_MISMATCH"]),
    ("fixed renamed", wrap(fixed("F", 16)), wrap(fixed("G", 16)), ["NAME_MISMATCH"]),
    # arrays and maps
    (
        "array items promoted",
        wrap({"type": "array", "items": "int"}),
        wrap({"type": "array", "items": "long"}),
        [],
    ),
    (
        "array items narrowed",
        wrap({"type": "array", "items": "long"}),
        wrap({"type": "array", "items": "int"}),
        ["TYPE_MISMATCH"],
    ),
    (
        "array of records gains defaulted field",
        wrap({"type": "array", "items": ADDRESS_V1}),
        wrap(
            {
                "type": "array",
                "items": record(
                    "Address",
                    field("street", "string"),
                    field("zip", "int"),
                    field("c", "int", default=0),
                ),
            }
        ),
        [],
    ),
    (
        "map values promoted",
        wrap({"type": "map", "values": "float"}),
        wrap({"type": "map", "values": "double"}),
        [],
    ),
    (
        "map values changed",
        wrap({"type": "map", "values": "string"}),
        wrap({"type": "map", "values": "int"}),
        ["TYPE_MISMATCH"],
    ),
    (
        "array to map",
        wrap({"type": "array", "items": "string"}),
        wrap({"type": "map", "values": "string"}),
        ["TYPE_MISMATCH"],
    ),
    # recursion
    ("recursive type unchanged", LIST_V1, LIST_V1, []),
    (
        "recursive type gains defaulted field",
        LIST_V1,
        record(
            "Node",
            field("value", "int"),
            field("next", ["null", "Node"], default=None),
            field("label", "string", default=""),
        ),
        [],
    ),
    (
        "recursive type narrows a field",
        LIST_V1,
        record("Node", field("value", "boolean"), field("next", ["null", "Node"], default=None)),
        ["TYPE_MISMATCH"],
    ),
]


@pytest.mark.parametrize(
    ("writer", "reader", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_reader_writer_resolution(writer: Any, reader: Any, expected: list[str]) -> None:
    problems = reader_incompatibilities(avro(reader), avro(writer))
    assert [p.kind for p in problems] == expected, [str(p) for p in problems]


def test_messages_name_the_field_and_location() -> None:
    writer = record("C", field("id", "long"), field("addr", ADDRESS_V1))
    reader = record(
        "C",
        field("id", "long"),
        field("addr", record("Address", field("street", "string"), field("zip", "string"))),
    )
    (problem,) = reader_incompatibilities(avro(reader), avro(writer))
    assert problem.kind == "TYPE_MISMATCH"
    assert problem.location == "/fields/1/type/fields/1/type"
    assert "'addr.zip'" in problem.message
    assert "reader type string cannot read writer type int" in problem.message

    (missing,) = reader_incompatibilities(
        avro(record("C", field("id", "long"), field("email", "string"))), avro(writer)
    )
    assert "'email'" in missing.message
    assert "no default" in missing.message


V1 = record("User", field("id", "long"), field("name", "string"))
V2_DROPS_NAME = record("User", field("id", "long"))
V3_NAME_BECOMES_INT = record("User", field("id", "long"), field("name", "int", default=0))
V_ADDS_DEFAULTED = record(
    "User",
    field("id", "long"),
    field("name", "string"),
    field("email", ["null", "string"], default=None),
)
V_ADDS_REQUIRED = record(
    "User", field("id", "long"), field("name", "string"), field("email", "string")
)


@pytest.mark.parametrize(
    ("level", "history", "new", "compatible"),
    [
        ("BACKWARD", [V1], V_ADDS_DEFAULTED, True),
        ("BACKWARD", [V1], V_ADDS_REQUIRED, False),
        ("BACKWARD", [V1], V2_DROPS_NAME, True),
        ("FORWARD", [V1], V2_DROPS_NAME, False),  # v1 readers need `name`, it has no default
        ("FORWARD", [V1], V_ADDS_REQUIRED, True),  # v1 readers skip `email`
        ("FULL", [V1], V_ADDS_DEFAULTED, True),
        ("FULL", [V1], V_ADDS_REQUIRED, False),
        ("FULL", [V1], V2_DROPS_NAME, False),
        ("NONE", [V1], record("Other", field("x", "boolean")), True),
        # v3 reads v2 (name missing -> default) but not v1 (name was a string)
        ("BACKWARD", [V1, V2_DROPS_NAME], V3_NAME_BECOMES_INT, True),
        ("BACKWARD_TRANSITIVE", [V1, V2_DROPS_NAME], V3_NAME_BECOMES_INT, False),
        ("FORWARD_TRANSITIVE", [V2_DROPS_NAME, V1], V_ADDS_REQUIRED, True),
        ("FULL_TRANSITIVE", [V1, V2_DROPS_NAME], V3_NAME_BECOMES_INT, False),
        ("BACKWARD", [], V_ADDS_REQUIRED, True),
    ],
)
def test_levels(level: str, history: list[Any], new: Any, compatible: bool) -> None:
    previous = [(i + 1, avro(s)) for i, s in enumerate(history)]
    messages = check_compatibility(avro(new), previous, level)
    assert (not messages) is compatible, messages


def test_transitive_message_names_the_version() -> None:
    previous = [(1, avro(V1)), (2, avro(V2_DROPS_NAME))]
    (message,) = check_compatibility(avro(V3_NAME_BECOMES_INT), previous, "backward_transitive")
    assert "version 1" in message
    assert "'name'" in message


def test_forward_message_says_old_cannot_read_new() -> None:
    (message,) = check_compatibility(avro(V2_DROPS_NAME), [(4, avro(V1))], "FORWARD")
    assert message.startswith("version 4 cannot read data written with the new schema")


@pytest.mark.parametrize("level", ["backward", " FULL_TRANSITIVE ", "None"])
def test_levels_are_case_insensitive(level: str) -> None:
    assert normalize_level(level) == level.strip().upper()


@pytest.mark.parametrize("level", ["BACKWARDS", "", None, 3])
def test_invalid_levels(level: Any) -> None:
    with pytest.raises(ValueError, match="invalid compatibility level"):
        normalize_level(level)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "not JSON"),
        ('"Nope"', "unknown type"),
        (json.dumps(record("R", field("a", "Missing"))), "unknown type"),
        (json.dumps(record("R", field("a", "int", default="x"))), "Default value"),
        (json.dumps({"type": "enum", "name": "E"}), "Invalid schema"),
    ],
)
def test_invalid_schemas(text: str, reason: str) -> None:
    with pytest.raises(InvalidSchemaError, match=reason):
        parse_avro(text)


def test_references_bring_named_types() -> None:
    address = {**ADDRESS_V1, "namespace": "com.acme"}
    customer = record("Customer", field("addr", "com.acme.Address"), namespace="com.acme")
    with pytest.raises(InvalidSchemaError):
        avro(customer)
    parsed = avro(customer, address)
    assert "com.acme.Address" in parsed.names

    wider = {**address, "fields": [*address["fields"], field("city", "string", default="")]}
    assert not reader_incompatibilities(avro(customer, wider), avro(customer, address))
    narrower = {**address, "fields": [field("street", "string"), field("zip", "string")]}
    assert reader_incompatibilities(avro(customer, narrower), avro(customer, address))


def test_normalized_form_ignores_layout_not_meaning() -> None:
    a = '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}'
    b = '{"fields":[{"type":{"type":"int"},"name":"a"}],\n "name":"R","type":"record"}'
    assert normalized_json(a) == normalized_json(b)
    with_default = '{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":1}]}'
    assert normalized_json(a) != normalized_json(with_default)
