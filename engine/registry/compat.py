"""Avro schemas for the registry: parsing, the normalized form, compatibility.

Compatibility follows Avro's schema-resolution rules (the specification's "Schema
Resolution" section, as Avro's Java ``SchemaCompatibility`` applies them and the
Confluent registry uses them): a *reader* schema can read data written with a *writer*
schema when, recursively,

- both are the same primitive, or the writer's primitive promotes to the reader's
  (int -> long, float, double; long -> float, double; float -> double; string <-> bytes);
- both are records with the same unqualified name (or a reader alias naming the writer),
  and every reader field either has a writer field of the same name (or one of its
  aliases) whose type it can read, or has a default; writer fields the reader lacks are
  skipped;
- both are enums with matching names, and every writer symbol is a reader symbol unless
  the reader declares a default symbol;
- both are fixed with matching names and sizes;
- both are arrays (items) or maps (values) whose element types resolve;
- the writer is a union: every writer branch is readable by the reader;
- the reader is a union (the writer is not): at least one reader branch reads the writer.

Logical types are annotations and play no part in resolution, as in Avro itself.
Recursive named types are handled by assuming a pair of names under comparison is
compatible while its comparison is in progress.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastavro import parse_schema
from fastavro.schema import SchemaParseException, UnknownType

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)

# (reader type, writer type) pairs that Avro resolves by promoting the written value.
_PROMOTIONS = frozenset(
    {
        ("long", "int"),
        ("float", "int"),
        ("float", "long"),
        ("double", "int"),
        ("double", "long"),
        ("double", "float"),
        ("bytes", "string"),
        ("string", "bytes"),
    }
)

_NAMED = frozenset({"record", "error", "enum", "fixed"})


class InvalidSchemaError(ValueError):
    """The text is not a valid schema; the message says why."""


@dataclass(frozen=True)
class AvroSchema:
    """A parsed Avro schema together with every named type it can refer to.

    ``root`` is fastavro's parsed form (all names fully qualified); ``names`` maps each
    full name, including those defined by referenced schemas, to its definition.
    """

    root: Any
    names: Mapping[str, Any]


@dataclass(frozen=True)
class Incompatibility:
    """One reason a reader schema cannot read data written with a writer schema."""

    kind: str  # Avro's names: TYPE_MISMATCH, NAME_MISMATCH, READER_FIELD_MISSING_DEFAULT_VALUE, ...
    location: str  # a JSON pointer into the reader schema, e.g. /fields/2/type
    message: str

    def __str__(self) -> str:
        return f"{self.kind} at {self.location or '/'}: {self.message}"


def parse_avro(text: str, references: Iterable[str] = ()) -> AvroSchema:
    """Parse an Avro schema, first parsing the texts of the schemas it references.

    ``references`` must be in dependency order (a referenced schema before the schemas
    that use it). Raises InvalidSchemaError with a one-line reason.
    """
    named: dict[str, Any] = {}
    for ref_text in references:
        _parse_into(ref_text, named, what="referenced schema")
    root = _parse_into(text, named, what="schema")
    return AvroSchema(root=root, names=dict(named))


def _parse_into(text: str, named: dict[str, Any], what: str) -> Any:
    try:
        obj = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InvalidSchemaError(f"Invalid {what}: not JSON ({exc})") from None
    try:
        return parse_schema(obj, named_schemas=named)
    except UnknownType as exc:
        raise InvalidSchemaError(f"Invalid {what}: unknown type {exc.name!r}") from None
    except (SchemaParseException, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidSchemaError(f"Invalid {what}: {exc}") from None


def normalized_json(text: str) -> str:
    """The text as compact JSON with sorted keys, ``{"type": "int"}`` written ``"int"``.

    Two schemas with the same normalized form are the same schema (whitespace, key order
    and primitive spelling do not matter); doc, defaults, aliases and custom properties are
    kept, because a registry must hand back exactly what was registered.
    """
    try:
        obj = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InvalidSchemaError(f"Invalid schema: not JSON ({exc})") from None
    return json.dumps(_normalize(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _normalize(obj: Any) -> Any:
    if isinstance(obj, list):
        return [_normalize(item) for item in obj]
    if isinstance(obj, dict):
        if set(obj) == {"type"} and obj["type"] in PRIMITIVES:
            return obj["type"]
        return {key: _normalize(value) for key, value in obj.items()}
    return obj


def normalize_level(level: object) -> str:
    """The compatibility level in upper case; ValueError when it is not one of LEVELS."""
    if isinstance(level, str) and level.strip().upper() in LEVELS:
        return level.strip().upper()
    raise ValueError(f"invalid compatibility level {level!r}; valid: {', '.join(LEVELS)}")


def reader_incompatibilities(reader: AvroSchema, writer: AvroSchema) -> list[Incompatibility]:
    """Why ``reader`` cannot read data written with ``writer`` (empty when it can)."""
    problems = _Resolver(reader.names, writer.names).check(reader.root, writer.root, "", "")
    return list(dict.fromkeys(problems))  # a named type used twice reports once


def can_read(reader: AvroSchema, writer: AvroSchema) -> bool:
    """True when data written with ``writer`` can be read with ``reader``."""
    return not reader_incompatibilities(reader, writer)


def check_compatibility(
    new: AvroSchema, previous: Sequence[tuple[int, AvroSchema]], level: str
) -> list[str]:
    """Messages saying why ``new`` breaks ``level`` against ``previous`` (oldest first).

    ``previous`` holds (version, schema) pairs. Non-transitive levels compare with the last
    one only. BACKWARD: the new schema reads data written with the old one; FORWARD: the old
    schema reads data written with the new one; FULL: both.
    """
    level = normalize_level(level)
    if level == "NONE" or not previous:
        return []
    targets = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    messages: list[str] = []
    for version, old in reversed(targets):
        if base in ("BACKWARD", "FULL"):
            for problem in reader_incompatibilities(new, old):
                messages.append(
                    f"the new schema cannot read data written with version {version}: {problem}"
                )
        if base in ("FORWARD", "FULL"):
            for problem in reader_incompatibilities(old, new):
                messages.append(
                    f"version {version} cannot read data written with the new schema: {problem}"
                )
    return messages


def _short(full_name: str) -> str:
    return full_name.rsplit(".", 1)[-1]


def _qualified_aliases(node: Mapping[str, Any]) -> set[str]:
    name = node.get("name", "")
    namespace = name.rsplit(".", 1)[0] if "." in name else ""
    out = set()
    for alias in node.get("aliases", ()) or ():
        if "." in alias or not namespace:
            out.add(alias)
        else:
            out.add(f"{namespace}.{alias}")
    return out


def _describe(node: Any) -> str:
    if isinstance(node, list):
        return "union[" + ", ".join(_describe(b) for b in node) + "]"
    if isinstance(node, str):
        return node
    kind = node.get("type")
    if kind in _NAMED:
        return f"{kind} {node.get('name')}"
    if kind == "array":
        return f"array<{_describe(node.get('items'))}>"
    if kind == "map":
        return f"map<{_describe(node.get('values'))}>"
    return str(kind)


class _Resolver:
    """Applies Avro's resolution rules to a (reader, writer) pair of parsed schemas."""

    def __init__(self, reader_names: Mapping[str, Any], writer_names: Mapping[str, Any]) -> None:
        self._reader_names = reader_names
        self._writer_names = writer_names
        self._in_progress: set[tuple[str, str]] = set()
        self._done: dict[tuple[str, str], list[Incompatibility]] = {}

    @staticmethod
    def _resolve(schema: Any, names: Mapping[str, Any]) -> Any:
        """The definition behind a schema: primitives as {"type": p}, names looked up."""
        while True:
            if isinstance(schema, list):
                return schema
            if isinstance(schema, str):
                if schema in PRIMITIVES:
                    return {"type": schema}
                try:
                    schema = names[schema]
                except KeyError:
                    raise InvalidSchemaError(f"unknown type {schema!r}") from None
                continue
            kind = schema.get("type")
            if isinstance(kind, (list, dict)) or (
                isinstance(kind, str)
                and kind not in PRIMITIVES
                and kind not in _NAMED
                and kind not in ("array", "map")
            ):
                schema = kind
                continue
            return schema

    def check(self, reader: Any, writer: Any, location: str, path: str) -> list[Incompatibility]:
        r = self._resolve(reader, self._reader_names)
        w = self._resolve(writer, self._writer_names)
        where = f"field {path!r}: " if path else ""

        if isinstance(w, list):
            # Every branch the writer may have written must be readable.
            problems: list[Incompatibility] = []
            for branch in w:
                problems.extend(self.check(reader, branch, location, path))
            return problems

        if isinstance(r, list):
            for index, branch in enumerate(r):
                if not self.check(branch, writer, f"{location}/{index}", path):
                    return []
            return [
                Incompatibility(
                    "MISSING_UNION_BRANCH",
                    location,
                    f"{where}reader {_describe(r)} has no branch that can read writer type "
                    f"{_describe(w)}",
                )
            ]

        r_kind, w_kind = r["type"], w["type"]
        r_kind = "record" if r_kind == "error" else r_kind
        w_kind = "record" if w_kind == "error" else w_kind

        if r_kind in PRIMITIVES and w_kind in PRIMITIVES:
            if r_kind == w_kind or (r_kind, w_kind) in _PROMOTIONS:
                return []
            return [self._mismatch(r, w, location, where)]
        if r_kind != w_kind:
            return [self._mismatch(r, w, location, where)]

        if r_kind == "array":
            return self.check(r["items"], w["items"], f"{location}/items", f"{path}[]")
        if r_kind == "map":
            return self.check(r["values"], w["values"], f"{location}/values", f"{path}{{}}")

        # Named types: record, enum, fixed.
        if _short(r["name"]) != _short(w["name"]) and w["name"] not in _qualified_aliases(r):
            return [
                Incompatibility(
                    "NAME_MISMATCH",
                    f"{location}/name",
                    f"{where}reader {r_kind} name {r['name']!r} does not match writer "
                    f"name {w['name']!r} (and no reader alias names it)",
                )
            ]
        if r_kind == "fixed":
            if r["size"] != w["size"]:
                return [
                    Incompatibility(
                        "FIXED_SIZE_MISMATCH",
                        f"{location}/size",
                        f"{where}fixed {r['name']!r} has size {r['size']} in the reader and "
                        f"{w['size']} in the writer",
                    )
                ]
            return []
        if r_kind == "enum":
            missing = [s for s in w["symbols"] if s not in r["symbols"]]
            if missing and "default" not in r:
                return [
                    Incompatibility(
                        "MISSING_ENUM_SYMBOLS",
                        f"{location}/symbols",
                        f"{where}reader enum {r['name']!r} lacks writer symbols "
                        f"{', '.join(missing)} and has no default symbol",
                    )
                ]
            return []
        return self._check_record(r, w, location, path)

    def _check_record(
        self, r: Mapping[str, Any], w: Mapping[str, Any], location: str, path: str
    ) -> list[Incompatibility]:
        key = (r["name"], w["name"])
        if key in self._done:
            return self._done[key]
        if key in self._in_progress:
            return []  # recursive type: assume compatible while the outer comparison runs
        self._in_progress.add(key)
        try:
            writer_fields = {f["name"]: f for f in w.get("fields", [])}
            problems: list[Incompatibility] = []
            for index, field in enumerate(r.get("fields", [])):
                field_path = f"{path}.{field['name']}" if path else field["name"]
                written = writer_fields.get(field["name"])
                if written is None:
                    for alias in field.get("aliases", ()) or ():
                        if alias in writer_fields:
                            written = writer_fields[alias]
                            break
                if written is None:
                    if "default" not in field:
                        problems.append(
                            Incompatibility(
                                "READER_FIELD_MISSING_DEFAULT_VALUE",
                                f"{location}/fields/{index}",
                                f"field {field_path!r} of record {r['name']!r} has no default "
                                "value and is missing from the writer schema",
                            )
                        )
                    continue
                problems.extend(
                    self.check(
                        field["type"],
                        written["type"],
                        f"{location}/fields/{index}/type",
                        field_path,
                    )
                )
        finally:
            self._in_progress.discard(key)
        self._done[key] = problems
        return problems

    @staticmethod
    def _mismatch(r: Any, w: Any, location: str, where: str) -> Incompatibility:
        return Incompatibility(
            "TYPE_MISMATCH",
            location,
            f"{where}reader type {_describe(r)} cannot read writer type {_describe(w)}",
        )
