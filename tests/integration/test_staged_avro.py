"""Staged Avro (docs/design.md#staged-avro): an ETL pass writes each output's Avro bodies
beside its JSON text, and to-kafka ships them when they were written with the schema it
registered.

* Spark's ``to_avro`` gives, for every kind of type zync lets it write, the bytes zync's
  own encoder gives for the JSON text (so a consumer cannot tell the two paths apart);
* an ETL pass (both writers) stages the bodies, to-kafka ships them without encoding,
  and confluent-kafka's ``AvroDeserializer`` reads what it sent;
* rows written under a narrower type than the one registered are encoded from their
  JSON text, as before;
* a staging pool made before the column gets it in a metadata-only commit, and its older
  rows (NULL there) are read, from the snapshot and from the change feed, and encoded.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from deltalake import DeltaTable

from engine.api import EtlRunner, load_config
from engine.deliver.encode import AvroPart, PartCodec
from engine.etl.typed_records import avro_bodies_sql, json_text_sql
from engine.kafka.codecs.formats import Format
from engine.kafka.typemap.from_spark import spark_writes_avro
from engine.lake import delta
from engine.lake.pool_record import TABLE_SCHEMA, record_rows
from engine.lake.pools import Lake
from engine.lake.topic_types import TopicTypes
from tests.fixtures.legacy_pools import legacy_description
from tests.integration.test_etl_support import append_events
from tests.integration.test_interop import raw_messages
from tests.integration.test_to_kafka import deliver, profiles, read_topic, stage, unique

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture(autouse=True)
def _passes_by_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pass evaluated by Spark, whose executors write the bodies: a small pass
    evaluated row by row leaves them NULL, and to-kafka encodes its outputs' text."""
    from engine.etl import evaluate_rows

    monkeypatch.setattr(evaluate_rows, "ROWWISE_ROWS", 0)


def _wide_type() -> Any:
    from pyspark.sql import types as T

    inner = T.StructType(
        [
            T.StructField("x", T.LongType(), False),
            T.StructField("y", T.ArrayType(T.StructType([T.StructField("z", T.StringType())]))),
        ]
    )
    return T.StructType(
        [
            T.StructField("flag", T.BooleanType()),
            T.StructField("tiny", T.ByteType()),
            T.StructField("small", T.ShortType()),
            T.StructField("n", T.IntegerType(), False),
            T.StructField("big", T.LongType()),
            T.StructField("f", T.FloatType()),
            T.StructField("d", T.DoubleType()),
            T.StructField("s", T.StringType()),
            T.StructField("raw", T.BinaryType()),
            T.StructField("amount", T.DecimalType(12, 3)),
            T.StructField("day", T.DateType()),
            T.StructField("tags", T.ArrayType(T.LongType())),
            T.StructField("scores", T.MapType(T.StringType(), T.DoubleType())),
            T.StructField("inner", inner),
        ]
    )


def _wide_rows() -> list[tuple[Any, Any]]:
    full = {
        "flag": True, "tiny": -7, "small": 300, "n": 42, "big": 2**40, "f": 1.5,
        "d": -2.25, "s": "héllo \"quoted\"\n", "raw": b"\x00\xffbytes",
        "amount": decimal.Decimal("-12345.678"), "day": dt.date(2024, 2, 29),
        "tags": [1, -1, 2**33], "scores": {"a": 1.0, "b": -0.5},
        "inner": {"x": 7, "y": [{"z": "q"}, {"z": None}]},
    }  # fmt: skip
    sparse = {name: None for name in full} | {"n": 0, "tags": [], "scores": {}, "inner": {"x": 0, "y": None}}
    return [(1, full), (2, sparse), (3, None)]


def test_spark_to_avro_writes_what_zyncs_encoder_writes(spark) -> None:
    from pyspark.sql import types as T

    value_type = _wide_type()
    key_type = T.LongType()
    schema = T.StructType(
        [T.StructField("key", key_type, False), T.StructField("value", value_type)]
    )
    spark.createDataFrame(_wide_rows(), schema).createOrReplaceTempView("staged_avro_wide")
    rows = spark.sql(
        f"SELECT {json_text_sql('key', key_type)} AS k, {json_text_sql('value', value_type)} "
        f"AS v, {avro_bodies_sql(key_type, value_type)} AS avro FROM staged_avro_wide ORDER BY key"
    ).collect()

    keys, values = AvroPart(key_type, "key"), AvroPart(value_type, "value")
    for row in rows:
        assert row.avro.key_schema == keys.fingerprint
        assert row.avro.key == keys.encode([row.k])[0]
        if row.v is None:  # a tombstone has no body
            assert row.avro.value is None
            continue
        assert row.avro.value_schema == values.fingerprint
        assert row.avro.value == values.encode([row.v])[0], row.v


