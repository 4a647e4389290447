"""The Spark types of the topic's records, from which the codecs and schemas are made:
recorded in the pool, given by the shaper's result, or widened from the staged JSON when
it holds fields the recorded type lacks (a type recorded late)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from engine.kafka.codecs.formats import Format
from engine.kafka.typemap.to_spark import json_value_to_spark

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

    from engine.deliver.output_shaper import Shaper
    from engine.deliver.rows import Rows
    from engine.lake.pools import Pool

#: The key and value types (None: unknown, the JSON goes as it is).
Types = tuple["DataType | None", "DataType | None"]


class RecordTypes:
    """The key and value types of one topic's records in one staging pool."""

    def __init__(self, pool: Pool, topic: str, fmt: Format, shaper: Shaper) -> None:
        self.pool = pool
        self.topic = topic
        self.format = fmt
        self.shaper = shaper
        self._seen: tuple[str | None, str | None] | None = None
        self._widened: Types = (None, None)

    def current(self) -> Types:
        if self.format is Format.JSON and self.shaper.sql is None:
            return None, None
        if self.shaper.sql is not None:
            return self.shaper.types()
        key_type, value_type = (None, None)
        if self.pool.topic_types(self.topic) is not None:
            key_type, value_type = self.pool.spark_types(self.topic)
        extra_key, extra_value = self._widened
        return add_missing(key_type, extra_key), add_missing(value_type, extra_value)

    def changed(self) -> Types | None:
        """The types when they changed since the last call (or on the first), else None.
        A shaper's types are read once."""
        if self.shaper.sql is not None and self._seen is not None:
            return None
        key_type, value_type = self.current()
        current = (
            None if key_type is None else key_type.json(),
            None if value_type is None else value_type.json(),
        )
        if current == self._seen:
            return None
        self._seen = current
        return key_type, value_type

    def widen(self, rows: Rows, images: Iterable[str] = ()) -> list[str] | None:
        """Type the fields the staged JSON of ``rows`` (and ``images``, values staged
        before) holds but the recorded type lacks, or has only seen null, from the JSON
        itself; the names of the fields added (``[]``: nested or typed ones), or None when
        that changed nothing."""
        values = [json.loads(t) for t in rows.values.to_pylist() if t is not None]
        values += [json.loads(t) for t in images]
        keys = [json.loads(t) for t in rows.keys.to_pylist() if t is not None]
        before = self.current()
        extra_key, extra_value = self._widened
        if keys:
            extra_key = add_missing(extra_key, json_value_to_spark(keys))
        if values:
            extra_value = add_missing(extra_value, json_value_to_spark(values))
        self._widened = (extra_key, extra_value)
        after = self.current()
        if after == before:
            return None
        added = sorted(field_names(after[1]) - field_names(before[1]))
        added += sorted(f"key.{n}" for n in field_names(after[0]) - field_names(before[0]))
        return added


def add_missing(base: DataType | None, extra: DataType | None) -> DataType | None:
    """``base`` with the struct fields only ``extra`` has appended (nullable), nested
    structs and arrays of structs included; ``base``'s own types are kept, except
    NullType (a field only ever null when it was recorded), which ``extra`` types."""
    from pyspark.sql import types as T  # deferred: the engine imports without pyspark

    if base is None:
        return extra
    if extra is None:
        return base
    if isinstance(base, T.NullType):
        return extra
    if isinstance(base, T.StructType) and isinstance(extra, T.StructType):
        theirs = {f.name: f for f in extra.fields}
        fields = [
            T.StructField(
                f.name,
                add_missing(f.dataType, theirs[f.name].dataType) or f.dataType,
                f.nullable,
                f.metadata,
            )
            if f.name in theirs
            else f
            for f in base.fields
        ]
        known = {f.name for f in base.fields}
        fields += [
            T.StructField(f.name, f.dataType, True) for f in extra.fields if f.name not in known
        ]
        return T.StructType(fields)
    if isinstance(base, T.ArrayType) and isinstance(extra, T.ArrayType):
        element = add_missing(base.elementType, extra.elementType) or base.elementType
        return T.ArrayType(element, base.containsNull)
    return base


def field_names(data_type: DataType | None) -> set[str]:
    from pyspark.sql import types as T  # deferred: the engine imports without pyspark

    return set(data_type.fieldNames()) if isinstance(data_type, T.StructType) else set()
