"""One apply commit: a delta-rs MERGE of a batch's changes into the table, the staging
version applied as the table's ``txn`` action in the same commit (docs/design.md#tables).

delta-rs was measured against delta-spark's ``MERGE INTO`` (bench/apply.py) and is the
faster by far for this work, with neither JVM nor Spark job per commit; its MERGE takes
the commit's app transactions (:class:`deltalake.CommitProperties`), writes the Change
Data Feed, adds columns a batch brings (``merge_schema``) and fails the commit when
another writer changed the app id since the snapshot it planned on — so a staging version
is applied once, whoever else applies or compacts the table beside it.

A batch that changes nothing still moves the position now and then (:func:`advance`): a
commit of the ``txn`` action alone, so a restart need not read far back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from deltalake import CommitProperties, Transaction

from engine.apply.changes import CLOSE, DELETE, RESET
from engine.apply.typed_columns import has
from engine.lake import delta
from engine.lake.table_schema import HISTORY_COLUMNS

if TYPE_CHECKING:
    from engine.lake.lake_tables import LakeTable


def quote(name: str) -> str:
    """A column name as a SQL identifier of delta-rs' expressions."""
    return '"' + name.replace('"', '""') + '"'


def _props(table: LakeTable, applied: int, metadata: Mapping[str, str]) -> CommitProperties:
    return CommitProperties(
        custom_metadata=dict(metadata),
        app_transactions=[Transaction(table.app, applied)],
    )


def merge_current(
    table: LakeTable,
    source: pa.Table,
    keys: Sequence[str],
    fields: Sequence[str],
    applied: int,
    metadata: Mapping[str, str],
) -> dict[str, int]:
    """Apply a current-state batch (:func:`engine.apply.changes.current_changes`):
    delete, update the fields the records carried (all of them after a reset), insert.
    Returns delta-rs' metrics."""
    have = set(table.columns())
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
    updates = {}
    for field in fields:
        if field in keys:
            continue
        if field in have:
            updates[field] = (
                f"CASE WHEN s.{quote(RESET)} OR s.{quote(has(field))} "
                f"THEN s.{quote(field)} ELSE t.{quote(field)} END"
            )
        else:  # a column this batch adds: NULL where the record did not carry it
            updates[field] = f"s.{quote(field)}"
    inserts = {field: f"s.{quote(field)}" for field in fields}
    merger = table.table.merge(
        source,
        predicate=on,
        source_alias="s",
        target_alias="t",
        merge_schema=True,
        commit_properties=_props(table, applied, metadata),
    ).when_matched_delete(predicate=f"s.{quote(DELETE)}")
    if updates:
        merger = merger.when_matched_update(updates=updates, predicate=f"NOT s.{quote(DELETE)}")
    metrics = merger.when_not_matched_insert(
        updates=inserts, predicate=f"NOT s.{quote(DELETE)}"
    ).execute()
    return {k: int(v) for k, v in metrics.items() if isinstance(v, int)}


def merge_history(
    table: LakeTable,
    source: pa.Table,
    keys: Sequence[str],
    fields: Sequence[str],
    applied: int,
    metadata: Mapping[str, str],
) -> dict[str, int]:
    """Apply a history batch (:func:`engine.apply.changes.history_changes`): close each
    key's current row, insert the new versions."""
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
    on += f" AND t.{quote('is_current')} AND s.{quote(CLOSE)}"
    close = {
        "valid_to": f"s.{quote('valid_to')}",
        "valid_to_version": f"s.{quote('valid_to_version')}",
        "is_current": "false",
    }
    inserts = {name: f"s.{quote(name)}" for name in [*fields, *HISTORY_COLUMNS]}
    metrics = (
        table.table.merge(
            source,
            predicate=on,
            source_alias="s",
            target_alias="t",
            merge_schema=True,
            commit_properties=_props(table, applied, metadata),
        )
        .when_matched_update(updates=close)
        .when_not_matched_insert(updates=inserts, predicate=f"NOT s.{quote(CLOSE)}")
        .execute()
    )
    return {k: int(v) for k, v in metrics.items() if isinstance(v, int)}


def advance(table: LakeTable, applied: int, metadata: Mapping[str, str]) -> None:
    """Commit the position alone (no rows): staging versions up to ``applied`` hold
    nothing for this table."""
    table.table.create_write_transaction(
        [], "append", table.table.schema(), commit_properties=_props(table, applied, metadata)
    )


def current_rows(table: LakeTable, keys: Sequence[str], batch: pa.Table) -> pa.Table:
    """The table's current rows (history tables: ``is_current``) of the keys in
    ``batch``, with the table's columns but the history ones."""
    import polars as pl  # deferred: polars is slow to import
    from deltalake import QueryBuilder  # deferred: DataFusion, used for history tables only

    columns = [c for c in table.columns() if c not in HISTORY_COLUMNS]
    sql = (
        f"SELECT {', '.join(quote(c) for c in columns)} FROM t "
        f"WHERE {quote('is_current')}"
    )
    found = pa.table(QueryBuilder().register("t", table.table).execute(sql).read_all())
    schema = delta.arrow_schema(table.table)
    found = found.cast(pa.schema([schema.field(c) for c in columns]))  # not string_view
    if not found.num_rows:
        return found
    ours = pl.from_arrow(found.select(list(keys)))
    wanted = pl.from_arrow(batch.select(list(keys)))
    assert isinstance(ours, pl.DataFrame)
    assert isinstance(wanted, pl.DataFrame)
    ours = ours.with_columns([ours[k].cast(wanted[k].dtype) for k in keys])
    rows = (
        ours.with_row_index("__i")
        .join(wanted.unique(), on=list(keys), how="semi")
        .get_column("__i")
        .to_arrow()
    )
    return found.take(rows)

