"""The change envelopes built without a broker: materialize (consolidated CDCv2 updates,
progress statements that tile the times) and debezium (c/u/d events and tombstones);
the staging pool's identity and the judgement of positions read back (ownership)."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from engine.deliver.envelopes.base import Parts
from engine.deliver.envelopes.debezium import DebeziumEnvelope, avro_namespace
from engine.deliver.envelopes.materialize import MaterializeEnvelope, materialize_schema
from engine.deliver.ledger import Ledger
from engine.deliver.positions import PoolIdentity, Position
from engine.deliver.rows import Batch, Rows
from engine.deliver.status_board import DeliveryStatus, StatusBoard
from engine.kafka.codecs.formats import Format

IDENTITY = PoolIdentity("table-1", "Staging")


class FakeSchemas:
    """A registry that remembers what was registered."""

    def __init__(self) -> None:
        self.by_subject: dict[str, Any] = {}

    def register(self, subject: str, schema: Any) -> int:
        self.by_subject[subject] = json.loads(schema) if isinstance(schema, str) else schema
        return len(self.by_subject)


def _types() -> tuple[Any, Any]:
    from pyspark.sql import types as T

    key = T.StructType([T.StructField("ID", T.LongType())])
    value = T.StructType(
        [T.StructField("ID", T.LongType()), T.StructField("name", T.StringType())]
    )
    return key, value


def _envelope(kind: type[Any], fmt: Format = Format.AVRO, partitions: int = 1) -> Any:
    board = StatusBoard(DeliveryStatus(topic="T", pool="Staging", envelope=kind.name, format=fmt.value))
    parts = Parts(
        topic="shop.Invoices",
        identity=IDENTITY,
        format=fmt,
        batch_records=1000,
        registry=None,
        ledger=Ledger(list(range(partitions)), counts_after=False),
        reader=None,  # type: ignore[arg-type]  # build() reads nothing
        shaper=None,  # type: ignore[arg-type]
        types=None,  # type: ignore[arg-type]
        board=board,
    )
    envelope = kind(parts)
    schemas = FakeSchemas()
    envelope.schemas = lambda: schemas
    envelope.build_codecs(*_types())
    envelope.registered = schemas.by_subject
    return envelope


def _rows(records: list[tuple[int, int, Any, Any]]) -> Rows:
    """Rows of (offset, time, key, value) with JSON-able key and value."""
    def text(v: Any) -> str | None:
        return None if v is None else json.dumps(v, separators=(",", ":"))

    return Rows(
        [r[0] for r in records],
        (
            pa.chunked_array([pa.array([text(r[2]) for r in records], pa.string())]),
            pa.chunked_array([pa.array([text(r[3]) for r in records], pa.string())]),
        ),
        [r[1] for r in records],
    )


def _decode(schema: Any, data: bytes) -> Any:
    magic, _ = struct.unpack(">bI", data[:5])
    assert magic == 0
    parsed = fastavro.parse_schema(schema)
    return fastavro.schemaless_reader(io.BytesIO(data[5:]), parsed, None)


def _v(i: int, name: str) -> dict[str, Any]:
    return {"ID": i, "name": name}


# ----------------------------------------------------------------------------- materialize


def test_materialize_consolidates_each_time_and_closes_it_with_the_whole_count() -> None:
    envelope = _envelope(MaterializeEnvelope, partitions=2)
    schema = envelope.registered["shop.Invoices-value"]
    envelope.latest.latest = {'{"ID":1}': json.dumps(_v(1, "a"), separators=(",", ":")),
                              '{"ID":3}': json.dumps(_v(3, "d"), separators=(",", ":"))}
    rows = _rows(
        [
            (10, 7, {"ID": 1}, _v(1, "b")),  # a -1, b +1
            (11, 7, {"ID": 1}, _v(1, "a")),  # b -1, a +1: key 1 is back where it was
            (12, 7, {"ID": 2}, _v(2, "c")),  # c +1
            (13, 7, {"ID": 3}, None),  # d -1
            (14, 9, {"ID": 2}, _v(2, "e")),  # c -1, e +1
        ]
    )
    batch = envelope.build(rows)
    decoded = [_decode(schema, v) for v in batch.values]
    updates = [(d[0]["data"], d[0]["time"], d[0]["diff"]) for d in decoded if isinstance(d, list)]
    assert updates == [(_v(2, "c"), 7, 1), (_v(3, "d"), 7, -1), (_v(2, "c"), 9, -1), (_v(2, "e"), 9, 1)]
    progress = [(p, d) for p, d in zip(batch.partition_list(), decoded, strict=True) if isinstance(d, dict)]
    assert [d for p, d in progress if p == 0] == [
        {"lower": [0], "upper": [8], "counts": [{"time": 7, "count": 2}]},
        {"lower": [8], "upper": [10], "counts": [{"time": 9, "count": 2}]},
    ]
    assert [p for p, _ in progress] == [0, 1, 0, 1]  # every partition is told
    # positions: the record that last changed the data, step 0 retraction / 1 insertion
    assert list(zip(batch.offsets, batch.steps or [], strict=True))[:2] == [(12, 1), (13, 0)]
    for partition in (0, 1):
        mine = [(o, s) for p, o, s in batch.positions() if p == partition]
        assert mine == sorted(mine)
        assert len(set(mine)) == len(mine)
    assert envelope.latest.latest['{"ID":2}'] == '{"ID":2,"name":"e"}'
    assert '{"ID":3}' not in envelope.latest.latest
    assert envelope.time_headers(9)["zync.lower"] == b"8"
    assert envelope.lower == 10


def test_materialize_consolidates_equal_data_across_keys_and_skips_what_was_delivered() -> None:
    envelope = _envelope(MaterializeEnvelope)
    envelope.latest.latest = {'{"ID":1}': '{"ID":5,"name":"x"}'}
    # key 1 moves its value to key 2 in one time: the data stays, nothing changes
    rows = _rows([(0, 3, {"ID": 1}, None), (1, 3, {"ID": 2}, {"name": "x", "ID": 5})])
    batch = envelope.build(rows)
    assert batch.steps == [2]  # the progress statement alone
    progress = _decode(envelope.registered["shop.Invoices-value"], batch.values[0])
    assert progress == {"lower": [0], "upper": [4], "counts": []}

    again = _envelope(MaterializeEnvelope)
    again.parts.ledger.last = {0: (12, 1)}  # delivered up to the insertion at offset 12
    batch = again.build(_rows([(12, 7, {"ID": 2}, _v(2, "c")), (13, 7, {"ID": 3}, _v(3, "d"))]))
    assert list(zip(batch.offsets, batch.steps or [], strict=True)) == [(13, 1), (13, 2)]


def test_materialize_resumes_the_lower_bound_of_the_time_it_restarts_in() -> None:
    envelope = _envelope(MaterializeEnvelope, partitions=2)
    found = {0: Position(20, 1, time=9, lower=6), 1: Position(25, 2, time=12, lower=10)}
    envelope.parts.ledger.take(found)
    envelope.resume(found)
    assert (envelope.resume_time, envelope.lower) == (9, 6)


def test_materialize_is_avro_only_and_needs_record_values() -> None:
    with pytest.raises(ValueError, match="materialize envelope is written in avro only"):
        MaterializeEnvelope.check_format(Format.JSON)
    from pyspark.sql import types as T

    envelope = _envelope(MaterializeEnvelope)
    with pytest.raises(Exception, match="needs record values"):
        envelope.build_codecs(None, T.StringType())


def test_the_materialize_schema_is_the_documented_union() -> None:
    data = {"type": "record", "name": "data", "fields": [{"name": "id", "type": "long"}]}
    schema = materialize_schema(data)
    updates, progress = schema
    assert updates["type"] == "array"
    assert updates["items"]["name"] == "update"
    assert updates["items"]["namespace"] == "com.materialize.cdc"
    assert [f["name"] for f in updates["items"]["fields"]] == ["data", "time", "diff"]
    assert progress["name"] == "progress"
    assert [f["name"] for f in progress["fields"]] == ["lower", "upper", "counts"]
    named: dict[str, Any] = {}
    fastavro.parse_schema(schema, named_schemas=named)
    # Materialize finds the record's columns by this name
    assert {"com.materialize.cdc.data", "com.materialize.cdc.counts"} <= set(named)


# ----------------------------------------------------------------------------- debezium


def test_debezium_events_create_update_delete_then_a_tombstone() -> None:
    envelope = _envelope(DebeziumEnvelope)
    envelope.read_version = 4
    schema = envelope.registered["shop.Invoices-value"]
    assert (schema["name"], schema["namespace"]) == ("Envelope", "shop.Invoices")
    assert [f["name"] for f in schema["fields"]] == ["before", "after", "source", "op", "ts_ms"]
    rows = _rows(
        [
            (0, 0, {"ID": 1}, _v(1, "a")),
            (1, 0, {"ID": 1}, _v(1, "b")),
            (2, 0, {"ID": 1}, None),
            (3, 0, {"ID": 1}, _v(1, "c")),
            (4, 0, {"ID": 9}, None),
        ]
    )
    batch = envelope.build(rows)
    assert list(zip(batch.offsets, batch.steps or [], strict=True)) == [
        (0, 0), (1, 0), (2, 0), (2, 1), (3, 0), (4, 0), (4, 1)
    ]
    events = [None if v is None else _decode(schema, v) for v in batch.values]
    assert [(e["op"], e["before"], e["after"]) if e else None for e in events] == [
        ("c", None, _v(1, "a")),
        ("u", _v(1, "a"), _v(1, "b")),
        ("d", _v(1, "b"), None),
        None,  # Debezium's tombstone
        ("c", None, _v(1, "c")),  # re-created after the delete
        ("d", None, None),  # a key with no image
        None,
    ]
    assert events[0]["source"] == {
        "version": events[0]["source"]["version"],
        "connector": "zync",
        "name": "Staging",
        "pool_version": 4,
        "offset": 0,
    }
    assert batch.keys[3] == batch.keys[2]  # the tombstone has the deleted key


@pytest.mark.parametrize("fmt", [Format.JSON, Format.CONNECT_JSON])
def test_debezium_json_and_connect_json(fmt: Format) -> None:
    envelope = _envelope(DebeziumEnvelope, fmt)
    batch = envelope.build(_rows([(0, 0, {"ID": 1}, _v(1, "a")), (1, 0, {"ID": 1}, _v(1, "b"))]))
    decoded = [json.loads(v) for v in batch.values]
    if fmt is Format.CONNECT_JSON:
        schema = decoded[0]["schema"]
        assert schema["name"] == "shop.Invoices.Envelope"
        assert [f["field"] for f in schema["fields"]] == ["before", "after", "source", "op", "ts_ms"]
        decoded = [d["payload"] for d in decoded]
    assert decoded[1]["op"] == "u"
    assert decoded[1]["before"] == _v(1, "a")
    assert decoded[1]["after"] == _v(1, "b")
    assert decoded[1]["source"]["offset"] == 1


def test_avro_namespaces_from_topics() -> None:
    assert avro_namespace("shop.public.Invoices") == "shop.public.Invoices"
    assert avro_namespace("my-topic.1x") == "my_topic._1x"


# ----------------------------------------------------------------------------- ownership


def test_positions_name_their_pool_and_the_lower_bound() -> None:
    headers = [("zync.offset", b"7"), ("zync.step", b"2"), ("zync.time", b"9"),
               ("zync.lower", b"4"), *IDENTITY.headers().items()]
    position = Position.from_headers(headers)
    assert position is not None
    assert (position.offset, position.step, position.time, position.lower) == (7, 2, 9, 4)
    assert (position.pool_id, position.pool_name) == ("table-1", "Staging")


def test_differential_transactions_hold_whole_times() -> None:
    from engine.deliver.envelopes.differential import DifferentialEnvelope

    envelope = _envelope(DifferentialEnvelope)
    envelope.parts.batch_records = 3
    rows = _rows([(i, t, {"ID": i}, _v(i, "x")) for i, t in enumerate([1, 1, 2, 2, 2, 2, 3, 4])])
    assert [c.times for c in envelope.time_slices(rows)] == [[1, 1], [2, 2, 2, 2], [3, 4]]
    assert isinstance(envelope.build(rows), Batch)
