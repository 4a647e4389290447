"""A table's columns, from the Spark type an output's values have (docs/design.md#tables).

A table has a column per field of the output's value struct, of the field's type as
Arrow and Delta store it (:func:`stored_type`: a field no rule gave a type yet, NULL, is
left out until one does; types Delta does not store — intervals, VARIANT — are kept as
their JSON text), and a history table the columns of :data:`HISTORY_FIELDS`. The keys
are fields of that struct, scalar, and never change type: :func:`key_problem` and
:func:`key_type_change` say so in one line naming the table, the output and the key.

pyspark is imported inside the functions (its types only: no JVM starts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructField

#: The columns a history table adds: validity as the staging commit's time and version.
HISTORY_FIELDS = (
    pa.field("valid_from", pa.timestamp("us", tz="UTC")),
    pa.field("valid_to", pa.timestamp("us", tz="UTC")),
    pa.field("valid_from_version", pa.int64()),
    pa.field("valid_to_version", pa.int64()),
    pa.field("is_current", pa.bool_()),
)
HISTORY_COLUMNS = tuple(f.name for f in HISTORY_FIELDS)
#: Characters a Delta column name cannot hold without column mapping.
_BAD_NAME = set(" ,;{}()\n\t=")


def stored_type(data_type: DataType) -> DataType | None:
    """The type a table stores values of ``data_type`` as: the same, but NULL-typed
    fields left out (None for NULL itself) and types Delta has no column for (intervals,
    VARIANT, CHAR/VARCHAR) as strings (their JSON text)."""
    from pyspark.sql import types as T  # deferred: pyspark

    if isinstance(data_type, T.NullType):
        return None
    if isinstance(data_type, T.StructType):
        fields = []
        for field in data_type.fields:
            inner = stored_type(field.dataType)
            if inner is not None:
                fields.append(T.StructField(field.name, inner, True))
        return T.StructType(fields) if fields else None
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(stored_type(data_type.elementType) or T.StringType(), True)
    if isinstance(data_type, T.MapType):
        key = stored_type(data_type.keyType) or T.StringType()
        return T.MapType(key, stored_type(data_type.valueType) or T.StringType(), True)
    atomic = (
        T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType,
        T.DoubleType, T.DecimalType, T.StringType, T.BinaryType, T.DateType,
        T.TimestampType, T.TimestampNTZType,
    )
    if isinstance(data_type, atomic) and not isinstance(data_type, T.CharType | T.VarcharType):
        return data_type
    return T.StringType()


def value_fields(value_type: DataType | None) -> list[StructField]:
    """The stored fields of an output's value struct (none when it is not a struct)."""
    from pyspark.sql import types as T  # deferred: pyspark

    stored = stored_type(value_type) if value_type is not None else None
    return list(stored.fields) if isinstance(stored, T.StructType) else []


def arrow_type(data_type: DataType) -> pa.DataType:
    """A stored Spark type as Arrow (timestamps in UTC, as Delta keeps them)."""
    # deferred: pyspark
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(data_type, timezone="UTC")


def table_schema(fields: Sequence[StructField], *, history: bool) -> pa.Schema:
    """The Arrow schema of a table with these value fields."""
    columns = [pa.field(f.name, arrow_type(f.dataType), nullable=True) for f in fields]
    return pa.schema([*columns, *(HISTORY_FIELDS if history else ())])


def name_problem(table: str, source: str, fields: Sequence[StructField], history: bool) -> str | None:
    """Why these fields cannot be a table's columns (a name Delta refuses, a history
    column's name); None when they can."""
    for field in fields:
        if _BAD_NAME & set(field.name):
            return (
                f"table {table!r}: output {source!r} has a field {field.name!r}, and a Delta "
                "column name cannot hold spaces or any of ,;{}()=: rename it in the rule"
            )
        if history and field.name in HISTORY_COLUMNS:
            return (
                f"table {table!r}: output {source!r} has a field {field.name!r}, a column a "
                "history table adds: rename it in the rule"
            )
    return None


def key_problem(
    table: str,
    source: str,
    keys: Sequence[str],
    value_type: DataType | None,
    *,
    where: str = "",
) -> str | None:
    """Why ``keys`` cannot identify rows of values of ``value_type`` (a key missing
    from the struct, or not a scalar); None when they can. ``where`` names the rule."""
    from pyspark.sql import types as T  # deferred: pyspark

    if value_type is None or isinstance(value_type, T.NullType):
        return None  # tombstones: their keys come from the records' keys
    head = f"table {table!r}: output {source!r}{where}"
    if not isinstance(value_type, T.StructType):
        return f"{head}: its values are {value_type.simpleString()}, a table needs a struct"
    names = value_type.fieldNames()
    for key in keys:
        if key not in names:
            return (
                f"{head}: key {key!r} is not a field of its value "
                f"(fields: {', '.join(names) or 'none'})"
            )
        found = value_type[key].dataType
        if isinstance(found, T.StructType | T.ArrayType | T.MapType | T.NullType):
            return f"{head}: key {key!r} is {found.simpleString()}, a key must be a scalar"
    return None


def key_type_change(
    table: str, source: str, keys: Sequence[str], have: pa.Schema, fields: Sequence[StructField]
) -> str | None:
    """Why the output's keys no longer fit the table (a key whose type changed); None
    when they do."""
    wanted = {f.name: arrow_type(f.dataType) for f in fields}
    for key in keys:
        if key in have.names and key in wanted and not have.field(key).type.equals(wanted[key]):
            return (
                f"table {table!r}: key {key!r} of output {source!r} is now {wanted[key]}, the "
                f"table's column is {have.field(key).type}: a key cannot change type (drop "
                "the table to rebuild it, or give the rule a CAST)"
            )
    return None
