"""A batch of decoded outputs as the rows one MERGE applies (docs/design.md#tables).

Current state (:func:`current_changes`): per key, the net change of the batch, in
output-offset order — a delete when the key's last record is a tombstone, else an upsert
whose fields are, each, the last value a record after the key's last tombstone carried
(``__has_<field>`` false: no record carried it, the table keeps its value; ``__reset``:
a tombstone came before, so the row starts anew and fields no record carried are NULL).

History (:func:`history_changes`): the net change per key and staging version, chained
per key from the table's current row: each upsert becomes a row with its validity
(``valid_from`` = its staging commit, ``valid_to`` = the key's next change in the batch,
``is_current`` when there is none), and a ``__close`` row per key ends the table's
current row at the key's first change.

polars decides which input row each value comes from; the values themselves are taken
from the Arrow columns by index, so every type (maps, decimals, timestamps) stays exactly
as decoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.apply.typed_columns import TOMBSTONE, has
from engine.lake.table_schema import HISTORY_COLUMNS

if TYPE_CHECKING:
    import polars as pl

RESET = "__reset"
DELETE = "__delete"
CLOSE = "__close"
_ROW = "__row"
_LAST_TOMB = "__lt"


def _frame(decoded: pa.Table, keys: Sequence[str], fields: Sequence[str]) -> pl.DataFrame:
    """The columns polars needs: keys, row index, tombstone, version, presence."""
    import polars as pl  # deferred: polars is slow to import

    small = decoded.select([*keys, "version", TOMBSTONE, *(has(f) for f in fields)])
    frame = pl.from_arrow(small)
    assert isinstance(frame, pl.DataFrame)
    return frame.with_row_index(_ROW).with_columns(pl.col(_ROW).cast(pl.Int64))


def _net(frame: pl.DataFrame, group: Sequence[str], fields: Sequence[str]) -> pl.DataFrame:
    """Per ``group``: the net change — ``__row`` (a row of it: its key values, time and
    version), ``__delete``, ``__reset``, and per field the row its value comes from
    (``<field>``, None: no record carried it) and ``__has_<field>``."""
    import polars as pl  # deferred: polars is slow to import

    tombs = frame.filter(pl.col(TOMBSTONE)).group_by(group).agg(pl.col(_ROW).max().alias(_LAST_TOMB))
    marked = frame.join(tombs, on=list(group), how="left")
    after = marked.filter(
        ~pl.col(TOMBSTONE) & (pl.col(_LAST_TOMB).is_null() | (pl.col(_ROW) > pl.col(_LAST_TOMB)))
    )
    upserts = after.group_by(group).agg(
        pl.col(_ROW).last(),
        pl.col(_LAST_TOMB).first().is_not_null().alias(RESET),
        *(pl.col(_ROW).filter(pl.col(has(f))).last().alias(f) for f in fields),
        *(pl.col(has(f)).any() for f in fields),
    ).with_columns(pl.lit(False).alias(DELETE))
    deletes = (
        tombs.join(upserts.select(group), on=list(group), how="anti")
        .rename({_LAST_TOMB: _ROW})
        .with_columns(
            pl.lit(False).alias(RESET),
            *(pl.lit(None, pl.Int64).alias(f) for f in fields),
            *(pl.lit(False).alias(has(f)) for f in fields),
            pl.lit(True).alias(DELETE),
        )
    )
    return pl.concat([upserts, deletes.select(upserts.columns)])


def _take(column: pa.ChunkedArray | pa.Array, rows: pl.Series) -> pa.Array:
    """``column`` at the row indexes ``rows`` (None gives NULL)."""
    indexes = rows.to_arrow().cast(pa.int64())
    return pc.take(column, indexes)


def current_changes(decoded: pa.Table, keys: Sequence[str], fields: Sequence[str]) -> pa.Table:
    """The MERGE source of a current-state table: per key, its key columns, every field
    (value or NULL), ``__has_<field>`` (non-key fields), ``__reset`` and ``__delete``."""
    values = [f for f in fields if f not in keys]
    net = _net(_frame(decoded, keys, values), keys, values)
    columns: dict[str, pa.Array] = {}
    for key in keys:
        columns[key] = _take(decoded.column(key), net[_ROW])
    for field in values:
        columns[field] = _take(decoded.column(field), net[field])
        columns[has(field)] = net[has(field)].to_arrow()
    columns[RESET] = net[RESET].to_arrow()
    columns[DELETE] = net[DELETE].to_arrow()
    return pa.table(columns)


def history_changes(
    decoded: pa.Table, keys: Sequence[str], fields: Sequence[str], current: pa.Table
) -> pa.Table:
    """The MERGE source of a history table: ``__close`` rows (per key: key columns,
    ``valid_to``/``valid_to_version`` of its first change) and the new versions (every
    field, the history columns). ``current`` holds the table's current rows of the
    batch's keys (columns: keys and fields the table has)."""
    import polars as pl  # deferred: polars is slow to import

    values = [f for f in fields if f not in keys]
    net = _net(_frame(decoded, keys, values), [*keys, "version"], values).sort([*keys, "version"])
    # the values a change does not carry come from the key's previous state: earlier
    # changes of the batch, else (when no delete or tombstone came between) the table's
    # current row, appended after the batch's rows
    base = decoded.num_rows
    both = _with_current(decoded, current, fields)
    now = pl.from_arrow(current.select(list(keys))) if current.num_rows else None
    segment = (pl.col(DELETE) | pl.col(RESET)).cast(pl.Int64).cum_sum().over(list(keys))
    net = net.with_columns(segment.alias("__seg"))
    if isinstance(now, pl.DataFrame):
        now = now.with_row_index("__cur").with_columns(pl.col("__cur").cast(pl.Int64) + base)
        net = net.join(now, on=list(keys), how="left")
    else:
        net = net.with_columns(pl.lit(None, pl.Int64).alias("__cur"))
    fills = []
    for field in values:
        filled = pl.col(field).forward_fill().over([*keys, "__seg"])
        fills.append(
            pl.when(filled.is_not_null())
            .then(filled)
            .when(pl.col("__seg") == 0)
            .then(pl.col("__cur"))
            .otherwise(None)
            .alias(field)
        )
    net = net.with_columns(fills).with_columns(
        pl.col(_ROW).shift(-1).over(list(keys)).alias("__next"),
        pl.col(_ROW).first().over(list(keys)).alias("__first"),
    )
    rows = net.filter(~pl.col(DELETE))
    times, versions = decoded.column("time"), decoded.column("version")
    inserts: dict[str, pa.Array] = {key: _take(both.column(key), rows[_ROW]) for key in keys}
    for field in values:
        inserts[field] = _take(both.column(field), rows[field])
    inserts |= {
        "valid_from": _take(times, rows[_ROW]),
        "valid_to": _take(times, rows["__next"]),
        "valid_from_version": _take(versions, rows[_ROW]),
        "valid_to_version": _take(versions, rows["__next"]),
        "is_current": rows["__next"].is_null().to_arrow(),
        CLOSE: pa.array([False] * rows.height, pa.bool_()),
    }
    firsts = net.unique(subset=list(keys), keep="first")
    closes: dict[str, pa.Array] = {key: _take(both.column(key), firsts[_ROW]) for key in keys}
    n = firsts.height
    for field in values:
        closes[field] = pa.nulls(n, inserts[field].type)
    closes |= {
        "valid_from": pa.nulls(n, inserts["valid_from"].type),
        "valid_to": _take(times, firsts["__first"]),
        "valid_from_version": pa.nulls(n, pa.int64()),
        "valid_to_version": _take(versions, firsts["__first"]),
        "is_current": pa.array([False] * n, pa.bool_()),
        CLOSE: pa.array([True] * n, pa.bool_()),
    }
    assert set(HISTORY_COLUMNS) <= set(inserts)
    return pa.concat_tables([pa.table(closes), pa.table(inserts).cast(pa.table(closes).schema)])


def _with_current(decoded: pa.Table, current: pa.Table, fields: Sequence[str]) -> pa.Table:
    """The batch's field columns with the table's current rows appended (a field the
    table lacks is NULL there)."""
    batch = decoded.select(list(fields))
    if not current.num_rows:
        return batch
    columns = []
    for field in fields:
        type_ = batch.schema.field(field).type
        if field in current.column_names:
            columns.append(current.column(field).cast(type_))
        else:
            columns.append(pa.nulls(current.num_rows, type_))
    return pa.concat_tables([batch, pa.table(columns, schema=batch.schema)])
