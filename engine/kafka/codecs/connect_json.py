"""Kafka Connect JSON (``JsonConverter`` with ``schemas.enable=true``).

A message is one JSON object with exactly two fields, ``{"schema": S, "payload": P}``,
as ``org.apache.kafka.connect.json.JsonConverter`` writes it:

* ``S`` is null (schemaless payload) or an object with ``type`` (``boolean``, ``int8``,
  ``int16``, ``int32``, ``int64``, ``float``, ``double``, ``bytes``, ``string``,
  ``array``, ``map``, ``struct``), ``optional`` (default false), and optionally
  ``name``, ``version``, ``doc``, ``parameters`` (string values) and ``default``.
  ``array`` has ``items``; ``map`` has ``keys`` and ``values``; ``struct`` has
  ``fields``, each a schema plus its ``field`` name. (``float32``/``float64`` are
  accepted as aliases of ``float``/``double`` on input; JsonConverter writes the
  latter.)
* ``P`` follows ``S``: bytes are base64 text; maps with string keys are JSON objects,
  other maps arrays of ``[key, value]`` pairs; a struct field that is missing or null
  takes the schema's default, else null if optional, else it is an error.

Decoding returns JSON-able payloads with zync's conventions (see
:mod:`engine.kafka.codecs.formats`): bytes stay base64 text; ``org.apache.kafka.connect.data.Decimal``
(base64 of the unscaled big-endian two's-complement integer, ``scale`` parameter; or a
number with ``decimal.format=NUMERIC``) becomes a plain decimal string; Date, Time and
Timestamp keep their underlying int; maps with non-string keys become objects keyed by
the key's JSON text (``1`` → ``"1"``); struct fields come in schema order.
"""

from __future__ import annotations

import base64
import binascii
import decimal
import json
import math
from dataclasses import dataclass
from typing import Any

from engine.kafka.codecs import plain_json
from engine.kafka.codecs.errors import DecodeError

DECIMAL_NAME = "org.apache.kafka.connect.data.Decimal"

TYPES = frozenset(
    {
        "boolean",
        "int8",
        "int16",
        "int32",
        "int64",
        "float",
        "double",
        "bytes",
        "string",
        "array",
        "map",
        "struct",
    }
)
_ALIASES = {"float32": "float", "float64": "double"}
_INT_RANGE = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_COMPACT = (",", ":")


@dataclass(frozen=True)
class ConnectRecord:
    """A decoded envelope: its schema (None when schemaless) and JSON-able payload."""

    schema: dict[str, Any] | None
    payload: Any


class ConnectSchemaError(ValueError):
    """A Connect schema is malformed; the message names the path."""


def schema_type(schema: dict[str, Any]) -> str:
    """The schema's type name, aliases resolved (``float64`` → ``double``)."""
    t = schema.get("type")
    return _ALIASES.get(t, t) if isinstance(t, str) else ""


def check_schema(schema: Any, path: str = "schema") -> None:
    """Raise :class:`ConnectSchemaError` when ``schema`` is not a Connect JSON schema."""
    if not isinstance(schema, dict):
        raise ConnectSchemaError(f"{path}: a schema must be an object, got {_kind(schema)}")
    t = schema_type(schema)
    if t not in TYPES:
        raise ConnectSchemaError(f"{path}: unknown type {schema.get('type')!r}")
    if "optional" in schema and not isinstance(schema["optional"], bool):
        raise ConnectSchemaError(f"{path}.optional: must be true or false")
    params = schema.get("parameters")
    if params is not None and (
        not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values())
    ):
        raise ConnectSchemaError(f"{path}.parameters: must be an object of strings")
    if t == "array":
        if schema.get("items") is None:
            raise ConnectSchemaError(f"{path}: array schema without items")
        check_schema(schema["items"], f"{path}.items")
    elif t == "map":
        for part in ("keys", "values"):
            if schema.get(part) is None:
                raise ConnectSchemaError(f"{path}: map schema without {part}")
            check_schema(schema[part], f"{path}.{part}")
    elif t == "struct":
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise ConnectSchemaError(f"{path}: struct schema's fields is not an array")
        seen = set()
        for i, f in enumerate(fields):
            name = f.get("field") if isinstance(f, dict) else None
            if not isinstance(name, str):
                raise ConnectSchemaError(f"{path}.fields[{i}]: field name missing")
            if name in seen:
                raise ConnectSchemaError(f"{path}.fields[{i}]: duplicate field {name!r}")
            seen.add(name)
            check_schema(f, f"{path}.{name}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    text = (
        json.dumps(value, ensure_ascii=False)
        if isinstance(value, (str, int, float))
        else repr(value)
    )
    return text if len(text) <= 40 else text[:37] + "..."


