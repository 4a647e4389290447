"""Avro values from JSON input, checked against a schema (``zync produce``).

:class:`Coercer` walks a fastavro-parsed schema alongside a JSON value and makes it
Avro-ready: integral floats become ints, ints floats, base64 (or UTF-8) text bytes,
numbers or strings decimals, ISO-8601 text timestamps, dates and times; missing fields
take their default. Every mismatch is collected with its field path
(``value.after.ID: expected long, got "abc"``) and reported together as an
:class:`AvroValidationError`. :func:`engine.kafka.codecs.avro.coerce_json` and
:func:`~engine.kafka.codecs.avro.validate` are the entry points.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
from typing import Any

from engine.kafka.codecs.avro_binary import PRIMITIVES

_INT_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


class AvroValidationError(ValueError):
    """A value does not fit an Avro schema; ``errors`` lists each mismatch with its path."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"{errors[0]}{more}" if errors else "invalid value")



def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, bytes):
        return f"{len(value)} bytes"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


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
            return self.primitive(schema, None, schema, value, path, errors)
        t = schema["type"]
        logical = schema.get("logicalType")
        if t in ("record", "error"):
            return self.record(schema, value, path, errors)
        if t == "enum":
            if not isinstance(value, str) or value not in schema["symbols"]:
                errors.append(
                    f"{path}: {_show(value)} is not one of {', '.join(schema['symbols'])}"
                )
            return value
        if t == "array":
            if not isinstance(value, (list, tuple)):
                errors.append(f"{path}: expected an array, got {_show(value)}")
                return value
            return [
                self.coerce(schema["items"], v, f"{path}[{i}]", errors) for i, v in enumerate(value)
            ]
        if t == "map":
            if not isinstance(value, dict):
                errors.append(f"{path}: expected an object (map), got {_show(value)}")
                return value
            out = {}
            for k, v in value.items():
                if not isinstance(k, str):
                    errors.append(f"{path}: map key {_show(k)} is not a string")
                    continue
                out[k] = self.coerce(schema["values"], v, f"{path}.{k}", errors)
            return out
        if t == "fixed":
            if logical == "decimal":
                return self.decimal(schema, value, path, errors)
            raw = self.bytes_value(value, path, errors, "fixed")
            if isinstance(raw, bytes) and len(raw) != schema["size"]:
                errors.append(f"{path}: expected {schema['size']} bytes, got {len(raw)}")
            return raw
        return self.primitive(t, logical, schema, value, path, errors)

    def primitive(
        self, t: str, logical: Any, schema: Any, value: Any, path: str, errors: list[str]
    ) -> Any:
        if logical == "decimal" and t == "bytes":
            return self.decimal(schema, value, path, errors)
        if logical in (
            "timestamp-millis",
            "timestamp-micros",
            "local-timestamp-millis",
            "local-timestamp-micros",
        ) and isinstance(value, str):
            try:
                parsed = dt.datetime.fromisoformat(value)
            except ValueError:
                errors.append(
                    f"{path}: expected {logical} (a number or ISO-8601 text), got {_show(value)}"
                )
                return value
            if parsed.tzinfo is None and not logical.startswith("local"):
                parsed = parsed.replace(tzinfo=dt.UTC)
            return parsed
        if logical == "date" and isinstance(value, str):
            try:
                return dt.date.fromisoformat(value)
            except ValueError:
                errors.append(f"{path}: expected a date (YYYY-MM-DD), got {_show(value)}")
                return value
        if logical in ("time-millis", "time-micros") and isinstance(value, str):
            try:
                return dt.time.fromisoformat(value)
            except ValueError:
                errors.append(f"{path}: expected a time (HH:MM:SS), got {_show(value)}")
                return value
        if t == "null":
            if value is not None:
                errors.append(f"{path}: expected null, got {_show(value)}")
            return value
        if t == "boolean":
            if not isinstance(value, bool):
                errors.append(f"{path}: expected boolean, got {_show(value)}")
            return value
        if t in ("int", "long"):
            if isinstance(value, float) and value.is_integer() and self.bytes_encoding is not None:
                value = int(value)
            if isinstance(value, (dt.datetime, dt.date, dt.time)) and logical:
                return value
            if not isinstance(value, int) or isinstance(value, bool):
                errors.append(f"{path}: expected {t}, got {_show(value)}")
                return value
            low, high = _INT_RANGE[t]
            if not low <= value <= high:
                errors.append(f"{path}: {value} is out of range for {t}")
            return value
        if t in ("float", "double"):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                errors.append(f"{path}: expected {t}, got {_show(value)}")
                return value
            return float(value)
        if t == "string":
            if not isinstance(value, str):
                errors.append(f"{path}: expected string, got {_show(value)}")
            return value
        if t == "bytes":
            return self.bytes_value(value, path, errors, "bytes")
        errors.append(f"{path}: unsupported schema type {t!r}")
        return value

    def bytes_value(self, value: Any, path: str, errors: list[str], what: str) -> Any:
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        if isinstance(value, str) and self.bytes_encoding == "base64":
            try:
                return base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                errors.append(f"{path}: expected base64 text for {what}, got {_show(value)}")
                return value
        if isinstance(value, str) and self.bytes_encoding == "utf-8":
            return value.encode("utf-8")
        errors.append(f"{path}: expected {what}, got {_show(value)}")
        return value

    def decimal(self, schema: Any, value: Any, path: str, errors: list[str]) -> Any:
        scale = int(schema.get("scale", 0))
        precision = int(schema.get("precision", 0))
        if isinstance(value, bool) or not isinstance(value, (decimal.Decimal, int, float, str)):
            errors.append(f"{path}: expected a decimal, got {_show(value)}")
            return value
        if not isinstance(value, decimal.Decimal) and self.bytes_encoding is None:
            errors.append(f"{path}: expected a Decimal, got {_show(value)}")
            return value
        try:
            number = (
                decimal.Decimal(str(value)) if not isinstance(value, decimal.Decimal) else value
            )
            exact = number.quantize(decimal.Decimal(1).scaleb(-scale))
        except decimal.InvalidOperation:
            errors.append(f"{path}: expected a decimal, got {_show(value)}")
            return value
        if not number.is_finite() or exact != number:
            errors.append(f"{path}: {_show(value)} does not fit decimal({precision},{scale})")
            return value
        if precision and len(exact.as_tuple().digits) > precision and exact != 0:
            errors.append(f"{path}: {_show(value)} has more than {precision} digits")
        return exact

    def record(self, schema: Any, value: Any, path: str, errors: list[str]) -> Any:
        if not isinstance(value, dict):
            errors.append(f"{path}: expected {_type_name(schema)}, got {_show(value)}")
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
            errors.append(f"{path}: expected {_type_name(branches)}, got {_show(value)}")
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


