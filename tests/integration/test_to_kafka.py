"""to-kafka: staging outputs delivered to a real broker, read back read_committed.

Also home of the helpers the other to-kafka tests share (``stage``, ``read_topic``...):
staging rows are written the way the ETL writes them (contiguous offsets per output
topic, key/value JSON text, the topic's Spark types in the pool's metadata).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

from engine.lake.pool_record import ROW_SCHEMA
from engine.lake.pools import Lake, Pool
from engine.lake.topic_types import TopicTypes

pytestmark = [pytest.mark.integration]


# ----------------------------------------------------------------------------- helpers


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def invoice_types() -> TopicTypes:
    from pyspark.sql import types as T

    key = T.StructType([T.StructField("ID", T.LongType())])
    value = T.StructType(
        [
            T.StructField("ID", T.LongType()),
            T.StructField("customer", T.StringType()),
            T.StructField("amount", T.DoubleType()),
            T.StructField("tags", T.ArrayType(T.StringType())),
        ]
    )
    return TopicTypes(key=key.json(), value=value.json())


def invoice(offset: int, keys: int = 7) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``offset``-th staged record of a test topic: (key, value)."""
    key = {"ID": offset % keys}
    value = {
        "ID": offset % keys,
        "customer": f"customer {offset}",
        "amount": offset * 1.25,
        "tags": ["a", f"t{offset % 3}"],
    }
    return key, value


def staging_pool(lake: Lake, name: str = "Staging") -> Pool:
    return lake.create_pool(name, "staging", exist_ok=True)


def staged_count(pool: Pool, topic: str) -> int:
    """How many outputs of ``topic`` the pool holds (the next output offset)."""
    import pyarrow.dataset as ds

    pool.refresh()
    table = pool.table.to_pyarrow_dataset().to_table(
        columns=["seqno"],
        filter=(ds.field("kafka", "topic") == topic) & ds.field("marker").is_null(),
    )
    return table.num_rows


def stage(
    pool: Pool,
    topic: str,
    records: Sequence[tuple[Any, Any]],
    *,
    types: TopicTypes | None = None,
) -> int:
    """Commit ``records`` ((key, value) JSON-able; value None = tombstone) as the next
    outputs of ``topic``, in one staging commit; returns the new version."""
    if types is not None:
        pool.refresh()
        if pool.topic_types(topic) != types:
            pool.record_types({topic: types})
    first = staged_count(pool, topic)
    n = len(records)
    rows = pa.table(
        {
            "kafka": pa.array(
                [
                    {"topic": topic, "partition": 0, "offset": first + i, "timestamp": None}
                    for i in range(n)
                ],
                ROW_SCHEMA.field("kafka").type,
            ),
            "key": pa.array(
                [None if k is None else json.dumps(k, separators=(",", ":")) for k, _ in records],
                pa.string(),
            ),
            "value": pa.array(
                [None if v is None else json.dumps(v, separators=(",", ":")) for _, v in records],
                pa.string(),
            ),
            "deadletter": pa.nulls(n, ROW_SCHEMA.field("deadletter").type),
            "marker": pa.nulls(n, ROW_SCHEMA.field("marker").type),
        },
        schema=ROW_SCHEMA,
    )
    return pool.commit_rows(rows, expect_version=pool.version)


def stage_many(
    pool: Pool,
    topic: str,
    count: int,
    *,
    per_commit: int,
    types: TopicTypes | None = None,
    record: Callable[[int], tuple[Any, Any]] = invoice,
) -> None:
    """Stage ``count`` more records ``record(offset)`` in commits of ``per_commit``."""
    done = 0
    while done < count:
        n = min(per_commit, count - done)
        start = staged_count(pool, topic)
        stage(pool, topic, [record(start + i) for i in range(n)], types=types)
        done += n


@dataclass(frozen=True)
class Received:
    partition: int
    offset: int
    key: Any
    value: Any
    headers: dict[str, str]

    @property
    def anchor(self) -> int | None:
        """The pool offset in the headers (jdbc: only anchors carry one)."""
        raw = self.headers.get("zync.offset")
        return None if raw is None else int(raw)

    @property
    def pool_offset(self) -> int:
        """The pool offset of an ``invoice()`` record, read from its value."""
        return int(self.value["customer"].split()[-1])


