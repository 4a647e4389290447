"""JSON text read into values exactly as Spark reads it where a pool's text is typed
(:func:`engine.etl.typed_records.parse_json_sql`): ``from_json(text, type,
map('mode', 'PERMISSIVE'))`` for structs, arrays and maps, and for a scalar
``get_json_object('{"v":' || text || '}', '$.v')`` cast to the type.

The texts come from zync's own from-kafka (JSON written from decoded Avro, Kafka Connect
JSON or JSON), so the common shapes are what matters; wherever Spark's result is not
certain the reader raises :class:`Unsupported` instead of guessing:

* text that is not strict JSON (Spark's parser is more lenient: single quotes, ``NaN``,
  text after the value), a duplicate key, a lone surrogate, a top-level value of
  another shape than the type's (Spark makes a row of NULLs or a one-element array);
* a token of the wrong kind for its field (Spark makes the field, or the record, NULL,
  depending on settings): a string or a fraction for an integer, a string for a number
  (Spark reads ``"NaN"`` and such), a number out of its type's range or beyond the
  double range, a decimal with more digits than its precision allows;
* a float whose decimal lies halfway between two 32-bit floats (Jackson may round it
  once or twice);
* types zync's own type mapping never makes (dates, timestamps, binary, void fields
  holding values, maps keyed by anything but strings).

A struct field missing from the object is NULL, keys the type lacks are skipped, field
names match exactly. A string field holding another kind of token gets the token's JSON
as Jackson writes it again (``1.50`` → ``1.5``, ``1e5`` → ``100000.0``).
"""

from __future__ import annotations

import decimal
import json
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from engine.etl.rowwise.datatypes import (
    INTEGRAL_RANGE,
    ArrayType,
    Atomic,
    DataType,
    DecimalType,
    MapType,
    StructType,
)
from engine.etl.rowwise.java_numbers import double_text, is_float32_midpoint, to_float32
from engine.etl.rowwise.json_write import json_string
from engine.etl.rowwise.unsupported import Unsupported

Reader = Callable[[Any], Any]

_SURROGATE = re.compile("[\ud800-\udfff]")
_DECIMAL_TEXT = re.compile(r"^-?\d+(\.\d+)?$")
#: Numbers longer than this are refused (Jackson limits a number's length).
_MAX_NUMBER_DIGITS = 300
#: Enough digits for any decimal Spark holds, and rounding as Spark rounds.
DECIMAL_CONTEXT = decimal.Context(prec=120, rounding=decimal.ROUND_HALF_UP)


class _FloatToken(str):
    """A JSON number with a fraction or an exponent, kept as its text."""

    __slots__ = ()


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise Unsupported("a JSON object with a duplicate key")
    return found


def _constant(name: str) -> Any:
    raise Unsupported(f"the JSON token {name}")


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object, parse_float=_FloatToken, parse_constant=_constant
)


def decode(text: str) -> Any:
    """Strict JSON (objects as dicts, fractions as their text); Unsupported otherwise."""
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError):
        raise Unsupported("text that is not strict JSON") from None


def parse_json(text: str | None, data_type: DataType) -> Any:
    """The value Spark reads from ``text`` as ``data_type`` (None for NULL text)."""
    if text is None:
        return None
    return reader(data_type)(text)


def reader(data_type: DataType) -> Callable[[str], Any]:
    """The function :func:`parse_json` applies for ``data_type`` (built once per type;
    Unsupported for a type it cannot read exactly)."""
    return _reader(data_type)


@lru_cache(maxsize=512)
def _reader(data_type: DataType) -> Callable[[str], Any]:
    if isinstance(data_type, StructType | MapType):
        convert = _converter(data_type)

        def read_object(text: str) -> Any:
            value = decode(text)
            if type(value) is not dict:
                raise Unsupported("a JSON text that is not an object, for a struct or map")
            return convert(value)

        return read_object
    if isinstance(data_type, ArrayType):
        convert = _converter(data_type)

        def read_array(text: str) -> Any:
            value = decode(text)
            if type(value) is not list:
                raise Unsupported("a JSON text that is not an array, for an array")
            return convert(value)

        return read_array
    scalar = _scalar(data_type)
    return lambda text: scalar(decode(text))


