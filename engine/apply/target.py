"""The table one entry of ``tables:`` is applied to: found, created once its output has a
type, and checked before anything is written (docs/design.md#tables).

:class:`Target` knows the output's fields and keys from the types the staging pool
records for it (read through :meth:`engine.lake.pools.Pool.spark_types`), creates the
table with them when it does not exist, and refuses, in one line naming the table, the
output and the key, what would make the apply wrong: a key missing from the values or no
longer of the column's type, a name that is a pool's, a table in the way that is no zync
table or was kept from something else (another staging pool, other keys).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.lake import delta
from engine.lake.lake_tables import (
    LakeTable,
    TableError,
    TableMeta,
    create_table,
    open_table,
    remember,
    table_location,
)
from engine.lake.pool_errors import PoolError
from engine.lake.table_schema import (
    key_problem,
    key_type_change,
    name_problem,
    table_schema,
    value_fields,
)

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructField

    from engine.etl.config import EtlConfig, Table
    from engine.lake.location import Location
    from engine.lake.pools import Lake, Pool


@dataclass(frozen=True)
class Shape:
    """What the staging pool records for the output: its value fields (as stored) and
    key type."""

    fields: tuple[StructField, ...]
    key_type: DataType | None

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]


class Target:
    """The table of one ``tables:`` entry, from one staging pool."""

    def __init__(self, config: EtlConfig, spec: Table, lake: Lake, staging: Pool) -> None:
        self.config = config
        self.spec = spec
        self.lake = lake
        self.staging = staging
        self.topic = config.staged_topic(spec.from_)
        self.location: Location = table_location(lake, spec.name, spec.location)
        self.table: LakeTable | None = None
        self._shape: tuple[object, Shape | None] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def meta(self) -> TableMeta:
        return TableMeta(
            etl=self.config.name,
            staging=self.staging.name,
            staging_id=str(self.staging.table.metadata().id),
            source=self.topic,
            keys=tuple(self.spec.keys),
            history=self.spec.history,
        )

    def shape(self) -> Shape | None:
        """The output's fields and key type as staging records them now (None: no
        value type recorded yet); refuses keys and names a table cannot have."""
        recorded = self.staging.topic_types(self.topic)
        signature = None if recorded is None else (recorded.key, recorded.value)
        if self._shape is not None and self._shape[0] == signature:
            return self._shape[1]
        key_type, value_type = self.staging.spark_types(self.topic)
        shape = None
        if value_type is not None:
            fields = value_fields(value_type)
            problem = key_problem(self.name, self.spec.from_, self.spec.keys, value_type) or (
                name_problem(self.name, self.spec.from_, fields, self.spec.history)
            )
            if problem:
                raise TableError(problem)
            shape = Shape(tuple(fields), key_type)
        self._shape = (signature, shape)
        return shape

    def open(self) -> LakeTable | None:
        """The table, created when missing and the output has a type (None: not yet)."""
        if self.table is None:
            self._refuse_pool_name()
            try:
                self.table = open_table(self.name, self.location)
            except delta.TableNotFoundError:
                shape = self.shape()
                if shape is None:
                    return None
                schema = table_schema(shape.fields, history=self.spec.history)
                self.table = create_table(self.name, self.location, self.meta(), schema)
                remember(self.lake, self.name, self.location)
            self._check_meta(self.table.meta)
        return self.table

    def check(self, shape: Shape) -> None:
        """The output's keys still fit the table's columns."""
        assert self.table is not None
        problem = key_type_change(
            self.name,
            self.spec.from_,
            self.spec.keys,
            delta.arrow_schema(self.table.table),
            shape.fields,
        )
        if problem:
            raise TableError(problem)

    def _refuse_pool_name(self) -> None:
        if self.spec.location is not None:
            return
        try:
            self.lake.open_pool(self.name)
        except PoolError:
            return
        raise TableError(
            f"table {self.name!r}: pool {self.name!r} in lake {self.lake.location} has this "
            "name: give the table another"
        )

    def _check_meta(self, found: TableMeta) -> None:
        wanted = self.meta()
        head = f"table {self.name!r} at {self.location}"
        if found.staging_id != wanted.staging_id:
            raise TableError(
                f"{head} was applied from another staging pool ({found.staging!r}, Delta "
                f"table id {found.staging_id}; {wanted.staging!r} is {wanted.staging_id}): "
                "drop the table to rebuild it, or give it another name"
            )
        for what, have, want in (
            ("output", found.source, wanted.source),
            ("keys", ", ".join(found.keys), ", ".join(wanted.keys)),
            ("history", found.history, wanted.history),
        ):
            if have != want:
                raise TableError(
                    f"{head} was kept with {what} {have}, the configuration says {want}: "
                    "drop the table to rebuild it, or give it another name"
                )