def test_types_spark_does_not_write_are_left_to_the_encoder(spark) -> None:
    from pyspark.sql import types as T

    by_int = T.MapType(T.IntegerType(), T.StringType())
    assert not spark_writes_avro(by_int)
    assert not spark_writes_avro(T.StructType([T.StructField("n", T.NullType())]))
    assert not spark_writes_avro(T.DayTimeIntervalType())
    # to_json writes timestamps to the millisecond, to_avro to the microsecond
    assert not spark_writes_avro(T.StructType([T.StructField("at", T.TimestampType())]))
    assert not spark_writes_avro(T.ArrayType(T.TimestampNTZType()))
    assert spark_writes_avro(_wide_type())
    row = spark.sql(
        f"SELECT {avro_bodies_sql(None, by_int)} AS avro FROM (SELECT map(1, 'a') AS value)"
    ).first()
    assert row.avro.asDict() == {"key_schema": None, "value_schema": None, "key": None, "value": None}


ETL_YAML = """
name: shipping
inputs:
  - {topic: Orders, pool: Raw}
outputs:
  - {topic: Shipped, pool: Staging}
transforms:
  - type: stateless
    name: ship
    in: Orders
    out: Shipped
    sql: |
      SELECT named_struct('id', in.value.id) AS key,
             named_struct('id', in.value.id, 'item', in.value.item,
                          'qty', in.value.qty, 'price', in.value.price) AS value
"""


def _order(i: int) -> dict[str, Any]:
    value = {"id": i, "item": f"item {i}", "qty": i % 4, "price": i * 1.5}
    return {"topic": "Orders", "key": {"id": i}, "value": value}