# --------------------------------------------------------------------------- fields


@lru_cache(maxsize=1024)
def _converter(data_type: DataType) -> Reader:
    """from_json's conversion of one parsed JSON value (None stays None)."""
    if isinstance(data_type, StructType):
        return _struct(data_type)
    if isinstance(data_type, ArrayType):
        element = _converter(data_type.element)

        def array(value: Any) -> Any:
            if value is None:
                return None
            if type(value) is not list:
                raise Unsupported(f"a JSON {_kind(value)} for an array")
            return [element(item) for item in value]

        return array
    if isinstance(data_type, MapType):
        if data_type.key != Atomic("string"):
            raise Unsupported(f"reading maps keyed by {data_type.key} from JSON")
        item = _converter(data_type.value)

        def map_(value: Any) -> Any:
            if value is None:
                return None
            if type(value) is not dict:
                raise Unsupported(f"a JSON {_kind(value)} for a map")
            return {_checked_string(k): item(v) for k, v in value.items()}

        return map_
    if isinstance(data_type, DecimalType):
        return _decimal(data_type, fractions=True)
    if isinstance(data_type, Atomic):
        return _atomic(data_type.name)
    raise Unsupported(f"reading {data_type} from JSON")  # pragma: no cover


def _struct(data_type: StructType) -> Reader:
    fields = [(f.name, _converter(f.type)) for f in data_type.fields]

    def struct(value: Any) -> Any:
        if value is None:
            return None
        if type(value) is not dict:
            raise Unsupported(f"a JSON {_kind(value)} for a struct")
        get = value.get
        return tuple([convert(get(name)) for name, convert in fields])

    return struct


def _atomic(name: str) -> Reader:
    if name in INTEGRAL_RANGE:
        low, high = INTEGRAL_RANGE[name]

        def integral(value: Any) -> Any:
            if value is None:
                return None
            if type(value) is not int or not low <= value <= high:
                raise Unsupported(f"the JSON {_kind(value)} {_show(value)} for a {name}")
            return value

        return integral
    if name == "boolean":

        def boolean(value: Any) -> Any:
            if value is None or type(value) is bool:
                return value
            raise Unsupported(f"the JSON {_kind(value)} {_show(value)} for a boolean")

        return boolean
    if name == "double":
        return _double
    if name == "float":
        return _float
    if name == "string":
        return _string
    if name == "void":

        def void(value: Any) -> Any:
            if value is not None:
                raise Unsupported("a JSON value for a field of type void")
            return None

        return void
    raise Unsupported(f"reading {name} from JSON")


def _double(value: Any) -> Any:
    if value is None:
        return None
    kind = type(value)
    if kind is _FloatToken:
        if len(value) > _MAX_NUMBER_DIGITS:
            raise Unsupported("a JSON number too long")
        number = float(value)
    elif kind is int and -(10**_MAX_NUMBER_DIGITS) < value < 10**_MAX_NUMBER_DIGITS:
        try:
            number = float(value)
        except OverflowError:
            raise Unsupported("a JSON integer beyond the double range") from None
    else:
        raise Unsupported(f"the JSON {_kind(value)} {_show(value)} for a double")
    if number in (float("inf"), float("-inf")):
        raise Unsupported("a JSON number beyond the double range")
    return number


def _float(value: Any) -> Any:
    if value is None:
        return None
    kind = type(value)
    if kind is int and -(2**53) <= value <= 2**53:
        return to_float32(float(value))
    if kind is not _FloatToken:
        raise Unsupported(f"the JSON {_kind(value)} {_show(value)} for a float")
    number = _double(value)
    if is_float32_midpoint(number):
        raise Unsupported(f"the JSON number {value} (halfway between two floats)")
    return to_float32(number)


def _checked_string(text: str) -> str:
    if not text.isascii() and _SURROGATE.search(text):
        raise Unsupported("a JSON string with a lone surrogate")
    return text


