"""Spark data types as zync records, widens and reads them, with nothing of Kafka in them.

Pools keep each topic's key and value type as the JSON of a Spark ``DataType`` and widen
it as new schema versions arrive; the ETL merges the types of the rules writing one
output; Kafka's type mapping merges the types of a topic's schema versions. All of them
use :func:`merge_spark_types` and the helpers here. :func:`parse_json_column` reads the
JSON text a pool holds as a column of such a type.

pyspark is imported inside the functions (it is heavy): importing this module stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructField

#: The largest precision of a Spark DecimalType.
MAX_DECIMAL_PRECISION = 38


def load_type(text: str | None) -> DataType | None:
    """The Spark type whose JSON is ``text`` (None for no text)."""
    if not text:
        return None
    from pyspark.sql.types import _parse_datatype_json_string  # deferred: pyspark

    return _parse_datatype_json_string(text)


def readable(data_type: DataType) -> DataType:
    """``data_type`` as a reader parses it: NullType (a field never seen with a value
    yet, which a pool records so that a later value gives its type) read as its JSON
    text, StringType, everywhere in the type."""
    from pyspark.sql import types as T  # deferred: pyspark

    if isinstance(data_type, T.NullType):
        return T.StringType()
    if isinstance(data_type, T.StructType):
        return T.StructType(
            [T.StructField(f.name, readable(f.dataType), f.nullable, f.metadata) for f in data_type.fields]
        )
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(readable(data_type.elementType), data_type.containsNull)
    if isinstance(data_type, T.MapType):
        return T.MapType(data_type.keyType, readable(data_type.valueType), data_type.valueContainsNull)
    return data_type


def merge_optional(a: DataType | None, b: DataType | None) -> DataType | None:
    """:func:`merge_spark_types` where None (no type known) yields to the other side."""
    if a is None:
        return b
    if b is None:
        return a
    return merge_spark_types(a, b)


def merge_type_json(old: str | None, new: str | None) -> str | None:
    """The JSON of the merge of two types given as JSON (None: no type known)."""
    if new is None:
        return old
    if old is None or old == new:
        return new
    merged = merge_optional(load_type(old), load_type(new))
    assert merged is not None
    return merged.json()


def parse_json_column(column: Column, data_type: DataType | None) -> Column:
    """Parse a JSON text column into ``data_type`` (structs, arrays, maps and scalars).

    Without a known type the JSON text is kept as a string.
    """
    from pyspark.sql import functions as F  # deferred: pyspark
    from pyspark.sql.types import ArrayType, MapType, StringType, StructType  # deferred: pyspark

    if data_type is None:
        return column
    if isinstance(data_type, StructType | ArrayType | MapType):
        # pyspark's annotation leaves MapType out; from_json takes it
        return F.from_json(column, data_type, {"mode": "PERMISSIVE"})  # type: ignore[arg-type]
    if isinstance(data_type, StringType):
        return F.get_json_object(F.concat(F.lit('{"v":'), column, F.lit("}")), "$.v")
    return F.get_json_object(F.concat(F.lit('{"v":'), column, F.lit("}")), "$.v").cast(data_type)


_INTEGRAL_ORDER = ("ByteType", "ShortType", "IntegerType", "LongType")


def merge_spark_types(a: DataType, b: DataType) -> DataType:
    """A type both ``a`` and ``b`` values parse into (e.g. two schema versions).

    Structs: union of fields (``a``'s order, then ``b``'s new fields; all nullable where
    either is, and fields missing on one side become nullable). Arrays and maps merge
    their elements. Integral types widen to the larger; integral with float/double
    gives DoubleType; decimals widen to cover both. NullType yields to the other type.
    Any other conflict gives StringType, whose ``from_json`` value is the JSON text.
    """
    from pyspark.sql import types as T  # deferred: pyspark

    if a == b:
        return a
    if isinstance(a, T.NullType):
        return b
    if isinstance(b, T.NullType):
        return a
    if isinstance(a, T.StructType) and isinstance(b, T.StructType):
        b_fields = {f.name: f for f in b.fields}
        merged: list[StructField] = []
        for f in a.fields:
            other = b_fields.get(f.name)
            if other is None:
                merged.append(T.StructField(f.name, f.dataType, True, f.metadata))
            else:
                merged.append(
                    T.StructField(
                        f.name,
                        merge_spark_types(f.dataType, other.dataType),
                        f.nullable or other.nullable,
                        f.metadata,
                    )
                )
        a_names = {f.name for f in a.fields}
        merged.extend(
            T.StructField(f.name, f.dataType, True, f.metadata)
            for f in b.fields
            if f.name not in a_names
        )
        return T.StructType(merged)
    if isinstance(a, T.ArrayType) and isinstance(b, T.ArrayType):
        return T.ArrayType(
            merge_spark_types(a.elementType, b.elementType), a.containsNull or b.containsNull
        )
    if isinstance(a, T.MapType) and isinstance(b, T.MapType):
        return T.MapType(
            merge_spark_types(a.keyType, b.keyType),
            merge_spark_types(a.valueType, b.valueType),
            a.valueContainsNull or b.valueContainsNull,
        )
    a_name, b_name = type(a).__name__, type(b).__name__
    if a_name in _INTEGRAL_ORDER and b_name in _INTEGRAL_ORDER:
        return a if _INTEGRAL_ORDER.index(a_name) >= _INTEGRAL_ORDER.index(b_name) else b
    numeric = (*_INTEGRAL_ORDER, "FloatType", "DoubleType")
    if a_name in numeric and b_name in numeric:
        return T.DoubleType()
    if isinstance(a, T.DecimalType) and isinstance(b, T.DecimalType):
        scale = max(a.scale, b.scale)
        integral = max(a.precision - a.scale, b.precision - b.scale)
        if integral + scale <= MAX_DECIMAL_PRECISION:
            return T.DecimalType(integral + scale, scale)
        return T.StringType()
    return T.StringType()


def json_text(column: Column, data_type: DataType) -> Column:
    """JSON text of a column on the executors (NULL stays NULL: a tombstone)."""
    from pyspark.sql import functions as F  # deferred: pyspark
    from pyspark.sql import types as T  # deferred: pyspark

    if isinstance(data_type, T.NullType):
        return F.lit(None).cast("string")
    keep_nulls = {"ignoreNullFields": "false"}  # a NULL column is written as null
    if isinstance(data_type, T.StructType | T.ArrayType | T.MapType):
        return F.to_json(column, keep_nulls)
    wrapped = F.to_json(F.struct(column.alias("v")), keep_nulls)
    return F.when(column.isNull(), F.lit(None).cast("string")).otherwise(
        F.regexp_extract(wrapped, r'^\{"v":(.*)\}$', 1)
    )
