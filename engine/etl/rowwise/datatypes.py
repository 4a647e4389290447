"""Spark data types read from their JSON form, and the Python values that stand for
Spark's internal values in the row evaluator.

A type comes from the JSON Spark writes (``DataType.json()``, the ``dataType`` of an
analysed plan's nodes): ``"long"``, ``"decimal(10,2)"``, ``{"type": "struct", ...}``.
Types the evaluator does not implement (intervals, collations, variant, char/varchar,
time, user-defined types) raise :class:`Unsupported`.

Values, as Spark holds them internally (None is NULL everywhere):

==========================  ================================================
type                        value
==========================  ================================================
boolean                     bool
byte, short, integer, long  int (in the type's range)
float                       float (a value a 32-bit float holds exactly)
double                      float (finite: NaN and infinities are refused)
decimal(p, s)               decimal.Decimal with exponent ``-s``, never -0
string                      str (no lone surrogates)
binary                      bytes
date                        int: days since 1970-01-01
timestamp, timestamp_ntz    int: microseconds since 1970-01-01 (UTC for timestamp)
struct                      tuple, in field order
array                       list
map                         dict (insertion order, as Spark keeps entries)
void                        None
==========================  ================================================
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from engine.etl.rowwise.unsupported import Unsupported

#: The atomic types the evaluator implements, by their JSON name.
ATOMIC_NAMES = frozenset(
    {
        "boolean", "byte", "short", "integer", "long", "float", "double", "string",
        "binary", "date", "timestamp", "timestamp_ntz", "void",
    }
)  # fmt: skip
INTEGRAL_NAMES = frozenset({"byte", "short", "integer", "long"})
#: The range of each integral type.
INTEGRAL_RANGE = {
    "byte": (-(2**7), 2**7 - 1),
    "short": (-(2**15), 2**15 - 1),
    "integer": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}
MAX_PRECISION = 38


class DataType:
    """A Spark type (one of the subclasses)."""

    def same_shape(self, other: DataType) -> bool:
        """Equal, nullability aside (Spark's ``sameType``)."""
        return self == other


@dataclass(frozen=True)
class Atomic(DataType):
    """A type without parameters: ``long``, ``string``, ``timestamp`` ..."""

    name: str

    @property
    def integral(self) -> bool:
        return self.name in INTEGRAL_NAMES

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class DecimalType(DataType):
    precision: int
    scale: int

    def __str__(self) -> str:
        return f"decimal({self.precision},{self.scale})"


@dataclass(frozen=True)
class Field:
    name: str
    type: DataType
    nullable: bool = True


@dataclass(frozen=True)
class StructType(DataType):
    fields: tuple[Field, ...]

    def same_shape(self, other: DataType) -> bool:
        return (
            isinstance(other, StructType)
            and len(self.fields) == len(other.fields)
            and all(
                a.name == b.name and a.type.same_shape(b.type)
                for a, b in zip(self.fields, other.fields, strict=True)
            )
        )

    def __str__(self) -> str:
        return "struct<" + ",".join(f"{f.name}:{f.type}" for f in self.fields) + ">"


@dataclass(frozen=True)
class ArrayType(DataType):
    element: DataType
    contains_null: bool = True

    def same_shape(self, other: DataType) -> bool:
        return isinstance(other, ArrayType) and self.element.same_shape(other.element)

    def __str__(self) -> str:
        return f"array<{self.element}>"


@dataclass(frozen=True)
class MapType(DataType):
    key: DataType
    value: DataType
    value_contains_null: bool = True

    def same_shape(self, other: DataType) -> bool:
        return (
            isinstance(other, MapType)
            and self.key.same_shape(other.key)
            and self.value.same_shape(other.value)
        )

    def __str__(self) -> str:
        return f"map<{self.key},{self.value}>"


BOOLEAN = Atomic("boolean")
INTEGER = Atomic("integer")
LONG = Atomic("long")
DOUBLE = Atomic("double")
FLOAT = Atomic("float")
STRING = Atomic("string")
BINARY = Atomic("binary")
DATE = Atomic("date")
TIMESTAMP = Atomic("timestamp")
VOID = Atomic("void")

_DECIMAL = re.compile(r"^decimal\((\d+),\s*(-?\d+)\)$")


def parse_type(value: Any) -> DataType:
    """The type of Spark's JSON form (text or already parsed)."""
    if isinstance(value, str) and value[:1] in ("{", '"'):
        value = json.loads(value)
    if isinstance(value, str):
        return _named(value)
    if isinstance(value, dict):
        kind = value.get("type")
        if kind == "struct":
            return StructType(
                tuple(
                    Field(f["name"], parse_type(f["type"]), bool(f.get("nullable", True)))
                    for f in value["fields"]
                )
            )
        if kind == "array":
            return ArrayType(parse_type(value["elementType"]), bool(value.get("containsNull", True)))
        if kind == "map":
            return MapType(
                parse_type(value["keyType"]),
                parse_type(value["valueType"]),
                bool(value.get("valueContainsNull", True)),
            )
        if kind == "udt":
            raise Unsupported("a user-defined type")
    raise Unsupported(f"the type {json.dumps(value)[:80]}")


@lru_cache(maxsize=256)
def _named(name: str) -> DataType:
    if name in ATOMIC_NAMES:
        return Atomic(name)
    if name == "null":
        return VOID
    match = _DECIMAL.match(name)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if not 0 <= scale <= precision <= MAX_PRECISION or precision == 0:
            raise Unsupported(f"the type {name}")
        return DecimalType(precision, scale)
    raise Unsupported(f"the type {name}")


def is_integral(data_type: DataType) -> bool:
    return isinstance(data_type, Atomic) and data_type.name in INTEGRAL_NAMES


def is_numeric(data_type: DataType) -> bool:
    return isinstance(data_type, DecimalType) or (
        isinstance(data_type, Atomic)
        and data_type.name in (*INTEGRAL_NAMES, "float", "double")
    )


def is_atomic(data_type: DataType, *names: str) -> bool:
    return isinstance(data_type, Atomic) and data_type.name in names