def numbered(records: list[Received]) -> list[int | None]:
    """Pool offsets of one partition's records as a consumer derives them from the
    anchors (the records after an anchor follow it one by one)."""
    out: list[int | None] = []
    current: int | None = None
    for r in records:
        current = r.anchor if r.anchor is not None else (None if current is None else current + 1)
        out.append(current)
    return out


def read_topic(
    kafka: Any,
    topic: str,
    *,
    registry: Any = None,
    fmt: str = "avro",
    expect: int | None = None,
    timeout: float = 30.0,
) -> list[Received]:
    """Every record of ``topic`` (all partitions, read_committed), decoded; waits for
    ``expect`` records, else reads each partition to its end (its last committed record
    when the read reaches it)."""
    from confluent_kafka import TopicPartition

    from engine.kafka.clients import TopicNotFound, consumer, topic_partitions
    from engine.kafka.codecs.decoder import RecordDecoder
    from engine.kafka.codecs.formats import Format
    from engine.kafka.registry_client import RegistrySchemas

    lookup = RegistrySchemas(registry) if registry is not None else None
    decoder = RecordDecoder(Format.parse(fmt), lookup)
    reader = consumer(kafka, extra={"enable.partition.eof": True})
    out: list[Received] = []
    deadline = time.monotonic() + timeout
    try:
        while True:  # the topic may not exist yet
            try:
                parts = topic_partitions(kafka, topic)
                break
            except TopicNotFound:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        reader.assign([TopicPartition(topic, p, 0) for p in parts])
        open_parts = set(parts)
        while time.monotonic() < deadline:
            batch = reader.consume(10_000, 0.2)
            for m in batch:
                error = m.error()
                if error is not None:
                    if error.code() == error._PARTITION_EOF:
                        open_parts.discard(m.partition())
                    continue
                headers = {k: v.decode() for k, v in (m.headers() or []) if v is not None}
                out.append(
                    Received(
                        m.partition(),
                        m.offset(),
                        _decode(decoder, m.key()),
                        _decode(decoder, m.value()),
                        headers,
                    )
                )
            if len(out) >= expect if expect is not None else not open_parts:
                break
    finally:
        reader.close()
    return out


def _decode(decoder: Any, data: bytes | None) -> Any:
    from engine.kafka.codecs.errors import DecodeError

    try:
        return decoder.decode(data)
    except DecodeError:
        return data  # someone else's record, in another format


def profiles(broker: Any, registry: Any = None) -> tuple[Any, Any]:
    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile

    kafka = KafkaProfile(bootstrap_servers=broker.address)
    return kafka, (RegistryProfile(url=registry.url) if registry is not None else None)


def deliver(
    lake: Lake,
    topic: str,
    kafka: Any,
    registry: Any = None,
    pool: str = "Staging",
    envelope: str = "jdbc",
    staged: str | None = None,
    **options: Any,
) -> Any:
    from engine.deliver.delivery_options import DeliveryOptions
    from engine.deliver.loop import Delivery

    events: list[Any] = []
    chosen = DeliveryOptions(kafka=kafka, registry=registry, **options)
    delivery = Delivery(lake, pool, topic, chosen, envelope=envelope, staged=staged)
    status = delivery.run(on_event=events.append)
    return status, events


# ----------------------------------------------------------------------------- tests


