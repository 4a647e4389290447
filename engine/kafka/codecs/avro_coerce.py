"""Avro values from JSON input, checked against a schema (``zync produce``).

:class:`Coercer` walks a fastavro-parsed schema alongside a JSON value and makes it
Avro-ready: integral floats become ints, ints floats, base64 (or UTF-8) text bytes,
numbers or strings decimals, ISO-8601 text timestamps, dates and times (the leaf values:
:mod:`engine.kafka.codecs.avro_scalars`); missing fields take their default. Every
mismatch is collected with its field path (``value.after.ID: expected long, got "abc"``)
and reported together as an
:class:`AvroValidationError`. :func:`engine.kafka.codecs.avro.coerce_json` and
:func:`~engine.kafka.codecs.avro.validate` are the entry points.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from engine.kafka.codecs.avro_binary import PRIMITIVES
from engine.kafka.codecs.avro_scalars import ScalarCoercer, shown


class AvroValidationError(ValueError):
    """A value does not fit an Avro schema; ``errors`` lists each mismatch with its path."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"{errors[0]}{more}" if errors else "invalid value")


def _type_name(schema: Any) -> str:
    if isinstance(schema, str):
        return schema.rsplit(".", 1)[-1] if schema not in PRIMITIVES else schema
    if isinstance(schema, list):
        return "one of " + ", ".join(_type_name(b) for b in schema)
    t = schema.get("type")
    if schema.get("logicalType"):
        return str(schema["logicalType"])
    if t in ("record", "error", "enum", "fixed"):
        return f"{t} {str(schema.get('name', '')).rsplit('.', 1)[-1]}"
    if isinstance(t, str):
        return t
    return _type_name(t)


class Coercer:
    """Walks a fastavro-parsed schema alongside a value, collecting path-named errors.

    ``named`` maps the schema's full names to their named types (fastavro's
    ``named_schemas``); ``bytes_encoding`` is how text becomes bytes (``"base64"`` or
    ``"utf-8"``), or None to judge values as given (:func:`engine.kafka.codecs.avro.validate`).
    """

    def __init__(self, named: dict[str, Any], bytes_encoding: str | None) -> None:
        self.named = named
        self.bytes_encoding = bytes_encoding
        self.scalars = ScalarCoercer(bytes_encoding)

    def resolve(self, schema: Any) -> Any:
        while True:
            if isinstance(schema, str) and schema not in PRIMITIVES:
                schema = self.named[schema]
            elif isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
                schema = schema["type"]
            elif (
                isinstance(schema, dict)
                and schema.get("type") in self.named
                and schema.get("type") not in PRIMITIVES
            ):
                schema = self.named[schema["type"]]
            else:
                return schema

    def coerce(self, schema: Any, value: Any, path: str, errors: list[str]) -> Any:
        schema = self.resolve(schema)
        if isinstance(schema, list):
            return self.union(schema, value, path, errors)
        if isinstance(schema, str):
            return self.scalars.primitive(schema, None, schema, value, path, errors)
        t = schema["type"]
        logical = schema.get("logicalType")
        if t in ("record", "error"):
            return self.record(schema, value, path, errors)
        if t == "enum":
            if not isinstance(value, str) or value not in schema["symbols"]:
                errors.append(
                    f"{path}: {shown(value)} is not one of {', '.join(schema['symbols'])}"
                )
            return value
        if t == "array":
            if not isinstance(value, (list, tuple)):
                errors.append(f"{path}: expected an array, got {shown(value)}")
                return value
            return [
                self.coerce(schema["items"], v, f"{path}[{i}]", errors) for i, v in enumerate(value)
            ]
        if t == "map":
            if not isinstance(value, dict):
                errors.append(f"{path}: expected an object (map), got {shown(value)}")
                return value
            out = {}
            for k, v in value.items():
                if not isinstance(k, str):
                    errors.append(f"{path}: map key {shown(k)} is not a string")
                    continue
                out[k] = self.coerce(schema["values"], v, f"{path}.{k}", errors)
            return out
        if t == "fixed":
            if logical == "decimal":
                return self.scalars.decimal(schema, value, path, errors)
            raw = self.scalars.bytes_value(value, path, errors, "fixed")
            if isinstance(raw, bytes) and len(raw) != schema["size"]:
                errors.append(f"{path}: expected {schema['size']} bytes, got {len(raw)}")
            return raw
        return self.scalars.primitive(t, logical, schema, value, path, errors)

    def record(self, schema: Any, value: Any, path: str, errors: list[str]) -> Any:
        if not isinstance(value, dict):
            errors.append(f"{path}: expected {_type_name(schema)}, got {shown(value)}")
            return value
        out = {}
        names = set()
        for f in schema["fields"]:
            name = f["name"]
            names.add(name)
            if name in value:
                out[name] = self.coerce(f["type"], value[name], f"{path}.{name}", errors)
            elif "default" in f:
                out[name] = self.default(f["type"], f["default"])
            else:
                errors.append(f"{path}.{name}: missing, and the field has no default")
        for name in value:
            if name not in names:
                errors.append(f"{path}.{name}: not a field of {_type_name(schema)}")
        return out

    def default(self, schema: Any, default: Any) -> Any:
        schema = self.resolve(schema)
        if isinstance(schema, list):
            schema = self.resolve(schema[0])
        t = schema if isinstance(schema, str) else schema.get("type")
        if t in ("bytes", "fixed") and isinstance(default, str):
            return default.encode("latin-1")
        return default

    def union(self, branches: list[Any], value: Any, path: str, errors: list[str]) -> Any:
        if value is None and "null" in branches:
            return None
        candidates = [b for b in branches if _fits_kind(self.resolve(b), value)]
        attempts: list[list[str]] = []
        for branch in candidates:
            branch_errors: list[str] = []
            out = self.coerce(branch, value, path, branch_errors)
            if not branch_errors:
                return out
            attempts.append(branch_errors)
        if len(attempts) == 1:
            errors.extend(attempts[0])
        else:
            errors.append(f"{path}: expected {_type_name(branches)}, got {shown(value)}")
        return value


def _fits_kind(schema: Any, value: Any) -> bool:
    """Could ``value`` be of this (resolved) schema's kind? Cheap, used to order unions."""
    if isinstance(schema, list):
        return True
    t = schema if isinstance(schema, str) else schema.get("type")
    logical = None if isinstance(schema, str) else schema.get("logicalType")
    if value is None:
        return t == "null"
    if isinstance(value, bool):
        return t == "boolean"
    if isinstance(value, int):
        return t in ("int", "long", "float", "double") or logical == "decimal"
    if isinstance(value, float):
        return t in ("float", "double", "int", "long") or logical == "decimal"
    if isinstance(value, str):
        return t in ("string", "enum", "bytes", "fixed") or logical is not None
    if isinstance(value, dict):
        return t in ("record", "error", "map")
    if isinstance(value, (list, tuple)):
        return t == "array"
    if isinstance(value, (bytes, bytearray)):
        return t in ("bytes", "fixed")
    if isinstance(value, decimal.Decimal):
        return logical == "decimal"
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return logical is not None
    return True
