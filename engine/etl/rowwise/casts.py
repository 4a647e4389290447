"""``CAST`` as Spark 4 computes it, for the pairs of types implemented exactly.

A cast that fails in Spark (a string that is not a number, an overflow, a decimal that
does not fit) raises an error under ANSI, gives NULL in ``try_cast`` and under legacy
rules — and the plan's JSON does not say which (its ``evalMode`` is written as null). So
every failure here refuses the row (:class:`Unsupported`): Spark decides. Only the forms
of text whose meaning is the same in every mode are read (``-12``, ``1.5e3``,
``2024-05-01 10:00:00.5``); other text, even text Spark would read, is refused.

Not implemented (refused when compiling): casts to or from intervals, times, variant,
user types, complex types to string, numbers to timestamps except integers, and a
few more named where they are refused.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from collections.abc import Callable
from typing import Any

from engine.etl.rowwise.compiled import Compiled, Compiler, builds, children, strict
from engine.etl.rowwise.datatypes import (
    INTEGRAL_RANGE,
    ArrayType,
    Atomic,
    DataType,
    DecimalType,
    MapType,
    StructType,
    parse_type,
)
from engine.etl.rowwise.java_numbers import (
    double_text,
    float_text,
    is_float32_midpoint,
    to_float32,
)
from engine.etl.rowwise.json_read import fit_decimal
from engine.etl.rowwise.json_write import UTC_ZONES, date_text, timestamp_parts
from engine.etl.rowwise.plan_tree import Node
from engine.etl.rowwise.unsupported import Unsupported

Convert = Callable[[Any], Any]

_INTEGER_TEXT = re.compile(r"^[+-]?\d{1,40}$")
_NUMBER_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d{1,4})?$")
_DECIMAL_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)$")
_DATE_TEXT = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_TIMESTAMP_TEXT = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(Z?)$"
)
_TRUE = frozenset({"t", "true", "y", "yes", "1"})
_FALSE = frozenset({"f", "false", "n", "no", "0"})
_EPOCH = dt.datetime(1970, 1, 1)
_DAY_MICROS = 86_400_000_000
_LONG_LOW, _LONG_HIGH = INTEGRAL_RANGE["long"]


@builds("Cast")
def _cast(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    target = parse_type(node.fields["dataType"])
    zone = node.fields.get("timeZoneId") or compiler.session.time_zone
    convert = converter(child.type, target, str(zone))
    if convert is None:
        return Compiled(child.fn, target, child.constant)
    return strict(convert, child, target)


def converter(source: DataType, target: DataType, zone: str = "UTC") -> Convert | None:
    """The conversion of a non-NULL value of ``source`` to ``target`` (None: the value
    stays as it is); Unsupported for a cast not implemented exactly."""
    if source == target or source.same_shape(target):
        return None
    if source == Atomic("void"):
        return lambda value: None
    if isinstance(source, StructType) and isinstance(target, StructType):
        return _struct(source, target, zone)
    if isinstance(source, ArrayType) and isinstance(target, ArrayType):
        element = converter(source.element, target.element, zone)
        if element is None:
            return None
        convert_element = element
        return lambda items: [None if x is None else convert_element(x) for x in items]
    if isinstance(source, MapType) and isinstance(target, MapType):
        if converter(source.key, target.key, zone) is not None:
            raise Unsupported(f"casting {source} to {target}")
        value = converter(source.value, target.value, zone)
        if value is None:
            return None
        convert_value = value
        return lambda entries: {
            k: None if v is None else convert_value(v) for k, v in entries.items()
        }
    if isinstance(source, StructType | ArrayType | MapType) or isinstance(
        target, StructType | ArrayType | MapType
    ):
        raise Unsupported(f"casting {source} to {target}")
    return _atomic(source, target, zone)


def _struct(source: StructType, target: StructType, zone: str) -> Convert:
    if len(source.fields) != len(target.fields):
        raise Unsupported(f"casting {source} to {target}")
    parts = [converter(a.type, b.type, zone) for a, b in zip(source.fields, target.fields, strict=True)]

    def convert(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(
            value if part is None or value is None else part(value)
            for part, value in zip(parts, row, strict=True)
        )

    return convert


def _name(data_type: DataType) -> str:
    if isinstance(data_type, DecimalType):
        return "decimal"
    assert isinstance(data_type, Atomic)
    return data_type.name


def _atomic(source: DataType, target: DataType, zone: str) -> Convert:
    src, dst = _name(source), _name(target)
    utc = zone in UTC_ZONES
    if src in INTEGRAL_RANGE:
        made = _from_integral(dst, target)
    elif src == "boolean":
        made = _from_boolean(dst, target)
    elif src in ("double", "float"):
        made = _from_floating(src, dst, target)
    elif src == "decimal":
        made = _from_decimal(source, dst, target)
    elif src == "string":
        made = _from_string(dst, target, utc)
    elif src == "date" and utc:
        made = _from_date(dst)
    elif src in ("timestamp", "timestamp_ntz") and (utc or src == dst):
        made = _from_timestamp(dst)
    elif src == "binary" and dst == "string":
        made = _utf8
    else:
        made = None
    if made is None:
        raise Unsupported(f"casting {source} to {target}")
    return made


def in_range(name: str) -> Callable[[int], int]:
    low, high = INTEGRAL_RANGE[name]

    def check(value: int) -> int:
        if not low <= value <= high:
            raise Unsupported(f"{value} out of the {name} range")
        return value

    return check


def _from_integral(dst: str, target: DataType) -> Convert | None:
    if dst in INTEGRAL_RANGE:
        return in_range(dst)
    if dst == "double":
        return float
    if dst == "float":

        def to_float(value: int) -> float:
            if abs(value) > 2**53:
                raise Unsupported(f"the integer {value} as a float")
            return to_float32(float(value))

        return to_float
    if dst == "decimal":
        return _to_decimal(target)
    if dst == "string":
        return str
    if dst == "boolean":
        return lambda value: value != 0
    if dst == "timestamp":

        def seconds(value: int) -> int:
            micros = value * 1_000_000
            if not _LONG_LOW <= micros <= _LONG_HIGH:
                raise Unsupported(f"{value} seconds as a timestamp")
            return micros

        return seconds
    return None


def _from_boolean(dst: str, target: DataType) -> Convert | None:
    if dst in INTEGRAL_RANGE:
        return int
    if dst in ("double", "float"):
        return float
    if dst == "decimal":
        decimal_of = _to_decimal(target)
        return lambda value: decimal_of(int(value))
    if dst == "string":
        return lambda value: "true" if value else "false"
    return None


def _truncated(dst: str) -> Convert:
    check = in_range(dst)

    def convert(value: Any) -> int:
        return check(math.trunc(value))

    return convert


def _from_floating(src: str, dst: str, target: DataType) -> Convert | None:
    if dst in INTEGRAL_RANGE:
        return _truncated(dst)
    if dst == "double":
        return float  # a float's value is a double's
    if dst == "float":
        return to_float32
    if dst == "string":
        return double_text if src == "double" else float_text
    if dst == "decimal":
        # Spark reads the double's Java text (a float widened to a double first)
        decimal_of = _to_decimal(target)
        return lambda value: decimal_of(decimal.Decimal(double_text(value)))
    if dst == "boolean":
        return lambda value: value != 0
    return None


def _to_decimal(target: DataType) -> Callable[[Any], decimal.Decimal]:
    assert isinstance(target, DecimalType)
    quantum = decimal.Decimal(1).scaleb(-target.scale)
    precision = target.precision
    return lambda value: fit_decimal(decimal.Decimal(value), quantum, precision)


def _decimal_to_double(value: decimal.Decimal) -> float:
    """Spark may divide the unscaled long by a power of ten in doubles, or round the
    decimal once: both agree when the unscaled value and the power are exact doubles."""
    sign, digits, exponent = value.as_tuple()
    unscaled = int("".join(map(str, digits)))
    scale = -int(exponent)
    if unscaled > 2**53 or scale > 22:
        raise Unsupported(f"the decimal {value} as a double")
    result = unscaled / 10.0**scale
    return -result if sign else result


def _from_decimal(source: DataType, dst: str, target: DataType) -> Convert | None:
    if dst in INTEGRAL_RANGE:
        return _truncated(dst)
    if dst == "double":
        return _decimal_to_double
    if dst == "decimal":
        return _to_decimal(target)
    if dst == "string":
        return lambda value: format(value, "f")
    if dst == "boolean":
        return lambda value: not value.is_zero()
    return None


def _from_string(dst: str, target: DataType, utc: bool) -> Convert | None:
    if dst in INTEGRAL_RANGE:
        check = in_range(dst)

        def integral(text: str) -> int:
            if not _INTEGER_TEXT.match(text):
                raise Unsupported(f"the string {text[:24]!r} as a {dst}")
            return check(int(text))

        return integral
    if dst in ("double", "float"):

        def floating(text: str) -> float:
            if not _NUMBER_TEXT.match(text):
                raise Unsupported(f"the string {text[:24]!r} as a {dst}")
            number = float(text)
            if not math.isfinite(number):
                raise Unsupported(f"the string {text[:24]!r} beyond the {dst} range")
            if dst == "float":
                if is_float32_midpoint(number):
                    raise Unsupported(f"the string {text[:24]!r} halfway between two floats")
                return to_float32(number)
            return number

        return floating
    if dst == "decimal":
        decimal_of = _to_decimal(target)

        def to_decimal(text: str) -> decimal.Decimal:
            if not _DECIMAL_TEXT.match(text) or len(text) > 80:
                raise Unsupported(f"the string {text[:24]!r} as a decimal")
            return decimal_of(decimal.Decimal(text))

        return to_decimal
    if dst == "boolean":

        def boolean(text: str) -> bool:
            lowered = text.lower() if text.isascii() else text
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise Unsupported(f"the string {text[:24]!r} as a boolean")

        return boolean
    if dst == "binary":
        return lambda text: text.encode("utf-8")
    if dst == "date" and utc:
        return _string_to_date
    if dst == "timestamp" and utc:
        return _string_to_timestamp
    return None


def _string_to_date(text: str) -> int:
    match = _DATE_TEXT.match(text)
    if match is None:
        raise Unsupported(f"the string {text[:24]!r} as a date")
    try:
        day = dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        raise Unsupported(f"the string {text[:24]!r} as a date") from None
    return (day - _EPOCH.date()).days


def _string_to_timestamp(text: str) -> int:
    match = _TIMESTAMP_TEXT.match(text)
    if match is None:
        raise Unsupported(f"the string {text[:32]!r} as a timestamp")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = int((match.group(7) or "").ljust(6, "0"))
    try:
        moment = dt.datetime(year, month, day, hour, minute, second)
    except ValueError:
        raise Unsupported(f"the string {text[:32]!r} as a timestamp") from None
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + fraction


def _from_date(dst: str) -> Convert | None:
    if dst == "string":
        return date_text
    if dst in ("timestamp", "timestamp_ntz"):
        return lambda days: days * _DAY_MICROS
    return None


def _from_timestamp(dst: str) -> Convert | None:
    if dst == "string":
        return timestamp_text
    if dst == "date":
        return lambda micros: micros // _DAY_MICROS
    if dst in ("timestamp", "timestamp_ntz"):
        return None
    if dst == "long":
        return lambda micros: micros // 1_000_000
    if dst == "double":
        return lambda micros: micros / 1_000_000
    return None


def timestamp_text(micros: int) -> str:
    """``CAST(ts AS STRING)``: ``yyyy-MM-dd HH:mm:ss`` and the fraction without its
    trailing zeros, in UTC."""
    day, hour, minute, second, fraction = timestamp_parts(micros)
    text = f"{day} {hour:02d}:{minute:02d}:{second:02d}"
    if fraction:
        text += "." + f"{fraction:06d}".rstrip("0")
    return text


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Unsupported("binary that is not UTF-8, as a string") from None
