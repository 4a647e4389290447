"""A field the staging pool has only seen null (NullType, Avro ``null``) never swallows a
value: to-kafka's Avro encoder refuses a text holding one (TypeMismatch, which makes the
delivery type the field from the staged JSON) instead of writing null, whatever the batch's
size, and staged bodies written with such a type are not shipped as they are."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from engine.deliver.encode import AvroPart, StagedBodies
from engine.deliver.errors import TypeMismatch
from engine.deliver.record_types import add_missing

ROW = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("note", T.NullType(), True),
    T.StructField("inner", T.StructType([T.StructField("x", T.NullType(), True)]), True),
])  # fmt: skip


def _texts(n: int, note: object = None, x: object = None) -> list[str]:
    return [json.dumps({"id": i, "note": note, "inner": {"x": x}}) for i in range(n)]


@pytest.mark.parametrize("n", [3, 500])  # fastavro record by record; polars' batch path
def test_null_only_fields_encode_while_they_hold_null(n: int) -> None:
    part = AvroPart(ROW, "t_value")
    bodies = part.encode(_texts(n))
    parsed = fastavro.parse_schema(part.schema)
    assert fastavro.schemaless_reader(io.BytesIO(bodies[-1]), parsed, None) == {
        "id": n - 1, "note": None, "inner": {"x": None},
    }  # fmt: skip


@pytest.mark.parametrize("n", [3, 500, 5000])
@pytest.mark.parametrize(("note", "x", "where"), [("note 1", None, "/note"), (None, 7, "/inner/x")])
def test_a_value_where_the_type_saw_only_null_is_refused_not_lost(
    n: int, note: object, x: object, where: str
) -> None:
    texts = _texts(n)
    texts[n // 2] = json.dumps({"id": 1, "note": note, "inner": {"x": x}})  # one among many
    with pytest.raises(TypeMismatch, match=f"a value at {where} where the type recorded"):
        AvroPart(ROW, "t_value").encode(texts)


def test_bodies_staged_with_a_null_only_field_are_encoded_again_not_shipped() -> None:
    part = AvroPart(ROW, "t_value")
    staged = StagedBodies(
        pa.chunked_array([pa.array([part.fingerprint], pa.binary())]),
        pa.chunked_array([pa.array([b"\x02"], pa.binary())]),
    )
    assert not part.ships(staged)


def test_widening_types_a_null_only_field_from_the_json() -> None:
    typed = T.StructType([
        T.StructField("id", T.LongType()),
        T.StructField("note", T.StringType(), True),
        T.StructField("inner", T.StructType([T.StructField("x", T.LongType(), True)]), True),
    ])  # fmt: skip
    widened = add_missing(ROW, typed)
    assert widened == typed
    assert add_missing(typed, ROW) == typed  # a recorded type is never narrowed
