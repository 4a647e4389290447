"""Values written as JSON text, byte for byte as Spark writes them: ``to_json(x,
map('ignoreNullFields', 'false'))`` for structs, arrays and maps, and the bare JSON of a
scalar that :func:`engine.etl.typed_records.json_text_sql` cuts out of ``{"v":...}``.

Spark writes through Jackson: fields in order, NULL fields as ``null``, strings with
``"``, ``\\`` and the control characters escaped (``\\n`` and its kind, else
``\\u00XX`` in upper-case hex) and everything else as it is (UTF-8, ``/`` unescaped),
doubles and floats as the JVM prints them (:mod:`engine.etl.rowwise.java_numbers`),
decimals as ``BigDecimal.toString`` (``1.00E-8`` below 10^-6), timestamps as
``yyyy-MM-dd'T'HH:mm:ss.SSSXXX`` in the session time zone (``Z`` in UTC; the
microseconds cut to milliseconds), dates ``yyyy-MM-dd``, binary as base64, map keys as
field names. Writers are built once per type (:func:`writer`).
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from engine.etl.rowwise.datatypes import (
    ArrayType,
    Atomic,
    DataType,
    DecimalType,
    MapType,
    StructType,
)
from engine.etl.rowwise.java_numbers import double_text, float_text
from engine.etl.rowwise.unsupported import Unsupported

Writer = Callable[[Any], str]

#: The session time zones whose timestamps are written (Spark's ``XXX`` gives ``Z``).
UTC_ZONES = frozenset({"UTC", "Etc/UTC", "Z", "GMT", "Etc/GMT", "+00:00"})

_ESCAPES: dict[int, str] = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update(
    {
        ord("\b"): "\\b", ord("\t"): "\\t", ord("\n"): "\\n", ord("\f"): "\\f",
        ord("\r"): "\\r", ord('"'): '\\"', ord("\\"): "\\\\",
    }
)  # fmt: skip
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_MIN_DAY = dt.date(1, 1, 1).toordinal() - _EPOCH_ORDINAL
_MAX_DAY = dt.date(9999, 12, 31).toordinal() - _EPOCH_ORDINAL
_DAY_MICROS = 86_400_000_000


def json_string(text: str) -> str:
    """A JSON string literal as Jackson writes it."""
    if _NEEDS_ESCAPE.search(text) is None:
        return f'"{text}"'
    return '"' + text.translate(_ESCAPES) + '"'


def date_text(days: int) -> str:
    """``yyyy-MM-dd`` of days since the epoch (years 1 to 9999)."""
    if not _MIN_DAY <= days <= _MAX_DAY:
        raise Unsupported(f"the date {days} days from 1970 (outside years 1-9999)")
    return dt.date.fromordinal(_EPOCH_ORDINAL + days).isoformat()


def timestamp_parts(micros: int) -> tuple[str, int, int, int, int]:
    """``(yyyy-MM-dd, hour, minute, second, microsecond)`` of microseconds since the
    epoch, in UTC."""
    days, rest = divmod(micros, _DAY_MICROS)
    seconds, fraction = divmod(rest, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return date_text(days), hour, minute, second, fraction


def _timestamp_json(micros: int, suffix: str) -> str:
    day, hour, minute, second, fraction = timestamp_parts(micros)
    return f'"{day}T{hour:02d}:{minute:02d}:{second:02d}.{fraction // 1000:03d}{suffix}"'


def writer(data_type: DataType, time_zone: str = "UTC") -> Writer:
    """The function writing a (non-NULL) value of ``data_type`` as Spark's JSON;
    Unsupported for a type it cannot write exactly."""
    return _writer(data_type, time_zone)


@lru_cache(maxsize=1024)
def _writer(data_type: DataType, time_zone: str) -> Writer:
    if isinstance(data_type, StructType):
        return _struct_writer(data_type, time_zone)
    if isinstance(data_type, ArrayType):
        element = _nullable(_writer(data_type.element, time_zone))
        return lambda items: "[" + ",".join([element(item) for item in items]) + "]"
    if isinstance(data_type, MapType):
        return _map_writer(data_type, time_zone)
    if isinstance(data_type, DecimalType):
        return str
    if isinstance(data_type, Atomic):
        return _atomic_writer(data_type.name, time_zone)
    raise Unsupported(f"writing {data_type} as JSON")  # pragma: no cover - every type above


def _atomic_writer(name: str, time_zone: str) -> Writer:
    if name in ("byte", "short", "integer", "long"):
        return str
    if name == "boolean":
        return lambda value: "true" if value else "false"
    if name == "string":
        return json_string
    if name == "double":
        return double_text
    if name == "float":
        return float_text
    if name == "binary":
        return lambda value: '"' + base64.b64encode(value).decode("ascii") + '"'
    if name == "date":
        return lambda value: f'"{date_text(value)}"'
    if name in ("timestamp", "timestamp_ntz"):
        if name == "timestamp" and time_zone not in UTC_ZONES:
            raise Unsupported(f"timestamps written in the time zone {time_zone}")
        suffix = "Z" if name == "timestamp" else ""
        return lambda value: _timestamp_json(value, suffix)
    if name == "void":
        return lambda value: "null"
    raise Unsupported(f"writing {name} as JSON")


def _nullable(write: Writer) -> Writer:
    return lambda value: "null" if value is None else write(value)


def _struct_writer(data_type: StructType, time_zone: str) -> Writer:
    parts = [
        (json_string(field.name) + ":", _writer(field.type, time_zone))
        for field in data_type.fields
    ]

    def write(row: tuple[Any, ...]) -> str:
        out = []
        for (name, write_field), value in zip(parts, row, strict=True):
            out.append(name + ("null" if value is None else write_field(value)))
        return "{" + ",".join(out) + "}"

    return write


def _map_writer(data_type: MapType, time_zone: str) -> Writer:
    key_type = data_type.key
    if isinstance(key_type, Atomic) and key_type.name == "string":
        key_text: Callable[[Any], str] = json_string
    elif isinstance(key_type, Atomic) and key_type.name in ("byte", "short", "integer", "long"):
        key_text = lambda key: f'"{key}"'  # noqa: E731 - the key's toString, as a name
    else:
        raise Unsupported(f"writing map keys of type {key_type} as JSON")
    value = _nullable(_writer(data_type.value, time_zone))
    return lambda entries: (
        "{" + ",".join([key_text(k) + ":" + value(v) for k, v in entries.items()]) + "}"
    )


def to_json(value: Any, data_type: DataType, time_zone: str = "UTC") -> str | None:
    """``to_json(value, map('ignoreNullFields', 'false'))`` of a struct, array or map."""
    if not isinstance(data_type, StructType | ArrayType | MapType):
        raise Unsupported(f"to_json of {data_type}")
    return None if value is None else writer(data_type, time_zone)(value)


def json_text(value: Any, data_type: DataType | None, time_zone: str = "UTC") -> str | None:
    """The JSON text a pass writes for an output key or value of ``data_type``
    (:func:`engine.etl.typed_records.json_text_sql`): NULL stays NULL, as does every value
    of an unknown or NULL type; a scalar is its bare JSON."""
    if value is None or data_type is None:
        return None
    if isinstance(data_type, Atomic) and data_type.name == "void":
        return None
    return writer(data_type, time_zone)(value)
