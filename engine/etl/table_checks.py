"""The configuration's tables checked against its rules, before a pass writes anything.

The apply loop (:mod:`engine.apply`) keeps each table of ``tables:`` from an output's
records; whatever would stop it is refused here first, when the ETL checks its rules, so
no output that a table cannot take is ever staged: a key that is not a field of a rule's
value struct (or, for a rule that writes tombstones, of its key), a field Delta cannot
name, a table name that is a pool's, and a key whose type differs from the column of the
table already in the lake. Each refusal is one line naming the table, the output, the
rule and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from engine.etl.config import EtlConfig, EtlConfigError, Table
from engine.lake import delta
from engine.lake.lake_tables import TableError, open_table, table_location
from engine.lake.pool_errors import PoolError
from engine.lake.pools import Lake
from engine.lake.table_schema import key_problem, key_type_change, name_problem, value_fields
from engine.sparktypes import merge_optional

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructField

    from engine.etl.checked import Checked
    from engine.etl.typed_records import TopicTypes


def check_tables(
    config: EtlConfig, checked: Checked, lake: Lake, recorded: Mapping[str, TopicTypes]
) -> None:
    """Refuse (:class:`EtlConfigError`) a table the outputs could not be applied to.
    ``recorded`` holds the types the staging pool already records per output topic."""
    merged_outputs = checked.output_types(config)
    for table in config.tables:
        staged = config.staged_topic(table.from_)
        for index, (rule, check) in enumerate(zip(config.transforms, checked.rules, strict=True)):
            if rule.out != staged or not check.typed:
                continue
            where = f" ({config.describe_rule(index)})"
            problem = key_problem(
                table.name, table.from_, table.keys, check.value_type, where=where
            ) or _tombstone_key_problem(table, check.key_type, check.value_type, where)
            if problem:
                raise EtlConfigError(f"{config.source}: {problem}")
        value = merge_optional(recorded.get(staged, (None, None))[1], merged_outputs.get(staged, (None, None))[1])
        fields = value_fields(value)
        problem = key_problem(table.name, table.from_, table.keys, value) or name_problem(
            table.name, table.from_, fields, table.history
        )
        if problem:
            raise EtlConfigError(f"{config.source}: {problem}")
        _check_lake(config, table, lake, fields)


def _tombstone_key_problem(
    table: Table, key_type: DataType | None, value_type: DataType | None, where: str
) -> str | None:
    """A rule that writes only tombstones (NULL values) must give keys holding the
    table's keys: a struct with those fields, or a scalar for a single key."""
    from pyspark.sql import types as T  # deferred: pyspark

    if not isinstance(value_type, T.NullType) or key_type is None:
        return None
    head = f"table {table.name!r}: output {table.from_!r}{where}"
    if isinstance(key_type, T.StructType):
        for key in table.keys:
            if key not in key_type.fieldNames():
                return (
                    f"{head}: its tombstones' keys have no field {key!r} (key fields: "
                    f"{', '.join(key_type.fieldNames()) or 'none'}), so they cannot say which "
                    "row to delete"
                )
        return None
    if len(table.keys) > 1 or isinstance(key_type, T.ArrayType | T.MapType):
        return (
            f"{head}: its tombstones' keys are {key_type.simpleString()}, which cannot give "
            f"the keys {', '.join(table.keys)}"
        )
    return None


def _check_lake(config: EtlConfig, table: Table, lake: Lake, fields: list[StructField]) -> None:
    """The table's place in the lake is free, or holds this table with keys of the same
    types."""
    where = table_location(lake, table.name, table.location)
    if table.location is None:
        try:
            pool = lake.open_pool(table.name)
        except PoolError:
            pool = None
        if pool is not None:
            raise EtlConfigError(
                f"{config.source}: table {table.name!r}: pool {table.name!r} in lake "
                f"{lake.location} has this name: give the table another"
            )
    try:
        found = open_table(table.name, where)
    except (delta.TableNotFoundError, OSError):
        return
    except TableError as exc:
        raise EtlConfigError(f"{config.source}: {exc}") from None
    problem = key_type_change(
        table.name, table.from_, table.keys, delta.arrow_schema(found.table), fields
    )
    if problem:
        raise EtlConfigError(f"{config.source}: {problem}")