class _Encoded:
    """Counts the records to-kafka encodes from JSON text (not shipped as staged)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.records = 0
        original = AvroPart.encode

        def counting(part: AvroPart, texts: Any, header: bytes = b"") -> Any:
            out = original(part, texts, header)
            self.records += len(out)
            return out

        monkeypatch.setattr(AvroPart, "encode", counting)


def _decoded(broker: Any, registry: Any, topic: str, count: int) -> list[tuple[Any, Any]]:
    client = SchemaRegistryClient({"url": registry.url})
    keys, values = AvroDeserializer(client), AvroDeserializer(client)
    return [
        (
            keys(m.key(), SerializationContext(topic, MessageField.KEY)),
            values(m.value(), SerializationContext(topic, MessageField.VALUE)),
        )
        for m in raw_messages(broker, topic, count)
    ]


@pytest.mark.parametrize("writer", ["driver", "executors"])
def test_etl_outputs_are_shipped_as_staged_and_read_by_confluent(
    spark, lake: Lake, broker, registry, tmp_path: Path, monkeypatch, writer: str
) -> None:
    import engine.etl.evaluate

    if writer == "executors":
        monkeypatch.setattr(engine.etl.evaluate, "DRIVER_OUTPUT_ROWS", -1)
    topic = unique("Shipped")
    (tmp_path / "etl.yaml").write_text(ETL_YAML.replace("Shipped", topic))
    raw = lake.create_pool("Raw", "raw")
    lake.create_pool("Staging", "staging")
    runner = EtlRunner(load_config(tmp_path / "etl.yaml"), lake, spark)
    append_events(raw, [_order(i) for i in range(40)])
    assert runner.run_pass().outputs == {topic: 40}

    staging = lake.open_pool("Staging")
    rows = staging.dataset().to_table(
        columns=["key", "value", "avro"], filter=pc.field("marker").is_null()
    ).to_pylist()
    assert len(rows) == 40
    assert all(r["avro"]["value"] and r["avro"]["key"] for r in rows)

    encoded = _Encoded(monkeypatch)
    kafka, reg = profiles(broker, registry)
    status, _ = deliver(lake, topic, kafka, reg)
    assert status.delivered_offset == 39
    assert encoded.records == 0  # every key and value shipped as staged
    got = _decoded(broker, registry, topic, 40)
    orders = [
        ({"id": i}, {"id": i, "item": f"item {i}", "qty": i % 4, "price": i * 1.5})
        for i in range(40)
    ]
    assert sorted(got, key=lambda kv: kv[0]["id"]) == orders

    # to three partitions: the bodies ship too (read with the key's text alone), and
    # each record goes where the CRC-32 of its staged key text sends it, as always
    spread = unique("Spread")
    status, _ = deliver(lake, spread, kafka, reg, staged=topic, partitions=3)
    assert status.delivered_offset == 39
    assert encoded.records == 0
    placed = read_topic(kafka, spread, registry=reg, expect=40)
    assert sorted(((r.key, r.value) for r in placed), key=lambda kv: kv[0]["id"]) == orders
    where = {json.loads(r["key"])["id"]: zlib.crc32(r["key"].encode()) % 3 for r in rows}
    assert {r.key["id"]: r.partition for r in placed} == where
    assert len(set(where.values())) == 3

    # the registered type grows a field the rule does not write: the next outputs'
    # bodies were written with a narrower schema, so they are encoded from their text
    from pyspark.sql import types as T

    recorded = T.StructType.fromJson(json.loads(staging.topic_types(topic).value))
    wider = T.StructType([*recorded.fields, T.StructField("note", T.StringType())])
    staging.record_types({topic: TopicTypes(key=None, value=wider.json())})
    append_events(raw, [_order(i) for i in range(40, 50)])
    assert runner.run_pass().outputs == {topic: 10}
    status, _ = deliver(lake, topic, kafka, reg)
    assert status.delivered_offset == 49
    assert encoded.records == 10  # the values; the keys' schema did not change
    last = _decoded(broker, registry, topic, 50)[40:]
    assert sorted(v["id"] for _, v in last) == list(range(40, 50))
    assert all(v["note"] is None for _, v in last)


def test_a_staging_pool_from_before_gets_the_column_and_its_rows_are_encoded(
    lake: Lake, broker, registry, monkeypatch
) -> None:
    from engine.deliver.staging_reader import StagingReader
    from tests.integration.test_to_kafka import invoice, invoice_types

    topic = unique("Older")
    where = lake.pool_location("Old")
    where.make_dirs()
    DeltaTable.create(
        where.uri,
        schema=TABLE_SCHEMA,
        name="Old",
        description=legacy_description("staging", {topic: invoice_types()}),
    )
    records = [invoice(i) for i in range(5)]
    kafka_structs = [
        {"topic": topic, "partition": 0, "offset": i, "timestamp": None} for i in range(5)
    ]
    old_rows = record_rows(
        kafka_structs,
        [json.dumps(k) for k, _ in records],
        [json.dumps(v) for _, v in records],
    )
    seqnos = pa.array(range(5), pa.int64())
    delta.commit_arrow(
        delta.open_table(where),
        old_rows.add_column(0, pa.field("seqno", pa.int64(), nullable=False), seqnos),
        app_transactions={"zync.seqno": 4},
    )
    assert "avro" not in delta.open_table(where).schema().to_arrow().names

    pool = lake.open_pool("Old")
    assert pool.row_schema.names[-1] == "avro"
    # the column, then the topic types moved out of the description into type files
    upgrades = [h.get("zync.upgrade") for h in pool.table.history(3)]
    assert upgrades[:3] == ["type-files", None, "staged-avro"]
    assert lake.open_pool("Old").version == pool.version  # once

    stage(pool, topic, [invoice(5)])  # a row after the upgrade, its column NULL
    changes = StagingReader(pool, topic, batch_records=100).changes(1, pool.version)
    assert sorted(changes.column("offset").to_pylist()) == list(range(6))
    assert changes.column("avro").null_count == 6

    encoded = _Encoded(monkeypatch)
    kafka, reg = profiles(broker, registry)
    status, _ = deliver(lake, topic, kafka, reg, pool="Old")
    assert status.delivered_offset == 5
    assert encoded.records == 12  # keys and values, from their JSON text
    got = _decoded(broker, registry, topic, 6)
    assert [v for _, v in got] == [invoice(i)[1] for i in range(6)]


def test_the_codec_ships_only_matching_bodies() -> None:
    from pyspark.sql import types as T

    from engine.deliver.encode import StagedBodies

    codec = PartCodec(Format.AVRO, T.StructType([T.StructField("a", T.LongType())]), "v")
    assert codec.avro is not None
    codec.schema_id = 9
    texts = pa.chunked_array([['{"a":1}', None, '{"a":3}']])
    fingerprint = codec.avro.fingerprint
    good = StagedBodies(
        pa.chunked_array([[fingerprint, fingerprint, fingerprint]]),
        pa.chunked_array([[b"staged-1", None, b"staged-3"]], pa.binary()),
    )
    header = b"\x00\x00\x00\x00\x09"
    shipped = [header + b"staged-1", None, header + b"staged-3"]
    assert codec.ships(good)
    assert codec.shipped(good) == shipped  # read without texts: NULL is a tombstone
    assert codec.shipped(good, texts) == shipped
    # with the texts, a body missing where a text is not NULL is refused
    holed = StagedBodies(good.schemas, pa.chunked_array([[b"staged-1", None, None]], pa.binary()))
    assert codec.shipped(holed, texts) is None
    # another fingerprint, or none (a part the ETL did not encode): encoded from the text
    for schemas in (["other"] * 3, [fingerprint, None, fingerprint]):
        staged = StagedBodies(pa.chunked_array([schemas], pa.string()), good.bodies)
        assert not codec.ships(staged)
        assert codec.shipped(staged, texts) is None
    assert not PartCodec(Format.JSON, None, "v").ships(good)


def test_rules_of_different_types_write_bodies_in_the_topics_merged_type(
    spark, lake: Lake, broker, registry, tmp_path: Path, monkeypatch
) -> None:
    """The invoice scenario: rules write NewInvoices with values of different types; every
    body is written with the merged, recorded type, so to-kafka encodes nothing, and a
    consumer reads the fields a rule lacks as NULL."""
    from tests.integration.test_etl_support import DEMO, demo_batch

    topic = unique("NewInvoices")
    text = (DEMO / "etl.yaml").read_text().replace("NewInvoices", topic)
    (tmp_path / "etl.yaml").write_text(text.replace("InvoiceChanges", unique("Changes")))
    raw = lake.create_pool("Raw", "raw")
    lake.create_pool("Staging", "staging")
    runner = EtlRunner(load_config(tmp_path / "etl.yaml"), lake, spark)
    for n in (1, 2, 3, 4):
        append_events(raw, demo_batch(n))
        assert runner.run_pass().committed

    staging = lake.open_pool("Staging")
    staged = staging.dataset().to_table(
        columns=["kafka", "key", "value", "avro"],
        filter=pc.field("marker").is_null() & (pc.field("kafka", "topic") == topic),
    ).to_pylist()
    staged.sort(key=lambda r: r["kafka"]["offset"])
    _, value_type = staging.spark_types(topic)
    fingerprint = AvroPart(value_type, "value").fingerprint
    assert {r["avro"]["value_schema"] for r in staged} == {fingerprint}
    assert len({tuple(sorted(json.loads(r["value"]))) for r in staged if r["value"]}) >= 2

    encoded = _Encoded(monkeypatch)
    kafka, reg = profiles(broker, registry)
    status, _ = deliver(lake, topic, kafka, reg)
    assert status.delivered_offset == len(staged) - 1
    assert encoded.records == 0
    fields = value_type.names
    expected = [
        (
            json.loads(r["key"]),
            None if r["value"] is None else {f: json.loads(r["value"]).get(f) for f in fields},
        )
        for r in staged
    ]
    assert _decoded(broker, registry, topic, len(staged)) == expected


def test_conform_carries_a_rules_values_into_the_merged_type(spark) -> None:
    from pyspark.sql import types as T

    from engine.etl.typed_records import conform_sql
    from engine.sparktypes import merge_spark_types

    narrow = T.StructType(
        [
            T.StructField("id", T.IntegerType(), False),
            T.StructField("lines", T.ArrayType(T.StructType([T.StructField("n", T.ShortType())]))),
            T.StructField("by", T.MapType(T.StringType(), T.IntegerType())),
        ]
    )
    wide = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("lines", T.ArrayType(T.StructType([T.StructField("sku", T.StringType())]))),
            T.StructField("by", T.MapType(T.StringType(), T.DoubleType())),
            T.StructField("note", T.StringType()),
        ]
    )
    merged = merge_spark_types(narrow, wide)
    expr = conform_sql("v", narrow, merged)
    assert expr is not None
    row = spark.sql(
        f"SELECT {expr} AS c FROM (SELECT named_struct('id', 7, 'lines', "
        "array(named_struct('n', CAST(2 AS SMALLINT))), 'by', map('a', 3)) AS v)"
    ).first()
    assert row.c.asDict(recursive=True) == {
        "id": 7, "lines": [{"n": 2, "sku": None}], "by": {"a": 3.0}, "note": None
    }
    # a float read back from its JSON text as a double is not the float made double
    floats = T.StructType([T.StructField("x", T.FloatType())])
    assert conform_sql("v", floats, merge_spark_types(floats, T.StructType(
        [T.StructField("x", T.DoubleType())]))) is None
