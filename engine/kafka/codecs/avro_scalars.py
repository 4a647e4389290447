"""Avro's leaf values from JSON input: primitives, bytes, decimals, dates, times, timestamps.

:class:`ScalarCoercer` makes one leaf value Avro-ready for
:class:`engine.kafka.codecs.avro_coerce.Coercer`, which walks records, arrays, maps and
unions: integral floats become ints, ints floats, base64 (or UTF-8) text bytes, numbers
or strings decimals, ISO-8601 text timestamps, dates and times. A value that does not
fit adds a path-named error to the list it is given and is returned as it came.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
from typing import Any

_INT_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


def shown(value: Any) -> str:
    """A value in a few words, for an error message."""
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


class ScalarCoercer:
    """Checks and converts Avro's leaf values; ``bytes_encoding`` is how text becomes
    bytes (``"base64"`` or ``"utf-8"``), or None to judge values as given."""

    def __init__(self, bytes_encoding: str | None) -> None:
        self.bytes_encoding = bytes_encoding

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
                    f"{path}: expected {logical} (a number or ISO-8601 text), got {shown(value)}"
                )
                return value
            if parsed.tzinfo is None and not logical.startswith("local"):
                parsed = parsed.replace(tzinfo=dt.UTC)
            return parsed
        if logical == "date" and isinstance(value, str):
            try:
                return dt.date.fromisoformat(value)
            except ValueError:
                errors.append(f"{path}: expected a date (YYYY-MM-DD), got {shown(value)}")
                return value
        if logical in ("time-millis", "time-micros") and isinstance(value, str):
            try:
                return dt.time.fromisoformat(value)
            except ValueError:
                errors.append(f"{path}: expected a time (HH:MM:SS), got {shown(value)}")
                return value
        if t == "null":
            if value is not None:
                errors.append(f"{path}: expected null, got {shown(value)}")
            return value
        if t == "boolean":
            if not isinstance(value, bool):
                errors.append(f"{path}: expected boolean, got {shown(value)}")
            return value
        if t in ("int", "long"):
            if isinstance(value, float) and value.is_integer() and self.bytes_encoding is not None:
                value = int(value)
            if isinstance(value, (dt.datetime, dt.date, dt.time)) and logical:
                return value
            if not isinstance(value, int) or isinstance(value, bool):
                errors.append(f"{path}: expected {t}, got {shown(value)}")
                return value
            low, high = _INT_RANGE[t]
            if not low <= value <= high:
                errors.append(f"{path}: {value} is out of range for {t}")
            return value
        if t in ("float", "double"):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                errors.append(f"{path}: expected {t}, got {shown(value)}")
                return value
            return float(value)
        if t == "string":
            if not isinstance(value, str):
                errors.append(f"{path}: expected string, got {shown(value)}")
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
                errors.append(f"{path}: expected base64 text for {what}, got {shown(value)}")
                return value
        if isinstance(value, str) and self.bytes_encoding == "utf-8":
            return value.encode("utf-8")
        errors.append(f"{path}: expected {what}, got {shown(value)}")
        return value

    def decimal(self, schema: Any, value: Any, path: str, errors: list[str]) -> Any:
        scale = int(schema.get("scale", 0))
        precision = int(schema.get("precision", 0))
        if isinstance(value, bool) or not isinstance(value, (decimal.Decimal, int, float, str)):
            errors.append(f"{path}: expected a decimal, got {shown(value)}")
            return value
        if not isinstance(value, decimal.Decimal) and self.bytes_encoding is None:
            errors.append(f"{path}: expected a Decimal, got {shown(value)}")
            return value
        try:
            number = (
                decimal.Decimal(str(value)) if not isinstance(value, decimal.Decimal) else value
            )
            exact = number.quantize(decimal.Decimal(1).scaleb(-scale))
        except decimal.InvalidOperation:
            errors.append(f"{path}: expected a decimal, got {shown(value)}")
            return value
        if not number.is_finite() or exact != number:
            errors.append(f"{path}: {shown(value)} does not fit decimal({precision},{scale})")
            return value
        if precision and len(exact.as_tuple().digits) > precision and exact != 0:
            errors.append(f"{path}: {shown(value)} has more than {precision} digits")
        return exact
