"""fastavro's decoded values made JSON-able per record, exactly as the batch decoder
(:mod:`engine.kafka.codecs.avro_batch`) writes them: bytes and fixed as base64 text,
decimals as plain strings, float32 as its shortest reading, NaN and infinity as null,
unions untagged (:mod:`engine.kafka.codecs.formats`).
"""

from __future__ import annotations

import base64
import decimal
import json
import math
import struct
from collections.abc import Callable
from typing import Any

from engine.kafka.codecs.avro_binary import PRIMITIVES

_COMPACT = (",", ":")

Converter = Callable[[Any], Any]




def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


_F32 = struct.Struct("<f")


def _float32(value: float) -> float | None:
    """The shortest decimal that reads back as the same float32 (as polars writes it)."""
    if not math.isfinite(value):
        return None
    for digits in range(1, 10):
        short = float(f"{value:.{digits}g}")
        if _F32.unpack(_F32.pack(short))[0] == value:
            return short
    return value


def _double(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _decimal_text(value: decimal.Decimal) -> str:
    return format(value, "f")


def _generic(value: Any) -> Any:
    """JSON-able form of a value whose branch is not known (multi-type unions)."""
    if isinstance(value, dict):
        return {k: _generic(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_generic(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return _b64(bytes(value))
    if isinstance(value, decimal.Decimal):
        return _decimal_text(value)
    if isinstance(value, float):
        return _double(value)
    if isinstance(value, tuple):  # fastavro's (name, value) for named unions: not used
        return [_generic(v) for v in value]
    return value


def _not_none(conv: Converter) -> Converter:
    return lambda v: None if v is None else conv(v)


def build_converter(
    schema: Any, named: dict[str, Any], active: frozenset[str]
) -> Converter | None:
    """A function making fastavro's decoded value JSON-able, or None when it already is."""
    if isinstance(schema, str):
        if schema == "bytes":
            return _b64
        if schema == "float":
            return _float32
        if schema == "double":
            return _double
        if schema in PRIMITIVES:
            return None
        if schema in active:
            return _generic  # a recursive reference
        return build_converter(named[schema], named, active)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            conv = build_converter(branches[0], named, active)
            return None if conv is None else _not_none(conv)
        return _generic
    t = schema["type"]
    if isinstance(t, (dict, list)):
        return build_converter(t, named, active)
    if schema.get("logicalType") == "decimal" and t in ("bytes", "fixed"):
        return _not_none(_decimal_text)
    if t in ("record", "error"):
        inner = active | {schema["name"]}
        convs = [
            (f["name"], c)
            for f in schema["fields"]
            if (c := build_converter(f["type"], named, inner)) is not None
        ]
        if not convs:
            return None

        def record(value: dict[str, Any]) -> dict[str, Any]:
            for name, conv in convs:
                item = value[name]
                if item is not None:
                    value[name] = conv(item)
            return value

        return record
    if t == "array":
        item_conv = build_converter(schema["items"], named, active)
        if item_conv is None:
            return None
        return lambda v: [None if x is None else item_conv(x) for x in v]
    if t == "map":
        value_conv = build_converter(schema["values"], named, active)
        if value_conv is None:
            return None
        return lambda v: {k: (None if x is None else value_conv(x)) for k, x in v.items()}
    if t == "fixed":
        return _b64
    if t == "enum":
        return None
    return build_converter(t, named, active)


def strip_logical_types(schema: Any) -> Any:
    """A copy without logical types, except decimals (kept: read as Decimal → text)."""
    if isinstance(schema, list):
        return [strip_logical_types(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "logicalType" and value != "decimal":
            continue
        if key in ("type", "items", "values"):
            out[key] = strip_logical_types(value)
        elif key == "fields" and isinstance(value, list):
            out[key] = [strip_logical_types(f) for f in value]
        else:
            out[key] = value
    return out


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=_COMPACT, ensure_ascii=False)