def test_jdbc_avro_in_order_with_tombstones_and_registered_schemas(lake, broker, registry) -> None:
    kafka, reg = profiles(broker, registry)
    topic = unique("NewInvoices")
    pool = staging_pool(lake)
    first = [invoice(i) for i in range(150)]
    stage(pool, topic, first[:100], types=invoice_types())
    stage(pool, topic, first[100:], types=invoice_types())
    tombstone = ({"ID": 3}, None)
    stage(pool, topic, [tombstone, invoice(151)])

    status, events = deliver(lake, topic, kafka, reg)
    assert status.delivered_offset == 151
    assert status.records_delivered == 152
    assert status.lag == 0
    assert any(e.kind == "delivered" for e in events)

    got = read_topic(kafka, topic, registry=reg, expect=152)
    assert numbered(got) == list(range(152))
    assert got[0].anchor == 0
    assert got[-1].anchor == 151
    assert "zync.last" in got[-1].headers  # it closed its transaction
    assert [(r.key, r.value) for r in got] == first + [tombstone, invoice(151)]
    assert got[150].value is None  # a JDBC sink deletes on it

    from engine.kafka.registry_client import RegistrySchemas

    subjects = RegistrySchemas(reg).subjects()
    assert f"{topic}-key" in subjects
    assert f"{topic}-value" in subjects

    # nothing new: a second run produces nothing and keeps the position
    status, events = deliver(lake, topic, kafka, reg)
    assert status.records_delivered == 0
    assert status.delivered_offset == 151
    assert "after pool offset 151" in " ".join(e.message for e in events)


def test_partitioned_by_key_keeps_order_per_key(lake, broker) -> None:
    kafka, _ = profiles(broker)
    topic = unique("ByKey")
    pool = staging_pool(lake)
    stage_many(pool, topic, 600, per_commit=200)
    status, _ = deliver(lake, topic, kafka, format="json", partitions=3)
    assert status.partitions == 3
    got = read_topic(kafka, topic, fmt="json", expect=600)
    assert sorted(r.pool_offset for r in got) == list(range(600))
    partition_of: dict[int, int] = {}
    by_key: dict[int, list[int]] = {}
    for r in got:
        key = r.key["ID"]
        assert partition_of.setdefault(key, r.partition) == r.partition  # same key, same partition
        by_key.setdefault(key, []).append(r.pool_offset)
    assert len(set(partition_of.values())) > 1
    for offsets in by_key.values():
        assert offsets == sorted(offsets)
    for r in got:
        assert (r.key, r.value) == invoice(r.pool_offset)


def test_connect_json_and_preexisting_records_without_header(lake, broker) -> None:
    from engine.kafka.clients import ensure_topic, producer

    kafka, _ = profiles(broker)
    topic = unique("Connect")
    ensure_topic(kafka, topic)
    foreign = producer(kafka)
    for i in range(5):
        foreign.produce(topic, b'{"foreign": %d}' % i)
    foreign.flush(10)

    pool = staging_pool(lake)
    stage_many(pool, topic, 20, per_commit=10, types=invoice_types())
    status, _ = deliver(lake, topic, kafka, format="connect-json")
    assert status.records_delivered == 20
    got = read_topic(kafka, topic, fmt="connect-json", expect=25)
    ours = [r for r in got if isinstance(r.value, dict)]
    assert [r.pool_offset for r in ours] == list(range(20))
    assert [(r.key, r.value) for r in ours] == [invoice(i) for i in range(20)]

    # foreign records after ours do not hide our position
    for i in range(3):
        foreign.produce(topic, b'{"foreign": %d}' % (10 + i))
    foreign.flush(10)
    stage_many(pool, topic, 5, per_commit=5, types=invoice_types())
    status, _ = deliver(lake, topic, kafka, format="connect-json")
    assert status.records_delivered == 5
    got = read_topic(kafka, topic, fmt="connect-json", expect=33)
    assert [r.pool_offset for r in got if isinstance(r.value, dict)] == list(range(25))


def test_continuous_delivers_new_commits_quickly_and_refuses_a_second_delivery(
    lake, broker
) -> None:
    from engine.deliver.delivery_options import DeliveryOptions
    from engine.deliver.errors import DeliveryBusy
    from engine.deliver.loop import Delivery

    kafka, _ = profiles(broker)
    topic = unique("Live")
    pool = staging_pool(lake)
    stage_many(pool, topic, 10, per_commit=10)
    stop = threading.Event()
    delivery = Delivery(lake, "Staging", topic, DeliveryOptions(kafka=kafka, format="json"))
    events: list[Any] = []
    thread = threading.Thread(
        target=delivery.run, args=(stop, events.append), kwargs={"continuous": True}
    )
    thread.start()
    try:
        _wait(lambda: delivery.status().delivered_offset == 9, 30, "the first 10 records")
        # caught up: idle once the loop has looked at the pool again
        _wait(lambda: delivery.status().state == "idle", 30, "idle after the first records")

        second = Delivery(lake, "Staging", topic, DeliveryOptions(kafka=kafka, format="json"))
        with pytest.raises(DeliveryBusy, match="another zync to-kafka is delivering"):
            second.run()

        committed = time.monotonic()
        stage_many(pool, topic, 5, per_commit=5)
        _wait(lambda: delivery.status().delivered_offset == 14, 10, "the new commit")
        assert time.monotonic() - committed < 2.0
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert delivery.status().state == "stopped"
    got = read_topic(kafka, topic, fmt="json", expect=15)
    assert numbered(got) == list(range(15))
    assert [r.pool_offset for r in got] == list(range(15))