def _scale(schema: dict[str, Any]) -> int:
    try:
        return int((schema.get("parameters") or {}).get("scale", "0"))
    except ValueError:
        return 0


# --------------------------------------------------------------------------------------
# payload (JSON) -> JSON-able value


def _from_payload(schema: dict[str, Any] | None, value: Any, path: str) -> Any:
    if schema is None:
        return _schemaless(value, path)
    if value is None:
        if schema.get("default") is not None:
            return _from_payload(schema, schema["default"], path)
        if schema.get("optional", False):
            return None
        raise ValueError(f"{path}: null value for a required {schema_type(schema)} field")
    t = schema_type(schema)
    if t in _INT_RANGE:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{path}: expected {t}, got {_kind(value)}")
        low, high = _INT_RANGE[t]
        if not low <= value <= high:
            raise ValueError(f"{path}: {value} is out of range for {t}")
        return value
    if t in ("float", "double"):
        if schema.get("name") == DECIMAL_NAME:
            return _decimal_from_payload(schema, value, path)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(f"{path}: expected {t}, got {_kind(value)}")
        number = float(value)
        return number if math.isfinite(number) else None
    if t == "boolean":
        if not isinstance(value, bool):
            raise ValueError(f"{path}: expected boolean, got {_kind(value)}")
        return value
    if t == "string":
        if not isinstance(value, str):
            raise ValueError(f"{path}: expected string, got {_kind(value)}")
        return value
    if t == "bytes":
        if schema.get("name") == DECIMAL_NAME:
            return _decimal_from_payload(schema, value, path)
        if not isinstance(value, str):
            raise ValueError(f"{path}: expected base64 text for bytes, got {_kind(value)}")
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{path}: invalid base64 for bytes: {_kind(value)}") from None
        return value
    if t == "array":
        if not isinstance(value, list):
            raise ValueError(f"{path}: expected an array, got {_kind(value)}")
        return [_from_payload(schema["items"], v, f"{path}[{i}]") for i, v in enumerate(value)]
    if t == "map":
        return _map_from_payload(schema, value, path)
    if t == "struct":
        if not isinstance(value, dict):
            raise ValueError(f"{path}: structs are JSON objects, got {_kind(value)}")
        return {
            f["field"]: _from_payload(f, value.get(f["field"]), f"{path}.{f['field']}")
            for f in schema["fields"]
        }
    raise ValueError(f"{path}: unknown type {schema.get('type')!r}")


def _map_from_payload(schema: dict[str, Any], value: Any, path: str) -> dict[str, Any]:
    keys, values = schema["keys"], schema["values"]
    if schema_type(keys) == "string":
        if not isinstance(value, dict):
            raise ValueError(f"{path}: maps with string keys are JSON objects, got {_kind(value)}")
        return {k: _from_payload(values, v, f"{path}.{k}") for k, v in value.items()}
    if not isinstance(value, list):
        raise ValueError(
            f"{path}: maps with non-string keys are arrays of pairs, got {_kind(value)}"
        )
    out = {}
    for i, entry in enumerate(value):
        if not isinstance(entry, list) or len(entry) != 2:
            raise ValueError(f"{path}[{i}]: a map entry is a [key, value] pair")
        key = _from_payload(keys, entry[0], f"{path}[{i}].key")
        out[key if isinstance(key, str) else _dumps(key)] = _from_payload(
            values, entry[1], f"{path}[{i}].value"
        )
    return out


def _decimal_from_payload(schema: dict[str, Any], value: Any, path: str) -> str:
    scale = _scale(schema)
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{path}: invalid base64 for a decimal: {_kind(value)}") from None
        unscaled = int.from_bytes(raw, "big", signed=True) if raw else 0
        number = decimal.Decimal(unscaled).scaleb(-scale)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = decimal.Decimal(str(value))
    else:
        raise ValueError(f"{path}: expected a decimal, got {_kind(value)}")
    return format(number.quantize(decimal.Decimal(1).scaleb(-scale)), "f")


