"""JSON values made Avro-ready: staged JSON texts parsed back into what fastavro writes
for a Spark type (decimals, dates, timestamps, bytes, whole numbers, nested JSON kept as
text), refusing fields the type lacks (Avro would drop them silently)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.deliver.errors import TypeMismatch

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

#: Makes one JSON value (as ``json.loads`` gives it) ready for fastavro.
Converter = Callable[[Any], Any]


def json_converter(data_type: DataType, where: str = "value") -> Converter | None:
    """A function making a JSON value of ``data_type`` Avro-ready for fastavro, or None
    when it already is. A struct value with a field the type lacks raises
    :class:`TypeMismatch` (Avro would drop it silently)."""
    from pyspark.sql import types as T  # deferred: the engine imports without pyspark

    if isinstance(data_type, T.StructType):
        convs = [
            (f.name, json_converter(f.dataType, f"{where}.{f.name}")) for f in data_type.fields
        ]
        names = [f.name for f in data_type.fields]
        known = frozenset(names)

        def record(value: Any) -> Any:
            if not isinstance(value, dict):
                return value
            if not known.issuperset(value):
                extra = sorted(set(value) - known)[0]
                raise TypeMismatch(
                    f"{where}: the staged JSON has a field {extra!r} that the type recorded "
                    "in the pool does not have, so it would be lost in Avro; the ETL must "
                    "record its output types before committing outputs"
                )
            out = {name: value.get(name) for name in names}
            for name, conv in convs:
                if conv is not None and out[name] is not None:
                    out[name] = conv(out[name])
            return out

        return record
    if isinstance(data_type, T.ArrayType):
        item = json_converter(data_type.elementType, f"{where}[]")
        if item is None:
            return None
        return lambda v: [None if x is None else item(x) for x in v] if isinstance(v, list) else v
    if isinstance(data_type, T.MapType):
        inner = json_converter(data_type.valueType, f"{where}{{}}")
        if inner is None:
            return None
        return lambda v: (
            {k: (None if x is None else inner(x)) for k, x in v.items()}
            if isinstance(v, dict)
            else v
        )
    if isinstance(data_type, T.DecimalType):
        quantum = decimal.Decimal(1).scaleb(-data_type.scale)
        return lambda v: decimal.Decimal(str(v)).quantize(quantum)
    if isinstance(data_type, T.DateType):
        return lambda v: dt.date.fromisoformat(v) if isinstance(v, str) else v
    if isinstance(data_type, T.TimestampType | T.TimestampNTZType):

        def timestamp(v: Any) -> Any:
            if not isinstance(v, str):
                return v
            parsed = dt.datetime.fromisoformat(v)
            if isinstance(data_type, T.TimestampType) and parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.UTC)
            return parsed

        return timestamp
    if isinstance(data_type, T.BinaryType):
        return lambda v: base64.b64decode(v) if isinstance(v, str) else v
    if isinstance(data_type, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return lambda v: int(v) if isinstance(v, float) and v.is_integer() else v
    if isinstance(data_type, T.StringType):
        return lambda v: v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
    return None