@pytest.mark.spark
def test_shaper_reshapes_records(lake, broker, registry, spark, tmp_path) -> None:
    kafka, reg = profiles(broker, registry)
    topic = unique("Shaped")
    pool = staging_pool(lake)
    stage_many(pool, topic, 30, per_commit=15, types=invoice_types())
    shaper = tmp_path / "shape.sql"
    shaper.write_text(
        "SELECT kafka, key, named_struct('ID', value.ID, 'who', upper(value.customer)) AS value\n"
        "FROM records WHERE value.ID <> 2"
    )
    status, _ = deliver(lake, topic, kafka, reg, shaper=shaper, spark=lambda: spark)
    got = read_topic(kafka, topic, registry=reg)
    wanted = [i for i in range(30) if invoice(i)[0]["ID"] != 2]
    assert [r.key["ID"] for r in got] == [invoice(i)[0]["ID"] for i in wanted]
    assert got[0].value == {"ID": 0, "who": "CUSTOMER 0"}
    assert status.delivered_offset == 29


def test_cli_to_kafka(lake, broker, registry, monkeypatch, tmp_path) -> None:
    from typer.testing import CliRunner

    from zync_tui.commands.deliver import make_app

    kafka, reg = profiles(broker, registry)
    topic = unique("Cli")
    pool = staging_pool(lake)
    stage_many(pool, topic, 12, per_commit=6, types=invoice_types())
    monkeypatch.setenv("ZYNC_KAFKA_BOOTSTRAP_SERVERS", broker.address)
    monkeypatch.setenv("ZYNC_REGISTRY_URL", registry.url)
    result = CliRunner().invoke(
        make_app(), ["to-kafka", "-t", topic, "-p", "Staging", "--lake", str(lake.root)]
    )
    assert result.exit_code == 0, result.output
    assert "delivered pool offsets 0..11" in result.output
    assert [(r.key, r.value) for r in read_topic(kafka, topic, registry=reg, expect=12)] == [
        invoice(i) for i in range(12)
    ]
    result = CliRunner().invoke(
        make_app(), ["to-kafka", "-t", topic, "-p", "Nope", "--lake", str(lake.root)]
    )
    assert result.exit_code == 1
    assert "no pool 'Nope'" in result.output

    # an ETL configuration: each of its outputs
    second = unique("Cli2")
    stage_many(pool, second, 7, per_commit=7, types=invoice_types())
    stage_many(pool, topic, 3, per_commit=3, types=invoice_types())
    config = tmp_path / "etl.yaml"
    config.write_text(
        "name: cli\n"
        "inputs: [{topic: In, pool: Raw}]\n"
        f"outputs: [{{topic: {topic}, pool: Staging}}, {{topic: {second}, pool: Staging}}]\n"
        "transforms:\n"
        f"  - {{type: stateless, in: In, out: {second}, sql: 'SELECT in.key AS key, in.value AS value'}}\n"
    )
    result = CliRunner().invoke(make_app(), ["to-kafka", str(config), "--lake", str(lake.root)])
    assert result.exit_code == 0, result.output
    assert f"{topic}: delivered pool offsets 12..14" in result.output
    assert f"{second}: delivered pool offsets 0..6" in result.output
    assert len(read_topic(kafka, second, registry=reg, expect=7)) == 7


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_fast_avro_encoding_matches_fastavro_and_refuses_unknown_fields() -> None:
    import random

    from pyspark.sql import types as T

    from engine.deliver.encode import AvroPart
    from engine.deliver.errors import TypeMismatch

    value_type = T.StructType(
        [
            T.StructField("ID", T.LongType()),
            T.StructField("n", T.IntegerType()),
            T.StructField("f", T.FloatType()),
            T.StructField("ok", T.BooleanType()),
            T.StructField("s", T.StringType()),
            T.StructField(
                "nest",
                T.StructType(
                    [
                        T.StructField("x", T.LongType()),
                        T.StructField("l", T.ArrayType(T.StringType())),
                    ]
                ),
            ),
            T.StructField("arr", T.ArrayType(T.StructType([T.StructField("q", T.LongType())]))),
        ]
    )
    rng = random.Random(7)
    choices: dict[str, list[Any]] = {
        "n": [-(2**31), 0, 2**31 - 1],
        "f": [1.5, 0.1, -3.25],
        "ok": [True, False],
        "s": ["", "é✓ 漢字", 'a"b\\c', "x" * 300],
        "nest": [None, {"x": 5}, {"x": None, "l": ["a", None]}, {"l": []}],
        "arr": [None, [], [{"q": 1}, {"q": None}, None]],
    }
    texts = []
    for i in range(500):
        value = {"ID": i, **{k: rng.choice(v) for k, v in choices.items() if rng.random() < 0.8}}
        texts.append(json.dumps(value, ensure_ascii=rng.random() < 0.5))
    part = AvroPart(value_type, "V")
    with_nulls = [*texts[:100], None, *texts[100:]]
    assert part.encode(with_nulls, b"H") == [
        None if body is None else b"H" + body
        for body in [*part._fastavro_bodies(texts[:100]), None, *part._fastavro_bodies(texts[100:])]
    ]
    assert part._fast is True  # the fast path was taken and checked
    with pytest.raises(TypeMismatch, match="lost in Avro"):
        part.encode([*texts[:100], '{"ID": 1, "unknown": 2}'])
    with pytest.raises(TypeMismatch, match="'unknown'"):
        part._fastavro_bodies(['{"ID": 1, "nest": {"unknown": 2}}'])