def _string(value: Any) -> Any:
    """A string field: a string token's text; another token's JSON as Jackson writes
    it again."""
    if value is None:
        return None
    if type(value) is str:
        return _checked_string(value)
    return _rewritten(value)


def _rewritten(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return json_string(_checked_string(value))
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        if not -(10**_MAX_NUMBER_DIGITS) < value < 10**_MAX_NUMBER_DIGITS:
            raise Unsupported("a JSON number too long")
        return str(value)
    if kind is _FloatToken:
        return double_text(_double(value))
    if value is None:
        return "null"
    if kind is list:
        return "[" + ",".join([_rewritten(item) for item in value]) + "]"
    if kind is dict:
        return (
            "{"
            + ",".join(
                [json_string(_checked_string(k)) + ":" + _rewritten(v) for k, v in value.items()]
            )
            + "}"
        )
    raise Unsupported(f"the JSON value {value!r}")  # pragma: no cover


def _decimal(data_type: DecimalType, *, fractions: bool) -> Reader:
    """A decimal from a number token or a string holding a plain decimal. ``fractions``:
    whether a number with a fraction or exponent is read as its text (from_json reads
    it exactly; get_json_object writes it again as a double first, so a scalar refuses
    it)."""
    quantum = decimal.Decimal(1).scaleb(-data_type.scale)
    precision = data_type.precision

    def read_decimal(value: Any) -> Any:
        if value is None:
            return None
        kind = type(value)
        if kind is int or (kind is _FloatToken and fractions):
            text = str(value)
        elif kind is str and _DECIMAL_TEXT.match(value):
            text = value
        else:
            raise Unsupported(f"the JSON {_kind(value)} {_show(value)} for a {data_type}")
        if len(text) > _MAX_NUMBER_DIGITS:
            raise Unsupported("a JSON number too long")
        return fit_decimal(decimal.Decimal(text), quantum, precision)

    return read_decimal


def fit_decimal(value: decimal.Decimal, quantum: decimal.Decimal, precision: int) -> decimal.Decimal:
    """``value`` at the scale of ``quantum`` (rounded half up, as Spark's
    ``Decimal.set`` and ``changePrecision``), never -0; Unsupported when it needs more
    than ``precision`` digits (Spark raises or gives NULL)."""
    scale = -quantum.adjusted()
    if not value.is_zero() and value.adjusted() + 1 > precision - scale:
        # more integer digits than the type holds (rounding never removes one)
        raise Unsupported(f"{value} needs more than {precision} digits")
    try:
        fitted = value.quantize(quantum, context=DECIMAL_CONTEXT)
    except decimal.InvalidOperation:
        raise Unsupported(f"{value} needs more than {precision} digits") from None
    if fitted.is_zero():
        fitted = fitted.copy_abs()
    digits = len(fitted.as_tuple().digits)
    if digits > precision:
        raise Unsupported(f"{fitted} needs more than {precision} digits")
    return fitted


def _scalar(data_type: DataType) -> Reader:
    """get_json_object of ``{"v": text}`` cast to a scalar type: the token's text (a
    string token's content, another token's JSON written again) read by the cast."""
    if isinstance(data_type, DecimalType):
        return _decimal(data_type, fractions=False)
    if not isinstance(data_type, Atomic):
        raise Unsupported(f"reading {data_type} from JSON")  # pragma: no cover
    name = data_type.name
    if name == "string":
        return _string
    if name in INTEGRAL_RANGE or name in ("boolean", "double", "float"):
        # the cast of the token's text gives the token's value where the token is of
        # the type's own kind; anything else (a string "12", a fraction for an
        # integer) goes through Spark's string casts and is refused here
        return _atomic(name)
    raise Unsupported(f"reading {name} from JSON")


def _kind(value: Any) -> str:
    kind = type(value)
    if kind is _FloatToken or kind is int:
        return "number"
    if kind is bool:
        return "boolean"
    if kind is str:
        return "string"
    if kind is dict:
        return "object"
    if kind is list:
        return "array"
    return "null" if value is None else kind.__name__


def _show(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 24 else text[:21] + "..."
