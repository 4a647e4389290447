"""Staged outputs as typed columns, with the fields each record carries.

An output's value is JSON text in the staging pool, written by Spark's ``to_json`` with
NULL fields kept (``{"ID":1,"customer":null}``), from a struct of the fields its rule
names. :func:`decode` turns a batch of them into one column per table column, typed as
the table stores the field (:mod:`engine.lake.table_schema`), plus for every non-key
field a ``__has_<field>`` column: whether the record's JSON carries the field at all.
That is how a record that names only some fields updates only those, while a field a
rule writes as NULL sets the column to NULL (docs/design.md#tables).

Tombstones (NULL value) get their key columns from the record's key (a struct with those
fields, or a scalar for a single key) and ``__tombstone`` true.

Two ways to read, with the same result: pyarrow's JSON reader with the table's schema
(fast, multi-threaded; presence by the pattern ``[{,]"field":``, exact when no nested
object can hold a key of that name), and ``json.loads`` per record for what the first
cannot read (maps, dates or bytes inside structs, NaN written as ``"NaN"``) or tell.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.lake.table_schema import arrow_type

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructField

TOMBSTONE = "__tombstone"
HAS = "__has_"


def has(name: str) -> str:
    """The presence column of field ``name``."""
    return HAS + name


def decode(
    rows: pa.Table,
    fields: Sequence[StructField],
    keys: Sequence[str],
    key_type: DataType | None,
) -> pa.Table:
    """``rows`` (``offset, key, value, version, time``; JSON texts) as ``offset,
    version, time, __tombstone``, a column per field and ``__has_<field>`` per non-key
    field, in the rows' order."""
    value = rows.column("value")
    tomb = pc.is_null(value)
    live = rows.filter(pc.invert(tomb))
    dead = rows.filter(tomb)
    columns, present = _values(live.column("value").combine_chunks(), fields)
    types = {f.name: arrow_type(f.dataType) for f in fields}
    base = ["offset", "version", "time"]
    out_live = {name: live.column(name) for name in base}
    out_live[TOMBSTONE] = pa.array([False] * live.num_rows, pa.bool_())
    out_dead = {name: dead.column(name) for name in base}
    out_dead[TOMBSTONE] = pa.array([True] * dead.num_rows, pa.bool_())
    dead_keys = _tombstone_keys(dead.column("key"), fields, keys, key_type)
    for field in fields:
        name = field.name
        out_live[name] = columns[name]
        out_dead[name] = dead_keys.get(name, pa.nulls(dead.num_rows, types[name]))
        if name not in keys:
            out_live[has(name)] = present[name]
            out_dead[has(name)] = pa.array([False] * dead.num_rows, pa.bool_())
    table = pa.concat_tables([pa.table(out_live), pa.table(out_dead).cast(pa.table(out_live).schema)])
    return table.sort_by("offset")


# ----------------------------------------------------------------------------------------
# values


def _values(
    texts: pa.Array, fields: Sequence[StructField]
) -> tuple[dict[str, pa.Array], dict[str, pa.Array]]:
    """Each field's column and presence over JSON texts (none NULL)."""
    if not len(texts) or not fields:
        return (
            {f.name: pa.nulls(len(texts), arrow_type(f.dataType)) for f in fields},
            {f.name: pa.array([False] * len(texts), pa.bool_()) for f in fields},
        )
    fast = _fast_columns(texts, fields)
    if fast is not None and _presence_exact(fields):
        return fast, {f.name: _present(texts, f.name) for f in fields}
    return _slow(texts, fields)


#: Arrow types pyarrow's JSON reader takes as they are (structs and lists of them too).
def _readable(type_: pa.DataType) -> bool:
    if pa.types.is_struct(type_):
        return all(_readable(type_.field(i).type) for i in range(type_.num_fields))
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return _readable(type_.value_type)
    return bool(
        pa.types.is_boolean(type_)
        or pa.types.is_integer(type_)
        or pa.types.is_floating(type_)
        or pa.types.is_decimal(type_)
        or pa.types.is_string(type_)
        or pa.types.is_timestamp(type_)
    )