def _schemaless(value: Any, path: str) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _schemaless(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_schemaless(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


# --------------------------------------------------------------------------------------
# JSON-able value -> payload


def _to_payload(schema: dict[str, Any] | None, value: Any, path: str) -> Any:
    if schema is None:
        return _schemaless_out(value)
    if value is None:
        if schema.get("default") is not None:
            return schema["default"]
        if schema.get("optional", False):
            return None
        raise ValueError(f"{path}: null value for a required {schema_type(schema)} field")
    t = schema_type(schema)
    if schema.get("name") == DECIMAL_NAME and t == "bytes":
        if isinstance(value, bool) or not isinstance(value, (str, int, float, decimal.Decimal)):
            raise ValueError(f"{path}: expected a decimal, got {_kind(value)}")
        try:
            number = decimal.Decimal(str(value))
        except decimal.InvalidOperation:
            raise ValueError(f"{path}: expected a decimal, got {_kind(value)}") from None
        unscaled = int(number.scaleb(_scale(schema)).to_integral_value())
        size = max(1, (unscaled.bit_length() + 8) // 8)
        return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode("ascii")
    if t == "bytes" and isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if t == "array":
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{path}: expected an array, got {_kind(value)}")
        return [_to_payload(schema["items"], v, f"{path}[{i}]") for i, v in enumerate(value)]
    if t == "map":
        if not isinstance(value, dict):
            raise ValueError(f"{path}: expected an object (map), got {_kind(value)}")
        keys, values = schema["keys"], schema["values"]
        if schema_type(keys) == "string":
            return {str(k): _to_payload(values, v, f"{path}.{k}") for k, v in value.items()}
        pairs = []
        for k, v in value.items():
            key = json.loads(k) if isinstance(k, str) and schema_type(keys) != "string" else k
            pairs.append(
                [_to_payload(keys, key, f"{path}.{k}"), _to_payload(values, v, f"{path}.{k}")]
            )
        return pairs
    if t == "struct":
        if not isinstance(value, dict):
            raise ValueError(f"{path}: expected an object (struct), got {_kind(value)}")
        names = {f["field"] for f in schema["fields"]}
        extra = [k for k in value if k not in names]
        if extra:
            raise ValueError(f"{path}.{extra[0]}: not a field of the struct")
        return {
            f["field"]: _to_payload(f, value.get(f["field"]), f"{path}.{f['field']}")
            for f in schema["fields"]
        }
    # primitives: validate exactly as the decoder would read them back
    return _from_payload(schema, value, path)


def _schemaless_out(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(k): _schemaless_out(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_schemaless_out(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=_COMPACT, ensure_ascii=False, allow_nan=False)


# --------------------------------------------------------------------------------------
# public API


def encode(schema: dict[str, Any] | None, value: Any, *, root: str = "value") -> bytes:
    """``{"schema": schema, "payload": value}`` as UTF-8 JSON bytes.

    ``value`` is JSON-able (bytes may be ``bytes`` or base64 text; decimals a Decimal,
    number or string). Raises ``ValueError`` naming the path of the first mismatch, or
    :class:`ConnectSchemaError` for a malformed schema.
    """
    if schema is not None:
        check_schema(schema)
    payload = _to_payload(schema, value, root)
    return _dumps({"schema": schema, "payload": payload}).encode("utf-8")


def decode(data: bytes, *, root: str = "value") -> ConnectRecord:
    """The envelope's schema and its payload as a JSON-able value.

    Raises :class:`DecodeError` ``bad-json`` (not UTF-8 JSON) or
    ``bad-connect-envelope`` (not exactly ``schema`` + ``payload``, a malformed schema,
    or a payload that does not match it; the message names the path).
    """
    envelope = plain_json.decode(data)
    if not isinstance(envelope, dict) or set(envelope) != {"schema", "payload"}:
        found = ", ".join(sorted(envelope)) if isinstance(envelope, dict) else _kind(envelope)
        raise DecodeError(
            "bad-connect-envelope",
            f"expected an object with exactly schema and payload, found {found or 'nothing'}"
            " (plain JSON? use the json format)",
        )
    schema = envelope["schema"]
    try:
        if schema is not None:
            check_schema(schema)
        payload = _from_payload(schema, envelope["payload"], root)
    except ValueError as exc:
        raise DecodeError("bad-connect-envelope", str(exc)) from exc
    return ConnectRecord(schema, payload)


def decode_json(data: bytes) -> str:
    """The payload as compact JSON text (normalized as :func:`decode` describes)."""
    return _dumps(decode(data).payload)
