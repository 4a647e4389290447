"""Record schemas for Spark types: Avro, Kafka Connect JSON and Arrow.

to-kafka delivers staging records whose keys and values are JSON text of a known Spark
type (recorded in the pool's metadata, or the schema of a shaper's result). These
functions give the schema a consumer sees for that type, and the JSON conventions the
text follows (Spark ``to_json`` and zync's decoders, see :mod:`engine.kafka.codecs.formats`):

==============================  =============================  ==========================
Spark                           Avro                           Kafka Connect
==============================  =============================  ==========================
StructType                      record (named by its path)     struct
ArrayType / MapType             array / map                    array / map (string keys)
StringType                      string                         string
BooleanType                     boolean                        boolean
Byte/Short/IntegerType          int                            int8 / int16 / int32
LongType                        long                           int64
FloatType / DoubleType          float / double                 float / double
DecimalType(p, s)               bytes, logicalType decimal     bytes, Connect Decimal
BinaryType                      bytes (JSON: base64 text)      bytes (base64 text)
DateType                        int, logicalType date          string (the JSON text's
TimestampType(_NTZ)             long, timestamp-micros         ISO form, kept as is)
NullType                        null                           string (optional)
==============================  =============================  ==========================

Nullable fields, array elements and map values become ``["null", T]`` unions (default
null) in Avro and ``optional`` in Connect; the top level of a key or value is never a
union (a null value is a Kafka tombstone, not an Avro null).

pyspark and pyarrow are imported inside the functions (they are heavy): importing this
module stays cheap.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from engine.kafka.codecs.connect_json import DECIMAL_NAME

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType

_AVRO_NAME = re.compile(r"[^A-Za-z0-9_]")


def avro_name(text: str) -> str:
    """``text`` as a valid Avro name (invalid characters become ``_``)."""
    name = _AVRO_NAME.sub("_", text) or "_"
    return name if not name[0].isdigit() else f"_{name}"


# --------------------------------------------------------------------------------------
# Avro


def spark_to_avro(data_type: DataType, name: str, namespace: str | None = None) -> Any:
    """The Avro schema (JSON data) of values of ``data_type``; records are named
    ``name`` and, nested, ``<name>_<field>`` (made valid Avro names)."""
    schema = _avro(data_type, avro_name(name), set())
    if namespace and isinstance(schema, dict) and schema.get("type") == "record":
        schema = {**schema, "namespace": namespace}
    return schema


def _nullable(schema: Any, nullable: bool) -> Any:
    if not nullable or schema == "null":
        return schema
    return ["null", schema]


def _unique(name: str, used: set[str]) -> str:
    candidate, n = name, 1
    while candidate in used:
        n += 1
        candidate = f"{name}{n}"
    used.add(candidate)
    return candidate


def _avro(data_type: DataType, name: str, used: set[str]) -> Any:
    from pyspark.sql import types as T  # deferred: pyspark

    if isinstance(data_type, T.StructType):
        record = _unique(name, used)
        fields = []
        for field in data_type.fields:
            inner = _avro(field.dataType, f"{record}_{avro_name(field.name)}", used)
            entry: dict[str, Any] = {"name": field.name, "type": _nullable(inner, field.nullable)}
            if field.nullable:
                entry["default"] = None
            fields.append(entry)
        return {"type": "record", "name": record, "fields": fields}
    if isinstance(data_type, T.ArrayType):
        items = _avro(data_type.elementType, f"{name}_item", used)
        return {"type": "array", "items": _nullable(items, data_type.containsNull)}
    if isinstance(data_type, T.MapType):
        values = _avro(data_type.valueType, f"{name}_value", used)
        return {"type": "map", "values": _nullable(values, data_type.valueContainsNull)}
    if isinstance(data_type, T.DecimalType):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": data_type.precision,
            "scale": data_type.scale,
        }
    if isinstance(data_type, T.DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(data_type, T.TimestampType | T.TimestampNTZType):
        logical = (
            "timestamp-micros"
            if isinstance(data_type, T.TimestampType)
            else "local-timestamp-micros"
        )
        return {"type": "long", "logicalType": logical}
    simple = {
        T.StringType: "string",
        T.BooleanType: "boolean",
        T.ByteType: "int",
        T.ShortType: "int",
        T.IntegerType: "int",
        T.LongType: "long",
        T.FloatType: "float",
        T.DoubleType: "double",
        T.BinaryType: "bytes",
        T.NullType: "null",
    }
    for spark_class, avro in simple.items():
        if isinstance(data_type, spark_class):
            return avro
    # VARIANT, intervals, ... : the JSON text as a string
    return "string"


# --------------------------------------------------------------------------------------
# Kafka Connect


def spark_to_connect(
    data_type: DataType, *, optional: bool = False, name: str | None = None
) -> dict[str, Any]:
    """The Kafka Connect schema (JsonConverter form) of values of ``data_type``."""
    from pyspark.sql import types as T  # deferred: pyspark

    schema: dict[str, Any]
    if isinstance(data_type, T.StructType):
        fields = []
        for field in data_type.fields:
            inner = spark_to_connect(field.dataType, optional=field.nullable)
            fields.append({**inner, "field": field.name})
        schema = {"type": "struct", "fields": fields}
        if name:
            schema["name"] = name
    elif isinstance(data_type, T.ArrayType):
        schema = {
            "type": "array",
            "items": spark_to_connect(data_type.elementType, optional=data_type.containsNull),
        }
    elif isinstance(data_type, T.MapType):
        schema = {
            "type": "map",
            "keys": {"type": "string", "optional": False},
            "values": spark_to_connect(data_type.valueType, optional=data_type.valueContainsNull),
        }
    elif isinstance(data_type, T.DecimalType):
        schema = {
            "type": "bytes",
            "name": DECIMAL_NAME,
            "version": 1,
            "parameters": {
                "scale": str(data_type.scale),
                "connect.decimal.precision": str(data_type.precision),
            },
        }
    else:
        simple = {
            T.BooleanType: "boolean",
            T.ByteType: "int8",
            T.ShortType: "int16",
            T.IntegerType: "int32",
            T.LongType: "int64",
            T.FloatType: "float",
            T.DoubleType: "double",
            T.BinaryType: "bytes",
        }
        kind = next((k for c, k in simple.items() if isinstance(data_type, c)), "string")
        if isinstance(data_type, T.NullType):
            optional = True
        schema = {"type": kind}
    schema["optional"] = optional
    return schema


# --------------------------------------------------------------------------------------
# Arrow (fast batch encoding)


def spark_to_arrow(data_type: DataType) -> pa.DataType | None:
    """The Arrow type Arrow's JSON reader parses this type's JSON text into, exactly as
    Avro needs it, or None when it cannot (decimals, dates, timestamps, binary, maps)."""
    # deferred: pyarrow and pyspark
    import pyarrow as pa
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        fields = []
        for field in data_type.fields:
            inner = spark_to_arrow(field.dataType)
            if inner is None:
                return None
            fields.append(pa.field(field.name, inner))
        return pa.struct(fields) if fields else None
    if isinstance(data_type, T.ArrayType):
        inner = spark_to_arrow(data_type.elementType)
        return None if inner is None else pa.list_(inner)
    simple = {
        T.StringType: pa.string(),
        T.BooleanType: pa.bool_(),
        T.IntegerType: pa.int32(),
        T.LongType: pa.int64(),
        T.FloatType: pa.float32(),
        T.DoubleType: pa.float64(),
    }
    for spark_class, arrow in simple.items():
        if type(data_type) is spark_class:
            return arrow
    return None


def avro_shape(schema: Any) -> Any:
    """``schema`` without names, namespaces, defaults and docs: two schemas with the same
    shape have the same binary encoding."""
    if isinstance(schema, list):
        return [avro_shape(s) for s in schema]
    if isinstance(schema, str):
        return schema
    t = schema.get("type")
    if t == "record":
        return (
            "record",
            tuple((f["name"], _freeze(avro_shape(f["type"]))) for f in schema["fields"]),
        )
    if t == "array":
        return ("array", _freeze(avro_shape(schema["items"])))
    if t == "map":
        return ("map", _freeze(avro_shape(schema["values"])))
    if isinstance(t, dict | list):
        return avro_shape(t)
    if schema.get("logicalType"):
        return (t, schema.get("logicalType"), schema.get("precision"), schema.get("scale"))
    return t


def _freeze(value: Any) -> Any:
    return tuple(_freeze(v) for v in value) if isinstance(value, list) else value


def avro_fingerprint(schema: Any) -> str:
    """A short fingerprint of ``schema``'s :func:`avro_shape`: equal fingerprints, equal
    binary encodings. The ETL stores it beside the Avro bodies it writes; to-kafka
    ships those bodies only under a registered schema with the same fingerprint."""
    return hashlib.sha256(repr(avro_shape(schema)).encode()).hexdigest()[:16]


def spark_writes_avro(data_type: DataType) -> bool:
    """Whether Spark's ``to_avro`` writes values of ``data_type`` with the schema
    :func:`spark_to_avro` gives, byte for byte as zync's encoders would
    (tests/integration/test_staged_avro.py checks each kind). Not: timestamps (the
    ETL's JSON text has them to the millisecond, Spark's ``to_json`` format, while
    ``to_avro`` keeps the microseconds), NullType, map keys other than strings, and the
    types :func:`spark_to_avro` turns into strings (VARIANT, intervals, CHAR/VARCHAR)."""
    from pyspark.sql import types as T  # deferred: pyspark

    if isinstance(data_type, T.StructType):
        return all(spark_writes_avro(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return spark_writes_avro(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return isinstance(data_type.keyType, T.StringType) and spark_writes_avro(
            data_type.valueType
        )
    if isinstance(data_type, T.StringType):
        return type(data_type) is T.StringType
    return isinstance(data_type, _leaves())


def _leaves() -> tuple[type, ...]:
    from pyspark.sql import types as T  # deferred: pyspark

    return (
        T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType,
        T.DoubleType, T.BinaryType, T.DecimalType, T.DateType,
    )  # fmt: skip
