"""The apply loop's decoding and folding, on Arrow tables (no Spark, no Delta).

What a batch of staged outputs becomes: typed columns with the fields each record
carries, then per key the net change (current state) or the chain of versions (history).
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import types as T

import engine.apply.typed_columns as decode_module
from engine.apply.changes import CLOSE, DELETE, RESET, current_changes, history_changes
from engine.apply.typed_columns import TOMBSTONE, decode, has
from engine.lake.table_schema import HISTORY_COLUMNS, stored_type, table_schema, value_fields

KEY = T.StructType([T.StructField("ID", T.LongType())])
VALUE = T.StructType(
    [
        T.StructField("ID", T.LongType()),
        T.StructField("customer", T.StringType()),
        T.StructField("item", T.StringType()),
        T.StructField("status", T.StringType()),
    ]
)
FIELDS = value_fields(VALUE)
NAMES = [f.name for f in FIELDS]
T0 = datetime(2024, 5, 1, tzinfo=UTC)


def rows(*records: tuple[int, dict | None, int]) -> pa.Table:
    """Staged rows: (key ID, value or None, staging version), offsets in order."""
    return pa.table(
        {
            "offset": pa.array(range(len(records)), pa.int64()),
            "key": [json.dumps({"ID": k}, separators=(",", ":")) for k, _, _ in records],
            "value": [None if v is None else json.dumps(v, separators=(",", ":")) for _, v, _ in records],
            "version": pa.array([v for *_, v in records], pa.int64()),
            "time": pa.array([T0.replace(minute=v) for *_, v in records], pa.timestamp("us", tz="UTC")),
        }
    )


def by_key(table: pa.Table) -> dict[int, dict]:
    return {row["ID"]: row for row in table.to_pylist()}


def test_decode_types_each_field_and_says_which_a_record_carries() -> None:
    decoded = decode(
        rows(
            (1, {"ID": 1, "customer": "Ann", "item": "tea", "status": "new"}, 3),
            (1, {"ID": 1, "status": "paid"}, 3),  # a rule naming two fields
            (2, {"ID": 2, "customer": None, "status": "new"}, 4),  # NULL written: set
            (3, None, 4),  # a tombstone: its key from the record's key
        ),
        FIELDS,
        ["ID"],
        KEY,
    )
    got = decoded.to_pylist()
    assert [r["ID"] for r in got] == [1, 1, 2, 3]
    assert [r[TOMBSTONE] for r in got] == [False, False, False, True]
    assert [r[has("customer")] for r in got] == [True, False, True, False]
    assert [r[has("item")] for r in got] == [True, False, False, False]
    assert [r[has("status")] for r in got] == [True, True, True, False]
    assert got[1]["status"] == "paid"
    assert got[2]["customer"] is None


def test_current_state_updates_only_the_fields_a_record_carries() -> None:
    decoded = decode(
        rows(
            (1, {"ID": 1, "customer": "Ann", "item": "tea", "status": "new"}, 3),
            (1, {"ID": 1, "status": "paid"}, 3),
            (2, {"ID": 2, "customer": "Bob", "item": "jam", "status": "new"}, 3),
            (2, None, 4),  # deleted ...
            (2, {"ID": 2, "status": "back"}, 4),  # ... and back: a new row, not the old one
            (3, {"ID": 3, "customer": "Cy", "item": "pie", "status": "new"}, 4),
            (3, None, 5),  # deleted for good
            (4, {"ID": 4, "item": None}, 5),  # NULL written: sets the column to NULL
        ),
        FIELDS,
        ["ID"],
        KEY,
    )
    net = by_key(current_changes(decoded, ["ID"], NAMES))
    assert net[1] == {
        "ID": 1, "customer": "Ann", "item": "tea", "status": "paid",
        has("customer"): True, has("item"): True, has("status"): True, RESET: False, DELETE: False,
    }
    assert net[2]["status"] == "back"
    assert net[2][RESET]  # the table's old row is not a base: customer and item go NULL
    assert (net[2]["customer"], net[2][has("customer")]) == (None, False)
    assert net[3][DELETE]
    assert net[4][has("item")]
    assert net[4]["item"] is None
    assert not net[4][has("customer")]


def test_history_chains_versions_from_the_current_row() -> None:
    decoded = decode(
        rows(
            (1, {"ID": 1, "status": "paid"}, 3),  # partial: the rest from the table's row
            (1, {"ID": 1, "status": "late"}, 3),  # same staging version: one version
            (1, {"ID": 1, "item": "two teas"}, 5),
            (2, None, 4),  # deleted: its current row closes, no new one
            (3, {"ID": 3, "customer": "Cy", "item": "pie", "status": "new"}, 4),
            (3, None, 6),
            (3, {"ID": 3, "status": "again"}, 7),  # after a delete: nothing carried over
        ),
        FIELDS,
        ["ID"],
        KEY,
    )
    current = pa.table(
        {"ID": [1, 2], "customer": ["Ann", "Bob"], "item": ["tea", "jam"], "status": ["new", "new"]},
        schema=table_schema(FIELDS, history=False),
    )
    out = history_changes(decoded, ["ID"], NAMES, current).to_pylist()
    closes = {r["ID"]: r for r in out if r[CLOSE]}
    versions = sorted(
        ((r["ID"], r["valid_from_version"]), r) for r in out if not r[CLOSE]
    )
    assert {k: (r["valid_to_version"], r["valid_to"]) for k, r in closes.items()} == {
        1: (3, T0.replace(minute=3)),
        2: (4, T0.replace(minute=4)),
        3: (4, T0.replace(minute=4)),  # a key new to the table: the close matches nothing
    }
    got = [
        (k, v, r["customer"], r["item"], r["status"], r["valid_to_version"], r["is_current"])
        for (k, v), r in versions
    ]
    assert got == [
        (1, 3, "Ann", "tea", "late", 5, False),
        (1, 5, "Ann", "two teas", "late", None, True),
        (3, 4, "Cy", "pie", "new", 6, False),
        (3, 7, None, None, "again", None, True),
    ]
    assert set(HISTORY_COLUMNS) <= set(out[0])


def test_tombstone_keys_come_from_a_scalar_key_too() -> None:
    staged = rows((7, None, 1))
    staged = staged.set_column(1, "key", pa.array(["7"]))
    decoded = decode(staged, FIELDS, ["ID"], T.LongType())
    assert decoded.column("ID").to_pylist() == [7]


EXOTIC = T.StructType(
    [
        T.StructField("ID", T.StringType()),
        T.StructField("price", T.DecimalType(10, 2)),
        T.StructField("day", T.DateType()),
        T.StructField("at", T.TimestampType()),
        T.StructField("blob", T.BinaryType()),
        T.StructField("ratio", T.DoubleType()),
        T.StructField("tags", T.ArrayType(T.StringType())),
        T.StructField("line", T.StructType([T.StructField("qty", T.IntegerType())])),
        T.StructField("attrs", T.MapType(T.StringType(), T.LongType())),
        T.StructField("nothing", T.NullType()),
    ]
)


def test_fast_and_slow_decoding_agree_on_every_type(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's to_json texts read by pyarrow's JSON reader and by json.loads give the
    same columns; a map (which pyarrow's reader cannot read) or "NaN" take the slow way."""
    fields = value_fields(EXOTIC)
    assert "nothing" not in [f.name for f in fields]  # NULL-typed: left out until typed
    plain = T.StructType([f for f in EXOTIC.fields if f.name not in ("attrs", "nothing")])
    texts = [
        {"ID": "a", "price": 12.5, "day": "2024-05-01", "at": "2024-05-01T10:00:00.123Z",
         "blob": "AAEC", "ratio": 0.5, "tags": ["x"], "line": {"qty": 2}},
        {"ID": "b", "price": None, "day": None, "at": None, "blob": None, "ratio": None,
         "tags": None, "line": None},
    ]
    staged = rows(*[(0, t, 1) for t in texts]).set_column(
        1, "key", pa.array(['"a"', '"b"'])
    )
    fast = decode(staged, value_fields(plain), ["ID"], T.StringType())
    monkeypatch.setattr(decode_module, "_fast_columns", lambda *_: None)
    slow = decode(staged, value_fields(plain), ["ID"], T.StringType())
    assert fast.equals(slow)
    first = fast.to_pylist()[0]
    assert first["price"] == Decimal("12.50")
    assert first["day"] == date(2024, 5, 1)
    assert first["at"] == datetime(2024, 5, 1, 10, 0, 0, 123000, tzinfo=UTC)
    assert first["blob"] == b"\x00\x01\x02"
    monkeypatch.undo()
    with_map = rows(
        (0, {"ID": "c", "attrs": {"k": 1}, "ratio": "NaN", "nothing": None}, 1)
    ).set_column(1, "key", pa.array(['"c"']))
    got = decode(with_map, fields, ["ID"], T.StringType()).to_pylist()[0]
    assert got["attrs"] == [("k", 1)]
    assert got["ratio"] != got["ratio"]  # NaN
    assert got[has("tags")] is False