def _fast_columns(texts: pa.Array, fields: Sequence[StructField]) -> dict[str, pa.Array] | None:
    """The columns by pyarrow's JSON reader; None when it cannot read them."""
    import pyarrow.json as pj  # deferred: loaded on use

    wanted = {f.name: arrow_type(f.dataType) for f in fields}
    read_as = {}
    for name, type_ in wanted.items():
        if pa.types.is_date(type_) or pa.types.is_binary(type_):
            read_as[name] = pa.string()  # Spark writes dates as text, bytes as base64
        elif _readable(type_):
            read_as[name] = type_
        else:
            return None
    lines = pc.binary_join_element_wise(texts, pa.scalar(""), "\n")
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    offsets = pa.Array.from_buffers(
        pa.int32(), len(lines) + 1, [None, lines.buffers()[1]], offset=lines.offset
    )
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    data = lines.buffers()[2].slice(start, end - start)
    # blocks of a few MB are parsed in parallel; each must hold the longest record
    longest = pc.max(pc.binary_length(lines)).as_py() or 0
    try:
        table = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(block_size=max(4 << 20, 2 * longest + 2)),
            parse_options=pj.ParseOptions(
                explicit_schema=pa.schema(list(read_as.items())),
                unexpected_field_behavior="ignore",
                newlines_in_values=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None  # e.g. "NaN" in a double column
    if table.num_rows != len(texts):
        return None
    found = {}
    for name, type_ in wanted.items():
        column = table.column(name).combine_chunks()
        if pa.types.is_date(type_):
            column = pc.cast(column, type_)
        elif pa.types.is_binary(type_):
            column = pa.array(
                [None if v is None else base64.b64decode(v) for v in column.to_pylist()], type_
            )
        found[name] = column
    return found


def _nested_names(type_: pa.DataType, into: set[str]) -> bool:
    """Collect the field names of structs inside ``type_``; False when a map is inside
    (its keys could be any name)."""
    if pa.types.is_struct(type_):
        for i in range(type_.num_fields):
            into.add(type_.field(i).name)
            if not _nested_names(type_.field(i).type, into):
                return False
        return True
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return _nested_names(type_.value_type, into)
    return not pa.types.is_map(type_)


def _presence_exact(fields: Sequence[StructField]) -> bool:
    """Whether ``[{,]"name":`` finds exactly the top-level fields: no nested object can
    hold a key of the same name (inside a string, ``"`` is always escaped, so the
    pattern never matches there)."""
    nested: set[str] = set()
    for field in fields:
        if not _nested_names(arrow_type(field.dataType), nested):
            return False
    return not nested & {f.name for f in fields}


def _present(texts: pa.Array, name: str) -> pa.Array:
    token = json.dumps(name, ensure_ascii=False)
    return pc.match_substring_regex(texts, "[{,]" + re.escape(token) + ":")


def _slow(
    texts: pa.Array, fields: Sequence[StructField]
) -> tuple[dict[str, pa.Array], dict[str, pa.Array]]:
    """The columns and presence by ``json.loads`` per record."""
    converters = {f.name: python_value(f.dataType) for f in fields}
    values: dict[str, list[Any]] = {f.name: [] for f in fields}
    present: dict[str, list[bool]] = {f.name: [] for f in fields}
    for text in texts.to_pylist():
        record = json.loads(text)
        for name, convert in converters.items():
            found = name in record
            present[name].append(found)
            item = record.get(name) if found else None
            values[name].append(None if item is None else convert(item))
    return (
        {f.name: pa.array(values[f.name], arrow_type(f.dataType)) for f in fields},
        {name: pa.array(flags, pa.bool_()) for name, flags in present.items()},
    )


def _tombstone_keys(
    texts: pa.ChunkedArray,
    fields: Sequence[StructField],
    keys: Sequence[str],
    key_type: DataType | None,
) -> dict[str, pa.Array]:
    """The key columns of tombstones, from their records' keys."""
    from pyspark.sql import types as T  # deferred: pyspark

    by_name = {f.name: f for f in fields if f.name in keys}
    found: dict[str, list[Any]] = {name: [] for name in by_name}
    converters = {name: python_value(f.dataType) for name, f in by_name.items()}
    single = not isinstance(key_type, T.StructType) and len(keys) == 1
    for text in texts.to_pylist():
        record = None if text is None else json.loads(text)
        for name in by_name:
            # a struct key holds the keys by name, a scalar key the one key
            scalar = record if single else None
            item = record.get(name) if isinstance(record, dict) else scalar
            found[name].append(None if item is None else converters[name](item))
    return {
        name: pa.array(items, arrow_type(by_name[name].dataType)) for name, items in found.items()
    }


# ----------------------------------------------------------------------------------------
# one JSON value as pyarrow takes it


def python_value(data_type: DataType) -> Callable[[Any], Any]:
    """A function making a value ``json.loads`` gave for ``data_type`` (as Spark's
    ``to_json`` writes it) what ``pyarrow.array`` takes for the stored type."""
    from pyspark.sql import types as T  # deferred: pyspark

    if isinstance(data_type, T.StructType):
        inner = [(f.name, python_value(f.dataType)) for f in data_type.fields]

        def record(value: Any) -> Any:
            if not isinstance(value, dict):
                return None
            return {n: (None if value.get(n) is None else c(value[n])) for n, c in inner}

        return record
    if isinstance(data_type, T.ArrayType):
        item = python_value(data_type.elementType)
        return lambda v: [None if x is None else item(x) for x in v] if isinstance(v, list) else None
    if isinstance(data_type, T.MapType):
        key, value = python_value(data_type.keyType), python_value(data_type.valueType)
        return lambda v: (
            [(key(k), None if x is None else value(x)) for k, x in v.items()]
            if isinstance(v, dict)
            else None
        )
    if isinstance(data_type, T.DecimalType):
        return lambda v: decimal.Decimal(str(v))
    if isinstance(data_type, T.DateType):
        return lambda v: dt.date.fromisoformat(v) if isinstance(v, str) else v
    if isinstance(data_type, T.TimestampType | T.TimestampNTZType):
        return lambda v: dt.datetime.fromisoformat(v) if isinstance(v, str) else v
    if isinstance(data_type, T.BinaryType):
        return lambda v: base64.b64decode(v) if isinstance(v, str) else v
    if isinstance(data_type, T.FloatType | T.DoubleType):
        return lambda v: float(v) if isinstance(v, str | int) else v  # "NaN", "Infinity"
    if isinstance(data_type, T.StringType):
        return lambda v: v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
    if isinstance(data_type, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return lambda v: int(v) if isinstance(v, float) and not math.isnan(v) else v
    return lambda v: v
