"""Spark SQL types for record schemas (Avro, Kafka Connect, plain JSON samples), so SQL
sees typed structs (``value.after.ID``).

Pools store keys and values as JSON text, written by the decoders of
:mod:`engine.kafka.codecs.formats`, and SQL reads them with ``from_json(col, type)``. The
types here are the ones that JSON text parses into, so the mapping follows the JSON
form rather than the Avro/Connect type where the two differ:

==============================  ======================================================
Avro                            Spark
==============================  ======================================================
record                          StructType (field order kept)
array / map                     ArrayType / MapType(StringType, ...)
``["null", T]``                 T, nullable
union of several types          StringType: ``from_json`` keeps such a value's JSON
                                text (``5``, ``"x"``, ``{"a":1}``), to parse further
enum, string                    StringType
bytes, fixed                    StringType (base64 text; ``unbase64()`` gives binary)
decimal(p, s)                   DecimalType(p, s) for p <= 38 (the JSON holds a
                                decimal string, which ``from_json`` parses), else
                                StringType
int / long / float / double     IntegerType / LongType / FloatType / DoubleType
boolean                         BooleanType
timestamp-*, date, time-*       the underlying LongType / IntegerType (the JSON holds
                                the number; ``timestamp_millis(x)`` etc. convert)
uuid                            StringType
null (bare)                     StringType (always null)
recursive reference             StringType (the nested value's JSON text)
==============================  ======================================================

Kafka Connect: int8/int16/int32/int64 → Byte/Short/Integer/LongType, float → FloatType,
double → DoubleType, bytes → StringType (base64) or DecimalType for
``org.apache.kafka.connect.data.Decimal``, struct/array/map as above; ``optional`` →
nullable.

Types of several schema versions are merged with :func:`engine.sparktypes.merge_spark_types`.

pyspark is imported inside the functions (it is heavy): importing this module stays cheap.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from engine.kafka.codecs.connect_json import DECIMAL_NAME, schema_type
from engine.sparktypes import MAX_DECIMAL_PRECISION, merge_spark_types, readable

if TYPE_CHECKING:
    from pyspark.sql.types import DataType



def _load(schema: Any) -> Any:
    if isinstance(schema, str):
        text = schema.strip()
        if text[:1] in ("{", "[", '"'):
            return json.loads(text)
        return text  # a bare primitive or named type
    return schema


def _fullname(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def avro_to_spark(schema: Any) -> DataType:
    """The Spark type of the JSON text zync writes for values of this Avro schema.

    ``schema`` is schema JSON text or data (also fastavro-parsed data).
    """
    return _AvroWalk().type_of(_load(schema), None, frozenset())


def avro_nullable(schema: Any) -> bool:
    """Whether a value of this Avro schema can be null (a union with ``"null"``)."""
    schema = _load(schema)
    if isinstance(schema, dict):
        schema = schema.get("type")
    if isinstance(schema, list):
        return "null" in schema
    return bool(schema == "null")


_AVRO_PRIMITIVES: dict[str, DataType] = {}


def _avro_primitives() -> dict[str, DataType]:
    """The Spark type of each Avro primitive, made once (a wide schema names thousands)."""
    if not _AVRO_PRIMITIVES:
        from pyspark.sql import types as T  # deferred: pyspark

        _AVRO_PRIMITIVES.update(
            null=T.StringType(),
            boolean=T.BooleanType(),
            int=T.IntegerType(),
            long=T.LongType(),
            float=T.FloatType(),
            double=T.DoubleType(),
            bytes=T.StringType(),
            string=T.StringType(),
        )
    return _AVRO_PRIMITIVES


class _AvroWalk:
    """One schema's walk: the named types defined so far, and the type made of each
    record under a set of enclosing records (a Debezium value names its row record
    twice, ``before`` and ``after``: the second is the first's type)."""

    def __init__(self) -> None:
        self.named: dict[str, Any] = {}
        self.records: dict[tuple[str, frozenset[str]], DataType] = {}

    def type_of(self, schema: Any, namespace: str | None, active: frozenset[str]) -> DataType:
        simple = _avro_primitives().get(schema) if isinstance(schema, str) else None
        if simple is not None:  # the common case first, without the import below
            return simple
        from pyspark.sql import types as T  # deferred: pyspark

        if isinstance(schema, str):
            qualified = _fullname(schema, namespace)
            full = qualified if qualified in self.named else schema
            if full in active:
                return T.StringType()  # a recursive reference: keep the JSON text
            target = self.named.get(full)
            if target is None:
                raise ValueError(f"unknown Avro type {schema!r}")
            return self.type_of(target, namespace, active)
        if isinstance(schema, list):
            branches = [b for b in schema if b != "null"]
            if len(branches) == 1:
                return self.type_of(branches[0], namespace, active)
            if not branches:
                return T.StringType()
            for b in branches:  # register named types defined inside the union
                if isinstance(b, dict):
                    self.type_of(b, namespace, active)
            return T.StringType()
        t = schema.get("type")
        if isinstance(t, (dict, list)):
            return self.type_of(t, namespace, active)
        logical = schema.get("logicalType")
        if t in ("record", "error", "enum", "fixed"):
            ns = schema.get("namespace", namespace)
            full = _fullname(schema["name"], ns)
            self.named[full] = schema
            if "." in schema["name"]:
                ns = schema["name"].rsplit(".", 1)[0]
            if t in ("record", "error"):
                return self._record(schema, full, ns, active)
            if t == "enum":
                return T.StringType()
            # fixed
            return _decimal(schema) if logical == "decimal" else T.StringType()
        if t == "array":
            items = schema["items"]
            return T.ArrayType(self.type_of(items, namespace, active), avro_nullable(items))
        if t == "map":
            values = schema["values"]
            return T.MapType(
                T.StringType(), self.type_of(values, namespace, active), avro_nullable(values)
            )
        if t == "bytes" and logical == "decimal":
            return _decimal(schema)
        if isinstance(t, str):
            return self.type_of(t, namespace, active)
        raise ValueError(f"not an Avro schema: {json.dumps(schema)[:80]}")

    def _record(
        self, schema: dict[str, Any], full: str, ns: str | None, active: frozenset[str]
    ) -> DataType:
        from pyspark.sql import types as T  # deferred: pyspark

        made = self.records.get((full, active))
        if made is None:
            inner = active | {full}
            made = T.StructType(
                [
                    T.StructField(
                        f["name"], self.type_of(f["type"], ns, inner), avro_nullable(f["type"])
                    )
                    for f in schema["fields"]
                ]
            )
            self.records[(full, active)] = made
        return made


def _decimal(schema: dict[str, Any]) -> DataType:
    from pyspark.sql import types as T  # deferred: pyspark

    precision = schema.get("precision")
    scale = int(schema.get("scale", 0))
    if isinstance(precision, int) and 0 < precision <= MAX_DECIMAL_PRECISION and 0 <= scale <= precision:
        return T.DecimalType(precision, scale)
    return T.StringType()


# --------------------------------------------------------------------------------------
# Kafka Connect


def connect_to_spark(schema: dict[str, Any] | None) -> DataType:
    """The Spark type of a Kafka Connect schema's payloads (as zync's JSON text).

    A null schema (schemaless envelope) gives StringType: the payload's JSON text.
    """
    from pyspark.sql import types as T  # deferred: pyspark

    if schema is None:
        return T.StringType()
    t = schema_type(schema)
    if schema.get("name") == DECIMAL_NAME and t == "bytes":
        params = schema.get("parameters") or {}
        scale = int(params.get("scale", "0"))
        precision = int(params.get("connect.decimal.precision", str(MAX_DECIMAL_PRECISION)))
        if 0 < precision <= MAX_DECIMAL_PRECISION and 0 <= scale <= precision:
            return T.DecimalType(precision, scale)
        return T.StringType()
    simple = {
        "boolean": T.BooleanType(),
        "int8": T.ByteType(),
        "int16": T.ShortType(),
        "int32": T.IntegerType(),
        "int64": T.LongType(),
        "float": T.FloatType(),
        "double": T.DoubleType(),
        "bytes": T.StringType(),
        "string": T.StringType(),
    }
    if t in simple:
        return simple[t]
    if t == "array":
        items = schema["items"]
        return T.ArrayType(connect_to_spark(items), bool(items.get("optional", False)))
    if t == "map":
        values = schema["values"]
        return T.MapType(
            T.StringType(), connect_to_spark(values), bool(values.get("optional", False))
        )
    if t == "struct":
        return T.StructType(
            [
                T.StructField(f["field"], connect_to_spark(f), bool(f.get("optional", False)))
                for f in schema["fields"]
            ]
        )
    raise ValueError(f"unknown Kafka Connect type {schema.get('type')!r}")


# --------------------------------------------------------------------------------------
# plain JSON


def json_value_to_spark(values: Iterable[Any], *, unknown: str = "string") -> DataType:
    """A Spark type that every JSON value in ``values`` parses into.

    Integers → LongType, any float → DoubleType, objects → StructType (fields in
    first-seen order), arrays → ArrayType of their merged elements; a path seen with
    conflicting kinds → StringType (its JSON text). A path only ever null / empty is
    StringType too (``unknown="string"``), or NullType (``unknown="null"``): what a
    pool records for a batch, so that a later batch's values give its type — a
    Debezium ``before`` null in every create of a first batch is a row in the updates
    of the next — and readers read it as text until then (:func:`readable`).
    """
    shape: Any = _NULL
    for value in values:
        shape = _absorb(shape, value)
    result = _spark_of(shape)
    return readable(result) if unknown == "string" else result


#: The type of a JSON value as plain Python while many are merged (one Spark type is
#: made at the end): ``_NULL``; "b", "i", "f", "s" (boolean, long, double, string — and a
#: conflict, which is read as the JSON text); a dict of field → type (first-seen order);
#: ("a", element type). :func:`merge_spark_types`'s rules for what JSON gives; a topic's
#: batch of 60-column samples typed with Spark's objects and merged took ~20 ms.
_NULL = "n"


def _absorb(shape: Any, value: Any) -> Any:
    """``shape`` widened to take ``value`` too (a dict shape is extended in place)."""
    if value is None:
        return shape
    if isinstance(value, dict):
        if shape == _NULL:
            shape = {}
        elif not isinstance(shape, dict):
            return "s"
        for key, item in value.items():
            name = str(key)
            shape[name] = _absorb(shape.get(name, _NULL), item)
        return shape
    if isinstance(value, (list, tuple)):
        if shape == _NULL:
            element: Any = _NULL
        elif isinstance(shape, tuple):
            element = shape[1]
        else:
            return "s"
        for item in value:
            element = _absorb(element, item)
        return ("a", element)
    kind = "b" if isinstance(value, bool) else "i" if isinstance(value, int) else "f" if isinstance(value, float) else "s"
    if shape in (_NULL, kind):
        return kind
    return "f" if isinstance(shape, str) and {shape, kind} == {"i", "f"} else "s"


def _spark_of(shape: Any) -> DataType:
    from pyspark.sql import types as T  # deferred: pyspark

    if isinstance(shape, dict):
        return T.StructType([T.StructField(name, _spark_of(item), True) for name, item in shape.items()])
    if isinstance(shape, tuple):
        return T.ArrayType(_spark_of(shape[1]), True)
    return {_NULL: T.NullType, "b": T.BooleanType, "i": T.LongType, "f": T.DoubleType}.get(shape, T.StringType)()


def fill_null_fields(data_type: DataType, values: Iterable[Any]) -> DataType:
    """``data_type`` (inferred from a sample of ``values``) with each path it has as
    NullType — null in every sampled value — typed by the values that are not null
    there, in all of ``values``: a batch's type is inferred from a sample, and a field
    null in the sample but not in an unsampled record would otherwise read as NULL."""
    from pyspark.sql import types as T  # deferred: pyspark

    values = [v for v in values if v is not None]
    if isinstance(data_type, T.NullType):
        return json_value_to_spark(values, unknown="null") if values else data_type
    if isinstance(data_type, T.StructType):
        fields = []
        for f in data_type.fields:
            if has_null_fields(f.dataType):
                inner = [v.get(f.name) for v in values if isinstance(v, dict)]
                fields.append(T.StructField(f.name, fill_null_fields(f.dataType, inner), f.nullable, f.metadata))
            else:
                fields.append(f)
        return T.StructType(fields)
    if isinstance(data_type, T.ArrayType) and has_null_fields(data_type.elementType):
        items = [item for v in values if isinstance(v, list) for item in v]
        return T.ArrayType(fill_null_fields(data_type.elementType, items), data_type.containsNull)
    return data_type


def has_null_fields(data_type: DataType) -> bool:
    """Whether ``data_type`` has a NullType anywhere (a path never seen with a value)."""
    from pyspark.sql import types as T  # deferred: pyspark

    if isinstance(data_type, T.NullType):
        return True
    if isinstance(data_type, T.StructType):
        return any(has_null_fields(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return has_null_fields(data_type.elementType)
    return False


def _json_type(value: Any) -> DataType:
    from pyspark.sql import types as T  # deferred: pyspark

    if value is None:
        return T.NullType()
    if isinstance(value, bool):
        return T.BooleanType()
    if isinstance(value, int):
        return T.LongType()
    if isinstance(value, float):
        return T.DoubleType()
    if isinstance(value, str):
        return T.StringType()
    if isinstance(value, dict):
        return T.StructType([T.StructField(str(k), _json_type(v), True) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        element: DataType = T.NullType()
        for item in value:
            element = merge_spark_types(element, _json_type(item))
        return T.ArrayType(element, True)
    return T.StringType()