def test_presence_is_exact_when_a_nested_struct_has_a_field_of_the_same_name() -> None:
    nested = T.StructType(
        [
            T.StructField("ID", T.LongType()),
            T.StructField("status", T.StringType()),
            T.StructField("last", T.StructType([T.StructField("status", T.StringType())])),
        ]
    )
    decoded = decode(
        rows((1, {"ID": 1, "last": {"status": "x"}}, 1), (2, {"ID": 2, "status": "y"}, 1)),
        value_fields(nested),
        ["ID"],
        KEY,
    )
    assert decoded.column(has("status")).to_pylist() == [False, True]


def test_stored_types_leave_null_fields_out_and_keep_what_delta_has_no_column_for() -> None:
    assert stored_type(T.NullType()) is None
    assert stored_type(T.DayTimeIntervalType()) == T.StringType()
    schema = table_schema(value_fields(EXOTIC), history=True)
    assert schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert schema.names[-5:] == list(HISTORY_COLUMNS)


def test_fast_decoding_keeps_the_order_over_several_blocks() -> None:
    """pyarrow reads blocks of a few MB in parallel: the rows still come in order."""
    n = 150_000  # ~8 MB of JSON text
    staged = pa.table(
        {
            "offset": pa.array(range(n), pa.int64()),
            "key": [f'{{"ID":{i}}}' for i in range(n)],
            "value": [f'{{"ID":{i},"customer":"c{i}","status":"s{i % 7}"}}' for i in range(n)],
            "version": pa.array([1] * n, pa.int64()),
            "time": pa.array([T0] * n, pa.timestamp("us", tz="UTC")),
        }
    )
    decoded = decode(staged, FIELDS, ["ID"], KEY)
    assert decoded.column("ID").to_pylist() == list(range(n))
    assert decoded.column("customer")[n - 1].as_py() == f"c{n - 1}"