def test_fields_missing_from_the_recorded_type_are_typed_from_the_data(
    lake, broker, registry
) -> None:
    from pyspark.sql import types as T

    kafka, reg = profiles(broker, registry)
    topic = unique("LateTypes")
    pool = staging_pool(lake)
    narrow = TopicTypes(
        key=T.StructType([T.StructField("ID", T.LongType())]).json(),
        value=T.StructType([T.StructField("ID", T.LongType())]).json(),
    )
    stage(pool, topic, [({"ID": i}, {"ID": i, "status": f"s{i}"}) for i in range(80)], types=narrow)
    status, events = deliver(lake, topic, kafka, reg)
    assert status.records_delivered == 80
    assert any(e.kind == "types" and "status" in e.message for e in events)
    got = read_topic(kafka, topic, registry=reg, expect=80)
    assert [r.value for r in got] == [{"ID": i, "status": f"s{i}"} for i in range(80)]


def test_spark_master_option_reaches_the_shaper(lake, broker, tmp_path) -> None:
    """`to-kafka --shaper --spark-master URL` runs the shaper there: an unreachable master
    is one line naming it (the flag wins over $ZYNC_SPARK_MASTER)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    topic = unique("Master")
    pool = staging_pool(lake)
    stage_many(pool, topic, 3, per_commit=3, types=invoice_types())
    shaper = tmp_path / "shaper.sql"
    shaper.write_text("SELECT kafka, key, value FROM records\n")
    env = dict(
        os.environ,
        ZYNC_HOME=str(tmp_path / "home"),
        ZYNC_LAKE=str(lake.root),
        ZYNC_SPARK_MASTER="spark://127.0.0.1:2",
        ZYNC_KAFKA_BOOTSTRAP_SERVERS=broker.address,
    )
    argv = [sys.executable, "-m", "zync_tui.commands.deliver", "to-kafka", "-t", topic,
            "-p", "Staging", "--format", "json", "--shaper", str(shaper),
            "--spark-master", "spark://127.0.0.1:1"]
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 1, out
    assert "cannot reach the Spark master spark://127.0.0.1:1" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
