"""Infer an Avro schema or a Kafka Connect JSON schema from sample JSON records.

Used by ``zync produce`` when the user gives records but no schema. All records are
read, then one schema is built that every record fits. The rules:

* **Field order** is first-seen order across the records, so the result is
  deterministic for a given input.
* **Nullability**: a field that is null in some record, or missing from some record,
  is nullable: Avro ``["null", T]`` with ``"default": null``; Connect
  ``"optional": true``. ``None`` records at the top level (tombstones) are skipped.
* **Numbers**: booleans are never numbers. Integers only → Avro ``int`` when every
  value fits in 32 bits, else ``long`` (``prefer_long=True`` always gives ``long``);
  Connect ``int32``/``int64`` likewise. Any float among them → ``double``.
* **Bytes** only where told: strings at a path in ``bytes_fields`` are taken as base64
  text of ``bytes`` (Python ``bytes`` values are bytes anywhere).
* **Objects** become records (Connect structs) named by their path
  (``Value_after_source``: valid Avro names, made unique with a numeric suffix), or
  **maps** of string keys when the keys look like data rather than field names: when
  a path is in ``map_fields``; when any key is not a valid Avro name (``"2024-01-01"``,
  ``"a b"``, ``"1"``); when there are more than ``max_record_fields`` distinct keys; or
  when there are at least ``sparse_min_keys`` distinct keys and an object holds, on
  average, less than half of them (ids or dates as keys, each in few records).
* **Arrays** take the merged type of all their elements; an array only ever seen empty
  (or a field only ever null) has element type / type ``string``, the most
  permissive guess for values the samples never showed.
* **Conflicts** (a path seen both as a string and a number, say): Avro gets a union of
  the kinds seen (``["null", "long", "string"]``); Kafka Connect has no unions, so
  :func:`infer_connect_schema` raises :class:`InferenceError` naming the path.

Paths in ``bytes_fields`` and ``map_fields`` are dotted field names from the record's
root (``"after.blob"``); array elements and map values share their container's path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

_AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


class InferenceError(ValueError):
    """The records have no schema of the requested kind; the message names the path."""


@dataclass
class _Shape:
    """Everything seen at one path across all records."""

    nulls: bool = False
    booleans: bool = False
    int_min: int | None = None
    int_max: int | None = None
    floats: bool = False
    strings: bool = False
    raw_bytes: bool = False
    objects: int = 0
    fields: dict[str, _Shape] = field(default_factory=dict)
    presence: dict[str, int] = field(default_factory=dict)
    arrays: bool = False
    items: _Shape | None = None

    def kinds(self) -> list[str]:
        out = []
        for name, seen in (
            ("boolean", self.booleans),
            ("number", self.int_min is not None or self.floats),
            ("string", self.strings),
            ("bytes", self.raw_bytes),
            ("object", self.objects > 0),
            ("array", self.arrays),
        ):
            if seen:
                out.append(name)
        return out

    def observe(self, value: Any, path: str) -> None:
        if value is None:
            self.nulls = True
        elif isinstance(value, bool):
            self.booleans = True
        elif isinstance(value, int):
            if not _INT64[0] <= value <= _INT64[1]:
                raise InferenceError(f"{path or 'value'}: {value} does not fit in 64 bits")
            self.int_min = value if self.int_min is None else min(self.int_min, value)
            self.int_max = value if self.int_max is None else max(self.int_max, value)
        elif isinstance(value, float):
            self.floats = True
        elif isinstance(value, str):
            self.strings = True
        elif isinstance(value, (bytes, bytearray)):
            self.raw_bytes = True
        elif isinstance(value, dict):
            self.objects += 1
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InferenceError(f"{path or 'value'}: object key {key!r} is not a string")
                child = self.fields.get(key)
                if child is None:
                    child = self.fields[key] = _Shape()
                self.presence[key] = self.presence.get(key, 0) + 1
                child.observe(item, f"{path}.{key}" if path else key)
        elif isinstance(value, (list, tuple)):
            self.arrays = True
            if self.items is None:
                self.items = _Shape()
            for item in value:
                self.items.observe(item, path)
        else:
            raise InferenceError(f"{path or 'value'}: {type(value).__name__} is not a JSON value")

    def absorb(self, other: _Shape) -> None:
        """Merge another shape into this one (used for map values)."""
        self.nulls |= other.nulls
        self.booleans |= other.booleans
        if other.int_min is not None and other.int_max is not None:
            self.int_min = (
                other.int_min if self.int_min is None else min(self.int_min, other.int_min)
            )
            self.int_max = (
                other.int_max if self.int_max is None else max(self.int_max, other.int_max)
            )
        self.floats |= other.floats
        self.strings |= other.strings
        self.raw_bytes |= other.raw_bytes
        if other.objects:
            for key, child in other.fields.items():
                mine = self.fields.get(key)
                if mine is None:
                    mine = self.fields[key] = _Shape()
                mine.absorb(child)
                self.presence[key] = self.presence.get(key, 0) + other.presence.get(key, 0)
            self.objects += other.objects
        if other.arrays:
            self.arrays = True
            if other.items is not None:
                if self.items is None:
                    self.items = _Shape()
                self.items.absorb(other.items)


@dataclass(frozen=True)
class _Options:
    bytes_fields: frozenset[str]
    map_fields: frozenset[str]
    prefer_long: bool
    max_record_fields: int
    sparse_min_keys: int


def _is_map(shape: _Shape, path: str, opts: _Options) -> bool:
    if path in opts.map_fields:
        return True
    if any(not _AVRO_NAME.match(key) for key in shape.fields):
        return True
    distinct = len(shape.fields)
    if distinct > opts.max_record_fields:
        return True
    if shape.objects >= 2 and distinct >= opts.sparse_min_keys:
        average = sum(shape.presence.values()) / shape.objects
        return average < distinct / 2
    return False


def _map_values(shape: _Shape) -> _Shape:
    values = _Shape()
    for child in shape.fields.values():
        values.absorb(child)
    return values


def _collect(records: Iterable[Any]) -> _Shape:
    shape = _Shape()
    seen = 0
    for record in records:
        if record is None:
            continue
        shape.observe(record, "")
        seen += 1
    if not seen:
        raise InferenceError("no records to infer a schema from")
    return shape


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _avro_name(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", text) or "_"
    return name if not name[0].isdigit() else f"_{name}"


# --------------------------------------------------------------------------------------
# Avro


class _AvroBuilder:
    def __init__(self, opts: _Options, namespace: str | None) -> None:
        self.opts = opts
        self.namespace = namespace
        self.names: set[str] = set()

    def unique(self, hint: str) -> str:
        name = _avro_name(hint)
        candidate, n = name, 2
        while candidate in self.names:
            candidate = f"{name}_{n}"
            n += 1
        self.names.add(candidate)
        return candidate

    def build(self, shape: _Shape, path: str, name_hint: str) -> Any:
        """The Avro type for a shape, null included when the shape was ever null."""
        kinds: list[Any] = []
        if shape.booleans:
            kinds.append("boolean")
        if shape.floats:
            kinds.append("double")
        elif shape.int_min is not None and shape.int_max is not None:
            fits = _INT32[0] <= shape.int_min and shape.int_max <= _INT32[1]
            kinds.append("int" if fits and not self.opts.prefer_long else "long")
        as_bytes = path in self.opts.bytes_fields
        if shape.strings:
            kinds.append("bytes" if as_bytes else "string")
        if shape.raw_bytes and "bytes" not in kinds:
            kinds.append("bytes")
        if shape.objects:
            kinds.append(self.build_object(shape, path, name_hint))
        if shape.arrays:
            items = shape.items if shape.items is not None else _Shape()
            kinds.append({"type": "array", "items": self.build(items, path, f"{name_hint}_item")})
        if not kinds:
            kinds.append("bytes" if as_bytes else "string")  # only nulls seen
        if shape.nulls:
            return ["null", *kinds]
        return kinds[0] if len(kinds) == 1 else kinds

    def build_object(self, shape: _Shape, path: str, name_hint: str) -> Any:
        if _is_map(shape, path, self.opts):
            return {
                "type": "map",
                "values": self.build(_map_values(shape), path, f"{name_hint}_value"),
            }
        name = self.unique(name_hint)
        fields = []
        for key, child in shape.fields.items():
            if shape.presence[key] < shape.objects:
                child.nulls = True
            avro_type = self.build(child, _join(path, key), f"{name}_{key}")
            entry: dict[str, Any] = {"name": key, "type": avro_type}
            if isinstance(avro_type, list) and avro_type[0] == "null":
                entry["default"] = None
            fields.append(entry)
        record: dict[str, Any] = {"type": "record", "name": name}
        if self.namespace and path == "":
            record["namespace"] = self.namespace  # nested records inherit it
        record["fields"] = fields
        return record


def infer_avro_schema(
    records: Iterable[Any],
    *,
    name: str = "Value",
    namespace: str | None = None,
    bytes_fields: Iterable[str] = (),
    map_fields: Iterable[str] = (),
    prefer_long: bool = False,
    max_record_fields: int = 200,
    sparse_min_keys: int = 8,
) -> Any:
    """An Avro schema (JSON data) that every record fits; see the module's rules.

    Records that are objects give a record named ``name`` (in ``namespace``); other
    values (a string or number key, say) give a primitive, array or union schema.
    """
    opts = _Options(
        frozenset(bytes_fields),
        frozenset(map_fields),
        prefer_long,
        max_record_fields,
        sparse_min_keys,
    )
    shape = _collect(records)
    return _AvroBuilder(opts, namespace).build(shape, "", name)


# --------------------------------------------------------------------------------------
# Kafka Connect


def _connect(shape: _Shape, path: str, opts: _Options, root: str) -> dict[str, Any]:
    kinds = shape.kinds()
    where = _join(root, path)
    if len(kinds) > 1:
        raise InferenceError(
            f"{where}: seen as {' and '.join(kinds)}; Kafka Connect schemas have no unions"
        )
    kind = kinds[0] if kinds else "string"
    schema: dict[str, Any]
    if kind == "boolean":
        schema = {"type": "boolean"}
    elif kind == "number":
        if shape.floats:
            schema = {"type": "double"}
        else:
            assert shape.int_min is not None
            assert shape.int_max is not None
            fits = _INT32[0] <= shape.int_min and shape.int_max <= _INT32[1]
            schema = {"type": "int32" if fits and not opts.prefer_long else "int64"}
    elif kind == "string":
        schema = {"type": "bytes" if path in opts.bytes_fields else "string"}
    elif kind == "bytes":
        schema = {"type": "bytes"}
    elif kind == "array":
        items = shape.items if shape.items is not None else _Shape()
        schema = {"type": "array", "items": _connect(items, path, opts, root)}
    elif _is_map(shape, path, opts):
        schema = {
            "type": "map",
            "keys": {"type": "string", "optional": False},
            "values": _connect(_map_values(shape), path, opts, root),
        }
    else:
        fields = []
        for key, child in shape.fields.items():
            if shape.presence[key] < shape.objects:
                child.nulls = True
            fields.append({**_connect(child, _join(path, key), opts, root), "field": key})
        schema = {"type": "struct", "fields": fields}
    schema["optional"] = shape.nulls or not kinds
    return schema


def infer_connect_schema(
    records: Iterable[Any],
    *,
    name: str | None = None,
    bytes_fields: Iterable[str] = (),
    map_fields: Iterable[str] = (),
    prefer_long: bool = False,
    max_record_fields: int = 200,
    sparse_min_keys: int = 8,
    root: str = "value",
) -> dict[str, Any]:
    """A Kafka Connect JSON schema every record fits (``InferenceError`` on conflicts).

    ``name`` is set on the top-level schema when given; error messages start with
    ``root`` (``value.after.ID: ...``).
    """
    opts = _Options(
        frozenset(bytes_fields),
        frozenset(map_fields),
        prefer_long,
        max_record_fields,
        sparse_min_keys,
    )
    schema = _connect(_collect(records), "", opts, root)
    if name:
        schema["name"] = name
    return schema
